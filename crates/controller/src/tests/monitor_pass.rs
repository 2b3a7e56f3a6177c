//! The monitor pass leaves out the nodes whose evaluation would do nothing. The stories where the
//! pass is the only one to act, run with it and with the reference pass that evaluates every node:
//! the same actions at the same instants, and the pass did its job.
//! (`tests/randomized/monitor_pass.rs` compares the two on random scripts.)
//! The node lifecycle alone (`harness.rs` says why).

use super::harness::*;
use crate::model::ConditionStatus::True;
use crate::model::TaintEffect::NoExecute;
use crate::model::taint_keys;
use crate::time::Time;

fn t0() -> Time {
    date(2024, 1, 1, 12, 0, 0)
}

fn renewal(node: &str, at: Time, resource_version: &str) -> crate::model::Lease {
    crate::model::Lease {
        resource_version: resource_version.into(),
        ..lease(node, at)
    }
}

/// Runs `story` with the reference pass and with the settled-node pass; both logs must be the
/// same. Returns the story's harness (settled-node pass).
fn both_ways(story: impl Fn(bool) -> Harness) -> Harness {
    let reference = story(true);
    let settled = story(false);
    let log = |h: &Harness| -> Vec<String> {
        h.log.iter().map(|(t, a)| format!("{t:?} {a:?}")).collect()
    };
    assert_eq!(log(&reference), log(&settled));
    settled
}

/// A node listed Ready but still tainted unreachable (it recovered while we were away), whose
/// first untaint write fails; `prepare` runs on the harness before the node is fed.
fn recovered_node_whose_untaint_fails_once(
    settings: crate::Settings,
    prepare: impl FnOnce(&mut Harness),
) -> Harness {
    let mut h = Harness::lifecycle_alone(settings, t0());
    prepare(&mut h);
    h.faults.fail_taint_writes = 1;
    h.put_lease(lease("n1", t0()));
    h.put_node(
        node("n1")
            .zone("r", "z")
            .ready(True, t0(), t0())
            .taint(taint_keys::UNREACHABLE, NoExecute)
            .build(),
    );
    h.feed(crate::Input::InitialSyncDone);
    h
}

/// A node listed Ready but still tainted unreachable (it recovered while we were away): its
/// untaint write fails, and nothing about the node changes afterwards. Only the next monitor
/// pass tries again, so a tainted node is never left out of the pass.
#[test]
fn a_recovered_node_whose_untaint_failed_is_untainted_by_the_next_monitor_pass() {
    let h = both_ways(|full| {
        let mut h = recovered_node_whose_untaint_fails_once(test_settings(), |h| {
            h.ctl.use_full_monitor_pass(full)
        });
        for rv in ["2", "3"] {
            h.run_for(secs(10));
            h.put_lease(renewal("n1", h.now, rv));
        }
        h
    });
    assert!(!h.has_taint("n1", taint_keys::UNREACHABLE, NoExecute));
    let writes = h
        .log
        .iter()
        .filter(|(_, a)| matches!(a, crate::Action::PatchNodeTaints { .. }))
        .map(|(t, _)| *t)
        .collect::<Vec<_>>();
    assert_eq!(
        writes,
        vec![t0(), t0() + secs(5)],
        "the failed write, then the pass's"
    );
}

fn ms(n: u64) -> std::time::Duration {
    std::time::Duration::from_millis(n)
}

/// The shell ticks the machine on a wake-up it makes anyway (a watch's end) up to
/// `monitor_pass_early` before the pass's tick: the pass runs then, does its work (here the
/// retried untaint), and the next tick is a period after the nominal one, so the grid the
/// shell aims at stays put. Before the window opens a tick runs nothing; a late tick keeps the
/// grid too.
#[test]
fn a_tick_in_the_window_before_the_pass_runs_it_and_the_next_tick_stays_on_the_grid() {
    let settings = crate::Settings {
        monitor_pass_early: secs(2),
        ..test_settings()
    };
    let mut h = recovered_node_whose_untaint_fails_once(settings, |_| {});
    assert_eq!(
        h.ctl.monitor_pass_window(),
        Some((t0() + secs(3), t0() + secs(5)))
    );
    h.now = t0() + ms(2_900);
    h.feed(crate::Input::Tick);
    assert!(h.has_taint("n1", taint_keys::UNREACHABLE, NoExecute));
    assert_eq!(
        h.ctl.monitor_pass_window().map(|w| w.1),
        Some(t0() + secs(5))
    );

    h.now = t0() + ms(3_500);
    h.feed(crate::Input::Tick);
    assert!(
        !h.has_taint("n1", taint_keys::UNREACHABLE, NoExecute),
        "the pass ran"
    );
    assert_eq!(
        h.ctl.monitor_pass_window(),
        Some((t0() + secs(8), t0() + secs(10))),
        "the next tick a period after the nominal one, not after 3.5 s"
    );
    h.now = t0() + ms(10_300);
    h.feed(crate::Input::Tick);
    assert_eq!(
        h.ctl.monitor_pass_window().map(|w| w.1),
        Some(t0() + secs(15))
    );
    // So late (3.5 s) that the next window would be open already: a period from now.
    h.now = t0() + ms(18_500);
    h.feed(crate::Input::Tick);
    assert_eq!(
        h.ctl.monitor_pass_window().map(|w| w.1),
        Some(t0() + ms(23_500))
    );
}

/// Without `monitor_pass_early` (the machine's default, upstream's `wait.Until`): no window,
/// and the next pass is a period after the one that ran, late or not.
#[test]
fn without_an_early_window_the_pass_runs_at_its_tick_and_the_next_is_a_period_later() {
    let mut h = Harness::lifecycle_alone(test_settings(), t0());
    h.put_lease(lease("n1", t0()));
    h.put_node(node("n1").zone("r", "z").ready(True, t0(), t0()).build());
    h.feed(crate::Input::InitialSyncDone);
    let tick = t0() + secs(5);
    assert_eq!(h.ctl.monitor_pass_window(), Some((tick, tick)));
    h.now = t0() + ms(4_990);
    h.feed(crate::Input::Tick);
    assert_eq!(h.ctl.next_deadline(), Some(tick));
    h.now = t0() + ms(5_300);
    h.feed(crate::Input::Tick);
    assert_eq!(h.ctl.next_deadline(), Some(t0() + ms(10_300)));
}
