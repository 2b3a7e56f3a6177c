//! The brake on mass decisions (`max_unhealthy`) as the soak judges it, when the daemons run with
//! one (`SoakOptions::brake`):
//! - `decision-under-brake` (safety): a new NoExecute taint or a pod deletion lands while the
//!   brake is surely engaged: more nodes than the limit have shown Ready other than True in
//!   the store for longer than the zone allowance (the daemon counts them, and its suspects,
//!   on the watch), or they did until less than `disruption_cooldown` minus that allowance ago
//!   (the release waits the cooldown after the count is back within the limit);
//! - while the brake may be engaged (nodes not Ready or with a silent kubelet over the limit,
//!   and a cooldown after), the daemons rightly hold taints and deletions: liveness deadlines
//!   wait (`quiet_until`) and `decision-late` is excused (a blocking fault window).

use std::time::Duration;

use super::invariants::{Checker, FaultClass};
use node_lifecycled::time::Time;

/// The brakes the daemons run with: fleet-wide (judged and excused) and per zone-pool (a
/// percentage of the zone's nodes: excused only, the daemon being more careful there).
#[derive(Clone, Debug, PartialEq)]
pub struct BrakeRule {
    pub max_unhealthy: Option<usize>,
    pub cooldown: Duration,
    pub zones: Vec<(String, f64)>,
}

#[derive(Clone, Debug, Default)]
pub(super) struct BrakeTruth {
    /// Since when the store has shown more nodes not Ready than the limit.
    sure_over_since: Option<Time>,
    /// When the last such period, longer than the allowance, ended.
    sure_ended: Option<Time>,
    /// The last time the brake may have been engaged (liveness waits after it).
    maybe_at: Option<Time>,
}

impl Checker {
    /// Recounts at `at` (a Ready change, a kubelet change, the liveness tick).
    pub(super) fn update_brake(&mut self, at: Time) {
        let Some(rule) = self.limits.brake.clone() else {
            return;
        };
        let sure = self.nodes.values().filter(|n| n.ready != "True").count();
        let maybe_in = |zone: Option<&str>| {
            let nodes = self
                .nodes
                .values()
                .filter(|n| zone.is_none_or(|z| n.zone == z));
            let (mut bad, mut all) = (0, 0);
            for n in nodes {
                all += 1;
                bad += usize::from(n.ready != "True" || !n.alive);
            }
            (bad, all)
        };
        let allowance = self.limits.zone_allowance;
        let limit = rule.max_unhealthy.unwrap_or(usize::MAX);
        match (sure > limit, self.brake.sure_over_since) {
            (true, None) => self.brake.sure_over_since = Some(at),
            (false, Some(since)) => {
                if at.since(since) > allowance {
                    self.brake.sure_ended = Some(at);
                }
                self.brake.sure_over_since = None;
            }
            _ => {}
        }
        let maybe = maybe_in(None).0 > limit
            || rule.zones.iter().any(|(zone, pct)| {
                let (bad, all) = maybe_in(Some(zone));
                bad as f64 * 100.0 > pct * all as f64
            });
        if maybe {
            let until = at + rule.cooldown + allowance;
            self.quiet_until(until);
            // One window a second at most: decision-late is excused over it.
            if self
                .brake
                .maybe_at
                .is_none_or(|t| at.since(t) >= Duration::from_secs(1))
            {
                self.fault(FaultClass::Blocking, "brake", at, until);
                self.brake.maybe_at = Some(at);
            }
        }
    }

    /// Why the brake is surely engaged at `at`, if it is.
    fn surely_braked(&self, at: Time) -> Option<String> {
        let rule = self.limits.brake.as_ref()?;
        let max_unhealthy = rule.max_unhealthy?;
        let allowance = self.limits.zone_allowance;
        if let Some(since) = self.brake.sure_over_since
            && at.since(since) > allowance
        {
            return Some(format!(
                "more than max_unhealthy = {max_unhealthy} nodes not Ready for {:.1}s",
                at.since(since).as_secs_f64()
            ));
        }
        let ended = self.brake.sure_ended?;
        (at + allowance < ended + rule.cooldown).then(|| {
            format!(
                "more than max_unhealthy = {max_unhealthy} nodes were not Ready until {:.1}s ago, within the {:.0}s cooldown",
                at.since(ended).as_secs_f64(),
                rule.cooldown.as_secs_f64()
            )
        })
    }

