use std::collections::BTreeMap;

use node_lifecycled::kube::decode::proto::{decode_object, decode_watch_event};
use node_lifecycled::kube::decode::{DecodeContext, WatchEvent, decode_object as decode_json};
use node_lifecycled::model::{Lease, Node, Pod};

use super::*;

/// Objects fetched from kube-apiserver v1.20.2 both as JSON and as protobuf (the daemon's
/// decode fixtures; see `crates/kube/src/decode/proto/tests.rs`). The `dryrun` pairs are two dry-run
/// creates, so the server gave each its own uid and creation second.
macro_rules! fixture {
    ($name:literal) => {
        include_bytes!(concat!("../../../kube/src/decode/fixtures/", $name))
    };
}

/// The fields of one protobuf message by number (see `message_fields`).
fn fields(b: &[u8]) -> BTreeMap<u32, Vec<Vec<u8>>> {
    message_fields(b).expect("a well-formed protobuf message")
}

/// The real server's object message inside its envelope.
fn real_raw(pb: &[u8]) -> Vec<u8> {
    assert_eq!(&pb[..4], MAGIC);
    fields(&pb[4..])[&2][0].clone()
}

/// Compares, field by field one level under metadata/spec/status, the bytes we write with the
/// real server's, for every field whose JSON we encoded whole (nothing under it left out), and
/// returns the JSON paths compared.
fn same_bytes_as_the_server(
    resource: Resource,
    json: &[u8],
    pb: &[u8],
    differ: &[&str],
) -> Vec<String> {
    let value: Value = serde_json::from_slice(json).unwrap();
    let (ours, skipped) = encode_noting(resource, &value);
    let real = fields(&real_raw(pb));
    let ours = fields(&ours);
    let top = schema_of(resource).unwrap();
    let mut compared = Vec::new();
    for part in top {
        let Ty::Msg(sub) = part.ty else { continue };
        let ours_part = fields(&ours[&part.number][0]);
        let real_part = fields(&real[&part.number][0]);
        for field in sub {
            let path = format!("{}.{}", part.json, field.json);
            let partial = skipped
                .iter()
                .any(|s| *s == path || s.starts_with(&format!("{path}.")));
            if partial || differ.contains(&path.as_str()) {
                continue;
            }
            assert_eq!(
                ours_part.get(&field.number),
                real_part.get(&field.number),
                "{path} (field {})",
                field.number
            );
            if ours_part.contains_key(&field.number) {
                compared.push(path);
            }
        }
    }
    compared
}

fn has(compared: &[String], paths: &[&str]) {
    for p in paths {
        assert!(
            compared.iter().any(|c| c == p),
            "{p} not compared: {compared:?}"
        );
    }
}

#[test]
fn a_bound_pod_is_encoded_byte_for_byte_as_kube_apiserver_encodes_it() {
    let compared = same_bytes_as_the_server(
        Resource::Pods,
        fixture!("proto_pod_deployment.json"),
        fixture!("proto_pod_deployment.pb"),
        &[],
    );
    has(
        &compared,
        &[
            "metadata.name",
            "metadata.namespace",
            "metadata.uid",
            "metadata.resourceVersion",
            "metadata.creationTimestamp",
            "metadata.labels",
            "metadata.ownerReferences",
            "spec.nodeName",
            "spec.tolerations",
            "spec.terminationGracePeriodSeconds",
            "status.phase",
            "status.conditions",
        ],
    );
}

#[test]
fn a_daemonset_pod_and_an_edge_node_with_taints_are_encoded_as_kube_apiserver_encodes_them() {
    let differ = ["metadata.uid", "metadata.creationTimestamp"];
    let compared = same_bytes_as_the_server(
        Resource::Pods,
        fixture!("proto_pod_dryrun.json"),
        fixture!("proto_pod_dryrun.pb"),
        &differ,
    );
    has(
        &compared,
        &[
            "metadata.ownerReferences",
            "spec.tolerations",
            "spec.containers",
        ],
    );
    let compared = same_bytes_as_the_server(
        Resource::Nodes,
        fixture!("proto_node_dryrun.json"),
        fixture!("proto_node_dryrun.pb"),
        &differ,
    );
    has(
        &compared,
        &[
            "metadata.labels",
            "metadata.annotations",
            "spec.unschedulable",
            "spec.taints",
            "status.conditions",
            "status.nodeInfo",
            "status.daemonEndpoints",
        ],
    );
}

#[test]
fn a_worker_node_and_a_lease_are_encoded_as_kube_apiserver_encodes_them() {
    let compared = same_bytes_as_the_server(
        Resource::Nodes,
        fixture!("proto_node_worker.json"),
        fixture!("proto_node_worker.pb"),
        &[],
    );
    has(
        &compared,
        &[
            "status.conditions",
            "status.addresses",
            "status.capacity",
            "status.allocatable",
            "spec.podCIDR",
            "spec.podCIDRs",
        ],
    );
    let compared = same_bytes_as_the_server(
        Resource::Leases,
        fixture!("proto_lease.json"),
        fixture!("proto_lease.pb"),
        &[],
    );
    has(
        &compared,
        &[
            "spec.holderIdentity",
            "spec.leaseDurationSeconds",
            "spec.renewTime",
        ],
    );
}

