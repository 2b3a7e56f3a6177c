//! The zone rules the soak judges new NoExecute taints by (docs/upstream.md, "Zones"): from the
//! Ready conditions in the store, which zones forbid new taints (every zone fully disrupted, or a
//! small zone partially disrupted: rate 0) and since when.
//!
//! Stricter: upstream's `monitorNodeHealth` is a periodic batch, so nodes that die together are
//! judged together; the daemon judges each node at its own deadline. At a new NoExecute taint the
//! checker also takes the batched view: every node whose kubelet is silent
//! and whose grace period ends within one monitor period of the write counts as not ready (the
//! batch that saw the tainted node Unknown could have seen it Unknown too), and by default
//! (beyond upstream, `Limits::early_suspects`) every kubelet silent for more than twice its
//! Lease renew interval. Each node is seen as surely Ready, surely not ready, or either (a
//! store change within the zone allowance, a silence near a threshold); the taint is a
//! violation when every view forbids it. The same views excuse `untaint-while-dead` in master
//! disruption mode.

use std::collections::BTreeMap;
use std::time::Duration;

use super::invariants::{Checker, NodeTruth};
use node_lifecycled::time::Time;

/// How a node may look to a daemon deciding about a write that landed at a given time.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(super) enum Seen {
    Ready,
    NotReady,
    /// Either way (a store change or a silence too close to the write to tell).
    Either,
}

/// One zone in the batched view.
#[derive(Clone, Debug, Default)]
pub(super) struct ZoneView {
    pub(super) ready: usize,
    pub(super) not_ready: usize,
    pub(super) either: usize,
    /// Of `not_ready`: counted only for their kubelet's silence (the store says Ready, or
    /// changed too recently), with the longest and shortest silence.
    pub(super) suspects: usize,
    pub(super) silences: Option<(Duration, Duration)>,
}

impl ZoneView {
    fn total(&self) -> usize {
        self.ready + self.not_ready + self.either
    }
}

/// `t - d`, no earlier than the epoch.
pub(super) fn before(t: Time, d: Duration) -> Time {
    let ms = u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
    Time::from_unix_millis(t.as_unix_millis().saturating_sub(ms))
}

impl Checker {
    pub(super) fn set_ready(&mut self, node: &str, status: &str, at: Time) {
        if let Some(n) = self.nodes.get_mut(node) {
            if n.ready != status {
                n.ready_since = at;
            }
            n.ready = status.to_string();
        }
        self.update_zones(at);
        self.update_brake(at);
    }

    /// How long `n`'s kubelet has been silent at `at` (since its last heartbeat), `None`
    /// while it is alive (ground truth).
    pub(super) fn silence(n: &NodeTruth, at: Time) -> Option<Duration> {
        let alive_at = if n.kubelet_since <= at {
            n.alive
        } else {
            !n.alive
        };
        if alive_at {
            return None;
        }
        Some(at.since(n.evidence.back().copied().unwrap_or(Time::ZERO)))
    }

    /// The silence beyond which a kubelet counts as not ready in the batched view: the grace
    /// period less one monitor period (upstream's batch), or the early rule's, the shorter.
    fn suspect_threshold(&self) -> Duration {
        let batch = self.limits.grace.saturating_sub(self.limits.monitor_period);
        self.limits.early_suspects.map_or(batch, |e| e.min(batch))
    }

    /// The ground-truth allowance for a write of `daemon` landing at `at`.
    pub(super) fn suspect_allowance(&self, daemon: &str, at: Time) -> Duration {
        self.limits.suspect_allowance
            + self.waited(
                daemon,
                before(at, Duration::from_secs(2)).since(Time::ZERO),
                at,
            )
    }

    /// `node` as a daemon may have seen it when deciding a write landing at `at`; `tainted`
    /// is the node the write taints (the daemon judged it not ready). Also the silence, when
    /// the kubelet's silence alone makes it not ready.
    fn seen(
        &self,
        name: &str,
        n: &NodeTruth,
        at: Time,
        allowance: Duration,
        tainted: Option<&str>,
    ) -> (Seen, Option<Duration>) {
        if tainted == Some(name) {
            return (Seen::NotReady, None);
        }
        let threshold = self.suspect_threshold();
        let silence = Self::silence(n, at);
        let store_recent = at.since(n.ready_since) < self.limits.zone_allowance;
        let store_ready = n.ready == "True";
        match silence {
            Some(s) if s > threshold + allowance => {
                let counted = store_ready || store_recent;
                (Seen::NotReady, counted.then_some(s))
            }
            _ if store_recent => (Seen::Either, None),
            _ if !store_ready => (Seen::NotReady, None),
            Some(s) if s + self.limits.evidence_stamp_slack > threshold => (Seen::Either, None),
            _ => (Seen::Ready, None),
        }
    }

