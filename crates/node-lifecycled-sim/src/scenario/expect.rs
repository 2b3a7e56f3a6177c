//! Judging a run: each expectation against the facts read from the write log.

use std::collections::HashMap;
use std::fmt;
use std::time::Duration;

use super::{Check, Expect, Quantity, Subject, short_list};
use crate::population::PodPlan;
use crate::timeline::{Fact, FactKind};

/// One expectation, judged.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outcome {
    pub held: bool,
    /// What was expected, in words.
    pub expected: String,
    /// What the write log shows.
    pub seen: String,
    pub line: usize,
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mark = if self.held { "✓" } else { "✗" };
        write!(f, "{mark} {} — seen: {}", self.expected, self.seen)
    }
}

/// Judges every expectation. `pods` are all pods the run created (to resolve `pods_on`);
/// `end_taints` the controller taints of each node after the daemon's last write.
pub fn evaluate(
    expects: &[Expect],
    facts: &[Fact],
    pods: &[PodPlan],
    end_taints: &HashMap<String, Vec<String>>,
) -> Vec<Outcome> {
    expects
        .iter()
        .map(|e| judge(e, facts, pods, end_taints))
        .collect()
}

fn subjects(subject: &Subject, pods: &[PodPlan]) -> Vec<String> {
    match subject {
        Subject::Nodes(nodes) => nodes.clone(),
        Subject::Pods(pods) => pods.clone(),
        Subject::PodsOn { nodes, kind } => pods
            .iter()
            .filter(|p| nodes.contains(&p.node) && kind.is_none_or(|k| k == p.kind))
            .map(PodPlan::key)
            .collect(),
    }
}

fn matches(check: &Check, subject: &str, fact: &FactKind) -> bool {
    match (check, fact) {
        (Check::Ready(s), FactKind::NodeReady { node, status, .. }) => {
            node == subject && status == s
        }
        (Check::Taint(t), FactKind::TaintAdded { node, taint }) => node == subject && taint == t,
        (Check::Untaint(t), FactKind::TaintRemoved { node, taint }) => {
            node == subject && taint == t
        }
        (Check::NotReady, FactKind::PodNotReady { pod }) => pod == subject,
        (Check::Deleted, FactKind::PodDeleted { pod, .. }) => pod == subject,
        (Check::Event(r), FactKind::Event { reason, object }) => reason == r && object == subject,
        _ => false,
    }
}

fn judge(
    e: &Expect,
    facts: &[Fact],
    pods: &[PodPlan],
    end_taints: &HashMap<String, Vec<String>>,
) -> Outcome {
    let subjects = subjects(&e.subject, pods);
    let in_window = |t: Duration| t >= e.after && e.by.is_none_or(|by| t <= by);
    // For each subject: when the check first passed (Some(ZERO) for end-state checks).
    let passed: Vec<(String, Option<Duration>)> = subjects
        .iter()
        .map(|s| {
            let when = match &e.check {
                Check::TaintAtEnd(t) => end_taints
                    .get(s)
                    .is_some_and(|list| list.contains(t))
                    .then_some(Duration::ZERO),
                Check::FenceRuns(n) => {
                    let runs = facts
                        .iter()
                        .filter(|f| matches!(&f.kind, FactKind::FenceRun { node } if node == s))
                        .count();
                    (runs == *n).then_some(Duration::ZERO)
                }
                check => facts
                    .iter()
                    .find(|f| in_window(f.t) && matches(check, s, &f.kind))
                    .map(|f| f.t),
            };
            (s.clone(), when)
        })
        .collect();
    let hits: Vec<&(String, Option<Duration>)> =
        passed.iter().filter(|(_, t)| t.is_some()).collect();
    let misses: Vec<String> = passed
        .iter()
        .filter(|(_, t)| t.is_none())
        .map(|(s, _)| s.clone())
        .collect();
    let held = !subjects.is_empty()
        && match e.quantity {
            Quantity::All => misses.is_empty(),
            Quantity::Never => hits.is_empty(),
            Quantity::AtLeast(n) => hits.len() >= n,
            Quantity::AtMost(n) => hits.len() <= n,
        };
    let times: Vec<Duration> = hits.iter().filter_map(|(_, t)| *t).collect();
    let span = match (times.iter().min(), times.iter().max()) {
        _ if matches!(e.check, Check::TaintAtEnd(_) | Check::FenceRuns(_)) => String::new(),
        (Some(a), Some(b)) => {
            let (a, b) = (
                format!("{:.1}s", a.as_secs_f64()),
                format!("{:.1}s", b.as_secs_f64()),
            );
            if a == b {
                format!(" at {a}")
            } else {
                format!(" at {a}–{b}")
            }
        }
        _ => String::new(),
    };
    let hit_names: Vec<String> = hits.iter().map(|(s, _)| s.clone()).collect();
    let seen = if subjects.is_empty() {
        "no such subject (the expectation names nothing)".to_string()
    } else if hits.is_empty() {
        format!("none of {}", subjects.len())
    } else if misses.is_empty() {
        format!("all {}{span}", subjects.len())
    } else {
        match e.quantity {
            Quantity::All => format!(
                "{} of {}{span}; missing {}",
                hits.len(),
                subjects.len(),
                short_list(&misses, 5)
            ),
            _ => format!(
                "{} of {}{span}: {}",
                hits.len(),
                subjects.len(),
                short_list(&hit_names, 5)
            ),
        }
    };
    Outcome {
        held,
        expected: describe(e, &subjects),
        seen,
        line: e.line,
    }
}

fn describe(e: &Expect, subjects: &[String]) -> String {
    let who = match &e.subject {
        Subject::Nodes(n) => short_list(n, 4),
        Subject::Pods(p) => short_list(p, 4),
        Subject::PodsOn { nodes, kind } => {
            let kind = kind.map(|k| format!(" {}", k.as_str())).unwrap_or_default();
            format!("{}{kind} pods on {}", subjects.len(), short_list(nodes, 4))
        }
    };
    let what = match &e.check {
        Check::Ready(s) => format!("set Ready={s}"),
        Check::Taint(t) => format!("tainted {t}"),
        Check::Untaint(t) => format!("untainted {t}"),
        Check::TaintAtEnd(t) => format!("still tainted {t} at the end"),
        Check::NotReady => "marked NotReady".to_string(),
        Check::Deleted => "deleted".to_string(),
        Check::Event(r) => format!("got event {r}"),
        Check::FenceRuns(n) => format!("fence command ran exactly {n} time(s)"),
    };
    let quantity = match e.quantity {
        Quantity::All => String::new(),
        Quantity::Never => "never: ".to_string(),
        Quantity::AtLeast(n) => format!("at least {n} of "),
        Quantity::AtMost(n) => format!("at most {n} of "),
    };
    let mut window = String::new();
    if !e.after.is_zero() {
        window.push_str(&format!(" after {:.1}s", e.after.as_secs_f64()));
    }
    if let Some(by) = e.by {
        window.push_str(&format!(" by {:.1}s", by.as_secs_f64()));
    }
    format!("{quantity}{who} {what}{window}")
}
