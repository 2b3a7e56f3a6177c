//! The safety rules: a Ready=Unknown while the kubelet renews, NoExecute taints in a disrupted
//! zone, pods deleted before their toleration ran out, two writers at once, resident memory, and
//! records dropped from the log.

use super::*;

#[test]
fn ready_unknown_while_the_kubelet_renews_is_a_safety_violation() {
    let mut log = Log::new();
    log.renewals("z1-n001", 0.5, 10.5);
    log.unknown(11.0, A, "z1-n001");
    assert_eq!(
        log.rules(),
        ["unknown-while-renewing"],
        "{:?}",
        log.violations()
    );
    assert!(log.violations()[0].detail.contains("z1-n001"));
}

#[test]
fn ready_unknown_after_the_grace_period_of_silence_is_fine() {
    let mut log = Log::new();
    log.renewals("z1-n001", 0.5, 3.5);
    log.unknown(8.6, A, "z1-n001");
    assert_eq!(log.rules(), Vec::<&str>::new());
}

#[test]
fn a_renewal_just_before_the_unknown_write_is_excused_as_after_the_live_read() {
    // Silent from 0.5 to 9.0, a renewal 1 s before the write: the daemon's live read may have
    // come before it (evidence allowance 2 s).
    let mut log = Log::new();
    log.renewals("z1-n001", 0.5, 0.5);
    log.renewals("z1-n001", 9.0, 9.0);
    log.unknown(10.0, A, "z1-n001");
    assert_eq!(log.rules(), Vec::<&str>::new());
}

#[test]
fn a_renewal_stamped_a_loop_iteration_early_is_excused_a_second_early_is_not() {
    let mut log = Log::new();
    log.renewals("z1-n001", 5.0, 5.0);
    log.unknown(9.9, A, "z1-n001"); // 4.9 s: within the 250 ms stamp slack
    assert_eq!(log.rules(), Vec::<&str>::new());
    log.renewals("z1-n002", 5.0, 5.0);
    log.unknown(9.0, A, "z1-n002"); // 4.0 s
    assert_eq!(log.rules(), ["unknown-while-renewing"]);
}

#[test]
fn a_renewal_while_the_daemon_waited_for_a_cpu_is_excused() {
    // A renewal 3 s before the write: a violation for a daemon that ran when it wanted to,
    // excused for one that waited 2 s on the run queue meanwhile (its write landed that late).
    let mut log = Log::new();
    log.renewals("z1-n001", 7.0, 7.0);
    log.checker
        .cpu_wait("daemon-a", at(9.0), Duration::from_secs(2));
    log.unknown(10.0, A, "z1-n001");
    assert_eq!(log.rules(), Vec::<&str>::new());
    let mut log = Log::new();
    log.renewals("z1-n002", 7.0, 7.0);
    log.checker
        .cpu_wait("daemon-b", at(9.0), Duration::from_secs(2));
    log.unknown(10.0, A, "z1-n002");
    assert_eq!(log.rules(), ["unknown-while-renewing"]);
}

#[test]
fn a_new_noexecute_taint_in_a_partially_disrupted_small_zone_is_a_violation() {
    let mut log = Log::new();
    // 5 of zone z1's 8 nodes Unknown: 62 % >= 55 %, 8 <= 50 nodes: rate 0.
    for n in 1..=5 {
        log.unknown(10.0, A, &format!("z1-n00{n}"));
    }
    log.taints(10.5, A, "z1-n001", &["unreachable"]);
    assert_eq!(log.rules(), Vec::<&str>::new(), "within the zone allowance");
    log.taints(20.0, A, "z1-n002", &["unreachable"]);
    assert_eq!(log.rules(), ["taint-forbidden-by-zone"]);
    assert!(log.violations()[0].detail.contains("partially disrupted"));
    // Zone z2 is healthy: a taint there is fine.
    log.unknown(21.0, A, "z2-n001");
    log.taints(22.0, A, "z2-n001", &["unreachable"]);
    assert_eq!(log.rules().len(), 1);
}

#[test]
fn a_new_noexecute_taint_while_every_zone_is_down_is_a_violation() {
    let mut log = Log::new();
    for node in nodes() {
        log.unknown(10.0, A, &node);
    }
    log.taints(15.0, A, "z2-n003", &["unreachable"]);
    assert_eq!(log.rules(), ["taint-forbidden-by-zone"]);
    assert!(log.violations()[0].detail.contains("every zone"));
}

