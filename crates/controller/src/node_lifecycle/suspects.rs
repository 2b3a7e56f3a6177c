//! A zone seen whole: suspects.
//!
//! Upstream's `monitorNodeHealth` is a batch: every `node_monitor_period` it judges every node
//! at one instant, then sets the zones' rates (`handleDisruption`), and only then does its
//! tainting pass run. A zone whose nodes die together is therefore judged whole: partially
//! disrupted (a small cluster stops tainting, a large one slows to the secondary rate), or every
//! zone fully disrupted (nothing tainted). Here each node is judged at its own deadline, so the
//! first verdict of a correlated failure would find its zone still Normal and taint at once,
//! deleting the node's pods before the next verdicts, milliseconds later, stop the zone
//! (kubernetes#24200, #125824 are the failures the zone rules exist for).
//!
//! So before a zone's NoExecute decision (a taint from its queue, a legacy eviction, a fence)
//! the zone's nodes still counted Ready that are about to be judged count as **suspects**:
//! - a verdict in flight (its live Lease read or its status write);
//! - a deadline (`probe_time + grace`) within the next `node_monitor_period`: upstream's pass,
//!   running anywhere in that period, could see it Unknown at the same instant;
//! - beyond upstream (`early_suspects`, on by default): a kubelet that heartbeats through a
//!   Lease and has been silent for longer than twice its renew interval (a quarter of
//!   `leaseDurationSeconds`, as the kubelet renews). Kubelets renew at their own phases, so
//!   when part of a zone is cut off the deadlines spread over a renew interval, wider than the
//!   pass: upstream taints the first nodes before the zone counts as partially disrupted.
//!
//! The zone waits while counting its suspects as not ready would make its rules stricter: a
//! lower rate (Normal → partially disrupted, with any number of them short of all), every
//! zone fully disrupted, or (`full_disruption = "hold"`) the zone fully disrupted and held,
//! whatever its size and from Normal or partially disrupted. Each suspect either renews (and stops being one) or is judged by its
//! deadline, so the wait ends by itself. A single dead node in a healthy zone has no suspects
//! beside it: it is tainted at its deadline. A zone that goes fully dark beside healthy ones
//! waits until its nodes are judged, then is tainted at the normal rate (upstream presumes it
//! dead); counting all suspects at once would skip the partial disruption a pass may see on the
//! way, and a stalled watch, which makes live kubelets look silent, would then let a zone's
//! first verdict taint at once (soak seed 63).

use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;
use std::time::Duration;

use crate::decisions::Decision;
use crate::health::NodeHealth;
use crate::model::{ClusterStore, Name};
use crate::time::Time;
use crate::zones::{ZoneState, compute_zone_state};

use super::{NodeEntry, NodeLifecycle, Verdict};

/// How the zones would stand with their suspects counted not ready.
pub(super) struct SuspectView {
    /// Per zone: (size, ready less suspects).
    counts: BTreeMap<Name, (usize, usize)>,
    any_suspect: bool,
}

impl NodeLifecycle {
    /// Whether a counted-Ready node is a suspect at `now` (see the module doc).
    pub(super) fn is_suspect(
        &self,
        store: &ClusterStore,
        name: &str,
        e: &NodeEntry,
        now: Time,
    ) -> bool {
        self.suspect_from(store, name, e).is_some_and(|t| t <= now)
    }

    /// From when the node is a suspect, its state as it is (`None`: not by time alone). A node
    /// stays one from that instant until its state changes: `suspect_tally.rs` counts them by it.
    pub(super) fn suspect_from(
        &self,
        store: &ClusterStore,
        name: &str,
        e: &NodeEntry,
    ) -> Option<Time> {
        if e.busy.get().verdict != Verdict::Idle {
            return Some(Time::ZERO);
        }
        let node = store.node(name)?;
        let (monitor, startup) = self.settings.graces(node);
        let grace = NodeHealth::grace(node, monitor, startup);
        let lease_seconds = store.lease(name).and_then(|l| l.duration_seconds);
        Some(self.suspect_from_with(e, grace, lease_seconds))
    }

