//! The zone rules the soak judges new NoExecute taints by (SPEC §4): from the Ready conditions
//! in the store, which zones forbid new taints (every zone fully disrupted, or a small zone
//! partially disrupted: rate 0) and since when.

use std::collections::BTreeMap;

use super::invariants::Checker;
use node_lifecycled::time::Time;

impl Checker {
    pub(super) fn set_ready(&mut self, node: &str, status: &str, at: Time) {
        if let Some(n) = self.nodes.get_mut(node) {
            n.ready = status.to_string();
        }
        self.update_zones(at);
    }

    /// (zone forbids new taints, every zone fully disrupted).
    fn zone_rules(&self) -> (BTreeMap<String, bool>, bool) {
        let mut counts: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
        for n in self.nodes.values() {
            let c = counts.entry(&n.zone).or_default();
            if n.ready == "True" {
                c.0 += 1;
            } else {
                c.1 += 1;
            }
        }
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

    fn update_zones(&mut self, at: Time) {
        let (forbids, all_full) = self.zone_rules();
        for (zone, forbid) in forbids {
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

    pub(super) fn check_taint(&mut self, node: &str, at: Time) {
        self.obligations.taints_checked += 1;
        let Some(zone) = self.nodes.get(node).map(|n| n.zone.clone()) else {
            return;
        };
        let Some(Some(since)) = self.forbidden_since.get(&zone).copied() else {
            return;
        };
        if at.since(since) > self.limits.zone_allowance {
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
}
