//! The soak's checker under `--partitions` (`domains.rs`) on synthetic write logs: the zone
//! rules judged per domain, and a NoExecute taint in a held domain flagged before `hold_max`
//! only, a pod marked NotReady in a dark site that keeps its pods Ready, a hold that overruns
//! its `hold_max` across a takeover.

use std::time::Duration;

use super::domains;
use super::invariant_tests::{A, B, Log, at, die, ready_post};

fn with_domains() -> Log {
    let mut log = Log::new();
    log.checker
        .use_domains(domains::domain_of, domains::holds(), at(0.0));
    log
}

/// Five of zone z1's eight nodes Unknown: by zone, partially disrupted (rate 0), a taint is a
/// violation; by site (z1 and z2 make s1, 16 nodes), five of sixteen is Normal, a taint is fine.
#[test]
fn zone_rules_are_judged_per_domain() {
    let mut log = with_domains();
    for n in 1..=5 {
        log.unknown(10.0, A, &format!("z1-n00{n}"));
    }
    log.taints(20.0, A, "z1-n002", &["unreachable"]);
    assert_eq!(log.rules(), Vec::<&str>::new(), "{:?}", log.violations());
    // Eleven of s1's sixteen: partially disrupted, small: forbidden.
    for n in 1..=6 {
        log.unknown(21.0, A, &format!("z2-n00{n}"));
    }
    log.taints(30.0, A, "z2-n001", &["unreachable"]);
    assert_eq!(log.rules(), ["taint-forbidden-by-zone"]);
}

/// Site s2 (zone z3) fully dark at 10 s, held for 20 s (less the zone allowance): a NoExecute
/// taint at 15 s is a violation, one at 29 s is not.
#[test]
fn a_noexecute_taint_in_a_held_domain_is_a_violation_until_hold_max() {
    let mut log = with_domains();
    for n in 1..=8 {
        log.unknown(10.0, A, &format!("z3-n00{n}"));
    }
    log.taints(15.0, A, "z3-n001", &["unreachable"]);
    assert_eq!(
        log.rules(),
        ["taint-in-held-domain"],
        "{:?}",
        log.violations()
    );
    log.taints(29.0, A, "z3-n002", &["unreachable"]);
    assert_eq!(log.rules().len(), 1, "{:?}", log.violations());
    // Site s2 back; site s1 dark: its pool holds for 8 s.
    for n in 1..=8 {
        ready_post(&mut log, 35.0, &format!("z3-n00{n}"));
    }
    for z in 1..=2 {
        for n in 1..=8 {
            log.unknown(40.0, A, &format!("z{z}-n00{n}"));
        }
    }
    log.taints(44.0, A, "z1-n001", &["unreachable"]);
    log.taints(47.0, A, "z1-n002", &["unreachable"]);
    log.taints(55.0, A, "z1-n003", &["unreachable"]);
    assert_eq!(
        log.rules(),
        ["taint-in-held-domain", "taint-in-held-domain"],
        "{:?}",
        log.violations()
    );
}