    /// [`Self::suspect_from`] of a node in the store that is not busy, with its grace and its
    /// Lease's `leaseDurationSeconds`.
    pub(super) fn suspect_from_with(
        &self,
        e: &NodeEntry,
        grace: Duration,
        lease_seconds: Option<u32>,
    ) -> Time {
        // Its deadline is within the next pass: `silent + node_monitor_period >= grace`, with
        // `silent` whole milliseconds since the probe time.
        let probe = e.health.probe_time();
        let by_deadline = match grace.checked_sub(self.settings.node_monitor_period) {
            Some(d) if !d.is_zero() => probe + Duration::from_millis(ceil_millis(d)),
            _ => Time::ZERO,
        };
        let Some(renew) = e
            .health
            .lease_renew()
            .filter(|_| self.settings.early_suspects)
        else {
            return by_deadline;
        };
        let Some(seconds) = lease_seconds else {
            return by_deadline;
        };
        // The kubelet renews at a quarter of the Lease's duration: silent for longer than two
        // renewals.
        let two_renewals = Duration::from_millis(u64::from(seconds) * 500);
        if two_renewals >= grace {
            return by_deadline;
        }
        let past = two_renewals + Duration::from_millis(1);
        // Silent by the probe time.
        let mut from = by_deadline.min(probe + past);
        // The probe time is when a renewal reached us: a stalled watch delivers renewals late
        // and a restart or a new leader starts from its registration, both of which make a
        // silent kubelet look fresh. The Lease's own renewTime, less the least lag seen from
        // this kubelet (clock skew and the quickest read), says how long it has really been
        // silent. Before any renewal was seen, the renewTime as it is, after a registration
        // only: a skew then makes a live node a suspect until its next renewal, which holds a
        // decision, never makes one.
        let by_lease = match e.lease_lag_ms {
            Some(lag) => {
                let heard = renew.as_unix_millis() as i64 + lag;
                let at = heard.saturating_add(past.as_millis() as i64);
                Some(Time::from_unix_millis(at.max(0) as u64))
            }
            None if e.health.probe_time() <= e.registered_at => Some(renew + past),
            None => None,
        };
        if let Some(at) = by_lease {
            from = from.min(at);
        }
        from
    }

    /// The zones' counts with their suspects taken off the Ready ones.
    pub(super) fn suspect_view(&self, store: &ClusterStore, now: Time) -> SuspectView {
        if self.tally.is_at(now) {
            // Kept as nodes change (`suspect_tally.rs`): no walk.
            self.tally_check(store, now);
            let mut any_suspect = false;
            let counts = self
                .zones
                .iter()
                .map(|(k, z)| {
                    let suspects = self.tally_zone_suspects(z);
                    any_suspect |= suspects > 0;
                    (
                        k.clone(),
                        (z.counts.size(), z.counts.ready().saturating_sub(suspects)),
                    )
                })
                .collect();
            return SuspectView {
                counts,
                any_suspect,
            };
        }
        let mut counts: BTreeMap<Name, (usize, usize)> = self
            .zones
            .iter()
            .map(|(k, z)| (k.clone(), (z.counts.size(), z.counts.ready())))
            .collect();
        let mut any_suspect = false;
        for (name, e) in self.nodes.iter() {
            if !e.registered || e.counted != Some(true) || !self.is_suspect(store, name, e, now) {
                continue;
            }
            if let Some(c) = counts.get_mut(&e.zone) {
                c.1 = c.1.saturating_sub(1);
                any_suspect = true;
            }
        }
        SuspectView {
            counts,
            any_suspect,
        }
    }

