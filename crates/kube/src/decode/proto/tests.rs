use std::rc::Rc;

use super::*;
use crate::decode::{Bookmark, Status, decode_object as decode_json};
use crate::model::{Autonomy, ConditionStatus, Lease, Node, Pod, TaintEffect};
use crate::time::Time;

/// The same objects fetched from kube-apiserver v1.20.2 as JSON and as protobuf
/// (`Accept: application/vnd.kubernetes.protobuf`); the `dryrun` ones are a server-side
/// dry-run create (`?dryRun=All`) of an edge node with taints and autonomy annotations and of a
/// DaemonSet pod with tolerations, so the server wrote fields the benchmark cluster lacks.
const NODE_JSON: &[u8] = include_bytes!("../fixtures/proto_node_worker.json");
const NODE_PB: &[u8] = include_bytes!("../fixtures/proto_node_worker.pb");
const EDGE_NODE_JSON: &[u8] = include_bytes!("../fixtures/proto_node_dryrun.json");
const EDGE_NODE_PB: &[u8] = include_bytes!("../fixtures/proto_node_dryrun.pb");
const LEASE_JSON: &[u8] = include_bytes!("../fixtures/proto_lease.json");
const LEASE_PB: &[u8] = include_bytes!("../fixtures/proto_lease.pb");
const POD_JSON: &[u8] = include_bytes!("../fixtures/proto_pod_deployment.json");
const POD_PB: &[u8] = include_bytes!("../fixtures/proto_pod_deployment.pb");
const DS_POD_JSON: &[u8] = include_bytes!("../fixtures/proto_pod_dryrun.json");
const DS_POD_PB: &[u8] = include_bytes!("../fixtures/proto_pod_dryrun.pb");
/// A whole protobuf watch response from the same server: `?watch=true&resourceVersion=1`
/// on nodes, one frame (an ERROR event, 410 Expired).
const WATCH_EXPIRED: &[u8] = include_bytes!("../fixtures/proto_watch_expired.bin");

fn both<T: ProtoWire + PartialEq + std::fmt::Debug>(json: &[u8], pb: &[u8]) -> (T, T) {
    let from_json: T = decode_json(json, &mut DecodeContext::new()).unwrap();
    let from_pb: T = decode_object(pb, &mut DecodeContext::new()).unwrap();
    (from_json, from_pb)
}

#[test]
fn a_worker_node_heartbeat_decodes_the_same_from_protobuf_as_from_json() {
    let (json, pb) = both::<Node>(NODE_JSON, NODE_PB);
    assert_eq!(pb, json);
    assert_eq!(&*pb.name, "node-00000");
    assert_eq!(pb.conditions.len(), 4);
    assert!(pb.ready().unwrap().last_heartbeat_time.is_some());
    assert!(pb.creation_timestamp > Time::ZERO);
    assert!(!pb.labels.is_empty());
}

#[test]
fn an_edge_node_with_taints_autonomy_and_other_conditions_decodes_the_same_both_ways() {
    let (json, mut pb) = both::<Node>(EDGE_NODE_JSON, EDGE_NODE_PB);
    // Two dry-run creates: the server gave each its own uid and creation second.
    assert_ne!(&*pb.uid, "");
    pb.uid = json.uid.clone();
    assert!(
        pb.creation_timestamp.since(json.creation_timestamp) < std::time::Duration::from_secs(5)
    );
    pb.creation_timestamp = json.creation_timestamp;
    assert_eq!(pb, json);
    assert_eq!(pb.autonomy, Autonomy::Forever);
    assert!(pb.unschedulable);
    // Ours, and the server's own for an unschedulable node.
    assert_eq!(pb.taints.len(), 4);
    assert_eq!(pb.taints[0].effect, TaintEffect::NoExecute);
    assert_eq!(
        pb.taints[0].time_added,
        Time::parse_rfc3339("2026-11-23T18:00:00Z")
    );
    assert_eq!(pb.taints[1].time_added, None);
    assert_eq!(pb.ready().unwrap().status, ConditionStatus::Unknown);
    assert_eq!(pb.other_conditions.len(), 0);
}

#[test]
fn a_node_lease_renewal_decodes_the_same_from_protobuf_as_from_json() {
    let (json, pb) = both::<Lease>(LEASE_JSON, LEASE_PB);
    assert_eq!(pb, json);
    assert!(pb.renew_time.is_some());
}

