//! The comparer on a virtual clock: what an operator running shadow mode beside
//! kube-controller-manager would see, story by story.

use std::rc::Rc;
use std::time::Duration;

use crate::controller::Decision;
use crate::controller::decisions::{Heartbeat, LeaseEvidence, TaintReason};
use crate::controller::zones::ZoneState;
use crate::model::{
    ConditionStatus, ConditionText, Node, NodeCondition, NodeConditionType, Pod, PodKey, Taint,
    TaintEffect,
};
use crate::time::Time;

use super::report::{self, Format};
use super::*;

const PERIOD: Duration = Duration::from_secs(5);

fn t(s: u64) -> Time {
    Time::from_unix_millis(1_800_000_000_000 + s * 1000)
}

struct NoFacts;
impl RuleProbe for NoFacts {
    fn facts(&self, _: &str) -> NodeFacts {
        NodeFacts::default()
    }
}

struct Facts(NodeFacts);
impl RuleProbe for Facts {
    fn facts(&self, _: &str) -> NodeFacts {
        self.0.clone()
    }
}

/// A comparer started long enough ago that a restart explains nothing.
fn comparer() -> Comparer {
    Comparer::new(
        PERIOD,
        GRACE,
        t(0),
        ShadowHistory::new(t(0).as_unix_millis()),
    )
}
/// A grace whose pair bound is the longest, 10 minutes.
const GRACE: Duration = Duration::from_secs(100);
const PAIR_BOUND: Duration = Duration::from_secs(600);

#[test]
fn the_pair_bound_is_six_graces_within_limits() {
    assert_eq!(pair_bound(GRACE), PAIR_BOUND);
    assert_eq!(
        pair_bound(Duration::from_secs(50)),
        Duration::from_secs(300)
    );
    assert_eq!(pair_bound(Duration::from_secs(2)), Duration::from_secs(30));
}
const LATER: u64 = 3600;

fn name(s: &str) -> Rc<str> {
    Rc::from(s)
}

fn unknown(node: &str) -> Decision {
    Decision::NodeUnknown {
        node: name(node),
        zone: name("eu/a"),
        last_seen: t(LATER - 50),
        heartbeat: Heartbeat::Lease { renew_time: None },
        grace: Duration::from_secs(50),
        lease: LeaseEvidence::NoLease,
    }
}

fn taint(key: &str, effect: TaintEffect, added: Option<Time>) -> Taint {
    Taint {
        key: name(key),
        value: name(""),
        effect,
        time_added: added,
    }
}

fn tainted(node: &str, added: Vec<Taint>) -> Decision {
    Decision::Taints {
        node: name(node),
        zone: name("eu/a"),
        added,
        removed: Vec::new(),
        why: TaintReason {
            ready: Some(ConditionStatus::Unknown),
            zone_queue: None,
            swapped: false,
            reachable: false,
        },
    }
}

fn their(kind: ShadowKind, node: &str, taint: Option<&str>) -> TheirWrite {
    TheirWrite {
        subject: Subject {
            kind,
            node: node.to_string(),
            pod: None,
            taint: taint.map(str::to_string),
        },
        evidence: "wrote".to_string(),
    }
}

const UNREACHABLE_NE: &str = "node.kubernetes.io/unreachable:NoExecute";

#[test]
fn a_node_that_dies_is_judged_the_same_by_both_within_a_period() {
    let mut c = comparer();
    assert!(c.ours(&[unknown("n1")], t(LATER), &NoFacts).is_empty());
    let out = c.theirs(
        vec![their(ShadowKind::NodeUnknown, "n1", None)],
        t(LATER + 2),
        &NoFacts,
    );
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].class, Class::Same);
    assert_eq!(out[0].diff_ms, Some(-2000));
    assert!(!out[0].is_divergence());
    assert_eq!(c.history.total(Class::Same, ShadowKind::NodeUnknown), 1);
    assert_eq!(c.pending(), 0);
}

#[test]
fn ours_well_before_theirs_is_earlier_and_with_no_rule_a_finding() {
    let mut c = comparer();
    c.theirs(
        vec![their(ShadowKind::NodeUnknown, "n1", None)],
        t(LATER + 30),
        &NoFacts,
    );
    let out = c.ours(&[unknown("n1")], t(LATER + 60), &NoFacts);
    assert_eq!(out[0].class, Class::Later);
    let mut c = comparer();
    c.ours(&[unknown("n1")], t(LATER), &NoFacts);
    let out = c.theirs(
        vec![their(ShadowKind::NodeUnknown, "n1", None)],
        t(LATER + 30),
        &NoFacts,
    );
    assert_eq!(out[0].class, Class::Earlier);
    assert!(out[0].is_finding());
    assert!(out[0].class.alerts());
    let line = report::line(&out[0]);
    assert_eq!(line.decision, "shadow");
    assert_eq!(line.level, log::Level::Warn);
    assert!(
        line.message.contains("earlier node_unknown node=n1"),
        "{}",
        line.message
    );
    assert!(
        line.message.contains("rule=none (a finding)"),
        "{}",
        line.message
    );
}

