//! A node's fast paths give what the full ones give: its label set and condition texts found
//! by the wire's text in the decoder's tables (`shared_text.rs`), its condition texts checked
//! as UTF-8 only when they match no known text, and a whole second's stamp read without the
//! field loop (`objects::stamp`).

use std::rc::Rc;

use super::objects::{stamp, stamp_fields};
use super::tests::{envelope, len_field, varint_field};
use super::*;
use crate::model::{ConditionStatus, Node, TaintEffect};

/// A condition as written: type, status, heartbeat second, reason, message.
type Cond<'a> = (&'a [u8], &'a [u8], u64, &'a [u8], &'a [u8]);

fn time(seconds: u64) -> Vec<u8> {
    varint_field(1, seconds)
}

/// A node named `node-1` with these labels, NoExecute taints and conditions.
fn node(rv: &str, labels: &[(&str, &str)], taints: &[&str], conditions: &[Cond<'_>]) -> Vec<u8> {
    let mut meta = [
        len_field(1, b"node-1"),
        len_field(5, b"6f1c2a4e-0000-4000-8000-000000000001"),
        len_field(6, rv.as_bytes()),
        len_field(8, &time(1_700_000_000)),
    ]
    .concat();
    for (k, v) in labels {
        let entry = [len_field(1, k.as_bytes()), len_field(2, v.as_bytes())].concat();
        meta.extend(len_field(11, &entry));
    }
    let mut spec = Vec::new();
    for key in taints {
        let taint = [len_field(1, key.as_bytes()), len_field(3, b"NoExecute")].concat();
        spec.extend(len_field(5, &taint));
    }
    let mut status = Vec::new();
    for (kind, st, beat, reason, message) in conditions {
        let c = [
            len_field(1, kind),
            len_field(2, st),
            len_field(3, &time(*beat)),
            len_field(4, &time(1_700_000_000)),
            len_field(5, reason),
            len_field(6, message),
        ]
        .concat();
        status.extend(len_field(4, &c));
    }
    envelope(
        &[
            len_field(1, &meta),
            len_field(2, &spec),
            len_field(3, &status),
        ]
        .concat(),
    )
}

const ZONE_A: [(&str, &str); 3] = [
    ("kubernetes.io/hostname", "node-1"),
    ("kubernetes.io/os", "linux"),
    ("topology.kubernetes.io/zone", "zone-a"),
];
const ZONE_B: [(&str, &str); 3] = [
    ("kubernetes.io/hostname", "node-1"),
    ("kubernetes.io/os", "linux"),
    ("topology.kubernetes.io/zone", "zone-b"),
];

fn kubelet(beat: u64, ready: &'static [u8], reason: &'static [u8]) -> Vec<Cond<'static>> {
    vec![
        (
            b"MemoryPressure",
            b"False",
            beat,
            b"KubeletHasSufficientMemory",
            b"kubelet has sufficient memory available",
        ),
        (
            b"Ready",
            ready,
            beat,
            reason,
            b"kubelet is posting ready status",
        ),
        // A duplicate (the first is kept) and a type the model does not name.
        (b"Ready", b"False", beat, b"Other", b""),
        (b"Custom", b"True", beat, b"", b"custom text"),
    ]
}

#[test]
fn a_node_decoded_through_a_warm_context_is_the_node_a_fresh_one_gives() {
    // The kubelet's versions of one node: heartbeats, a label changed, a condition's status
    // and texts changed, a taint, and back.
    let versions = [
        node("1", &ZONE_A, &[], &kubelet(10, b"True", b"KubeletReady")),
        node("2", &ZONE_A, &[], &kubelet(20, b"True", b"KubeletReady")),
        node("3", &ZONE_B, &[], &kubelet(30, b"True", b"KubeletReady")),
        node(
            "4",
            &ZONE_B,
            &[],
            &kubelet(40, b"False", b"KubeletNotReady"),
        ),
        node(
            "5",
            &ZONE_B,
            &["node.kubernetes.io/not-ready"],
            &kubelet(50, b"False", b"KubeletNotReady"),
        ),
        node("6", &ZONE_A, &[], &kubelet(60, b"True", b"KubeletReady")),
        node("7", &ZONE_A, &[], &kubelet(70, b"True", b"")),
    ];
    let mut warm = DecodeContext::new();
    let mut held: Vec<Node> = Vec::new();
    for body in &versions {
        let fresh: Node = decode_object(body, &mut DecodeContext::new()).unwrap();
        let got: Node = decode_object(body, &mut warm).unwrap();
        assert_eq!(got, fresh);
        held.push(got);
    }
    let (first, beat) = (&held[0], &held[1]);
    assert_eq!(first.conditions.len(), 2);
    assert_eq!(first.other_conditions.len(), 1);
    assert_eq!(beat.ready().unwrap().status, ConditionStatus::True);
    assert_eq!(held[3].ready().unwrap().status, ConditionStatus::False);
    assert_eq!(
        held[4].taints.first().map(|t| (&*t.key, &t.effect)),
        Some(("node.kubernetes.io/not-ready", &TaintEffect::NoExecute))
    );
    // A heartbeat shares what the version before it holds: the label set, each text.
    assert!(Rc::ptr_eq(first.labels.shared(), beat.labels.shared()));
    assert!(Rc::ptr_eq(first.labels.shared(), held[5].labels.shared()));
    assert!(!Rc::ptr_eq(first.labels.shared(), held[2].labels.shared()));
    for (a, b) in first.conditions.iter().zip(&beat.conditions) {
        assert!(Rc::ptr_eq(a.text.pair().unwrap(), b.text.pair().unwrap()));
    }
    assert_eq!(
        held[6].ready().unwrap().text.message().map(|m| &**m),
        Some("kubelet is posting ready status")
    );
    assert_eq!(held[6].ready().unwrap().text.reason(), None);
}