    /// A new NoExecute taint on `node`, or the deletion of `pod`, landed at `at`.
    pub(super) fn check_brake(&mut self, what: String, at: Time) {
        if let Some(why) = self.surely_braked(at) {
            self.violation(at, "decision-under-brake", format!("{what} while {why}"));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::soak::limits::Limits;

    const T0: u64 = 1_700_000_000_000;

    fn at(seconds: f64) -> Time {
        Time::from_unix_millis(T0 + (seconds * 1000.0) as u64)
    }

    /// 24 nodes in 3 zones, a brake at 4 with a 10 s cooldown (zone allowance 2 s).
    fn checker() -> Checker {
        let mut limits = Limits::for_soak(Duration::from_secs(5), 1.0, Duration::from_millis(400));
        limits.brake = Some(BrakeRule {
            max_unhealthy: Some(4),
            cooldown: Duration::from_secs(10),
            zones: Vec::new(),
        });
        let nodes: Vec<String> = (1..=3)
            .flat_map(|z| (1..=8).map(move |n| format!("z{z}-n{n:03}")))
            .collect();
        Checker::new(limits, &[("token-a", "daemon-a")], &nodes, at(0.0))
    }

    fn five_unknown(c: &mut Checker, t: f64) {
        for z in 1..=3 {
            c.set_ready(&format!("z{z}-n001"), "Unknown", at(t));
            c.set_ready(&format!("z{z}-n002"), "Unknown", at(t));
        }
    }

    fn rules(c: &Checker) -> Vec<&'static str> {
        c.violations.iter().map(|v| v.rule).collect()
    }

    #[test]
    fn a_taint_or_deletion_while_the_brake_is_surely_engaged_is_a_violation() {
        let mut c = checker();
        five_unknown(&mut c, 1.0);
        // Within the allowance: the daemon may not have seen the count yet.
        c.check_brake("z1-n001 tainted NoExecute".into(), at(2.5));
        assert!(rules(&c).is_empty());
        c.check_brake("z1-n001 tainted NoExecute".into(), at(4.0));
        assert_eq!(rules(&c), ["decision-under-brake"]);
        // Back within the limit at 10 s: the release waits the 10 s cooldown.
        for z in 1..=3 {
            c.set_ready(&format!("z{z}-n001"), "True", at(10.0));
        }
        c.check_brake("default/web-3 deleted".into(), at(12.0));
        assert_eq!(rules(&c).len(), 2, "{:?}", c.violations);
        c.check_brake("default/web-4 deleted".into(), at(18.5));
        assert_eq!(rules(&c).len(), 2, "after the cooldown less the allowance");
    }

    #[test]
    fn without_a_brake_or_within_the_limit_nothing_is_judged() {
        let mut c = checker();
        c.set_ready("z1-n001", "Unknown", at(1.0));
        c.check_brake("z1-n001 tainted NoExecute".into(), at(9.0));
        assert!(rules(&c).is_empty());
        c.limits.brake = None;
        five_unknown(&mut c, 10.0);
        c.check_brake("z1-n001 tainted NoExecute".into(), at(20.0));
        assert!(rules(&c).is_empty());
    }

    #[test]
    fn a_brake_that_may_be_engaged_pushes_liveness_deadlines_back() {
        let mut c = checker();
        for n in 1..=5 {
            c.kubelet(&format!("z1-n00{n}"), false, at(3.0));
        }
        assert!(c.quiet_until >= at(3.0) + Duration::from_secs(12));
        assert!(rules(&c).is_empty(), "silent kubelets alone prove nothing");
    }
}