    /// Every zone in the batched view at `at`.
    pub(super) fn batched_view(
        &self,
        at: Time,
        allowance: Duration,
        tainted: Option<&str>,
    ) -> BTreeMap<String, ZoneView> {
        let mut zones: BTreeMap<String, ZoneView> = BTreeMap::new();
        for (name, n) in &self.nodes {
            let z = zones.entry(n.zone.clone()).or_default();
            match self.seen(name, n, at, allowance, tainted) {
                (Seen::Ready, _) => z.ready += 1,
                (Seen::Either, _) => z.either += 1,
                (Seen::NotReady, suspect) => {
                    z.not_ready += 1;
                    if let Some(s) = suspect {
                        z.suspects += 1;
                        z.silences = Some(match z.silences {
                            Some((lo, hi)) => (lo.min(s), hi.max(s)),
                            None => (s, s),
                        });
                    }
                }
            }
        }
        zones
    }

    /// Why every view of `zone` forbids a new NoExecute taint, if it does.
    fn forbidden_in_every_view(
        &self,
        zone: &str,
        zones: &BTreeMap<String, ZoneView>,
    ) -> Option<&'static str> {
        let z = zones.get(zone)?;
        let total = z.total();
        // Master disruption mode needs every other zone fully disrupted too; a zone with a node
        // that may be Ready can be seen not fully disrupted.
        let others_may_be_up = zones
            .iter()
            .any(|(name, o)| name != zone && o.ready + o.either > 0);
        let mut why = None;
        for not_ready in z.not_ready..=z.not_ready + z.either {
            let full = not_ready == total && not_ready > 0;
            let partial = !full
                && not_ready > 2
                && not_ready as f64 / total as f64 >= self.limits.unhealthy_zone_threshold;
            if full && !others_may_be_up {
                why = Some("every zone is fully disrupted");
            } else if partial && total <= self.limits.large_cluster_size_threshold {
                why = why.or(Some("its zone is partially disrupted (rate 0)"));
            } else {
                return None;
            }
        }
        why
    }

    /// Whether some view has every zone fully disrupted (master disruption mode).
    pub(super) fn all_full_in_some_view(&self, zones: &BTreeMap<String, ZoneView>) -> bool {
        !zones.is_empty()
            && zones
                .values()
                .all(|z| z.ready == 0 && z.not_ready + z.either > 0)
    }

    /// Per zone: (Ready, not Ready) nodes in the store.
    pub(super) fn store_counts(&self) -> BTreeMap<String, (usize, usize)> {
        let mut counts: BTreeMap<String, (usize, usize)> = BTreeMap::new();
        for n in self.nodes.values() {
            let c = counts.entry(n.zone.clone()).or_default();
            if n.ready == "True" {
                c.0 += 1;
            } else {
                c.1 += 1;
            }
        }
        counts
    }

    /// `zone` partially or fully disrupted at `at` counting only the nodes surely not ready
    /// (Unknown in the store and silent, both for longer than the zone allowance): the store
    /// lags a recovery (a kubelet back is seen by the daemon from its Lease before its Ready
    /// post lands). `Some((surely not ready, nodes))` when disrupted.
    pub(super) fn surely_disrupted(&self, zone: &str, at: Time) -> Option<(usize, usize)> {
        let allowance = self.limits.zone_allowance;
        let (mut surely, mut total) = (0usize, 0usize);
        for n in self.nodes.values().filter(|n| n.zone == zone) {
            total += 1;
            let silent_long = !n.alive && at.since(n.kubelet_since) > allowance;
            if n.ready != "True" && at.since(n.ready_since) > allowance && silent_long {
                surely += 1;
            }
        }
        let full = surely == total && total > 0;
        let partial =
            surely > 2 && surely as f64 / total as f64 >= self.limits.unhealthy_zone_threshold;
        (full || partial).then_some((surely, total))
    }

    /// (zone forbids new taints, every zone fully disrupted).
    fn zone_rules(&self) -> (BTreeMap<String, bool>, bool) {
        let counts = self.store_counts();
        let full = |&(ready, not_ready): &(usize, usize)| ready == 0 && not_ready > 0;
        let all_full = !counts.is_empty() && counts.values().all(full);
        let forbids = counts
            .iter()
            .map(|(zone, c)| {
                let (ready, not_ready) = *c;
                let total = ready + not_ready;
                let partial = !full(c)
                    && not_ready > 2
                    && not_ready as f64 / total as f64 >= self.limits.unhealthy_zone_threshold;
                let rate_zero = partial && total <= self.limits.large_cluster_size_threshold;
                (zone.to_string(), all_full || rate_zero)
            })
            .collect();
        (forbids, all_full)
    }

    pub(super) fn update_zones(&mut self, at: Time) {
        let (forbids, all_full) = self.zone_rules();
        self.refresh_holds(at);
        for (zone, forbid) in forbids {
            // A held domain forbids new taints too (`domains.rs`).
            let forbid = forbid || self.is_held(&zone);
            let since = self.forbidden_since.entry(zone.clone()).or_default();
            match (forbid, *since) {
                (true, None) => *since = Some(at),
                (false, Some(_)) => {
                    *since = None;
                    self.allowed_since.insert(zone, at);
                }
                _ => {}
            }
        }
        self.all_full_since = match (all_full, self.all_full_since) {
            (true, None) => Some(at),
            (true, since) => since,
            (false, Some(_)) => {
                self.all_full_exit = at;
                None
            }
            (false, None) => None,
        };
    }

    pub(super) fn check_taint(&mut self, daemon: &str, node: &str, at: Time) {
        self.obligations.taints_checked += 1;
        if !self.holds.is_empty() {
            // A hold runs out with time, not with a store change.
            self.update_zones(at);
        }
        let Some(zone) = self.nodes.get(node).map(|n| n.zone.clone()) else {
            return;
        };
        self.partitions.last_taint.insert(zone.clone(), at);
        let since = self.forbidden_since.get(&zone).copied().flatten();
        let by_store = since.filter(|&s| at.since(s) > self.limits.zone_allowance);
        let Some(since) = by_store else {
            return self.check_taint_batched(daemon, node, &zone, at);
        };
        if self.is_held(&zone) && self.all_full_since.is_none() {
            let full = self.full_since.get(&zone).copied().unwrap_or(since);
            return self.violation(
                at,
                "taint-in-held-domain",
                format!(
                    "{node} got a NoExecute taint although its domain {zone} is held \
                     (fully disrupted for {:.1}s, hold_max {:?})",
                    at.since(full).as_secs_f64(),
                    self.holds.get(&zone).copied().flatten()
                ),
            );
        }
        let why = if self.all_full_since.is_some() {
            "every zone is fully disrupted"
        } else {
            "its zone is partially disrupted (rate 0)"
        };
        self.violation(
            at,
            "taint-forbidden-by-zone",
            format!(
                "{node} got a NoExecute taint although {why} for {:.1}s",
                at.since(since).as_secs_f64()
            ),
        );
    }
}

