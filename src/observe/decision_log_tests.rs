use std::rc::Rc;

use super::*;
use crate::controller::{Heartbeat, LeaseEvidence, TaintReason, ZoneState};
use crate::model::{ConditionStatus, Name, Taint, TaintEffect};
use crate::time::Rate;

fn n(s: &str) -> Name {
    Rc::from(s)
}

fn at(s: &str) -> Time {
    Time::parse_rfc3339(s).unwrap()
}

fn pod(name: &str) -> PodKey {
    PodKey {
        namespace: n("ns"),
        name: n(name),
    }
}

fn unreachable(effect: TaintEffect) -> Taint {
    Taint {
        key: n("node.kubernetes.io/unreachable"),
        value: n(""),
        effect,
        time_added: Some(at("2026-11-22T11:56:03Z")),
    }
}

fn unknown(node: &str) -> Decision {
    Decision::NodeUnknown {
        node: n(node),
        zone: n("eu:\0:a"),
        last_seen: at("2026-11-22T11:55:20Z"),
        heartbeat: Heartbeat::Lease {
            renew_time: Some(at("2026-11-22T11:55:19Z")),
        },
        grace: Duration::from_secs(40),
        lease: LeaseEvidence::Stale {
            read_at: at("2026-11-22T11:56:00Z"),
            renew_time: Some(at("2026-11-22T11:55:19Z")),
        },
    }
}

fn deletion(name: &str, seconds: Option<u64>) -> Decision {
    Decision::PodDeletion {
        pod: pod(name),
        node: Some(n("worker-3")),
        taint: Some(unreachable(TaintEffect::NoExecute)),
        toleration_seconds: seconds,
        countdown_from: at("2026-11-22T11:56:03Z"),
    }
}

#[test]
fn an_unknown_verdict_is_one_line_with_its_evidence_and_fields() {
    let line = render(&unknown("worker-3"));
    assert_eq!(
        line.message,
        "node worker-3 judged Unknown: last heard from 2026-11-22T11:55:20Z (Lease renewTime \
         2026-11-22T11:55:19Z), grace 40s ran out; a live Lease read at 2026-11-22T11:56:00Z \
         confirmed it (renewTime 2026-11-22T11:55:19Z)"
    );
    assert_eq!(line.level, Level::Info);
    let f = line.fields();
    assert_eq!(f.node, Some("worker-3"));
    assert_eq!(f.zone, Some("eu/a"));
    assert_eq!(f.decision, Some("node-unknown"));
}

#[test]
fn zone_changes_taints_and_deletions_say_why() {
    let zone = render(&Decision::ZoneState {
        zone: n("eu:\0:a"),
        from: Some(ZoneState::Normal),
        to: ZoneState::PartialDisruption,
        size: 60,
        not_ready: 40,
        rate: Rate::from_f64(0.01).unwrap(),
    });
    assert_eq!(
        zone.message,
        "zone eu/a: Normal -> PartialDisruption (60 nodes, 40 not ready): tainting rate 0.01/s"
    );
    let taints = render(&Decision::Taints {
        node: n("worker-3"),
        zone: n("eu:\0:a"),
        added: vec![unreachable(TaintEffect::NoExecute)],
        removed: vec![],
        why: TaintReason {
            ready: Some(ConditionStatus::Unknown),
            zone_queue: Some(n("eu:\0:a")),
            swapped: false,
            reachable: false,
        },
    });
    assert_eq!(
        taints.message,
        "node worker-3 taints +node.kubernetes.io/unreachable:NoExecute (Ready is Unknown; zone \
         eu/a's queue gave a token)"
    );
    let gone = render(&deletion("web-1", Some(300)));
    assert_eq!(
        gone.message,
        "deleting pod ns/web-1 on node worker-3: taint node.kubernetes.io/unreachable:NoExecute \
         (timeAdded 2026-11-22T11:56:03Z): tolerationSeconds 300 from 2026-11-22T11:56:03Z ran out"
    );
    assert_eq!(gone.fields().pod, Some("ns/web-1"));
}

