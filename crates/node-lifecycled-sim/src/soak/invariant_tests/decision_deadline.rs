//! Decisions later than a reconnect allows: the deadline, what pushes it back (a connection reset,
//! a fault that stops the daemons) and what owes no decision.

use super::*;

#[test]
fn a_pod_deleted_later_than_a_reconnect_allows_is_a_decision_late_violation() {
    // web-0 tolerates 0 s: due when the taint lands (7.0); allowed 1.2 s of reconnect (1 s of
    // watch backoff + a round trip) + 0.5 s of slack.
    let mut log = Log::new();
    die(&mut log, &zone(1, 1..=1), 0.5);
    log.unknown(6.5, A, "z1-n001");
    log.taints(7.0, A, "z1-n001", &["unreachable"]);
    log.delete_pod(8.6, "default/web-0");
    assert_eq!(log.rules(), Vec::<&str>::new());
    assert_eq!(log.checker.obligations.decisions_on_time, 1);
    let mut log = Log::new();
    die(&mut log, &zone(1, 1..=1), 0.5);
    log.unknown(6.5, A, "z1-n001");
    log.taints(7.0, A, "z1-n001", &["unreachable"]);
    log.delete_pod(8.8, "default/web-0");
    assert_eq!(log.rules(), ["decision-late"], "{:?}", log.violations());
    assert!(log.violations()[0].detail.contains("web-0"));
}

#[test]
fn a_connection_reset_pushes_the_decision_deadline_back_by_a_reconnect_only() {
    // A watch drop at 8.0: the daemon may be back by 9.2, and deletes by 8.0 + 1.7 = 9.7.
    let mut log = Log::new();
    die(&mut log, &zone(1, 1..=1), 0.5);
    log.unknown(6.5, A, "z1-n001");
    log.taints(7.0, A, "z1-n001", &["unreachable"]);
    log.checker
        .fault(FaultClass::Reset, "watch-drop", at(8.0), at(8.0));
    log.delete_pod(9.6, "default/web-0");
    assert_eq!(log.rules(), Vec::<&str>::new(), "{:?}", log.violations());
    let mut log = Log::new();
    die(&mut log, &zone(1, 1..=1), 0.5);
    log.unknown(6.5, A, "z1-n001");
    log.taints(7.0, A, "z1-n001", &["unreachable"]);
    log.checker
        .fault(FaultClass::Reset, "watch-drop", at(8.0), at(8.0));
    // 1.5 s after the reconnect: the first line of a new pod watch + a 0.5 s settle.
    log.delete_pod(10.7, "default/web-0");
    assert_eq!(log.rules(), ["decision-late"], "{:?}", log.violations());
    assert!(
        log.violations()[0]
            .detail
            .contains("watch-drop at due+1.0s"),
        "{:?}",
        log.violations()
    );
    // An API restart from 7.5 to 9.0: counted from when connections are accepted again.
    let mut log = Log::new();
    die(&mut log, &zone(1, 1..=1), 0.5);
    log.unknown(6.5, A, "z1-n001");
    log.taints(7.0, A, "z1-n001", &["unreachable"]);
    log.checker
        .fault(FaultClass::Reset, "api-restart", at(7.5), at(9.0));
    log.delete_pod(10.6, "default/web-0");
    assert_eq!(log.rules(), Vec::<&str>::new(), "{:?}", log.violations());
}

#[test]
fn a_fault_that_stops_the_daemons_excuses_the_decision_and_a_pod_left_running_is_late() {
    // A watch stall (blocking) between the taint and the deadline: not judged.
    let mut log = Log::new();
    die(&mut log, &zone(1, 1..=1), 0.5);
    log.unknown(6.5, A, "z1-n001");
    log.taints(7.0, A, "z1-n001", &["unreachable"]);
    log.checker
        .fault(FaultClass::Blocking, "watch-stall", at(7.5), at(10.0));
    log.delete_pod(12.0, "default/web-0");
    assert_eq!(log.rules(), Vec::<&str>::new(), "{:?}", log.violations());
    assert_eq!(log.checker.obligations.decisions_excused, 1);
    // web-1 (6 s, due 13.0) never deleted: late at 14.7, long before pod-not-evicted (23 s).
    let mut log = Log::new();
    die(&mut log, &zone(1, 1..=1), 0.5);
    log.unknown(6.5, A, "z1-n001");
    log.taints(7.0, A, "z1-n001", &["unreachable"]);
    log.delete_pod(7.2, "default/web-0");
    log.checker.check_liveness(at(14.5));
    assert_eq!(log.rules(), Vec::<&str>::new(), "{:?}", log.violations());
    log.checker.check_liveness(at(15.0));
    assert_eq!(log.rules(), ["decision-late"], "{:?}", log.violations());
    assert!(
        log.violations()[0]
            .detail
            .contains("web-1 on z1-n001 still there")
    );
    log.checker.check_liveness(at(17.0));
    assert_eq!(log.rules().len(), 1, "judged once");
}

#[test]
fn a_pod_whose_taint_came_off_before_it_was_due_owes_no_decision() {
    // web-1 (6 s) on z1-n001: the kubelet is back and the taint off at 10 s, before 13 s.
    let mut log = Log::new();
    die(&mut log, &zone(1, 1..=1), 0.5);
    log.unknown(6.5, A, "z1-n001");
    log.taints(7.0, A, "z1-n001", &["unreachable"]);
    log.delete_pod(7.2, "default/web-0");
    log.checker.kubelet("z1-n001", true, at(9.5));
    ready_post(&mut log, 9.5, "z1-n001");
    log.taints(10.0, A, "z1-n001", &[]);
    log.checker.check_liveness(at(30.0));
    assert_eq!(log.rules(), Vec::<&str>::new(), "{:?}", log.violations());
    // Taken off after it was due (and the zone allowance): the pod should have gone first.
    let mut log = Log::new();
    die(&mut log, &zone(1, 1..=1), 0.5);
    log.unknown(6.5, A, "z1-n001");
    log.taints(7.0, A, "z1-n001", &["unreachable"]);
    log.delete_pod(7.2, "default/web-0");
    log.checker.kubelet("z1-n001", true, at(15.5));
    ready_post(&mut log, 15.5, "z1-n001");
    log.taints(16.0, A, "z1-n001", &[]);
    log.checker.check_liveness(at(17.0));
    assert_eq!(log.rules(), ["decision-late"], "{:?}", log.violations());
}