/// Not UTF-8 (a lone continuation byte), after two ASCII bytes.
const BAD: &[u8] = b"ab\x80";

#[test]
fn a_condition_text_that_is_not_utf8_refuses_the_node_naming_the_field_and_byte() {
    let fields = ["type", "status", "reason", "message"];
    let good = kubelet(10, b"True", b"KubeletReady");
    // Each text of each condition: a kept one, the duplicate, the unnamed type.
    for at_condition in 0..good.len() {
        for (i, field) in fields.iter().enumerate() {
            let mut conditions = good.clone();
            let c = &mut conditions[at_condition];
            match i {
                0 => c.0 = BAD,
                1 => c.1 = BAD,
                2 => c.3 = BAD,
                _ => c.4 = BAD,
            }
            let body = node("2", &ZONE_A, &[], &conditions);
            let at = body.windows(BAD.len()).position(|w| w == BAD).unwrap() + 2;
            // Afresh, and after the good node (whose texts the decoder then holds).
            let mut warm = DecodeContext::new();
            decode_object::<Node>(&node("1", &ZONE_A, &[], &good), &mut warm).unwrap();
            for ctx in [&mut DecodeContext::new(), &mut warm] {
                let e = decode_object::<Node>(&body, ctx).unwrap_err().to_string();
                assert_eq!(
                    e,
                    format!(
                        "cannot decode Node: protobuf status.conditions.{field} at byte {at}: \
                         a string that is not UTF-8"
                    ),
                    "condition {at_condition}"
                );
            }
        }
    }
}

fn enc_varint(mut v: u64) -> Vec<u8> {
    let mut out = Vec::new();
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
    out
}

#[test]
fn the_fast_path_of_stamp_reads_what_the_field_loop_reads() {
    let mut bodies: Vec<Vec<u8>> = vec![vec![], vec![0x08], vec![0x08, 0x80], vec![0x10, 0x05]];
    for seconds in [0, 1, 127, 128, 1_795_000_000, i64::MAX as u64, u64::MAX] {
        let v = enc_varint(seconds);
        bodies.push([&[0x08][..], &v].concat());
        for nanos in [
            &[0x10, 0x00][..],
            &[0x10, 0x07],
            &[0x10, 0x7f],
            &[0x10, 0x80, 0x01],
        ] {
            bodies.push([&[0x08][..], &v, nanos].concat());
            bodies.push([&[0x08][..], &v, nanos, &[0x10, 0x01]].concat());
        }
        bodies.push([&[0x08][..], &v, &[0x10]].concat());
        bodies.push([&[0x08][..], &v, &[0x10, 0x80]].concat());
        bodies.push([&[0x08][..], &v, &[0x18, 0x01]].concat());
        bodies.push([&[0x10, 0x07, 0x08][..], &v].concat());
        bodies.push([&[0x08][..], &v, &[0x08, 0x01]].concat());
        for cut in 1..v.len() {
            bodies.push([&[0x08][..], &v[..cut]].concat());
        }
    }
    // Eleven bytes of varint: too long.
    bodies.push([&[0x08][..], &[0xff; 10], &[0x01]].concat());
    for body in &bodies {
        for value in [Value::Bytes(body), Value::Varint(3)] {
            let f = Field {
                number: 3,
                value,
                offset: 7,
            };
            assert_eq!(
                format!("{:?}", stamp(&f, "t")),
                format!("{:?}", stamp_fields(&f, "t")),
                "{body:x?}"
            );
        }
    }
}
