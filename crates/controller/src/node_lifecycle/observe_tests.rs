//! A write of ours known to have landed enters the store through its one writer, and taint
//! eviction sees it as any node change: at the write's result when no answer carried the node,
//! and the watch's echo later changes nothing.

use std::time::Duration;

use crate::controllers::Controllers;
use crate::events::Event;
use crate::inputs::{Input, Outcome};
use crate::model::{ConditionStatus, Node, Taint, TaintEffect, taint_keys};
use crate::tests::harness::{date, node, pod, test_settings};
use crate::time::Time;
use crate::{Action, ActionId};

/// Feeds `input`, then answers every taint write with a bare `Ok` (no answer object, no watch
/// echo), as long as there are some; returns every action and the last taints written.
fn feed_without_echo(
    c: &mut Controllers,
    input: Input,
    now: Time,
) -> (Vec<Action>, Option<Vec<Taint>>) {
    let mut all = Vec::new();
    let mut written = None;
    let mut pending = vec![input];
    while let Some(input) = pending.pop() {
        for action in c.handle(input, now) {
            if let Action::PatchNodeTaints { id, taints, .. } = &action {
                written = Some(taints.clone());
                pending.push(Input::Result {
                    id: *id,
                    outcome: Outcome::Ok,
                });
            }
            all.push(action);
        }
    }
    (all, written)
}

fn evictions(actions: &[Action]) -> Vec<String> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::EvictPod { pod, .. } => Some(pod.to_string()),
            _ => None,
        })
        .collect()
}

fn cancellations(actions: &[Action]) -> usize {
    actions
        .iter()
        .filter(|a| {
            matches!(a, Action::RecordEvent(Event { message, .. })
                if message.starts_with("Cancelling"))
        })
        .count()
}

fn not_ready_no_execute(node: &Node) -> bool {
    node.no_execute_taints()
        .any(|t| &*t.key == taint_keys::NOT_READY && t.effect == TaintEffect::NoExecute)
}

#[test]
fn a_taint_write_that_landed_reaches_taint_eviction_before_its_echo() {
    let t0 = date(2026, 1, 1, 12, 0, 0);
    let mut c = Controllers::new(test_settings(), t0);
    let mut inputs = vec![Input::InformersWatching(Some(Duration::ZERO))];
    // Three nodes: one of them down leaves the zone normal (tainting goes on).
    for name in ["n1", "n2", "n3"] {
        let ready = node(name).ready(ConditionStatus::True, t0, t0).build();
        inputs.push(Input::NodeUpsert(ready));
    }
    inputs.extend([Input::PodUpsert(pod("plain", "n1")), Input::InitialSyncDone]);
    for input in inputs {
        assert!(evictions(&c.handle(input, t0)).is_empty());
    }
    let t1 = t0 + Duration::from_secs(1);
    let mut not_ready = node("n1").ready(ConditionStatus::False, t1, t1).build();
    not_ready.resource_version = crate::model::Name::from("2");
    let (mut actions, mut written) =
        feed_without_echo(&mut c, Input::NodeUpsert(not_ready.clone()), t1);
    // The NoExecute taint may wait for the zone queues' pass: tick until it is written.
    let mut now = t1;
    while !written
        .as_ref()
        .is_some_and(|w| w.iter().any(|t| t.effect == TaintEffect::NoExecute))
    {
        now = c.next_deadline().expect("a pass is armed");
        assert!(
            now < t1 + Duration::from_secs(10),
            "no NoExecute taint written"
        );
        let (more, w) = feed_without_echo(&mut c, Input::Tick, now);
        actions.extend(more);
        written = w.or(written);
    }
    let written = written.expect("the not-ready taints are written");
    // Known to be written: the store holds the taints, and the pod that tolerates nothing is
    // evicted at once, with no watch event yet.
    let stored = c.store().node("n1").expect("n1 is held");
    assert!(not_ready_no_execute(stored), "{:?}", stored.taints);
    assert_eq!(evictions(&actions), ["default/plain"]);
    // The watch's echo of our write, later: nothing new to judge, nothing cancelled.
    let t2 = now + Duration::from_millis(200);
    not_ready.resource_version = crate::model::Name::from("4");
    not_ready.taints = written;
    let echo = c.handle(Input::NodeUpsert(not_ready), t2);
    assert!(evictions(&echo).is_empty(), "{echo:?}");
    assert_eq!(cancellations(&echo), 0, "{echo:?}");
}

/// A result for a write the lifecycle does not know (or no longer waits for) lands nothing.
#[test]
fn an_unknown_result_lands_nothing() {
    let t0 = date(2026, 1, 1, 12, 0, 0);
    let c = Controllers::new(test_settings(), t0);
    let result = crate::inputs::Observed::Input(Input::Result {
        id: ActionId(424_242),
        outcome: Outcome::Ok,
    });
    assert_eq!(c.lifecycle().landed(&result), None);
}
