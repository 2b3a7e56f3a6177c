//! A node's managedFields, read in shadow mode only: who owns its Ready status and taints.

use super::tests::{envelope, len_field, varint_field};
use super::*;
use crate::model::{Node, Writers};

/// A node with these managedFields entries (manager, fieldsV1 JSON).
fn node_with(entries: &[(&str, &str)]) -> Vec<u8> {
    let mut meta = [
        len_field(1, b"node-1"),
        len_field(5, b"6f1c2a4e-0000-4000-8000-000000000001"),
        len_field(6, b"42"),
        len_field(8, &varint_field(1, 1_700_000_000)),
    ]
    .concat();
    for (manager, fields) in entries {
        let entry = [
            len_field(1, manager.as_bytes()),
            len_field(2, b"Update"),
            len_field(7, &len_field(1, fields.as_bytes())),
        ]
        .concat();
        meta.extend(len_field(17, &entry));
    }
    envelope(&len_field(1, &meta))
}

const KUBELET: &str = r#"{"f:status":{"f:conditions":{"k:{\"type\":\"Ready\"}":{"f:lastHeartbeatTime":{}}},"f:images":{}}}"#;
const KCM_STATUS: &str = r#"{"f:status":{"f:conditions":{"k:{\"type\":\"Ready\"}":{"f:status":{},"f:reason":{},"f:lastTransitionTime":{}}}}}"#;
const KCM_TAINTS: &str = r#"{"f:spec":{"f:taints":{}}}"#;
const ADMIN_TAINTS: &str = r#"{"f:spec":{"f:taints":{}}}"#;

fn writers(entries: &[(&str, &str)], read: bool) -> Writers {
    let mut ctx = DecodeContext::new();
    ctx.read_writers(read);
    decode_object::<Node>(&node_with(entries), &mut ctx)
        .unwrap()
        .writers
}

#[test]
fn managed_fields_name_the_incumbent_only_when_asked() {
    let all = [
        ("kubelet", KUBELET),
        ("kube-controller-manager", KCM_STATUS),
        ("kube-controller-manager", KCM_TAINTS),
    ];
    assert_eq!(
        writers(&all, false),
        Writers::default(),
        "skipped unless shadowing"
    );
    let w = writers(&all, true);
    assert!(w.known() && w.ready_by_incumbent() && w.taints_by_incumbent());
    assert!(!w.taints_by_other());
    let w = writers(
        &[("kubelet", KUBELET), ("kubectl-taint", ADMIN_TAINTS)],
        true,
    );
    assert!(w.known() && !w.ready_by_incumbent() && !w.taints_by_incumbent());
    assert!(w.taints_by_other());
    // k3s runs the controller manager in its own process: its manager is `k3s`.
    assert!(writers(&[("k3s", KCM_STATUS)], true).ready_by_incumbent());
    // No managedFields at all (the simulator): nothing known.
    assert!(!writers(&[], true).known());
    // A fieldsV1 that is not JSON names nothing.
    assert!(!writers(&[("kube-controller-manager", "{not json")], true).ready_by_incumbent());
}