#[test]
fn pods_decode_the_same_from_protobuf_as_from_json() {
    let (json, pb) = both::<Pod>(POD_JSON, POD_PB);
    assert_eq!(pb, json);
    assert_eq!(pb.ready, Some(ConditionStatus::True));
    assert_eq!(pb.tolerations.len(), 2);
    let (json, mut pb) = both::<Pod>(DS_POD_JSON, DS_POD_PB);
    pb.uid = json.uid.clone();
    assert_eq!(pb, json);
    assert!(pb.daemonset_owned);
    assert_eq!(pb.tolerations.len(), 3);
    assert_eq!(pb.tolerations[2].toleration_seconds, Some(6000));
}

#[test]
fn pods_from_protobuf_share_interned_names_and_toleration_lists() {
    let mut ctx = DecodeContext::new();
    let a: Pod = decode_object(POD_PB, &mut ctx).unwrap();
    let b: Pod = decode_object(POD_PB, &mut ctx).unwrap();
    assert!(Rc::ptr_eq(&a.tolerations, &b.tolerations));
    assert!(Rc::ptr_eq(&a.key.namespace, &b.key.namespace));
}

/// Every prefix of a real object is an error naming where it stopped, never a panic; only the
/// envelope's last two (empty) fields may be cut off without losing anything.
#[test]
fn an_object_truncated_at_any_byte_is_an_error_not_a_panic() {
    fn check<T: ProtoWire + PartialEq + std::fmt::Debug>(pb: &[u8]) {
        let whole: T = decode_object(pb, &mut DecodeContext::new()).unwrap();
        for len in 0..pb.len() {
            match decode_object::<T>(&pb[..len], &mut DecodeContext::new()) {
                Err(e) => assert!(e.to_string().contains(T::KIND), "{e}"),
                Ok(got) => {
                    assert!(len >= pb.len() - 4, "a {}-byte prefix decoded", len);
                    assert_eq!(got, whole);
                }
            }
        }
    }
    check::<Node>(NODE_PB);
    check::<Node>(EDGE_NODE_PB);
    check::<Lease>(LEASE_PB);
    check::<Pod>(POD_PB);
    check::<Pod>(DS_POD_PB);
}

// A tiny encoder for hand-made messages (`tests_utf8.rs` builds with it too).
pub(super) fn tag(number: u32, wire_type: u64) -> Vec<u8> {
    enc_varint((u64::from(number) << 3) | wire_type)
}
pub(super) fn enc_varint(mut v: u64) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let byte = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out.push(byte);
            return out;
        }
        out.push(byte | 0x80);
    }
}
pub(super) fn len_field(number: u32, content: &[u8]) -> Vec<u8> {
    [
        tag(number, 2),
        enc_varint(content.len() as u64),
        content.to_vec(),
    ]
    .concat()
}
pub(super) fn varint_field(number: u32, v: u64) -> Vec<u8> {
    [tag(number, 0), enc_varint(v)].concat()
}
pub(super) fn envelope(object: &[u8]) -> Vec<u8> {
    let type_meta = len_field(1, &[len_field(1, b"v1"), len_field(2, b"Thing")].concat());
    [MAGIC.to_vec(), type_meta, len_field(2, object)].concat()
}
fn time(seconds: u64, nanos: u64) -> Vec<u8> {
    [varint_field(1, seconds), varint_field(2, nanos)].concat()
}
fn lease(name: &[u8], spec: &[u8], extra: &[u8]) -> Vec<u8> {
    let meta = [len_field(1, name), len_field(6, b"17")].concat();
    envelope(&[len_field(1, &meta), len_field(2, spec), extra.to_vec()].concat())
}

#[test]
fn unknown_fields_of_every_wire_type_are_skipped() {
    let unknown = [
        varint_field(99, 12345),
        tag(98, 1),
        vec![0; 8],
        tag(97, 5),
        vec![0; 4],
        len_field(96, b"managedFields and images"),
    ]
    .concat();
    let spec = [
        unknown.clone(),
        varint_field(2, 40),
        len_field(4, &time(1_700_000_000, 123_456_000)),
    ]
    .concat();
    let l: Lease =
        decode_object(&lease(b"n1", &spec, &unknown), &mut DecodeContext::new()).unwrap();
    assert_eq!(&*l.name, "n1");
    assert_eq!(&*l.resource_version, "17");
    assert_eq!(
        l.renew_time,
        Some(Time::from_unix_millis(1_700_000_000_123))
    );
    assert_eq!(l.duration_seconds, Some(40));
}

