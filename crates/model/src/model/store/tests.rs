//! Tests of the cluster store: an older object never replaces a newer one, a full state removes
//! what it did not deliver, the count of nodes not ready, Leases kept by their node's name.

use super::*;

fn node(name: &str, rv: &str) -> Node {
    Node {
        name: Rc::from(name),
        uid: Rc::from("uid"),
        resource_version: Rc::from(rv),
        creation_timestamp: crate::time::Time::ZERO,
        labels: Default::default(),
        taints: Vec::new(),
        unschedulable: false,
        conditions: Vec::new(),
        other_conditions: Vec::new(),
        autonomy: Default::default(),
        maintenance: Default::default(),
        writers: Default::default(),
    }
}

/// Our taint write's answer (version 12) is stored; the watch then delivers version 11
/// (from before the write) late: the store keeps 12, so the next write does not conflict.
#[test]
fn an_older_watch_event_after_our_write_keeps_the_newer_node() {
    let mut s = ClusterStore::new();
    s.upsert_node(node("n1", "10"));
    let mut written = node("n1", "12");
    written.unschedulable = true;
    assert!(matches!(s.upsert_node(written), Upserted::Changed { .. }));
    assert!(matches!(s.upsert_node(node("n1", "11")), Upserted::Older));
    assert_eq!(&*s.node("n1").unwrap().resource_version, "12");
    assert!(s.node("n1").unwrap().unschedulable);
    let mut echo = node("n1", "12");
    echo.unschedulable = true;
    assert!(matches!(s.upsert_node(echo), Upserted::Unchanged));
}

#[test]
fn a_relist_removes_nodes_and_leases_it_did_not_deliver() {
    let mut s = ClusterStore::new();
    s.upsert_node(node("a", "1"));
    s.upsert_node(node("b", "1"));
    s.begin_full_state(Kind::Nodes);
    s.upsert_node(node("a", "1"));
    let v = s.end_full_state(Kind::Nodes);
    assert_eq!(v.nodes.len(), 1);
    assert_eq!(&*v.nodes[0].name, "b");
    assert_eq!(s.node_count(), 1);
}

/// The count of nodes not Ready kept by the store is the count of them, after any sequence
/// of watch events, relists, removals and our own writes landed (the status line shows it
/// and no longer walks the nodes; debug builds also check it there).
#[test]
fn the_count_of_nodes_not_ready_follows_every_change() {
    use super::super::{ConditionStatus, ConditionText, NodeCondition, NodeConditionType};
    use crate::time::Rng;
    fn with_ready(name: &str, rv: u64, status: Option<ConditionStatus>) -> Node {
        let mut n = node(name, &rv.to_string());
        n.conditions = status
            .into_iter()
            .map(|status| NodeCondition {
                kind: NodeConditionType::Ready,
                status,
                last_heartbeat_time: None,
                last_transition_time: None,
                text: ConditionText::default(),
            })
            .collect();
        n
    }
    let statuses = [
        None,
        Some(ConditionStatus::True),
        Some(ConditionStatus::False),
        Some(ConditionStatus::Unknown),
    ];
    for seed in 1..=50u64 {
        let mut rng = Rng::new(seed);
        let mut s = ClusterStore::new();
        let mut rv = 0u64;
        for step in 0..300 {
            let name = format!("n{}", rng.below(12));
            let status = statuses[rng.below(4) as usize];
            rv += 1;
            match rng.below(10) {
                0..=4 => {
                    s.upsert_node(with_ready(&name, rv, status));
                }
                // An older version: not stored, the count unchanged.
                5 => {
                    s.upsert_node(with_ready(&name, 0, status));
                }
                6 => {
                    s.remove_node(&name);
                }
                7 => {
                    s.edit_node(&name, |n| {
                        *n = with_ready(&n.name.clone(), rv, status);
                    });
                }
                _ => {
                    // A relist that delivers about half of the nodes again.
                    s.begin_full_state(Kind::Nodes);
                    for i in 0..12 {
                        if rng.below(2) == 0 {
                            let status = statuses[rng.below(4) as usize];
                            s.upsert_node(with_ready(&format!("n{i}"), rv, status));
                        }
                    }
                    s.end_full_state(Kind::Nodes);
                }
            }
            let walked = s.nodes().filter(|n| n.is_not_ready()).count();
            assert_eq!(s.nodes_not_ready(), walked, "seed {seed} step {step}");
        }
    }
}

fn lease(name: &str, rv: &str) -> Lease {
    Lease {
        name: name.into(),
        renew_time: None,
        duration_seconds: Some(40),
        resource_version: rv.into(),
    }
}

/// The name `name`'s Lease is kept under.
fn lease_key<'a>(s: &'a ClusterStore, name: &str) -> &'a Name {
    s.leases.get_key_value(name).expect("the Lease is held").0
}

