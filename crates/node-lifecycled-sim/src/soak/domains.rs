//! Partitions in the soak (`--partitions`): the daemons group nodes into disruption domains by the
//! label `example.com/site` (zones z1 and z2 make site s1, the others site s2:
//! a domain across zones and one that is a zone), keep pods Ready while a domain is disrupted
//! (`unless-disrupted`, globally; site s1's pool says `always`), and hold a fully dark domain
//! (`full_disruption = "hold"`, `hold_max` 20 s, 8 s for site s1's pool).
//!
//! The checker then judges the zone rules per domain (each node's zone is its domain), counts a
//! held domain as forbidding new NoExecute taints (`taint-in-held-domain`) until `hold_max`
//! (less the zone allowance: the daemon's hold starts when it sees the last verdict, no earlier
//! than the store) has passed since the store saw it fully disrupted, and excuses its dead
//! nodes' liveness meanwhile. Pods left Ready are never flagged (no invariant asks for them).
//!
//! Two more rules meet the failovers of the site episodes (`schedule/sites.rs`):
//! - `pod-marked-in-disrupted-domain`: a pod marked NotReady on a node of a domain that keeps
//!   its pods Ready while disrupted (`unless-disrupted`: site s2; s1's pool says `always`) and
//!   that is surely disrupted (enough nodes Unknown in the store and silent, both for longer
//!   than the zone allowance; a kubelet back may count as ready before its Ready post lands):
//!   a new leader must count the dark site before it marks anything;
//! - `hold-overrun` (liveness): a held domain still dark when its `hold_max` has run out
//!   (counted from when the store saw it fully disrupted) gets its first new NoExecute taint
//!   within a short slack; a leader killed meanwhile moves that only to its successor's
//!   acquisition + a settle, not to a hold started over.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use super::invariants::{Checker, FaultClass};
use crate::population::zone_of;
use node_lifecycled::time::Time;

pub const SITE_LABEL: &str = "example.com/site";

/// The daemons' top-level keys (before any table).
pub const TOP_KEYS: &str = "disruption_domain = \"example.com/site\"\n\
    mark_pods_not_ready = \"unless-disrupted\"\n\
    full_disruption = \"hold\"\n\
    hold_max = \"20s\"\n";

/// The pool of site s1 (after every table).
pub const POOL: &str = "\n[[pool]]\n\
    name = \"site-s1\"\n\
    match_labels = { \"example.com/site\" = \"s1\" }\n\
    mark_pods_not_ready = \"always\"\n\
    hold_max = \"8s\"\n";

/// The node's site.
pub fn site_of(node: &str) -> &'static str {
    match zone_of(node) {
        "z1" | "z2" => "s1",
        _ => "s2",
    }
}

/// The node's domain key, as the daemon spells it.
pub fn domain_of(node: &str) -> String {
    format!("{SITE_LABEL}={}", site_of(node))
}

/// The domains whose pods the daemons keep Ready while disrupted (`unless-disrupted`).
pub fn keeping_pods_ready() -> BTreeSet<String> {
    BTreeSet::from([format!("{SITE_LABEL}=s2")])
}

/// What the checker knows for the partition rules beyond the store's view.
#[derive(Debug, Default)]
pub(super) struct DomainTruth {
    /// When a daemon took the leader Lease, and when the soak killed the leader.
    pub(super) leader_acquired: Vec<Time>,
    pub(super) leader_killed: Vec<Time>,
    /// A leader was killed and no leader has written the Lease since.
    pub(super) awaiting_leader: bool,
    /// Per domain: when its last new NoExecute taint landed.
    pub(super) last_taint: BTreeMap<String, Time>,
    /// Domains that keep their pods Ready while disrupted.
    pub(super) keep_ready: BTreeSet<String>,
    /// Per domain: the full disruption (its start) whose hold was judged.
    hold_judged: BTreeMap<String, Time>,
    pub(super) holds_judged: u64,
    pub(super) holds_excused: u64,
    pub(super) pod_marks_checked: u64,
}

/// A new leader's first taint after a takeover: it syncs and counts every node first.
const TAKEOVER_SETTLE: Duration = Duration::from_secs(3);
/// On top of `hold-overrun`'s deadline: the first taint of a domain whose hold ran out goes out
/// at once (a full bucket), its write may wait the injected delay, + scheduling.
const HOLD_SLACK: Duration = Duration::from_secs(2);

/// Each domain's `hold_max`, as the daemons resolve it.
pub fn holds() -> BTreeMap<String, Option<Duration>> {
    BTreeMap::from([
        (format!("{SITE_LABEL}=s1"), Some(Duration::from_secs(8))),
        (format!("{SITE_LABEL}=s2"), Some(Duration::from_secs(20))),
    ])
}

impl Checker {
    /// Judges the zone rules per domain (`domain_of`) with the holds of `holds` (domain ->
    /// `hold_max`, `None`: without end).
    pub fn use_domains(
        &mut self,
        domain_of: impl Fn(&str) -> String,
        holds: BTreeMap<String, Option<Duration>>,
        start: Time,
    ) {
        self.forbidden_since.clear();
        self.allowed_since.clear();
        for (name, n) in self.nodes.iter_mut() {
            n.zone = domain_of(name);
            self.forbidden_since.insert(n.zone.clone(), None);
            self.allowed_since.insert(n.zone.clone(), start);
        }
        self.holds = holds;
    }

