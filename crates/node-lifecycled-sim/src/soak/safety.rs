//! The safety half of the soak's invariants (see `invariants`), judged at each daemon write: two
//! writers at once, Ready=Unknown while the kubelet renews, and deletions before a pod's
//! toleration ran out.

use std::time::Duration;

use super::invariants::Checker;
use node_lifecycled::time::Time;

impl Checker {
    pub(super) fn check_writer(&mut self, daemon: &str, at: Time) {
        let clash = self
            .last_write
            .iter()
            .filter(|(other, _)| other.as_str() != daemon)
            .find(|(_, t)| at.since(**t) < self.limits.handover_gap)
            .map(|(other, &t)| (other.clone(), t));
        if let Some((other, t)) = clash {
            self.violation(
                at,
                "two-writers",
                format!(
                    "{daemon} wrote {} ms after {other}'s write (both acting as leader)",
                    at.since(t).as_millis()
                ),
            );
        }
        self.last_write.insert(daemon.to_string(), at);
    }

    pub(super) fn check_unknown(&mut self, daemon: &str, node: &str, at: Time) {
        self.obligations.unknown_verdicts_checked += 1;
        if let Some(e) = self.fresh_heartbeat(daemon, node, at) {
            self.violation(
                at,
                "unknown-while-renewing",
                format!(
                    "{node} declared Ready=Unknown although its kubelet heartbeat {:.3}s before \
                     (grace {:.1}s)",
                    at.since(e).as_secs_f64(),
                    self.limits.grace.as_secs_f64()
                ),
            );
        }
    }

    /// A heartbeat of `node`'s kubelet within the grace period before a write of `daemon`
    /// landing at `at` that the daemon's live Lease read must have seen: the last
    /// `evidence_allowance` (+ the daemon's CPU wait) before the write are excused (a renewal
    /// between the read and the write cannot be seen).
    pub(super) fn fresh_heartbeat(&self, daemon: &str, node: &str, at: Time) -> Option<Time> {
        // Time the daemon waited for a CPU is not its doing: a live read followed by a wait on
        // the run queue lands its write that much later.
        let starved = self.waited(
            daemon,
            at.since(Time::ZERO).saturating_sub(self.limits.grace),
            at,
        );
        let n = self.nodes.get(node)?;
        let window_start = at.since(Time::ZERO).saturating_sub(self.limits.grace);
        let window_end = at
            .since(Time::ZERO)
            .saturating_sub(self.limits.evidence_allowance + starved);
        n.evidence
            .iter()
            .rev()
            .find(|&&e| {
                let e = e.since(Time::ZERO);
                e > window_start + self.limits.evidence_stamp_slack && e <= window_end
            })
            .copied()
    }

    pub(super) fn check_deletion(&mut self, daemon: &str, pod: &str, at: Time) {
        self.obligations.deletions_checked += 1;
        let Some(p) = self.pods.get(pod) else {
            return;
        };
        let node = p.node.clone();
        let (toleration, created) = (p.toleration, p.created);
        let first = p.deleted.is_none();
        if let Some(p) = self.pods.get_mut(pod) {
            p.deleted.get_or_insert(at);
        }
        if !first {
            return;
        }
        let Some(toleration) = toleration else {
            self.violation(
                at,
                "eviction-before-toleration",
                format!("{pod} deleted although it tolerates the node taints forever"),
            );
            return;
        };
        let Some(n) = self.nodes.get(&node) else {
            return;
        };
        let start = match (n.noexec_since, n.noexec_ended) {
            (Some(since), _) => since,
            (None, Some(ended)) if at.since(ended) <= self.limits.eviction_retry_window => {
                // A running eviction goes on after its taint went (as upstream's worker).
                return;
            }
            _ => {
                self.violation(
                    at,
                    "eviction-before-toleration",
                    format!("{pod} deleted while {node} has no NoExecute taint"),
                );
                return;
            }
        };
        let start = start.max(created);
        // Time the daemon waited for a CPU just before the taint landed delayed its landing.
        let starved = self.waited(
            daemon,
            start
                .since(Time::ZERO)
                .saturating_sub(Duration::from_secs(2)),
            start,
        );
        if at + self.limits.toleration_slack + starved < start + toleration {
            self.violation(
                at,
                "eviction-before-toleration",
                format!(
                    "{pod} deleted {:.3}s after {node}'s NoExecute taint, tolerating {}s",
                    at.since(start).as_secs_f64(),
                    toleration.as_secs()
                ),
            );
        }
    }
}
