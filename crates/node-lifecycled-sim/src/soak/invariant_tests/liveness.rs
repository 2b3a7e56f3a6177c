//! The liveness rules: a dead node left untainted, a pod left running after its toleration, a
//! recovered node still unknown or tainted, and the quiet periods that push deadlines back.

use super::*;

#[test]
fn a_node_dead_long_enough_but_never_tainted_is_a_liveness_violation() {
    let mut log = Log::new();
    log.checker.kubelet("z1-n001", false, at(1.0));
    log.checker.kubelet("z2-n001", false, at(1.0));
    log.unknown(6.5, A, "z1-n001");
    log.unknown(6.5, A, "z2-n001");
    log.taints(7.0, A, "z2-n001", &["unreachable"]);
    log.checker.check_liveness(at(10.0));
    assert_eq!(log.rules(), Vec::<&str>::new(), "not due yet");
    // Due at 1 + 5 (grace) + 1 (rate interval) + 10 (allowance) = 17 s.
    log.checker.check_liveness(at(16.0));
    assert_eq!(log.rules(), Vec::<&str>::new(), "not due yet");
    log.checker.check_liveness(at(18.0));
    assert_eq!(log.rules(), ["dead-node-not-tainted"]);
    assert!(log.violations()[0].detail.contains("z1-n001"));
    assert_eq!(log.checker.obligations.dead_nodes_tainted, 1);
    log.checker.check_liveness(at(60.0));
    assert_eq!(log.rules().len(), 1, "each obligation judged once");
}

#[test]
fn a_dead_node_in_a_partially_disrupted_zone_owes_no_taint() {
    let mut log = Log::new();
    for n in 1..=5 {
        log.checker.kubelet(&format!("z1-n00{n}"), false, at(1.0));
        log.unknown(6.5, A, &format!("z1-n00{n}"));
    }
    log.checker.check_liveness(at(120.0));
    assert_eq!(log.rules(), Vec::<&str>::new());
}

#[test]
fn a_pod_left_running_after_its_toleration_is_a_liveness_violation() {
    let mut log = Log::new();
    log.checker.kubelet("z1-n001", false, at(1.0));
    log.unknown(6.5, A, "z1-n001");
    log.taints(7.0, A, "z1-n001", &["unreachable"]);
    log.delete_pod(7.2, "default/web-0");
    // web-1 tolerates 6 s: due at 7 + 6 + 10 = 23 s (the dead node's taint at 17 s is met).
    // (decision-late, judged from 14.7 s on, is the tighter rule: never less safe than upstream.)
    log.checker.check_liveness(at(22.0));
    assert_eq!(log.rules(), ["decision-late"]);
    log.checker.check_liveness(at(24.0));
    assert_eq!(log.rules(), ["decision-late", "pod-not-evicted"]);
    assert!(log.violations()[1].detail.contains("web-1"));
    assert_eq!(log.checker.obligations.pods_evicted, 1);
}

#[test]
fn a_recovered_node_still_unknown_or_tainted_is_a_liveness_violation() {
    let mut log = Log::new();
    log.checker.kubelet("z1-n001", false, at(1.0));
    log.checker.kubelet("z1-n002", false, at(1.0));
    for node in ["z1-n001", "z1-n002"] {
        log.unknown(6.5, A, node);
        log.taints(7.0, A, node, &["unreachable"]);
    }
    log.delete_pod(7.2, "default/web-0");
    log.checker.kubelet("z1-n001", true, at(10.0));
    log.checker.kubelet("z1-n002", true, at(10.0));
    // z1-n002's kubelet posts Ready=True and the daemon removes the taint; z1-n001 stays.
    log.write(
        10.5,
        Identity::direct(KUBELET),
        Verb::Update,
        Resource::Nodes,
        None,
        None,
        "z1-n002",
        "status.conditions[Ready].status: \"Unknown\" -> \"True\"".into(),
    );
    log.taints(11.0, A, "z1-n002", &[]);
    // Due at 10 + 1 (status interval) + 10 = 21 s. (web-1, 6 s, on the still tainted
    // z1-n001 is late from 14.7 s on: decision-late.)
    log.checker.check_liveness(at(20.0));
    assert_eq!(log.rules(), ["decision-late"]);
    log.checker.check_liveness(at(22.0));
    assert_eq!(log.rules(), ["decision-late", "recovered-node-tainted"]);
    assert!(log.violations()[1].detail.contains("z1-n001"));
    assert_eq!(log.checker.obligations.recovered_untainted, 1);
}

#[test]
fn quiet_periods_push_liveness_deadlines_back() {
    let mut log = Log::new();
    log.checker.kubelet("z1-n001", false, at(1.0));
    log.checker.quiet_until(at(30.0));
    // Due at 30 + 1 (rate interval) + 10 = 41 s.
    log.checker.check_liveness(at(40.0));
    assert_eq!(log.rules(), Vec::<&str>::new());
    log.checker.check_liveness(at(42.0));
    assert_eq!(log.rules(), ["dead-node-not-tainted"]);
}
