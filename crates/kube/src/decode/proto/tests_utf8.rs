//! Which of a pod's strings are checked as UTF-8: what the model keeps is (a byte that is not
//! UTF-8 refuses the pod, naming the field and the byte), what it only compares is not (such a
//! byte reads as text that matches nothing).

use super::tests::{envelope, len_field, varint_field};
use super::*;
use crate::model::{ConditionStatus, Pod};

/// The string fields of the pod [`pod`] builds, by the path errors name them.
const KEPT: [&str; 9] = [
    "metadata.name",
    "metadata.namespace",
    "metadata.uid",
    "metadata.resourceVersion",
    "spec.nodeName",
    "spec.tolerations.key",
    "spec.tolerations.operator",
    "spec.tolerations.value",
    "spec.tolerations.effect",
];
const COMPARED: [&str; 5] = [
    "metadata.ownerReferences.kind",
    "status.conditions.type",
    "status.conditions.status",
    "status.conditions.reason",
    "status.conditions.message",
];

/// A pod with a DaemonSet owner, one toleration (operator `Equal`, so every field of it is
/// kept) and a `Ready` condition; the field at `path` (if any) is `replaced` instead.
fn pod(path: &str, replaced: &[u8]) -> Vec<u8> {
    let s = |p: &str, text: &'static str| -> Vec<u8> {
        if p == path {
            replaced.to_vec()
        } else {
            text.as_bytes().to_vec()
        }
    };
    let owner = [
        len_field(1, &s("metadata.ownerReferences.kind", "DaemonSet")),
        varint_field(6, 1),
    ]
    .concat();
    let meta = [
        len_field(1, &s("metadata.name", "web-1")),
        len_field(3, &s("metadata.namespace", "shop")),
        len_field(
            5,
            &s("metadata.uid", "6f1c2a4e-0000-4000-8000-000000000001"),
        ),
        len_field(6, &s("metadata.resourceVersion", "1001")),
        len_field(13, &owner),
    ]
    .concat();
    let toleration = [
        len_field(1, &s("spec.tolerations.key", "dedicated")),
        len_field(2, &s("spec.tolerations.operator", "Equal")),
        len_field(3, &s("spec.tolerations.value", "gpu")),
        len_field(4, &s("spec.tolerations.effect", "NoExecute")),
    ]
    .concat();
    let spec = [
        len_field(10, &s("spec.nodeName", "node-1")),
        len_field(22, &toleration),
    ]
    .concat();
    let condition = [
        len_field(1, &s("status.conditions.type", "Ready")),
        len_field(2, &s("status.conditions.status", "True")),
        len_field(5, &s("status.conditions.reason", "")),
        len_field(6, &s("status.conditions.message", "")),
    ]
    .concat();
    let status = len_field(2, &condition);
    envelope(
        &[
            len_field(1, &meta),
            len_field(2, &spec),
            len_field(3, &status),
        ]
        .concat(),
    )
}

/// Not UTF-8 (a lone continuation byte), after two ASCII bytes.
const BAD: &[u8] = b"ab\x80";

#[test]
fn a_kept_string_that_is_not_utf8_refuses_the_pod_naming_the_field_and_byte() {
    let good: Pod = decode_object(&pod("", b""), &mut DecodeContext::new()).unwrap();
    assert_eq!(good.ready, Some(ConditionStatus::True));
    assert!(good.daemonset_owned);
    for path in KEPT {
        let body = pod(path, BAD);
        let at = body.iter().position(|&b| b == 0x80).unwrap();
        // Afresh, and after the good pod (whose toleration list the decoder then remembers
        // and compares the next pod's with, before converting it).
        let mut warm = DecodeContext::new();
        decode_object::<Pod>(&pod("", b""), &mut warm).unwrap();
        for ctx in [&mut DecodeContext::new(), &mut warm] {
            let e = decode_object::<Pod>(&body, ctx).unwrap_err().to_string();
            assert_eq!(
                e,
                format!(
                    "cannot decode Pod: protobuf {path} at byte {at}: a string that is not UTF-8"
                )
            );
        }
    }
}

#[test]
fn a_compared_string_that_is_not_utf8_reads_as_text_that_matches_nothing() {
    for path in COMPARED {
        let mut ctx = DecodeContext::new();
        let got: Pod = decode_object(&pod(path, BAD), &mut ctx).unwrap();
        let other: Pod = decode_object(&pod(path, b"ab?"), &mut ctx).unwrap();
        assert_eq!(got, other, "{path}");
    }
    // As before: an unknown kind is no DaemonSet, an unknown type no Ready, an unknown status
    // is Other.
    let decode = |path| decode_object::<Pod>(&pod(path, BAD), &mut DecodeContext::new());
    assert!(
        !decode("metadata.ownerReferences.kind")
            .unwrap()
            .daemonset_owned
    );
    assert_eq!(decode("status.conditions.type").unwrap().ready, None);
    assert_eq!(
        decode("status.conditions.status").unwrap().ready,
        Some(ConditionStatus::Other)
    );
}

/// `utf8`'s ASCII path answers what `from_utf8` answers (text, or where it stops being UTF-8),
/// for every length around the word size and a high byte at every place.
#[test]
fn the_ascii_path_of_utf8_reads_what_from_utf8_reads() {
    for len in 0..40 {
        let ascii: Vec<u8> = (0..len).map(|i| b'a' + (i % 26) as u8).collect();
        assert_eq!(utf8(&ascii), std::str::from_utf8(&ascii));
        for at in 0..len {
            for high in [0x80, 0xc3, 0xff, 0x7f] {
                let mut b = ascii.clone();
                b[at] = high;
                assert_eq!(utf8(&b), std::str::from_utf8(&b), "{b:?}");
                // A whole two-byte character (é) at `at`.
                b.insert(at + 1, 0xa9);
                b[at] = 0xc3;
                assert_eq!(utf8(&b), std::str::from_utf8(&b), "{b:?}");
            }
        }
    }
}
