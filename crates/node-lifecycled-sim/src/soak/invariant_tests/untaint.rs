//! Taints taken off: off a node whose kubelet is dead is a violation; off a recovered node, in a
//! swap or in master disruption mode it is fine.

use super::*;

#[test]
fn taking_the_taint_off_a_node_whose_kubelet_is_dead_is_a_violation() {
    let mut log = Log::new();
    die(&mut log, &zone(1, 1..=1), 0.5);
    log.unknown(6.5, A, "z1-n001");
    log.taints(7.0, A, "z1-n001", &["unreachable"]);
    // A new leader registers the node and takes its taint off (upstream's
    // markNodeAsReachable), to put it back half a second later.
    log.taints(20.0, B, "z1-n001", &[]);
    log.taints(20.5, B, "z1-n001", &["unreachable"]);
    assert_eq!(
        log.rules(),
        ["untaint-while-dead"],
        "{:?}",
        log.violations()
    );
    let detail = &log.violations()[0].detail;
    assert!(
        detail.contains("z1-n001") && detail.contains("daemon-b"),
        "{detail}"
    );
}

#[test]
fn taking_the_taint_off_a_recovered_node_a_swap_or_in_master_disruption_mode_is_fine() {
    // Recovered: the kubelet beats again and posts Ready=True.
    let mut log = Log::new();
    die(&mut log, &zone(1, 1..=1), 0.5);
    log.unknown(6.5, A, "z1-n001");
    log.taints(7.0, A, "z1-n001", &["unreachable"]);
    log.checker.kubelet("z1-n001", true, at(19.0));
    log.renewals("z1-n001", 19.0, 19.0);
    log.taints(19.5, A, "z1-n001", &[]);
    // A swap keeps a NoExecute taint on.
    die(&mut log, &zone(1, 2..=2), 0.5);
    log.unknown(6.5, A, "z1-n002");
    log.taints(7.0, A, "z1-n002", &["unreachable"]);
    log.taints(21.0, A, "z1-n002", &["not-ready"]);
    // Silent, but only for 3 s (a flap after a recovery the daemon saw).
    die(&mut log, &zone(2, 1..=1), 0.5);
    log.unknown(6.5, A, "z2-n001");
    log.taints(7.0, A, "z2-n001", &["unreachable"]);
    log.renewals("z2-n001", 18.0, 18.0);
    log.taints(21.0, A, "z2-n001", &[]);
    assert_eq!(log.rules(), Vec::<&str>::new(), "{:?}", log.violations());
    // Master disruption mode: every node Unknown, every taint comes off.
    let mut log = Log::new();
    die(&mut log, &zone(1, 1..=1), 0.5);
    log.unknown(6.5, A, "z1-n001");
    log.taints(7.0, A, "z1-n001", &["unreachable"]);
    let others: Vec<String> = nodes().into_iter().skip(1).collect();
    die(&mut log, &others, 10.0);
    for node in &others {
        log.unknown(15.0, A, node);
    }
    log.taints(15.5, A, "z1-n001", &[]);
    assert_eq!(log.rules(), Vec::<&str>::new(), "{:?}", log.violations());
}

/// SOAK.md finding 16: a kubelet back for a few seconds after its node was tainted, then silent
/// again, while a watch freeze held its Ready post back: the daemon takes the taint off when the
/// post arrives, 10 s after the kubelet's last heartbeat. That is the recovery seen late, not a
/// taint taken off a node that never came back.
#[test]
fn taking_the_taint_off_a_node_that_recovered_and_died_again_unseen_is_fine() {
    let mut log = Log::new();
    die(&mut log, &zone(1, 1..=1), 0.5);
    log.unknown(6.5, A, "z1-n001");
    log.taints(7.0, A, "z1-n001", &["unreachable"]);
    log.checker.kubelet("z1-n001", true, at(19.0));
    log.renewals("z1-n001", 19.0, 24.0);
    log.checker.kubelet("z1-n001", false, at(24.5));
    log.taints(35.0, A, "z1-n001", &[]);
    assert_eq!(log.rules(), Vec::<&str>::new(), "{:?}", log.violations());
}