    /// Brings the store's view of each held domain up to `at`: since when it has been fully
    /// disrupted, and whether the daemons may still hold it.
    pub(super) fn refresh_holds(&mut self, at: Time) {
        if self.holds.is_empty() {
            return;
        }
        let counts = self.store_counts();
        let full = |c: &(usize, usize)| c.0 == 0 && c.1 > 0;
        let all_full = counts.values().all(full);
        let mut held = BTreeSet::new();
        for (zone, c) in &counts {
            if !full(c) {
                self.full_since.remove(zone);
                continue;
            }
            let since = *self.full_since.entry(zone.to_string()).or_insert(at);
            let Some(max) = self.holds.get(zone) else {
                continue;
            };
            let ends = max.map(|m| since + m.saturating_sub(self.limits.zone_allowance));
            if !all_full && ends.is_none_or(|end| at < end) {
                held.insert(zone.to_string());
            }
        }
        self.held = held;
    }

    pub(super) fn is_held(&self, zone: &str) -> bool {
        self.held.contains(zone)
    }

    /// The domains (`keeping_pods_ready`) where a pod marked NotReady while disrupted is a
    /// violation.
    pub fn keep_pods_ready_in(&mut self, domains: BTreeSet<String>) {
        self.partitions.keep_ready = domains;
    }

    /// The soak killed the leader at `at`.
    pub fn leader_killed(&mut self, at: Time) {
        self.partitions.leader_killed.push(at);
        self.partitions.awaiting_leader = true;
    }

    /// `pod-marked-in-disrupted-domain`: `daemon` marked `pod` NotReady at `at`.
    pub(super) fn check_pod_marked(&mut self, daemon: &str, pod: &str, at: Time) {
        let Some(node) = self.pods.get(pod).map(|p| p.node.clone()) else {
            return;
        };
        let Some(zone) = self.nodes.get(&node).map(|n| n.zone.clone()) else {
            return;
        };
        if !self.partitions.keep_ready.contains(&zone) {
            return;
        }
        self.partitions.pod_marks_checked += 1;
        let Some((surely, total)) = self.surely_disrupted(&zone, at) else {
            return;
        };
        self.violation(
            at,
            "pod-marked-in-disrupted-domain",
            format!(
                "{daemon} marked {pod} (on {node}) NotReady although its domain {zone} keeps pods \
                 Ready and is disrupted ({surely} of {total} nodes Unknown and silent for longer \
                 than the zone allowance)"
            ),
        );
    }

    /// `hold-overrun`, judged at `now` for each held domain still fully disrupted.
    pub(super) fn check_hold_overrun(&mut self, now: Time) {
        if self.limits.brake.is_some() {
            // An engaged brake may rightly hold the taints longer; not judged with one.
            return;
        }
        let mut found = Vec::new();
        let mut judged = Vec::new();
        for (zone, &since) in &self.full_since {
            let Some(Some(hold)) = self.holds.get(zone) else {
                continue;
            };
            if self.partitions.hold_judged.get(zone) == Some(&since) {
                continue;
            }
            let Some(deadline) = self.hold_deadline(since, *hold) else {
                continue;
            };
            let deadline = deadline + self.starved(since, now);
            if now <= deadline {
                continue;
            }
            judged.push((zone.clone(), since));
            // Every domain down, in the store or in some batched view (the other domains'
            // kubelets silent, about to be judged): the all-domains-down stop governs, not the
            // hold, and the daemon rightly waits for those verdicts.
            let views = self.batched_view(now, self.limits.suspect_allowance, None);
            if self.all_full_since.is_some_and(|t| t <= now)
                || self.all_full_exit >= since
                || self.all_full_in_some_view(&views)
            {
                self.partitions.holds_excused += 1;
                continue;
            }
            let tainted = self
                .partitions
                .last_taint
                .get(zone)
                .is_some_and(|&t| t >= since);
            let untainted_dead = self
                .nodes
                .values()
                .any(|n| &n.zone == zone && !n.alive && !n.noexec());
            if tainted || !untainted_dead {
                self.partitions.holds_judged += 1;
            } else {
                found.push(format!(
                    "{zone} fully disrupted for {:.1}s and still nothing tainted (hold_max {:.0}s, \
                     deadline {:.1}s after it went dark)",
                    now.since(since).as_secs_f64(),
                    hold.as_secs_f64(),
                    deadline.since(since).as_secs_f64()
                ));
            }
        }
        for (zone, since) in judged {
            self.partitions.hold_judged.insert(zone, since);
        }
        for detail in found {
            self.violation(now, "hold-overrun", detail);
        }
    }

    /// When the first taint of a domain fully disrupted since `since` with `hold` is due at the
    /// latest: the hold's end, or a successor's acquisition + the settle when the leader was
    /// killed before that, or the end of a fault that stopped the daemons + the settle.
    /// `None` while a killed leader has no successor yet.
    fn hold_deadline(&self, since: Time, hold: Duration) -> Option<Time> {
        let mut due = since + hold;
        for _ in 0..3 {
            for &killed in &self.partitions.leader_killed {
                if killed + Duration::from_secs(1) < since || killed > due {
                    continue;
                }
                let acquired = self
                    .partitions
                    .leader_acquired
                    .iter()
                    .copied()
                    .find(|&a| a > killed)?;
                due = due.max(acquired + TAKEOVER_SETTLE);
            }
            for &(class, from, to, kind) in &self.fault_windows {
                if class == FaultClass::Blocking
                    && kind != "kill-leader"
                    && from <= due
                    && to > since
                {
                    due = due.max(to + TAKEOVER_SETTLE);
                }
            }
        }
        Some(due + HOLD_SLACK)
    }
}
