//! Shadow mode: our decisions (made as in dry-run, nothing written) paired with what the
//! incumbent controller (kube-controller-manager's node lifecycle and taint eviction
//! controllers) writes, and each pair classed.
//!
//! Sans-IO, on the time it is given: [`Comparer::ours`] takes the controllers' decisions as they
//! are made, [`Comparer::theirs`] the incumbent's writes as [`incumbent::IncumbentWatch`] reads
//! them off the watched objects (never off our own dry-run's overlay), [`Comparer::tick`]
//! classes what waited too long for its other half. Each classed pair is a [`Record`]; the
//! history (`history.rs`) counts them, keeps the time differences and the divergences, bounded,
//! and is what the persisted file and `shadow report` hold.
//!
//! Pairing is by [`Subject`]: the kind, the node, the pod, the taint. The same decision within
//! one `node_monitor_period` (and [`SAME_SLACK`]) is `same`; beyond it, ours is `earlier` or `later`; one side alone
//! for [`pair_bound`] is `only_ours` or `only_theirs`. A divergence names the rule of ours that
//! explains it ([`rules::explain`]), or none: then it is a finding.

pub(crate) mod history;
pub(crate) mod incumbent;
pub(crate) mod mask;
pub(crate) mod report;
pub(crate) mod rules;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::controller::Decision;
use crate::time::Time;

pub(crate) use history::ShadowHistory;
pub(crate) use incumbent::{IncumbentWatch, TheirWrite};
pub(crate) use rules::{NodeFacts, Notes};

/// Beyond one `node_monitor_period`, what a pair may still differ by and be `same`: the
/// incumbent's write reaches us through a watch, after its pass took its time.
pub(crate) const SAME_SLACK: Duration = Duration::from_secs(1);

/// How long one side waits for the other before it is classed alone: six graces (5 minutes
/// at upstream's 50 s), between 30 s and 10 minutes. Longer than what the two controllers'
/// timings differ by (a pass, a live read, a `tolerationSeconds` counted from a `timeAdded`
/// a pass apart), and than a zone's rate-limited queue taken in another order.
pub(crate) fn pair_bound(grace: Duration) -> Duration {
    (grace * 6).clamp(Duration::from_secs(30), Duration::from_secs(600))
}
/// Pending pairs kept at most; beyond it the oldest is classed at once (a mass outage of a
/// huge fleet cannot grow the comparer without bound).
pub(crate) const MAX_PENDING: usize = 200_000;
/// With our decisions going unmatched, how long without any write of the incumbent before the
/// warning that nothing is being compared.
pub(crate) const NOTHING_TO_COMPARE: Duration = Duration::from_secs(3600);

/// What is paired.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ShadowKind {
    /// Ready set Unknown (with its reason).
    NodeUnknown,
    /// A not-ready / unreachable taint added (NoSchedule or NoExecute, with `timeAdded`).
    TaintAdded,
    TaintRemoved,
    /// A pod's Ready set False because its node is not Ready.
    PodNotReady,
    /// A pod evicted for a NoExecute taint.
    PodDeletion,
}

impl ShadowKind {
    pub(crate) const ALL: [ShadowKind; 5] = [
        ShadowKind::NodeUnknown,
        ShadowKind::TaintAdded,
        ShadowKind::TaintRemoved,
        ShadowKind::PodNotReady,
        ShadowKind::PodDeletion,
    ];

    pub(crate) fn as_str(self) -> &'static str {
        match self {
            ShadowKind::NodeUnknown => "node_unknown",
            ShadowKind::TaintAdded => "taint_added",
            ShadowKind::TaintRemoved => "taint_removed",
            ShadowKind::PodNotReady => "pod_not_ready",
            ShadowKind::PodDeletion => "pod_deletion",
        }
    }
}

/// How a pair came out.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Class {
    /// Both, within one `node_monitor_period`.
    Same,
    /// Both; ours earlier by more than the period.
    Earlier,
    /// Both; ours later by more than the period.
    Later,
    OnlyOurs,
    OnlyTheirs,
}

impl Class {
    pub(crate) const ALL: [Class; 5] = [
        Class::Same,
        Class::Earlier,
        Class::Later,
        Class::OnlyOurs,
        Class::OnlyTheirs,
    ];

    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Class::Same => "same",
            Class::Earlier => "earlier",
            Class::Later => "later",
            Class::OnlyOurs => "only_ours",
            Class::OnlyTheirs => "only_theirs",
        }
    }

    /// What the alert fires on: we would act where, or before, the incumbent did not.
    pub(crate) fn alerts(self) -> bool {
        matches!(self, Class::OnlyOurs | Class::Earlier)
    }
}

/// What one pair is about.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Subject {
    pub(crate) kind: ShadowKind,
    pub(crate) node: String,
    /// `namespace/name`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) pod: Option<String>,
    /// `key:Effect`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) taint: Option<String>,
}

