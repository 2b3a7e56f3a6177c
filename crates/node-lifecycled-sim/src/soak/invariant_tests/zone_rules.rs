//! The zone rules as upstream's batched pass would judge them: the first taint of a zone whose
//! nodes die together, slow deaths, early suspects and every kubelet silent.

use super::*;

#[test]
fn the_first_taint_of_a_zone_whose_nodes_die_together_is_a_violation_in_the_batched_view() {
    // Six of z1's eight kubelets go silent at 10 s; z1-n001 beat last at 9.0, the other five
    // at 9.5. The daemon declares z1-n001 Unknown at its deadline (14.0) and taints it at
    // once: the store shows one node of eight not ready (a Normal zone), but the other five
    // have been silent for 4.6 s (more than 2 s: early suspects, + 1 s of allowance).
    let mut log = Log::new();
    die(&mut log, &zone(1, 1..=1), 9.0);
    die(&mut log, &zone(1, 2..=6), 9.5);
    log.unknown(14.0, A, "z1-n001");
    log.taints(14.1, A, "z1-n001", &["unreachable"]);
    assert_eq!(
        log.rules(),
        ["taint-forbidden-by-zone"],
        "{:?}",
        log.violations()
    );
    let detail = &log.violations()[0].detail;
    assert!(detail.contains("partially disrupted"), "{detail}");
    assert!(detail.contains("6 of 8 nodes not ready"), "{detail}");
    assert!(
        detail.contains("5 of them only by their kubelet's silence"),
        "{detail}"
    );
}

#[test]
fn the_first_taint_of_a_single_dead_node_or_of_a_zone_dying_slowly_is_fine() {
    // Only z1-n001 silent.
    let mut log = Log::new();
    die(&mut log, &zone(1, 1..=1), 9.0);
    log.unknown(14.0, A, "z1-n001");
    log.taints(14.1, A, "z1-n001", &["unreachable"]);
    assert_eq!(log.rules(), Vec::<&str>::new());
    // The five others went silent 2.6 s before the taint: past the early rule's 2 s but
    // within its allowance, so the daemon may not have counted them yet.
    let mut log = Log::new();
    die(&mut log, &zone(1, 1..=1), 9.0);
    die(&mut log, &zone(1, 2..=6), 11.5);
    log.unknown(14.0, A, "z1-n001");
    log.taints(14.1, A, "z1-n001", &["unreachable"]);
    assert_eq!(log.rules(), Vec::<&str>::new(), "{:?}", log.violations());
}

#[test]
fn without_early_suspects_only_nodes_whose_grace_ends_within_a_period_count() {
    let mut log = Log::new();
    log.checker.limits.early_suspects = None;
    // Silent 4.6 s at the taint: upstream's batch (grace 5 s, period 1 s) would not have seen
    // them Unknown yet with the 1 s allowance.
    die(&mut log, &zone(1, 1..=1), 9.0);
    die(&mut log, &zone(1, 2..=6), 9.5);
    log.unknown(14.0, A, "z1-n001");
    log.taints(14.1, A, "z1-n001", &["unreachable"]);
    assert_eq!(log.rules(), Vec::<&str>::new(), "{:?}", log.violations());
    // Silent 6.1 s and still Ready in the store (the daemon has not declared them): the
    // batch that saw z1-n001 Unknown saw them too.
    let mut log = Log::new();
    log.checker.limits.early_suspects = None;
    die(&mut log, &zone(1, 2..=6), 8.0);
    die(&mut log, &zone(1, 1..=1), 9.0);
    log.unknown(14.0, A, "z1-n001");
    log.taints(14.1, A, "z1-n001", &["unreachable"]);
    assert_eq!(
        log.rules(),
        ["taint-forbidden-by-zone"],
        "{:?}",
        log.violations()
    );
    assert!(
        log.violations()[0]
            .detail
            .contains("upstream's batched view")
    );
}

#[test]
fn the_first_taint_while_every_kubelet_is_silent_is_a_violation_unless_one_zone_is_up() {
    let mut log = Log::new();
    let mut all = nodes();
    all.retain(|n| n != "z2-n001");
    die(&mut log, &zone(2, 1..=1), 9.0);
    die(&mut log, &all, 9.5);
    log.unknown(14.0, A, "z2-n001");
    log.taints(14.1, A, "z2-n001", &["unreachable"]);
    assert_eq!(
        log.rules(),
        ["taint-forbidden-by-zone"],
        "{:?}",
        log.violations()
    );
    assert!(log.violations()[0].detail.contains("every zone"));
    // z3-n008 alive: z2 is fully disrupted alone (normal rate), z3 partially.
    let mut log = Log::new();
    all.retain(|n| n != "z3-n008");
    die(&mut log, &zone(2, 1..=1), 9.0);
    die(&mut log, &all, 9.5);
    log.renewals("z3-n008", 10.0, 14.0);
    log.unknown(14.0, A, "z2-n001");
    log.taints(14.1, A, "z2-n001", &["unreachable"]);
    assert_eq!(log.rules(), Vec::<&str>::new(), "{:?}", log.violations());
}

#[test]
fn a_whole_zone_dying_is_tainted_even_when_a_silence_is_too_short_to_tell() {
    // z3 all silent; z3-n008 only since 11.2 (2.9 s at the taint: counted either way). Seen
    // not ready it makes z3 fully disrupted (tainted at the normal rate), seen Ready
    // partially: one view allows the taint.
    let mut log = Log::new();
    die(&mut log, &zone(3, 1..=1), 9.0);
    die(&mut log, &zone(3, 2..=7), 9.5);
    die(&mut log, &zone(3, 8..=8), 11.2);
    log.unknown(14.0, A, "z3-n001");
    log.taints(14.1, A, "z3-n001", &["unreachable"]);
    assert_eq!(log.rules(), Vec::<&str>::new(), "{:?}", log.violations());
}
