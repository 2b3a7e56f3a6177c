//! The comparer on a virtual clock: what an operator running shadow mode beside
//! kube-controller-manager would see, story by story.

use std::rc::Rc;
use std::time::Duration;

use crate::controller::Decision;
use crate::controller::decisions::{Heartbeat, LeaseEvidence, TaintReason};
use crate::controller::zones::ZoneState;
use crate::model::{ConditionStatus, Node, Pod, PodKey, Taint, TaintEffect};
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

#[path = "tests_incumbent.rs"]
mod incumbent;
