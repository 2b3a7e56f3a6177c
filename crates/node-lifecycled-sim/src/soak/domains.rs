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

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use super::invariants::Checker;
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
        let mut counts: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
        for n in self.nodes.values() {
            let c = counts.entry(n.zone.as_str()).or_default();
            if n.ready == "True" {
                c.0 += 1;
            } else {
                c.1 += 1;
            }
        }
        let full = |c: &(usize, usize)| c.0 == 0 && c.1 > 0;
        let all_full = counts.values().all(full);
        let mut held = BTreeSet::new();
        for (zone, c) in &counts {
            if !full(c) {
                self.full_since.remove(*zone);
                continue;
            }
            let since = *self.full_since.entry(zone.to_string()).or_insert(at);
            let Some(max) = self.holds.get(*zone) else {
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
}
