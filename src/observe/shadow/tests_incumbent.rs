//! The incumbent's writes read off watched objects, and what our controllers see instead.

use std::rc::Rc;

use super::*;
use crate::model::{ConditionText, NodeCondition, NodeConditionType};

fn node(name_: &str, ready: ConditionStatus, reason: &str, taints: Vec<Taint>) -> Node {
    Node {
        name: name(name_),
        uid: name("uid"),
        resource_version: name("1"),
        creation_timestamp: t(0),
        labels: Default::default(),
        taints,
        unschedulable: false,
        conditions: vec![NodeCondition {
            kind: NodeConditionType::Ready,
            status: ready,
            last_heartbeat_time: Some(t(0)),
            last_transition_time: Some(t(1)),
            text: ConditionText::new(Some(name(reason)), None),
        }],
        other_conditions: Vec::new(),
        autonomy: Default::default(),
        maintenance: Default::default(),
        writers: Default::default(),
    }
}

fn pod(ready: ConditionStatus, disruption_target: bool) -> Pod {
    Pod {
        key: PodKey {
            namespace: name("default"),
            name: name("p"),
        },
        uid: name("uid-p"),
        resource_version: name("1"),
        node_name: Some(name("n1")),
        ready: Some(ready),
        tolerations: Rc::from(Vec::new()),
        deleting: disruption_target,
        daemonset_owned: false,
        disruption_target,
        creation_timestamp: None,
    }
}

impl IncumbentWatch {
    fn node_at(&mut self, node: &Node) -> Vec<TheirWrite> {
        self.node(node, t(LATER))
    }
    fn pod_at(&mut self, pod: &Pod) -> Vec<TheirWrite> {
        self.pod(pod, t(LATER))
    }
}

#[test]
fn a_pod_marked_before_its_node_is_seen_marked_is_the_incumbents_too() {
    use ConditionStatus::*;
    let mut w = IncumbentWatch::default();
    w.prime();
    // The pod watch is first with the incumbent's NotReady; the node's Unknown follows.
    assert!(w.pod(&pod(False, false), t(LATER)).is_empty());
    let out = w.node(
        &node("n1", Unknown, "NodeStatusUnknown", Vec::new()),
        t(LATER + 1),
    );
    let kinds: Vec<ShadowKind> = out.iter().map(|o| o.subject.kind).collect();
    assert_eq!(kinds, [ShadowKind::PodNotReady, ShadowKind::NodeUnknown]);
    assert!(
        w.pod(&pod(False, false), t(LATER + 2)).is_empty(),
        "said once"
    );
    // A pod its kubelet had set NotReady long before the node died is not.
    let mut w = IncumbentWatch::default();
    w.prime();
    w.pod(&pod(False, false), t(LATER));
    let out = w.node(
        &node("n1", Unknown, "NodeStatusUnknown", Vec::new()),
        t(LATER + 60),
    );
    assert_eq!(out.len(), 1, "{out:?}");
}

#[test]
fn the_incumbent_is_read_off_marks_only_a_controller_writes() {
    use ConditionStatus::*;
    let mut w = IncumbentWatch::default();
    // What was there before we watched is no write.
    let down = node("n0", Unknown, "NodeStatusUnknown", Vec::new());
    assert!(w.node_at(&down).is_empty());
    w.prime();
    assert!(w.node_at(&down).is_empty(), "unchanged");
    // A kubelet saying NotReady is not the incumbent.
    assert!(
        w.node_at(&node("n1", False, "KubeletNotReady", Vec::new()))
            .is_empty()
    );
    let out = w.node_at(&node("n1", Unknown, "NodeStatusUnknown", Vec::new()));
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].subject.kind, ShadowKind::NodeUnknown);
    assert!(out[0].evidence.contains("reason=NodeStatusUnknown"));
    let ne = taint(
        "node.kubernetes.io/unreachable",
        TaintEffect::NoExecute,
        Some(t(5)),
    );
    let other = taint("example.com/dedicated", TaintEffect::NoExecute, None);
    let out = w.node_at(&node("n1", Unknown, "NodeStatusUnknown", vec![ne, other]));
    assert_eq!(out.len(), 1, "only the lifecycle's taints: {out:?}");
    assert_eq!(out[0].subject.taint.as_deref(), Some(UNREACHABLE_NE));
    assert!(out[0].evidence.contains("timeAdded="));
    // Its pods: Ready=False under a marked node, then taint eviction's condition.
    let out = w.pod_at(&pod(False, false));
    assert_eq!(out[0].subject.kind, ShadowKind::PodNotReady);
    let out = w.pod_at(&pod(False, true));
    assert_eq!(out[0].subject.kind, ShadowKind::PodDeletion);
    // The kubelet back: the taint removal is theirs, Ready=True is nobody's to compare.
    let out = w.node_at(&node("n1", True, "KubeletReady", Vec::new()));
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].subject.kind, ShadowKind::TaintRemoved);
    assert_eq!(w.len().0, 1, "only n0 is still marked");
}

