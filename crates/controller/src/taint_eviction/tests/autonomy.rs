//! Edge autonomy: the not-ready/unreachable NoExecute taints of an autonomous node evict its pods
//! no sooner than the autonomy duration after the taint was added.

use std::time::Duration;

use super::harness::*;
use crate::model::{Autonomy, Taint, taint_keys};

fn unreachable_since(at: crate::time::Time) -> Taint {
    let mut t = no_execute(taint_keys::UNREACHABLE);
    t.time_added = Some(at);
    t
}

/// An edge node tainted unreachable at `start()`, with one pod tolerating it for 300 s (the
/// API server's default) and one not tolerating it at all.
fn edge(autonomy: Autonomy, on: bool, extra: Vec<Taint>) -> Harness {
    let mut h = Harness::new();
    h.set_autonomy(on);
    let mut taints = vec![unreachable_since(start())];
    taints.extend(extra);
    let mut node = node("edge", taints);
    node.autonomy = autonomy;
    h.node(&node);
    h.pod(&tolerating(
        pod("patient", "edge"),
        default_tolerations(Some(300)),
    ));
    h.pod(&pod("intolerant", "edge"));
    h
}

#[test]
fn an_autonomous_nodes_pods_outlive_their_own_toleration_seconds() {
    let mut h = edge(Autonomy::For(Duration::from_secs(3600)), true, vec![]);
    h.advance(3600 * SEC - MS);
    assert!(
        h.evicted().is_empty(),
        "nothing before the autonomy duration"
    );
    h.advance(MS);
    let mut evicted = h.evicted();
    evicted.sort_by(|a, b| a.1.cmp(&b.1));
    let at = start() + 3600 * SEC;
    assert_eq!(
        evicted,
        vec![(at, "intolerant".to_string()), (at, "patient".to_string())]
    );
}

#[test]
fn a_pod_tolerating_longer_than_the_autonomy_keeps_its_own_deadline() {
    let mut h = Harness::new();
    h.set_autonomy(true);
    let mut node = node("edge", vec![unreachable_since(start())]);
    node.autonomy = Autonomy::For(Duration::from_secs(60));
    h.node(&node);
    h.pod(&tolerating(
        pod("p", "edge"),
        default_tolerations(Some(600)),
    ));
    h.advance(600 * SEC - MS);
    assert!(h.evicted().is_empty());
    h.advance(MS);
    assert_eq!(h.evicted(), vec![(start() + 600 * SEC, "p".to_string())]);
}

#[test]
fn forever_autonomy_never_evicts_for_unreachable() {
    let mut h = edge(Autonomy::Forever, true, vec![]);
    h.advance(30 * 24 * 3600 * SEC);
    assert!(h.evicted().is_empty());
}

#[test]
fn another_no_execute_taint_still_evicts_an_autonomous_nodes_pods() {
    // A user's (or a custom condition's) NoExecute taint is not autonomy's business.
    let mut h = edge(
        Autonomy::Forever,
        true,
        vec![no_execute("example.com/maintenance")],
    );
    let evicted: Vec<String> = h.evicted().into_iter().map(|(_, p)| p).collect();
    assert!(evicted.contains(&"intolerant".to_string()), "{evicted:?}");
    assert!(evicted.contains(&"patient".to_string()), "{evicted:?}");
}

#[test]
fn with_autonomy_off_the_pods_own_tolerations_decide() {
    let mut h = edge(Autonomy::Forever, false, vec![]);
    assert_eq!(h.evicted(), vec![(start(), "intolerant".to_string())]);
    h.advance(300 * SEC);
    assert_eq!(
        h.evicted(),
        vec![(start() + 300 * SEC, "patient".to_string())]
    );
}