#[test]
fn a_zone_waiting_for_its_suspects_explains_a_taint_only_theirs() {
    let mut c = comparer();
    let waits = Decision::ZoneWaits {
        zone: name("eu/a"),
        suspects: 3,
        would_be: ZoneState::PartialDisruption,
        all_down: false,
    };
    c.ours(&[unknown("n1"), waits], t(LATER), &NoFacts);
    c.theirs(
        vec![
            their(ShadowKind::NodeUnknown, "n1", None),
            their(ShadowKind::TaintAdded, "n1", Some(UNREACHABLE_NE)),
        ],
        t(LATER + 1),
        &NoFacts,
    );
    assert!(
        c.tick(t(LATER + 100), &NoFacts).is_empty(),
        "not before the bound"
    );
    let out = c.tick(t(LATER + 1 + PAIR_BOUND.as_secs()), &NoFacts);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].class, Class::OnlyTheirs);
    assert_eq!(out[0].subject.taint.as_deref(), Some(UNREACHABLE_NE));
    assert_eq!(out[0].rule.as_deref(), Some(rules::rule::SUSPECTS));
    assert_eq!(report::line(&out[0]).level, log::Level::Info);
}

#[test]
fn a_held_site_explains_only_theirs_and_the_hold_ending_forgets_it() {
    let mut c = comparer();
    let hold = Decision::DomainHold {
        zone: name("eu/a"),
        until: None,
        end: None,
    };
    c.ours(&[unknown("n1"), hold], t(LATER), &NoFacts);
    c.theirs(
        vec![their(ShadowKind::TaintAdded, "n1", Some(UNREACHABLE_NE))],
        t(LATER),
        &NoFacts,
    );
    let out = c.tick(t(LATER + PAIR_BOUND.as_secs()), &NoFacts);
    let taint = out.iter().find(|r| r.class == Class::OnlyTheirs).unwrap();
    assert_eq!(taint.rule.as_deref(), Some(rules::rule::HOLD));
    let ended = Decision::DomainHold {
        zone: name("eu/a"),
        until: None,
        end: Some(crate::controller::decisions::HoldEnd::Recovered),
    };
    let later = t(LATER + PAIR_BOUND.as_secs());
    c.ours(&[ended], later, &NoFacts);
    c.theirs(
        vec![their(ShadowKind::TaintAdded, "n1", Some(UNREACHABLE_NE))],
        later,
        &NoFacts,
    );
    let out = c.tick(later + PAIR_BOUND, &NoFacts);
    assert_eq!(out[0].rule, None, "the hold is over: a finding");
}

#[test]
fn the_controllers_facts_name_autonomy_the_cache_hold_and_pool_timing() {
    let cases = [
        (
            NodeFacts {
                autonomous: true,
                ..NodeFacts::default()
            },
            ShadowKind::PodDeletion,
            rules::rule::AUTONOMY,
        ),
        (
            NodeFacts {
                caches_held: true,
                ..NodeFacts::default()
            },
            ShadowKind::TaintAdded,
            rules::rule::STALE_CACHE,
        ),
        (
            NodeFacts {
                pool_timing: true,
                ..NodeFacts::default()
            },
            ShadowKind::NodeUnknown,
            rules::rule::POOL_TIMING,
        ),
    ];
    for (facts, kind, rule) in cases {
        let mut c = comparer();
        let mut w = their(kind, "n1", None);
        w.subject.pod = (kind == ShadowKind::PodDeletion).then(|| "default/p".to_string());
        c.theirs(vec![w], t(LATER), &NoFacts);
        let out = c.tick(t(LATER + PAIR_BOUND.as_secs()), &Facts(facts));
        assert_eq!(out[0].rule.as_deref(), Some(rule), "{kind:?}");
    }
}

#[test]
fn a_pair_begun_before_we_watched_long_is_a_restart_kept_invisible() {
    let mut c = comparer();
    c.theirs(
        vec![their(ShadowKind::TaintAdded, "n1", Some(UNREACHABLE_NE))],
        t(10),
        &NoFacts,
    );
    let out = c.tick(t(10 + PAIR_BOUND.as_secs()), &NoFacts);
    assert_eq!(out[0].class, Class::OnlyTheirs);
    assert_eq!(out[0].rule.as_deref(), Some(rules::rule::RESTART));
}

