//! NoSchedule condition taints (docs/upstream.md, "NoSchedule condition taints", upstream
//! `doNoScheduleTaintingPass`): the taints that mirror a node's conditions and
//! `spec.unschedulable`. Only these seven keys are ever touched.

use crate::model::{ConditionStatus, Node, NodeConditionType, TaintEffect, taint_keys};

/// The condition → taint map (`nodeConditionToTaintKeyStatusMap`).
fn condition_taint(kind: NodeConditionType, status: ConditionStatus) -> Option<&'static str> {
    use ConditionStatus::*;
    use NodeConditionType::*;
    match (kind, status) {
        (Ready, False) => Some(taint_keys::NOT_READY),
        (Ready, Unknown) => Some(taint_keys::UNREACHABLE),
        (MemoryPressure, True) => Some(taint_keys::MEMORY_PRESSURE),
        (DiskPressure, True) => Some(taint_keys::DISK_PRESSURE),
        (NetworkUnavailable, True) => Some(taint_keys::NETWORK_UNAVAILABLE),
        (PIDPressure, True) => Some(taint_keys::PID_PRESSURE),
        _ => None,
    }
}

/// The NoSchedule keys this controller owns.
pub(crate) const OWNED_KEYS: [&str; 7] = [
    taint_keys::NOT_READY,
    taint_keys::UNREACHABLE,
    taint_keys::MEMORY_PRESSURE,
    taint_keys::DISK_PRESSURE,
    taint_keys::NETWORK_UNAVAILABLE,
    taint_keys::PID_PRESSURE,
    taint_keys::UNSCHEDULABLE,
];

/// The NoSchedule taint keys the node should carry, in a stable order.
pub(crate) fn desired_keys(node: &Node) -> Vec<&'static str> {
    let mut keys: Vec<&'static str> = node
        .conditions
        .iter()
        .filter_map(|c| condition_taint(c.kind, c.status))
        .collect();
    if node.unschedulable {
        keys.push(taint_keys::UNSCHEDULABLE);
    }
    keys.dedup();
    keys
}

/// (to add, to remove) NoSchedule keys, comparing the desired set with the node's NoSchedule
/// taints among [`OWNED_KEYS`].
pub(crate) fn diff(node: &Node) -> (Vec<&'static str>, Vec<&'static str>) {
    let desired = desired_keys(node);
    let has = |key: &str| node.has_taint(key, &TaintEffect::NoSchedule);
    let add = desired.iter().copied().filter(|k| !has(k)).collect();
    let remove = OWNED_KEYS
        .iter()
        .copied()
        .filter(|k| has(k) && !desired.contains(k))
        .collect();
    (add, remove)
}