/// The store keeps every Lease under its node's name allocation, whichever came first, and
/// a renewal (the name's text, copied from the wire) returns that name and its node's key, so
/// the machines find their entries for the node without a lookup by name.
#[test]
fn a_lease_is_kept_under_its_nodes_name_whichever_came_first() {
    let mut s = ClusterStore::new();
    s.upsert_node(node("first", "1"));
    let stored = s.upsert_lease(lease("first", "2"));
    let node_name = &s.node("first").unwrap().name;
    assert!(Rc::ptr_eq(&stored.name, node_name), "the node's name");
    assert!(Rc::ptr_eq(lease_key(&s, "first"), node_name));
    assert_eq!(stored.node, s.node_key("first"));
    assert!(stored.node.is_some());

    // The Lease first: kept under a name of its own until its node comes.
    let early = s.upsert_lease(lease("later", "3"));
    assert_eq!(early.node, None, "no node yet");
    s.upsert_node(node("later", "4"));
    let node_name = s.node("later").unwrap().name.clone();
    assert!(!Rc::ptr_eq(&early.name, &node_name));
    assert!(Rc::ptr_eq(lease_key(&s, "later"), &node_name));

    // A renewal is stored under the held name, with the node's key kept beside it; it
    // allocates no name.
    let renewal = s.upsert_lease(lease("later", "5"));
    assert!(matches!(renewal.upserted, Upserted::Changed { .. }));
    assert!(Rc::ptr_eq(&renewal.name, &node_name));
    assert!(Rc::ptr_eq(lease_key(&s, "later"), &node_name));
    assert_eq!(renewal.node, s.node_key("later"));
    assert!(renewal.node.is_some());
    assert_eq!(&*s.lease("later").unwrap().name, "later");
    assert_eq!(&*s.lease("later").unwrap().resource_version, "5");
    // Older and unchanged renewals change nothing and keep the key.
    assert!(matches!(
        s.upsert_lease(lease("later", "4")).upserted,
        Upserted::Older
    ));
    let again = s.upsert_lease(lease("later", "5"));
    assert!(matches!(again.upserted, Upserted::Unchanged));
    assert_eq!(again.node, renewal.node);
    assert_eq!(s.lease_count(), 2);
}

/// A Lease's name past the inline room (`inline_text.rs`) is a heap block of the Lease's,
/// and the store's bytes count it.
#[test]
fn a_lease_name_past_the_inline_room_is_counted_in_the_store_bytes() {
    let long = "n".repeat(60);
    let mut short = ClusterStore::new();
    short.upsert_lease(lease(&long[..40], "1"));
    let mut heap = ClusterStore::new();
    heap.upsert_lease(lease(&long, "1"));
    let name_block = crate::model::LeaseName::new(&long).heap_bytes();
    assert!(name_block > 0);
    assert_eq!(
        heap.heap_bytes().leases,
        short.heap_bytes().leases + name_block
    );
}

/// A relist of Leases marks what it delivers by name: Leases under other allocations of the
/// names count as the held ones, and only what it did not deliver is removed.
#[test]
fn a_relist_of_leases_keeps_what_it_delivered_by_name_and_removes_the_rest() {
    let mut s = ClusterStore::new();
    for name in ["a", "b"] {
        s.upsert_node(node(name, "1"));
        s.upsert_lease(lease(name, "2"));
    }
    s.begin_full_state(Kind::Leases);
    s.upsert_lease(lease("a", "2"));
    let vanished = s.end_full_state(Kind::Leases);
    assert_eq!(vanished.leases.len(), 1);
    assert_eq!(&*vanished.leases[0], "b");
    assert!(Rc::ptr_eq(lease_key(&s, "a"), &s.node("a").unwrap().name));
}

/// A node's key stays while the node does, through a relist that compacts the store's maps; a
/// Lease keeps its node's key while the node is here, and none once it left. A node created
/// again under the same name gets a new key, which its Lease then keeps.
#[test]
fn a_nodes_key_outlives_compaction_and_not_the_node() {
    let mut s = ClusterStore::new();
    for name in ["a", "b", "c"] {
        s.upsert_node(node(name, "1"));
        s.upsert_lease(lease(name, "2"));
    }
    let (a, c) = (s.node_key("a").unwrap(), s.node_key("c").unwrap());
    s.begin_full_state(Kind::Nodes);
    for name in ["b", "c"] {
        s.upsert_node(node(name, "1"));
    }
    let vanished = s.end_full_state(Kind::Nodes);
    assert_eq!(vanished.nodes.len(), 1);
    assert_eq!(s.node_key("c"), Some(c), "compaction moved c, not its key");
    assert_eq!(s.node_key("a"), None);
    assert_eq!(s.upsert_lease(lease("a", "3")).node, None, "a is gone");
    assert_eq!(s.upsert_lease(lease("c", "3")).node, Some(c));

    s.upsert_node(node("a", "5"));
    let again = s.node_key("a").unwrap();
    assert_ne!(again, a, "a new node is a new key");
    assert_eq!(s.upsert_lease(lease("a", "6")).node, Some(again));
    assert_eq!(s.likely_lease_node("a"), Some(again));
}
