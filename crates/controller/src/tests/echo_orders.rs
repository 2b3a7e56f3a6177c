//! The fake API's echo orders (`controller::testing`): one node failure told the same way
//! whether a write's watch echo comes before its answer, after it, or only later. Without the
//! echo first, the next write of the node is decided before the store has its new version: it
//! meets a 409 and is sent again on the node as it now is. The composed machine, taint eviction
//! included.

use super::harness::*;
use crate::model::ConditionStatus::{True, Unknown};
use crate::model::TaintEffect::NoExecute;
use crate::model::taint_keys;
use crate::testing::EchoOrder;
use crate::time::Time;

fn t0() -> Time {
    date(2026, 2, 1, 9, 0, 0)
}

/// n1 falls silent at t0 with an intolerant pod on it, n2 keeps heartbeating; ten minutes on.
fn failure(echo: EchoOrder) -> FakeApi {
    let mut api = FakeApi::new(test_settings(), t0());
    api.echo = echo;
    for name in ["n1", "n2"] {
        api.alive.insert(n(name));
        api.put_lease(lease(name, t0()));
    }
    let nodes = ["n1", "n2"]
        .map(|name| node(name).zone("r", "z").ready(True, t0(), t0()).build())
        .to_vec();
    api.start(nodes, vec![pod("web", "n1")], vec![]);
    api.alive.remove(&n("n1"));
    for minute in 1..=10 {
        api.run_until(t0() + secs(60 * minute));
        if echo == EchoOrder::AnswerOnly {
            // The watch catches up once a minute.
            api.deliver_late();
        }
    }
    api
}

#[test]
fn a_node_failure_ends_the_same_whatever_the_echo_order() {
    for echo in [
        EchoOrder::EchoFirst,
        EchoOrder::AnswerFirst,
        EchoOrder::AnswerOnly,
    ] {
        let api = failure(echo);
        assert_eq!(api.ready_of("n1"), Some(Unknown), "{echo:?}");
        assert!(
            api.has_taint("n1", taint_keys::UNREACHABLE, NoExecute),
            "{echo:?}: {:?}",
            api.taints("n1")
        );
        assert_eq!(api.evicted_names(), ["web"], "{echo:?}");
        assert_eq!(api.ready_of("n2"), Some(True), "{echo:?}");
        assert!(
            api.taints("n2").is_empty(),
            "{echo:?}: {:?}",
            api.taints("n2")
        );
        if echo == EchoOrder::EchoFirst {
            // The live executor's order: every write carries the version it wrote last.
            assert_eq!(api.conflicts, 0);
        } else {
            // A write decided on the answer, before the echo, carries the old version.
            assert!(api.conflicts > 0, "{echo:?}: no 409 before the echo");
        }
    }
}
