//! The compact parts of the table: the name arena and its compaction, the index of slots (with
//! collisions forced), churn, and a full state that drops half the pods.

use std::collections::BTreeMap;
use std::rc::Rc;

use super::names::{CHUNK, NameArena};
use super::*;

fn pod(ns: &str, name: &str, node: Option<&str>, rv: u64) -> Pod {
    Pod {
        key: PodKey {
            namespace: Rc::from(ns),
            name: Rc::from(name),
        },
        uid: Rc::from("0f6bd7b6-2a33-4c55-9d1e-7a6b3f0c9e12"),
        resource_version: Rc::from(rv.to_string()),
        node_name: node.map(Rc::from),
        ready: Some(ConditionStatus::True),
        tolerations: Rc::from(Vec::new()),
        deleting: false,
        daemonset_owned: false,
        disruption_target: false,
        creation_timestamp: None,
    }
}

/// Names of every length class: one-byte lengths, two-byte lengths (128 and more).
fn name_of(i: usize) -> String {
    match i % 7 {
        0 => format!("long-{}-{i}", "x".repeat(130 + i % 40)),
        _ => format!("web-{i:x}-{}", "abcdefghijk".get(..i % 11).unwrap_or("")),
    }
}

fn xorshift(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

/// The index holds exactly the live pods, and every one is found by its key.
fn assert_consistent(t: &PodTable, model: &BTreeMap<(String, String), Pod>) {
    assert_eq!(t.len(), model.len());
    assert_eq!(t.index.len(), model.len());
    for p in model.values() {
        let view = t.get(&p.key).expect("a live pod is found");
        assert_eq!(view.to_pod(), *p);
    }
}

#[test]
fn the_record_is_40_bytes_and_4_aligned() {
    assert_eq!(std::mem::size_of::<Record>(), 40);
    assert_eq!(std::mem::align_of::<Record>(), 4);
}

#[test]
fn the_arena_reads_back_names_of_every_length_and_closes_its_holes() {
    let mut a = NameArena::default();
    let huge = "h".repeat(CHUNK + 10);
    let names: Vec<String> = (0..2_000)
        .map(|i| if i == 500 { huge.clone() } else { name_of(i) })
        .collect();
    let offsets: Vec<u32> = names.iter().map(|n| a.push(n)).collect();
    for (n, o) in names.iter().zip(&offsets) {
        assert_eq!(a.get(*o), n.as_bytes());
    }
    // Drop two in three (the huge one too), then compact: the rest read back at new offsets.
    let mut live = Vec::new();
    for (i, o) in offsets.iter().enumerate() {
        if i % 3 == 0 {
            live.push((*o, i as u32));
        } else {
            a.remove(*o);
        }
    }
    assert!(a.wants_compaction());
    let before = a.heap_bytes();
    a.compact(&mut live);
    assert!(!a.has_holes());
    assert!(
        a.heap_bytes() < before / 2,
        "{} of {before}",
        a.heap_bytes()
    );
    for (o, i) in &live {
        assert_eq!(a.get(*o), names[*i as usize].as_bytes());
    }
    // New names after a compaction land after the survivors and read back too.
    let o = a.push("after");
    assert_eq!(a.get(o), b"after");
    assert_eq!(a.get(u32::MAX), b"", "an offset never given reads empty");
}

/// Removing pods compacts the arena by itself once a quarter of it is holes; the ids of the
/// pods that stay keep reading their own names, and `on_node` keeps its order.
#[test]
fn compaction_keeps_every_surviving_pods_name_under_its_id() {
    let mut t = PodTable::new();
    let mut ids = Vec::new();
    for i in 0..3_000 {
        let p = pod(&format!("ns{}", i % 3), &name_of(i), Some("n1"), 1);
        match t.upsert(p) {
            PodUpsert::Changed(c) => ids.push((c.id, c.key)),
            other => panic!("{other:?}"),
        }
    }
    let arena_before = t.names.used();
    let mut kept = Vec::new();
    for (i, (id, key)) in ids.into_iter().enumerate() {
        if i % 4 == 0 {
            kept.push((id, key));
        } else {
            t.remove(&key);
        }
    }
    // A quarter of the names stay: without compactions the arena would still hold them all.
    assert!(
        t.names.used() < arena_before / 2,
        "compacted on the way: {} of {arena_before}",
        t.names.used()
    );
    for (id, key) in &kept {
        assert_eq!(t.view(*id).name(), &*key.name);
        assert_eq!(t.view(*id).namespace(), &key.namespace);
        assert_eq!(t.id(key), Some(*id));
    }
    let on_node: Vec<(String, String)> = t
        .on_node("n1")
        .into_iter()
        .map(|id| (t.view(id).namespace().to_string(), t.view(id).name().into()))
        .collect();
    let mut sorted: Vec<(String, String)> = kept
        .iter()
        .map(|(_, k)| (k.namespace.to_string(), k.name.to_string()))
        .collect();
    sorted.sort();
    assert_eq!(on_node, sorted);
}

/// Every hash the same, or a few bits only: every pod is still found, none is lost, removals
/// shift the right entries back.
#[test]
fn forced_hash_collisions_lose_no_pod() {
    for mask in [0, 0xF000_0000_0000_0003, 0x8000_0000_0000_0001] {
        let mut t = PodTable::with_hash_mask(mask);
        let mut model: BTreeMap<(String, String), Pod> = BTreeMap::new();
        let mut rng = 0x9E37_79B9_7F4A_7C15u64;
        for step in 0..6_000u64 {
            let r = xorshift(&mut rng);
            let (ns, name) = (format!("ns{}", r % 2), name_of(((r >> 8) % 300) as usize));
            let key = (ns.clone(), name.clone());
            if (r >> 20) % 3 == 0 {
                let removed = t.remove(&pod(&ns, &name, None, 0).key).is_some();
                assert_eq!(removed, model.remove(&key).is_some());
            } else {
                let p = pod(&ns, &name, Some(&format!("n{}", r % 5)), step + 1);
                t.upsert(p.clone());
                model.insert(key, p);
            }
        }
        assert_consistent(&t, &model);
        t.shrink_to_fit();
        assert_consistent(&t, &model);
    }
}

/// The same pods removed and added again and again: slots, names and index entries are reused
/// or given back, so the table does not grow.
#[test]
fn remove_and_reinsert_churn_does_not_grow_the_table() {
    let mut t = PodTable::new();
    let mut model: BTreeMap<(String, String), Pod> = BTreeMap::new();
    let n = 5_000;
    for i in 0..n {
        let p = pod("default", &name_of(i), Some(&format!("n{}", i % 50)), 1);
        t.upsert(p.clone());
        model.insert(("default".into(), name_of(i)), p);
    }
    let settled = t.heap_bytes();
    let mut rng = 7u64;
    for round in 0..20u64 {
        for _ in 0..n / 2 {
            let i = (xorshift(&mut rng) % n as u64) as usize;
            let key = ("default".to_string(), name_of(i));
            if model.remove(&key).is_some() {
                t.remove(&pod("default", &key.1, None, 0).key);
            }
            let p = pod("default", &key.1, Some(&format!("n{}", i % 50)), round + 2);
            t.upsert(p.clone());
            model.insert(key, p);
        }
        assert_consistent(&t, &model);
    }
    assert!(
        t.heap_bytes() < settled + settled / 3,
        "{} against {settled}",
        t.heap_bytes()
    );
}

/// A full state that delivers half the pods: the other half is gone, the arena and the index
/// are given back, and the survivors read back whole.
#[test]
fn a_full_state_dropping_half_the_pods_gives_their_room_back() {
    let mut t = PodTable::new();
    let mut model: BTreeMap<(String, String), Pod> = BTreeMap::new();
    for i in 0..8_000 {
        let p = pod(&format!("ns{}", i % 4), &name_of(i), Some("n1"), 1);
        t.upsert(p.clone());
        model.insert((format!("ns{}", i % 4), name_of(i)), p);
    }
    let (names, buckets) = (t.names.used(), t.index.capacity());
    t.begin_full_state();
    let mut delivered = BTreeMap::new();
    for (i, (k, p)) in model.into_iter().enumerate() {
        if i % 2 == 0 {
            t.upsert(p.clone());
            delivered.insert(k, p);
        }
    }
    let gone = t.end_full_state();
    assert_eq!(gone.len(), 4_000);
    assert!(!t.names.has_holes());
    assert_consistent(&t, &delivered);
    // The names of the gone are given back, and the index shrinks to what it holds; the slab
    // keeps its vacant slots (every other one here) for the next pods.
    assert!(
        t.names.used() <= names / 2 + 2_000,
        "{} of {names}",
        t.names.used()
    );
    assert!(
        t.index.capacity() < buckets * 2 / 3,
        "{}",
        t.index.capacity()
    );
    assert_eq!(t.count_on_node("n1"), 4_000);
}

/// The namespace and the toleration list are one shared pair: a change of tolerations moves
/// the pod to another pair and keeps its namespace; a pair goes with its last pod.
#[test]
fn a_pods_namespace_and_tolerations_are_one_shared_pair() {
    use crate::model::{TaintEffect, TolerationOperator};
    let mut t = PodTable::new();
    let list: Rc<[Toleration]> = Rc::from(vec![Toleration {
        key: Rc::from("node.kubernetes.io/unreachable"),
        operator: TolerationOperator::Exists,
        value: Rc::from(""),
        effect: Some(TaintEffect::NoExecute),
        toleration_seconds: Some(300),
    }]);
    let mut pods = Vec::new();
    for (ns, name) in [("a", "p1"), ("a", "p2"), ("b", "p1")] {
        let mut p = pod(ns, name, Some("n1"), 1);
        p.tolerations = list.clone();
        t.upsert(p.clone());
        pods.push(p);
    }
    assert_eq!(t.scopes.id_bound(), 2, "one pair per namespace");
    let mut moved = pods[0].clone();
    moved.tolerations = Rc::from(Vec::new());
    moved.resource_version = Rc::from("2");
    t.upsert(moved.clone());
    pods[0] = moved;
    for p in &pods {
        assert_eq!(t.get(&p.key).unwrap().to_pod(), *p);
    }
    t.remove(&pods[0].key);
    assert!(
        (0..t.scopes.id_bound() as u32)
            .filter_map(|id| t.scopes.get(id))
            .all(|(_, l)| **l == *list),
        "the pair of the removed pod went with it"
    );
}
