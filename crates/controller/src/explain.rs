//! Facts `explain` needs beyond the state dump: where a node stands in its zone's tainting
//! queue, and where a pod's eviction stands. Read-only, cost O(queue) / O(1): only on request.

use std::time::Duration;

use crate::model::PodKey;
use crate::time::Time;

use super::Controllers;
pub use super::taint_eviction::PodEviction;

/// A node waiting in its zone's queue for a NoExecute taint.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QueuedTaint {
    /// 0: next in line.
    pub position: usize,
    /// About when its token comes at the zone's current rate; `None`: the rate is zero
    /// (tainting stopped in the zone).
    pub eta: Option<Time>,
    /// The zone waits for nodes about to be judged (`node_lifecycle/suspects.rs`).
    pub waits_for_suspects: bool,
}

impl Controllers {
    /// The node's place in its zone's queue, if it is queued.
    pub fn queued_taint(&self, node: &str, now: Time) -> Option<QueuedTaint> {
        let queue = self.lifecycle().zone_queue_of(node)?;
        let position = queue.queued().position(|n| &**n == node)?;
        let rate = queue.rate();
        let eta = queue.next_token(now).map(|first| {
            let per_token = 1e6 / rate.micro_per_second().max(1) as f64;
            first + Duration::from_secs_f64(per_token * position as f64)
        });
        Some(QueuedTaint {
            position,
            eta: eta.filter(|_| !rate.is_never()),
            waits_for_suspects: self.lifecycle().zone_waits_for_suspects(node),
        })
    }

    /// Where the pod's eviction stands (always `None` in legacy mode).
    pub fn pod_eviction(&self, pod: &PodKey) -> PodEviction {
        self.eviction()
            .map_or(PodEviction::None, |e| e.eviction_of(pod))
    }
}
