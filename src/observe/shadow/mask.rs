//! What the controllers see in shadow mode: the cluster without the incumbent's writes of
//! what is compared. Were they to see kube-controller-manager's Ready=Unknown or taint first,
//! they would find it done and never decide it: nothing would be compared. So a watched object
//! is given to them with, for those fields, what they last saw (their own view, our dry-run's
//! writes included):
//! - a node's conditions, while its Ready is Unknown as a controller writes it;
//! - the not-ready / unreachable taints (only the node lifecycle controller writes them);
//! - a pod's Ready=False under a node the incumbent marked, and taint eviction's
//!   `DisruptionTarget` with the deletion that follows it.
//!
//! A watched object never holds a write of ours (shadow mode writes nothing), so every such
//! field that differs from our view is someone else's. The first sight of an object (no view
//! yet) is taken as it is.

use crate::model::{ConditionStatus, Node, Pod};

use super::incumbent::is_lifecycle_taint;

/// Whether [`node`] may change anything: the server's node or our view carries what is masked
/// (most updates, a healthy node's status, need no copy).
pub(crate) fn node_needs_mask(raw: &Node, ours: Option<&Node>) -> bool {
    ours.is_some()
        && (raw
            .ready()
            .is_some_and(|c| c.status == ConditionStatus::Unknown)
            || raw.taints.iter().any(is_lifecycle_taint)
            || ours.is_some_and(|o| o.taints.iter().any(is_lifecycle_taint)))
}

/// The node as our controllers are to see it, given the server's and their last view.
pub(crate) fn node(mut raw: Node, ours: Option<&Node>) -> Node {
    let Some(ours) = ours else {
        return raw;
    };
    let incumbent_unknown = raw.ready().is_some_and(|c| {
        c.status == ConditionStatus::Unknown
            && matches!(
                c.text.reason().map(|r| &**r),
                Some("NodeStatusUnknown" | "NodeStatusNeverUpdated")
            )
    });
    if incumbent_unknown {
        raw.conditions = ours.conditions.clone();
    }
    raw.taints.retain(|t| !is_lifecycle_taint(t));
    raw.taints.extend(
        ours.taints
            .iter()
            .filter(|t| is_lifecycle_taint(t))
            .cloned(),
    );
    raw
}

/// What our view of a pod holds of what is compared.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) struct PodView {
    pub(crate) ready: Option<ConditionStatus>,
    pub(crate) deleting: bool,
    pub(crate) disruption_target: bool,
}

/// The pod as our controllers are to see it; `node_marked`: its node is Unknown or tainted by
/// the incumbent (a Ready=False is then not its kubelet's). `ours` is our view of this very pod
/// (the same uid): a pod re-created under its name is seen first as it is.
pub(crate) fn pod(mut raw: Pod, ours: Option<PodView>, node_marked: bool) -> Pod {
    let Some(ours) = ours else {
        return raw;
    };
    if raw.ready == Some(ConditionStatus::False) && node_marked {
        raw.ready = ours.ready;
    }
    if raw.disruption_target && !ours.disruption_target {
        raw.disruption_target = false;
        raw.deleting = ours.deleting;
    }
    // Our own eviction, which shadow mode never sends: a pod deleting in our view stays so (for
    // one uid a deletion never reverts), or taint eviction, seeing it alive under the taint at
    // the incumbent's next write of it (its NotReady mark), would evict it again.
    raw.deleting |= ours.deleting;
    raw.disruption_target |= ours.disruption_target;
    raw
}