#[test]
fn the_daemon_reads_our_protobuf_as_it_reads_the_same_objects_in_json() {
    fn same<T: node_lifecycled::kube::decode::proto::ProtoWire + PartialEq + std::fmt::Debug>(
        resource: Resource,
        json: &[u8],
    ) {
        let value: Value = serde_json::from_slice(json).unwrap();
        let pb = enveloped_object(resource, &encode_object(resource, &value).unwrap());
        let from_json: T = decode_json(json, &mut DecodeContext::new()).unwrap();
        let from_pb: T = decode_object(&pb, &mut DecodeContext::new()).unwrap();
        assert_eq!(from_pb, from_json);
    }
    same::<Pod>(Resource::Pods, fixture!("proto_pod_deployment.json"));
    same::<Pod>(Resource::Pods, fixture!("proto_pod_dryrun.json"));
    same::<Node>(Resource::Nodes, fixture!("proto_node_dryrun.json"));
    same::<Node>(Resource::Nodes, fixture!("proto_node_worker.json"));
    same::<Lease>(Resource::Leases, fixture!("proto_lease.json"));
    // The simulator's own objects.
    let pod = crate::fixtures::running_pod("default", "p", Some("n1"));
    same::<Pod>(Resource::Pods, serde_json::to_vec(&pod).unwrap().as_slice());
}

#[test]
fn a_watch_frame_carries_the_event_type_and_the_enveloped_object() {
    let pod = crate::fixtures::running_pod("default", "p", Some("n1"));
    let raw = encode_object(Resource::Pods, &pod).unwrap();
    let frame = watch_frame("MODIFIED", &enveloped_object(Resource::Pods, &raw));
    let len = u32::from_be_bytes(frame[..4].try_into().unwrap()) as usize;
    assert_eq!(len, frame.len() - 4);
    let event: WatchEvent<Pod> =
        decode_watch_event(&frame[4..], &mut DecodeContext::new()).unwrap();
    let WatchEvent::Modified(decoded) = event else {
        panic!("{event:?}")
    };
    assert_eq!(decoded.node_name.as_deref(), Some("n1"));
}

#[test]
fn rfc3339_times_with_fractions_and_offsets_are_read_as_the_server_reads_them() {
    assert_eq!(parse_rfc3339("1970-01-01T00:00:00Z"), Some((0, 0)));
    assert_eq!(
        parse_rfc3339("2026-11-23T19:24:48Z"),
        Some((1_795_461_888, 0))
    );
    assert_eq!(
        parse_rfc3339("2026-11-23T19:24:48.881150Z"),
        Some((1_795_461_888, 881_150_000))
    );
    assert_eq!(
        parse_rfc3339("2026-11-23T20:24:48+01:00"),
        Some((1_795_461_888, 0))
    );
    for bad in [
        "",
        "2026-11-23",
        "2026-13-23T19:24:48Z",
        "2026-11-23T19:24:48",
        "x026-11-23T19:24:48Z",
    ] {
        assert_eq!(parse_rfc3339(bad), None, "{bad}");
    }
}

#[test]
fn only_protobuf_first_in_accept_gets_protobuf_and_only_for_nodes_pods_and_leases() {
    let both = "application/vnd.kubernetes.protobuf, application/json";
    assert!(wanted(Some(both), Resource::Pods));
    assert!(wanted(Some(both), Resource::Leases));
    assert!(!wanted(Some(both), Resource::Events));
    assert!(!wanted(Some("application/json"), Resource::Nodes));
    assert!(!wanted(
        Some("application/json, application/vnd.kubernetes.protobuf"),
        Resource::Nodes
    ));
    assert!(!wanted(None, Resource::Nodes));
}

#[test]
fn a_message_cut_anywhere_is_read_as_malformed_or_as_its_whole_fields_never_a_panic() {
    let ours = encode_object(
        Resource::Leases,
        &serde_json::from_slice(fixture!("proto_lease.json")).unwrap(),
    )
    .unwrap();
    assert!(message_fields(&ours).is_some_and(|f| f.contains_key(&1) && f.contains_key(&2)));
    for cut in 0..ours.len() {
        if let Some(f) = message_fields(&ours[..cut]) {
            assert!(
                f.values().flatten().map(Vec::len).sum::<usize>() < ours.len(),
                "cut {cut}"
            );
        }
    }
    assert_eq!(
        message_fields(&[0x0d, 0, 0, 0, 0]),
        None,
        "fixed32: not an API wire type"
    );
}
