//! The decision log: each [`Decision`] the controllers hand out becomes one line at `info`
//! carrying its evidence, with journal fields (`NODE=`, `POD=`, `ZONE=`, `DECISION=`), and an
//! entry in the history `explain` shows.
//!
//! A mass outage must not flood the journal, so lines are folded twice:
//! - within one loop turn, decisions of one kind about the pods of one node become one line
//!   ("deleting 27 pods on node X … [+26 lines folded]");
//! - across turns, each kind speaks of at most [`SUBJECTS_PER_WINDOW`] nodes (or pods) per zone
//!   per [`WINDOW`]: one node's whole story is always told, but when a fourth node of the zone
//!   comes up, its lines are counted and told in one summary line when the window ends
//!   ("zone eu/a: 57 more nodes judged Unknown … [+57 lines folded]").
//!
//! The history keeps every decision unfolded (bounded: see [`super::history`]).

use std::collections::BTreeMap;
use std::time::Duration;

use log::Level;

use crate::controller::Decision;
use crate::model::PodKey;
use crate::time::Time;

use super::decision_line::{deletion_reason, list, render, taint_text};
use super::history::{Entry, History, Subject};

/// How long a kind's line budget in a zone lasts.
pub(crate) const WINDOW: Duration = Duration::from_secs(10);
/// Nodes (or pods) one kind speaks of in one zone per window before folding starts.
pub(crate) const SUBJECTS_PER_WINDOW: usize = 3;
/// Names listed in a folded line.
pub(super) const NAMES_SHOWN: usize = 3;

/// One line to log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogLine {
    pub(crate) level: Level,
    pub message: String,
    pub(crate) node: Option<String>,
    pub(crate) pod: Option<String>,
    /// `region/zone`.
    pub(crate) zone: Option<String>,
    pub(crate) decision: &'static str,
}

impl LogLine {
    pub(crate) fn fields(&self) -> crate::logging::Fields<'_> {
        crate::logging::Fields {
            node: self.node.as_deref(),
            pod: self.pod.as_deref(),
            zone: self.zone.as_deref(),
            decision: Some(self.decision),
        }
    }
}

/// A kind's budget in a zone.
#[derive(Debug)]
struct Window {
    ends: Time,
    /// The nodes (or pods) whose lines were shown.
    shown: Vec<String>,
    /// Lines held back, and the decisions they stood for.
    folded_lines: usize,
    folded_decisions: usize,
    names: Vec<String>,
}

#[derive(Debug, Default)]
pub struct DecisionLog {
    windows: BTreeMap<(&'static str, String), Window>,
    history: History,
    /// Lines logged, and lines folded into others.
    pub(crate) lines: u64,
    pub(crate) folded: u64,
    /// Decisions recorded, by [`Decision::kind`], folded or not (`/metrics`).
    pub(crate) decided: BTreeMap<&'static str, u64>,
}

impl DecisionLog {
    pub fn new() -> DecisionLog {
        DecisionLog::default()
    }

    /// The decisions of one loop turn: their lines (folded), their history entries.
    /// `dry_run`: nothing is written, and the lines say so.
    pub fn record(&mut self, now: Time, decisions: Vec<Decision>, dry_run: bool) -> Vec<LogLine> {
        let mut out = self.flush(now);
        for d in &decisions {
            *self.decided.entry(d.kind()).or_default() += 1;
            for (subject, text) in history_entries(d) {
                self.history.record(subject, now, &text);
            }
        }
        for group in group_turn(decisions) {
            let mut line = group.line;
            if dry_run {
                line.message = format!("dry-run: {}", line.message);
            }
            let key = (line.decision, line.zone.clone().unwrap_or_default());
            let window = self.windows.entry(key).or_insert_with(|| Window {
                ends: now + WINDOW,
                shown: Vec::new(),
                folded_lines: 0,
                folded_decisions: 0,
                names: Vec::new(),
            });
            let subject = line
                .node
                .clone()
                .or_else(|| line.pod.clone())
                .unwrap_or_default();
            let known = window.shown.contains(&subject);
            if known || window.shown.len() < SUBJECTS_PER_WINDOW {
                if !known {
                    window.shown.push(subject);
                }
                self.lines += 1;
                self.folded += group.folded as u64;
                out.push(line);
            } else {
                window.folded_lines += 1 + group.folded;
                window.folded_decisions += group.count;
                for name in group.names {
                    if window.names.len() < NAMES_SHOWN {
                        window.names.push(name);
                    }
                }
            }
        }
        out
    }

