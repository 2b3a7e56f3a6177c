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
        self.unpark_released(store, now, out);
    }

    /// Whether countdowns found at the takeover are pending (their wait is to be recounted).
    pub(crate) fn has_inherited(&self) -> bool {
        !self.inherited.is_empty() || self.takeover_wait != BrakeCover::Nothing
    }

    /// The nodes whose inherited countdowns wait now (see `inherited`); a pod parked for it
    /// whose node it no longer covers is due again at its own deadline.
    pub(crate) fn set_takeover_wait(
        &mut self,
        cover: BrakeCover,
        store: &ClusterStore,
        now: Time,
        out: &mut Vec<Action>,
    ) {
        let cover = if self.inherited.is_empty() {
            BrakeCover::Nothing
        } else {
            cover
        };
        if cover == self.takeover_wait {
            return;
        }
        self.takeover_wait = cover;
        self.unpark_released(store, now, out);
    }

    /// Pods parked under a brake or a takeover's wait that neither holds any more are due
    /// again at their own deadlines.
    fn unpark_released(&mut self, store: &ClusterStore, now: Time, out: &mut Vec<Action>) {
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
    pub fn timing_source(&self, node: &Node, tolerations: &[Toleration]) -> TimingSource {
        self.timing
            .as_ref()
            .map_or(TimingSource::Own, |t| t.source(node, tolerations))
    }

    /// Whether the pod's node is covered by an engaged brake, or the pod's inherited
    /// countdown waits for the takeover's suspects.
    pub(super) fn braked(&self, store: &ClusterStore, key: &PodKey) -> bool {
        parked_now(
            &self.brake,
            &self.takeover_wait,
            &self.inherited,
            store,
            key,
        )
    }

    /// Whether the pod's deletion waits for a brake (for `explain`).
    pub fn held_by_brake(&self, pod: &PodKey) -> bool {
        self.parked.contains(pod)
    }
}

/// Whether a due deadline of `key` is parked now: its node is covered by an engaged brake, or
/// its countdown is inherited and its node covered by the takeover's wait.
pub(super) fn parked_now(
    brake: &BrakeCover,
    takeover_wait: &BrakeCover,
    inherited: &std::collections::HashSet<PodKey>,
    store: &ClusterStore,
    key: &PodKey,
) -> bool {
    if *brake == BrakeCover::Nothing && *takeover_wait == BrakeCover::Nothing {
        return false;
    }
    let Some(node) = store.pods().get(key).and_then(|p| p.node_name().cloned()) else {
        return false;
    };
    brake.covers(&node) || (inherited.contains(key) && takeover_wait.covers(&node))
}
