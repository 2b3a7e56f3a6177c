//! `--fencing`'s rules: no fence step while a pause of fencing holds (once the daemons could
//! have read it), for a node whose kubelet renews, or in a disrupted zone.

use super::{A, Log, at, die, zone};
use crate::soak::invariants::FaultClass;

#[test]
fn a_fence_step_recorded_or_run_while_fencing_is_paused_is_a_violation() {
    let mut log = Log::new();
    die(&mut log, &zone(1, 2..=2), 1.0);
    log.checker.pause_fencing(at(10.0), at(20.0));
    // Decided before the pause could be read: fine.
    log.fence_attempt(11.0, A, "z1-n002", 1);
    assert_eq!(log.rules(), Vec::<&str>::new(), "{:?}", log.violations());
    // Step 2 of the escalation while it holds.
    log.fence_attempt(14.0, A, "z1-n002", 2);
    assert_eq!(log.rules(), ["fence-while-paused"]);
    // The agent's own log says a step ran meanwhile.
    log.checker.fence_run("z1-n002", 2, at(15.0));
    assert_eq!(log.rules(), ["fence-while-paused", "fence-while-paused"]);
    // Ran out: the fence goes on.
    log.fence_attempt(21.0, A, "z1-n002", 1);
    log.checker.fence_run("z1-n002", 1, at(21.1));
    // Resumed by hand at 35 s, before its end.
    log.checker.pause_fencing(at(30.0), at(90.0));
    log.checker.resume_fencing(at(35.0));
    log.fence_attempt(36.0, A, "z1-n002", 1);
    assert_eq!(log.rules().len(), 2, "{:?}", log.violations());
}

#[test]
fn a_fault_that_stops_the_leaders_reads_delays_when_the_pause_must_be_seen() {
    let mut log = Log::new();
    die(&mut log, &zone(1, 2..=2), 1.0);
    log.checker.pause_fencing(at(40.0), at(60.0));
    log.checker
        .fault(FaultClass::Blocking, "burst-500", at(40.0), at(45.0));
    log.fence_attempt(44.0, A, "z1-n002", 2);
    assert_eq!(log.rules(), Vec::<&str>::new(), "{:?}", log.violations());
    log.fence_attempt(48.0, A, "z1-n002", 2);
    assert_eq!(log.rules(), ["fence-while-paused"]);
}

#[test]
fn a_fence_step_for_a_node_whose_kubelet_renews_is_a_violation() {
    let mut log = Log::new();
    log.renewals("z1-n003", 1.0, 20.0);
    log.fence_attempt(21.0, A, "z1-n003", 1);
    assert_eq!(log.rules(), ["fence-while-renewing"]);
    // Silent since 10.5 s: fenced at 17 s, past the grace period.
    die(&mut log, &zone(2, 3..=3), 10.0);
    log.fence_attempt(17.0, A, "z2-n003", 1);
    assert_eq!(log.rules().len(), 1, "{:?}", log.violations());
}

#[test]
fn a_fence_step_in_a_partially_disrupted_zone_is_a_violation() {
    let mut log = Log::new();
    // Three of them silent too briefly at 11 s for the batched views to count them (the
    // store alone does).
    die(&mut log, &zone(1, 1..=2), 1.0);
    die(&mut log, &zone(1, 3..=5), 9.0);
    for n in 1..=5 {
        log.unknown(10.0, A, &format!("z1-n00{n}"));
    }
    // Within the zone allowance of the state change: may have been decided before it.
    log.fence_attempt(11.0, A, "z1-n002", 1);
    assert_eq!(log.rules(), Vec::<&str>::new(), "{:?}", log.violations());
    log.fence_attempt(13.0, A, "z1-n001", 2);
    assert_eq!(log.rules(), ["fence-in-disrupted-zone"]);
    // Another zone, a node dying alone: fine.
    die(&mut log, &zone(2, 4..=4), 4.0);
    log.fence_attempt(14.0, A, "z2-n004", 1);
    assert_eq!(log.rules().len(), 1, "{:?}", log.violations());
    // Every batched view: six of z3's kubelets silent long since, none Unknown in the store.
    die(&mut log, &zone(3, 1..=6), 4.0);
    log.fence_attempt(15.0, A, "z3-n001", 1);
    assert_eq!(
        log.rules(),
        ["fence-in-disrupted-zone", "fence-in-disrupted-zone"],
        "{:?}",
        log.violations()
    );
}

#[test]
fn wall_clock_times_map_onto_the_simulators_clock() {
    use crate::soak::fencing::{wall_ahead_ms, wall_to_sim};
    // The wall clock stepped 23 s ahead of a simulator started before the step: a pause the
    // daemons hold until wall 10:00:30 holds until 10:00:07 on the simulator's clock, and the
    // agent's run stamped 10:00:20 ran at 09:59:57 there.
    assert_eq!(wall_to_sim(at(30.0), 23_000), at(7.0));
    assert_eq!(wall_to_sim(at(20.0), -5_000), at(25.0));
    // Read now against a simulator clock that is the wall clock: no gap worth a second.
    let wall_now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    let ahead = wall_ahead_ms(node_lifecycled::time::Time::from_unix_millis(wall_now));
    assert!(ahead.abs() < 1_000, "{ahead}");
}