#[test]
fn missing_optional_fields_and_empty_repeated_fields_read_as_absent() {
    let l: Lease = decode_object(&lease(b"n1", b"", b""), &mut DecodeContext::new()).unwrap();
    assert_eq!(l.renew_time, None);
    assert_eq!(l.duration_seconds, None);
    // An empty Time message is Go's zero time, which JSON writes as null.
    let l: Lease = decode_object(
        &lease(b"n1", &len_field(4, b""), b""),
        &mut DecodeContext::new(),
    )
    .unwrap();
    assert_eq!(l.renew_time, None);
    let node = envelope(&len_field(1, &len_field(1, b"bare")));
    let n: Node = decode_object(&node, &mut DecodeContext::new()).unwrap();
    assert_eq!(&*n.name, "bare");
    assert!(n.taints.is_empty() && n.conditions.is_empty() && n.labels.is_empty());
    assert_eq!(n.creation_timestamp, Time::ZERO);
}

#[test]
fn the_same_fields_are_required_and_lenient_as_in_json() {
    let e = decode_object::<Lease>(&lease(b"", b"", b""), &mut DecodeContext::new()).unwrap_err();
    assert_eq!(e.to_string(), "cannot decode Lease: missing metadata.name");
    // A Lease's renewTime is strict (docs/upstream.md, "Node health": a bad heartbeat must not read
    // as none) ...
    let bad = len_field(4, &time(1, 2_000_000_000));
    let e = decode_object::<Lease>(&lease(b"n", &bad, b""), &mut DecodeContext::new()).unwrap_err();
    assert!(
        e.to_string().contains("spec.renewTime: bad timestamp"),
        "{e}"
    );
    // ... a taint's timeAdded is lenient: the node is kept without it.
    let taint = [
        len_field(1, b"k"),
        len_field(3, b"NoSchedule"),
        len_field(4, &time(1, 2_000_000_000)),
    ]
    .concat();
    let node = envelope(
        &[
            len_field(1, &len_field(1, b"n")),
            len_field(2, &len_field(5, &taint)),
        ]
        .concat(),
    );
    let mut ctx = DecodeContext::new();
    let n: Node = decode_object(&node, &mut ctx).unwrap();
    assert_eq!(n.taints.len(), 1);
    assert_eq!(n.taints[0].time_added, None);
    assert_eq!(ctx.bad_fields_logged(), 1);
}

#[test]
fn malformed_messages_are_one_line_errors_naming_the_field_and_offset() {
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (b"{\"kind\":\"Lease\"}".to_vec(), "magic"),
        // metadata.name is not UTF-8
        (lease(b"\xff\xfe", b"", b""), "metadata.name at byte"),
        // a string where a varint belongs
        (
            lease(b"n", &len_field(4, &len_field(1, b"x")), b""),
            "spec.renewTime at byte",
        ),
        // a length far past the end: refused, not allocated
        (
            envelope(&[tag(1, 2), enc_varint(1 << 60)].concat()),
            "past the end",
        ),
        // a group (wire type 3)
        (envelope(&tag(5, 3)), "unsupported wire type 3"),
        // a varint that never ends
        (
            envelope(&[tag(7, 0), vec![0xff; 11]].concat()),
            "varint longer",
        ),
        (envelope(&[0]), "field number 0"),
    ];
    for (body, expected) in cases {
        let e = decode_object::<Lease>(&body, &mut DecodeContext::new()).unwrap_err();
        let text = e.to_string();
        assert!(text.contains(expected), "{text} (expected {expected})");
        assert!(text.starts_with("cannot decode Lease"), "{text}");
        assert!(!text.contains('\n'), "{text}");
    }
}

#[test]
fn a_watch_error_event_from_the_real_server_is_the_410_status() {
    let frame = &WATCH_EXPIRED[4..];
    let len = u32::from_be_bytes(WATCH_EXPIRED[..4].try_into().unwrap()) as usize;
    assert_eq!(len, frame.len());
    let event = decode_watch_event::<Node>(frame, &mut DecodeContext::new()).unwrap();
    let WatchEvent::Error(Status {
        code,
        reason,
        message,
    }) = event
    else {
        panic!("{event:?}");
    };
    assert_eq!((code, reason.as_str()), (410, "Expired"));
    assert!(message.starts_with("too old resource version"), "{message}");
}

fn watch_frame(kind: &str, object: &[u8]) -> Vec<u8> {
    [
        len_field(1, kind.as_bytes()),
        len_field(2, &len_field(1, &envelope(object))),
    ]
    .concat()
}