impl Checker {
    /// `taint-forbidden-by-zone` as upstream's batched pass would judge the zones (see the
    /// module's documentation).
    fn check_taint_batched(&mut self, daemon: &str, node: &str, zone: &str, at: Time) {
        let allowance = self.suspect_allowance(daemon, at);
        let zones = self.batched_view(at, allowance, Some(node));
        let Some(why) = self.forbidden_in_every_view(zone, &zones) else {
            return;
        };
        let z = &zones[zone];
        let silent = match z.silences {
            Some((lo, hi)) => format!(
                ", {} of them only by their kubelet's silence ({:.1}–{:.1}s)",
                z.suspects,
                lo.as_secs_f64(),
                hi.as_secs_f64()
            ),
            None => String::new(),
        };
        let rule = if self.limits.early_suspects.is_some() {
            "batched view with early suspects"
        } else {
            "upstream's batched view"
        };
        self.violation(
            at,
            "taint-forbidden-by-zone",
            format!(
                "{node} got a NoExecute taint although {why} ({rule}: {zone} has {} of {} nodes \
                 not ready{silent}, {} either way)",
                z.not_ready,
                z.total(),
                z.either
            ),
        );
    }

    /// `untaint-while-dead`: `daemon` took the NoExecute taint off `node` at `at`.
    pub(super) fn check_untaint(&mut self, daemon: &str, node: &str, at: Time) {
        self.obligations.untaints_checked += 1;
        let Some(n) = self.nodes.get(node) else {
            return;
        };
        let allowance = self.suspect_allowance(daemon, at);
        let Some(silence) = Self::silence(n, at) else {
            return;
        };
        if silence <= self.limits.grace + allowance {
            return;
        }
        // The kubelet came back after the taint and died again: the untaint is that recovery,
        // seen late (a watch freeze held back its Ready post), as a running upstream's would
        // be seen; its verdict comes again a grace period after the daemon sees the post.
        if n.last_run
            .is_some_and(|(start, _)| n.evidence.iter().any(|&e| e > start))
        {
            return;
        }
        // Master disruption mode: in the store now or lately, or in some view.
        if self.all_full_since.is_some()
            || at.since(self.all_full_exit) <= self.limits.zone_allowance
        {
            return;
        }
        let zones = self.batched_view(at, allowance, None);
        if self.all_full_in_some_view(&zones) {
            return;
        }
        let ready = n.ready.clone();
        self.violation(
            at,
            "untaint-while-dead",
            format!(
                "{daemon} took the NoExecute taint off {node} although its kubelet has been \
                 silent for {:.1}s (grace {:.0}s, Ready={ready}) and not every zone is fully \
                 disrupted",
                silence.as_secs_f64(),
                self.limits.grace.as_secs_f64()
            ),
        );
    }
}