#[test]
fn our_controllers_never_see_the_incumbents_marks_so_they_still_decide() {
    use ConditionStatus::*;
    let ours = node("n1", True, "KubeletReady", Vec::new());
    let kcm_taint = taint(
        "node.kubernetes.io/unreachable",
        TaintEffect::NoExecute,
        Some(t(5)),
    );
    let other = taint("example.com/dedicated", TaintEffect::NoSchedule, None);
    let raw = node(
        "n1",
        Unknown,
        "NodeStatusUnknown",
        vec![kcm_taint, other.clone()],
    );
    assert!(mask::node_needs_mask(&raw, Some(&ours)));
    let seen = mask::node(raw.clone(), Some(&ours));
    assert_eq!(
        seen.conditions, ours.conditions,
        "Ready as the kubelet last posted it"
    );
    assert_eq!(
        seen.taints,
        vec![other],
        "an admin's taint passes, the incumbent's does not"
    );
    // Our own dry-run taint, in our view, stays.
    let mut ours_tainted = ours.clone();
    let mine = taint(
        "node.kubernetes.io/unreachable",
        TaintEffect::NoSchedule,
        Some(t(4)),
    );
    ours_tainted.taints.push(mine.clone());
    assert!(
        mask::node(raw.clone(), Some(&ours_tainted))
            .taints
            .contains(&mine)
    );
    // First sight, and the kubelet's own word, pass as they are.
    assert_eq!(mask::node(raw.clone(), None), raw);
    let back = node("n1", True, "KubeletReady", Vec::new());
    assert!(!mask::node_needs_mask(&back, Some(&ours)));
    // A pod: the incumbent's NotReady and eviction are kept from us.
    let view = mask::PodView {
        ready: Some(True),
        deleting: false,
        disruption_target: false,
    };
    let seen = mask::pod(pod(False, true), Some(view), true);
    assert_eq!(
        (seen.ready, seen.deleting, seen.disruption_target),
        (Some(True), false, false)
    );
    let kubelet_says = mask::pod(pod(False, false), Some(view), false);
    assert_eq!(
        kubelet_says.ready,
        Some(False),
        "its node is not marked: the kubelet's word"
    );
    // Our own eviction (never sent) outlives the incumbent's NotReady mark of the pod, which
    // arrives before its own eviction: still evicted in our view, not evicted twice.
    let evicted = mask::PodView {
        ready: Some(True),
        deleting: true,
        disruption_target: true,
    };
    let seen = mask::pod(pod(False, false), Some(evicted), true);
    assert_eq!(
        (seen.ready, seen.deleting, seen.disruption_target),
        (Some(True), true, true)
    );
    // The controllers' store keeps the deletion alone (the condition was the executor's).
    let deleting = mask::PodView {
        disruption_target: false,
        ..evicted
    };
    let seen = mask::pod(pod(False, false), Some(deleting), true);
    assert!(seen.deleting, "still deleting in our view");
}

#[test]
fn where_managed_fields_name_another_writer_it_is_not_the_incumbent() {
    use ConditionStatus::*;
    let kcm_ready = r#"{"f:status":{"f:conditions":{"k:{\"type\":\"Ready\"}":{"f:status":{}}}}}"#;
    let taints = r#"{"f:spec":{"f:taints":{}}}"#;
    let registered = taint(
        "node.kubernetes.io/not-ready",
        TaintEffect::NoSchedule,
        None,
    );
    let mut w = IncumbentWatch::default();
    w.prime();
    // A kubelet registering with the not-ready taint: its own, not the incumbent's.
    let mut n = node("n1", True, "KubeletReady", vec![registered.clone()]);
    n.writers = crate::model::Writers::from_entries([("kubelet", taints)]);
    assert!(w.node_at(&n).is_empty());
    // The incumbent's Unknown and taint are its.
    let unreachable = taint(
        "node.kubernetes.io/unreachable",
        TaintEffect::NoSchedule,
        None,
    );
    let mut n = node("n1", Unknown, "NodeStatusUnknown", vec![unreachable]);
    n.writers = crate::model::Writers::from_entries([
        ("kube-controller-manager", kcm_ready),
        ("kube-controller-manager", taints),
    ]);
    let kinds: Vec<ShadowKind> = w.node_at(&n).iter().map(|o| o.subject.kind).collect();
    assert_eq!(
        kinds,
        [
            ShadowKind::NodeUnknown,
            ShadowKind::TaintRemoved,
            ShadowKind::TaintAdded
        ]
    );
    // An Unknown some other manager wrote is not.
    let mut w = IncumbentWatch::default();
    w.prime();
    let mut n = node("n2", Unknown, "NodeStatusUnknown", Vec::new());
    n.writers = crate::model::Writers::from_entries([("chaos-tool", kcm_ready)]);
    assert!(w.node_at(&n).is_empty());
}