    /// Summary lines of windows that ended by `now`.
    pub(crate) fn flush(&mut self, now: Time) -> Vec<LogLine> {
        let ended: Vec<(&'static str, String)> = self
            .windows
            .iter()
            .filter(|(_, w)| w.ends <= now)
            .map(|(k, _)| k.clone())
            .collect();
        let mut out = Vec::new();
        for key in ended {
            let Some(w) = self.windows.remove(&key) else {
                continue;
            };
            if w.folded_lines == 0 {
                continue;
            }
            let (kind, zone) = key;
            let place = if zone.is_empty() {
                String::new()
            } else {
                format!("zone {zone}: ")
            };
            let names = list(&w.names, w.folded_decisions);
            self.lines += 1;
            self.folded += w.folded_lines as u64;
            out.push(LogLine {
                level: Level::Info,
                message: format!(
                    "{place}{} more {} in {}s: {names} [+{} lines folded]",
                    w.folded_decisions,
                    kind_phrase(kind),
                    WINDOW.as_secs(),
                    w.folded_lines
                ),
                node: None,
                pod: None,
                zone: (!zone.is_empty()).then_some(zone),
                decision: kind,
            });
        }
        out
    }

    /// When [`DecisionLog::flush`] has a summary to tell.
    pub(crate) fn next_deadline(&self) -> Option<Time> {
        self.windows
            .values()
            .filter(|w| w.folded_lines > 0)
            .map(|w| w.ends)
            .min()
    }

    /// The recent decisions about `subject`, oldest first.
    pub(crate) fn history(&self, subject: &Subject) -> Vec<Entry> {
        self.history.of(subject)
    }

    pub(crate) fn history_bytes(&self) -> usize {
        self.history.heap_bytes()
    }
}

/// A line standing for `count` decisions (`folded` of its lines were folded into it).
struct Group {
    line: LogLine,
    count: usize,
    folded: usize,
    names: Vec<String>,
}

/// One line per decision, except pods: deletions of pods of one node for one reason, and
/// cancellations, each become one line per turn.
fn group_turn(decisions: Vec<Decision>) -> Vec<Group> {
    let mut groups: Vec<Group> = Vec::new();
    let mut deletions: BTreeMap<String, (usize, Vec<PodKey>, Decision)> = BTreeMap::new();
    let mut cancelled: Vec<PodKey> = Vec::new();
    for d in decisions {
        match &d {
            Decision::PodDeletion {
                pod,
                node,
                taint,
                toleration_seconds,
                ..
            } => {
                let key = format!(
                    "{}|{}|{:?}",
                    node.as_deref().unwrap_or(""),
                    taint.as_ref().map_or(String::new(), taint_text),
                    toleration_seconds
                );
                let order = deletions.len();
                deletions
                    .entry(key)
                    .or_insert_with(|| (order, Vec::new(), d.clone()))
                    .1
                    .push(pod.clone());
            }
            Decision::DeletionCancelled { pod } => cancelled.push(pod.clone()),
            Decision::PodsNotReady { pods, .. } => {
                let names: Vec<String> = pods.iter().map(ToString::to_string).collect();
                groups.push(Group {
                    line: render(&d),
                    count: pods.len(),
                    folded: pods.len().saturating_sub(1),
                    names,
                });
            }
            _ => {
                let name = d.node().map(|n| n.to_string()).unwrap_or_default();
                groups.push(Group {
                    line: render(&d),
                    count: 1,
                    folded: 0,
                    names: vec![name],
                });
            }
        }
    }
    let mut deletions: Vec<_> = deletions.into_values().collect();
    deletions.sort_by_key(|(order, _, _)| *order);
    for (_, pods, first) in deletions {
        groups.push(deletion_group(&first, &pods));
    }
    if !cancelled.is_empty() {
        let names: Vec<String> = cancelled.iter().map(ToString::to_string).collect();
        let message = if cancelled.len() == 1 {
            format!(
                "deletion of pod {} cancelled: its node's NoExecute taints are gone or tolerated, or it moved or went",
                cancelled[0]
            )
        } else {
            format!(
                "deletion of {} pods cancelled ({}): their node's NoExecute taints are gone or tolerated [+{} lines folded]",
                cancelled.len(),
                list(&names, cancelled.len()),
                cancelled.len() - 1
            )
        };
        groups.push(Group {
            line: LogLine {
                level: Level::Info,
                message,
                node: None,
                pod: (cancelled.len() == 1).then(|| names[0].clone()),
                zone: None,
                decision: "deletion-cancelled",
            },
            count: cancelled.len(),
            folded: cancelled.len() - 1,
            names,
        });
    }
    groups
}

fn deletion_group(first: &Decision, pods: &[PodKey]) -> Group {
    let mut line = render(first);
    let names: Vec<String> = pods.iter().map(ToString::to_string).collect();
    if pods.len() > 1
        && let Decision::PodDeletion { node, .. } = first
    {
        line.message = format!(
            "deleting {} pods on node {} ({}): {} [+{} lines folded]",
            pods.len(),
            node.as_deref().unwrap_or("(none)"),
            list(&names, pods.len()),
            deletion_reason(first),
            pods.len() - 1
        );
        line.pod = None;
    }
    Group {
        line,
        count: pods.len(),
        folded: pods.len() - 1,
        names,
    }
}

fn kind_phrase(kind: &str) -> &'static str {
    match kind {
        "node-unknown" => "nodes judged Unknown",
        "node-ready" => "nodes Ready again",
        "zone-state" => "zone state changes",
        "all-zones-down" => "all-zones-down changes",
        "taints" => "taint writes",
        "pods-not-ready" => "pods marked NotReady",
        "pod-deletion" => "pod deletions",
        _ => "deletions cancelled",
    }
}

/// What `explain` keeps of a decision, per node and pod it is about.
fn history_entries(d: &Decision) -> Vec<(Subject, String)> {
    let line = render(d);
    match d {
        Decision::PodsNotReady { node, pods, .. } => {
            let mut out = vec![(
                Subject::Node(node.to_string()),
                format!("{} pods marked NotReady", pods.len()),
            )];
            for p in pods {
                out.push((
                    Subject::Pod(p.to_string()),
                    format!("marked NotReady: node {node} is not Ready"),
                ));
            }
            out
        }
        // Not under the node too: a node's few entries are for its own verdicts.
        Decision::PodDeletion { pod, .. } => vec![(Subject::Pod(pod.to_string()), line.message)],
        Decision::DeletionCancelled { pod } => {
            vec![(Subject::Pod(pod.to_string()), line.message)]
        }
        _ => match d.node() {
            Some(node) => vec![(Subject::Node(node.to_string()), line.message)],
            None => Vec::new(),
        },
    }
}

#[cfg(test)]
#[path = "decision_log_tests.rs"]
mod tests;