/// Site s2 keeps its pods Ready while disrupted; dark from 10 s, a pod marked at 11 s may have
/// been decided before (the zone allowance), one marked at 20 s (a takeover marking the dark
/// site's pods) is a violation. Site s1's pool marks pods always.
#[test]
fn a_pod_marked_not_ready_in_a_dark_site_that_keeps_pods_ready_is_a_violation() {
    let mut log = with_domains();
    log.checker
        .keep_pods_ready_in(domains::keeping_pods_ready());
    log.checker.add_pod(
        "default/web-30",
        "z3-n002",
        Some(Duration::from_secs(6)),
        at(0.0),
    );
    log.checker.add_pod(
        "default/web-31",
        "z3-n003",
        Some(Duration::from_secs(6)),
        at(0.0),
    );
    log.checker.add_pod(
        "default/web-32",
        "z3-n008",
        Some(Duration::from_secs(6)),
        at(0.0),
    );
    let s2: Vec<String> = (1..=8).map(|n| format!("z3-n00{n}")).collect();
    die(&mut log, &s2, 4.0);
    for n in &s2 {
        log.unknown(10.0, A, n);
    }
    log.mark_pod_not_ready(11.0, A, "default/web-30");
    log.mark_pod_not_ready(12.0, A, "default/web-0");
    assert_eq!(log.rules(), Vec::<&str>::new(), "{:?}", log.violations());
    log.mark_pod_not_ready(20.0, A, "default/web-31");
    assert_eq!(log.rules(), ["pod-marked-in-disrupted-domain"]);
    // Four kubelets back at 21 s, their Ready posts not landed yet: the daemon may see s2
    // Normal from their Leases, and then marks the pods of a node still down.
    for n in &s2[..4] {
        log.checker.kubelet(n, true, at(21.0));
    }
    log.mark_pod_not_ready(21.5, A, "default/web-32");
    assert_eq!(log.rules().len(), 1, "{:?}", log.violations());
    // s1 dark too: its pool says always.
    for z in 1..=2 {
        for n in 1..=8 {
            log.unknown(21.0, A, &format!("z{z}-n00{n}"));
        }
    }
    log.mark_pod_not_ready(30.0, A, "default/web-1");
    assert_eq!(log.rules().len(), 1, "{:?}", log.violations());
}

/// Site s2 dark from 10 s, held 20 s: its first taint is due by 30 s + 2 s of slack.
fn dark_s2() -> Log {
    let mut log = with_domains();
    let nodes: Vec<String> = (1..=8).map(|n| format!("z3-n00{n}")).collect();
    die(&mut log, &nodes, 4.0);
    for n in &nodes {
        log.unknown(10.0, A, n);
    }
    log
}

#[test]
fn a_held_domain_still_dark_after_hold_max_is_tainted_at_once() {
    let mut log = dark_s2();
    log.checker.check_liveness(at(31.5));
    assert_eq!(log.rules(), Vec::<&str>::new(), "{:?}", log.violations());
    log.checker.check_liveness(at(32.5));
    assert_eq!(log.rules(), ["hold-overrun"], "{:?}", log.violations());

    // Played correctly: the first taint at the hold's end.
    let mut log = dark_s2();
    log.taints(30.3, A, "z3-n001", &["unreachable"]);
    log.checker.check_liveness(at(32.5));
    log.checker.check_liveness(at(40.0));
    assert_eq!(log.rules(), Vec::<&str>::new(), "{:?}", log.violations());
}

#[test]
fn a_takeover_mid_hold_moves_the_deadline_to_the_successor_not_a_new_hold() {
    // The leader killed at 18 s, its successor acquires at 20 s: the hold still ends at 30 s.
    let mut log = dark_s2();
    log.checker.leader_killed(at(18.0));
    log.checker.check_liveness(at(19.0));
    log.lease_taken(20.0, B, "daemon-b");
    log.checker.check_liveness(at(32.5));
    assert_eq!(log.rules(), ["hold-overrun"], "{:?}", log.violations());

    // A successor that acquires late (29 s) has until 29 + 3 s settle + 2 s.
    let mut log = dark_s2();
    log.checker.leader_killed(at(26.0));
    log.checker.check_liveness(at(32.5));
    log.lease_taken(29.0, B, "daemon-b");
    log.checker.check_liveness(at(33.0));
    log.taints(33.5, B, "z3-n001", &["unreachable"]);
    log.checker.check_liveness(at(40.0));
    assert_eq!(log.rules(), Vec::<&str>::new(), "{:?}", log.violations());
}

/// Site s2 held; as its hold ends, site s1's kubelets go silent too (not judged yet): with them
/// every domain would be down, and the daemon waits for their verdicts. Not an overrun.
#[test]
fn a_hold_that_ends_as_every_other_domain_goes_silent_is_excused() {
    let mut log = dark_s2();
    let s1: Vec<String> = (1..=2)
        .flat_map(|z| (1..=8).map(move |n| format!("z{z}-n00{n}")))
        .collect();
    die(&mut log, &s1, 27.0);
    log.checker.check_liveness(at(32.5));
    assert_eq!(log.rules(), Vec::<&str>::new(), "{:?}", log.violations());
}
