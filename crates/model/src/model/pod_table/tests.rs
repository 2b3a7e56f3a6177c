use std::collections::BTreeMap;
use std::rc::Rc;

use super::*;
use crate::model::{TaintEffect, TolerationOperator};

fn n(s: &str) -> Name {
    Rc::from(s)
}

fn pod(ns: &str, name: &str, node: Option<&str>, rv: &str) -> Pod {
    Pod {
        key: PodKey {
            namespace: n(ns),
            name: n(name),
        },
        uid: n("0f6bd7b6-2a33-4c55-9d1e-7a6b3f0c9e12"),
        resource_version: n(rv),
        node_name: node.map(n),
        ready: Some(ConditionStatus::True),
        tolerations: Rc::from(Vec::new()),
        deleting: false,
        daemonset_owned: false,
        disruption_target: false,
        creation_timestamp: None,
    }
}

fn changed(u: PodUpsert) -> PodChange {
    match u {
        PodUpsert::Changed(c) => c,
        other => panic!("expected a change, got {other:?}"),
    }
}

#[test]
fn a_pod_reads_back_exactly_as_stored() {
    let mut t = PodTable::new();
    let mut p = pod("default", "web-1", Some("n1"), "42");
    p.tolerations = Rc::from(vec![Toleration {
        key: n("node.kubernetes.io/unreachable"),
        operator: TolerationOperator::Exists,
        value: n(""),
        effect: Some(TaintEffect::NoExecute),
        toleration_seconds: Some(300),
    }]);
    p.daemonset_owned = true;
    let c = changed(t.upsert(p.clone()));
    assert!(c.before.is_none());
    assert_eq!(t.view(c.id).to_pod(), p);
    // Text uids and resourceVersions (not in the compact form) come back unchanged too.
    let mut odd = pod("kube-system", "x", None, "007");
    odd.uid = n("uid-x");
    odd.ready = None;
    t.upsert(odd.clone());
    assert_eq!(t.get(&odd.key).unwrap().to_pod(), odd);
    assert_eq!(t.len(), 2);
}

#[test]
fn an_older_version_never_replaces_a_newer_one() {
    let mut t = PodTable::new();
    t.upsert(pod("default", "web-1", Some("n1"), "10"));
    let mut ours = pod("default", "web-1", Some("n1"), "12");
    ours.ready = Some(ConditionStatus::False);
    changed(t.upsert(ours));
    // The watch event of version 11 arrives after our write's answer (version 12).
    let mut late = pod("default", "web-1", Some("n1"), "11");
    late.ready = Some(ConditionStatus::True);
    assert!(matches!(t.upsert(late), PodUpsert::Older));
    let key = pod("default", "web-1", None, "0").key;
    assert_eq!(t.get(&key).unwrap().ready(), Some(ConditionStatus::False));
    assert_eq!(&*t.get(&key).unwrap().resource_version(), "12");
    // The watch's echo of our own write is no change either.
    let mut echo = pod("default", "web-1", Some("n1"), "12");
    echo.ready = Some(ConditionStatus::False);
    assert!(matches!(t.upsert(echo), PodUpsert::Unchanged));
}

#[test]
fn the_node_index_follows_binds_moves_and_deletes() {
    let mut t = PodTable::new();
    for (name, node) in [("b", "n1"), ("a", "n1"), ("c", "n2")] {
        t.upsert(pod("default", name, Some(node), "1"));
    }
    let names = |t: &PodTable, node: &str| -> Vec<String> {
        t.on_node(node)
            .into_iter()
            .map(|id| t.view(id).name().to_string())
            .collect()
    };
    assert_eq!(names(&t, "n1"), ["a", "b"]);
    let c = changed(t.upsert(pod("default", "b", Some("n2"), "2")));
    assert_eq!(c.before.unwrap().node.as_deref(), Some("n1"));
    assert_eq!(names(&t, "n1"), ["a"]);
    assert_eq!(names(&t, "n2"), ["b", "c"]);
    assert_eq!(
        t.remove(&pod("default", "a", None, "0").key),
        Some(Some(n("n1")))
    );
    assert!(names(&t, "n1").is_empty());
    assert_eq!(t.count_on_node("n1"), 0);
    assert_eq!(t.len(), 2);
}

#[test]
fn a_full_state_removes_what_it_did_not_deliver() {
    let mut t = PodTable::new();
    for name in ["a", "b", "c"] {
        t.upsert(pod("default", name, Some("n1"), "1"));
    }
    t.begin_full_state();
    t.upsert(pod("default", "a", Some("n1"), "1")); // unchanged, still seen
    t.upsert(pod("default", "c", Some("n1"), "5"));
    let gone = t.end_full_state();
    assert_eq!(gone.len(), 1);
    assert_eq!(&*gone[0].0.name, "b");
    assert_eq!(gone[0].1.as_deref(), Some("n1"));
    assert_eq!(t.len(), 2);
}