    /// The zone's state with its suspects counted not ready (`None`: no state yet).
    pub(super) fn suspected_state(&self, view: &SuspectView, zone: &Name) -> Option<ZoneState> {
        let z = self.zones.get(zone)?;
        z.state?;
        let (size, ready) = *view.counts.get(zone)?;
        Some(compute_zone_state(
            size,
            ready,
            self.settings.unhealthy_zone_threshold,
        ))
    }

    /// Every zone with a state would be fully disrupted with the suspects counted.
    pub(super) fn all_suspected_down(&self, view: &SuspectView) -> bool {
        let mut any = false;
        for key in self.zones.keys() {
            match self.suspected_state(view, key) {
                None => {}
                Some(ZoneState::FullDisruption) => any = true,
                Some(_) => return false,
            }
        }
        any
    }

    /// Whether the zone's NoExecute decisions wait for its suspects at `now`: counting them
    /// would make the zone partially disrupted where it is not, or every zone fully disrupted
    /// where they are not all.
    pub(super) fn waits_for_suspects(
        &self,
        store: &ClusterStore,
        view: &SuspectView,
        zone: &Name,
    ) -> bool {
        if !view.any_suspect {
            return false;
        }
        if self.all_suspected_down(view) && !self.all_zones_fully_disrupted() {
            return true;
        }
        if self.held_if_full_with_suspects(store, view, zone) {
            return true;
        }
        let Some(z) = self.zones.get(zone) else {
            return false;
        };
        if z.state.is_none() || z.state == Some(ZoneState::PartialDisruption) {
            return false;
        }
        let Some(&(size, ready_then)) = view.counts.get(zone) else {
            return false;
        };
        // Counting every suspect may reach full disruption, which taints at the healthy rate;
        // but upstream's pass may see any number of them short of all (their deadlines differ,
        // and a stalled watch makes live kubelets look silent). So the zone waits if some of
        // them, leaving one node Ready, make it partially disrupted: the more are counted, the
        // likelier that is, so the most that still leave one.
        let suspects = z.counts.ready().saturating_sub(ready_then);
        let counted = suspects.min(z.counts.ready().saturating_sub(1));
        counted > 0
            && compute_zone_state(
                size,
                z.counts.ready() - counted,
                self.settings.unhealthy_zone_threshold,
            ) == ZoneState::PartialDisruption
    }

    /// Whether the zone, not fully disrupted now (Normal, or partially disrupted: a large one
    /// taints at the secondary rate), would be with all its suspects counted, and would then
    /// be held (`full_disruption = "hold"`): nothing in it is tainted meanwhile. The suspects
    /// are counted all (the partial-disruption rule above leaves one Ready): a site of two or
    /// three nodes goes from Normal to fully disrupted at once, and its first verdict found
    /// it Normal.
    fn held_if_full_with_suspects(
        &self,
        store: &ClusterStore,
        view: &SuspectView,
        zone: &Name,
    ) -> bool {
        if self.settings.never_holds() {
            return false;
        }
        let Some(z) = self.zones.get(zone) else {
            return false;
        };
        if !matches!(
            z.state,
            Some(ZoneState::Normal | ZoneState::PartialDisruption)
        ) {
            return false;
        }
        let Some(&(size, ready_then)) = view.counts.get(zone) else {
            return false;
        };
        if ready_then == z.counts.ready()
            || compute_zone_state(size, ready_then, self.settings.unhealthy_zone_threshold)
                != ZoneState::FullDisruption
        {
            return false;
        }
        self.hold_vote(store, zone).is_some()
    }