#[test]
fn only_ours_alerts_and_a_silent_incumbent_is_warned_about_once_an_hour() {
    let mut c = comparer();
    c.ours(
        &[tainted(
            "n1",
            vec![taint(
                "node.kubernetes.io/unreachable",
                TaintEffect::NoExecute,
                Some(t(LATER)),
            )],
        )],
        t(LATER),
        &NoFacts,
    );
    let out = c.tick(t(LATER + PAIR_BOUND.as_secs()), &NoFacts);
    assert_eq!(out[0].class, Class::OnlyOurs);
    assert!(out[0].class.alerts());
    assert!(
        out[0]
            .ours
            .as_ref()
            .unwrap()
            .evidence
            .contains("timeAdded=")
    );
    let now = t(LATER + PAIR_BOUND.as_secs());
    assert!(c.nothing_to_compare(now, true));
    assert!(!c.nothing_to_compare(now + Duration::from_secs(60), true));
    assert!(c.nothing_to_compare(now + NOTHING_TO_COMPARE, true));
    let mut quiet = comparer();
    assert!(
        !quiet.nothing_to_compare(t(LATER), false),
        "no decision of ours: nothing to say"
    );
}

#[test]
fn a_repeated_write_counts_once() {
    let mut c = comparer();
    c.ours(&[unknown("n1"), unknown("n1")], t(LATER), &NoFacts);
    assert_eq!(c.pending(), 1);
    let out = c.theirs(
        vec![their(ShadowKind::NodeUnknown, "n1", None)],
        t(LATER + 1),
        &NoFacts,
    );
    assert_eq!(out.len(), 1);
}

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
fn the_history_survives_a_restart_bounded_and_a_corrupt_file_is_refused() {
    let mut c = comparer();
    for i in 0..(history::MAX_DIVERGENCES + 5) {
        c.theirs(
            vec![their(ShadowKind::NodeUnknown, &format!("n{i}"), None)],
            t(LATER),
            &NoFacts,
        );
    }
    c.tick(t(LATER + PAIR_BOUND.as_secs()), &NoFacts);
    let text = c.history.to_json();
    let back = ShadowHistory::from_json(&text).unwrap();
    assert_eq!(back, c.history);
    assert_eq!(back.divergences.len(), history::MAX_DIVERGENCES);
    assert!(back.rotated >= 5);
    assert!(ShadowHistory::from_json("{not json").is_err());
    assert!(ShadowHistory::from_json(&text.replace("\"version\":1", "\"version\":9")).is_err());
}

#[test]
fn the_report_counts_spreads_and_lists_every_divergence() {
    let mut c = comparer();
    c.ours(&[unknown("n1"), unknown("n2")], t(LATER), &NoFacts);
    c.theirs(
        vec![
            their(ShadowKind::NodeUnknown, "n1", None),
            their(ShadowKind::NodeUnknown, "n2", None),
        ],
        t(LATER + 3),
        &NoFacts,
    );
    c.theirs(
        vec![their(ShadowKind::TaintAdded, "n3", Some(UNREACHABLE_NE))],
        t(LATER + 3),
        &NoFacts,
    );
    let end = t(LATER + 3 + PAIR_BOUND.as_secs());
    c.tick(end, &NoFacts);
    let text = report::render(&c.history, 0, None, end, Format::Text);
    assert!(text.contains("3 pairs classed"), "{text}");
    assert!(text.contains("median -3.0s"), "{text}");
    assert!(text.contains("only_theirs taint_added node=n3"), "{text}");
    assert!(text.contains("1 divergence(s) without a rule"), "{text}");
    let md = report::render(&c.history, 0, None, end, Format::Markdown);
    assert!(md.contains("| same | 2 | 0 | 0 | 0 | 0 |"), "{md}");
    let json: serde_json::Value =
        serde_json::from_str(&report::render(&c.history, 0, None, end, Format::Json)).unwrap();
    assert_eq!(json["counts"]["same"]["node_unknown"], 2);
    assert_eq!(json["time_differences_ms"]["worst"], -3000);
    assert_eq!(json["divergences"][0]["node"], "n3");
    // --since leaves out what was classed before.
    let since = report::answer(
        "shadow report --since 1s",
        Some((&c.history, 0)),
        end + Duration::from_secs(5),
    );
    assert!(since.contains("0 pairs classed"), "{since}");
    assert!(
        report::answer("shadow report --format yaml", Some((&c.history, 0)), end)
            .starts_with("error:")
    );
    assert!(report::answer("shadow report", None, end).starts_with("error: shadow mode is off"));
}

#[test]
fn spreads_are_by_magnitude() {
    let s = report::spread(vec![1000, -2000, 500, 0]).unwrap();
    assert_eq!((s.pairs, s.median_ms, s.worst_ms), (4, 1000, -2000));
    assert!(report::spread(Vec::new()).is_none());
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
}
