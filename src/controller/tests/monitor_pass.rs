//! The monitor pass leaves out the nodes whose evaluation would do nothing (issue #14). The
//! stories where the pass is the only one to act, run with it and with the reference pass that
//! evaluates every node: the same actions at the same instants, and the pass did its job.
//! (`tests/controller_monitor_pass.rs` compares the two on random scripts.)

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
        resource_version: n(resource_version),
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

/// A node listed Ready but still tainted unreachable (it recovered while we were away): its
/// untaint write fails, and nothing about the node changes afterwards. Only the next monitor
/// pass tries again, so a tainted node is never left out of the pass.
#[test]
fn a_recovered_node_whose_untaint_failed_is_untainted_by_the_next_monitor_pass() {
    let h = both_ways(|full| {
        let mut h = Harness::new(test_settings(), t0());
        h.ctl.use_full_monitor_pass(full);
        h.faults.fail_taint_writes = 1;
        h.put_lease(lease("n1", t0()));
        h.put_node(
            node("n1")
                .zone("r", "z")
                .ready(True, t0(), t0())
                .taint(taint_keys::UNREACHABLE, NoExecute)
                .build(),
        );
        h.feed(crate::controller::Input::InitialSyncDone);
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
        .filter(|(_, a)| matches!(a, crate::controller::Action::PatchNodeTaints { .. }))
        .map(|(t, _)| *t)
        .collect::<Vec<_>>();
    assert_eq!(
        writes,
        vec![t0(), t0() + secs(5)],
        "the failed write, then the pass's"
    );
}