/// 1,000 pod deletions are not 1,000 lines. One turn's deletions on one node for one reason are one
/// line that says how many lines it folded.
#[test]
fn deletions_of_one_turn_on_one_node_fold_into_one_line() {
    let mut log = DecisionLog::new();
    let now = at("2026-11-22T12:01:03Z");
    let decisions: Vec<Decision> = (0..27)
        .map(|i| deletion(&format!("web-{i:02}"), Some(300)))
        .collect();
    let lines = log.record(now, decisions, false);
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert_eq!(
        lines[0].message,
        "deleting 27 pods on node worker-3 (ns/web-00, ns/web-01, ns/web-02, … (27 in all)): \
         taint node.kubernetes.io/unreachable:NoExecute (timeAdded 2026-11-22T11:56:03Z): \
         tolerationSeconds 300 from 2026-11-22T11:56:03Z ran out [+26 lines folded]"
    );
    assert_eq!(lines[0].fields().node, Some("worker-3"));
    assert_eq!(log.folded, 26);
    // `/metrics` counts decisions, not lines.
    assert_eq!(log.decided.get("pod-deletion"), Some(&27));
    // The history keeps each pod's own line.
    let h = log.history(&Subject::Pod("ns/web-05".into()));
    assert_eq!(h.len(), 1);
    assert!(h[0].text.starts_with("deleting pod ns/web-05"));
}

/// A zone losing 60 nodes, verdicts arriving turn after turn: three lines, then one summary
/// when the window ends, naming a few and counting the rest. One node's own story (four taint
/// writes in a few seconds) is never folded.
#[test]
fn a_flood_across_turns_is_summarised_per_zone_and_kind() {
    let mut log = DecisionLog::new();
    let t0 = at("2026-11-22T12:00:00Z");
    let mut lines = Vec::new();
    for i in 0..60 {
        let now = t0 + Duration::from_millis(50 * i);
        lines.extend(log.record(now, vec![unknown(&format!("w{i:02}"))], false));
    }
    assert_eq!(lines.len(), SUBJECTS_PER_WINDOW);
    assert_eq!(log.next_deadline(), Some(t0 + WINDOW));
    assert!(
        log.flush(t0 + (WINDOW - Duration::from_millis(1)))
            .is_empty()
    );
    let summary = log.flush(t0 + WINDOW);
    assert_eq!(summary.len(), 1);
    assert_eq!(
        summary[0].message,
        "zone eu/a: 57 more nodes judged Unknown in 10s: w03, w04, w05, … (57 in all) [+57 lines folded]"
    );
    assert_eq!(summary[0].fields().zone, Some("eu/a"));
    assert_eq!(log.next_deadline(), None);
    assert_eq!((log.lines, log.folded), (4, 57));
    assert_eq!(
        log.decided.get("node-unknown"),
        Some(&60),
        "folded ones too"
    );
    // A new window starts afresh.
    let later = log.record(t0 + WINDOW * 2, vec![unknown("w99")], false);
    assert_eq!(later.len(), 1);
    let t1 = t0 + WINDOW * 4;
    let taint = |added: bool| Decision::Taints {
        node: n("w01"),
        zone: n("eu:\0:a"),
        added: if added {
            vec![unreachable(TaintEffect::NoSchedule)]
        } else {
            vec![]
        },
        removed: if added {
            vec![]
        } else {
            vec![unreachable(TaintEffect::NoSchedule)]
        },
        why: TaintReason {
            ready: Some(ConditionStatus::Unknown),
            zone_queue: None,
            swapped: false,
            reachable: false,
        },
    };
    let story: Vec<LogLine> = [true, true, false, false]
        .into_iter()
        .enumerate()
        .flat_map(|(i, added)| {
            log.record(
                t1 + Duration::from_secs(i as u64),
                vec![taint(added)],
                false,
            )
        })
        .collect();
    assert_eq!(story.len(), 4, "{story:?}");
}

#[test]
fn dry_run_lines_say_so() {
    let mut log = DecisionLog::new();
    let lines = log.record(at("2026-11-22T12:00:00Z"), vec![unknown("n1")], true);
    assert!(
        lines[0]
            .message
            .starts_with("dry-run: node n1 judged Unknown")
    );
}

/// Fencing steps reach the journal as decisions of their own, under the node.
#[test]
fn a_fencing_step_is_one_line_under_its_node() {
    let detail = "fencing: decision=fence node=rack1-n4 uid=u1 outage_since=2026-11-22T11:50:00Z \
                  lease_renew=2026-11-22T11:49:20Z zone=Normal attempt=1";
    let line = render(&Decision::Fencing {
        node: n("rack1-n4"),
        detail: detail.to_string(),
    });
    assert_eq!(line.message, detail);
    let f = line.fields();
    assert_eq!(f.node, Some("rack1-n4"));
    assert_eq!(f.decision, Some("fencing"));
    assert_eq!(f.pod, None);
}