    /// Whether the zone's NoExecute decisions may go now (see [`Self::waits_for_suspects`]);
    /// the start of a wait is a decision line.
    pub(super) fn zone_may_act(
        &mut self,
        store: &ClusterStore,
        view: &SuspectView,
        zone: &Name,
    ) -> bool {
        let waits = self.waits_for_suspects(store, view, zone);
        let all_down = waits && self.all_suspected_down(view);
        // What the wait guards against: every zone down, or a partial disruption (with all its
        // suspects counted the zone itself may read fully disrupted: `waits_for_suspects`).
        let would_be = if all_down {
            self.suspected_state(view, zone)
        } else if waits && self.held_if_full_with_suspects(store, view, zone) {
            Some(ZoneState::FullDisruption)
        } else {
            Some(ZoneState::PartialDisruption)
        };
        let Some(z) = self.zones.get_mut(zone) else {
            return !waits;
        };
        if waits && !z.waiting_for_suspects {
            let ready_then = view.counts.get(zone).map_or(z.counts.ready(), |c| c.1);
            self.decisions.push(Decision::ZoneWaits {
                zone: zone.clone(),
                suspects: z.counts.ready().saturating_sub(ready_then),
                would_be: would_be.unwrap_or(ZoneState::PartialDisruption),
                all_down,
            });
        }
        z.waiting_for_suspects = waits;
        !waits
    }

    /// The node's zone was waiting for suspects when its queue was last tried (for `explain`).
    pub fn zone_waits_for_suspects(&self, node: &str) -> bool {
        self.nodes
            .get(node)
            .and_then(|e| self.zones.get(&e.zone))
            .is_some_and(|z| z.waiting_for_suspects)
    }

    /// The zone state fencing is gated by: the state with suspects when that is worse than
    /// Normal, the zone's own otherwise.
    pub(crate) fn zone_state_with_suspects(
        &self,
        store: &ClusterStore,
        node: &str,
        now: Time,
    ) -> Option<ZoneState> {
        let e = self.nodes.get(node).filter(|e| e.registered)?;
        let current = self.zones.get(&e.zone)?.state;
        let view = self.suspect_view(store, now);
        match self.suspected_state(&view, &e.zone) {
            Some(ZoneState::Normal) | None => current,
            Some(suspected) if current == Some(ZoneState::Normal) => Some(suspected),
            Some(_) => current,
        }
    }

    /// The nodes whose countdowns found at a takeover wait now (taint eviction's
    /// `takeover_wait`): every node while every zone is down or would be with the suspects
    /// counted; else the nodes of the zones not fully disrupted that would be. A running
    /// leader would judge those suspects first, and every zone down lifts the NoExecute
    /// taints; a zone becoming fully disrupted changes its rules (a hold, a rate).
    pub(crate) fn takeover_wait_cover(
        &self,
        store: &ClusterStore,
        now: Time,
    ) -> crate::brake::BrakeCover {
        use crate::brake::BrakeCover;
        let view = self.suspect_view(store, now);
        if self.all_zones_fully_disrupted() || self.all_suspected_down(&view) {
            return BrakeCover::Everything;
        }
        if !view.any_suspect {
            return BrakeCover::Nothing;
        }
        let zones: BTreeSet<&Name> = self
            .zones
            .iter()
            .filter(|(key, z)| {
                z.state.is_some_and(|s| s != ZoneState::FullDisruption)
                    && self.suspected_state(&view, key) == Some(ZoneState::FullDisruption)
            })
            .map(|(key, _)| key)
            .collect();
        if zones.is_empty() {
            return BrakeCover::Nothing;
        }
        let nodes = self
            .nodes
            .iter()
            .filter(|(_, e)| e.registered && zones.contains(&e.zone))
            .map(|(n, _)| n.clone())
            .collect();
        BrakeCover::Nodes(Rc::new(nodes))
    }

    /// Every zone is fully disrupted, or would be with its suspects counted.
    pub(crate) fn all_zones_down_with_suspects(&self, store: &ClusterStore, now: Time) -> bool {
        self.all_zones_fully_disrupted() || self.all_suspected_down(&self.suspect_view(store, now))
    }
}

/// Whole milliseconds of `d`, rounded up.
fn ceil_millis(d: Duration) -> u64 {
    u64::try_from(d.as_nanos().div_ceil(1_000_000)).unwrap_or(u64::MAX)
}
