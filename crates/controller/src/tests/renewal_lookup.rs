//! A renewal reaches its node's entry from the one lookup it makes, the store's: the node's key
//! kept beside the Lease (`ClusterStore::upsert_lease`, `model::NodeKey`), by which the node
//! lifecycle finds the entry (`node_lifecycle/entries.rs`). These stories move the entries
//! (a relist compacts them) and retire keys (a node deleted and created again) and check that
//! a renewal still renews its own node, and never another.

use super::harness::*;
use crate::Input;
use crate::model::ConditionStatus::{True, Unknown};
use crate::model::Kind;
use crate::time::Time;

fn t0() -> Time {
    date(2026, 1, 1, 12, 0, 0)
}

fn ready_node(name: &str) -> crate::model::Node {
    node(name).ready(True, t0(), t0()).build()
}

fn renew(h: &mut Harness, names: &[&str]) {
    for name in names {
        h.put_lease(lease(name, h.now));
    }
}

/// `names` Ready, listed at `t0` and renewed at 10 s: every Lease keeps its node's key.
fn listed_and_renewed(names: &[&str]) -> Harness {
    let mut h = Harness::lifecycle_alone_started(
        test_settings(),
        t0(),
        names.iter().map(|n| ready_node(n)).collect(),
        vec![],
        names.iter().map(|n| lease(n, t0())).collect(),
    );
    h.run_until(t0() + secs(10));
    renew(&mut h, names);
    h
}

/// As the daemon feeds a read's renewals: their lines asked for first (`Fed::prefetch`,
/// `Controllers::prefetch_renewals`), here with a name no node has besides.
fn renew_asked_ahead(h: &mut Harness, names: &[&str]) {
    h.ctl
        .prefetch_renewals(names.iter().copied().chain(["no-such-node"]));
    renew(h, names);
}

/// `alive` renew every 10 s from 20 s to 90 s; the others are silent.
fn renew_to_90s(h: &mut Harness, alive: &[&str]) {
    renew_to_90s_by(h, alive, renew);
}

fn renew_to_90s_by(h: &mut Harness, alive: &[&str], renew: fn(&mut Harness, &[&str])) {
    let mut at = t0() + secs(10);
    while at < t0() + secs(90) {
        at += secs(10);
        h.run_until(at);
        renew(h, alive);
    }
}

/// A relist that no longer has node `a` compacts the node lifecycle's entries: `b`, `c` and `d`
/// move one slot down, so `b`'s old slot is now `c`'s entry, while the keys kept beside the
/// Leases stay. `b` and `d` go on renewing and `c` falls silent: `c` goes Unknown at its grace,
/// `b` and `d` stay Ready. Had a key led to `b`'s old slot, `b`'s renewals would have kept `c`
/// alive and `b` would have gone Unknown.
#[test]
fn a_renewal_after_a_relist_moved_the_entries_renews_its_own_node_and_no_other() {
    let h = relisted_without_a(renew);
    assert_relisted_story(&h);
}

/// The entries sit at slots a 0, b 1, c 2, d 3; a relist without `a` moves them; then `b` and
/// `d` renew by `renew` to 90 s.
fn relisted_without_a(renew: fn(&mut Harness, &[&str])) -> Harness {
    let mut h = listed_and_renewed(&["a", "b", "c", "d"]);
    h.feed(Input::FullStateBegin(Kind::Nodes));
    for name in ["b", "c", "d"] {
        let listed = h.nodes[name].clone();
        h.put_node(listed);
    }
    h.nodes.remove("a");
    h.feed(Input::FullStateEnd(Kind::Nodes));
    renew_to_90s_by(&mut h, &["b", "d"], renew);
    h
}

/// Prefetching reads only (`model/prefetch.rs`): the same story with every read's renewals
/// asked for ahead, as the daemon feeds them (a name no node has among them), makes the very
/// same actions at the very same times.
#[test]
fn renewals_asked_for_ahead_decide_exactly_as_without() {
    let ahead = relisted_without_a(renew_asked_ahead);
    assert_relisted_story(&ahead);
    let plain = relisted_without_a(renew);
    assert_eq!(format!("{:?}", ahead.log), format!("{:?}", plain.log));
    assert!(!plain.log.is_empty());
}

fn assert_relisted_story(h: &Harness) {
    assert_eq!(h.ready_of("c"), Some(Unknown), "c fell silent at 10 s");
    assert_eq!(h.ready_of("b"), Some(True), "b renewed every 10 s");
    assert_eq!(h.ready_of("d"), Some(True), "d renewed every 10 s");
    let unknown: Vec<_> = h
        .status_writes()
        .into_iter()
        .filter(|(_, _, conditions)| conditions.iter().any(|c| c.status == Unknown))
        .map(|(t, name, _)| (t, name.to_string()))
        .collect();
    assert_eq!(unknown.len(), 1, "only c: {unknown:?}");
    assert_eq!(h.lease_reads(), 1, "only silent c's Lease is read live");
    assert_eq!(unknown[0].1, "c");
    assert!(
        unknown[0].0 >= t0() + secs(60),
        "not before c's grace ran out: {unknown:?}"
    );
}

/// Nodes deleted and created again under their names get new keys and new entries (`a`'s new
/// key takes `b`'s old index, and the other way round); the Leases, kept across, keep their
/// nodes' new keys: `a`'s renewals reach `a`'s new entry, never `b`'s, and `a` stays Ready while
/// silent `b` goes Unknown.
#[test]
fn a_node_created_again_under_its_name_is_renewed_through_its_new_entry() {
    let mut h = listed_and_renewed(&["a", "b"]);
    let (a, b) = (h.ctl.store().node_key("a"), h.ctl.store().node_key("b"));
    h.delete_node("b");
    h.delete_node("a");
    h.put_node(ready_node("b"));
    h.put_node(ready_node("a"));
    let (a_again, b_again) = (h.ctl.store().node_key("a"), h.ctl.store().node_key("b"));
    assert_eq!(a_again.map(|k| k.index()), b.map(|k| k.index()));
    assert_eq!(b_again.map(|k| k.index()), a.map(|k| k.index()));
    assert_ne!(a_again, b);
    renew_to_90s(&mut h, &["a"]);
    assert_eq!(h.ready_of("a"), Some(True), "a renewed every 10 s");
    assert_eq!(h.ready_of("b"), Some(Unknown), "b fell silent at 10 s");
    // Had a's renewals missed its entry, its grace would have run out too, and a live read of
    // its Lease (KEP-5647) would have kept it Ready: only b's Lease is read.
    assert_eq!(h.lease_reads(), 1, "only silent b's Lease is read live");
}