#[test]
fn a_fully_disrupted_single_zone_is_tainted_at_the_normal_rate_without_violation() {
    let mut log = Log::new();
    for n in 1..=8 {
        log.unknown(10.0, A, &format!("z3-n00{n}"));
    }
    log.taints(15.0, A, "z3-n001", &["unreachable"]);
    assert_eq!(log.rules(), Vec::<&str>::new());
}

#[test]
fn a_pod_deleted_before_its_toleration_ran_out_is_a_violation() {
    let mut log = Log::new();
    log.unknown(10.0, A, "z1-n001");
    log.taints(10.0, A, "z1-n001", &["unreachable"]);
    log.delete_pod(10.2, "default/web-0"); // tolerates 0 s: fine
    log.delete_pod(13.0, "default/web-1"); // tolerates 6 s: 3 s early
    assert_eq!(log.rules(), ["eviction-before-toleration"]);
    assert!(log.violations()[0].detail.contains("web-1"));
}

#[test]
fn a_pod_deleted_when_its_toleration_ran_out_is_fine_and_a_swap_does_not_restart_the_count() {
    let mut log = Log::new();
    log.taints(10.0, A, "z1-n001", &["unreachable"]);
    log.taints(12.0, A, "z1-n001", &["not-ready"]);
    log.delete_pod(16.1, "default/web-1");
    assert_eq!(log.rules(), Vec::<&str>::new());
}

#[test]
fn a_deletion_within_the_landing_slack_is_excused_one_beyond_it_is_not() {
    // Slack: 400 ms of injected delay + 100 ms, + 1 s for `timeAdded`'s whole seconds; the
    // taint landed at 10 s, web-1 tolerates 6 s.
    let mut log = Log::new();
    log.taints(10.0, A, "z1-n001", &["unreachable"]);
    log.delete_pod(14.6, "default/web-1");
    assert_eq!(log.rules(), Vec::<&str>::new());
    let mut log = Log::new();
    log.taints(10.0, A, "z1-n001", &["unreachable"]);
    log.delete_pod(14.4, "default/web-1");
    assert_eq!(log.rules(), ["eviction-before-toleration"]);
}

#[test]
fn deleting_a_pod_that_tolerates_forever_or_one_on_an_untainted_node_is_a_violation() {
    let mut log = Log::new();
    log.delete_pod(5.0, "default/web-0");
    log.taints(10.0, A, "z1-n001", &["unreachable"]);
    log.delete_pod(30.0, "kube-system/node-agent-z1-n001");
    assert_eq!(
        log.rules(),
        ["eviction-before-toleration", "eviction-before-toleration"]
    );
    assert!(log.violations()[0].detail.contains("no NoExecute taint"));
    assert!(log.violations()[1].detail.contains("forever"));
}

#[test]
fn two_daemons_writing_in_the_same_instant_is_a_violation_a_handover_is_not() {
    let mut log = Log::new();
    log.unknown(10.0, A, "z1-n001");
    log.unknown(11.5, B, "z1-n002"); // a handover 1.5 s later: fine
    assert_eq!(log.rules(), Vec::<&str>::new());
    log.unknown(11.6, A, "z1-n003"); // back to A 100 ms later: both acting
    assert_eq!(log.rules(), ["two-writers"]);
}

#[test]
fn resident_memory_over_the_limit_or_growing_is_a_violation() {
    let mut log = Log::new();
    let mib = 1024;
    log.checker.rss("daemon-a", 10, 12 * mib, at(0.0));
    log.checker.rss("daemon-a", 10, 13 * mib, at(60.0));
    log.checker.rss("daemon-b", 11, 12 * mib, at(0.0));
    log.checker.rss("daemon-b", 11, 12 * mib, at(60.0));
    log.checker.rss("daemon-b", 11, 13 * mib, at(600.0));
    assert_eq!(log.rules(), Vec::<&str>::new());
    log.checker.rss("daemon-a", 10, 60 * mib, at(600.0));
    log.checker.finish(at(600.0));
    assert_eq!(log.rules(), ["rss"]);
    assert!(log.violations()[0].detail.contains("daemon-a"));
    log.checker.rss("daemon-b", 11, 200 * mib, at(601.0));
    assert_eq!(log.rules(), ["rss", "rss"]);
}

#[test]
fn records_the_log_dropped_before_they_were_read_are_reported() {
    let mut log = Log::new();
    log.renewals("z1-n001", 1.0, 1.0);
    log.seq += 5;
    log.renewals("z1-n001", 2.0, 2.0);
    log.checker.finish(at(3.0));
    assert_eq!(log.rules(), ["write-log"]);
}
