//! The soak's checker under `--partitions` (`domains.rs`) on synthetic write logs: the zone
//! rules judged per domain, and a NoExecute taint in a held domain flagged before `hold_max`
//! only.

use super::domains;
use super::invariant_tests::{A, Log, at, ready_post};

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