/// One side's part: when, and its evidence in a few words.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Seen {
    /// Unix milliseconds (our clock).
    pub(crate) at_ms: u64,
    pub(crate) evidence: String,
}

impl Seen {
    pub(crate) fn new(at: Time, evidence: String) -> Seen {
        Seen {
            at_ms: at.as_unix_millis(),
            evidence,
        }
    }
}

/// A classed pair.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    pub(crate) class: Class,
    #[serde(flatten)]
    pub(crate) subject: Subject,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) ours: Option<Seen>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) theirs: Option<Seen>,
    /// Ours minus theirs, in milliseconds (negative: ours earlier), when both were seen.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) diff_ms: Option<i64>,
    /// The rule of ours that explains a divergence; `None` on one: a finding.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) rule: Option<String>,
    /// When it was classed (unix milliseconds).
    pub(crate) classed_ms: u64,
}

impl Record {
    pub(crate) fn is_divergence(&self) -> bool {
        self.class != Class::Same
    }
    /// A divergence no rule of ours explains.
    pub(crate) fn is_finding(&self) -> bool {
        self.is_divergence() && self.rule.is_none()
    }
}

/// What the daemon asks of its controllers about a node when a divergence needs a rule.
pub(crate) trait RuleProbe {
    fn facts(&self, node: &str) -> NodeFacts;
}

#[derive(Clone, Debug, Default)]
struct Pending {
    ours: Option<Seen>,
    theirs: Option<Seen>,
}

impl Pending {
    fn first(&self) -> u64 {
        match (&self.ours, &self.theirs) {
            (Some(o), Some(t)) => o.at_ms.min(t.at_ms),
            (Some(o), None) => o.at_ms,
            (None, Some(t)) => t.at_ms,
            (None, None) => 0,
        }
    }
}

/// The pairing machine.
#[derive(Debug)]
pub struct Comparer {
    /// `node_monitor_period`: within it, a pair is `same`.
    same_within: Duration,
    /// [`pair_bound`] of `node_monitor_grace_period`.
    bound: Duration,
    started: Time,
    pending: BTreeMap<Subject, Pending>,
    notes: Notes,
    /// The incumbent's last write seen; `None`: none since the start.
    last_theirs: Option<Time>,
    /// When "nothing to compare" was last said.
    warned_at: Option<Time>,
    pub(crate) history: ShadowHistory,
}

impl Comparer {
    pub(crate) fn new(
        same_within: Duration,
        grace: Duration,
        now: Time,
        history: ShadowHistory,
    ) -> Comparer {
        Comparer {
            same_within,
            bound: pair_bound(grace),
            started: now,
            pending: BTreeMap::new(),
            notes: Notes::default(),
            last_theirs: None,
            warned_at: None,
            history,
        }
    }

    /// A reload may change `node_monitor_period` and the grace.
    pub(crate) fn set_timing(&mut self, period: Duration, grace: Duration) {
        self.same_within = period;
        self.bound = pair_bound(grace);
    }

    pub(crate) fn pending(&self) -> usize {
        self.pending.len()
    }

    /// Our decisions of one loop turn.
    pub(crate) fn ours(
        &mut self,
        decisions: &[Decision],
        now: Time,
        probe: &dyn RuleProbe,
    ) -> Vec<Record> {
        let mut out = Vec::new();
        for d in decisions {
            self.notes.note(d, now);
            for (subject, evidence) in ours_of(d) {
                self.side(
                    subject,
                    Seen::new(now, evidence),
                    true,
                    now,
                    probe,
                    &mut out,
                );
            }
        }
        out
    }

    /// The incumbent's writes, as read off the watched objects.
    pub(crate) fn theirs(
        &mut self,
        writes: Vec<TheirWrite>,
        now: Time,
        probe: &dyn RuleProbe,
    ) -> Vec<Record> {
        let mut out = Vec::new();
        for w in writes {
            self.last_theirs = Some(now);
            self.side(
                w.subject,
                Seen::new(now, w.evidence),
                false,
                now,
                probe,
                &mut out,
            );
        }
        out
    }

    fn side(
        &mut self,
        subject: Subject,
        seen: Seen,
        ours: bool,
        now: Time,
        probe: &dyn RuleProbe,
        out: &mut Vec<Record>,
    ) {
        let entry = self.pending.entry(subject.clone()).or_default();
        let slot = if ours {
            &mut entry.ours
        } else {
            &mut entry.theirs
        };
        if slot.is_some() {
            // The same decision again (a retry, a relist): the first one counts.
            return;
        }
        *slot = Some(seen);
        if entry.ours.is_some() && entry.theirs.is_some() {
            if let Some(p) = self.pending.remove(&subject) {
                out.push(self.class(subject, p, now, probe));
            }
        } else if self.pending.len() > MAX_PENDING {
            if let Some(oldest) = self
                .pending
                .iter()
                .min_by_key(|(_, p)| p.first())
                .map(|(s, _)| s.clone())
            {
                if let Some(p) = self.pending.remove(&oldest) {
                    out.push(self.class(oldest, p, now, probe));
                }
            }
        }
    }