#[test]
fn watch_events_of_every_type_decode_from_protobuf_frames() {
    let mut ctx = DecodeContext::new();
    // The Lease message inside the fixture's envelope.
    let raw = unwrap_envelope(LEASE_PB).unwrap();
    let lease_msg = raw.buf;
    for (kind, expect) in [("ADDED", 0), ("MODIFIED", 1), ("DELETED", 2)] {
        let event = decode_watch_event::<Lease>(&watch_frame(kind, lease_msg), &mut ctx).unwrap();
        let got = match event {
            WatchEvent::Added(_) => 0,
            WatchEvent::Modified(_) => 1,
            WatchEvent::Deleted(_) => 2,
            other => panic!("{other:?}"),
        };
        assert_eq!(got, expect);
    }
    let annotation = [
        len_field(1, INITIAL_EVENTS_END.as_bytes()),
        len_field(2, b"true"),
    ]
    .concat();
    let meta = [len_field(6, b"999"), len_field(12, &annotation)].concat();
    let event =
        decode_watch_event::<Lease>(&watch_frame("BOOKMARK", &len_field(1, &meta)), &mut ctx)
            .unwrap();
    assert_eq!(
        event,
        WatchEvent::Bookmark(Bookmark {
            resource_version: "999".into(),
            initial_events_end: true
        })
    );
    let e = decode_watch_event::<Lease>(&watch_frame("SURPRISE", lease_msg), &mut ctx).unwrap_err();
    assert!(e.to_string().contains("unknown event type"), "{e}");
    let e = decode_watch_event::<Lease>(&len_field(1, b"ADDED"), &mut ctx).unwrap_err();
    assert!(e.to_string().contains("no type or no object"), "{e}");
}

use crate::decode::INITIAL_EVENTS_END;

/// A pod's creationTimestamp (ObjectMeta field 8) from protobuf: the real server's objects
/// give the same second as their JSON, and a hand-built pod reads its seconds; Go's zero time
/// (an empty message) is none, and an unreadable one costs only that field, as in JSON.
#[test]
fn a_pods_creation_timestamp_decodes_from_protobuf() {
    let (json, pb) = both::<Pod>(POD_JSON, POD_PB);
    assert_eq!(
        pb.creation_timestamp,
        Time::parse_rfc3339("2026-11-23T18:11:46Z")
    );
    assert_eq!(pb.creation_timestamp, json.creation_timestamp);
    let (_, ds) = both::<Pod>(DS_POD_JSON, DS_POD_PB);
    assert!(ds.creation_timestamp.is_some());
    let pod = |created: &[u8]| {
        let meta = [
            len_field(1, b"p"),
            len_field(3, b"d"),
            len_field(8, created),
        ]
        .concat();
        let spec = len_field(10, b"n1");
        envelope(&[len_field(1, &meta), len_field(2, &spec)].concat())
    };
    let mut ctx = DecodeContext::new();
    let p: Pod = decode_object(&pod(&time(1_700_000_000, 0)), &mut ctx).unwrap();
    assert_eq!(
        p.creation_timestamp,
        Some(Time::from_unix_millis(1_700_000_000_000))
    );
    assert_eq!(p.node_name.as_deref(), Some("n1"));
    let p: Pod = decode_object(&pod(b""), &mut ctx).unwrap();
    assert_eq!(p.creation_timestamp, None);
    let p: Pod = decode_object(&pod(&time(1, 2_000_000_000)), &mut ctx).unwrap();
    assert_eq!(p.creation_timestamp, None);
    assert_eq!(ctx.bad_fields_logged(), 1);
}

/// Every field `next_field` (or, with `long`, the general path alone) reads in `buf`, and in
/// each length-delimited value read as a message in turn: number, value, offset, or the error.
fn trace(buf: &[u8], long: bool, depth: u32, out: &mut Vec<String>) {
    let mut r = Reader::new(buf, "test");
    loop {
        let f = if long {
            r.next_field_long()
        } else {
            r.next_field()
        };
        match f {
            Ok(Some(f)) => {
                out.push(format!("{} {:?} {}", f.number, f.value, f.offset));
                if let Value::Bytes(b) = f.value
                    && depth < 6
                {
                    trace(b, long, depth + 1, out);
                }
            }
            other => {
                out.push(format!("{other:?}"));
                return;
            }
        }
    }
}

/// `next_field`'s fast path reads what the general path reads, field for field and error for
/// error: on the server's fixtures, and on them cut short or with bytes changed.
#[test]
fn the_fast_path_of_next_field_reads_what_the_general_path_reads() {
    let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for fixture in [LEASE_PB, NODE_PB, POD_PB, DS_POD_PB, WATCH_EXPIRED] {
        for round in 0..400 {
            let mut input = fixture[4..].to_vec();
            if round > 0 {
                for _ in 0..1 + next() % 3 {
                    let at = (next() as usize) % input.len();
                    input[at] = next() as u8;
                }
                if round % 3 == 0 {
                    input.truncate((next() as usize) % input.len());
                }
            }
            let (mut fast, mut long) = (Vec::new(), Vec::new());
            trace(&input, false, 0, &mut fast);
            trace(&input, true, 0, &mut long);
            assert_eq!(fast, long, "round {round}");
        }
    }
}
