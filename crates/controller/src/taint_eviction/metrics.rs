//! Counters the shell exports (docs/upstream.md, "Metrics") and shows in the SIGUSR1 dump. Plain
//! fields: the machine is the only writer, the shell reads them between inputs.

use std::time::Duration;

use crate::model::PodKey;
use crate::time::{Time, duration_millis};

/// Upstream's buckets for `taint_eviction_controller_pod_deletion_duration_seconds`
/// (5 ms to 4 min), in milliseconds.
pub const DELETION_LATENCY_BUCKETS_MS: [u64; 12] = [
    5, 25, 100, 500, 1_000, 2_500, 10_000, 30_000, 60_000, 120_000, 180_000, 240_000,
];

/// A cumulative-bucket histogram in whole milliseconds (Prometheus `le` semantics).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LatencyHistogram {
    /// `counts[i]`: observations <= `DELETION_LATENCY_BUCKETS_MS[i]`; beyond the last only
    /// `count` and `sum_ms` know them (`+Inf`).
    pub counts: [u64; 12],
    pub count: u64,
    pub sum_ms: u64,
}

impl LatencyHistogram {
    pub(crate) fn observe(&mut self, latency: Duration) {
        let ms = duration_millis(latency);
        for (bound, count) in DELETION_LATENCY_BUCKETS_MS.iter().zip(&mut self.counts) {
            if ms <= *bound {
                *count += 1;
            }
        }
        self.count += 1;
        self.sum_ms = self.sum_ms.saturating_add(ms);
    }
}

/// An eviction that failed every attempt.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GaveUp {
    pub pod: PodKey,
    pub at: Time,
    pub error: String,
}

/// How many given-up evictions the dump remembers.
pub(crate) const GAVE_UP_KEPT: usize = 20;

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EvictionMetrics {
    /// `taint_eviction_controller_pod_deletions_total`: pods this controller deleted (as
    /// upstream, a pod already gone or replaced is a success but not a deletion).
    pub(crate) pod_deletions_total: u64,
    /// `taint_eviction_controller_pod_deletion_duration_seconds`: from the deadline (when the
    /// taint effect became active for the pod) to the successful DELETE; from when the pod was
    /// first judged if its deadline had passed by then (a restart is not API latency).
    pub pod_deletion_duration: LatencyHistogram,
    /// Evictions that found the pod already gone (404).
    pub(crate) already_gone_total: u64,
    /// Evictions whose UID precondition failed: the name belongs to a new pod.
    pub(crate) replaced_total: u64,
    /// Failed attempts that were retried.
    pub(crate) retries_total: u64,
    /// Evictions abandoned after the last attempt failed.
    pub(crate) gave_up_total: u64,
    /// The most recent of those, oldest first (at most [`GAVE_UP_KEPT`]).
    pub(crate) recent_gave_up: Vec<GaveUp>,
}

impl EvictionMetrics {
    pub(super) fn gave_up(&mut self, failure: GaveUp) {
        self.gave_up_total += 1;
        if self.recent_gave_up.len() == GAVE_UP_KEPT {
            self.recent_gave_up.remove(0);
        }
        self.recent_gave_up.push(failure);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_buckets_are_cumulative_upper_bounds() {
        let mut h = LatencyHistogram::default();
        h.observe(Duration::from_millis(5));
        h.observe(Duration::from_millis(6));
        h.observe(Duration::from_secs(300));
        assert_eq!(h.counts[0], 1, "5 ms is in the le=0.005 bucket");
        assert_eq!(h.counts[1], 2);
        assert_eq!(h.counts[11], 2, "300 s is only in +Inf");
        assert_eq!(h.count, 3);
        assert_eq!(h.sum_ms, 300_011);
    }
}