    /// Classes what waited [`pair_bound`] for its other half.
    pub(crate) fn tick(&mut self, now: Time, probe: &dyn RuleProbe) -> Vec<Record> {
        let bound = self.bound.as_millis() as u64;
        let due: Vec<Subject> = self
            .pending
            .iter()
            .filter(|(_, p)| now.as_unix_millis().saturating_sub(p.first()) >= bound)
            .map(|(s, _)| s.clone())
            .collect();
        let mut out = Vec::new();
        for s in due {
            if let Some(p) = self.pending.remove(&s) {
                out.push(self.class(s, p, now, probe));
            }
        }
        self.notes.forget_before(now, self.bound * 2);
        out
    }

    /// "Nothing to compare": our decisions go unmatched and the incumbent has written nothing
    /// for [`NOTHING_TO_COMPARE`] (or since the start, that long ago). Once per that period.
    pub(crate) fn nothing_to_compare(&mut self, now: Time, unmatched_ours: bool) -> bool {
        if !unmatched_ours {
            return false;
        }
        let quiet_since = self.last_theirs.unwrap_or(self.started);
        let quiet = now.since(quiet_since) >= NOTHING_TO_COMPARE;
        let due = self
            .warned_at
            .is_none_or(|at| now.since(at) >= NOTHING_TO_COMPARE);
        if quiet && due {
            self.warned_at = Some(now);
            return true;
        }
        false
    }

    fn class(&mut self, subject: Subject, p: Pending, now: Time, probe: &dyn RuleProbe) -> Record {
        let within = (self.same_within + SAME_SLACK).as_millis() as i64;
        let diff_ms = match (&p.ours, &p.theirs) {
            (Some(o), Some(t)) => Some(o.at_ms as i64 - t.at_ms as i64),
            _ => None,
        };
        let class = match (diff_ms, &p.ours) {
            (Some(d), _) if d.abs() <= within => Class::Same,
            (Some(d), _) if d < 0 => Class::Earlier,
            (Some(_), _) => Class::Later,
            (None, Some(_)) => Class::OnlyOurs,
            (None, None) => Class::OnlyTheirs,
        };
        let rule = if class == Class::Same {
            None
        } else {
            let first = Time::from_unix_millis(p.first());
            let restart = first.since(self.started) < self.bound;
            rules::explain(
                &subject,
                class,
                &probe.facts(&subject.node),
                &self.notes,
                restart,
            )
            .map(str::to_string)
        };
        let record = Record {
            class,
            subject,
            ours: p.ours,
            theirs: p.theirs,
            diff_ms,
            rule,
            classed_ms: now.as_unix_millis(),
        };
        self.history.add(&record);
        record
    }
}

/// Our decision as the pairs it stands for.
fn ours_of(d: &Decision) -> Vec<(Subject, String)> {
    let subject = |kind, node: &str, pod: Option<String>, taint: Option<String>| Subject {
        kind,
        node: node.to_string(),
        pod,
        taint,
    };
    match d {
        Decision::NodeUnknown {
            node, last_seen, ..
        } => vec![(
            subject(ShadowKind::NodeUnknown, node, None, None),
            format!(
                "would set Ready=Unknown, last seen {}",
                last_seen.to_rfc3339()
            ),
        )],
        Decision::Taints {
            node,
            added,
            removed,
            ..
        } => {
            let mut v = Vec::new();
            for (kind, list) in [
                (ShadowKind::TaintAdded, added),
                (ShadowKind::TaintRemoved, removed),
            ] {
                for t in list.iter().filter(|t| incumbent::is_lifecycle_taint(t)) {
                    let text = incumbent::taint_text(t);
                    let evidence = match t.time_added {
                        Some(at) => format!("would write {text} timeAdded={}", at.to_rfc3339()),
                        None => format!("would write {text}"),
                    };
                    v.push((subject(kind, node, None, Some(text)), evidence));
                }
            }
            v
        }
        Decision::PodsNotReady { node, pods, .. } => pods
            .iter()
            .map(|p| {
                (
                    subject(ShadowKind::PodNotReady, node, Some(p.to_string()), None),
                    "would set Ready=False".to_string(),
                )
            })
            .collect(),
        Decision::PodDeletion {
            pod,
            node,
            taint,
            countdown_from,
            ..
        } => vec![(
            subject(
                ShadowKind::PodDeletion,
                node.as_deref().unwrap_or(""),
                Some(pod.to_string()),
                None,
            ),
            format!(
                "would evict for {} counted from {}",
                taint
                    .as_ref()
                    .map_or("a taint".to_string(), incumbent::taint_text),
                countdown_from.to_rfc3339()
            ),
        )],
        _ => Vec::new(),
    }
}
