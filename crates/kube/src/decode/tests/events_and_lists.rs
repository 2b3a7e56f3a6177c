//! Watch event lines and LIST pages: every event type, fields in any order, continue tokens,
//! undecodable items, real heartbeat lines, and mutated input that never panics.

use super::*;

fn event_line(kind: &str, object: &str) -> String {
    format!(r#"{{"type":"{kind}","object":{object}}}"#)
}

#[test]
fn watch_event_types_decode_by_type() {
    let mut ctx = DecodeContext::new();
    let lease = r#"{"metadata":{"name":"n1","resourceVersion":"5"},"spec":{"renewTime":"2024-01-01T00:00:00.000000Z"}}"#;
    for (kind, expect) in [("ADDED", 0), ("MODIFIED", 1), ("DELETED", 2)] {
        let e: WatchEvent<Lease> =
            decode_watch_event(event_line(kind, lease).as_bytes(), &mut ctx).unwrap();
        let idx = match e {
            WatchEvent::Added(_) => 0,
            WatchEvent::Modified(_) => 1,
            WatchEvent::Deleted(_) => 2,
            _ => 9,
        };
        assert_eq!(idx, expect, "{kind}");
    }
    let bookmark = r#"{"kind":"Lease","apiVersion":"coordination.k8s.io/v1","metadata":{"resourceVersion":"12746","creationTimestamp":null,"annotations":{"k8s.io/initial-events-end":"true"}},"spec":{}}"#;
    let e: WatchEvent<Lease> =
        decode_watch_event(event_line("BOOKMARK", bookmark).as_bytes(), &mut ctx).unwrap();
    assert_eq!(
        e,
        WatchEvent::Bookmark(Bookmark {
            resource_version: "12746".into(),
            initial_events_end: true
        })
    );
    let plain = r#"{"metadata":{"resourceVersion":"13000","creationTimestamp":null},"spec":{}}"#;
    let e: WatchEvent<Lease> =
        decode_watch_event(event_line("BOOKMARK", plain).as_bytes(), &mut ctx).unwrap();
    assert_eq!(
        e,
        WatchEvent::Bookmark(Bookmark {
            resource_version: "13000".into(),
            initial_events_end: false
        })
    );
    let gone = r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"too old resource version: 1 (4819)","reason":"Expired","code":410}"#;
    let e: WatchEvent<Lease> =
        decode_watch_event(event_line("ERROR", gone).as_bytes(), &mut ctx).unwrap();
    assert_eq!(
        e,
        WatchEvent::Error(Status {
            code: 410,
            reason: "Expired".into(),
            message: "too old resource version: 1 (4819)".into()
        })
    );
}

#[test]
fn object_before_type_still_decodes_and_bad_events_are_errors() {
    let mut ctx = DecodeContext::new();
    let line = r#"{"object":{"metadata":{"name":"n1","resourceVersion":"5"}},"type":"MODIFIED"}"#;
    let e: WatchEvent<Lease> = decode_watch_event(line.as_bytes(), &mut ctx).unwrap();
    assert!(matches!(e, WatchEvent::Modified(l) if &*l.name == "n1"));
    for bad in [
        r#"{"type":"RENAMED","object":{}}"#,
        r#"{"type":"ADDED"}"#,
        r#"{"object":{}}"#,
        r#"{"type":"ADDED","object":{"metadata":{}}}"#,
        r#"[1,2]"#,
        r#"{"type":"ADDED","object":{"metadata":{"name":"x"}}"#,
    ] {
        assert!(
            decode_watch_event::<Lease>(bad.as_bytes(), &mut ctx).is_err(),
            "{bad}"
        );
    }
}

#[test]
fn list_page_with_continue_and_an_undecodable_item() {
    let mut ctx = DecodeContext::new();
    let json = r#"{"kind":"LeaseList","apiVersion":"coordination.k8s.io/v1","metadata":{"resourceVersion":"900","continue":"eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6OTAwLCJzdGFydCI6ImIifQ","remainingItemCount":3},
        "items":[{"metadata":{"name":"a","resourceVersion":"1"}},{"metadata":{}},{"metadata":{"name":"b","resourceVersion":"2"}}]}"#;
    let page: ListPage<Lease> = decode_list(json.as_bytes(), &mut ctx).unwrap();
    assert_eq!(page.resource_version, "900");
    assert!(page.continue_token.as_deref().unwrap().starts_with("eyJ2"));
    assert_eq!(
        page.items.iter().map(|l| &*l.name).collect::<Vec<_>>(),
        ["a", "b"]
    );
    assert_eq!(page.skipped.len(), 1);
    let last: ListPage<Lease> = decode_list(
        br#"{"metadata":{"resourceVersion":"901","continue":""},"items":null}"#,
        &mut ctx,
    )
    .unwrap();
    assert_eq!(last.continue_token, None);
    assert!(last.items.is_empty());
}

#[test]
fn property_truncated_and_mutated_objects_never_panic() {
    let mut ctx = DecodeContext::new();
    let line = event_line("ADDED", POD.trim_end());
    let bytes = line.as_bytes();
    for seed in 0..300 {
        let mut rng = Rng::new(seed);
        let mut b = bytes[..rng.below(bytes.len() as u64 + 1) as usize].to_vec();
        for _ in 0..rng.below(8) {
            if !b.is_empty() {
                let i = rng.below(b.len() as u64) as usize;
                b[i] = rng.next_u64() as u8;
            }
        }
        let _ = decode_watch_event::<Pod>(&b, &mut ctx);
        let _ = decode_watch_event::<Node>(&b, &mut ctx);
    }
}

/// Real watch lines from kube-apiserver 1.20 (2,000 nodes loaded by `load.py create`), the
/// micro-benchmark's input (`examples/decode_floor.rs`): a Node after a kubelet status patch
/// (6 KB, mostly managedFields and images) and a Lease after a renewal.
const NODE_HEARTBEAT_EVENT: &str = include_str!("../fixtures/watch_node_status_heartbeat.json");
const LEASE_RENEWAL_EVENT: &str = include_str!("../fixtures/watch_lease_renewal.json");

#[test]
fn real_status_heartbeat_and_lease_renewal_lines_decode_to_the_projections() {
    let mut ctx = DecodeContext::new();
    let e = decode_watch_event::<Node>(NODE_HEARTBEAT_EVENT.trim_end().as_bytes(), &mut ctx);
    let Ok(WatchEvent::Modified(node)) = e else {
        panic!("{e:?}")
    };
    assert_eq!(&*node.name, "node-00007");
    assert_eq!(&*node.resource_version, "126214");
    assert_eq!(node.conditions.len(), 4);
    let ready = node.ready().unwrap();
    assert_eq!(ready.status, ConditionStatus::True);
    assert_eq!(ready.last_heartbeat_time, Some(t("2026-11-23T18:23:11Z")));
    let e = decode_watch_event::<Lease>(LEASE_RENEWAL_EVENT.trim_end().as_bytes(), &mut ctx);
    let Ok(WatchEvent::Modified(lease)) = e else {
        panic!("{e:?}")
    };
    assert_eq!(&*lease.name, "node-00007");
    assert_eq!(&*lease.resource_version, "126215");
    assert_eq!(lease.renew_time, Some(t("2026-11-23T18:23:11.364Z")));
}