/// Slots, ids and hashes stay consistent through random churn: the table always equals a
/// plain map of the same operations.
#[test]
fn random_churn_matches_a_plain_map() {
    let mut t = PodTable::new();
    let mut model: BTreeMap<(String, String), Pod> = BTreeMap::new();
    let mut rng = 0x2545_F491_4F6C_DD1Du64;
    let mut next = || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    for step in 0..20_000u64 {
        let r = next();
        let ns = format!("ns{}", r % 3);
        let name = format!("p{}", (r >> 8) % 200);
        let key = (ns.clone(), name.clone());
        if (r >> 20) % 4 == 0 {
            let removed = t.remove(&pod(&ns, &name, None, "0").key).is_some();
            assert_eq!(removed, model.remove(&key).is_some());
        } else {
            let node = format!("n{}", (r >> 24) % 7);
            let p = pod(&ns, &name, Some(&node), &(step + 1).to_string());
            t.upsert(p.clone());
            model.insert(key, p);
        }
    }
    assert_eq!(t.len(), model.len());
    for p in model.values() {
        assert_eq!(t.get(&p.key).unwrap().to_pod(), *p);
    }
    let on_nodes: usize = (0..7).map(|i| t.count_on_node(&format!("n{i}"))).sum();
    assert_eq!(on_nodes, model.len());
    t.shrink_to_fit();
    for p in model.values() {
        assert_eq!(t.get(&p.key).unwrap().to_pod(), *p);
    }
}

#[test]
fn a_pod_record_is_small() {
    assert!(
        std::mem::size_of::<Record>() <= 56,
        "{}",
        std::mem::size_of::<Record>()
    );
}

/// The creation time is kept in whole seconds (what the API keeps): it reads back, follows a
/// replacement, and a reused slot does not inherit it.
#[test]
fn the_creation_second_is_kept_and_a_reused_slot_does_not_inherit_it() {
    use crate::time::Time;
    let at = |ms: u64| Some(Time::from_unix_millis(ms));
    let mut t = PodTable::new();
    let mut a = pod("default", "a", Some("n1"), "1");
    a.creation_timestamp = at(1_700_000_000_000);
    let id = changed(t.upsert(a.clone())).id;
    assert_eq!(t.view(id).to_pod(), a);
    // Sub-second parts (never sent by the API) are dropped, never rounded up.
    let mut b = pod("default", "b", Some("n1"), "2");
    b.creation_timestamp = at(1_700_000_005_999);
    t.upsert(b.clone());
    assert_eq!(
        t.get(&b.key).unwrap().creation_timestamp(),
        at(1_700_000_005_000)
    );
    // A new pod under the same name: its own creation.
    let mut a2 = pod("default", "a", Some("n1"), "3");
    a2.uid = n("1f6bd7b6-2a33-4c55-9d1e-7a6b3f0c9e12");
    a2.creation_timestamp = at(1_700_000_009_000);
    t.upsert(a2.clone());
    assert_eq!(t.get(&a2.key).unwrap().to_pod(), a2);
    // The slot freed by "a" goes to a pod without a creation time: none.
    t.remove(&a2.key);
    let c = pod("default", "c", Some("n2"), "4");
    let id_c = changed(t.upsert(c.clone())).id;
    assert_eq!(id_c, id);
    assert_eq!(t.view(id_c).creation_timestamp(), None);
    // Through shrinking too.
    t.remove(&c.key);
    t.shrink_to_fit();
    assert_eq!(
        t.get(&b.key).unwrap().to_pod().creation_timestamp,
        at(1_700_000_005_000)
    );
}

/// The resourceVersion shares a word with the flags: setting one never disturbs the other, and
/// a version too large for its 48 bits is kept as text, read back as sent.
#[test]
fn the_resource_version_and_the_flags_share_a_word_without_disturbing_each_other() {
    let mut t = PodTable::new();
    let max = (COMPACT_RV_LIMIT - 1).to_string();
    let mut p = pod("default", "a", Some("n1"), &max);
    p.deleting = true;
    p.daemonset_owned = true;
    p.ready = Some(ConditionStatus::Unknown);
    t.upsert(p.clone());
    assert_eq!(t.get(&p.key).unwrap().to_pod(), p);
    t.set_ready(&p.key, ConditionStatus::False);
    let view = t.get(&p.key).unwrap();
    assert_eq!(&*view.resource_version(), max.as_str());
    assert!(view.deleting() && view.daemonset_owned());
    assert_eq!(view.ready(), Some(ConditionStatus::False));
    // Beyond 48 bits: text, read back as sent.
    let big = COMPACT_RV_LIMIT.to_string();
    let mut q = pod("default", "a", Some("n1"), &big);
    q.ready = Some(ConditionStatus::True);
    t.upsert(q.clone());
    assert_eq!(t.get(&q.key).unwrap().to_pod(), q);
    // An older compact version is still refused against a compact one.
    let r = pod("default", "b", Some("n1"), "1000");
    t.upsert(r.clone());
    assert!(matches!(
        t.upsert(pod("default", "b", Some("n1"), "999")),
        PodUpsert::Older
    ));
    assert_eq!(&*t.get(&r.key).unwrap().resource_version(), "1000");
}
