//! Facts as readable timeline lines: facts close together in time, of one kind, are grouped
//! into one line (`t=  9.8s taint z1-n001, z1-n002 +...`).

use std::time::Duration;

use super::{Fact, FactKind};

impl FactKind {
    /// (what, subject, detail): a line reads `what subject detail`; facts sharing `what` and
    /// `detail` close together in time are printed as one line listing their subjects.
    fn parts(&self) -> (String, String, String) {
        let s = |x: &str| x.to_string();
        match self {
            FactKind::Step(text) => (s("▶"), text.clone(), String::new()),
            FactKind::NodeReady {
                node,
                status,
                reason,
            } => {
                let detail = if reason.is_empty() {
                    format!("Ready={status}")
                } else {
                    format!("Ready={status} ({reason})")
                };
                (s("node"), node.clone(), detail)
            }
            FactKind::TaintAdded { node, taint } => (s("taint"), node.clone(), format!("+{taint}")),
            FactKind::TaintRemoved { node, taint } => {
                (s("taint"), node.clone(), format!("-{taint}"))
            }
            FactKind::NodeLabels { node, labels } => (s("labels"), node.clone(), labels.clone()),
            FactKind::FenceRun { node } => (s("fence"), node.clone(), s("command ran")),
            FactKind::FenceAttempt { node, step } => (
                s("fence"),
                node.clone(),
                format!("attempt of step {step} recorded"),
            ),
            FactKind::PodNotReady { pod } => (s("pod"), pod.clone(), s("NotReady")),
            FactKind::PodDisruptionTarget { pod } => {
                (s("evict"), pod.clone(), s("(DisruptionTarget)"))
            }
            FactKind::PodNodeLost { pod } => (s("pod"), pod.clone(), s("NodeLost")),
            FactKind::PodDeleted { pod, detail } => {
                let d = if detail.is_empty() {
                    s("deleted")
                } else {
                    format!("deleted ({detail})")
                };
                (s("pod"), pod.clone(), d)
            }
            FactKind::Event { reason, object } if object.contains('/') => (
                format!("event {reason} on pod"),
                object.clone(),
                String::new(),
            ),
            FactKind::Event { reason, object } => {
                (format!("event {reason}"), object.clone(), String::new())
            }
            FactKind::LeaderLease { lease, holder } => {
                let detail = match holder.as_deref() {
                    None => s("taken"),
                    Some("") => s("released"),
                    Some(h) => format!("taken by {h}"),
                };
                (s("leader lease"), lease.clone(), detail)
            }
            // A conflict is optimistic concurrency at work (the writer re-reads and retries).
            FactKind::Failed {
                what, code: 409, ..
            } => (
                s("✗ 409"),
                what.clone(),
                s("conflict (stale resourceVersion)"),
            ),
            FactKind::Failed {
                what,
                code,
                message,
            } => (
                format!("✗ {code}"),
                what.clone(),
                message.chars().take(100).collect(),
            ),
            FactKind::Other { what } => (s("write"), what.clone(), String::new()),
        }
    }
}

/// Facts this close to the first of a group join it.
const GROUP_WINDOW: Duration = Duration::from_millis(500);
/// Events trickle out at the daemon's event rate: a group of them stays open while the next one
/// comes within `EVENT_GAP`, up to `EVENT_SPAN` after the first.
const EVENT_GAP: Duration = Duration::from_millis(1000);
const EVENT_SPAN: Duration = Duration::from_secs(5);
/// Subjects named on one grouped line before "(+N more)".
const GROUP_NAMES: usize = 4;

#[derive(Debug)]
struct Group {
    t: Duration,
    last: Duration,
    trickle: bool,
    what: String,
    detail: String,
    subjects: Vec<String>,
}

impl Group {
    fn closed_at(&self, now: Duration) -> bool {
        if self.trickle {
            now.saturating_sub(self.last) > EVENT_GAP || now.saturating_sub(self.t) > EVENT_SPAN
        } else {
            now.saturating_sub(self.t) > GROUP_WINDOW
        }
    }

    fn render(&self) -> String {
        let mut subjects = self.subjects[..self.subjects.len().min(GROUP_NAMES)].join(", ");
        if self.subjects.len() > GROUP_NAMES {
            subjects.push_str(&format!(" (+{} more)", self.subjects.len() - GROUP_NAMES));
        }
        let mut line = format!("t={:>6.1}s {} {subjects}", self.t.as_secs_f64(), self.what);
        if !self.detail.is_empty() {
            line.push(' ');
            line.push_str(&self.detail);
        }
        line
    }
}

/// Renders facts as timeline lines, grouping bursts (30 `RegisteredNode` events at start-up are
/// one line). Incremental: `push` facts as they come, `flush` lines whose group is complete.
#[derive(Debug, Default)]
pub struct Timeline {
    open: Vec<Group>,
}

impl Timeline {
    pub fn push(&mut self, fact: &Fact) -> Vec<String> {
        let (what, subject, detail) = fact.kind.parts();
        let mut done = self.flush(fact.t);
        if let Some(g) = self
            .open
            .iter_mut()
            .find(|g| g.what == what && g.detail == detail && !g.closed_at(fact.t))
        {
            if !g.subjects.contains(&subject) {
                g.subjects.push(subject);
            }
            g.last = fact.t;
            return done;
        }
        if matches!(fact.kind, FactKind::Step(_)) {
            // A step starts a new chapter: what came before it is printed first.
            done.extend(self.flush(Duration::MAX));
        }
        self.open.push(Group {
            t: fact.t,
            last: fact.t,
            trickle: matches!(fact.kind, FactKind::Event { .. }),
            what,
            detail,
            subjects: vec![subject],
        });
        done
    }

    /// Lines of the groups that can no longer grow at time `now`, in time order: a closed group
    /// waits behind an older one still open.
    pub fn flush(&mut self, now: Duration) -> Vec<String> {
        let closable = self
            .open
            .iter()
            .take_while(|g| now == Duration::MAX || g.closed_at(now))
            .count();
        self.open.drain(..closable).map(|g| g.render()).collect()
    }

    /// Every remaining line.
    pub fn finish(&mut self) -> Vec<String> {
        self.flush(Duration::MAX)
    }

    /// All lines of `facts`, at once.
    pub fn render(facts: &[Fact]) -> Vec<String> {
        let mut timeline = Timeline::default();
        let mut lines: Vec<String> = facts.iter().flat_map(|f| timeline.push(f)).collect();
        lines.extend(timeline.finish());
        lines
    }
}
