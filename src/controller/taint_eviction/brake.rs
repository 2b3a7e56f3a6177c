//! The brake and per-pool eviction timing in taint eviction: the deletions an engaged brake holds
//! (parked with their deadlines, let go at the release), and the per-pool toleration timing it
//! judges pods with.

use super::*;

impl TaintEviction {
    /// Whether no brake cover is held (`set_brake` was last given `BrakeCover::Nothing`).
    pub(crate) fn brake_holds_nothing(&self) -> bool {
        self.brake == BrakeCover::Nothing
    }

    /// The nodes an engaged brake covers now. A pod parked under the brake whose node it no
    /// longer covers is due again at its own deadline: deleted at once when that passed during
    /// the brake, not counted again.
    pub(crate) fn set_brake(
        &mut self,
        cover: BrakeCover,
        store: &ClusterStore,
        now: Time,
        out: &mut Vec<Action>,
    ) {
        if cover == self.brake {
            return;
        }
        self.brake = cover;
        let parked = std::mem::take(&mut self.parked);
        for key in parked {
            if self.braked(store, &key) {
                self.parked.push(key);
            } else {
                self.evictions.unpark(&key, now);
            }
        }
        self.fire_due(store, now, out);
    }

    /// Eviction timing per pool (config reload: countdowns started later use it).
    pub(crate) fn set_timing(&mut self, timing: Option<PoolTiming>) {
        self.timing = timing;
    }

    /// Where a pod's not-ready/unreachable timing on `node` comes from (for `explain`).
    pub(crate) fn timing_source(&self, node: &Node, tolerations: &[Toleration]) -> TimingSource {
        self.timing
            .as_ref()
            .map_or(TimingSource::Own, |t| t.source(node, tolerations))
    }

    /// Whether the pod's node is covered by an engaged brake.
    fn braked(&self, store: &ClusterStore, key: &PodKey) -> bool {
        if self.brake == BrakeCover::Nothing {
            return false;
        }
        store
            .pods()
            .get(key)
            .and_then(|p| p.node_name().cloned())
            .is_some_and(|n| self.brake.covers(&n))
    }

    /// Whether the pod's deletion waits for a brake (for `explain`).
    pub(crate) fn held_by_brake(&self, pod: &PodKey) -> bool {
        self.parked.contains(pod)
    }
}
