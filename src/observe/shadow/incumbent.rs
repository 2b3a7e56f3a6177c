//! The incumbent's writes, read off the objects the watches deliver, before dry-run lays its
//! unsent writes over them (so our own "writes" are never taken for theirs).
//!
//! Kept per object: only what is marked (a node Ready=Unknown or carrying a not-ready /
//! unreachable taint; a pod marked NotReady under such a node, or carrying taint eviction's
//! `DisruptionTarget`): a healthy fleet costs nothing. A change of a mark is a write; whose,
//! is told by what only the node lifecycle and taint eviction controllers write:
//! - Ready=Unknown with reason `NodeStatusUnknown` or `NodeStatusNeverUpdated` (a kubelet
//!   never writes Unknown);
//! - the `node.kubernetes.io/not-ready` and `unreachable` taints, NoSchedule and NoExecute;
//! - a pod's Ready=False while its node is marked (its kubelet is not posting);
//! - the `DisruptionTarget` condition with reason `DeletionByTaintManager`.
//!
//! Where a node's managedFields were read (shadow mode, protobuf: `model::Writers`), they
//! name the writer: a Ready=Unknown or a taint change counts only when an incumbent manager
//! (`model::INCUMBENT_MANAGERS`) owns the Ready condition's status or `spec.taints`.
//!
//! Before [`IncumbentWatch::prime`] (the first full state) marks are recorded, not reported:
//! what was written before we watched is no write to compare.

use std::collections::HashMap;
use std::time::Duration;

use crate::model::{ConditionStatus, Name, Node, Pod, PodKey, Taint, TaintEffect, taint_keys};
use crate::time::Time;

use super::{ShadowKind, Subject};

/// One write of the incumbent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct TheirWrite {
    pub(crate) subject: Subject,
    pub(crate) evidence: String,
}

/// The node lifecycle's own taints: not-ready and unreachable, NoSchedule or NoExecute.
pub(crate) fn is_lifecycle_taint(t: &Taint) -> bool {
    taint_bit(t).is_some()
}

pub(crate) fn taint_text(t: &Taint) -> String {
    format!("{}:{}", t.key, t.effect.as_str())
}

fn taint_bit(t: &Taint) -> Option<u8> {
    let key = match &*t.key {
        taint_keys::NOT_READY => 0,
        taint_keys::UNREACHABLE => 2,
        _ => return None,
    };
    let effect = match t.effect {
        TaintEffect::NoSchedule => 0,
        TaintEffect::NoExecute => 1,
        _ => return None,
    };
    Some(1 << (key + effect))
}

const TAINT_TEXTS: [&str; 4] = [
    "node.kubernetes.io/not-ready:NoSchedule",
    "node.kubernetes.io/not-ready:NoExecute",
    "node.kubernetes.io/unreachable:NoSchedule",
    "node.kubernetes.io/unreachable:NoExecute",
];

/// A node's marks: bit 4 Ready=Unknown (as a controller writes it), bits 0-3 the taints.
const UNKNOWN: u8 = 1 << 4;
/// A pod's marks.
const POD_NOT_READY: u8 = 1;
const POD_EVICTED: u8 = 2;

/// How long a pod's Ready=False seen before its node's mark is taken for the incumbent's
/// (the two come through two watches, in either order).
const POD_BEFORE_NODE: Duration = Duration::from_secs(10);
/// Such pods kept at most.
const UNATTRIBUTED_MAX: usize = 100_000;

#[derive(Debug, Default)]
pub(crate) struct IncumbentWatch {
    nodes: HashMap<Name, u8>,
    pods: HashMap<PodKey, u8>,
    /// Pods seen Ready=False under a node not marked (yet), with the node and when.
    unattributed: HashMap<PodKey, (Name, Time)>,
    /// Of those, the ones found to be the incumbent's since the last
    /// [`IncumbentWatch::take_late_marks`]: our controllers saw them unmasked.
    late: Vec<PodKey>,
    primed: bool,
}

impl IncumbentWatch {
    /// From now on, changes are reported.
    pub(crate) fn prime(&mut self) {
        self.primed = true;
    }

    /// Entries kept (marked nodes, marked pods and pods not Ready under an unmarked node).
    pub(crate) fn len(&self) -> (usize, usize) {
        (self.nodes.len(), self.pods.len() + self.unattributed.len())
    }

    /// Bytes the marks take, about (the maps' slots; names are shared with the store).
    pub(crate) fn bytes(&self) -> usize {
        self.nodes.capacity() * (std::mem::size_of::<(Name, u8)>() + 1)
            + self.pods.capacity() * (std::mem::size_of::<(PodKey, u8)>() + 1)
            + self.unattributed.capacity() * (std::mem::size_of::<(PodKey, (Name, Time))>() + 1)
    }

    pub(crate) fn node(&mut self, node: &Node, now: Time) -> Vec<TheirWrite> {
        let ready = node.ready();
        let reason = ready.and_then(|c| c.text.reason()).map(|r| &**r);
        let by_controller = matches!(reason, Some("NodeStatusUnknown" | "NodeStatusNeverUpdated"));
        // Where managedFields were read, they name the writer.
        let writers = node.writers;
        let ready_by_incumbent = !writers.known() || writers.ready_by_incumbent();
        let mut marks = 0u8;
        if ready.is_some_and(|c| c.status == ConditionStatus::Unknown)
            && by_controller
            && ready_by_incumbent
        {
            marks |= UNKNOWN;
        }
        let mut time_added: [Option<String>; 4] = Default::default();
        for t in &node.taints {
            if let Some(bit) = taint_bit(t) {
                marks |= bit;
                time_added[bit.trailing_zeros() as usize] = t.time_added.map(|a| a.to_rfc3339());
            }
        }
        let before = self.nodes.get(&*node.name).copied().unwrap_or(0);
        if marks == 0 {
            self.nodes.remove(&*node.name);
        } else if marks != before {
            self.nodes.insert(node.name.clone(), marks);
        }
        if !self.primed || marks == before {
            return Vec::new();
        }
        let mut out = Vec::new();
        let by = if writers.known() {
            ", managedFields: an incumbent manager"
        } else {
            ""
        };
        let subject = |kind, taint: Option<&str>| Subject {
            kind,
            node: node.name.to_string(),
            pod: None,
            taint: taint.map(str::to_string),
        };
        if marks & UNKNOWN != 0 && before & UNKNOWN == 0 {
            out.extend(self.pods_marked_before(&node.name, now));
            let since = ready
                .and_then(|c| c.last_transition_time)
                .map_or("?".to_string(), |t| t.to_rfc3339());
            out.push(TheirWrite {
                subject: subject(ShadowKind::NodeUnknown, None),
                evidence: format!(
                    "Ready=Unknown reason={} lastTransitionTime={since}{by}",
                    reason.unwrap_or("")
                ),
            });
        }
        // `spec.taints` is written whole: its owner wrote the change.
        let added_by_incumbent = !writers.known() || writers.taints_by_incumbent();
        let removed_by_incumbent =
            !writers.known() || writers.taints_by_incumbent() || !writers.taints_by_other();
        for (i, text) in TAINT_TEXTS.iter().enumerate() {
            let bit = 1u8 << i;
            let (now_set, was_set) = (marks & bit != 0, before & bit != 0);
            if now_set && !was_set && added_by_incumbent {
                let evidence = match &time_added[i] {
                    Some(at) => format!("wrote {text} timeAdded={at}{by}"),
                    None => format!("wrote {text}{by}"),
                };
                out.push(TheirWrite {
                    subject: subject(ShadowKind::TaintAdded, Some(text)),
                    evidence,
                });
            } else if was_set && !now_set && removed_by_incumbent {
                out.push(TheirWrite {
                    subject: subject(ShadowKind::TaintRemoved, Some(text)),
                    evidence: format!("removed {text}{by}"),
                });
            }
        }
        out
    }

    /// The pods of `node` seen Ready=False just before the incumbent's mark of it arrived.
    fn pods_marked_before(&mut self, node: &Name, now: Time) -> Vec<TheirWrite> {
        let keys: Vec<PodKey> = self
            .unattributed
            .iter()
            .filter(|(_, (n, at))| n == node && now.since(*at) <= POD_BEFORE_NODE)
            .map(|(k, _)| k.clone())
            .collect();
        keys.into_iter()
            .map(|key| {
                self.unattributed.remove(&key);
                *self.pods.entry(key.clone()).or_default() |= POD_NOT_READY;
                self.late.push(key.clone());
                TheirWrite {
                    subject: Subject {
                        kind: ShadowKind::PodNotReady,
                        node: node.to_string(),
                        pod: Some(key.to_string()),
                        taint: None,
                    },
                    evidence: "Ready=False while the node is not Ready".to_string(),
                }
            })
            .collect()
    }

    /// Pods whose Ready=False came before their node's mark: our controllers took it for the
    /// kubelet's, and are to be given the pod as it was.
    pub(crate) fn take_late_marks(&mut self) -> Vec<PodKey> {
        std::mem::take(&mut self.late)
    }

    pub(crate) fn node_deleted(&mut self, name: &str) {
        self.nodes.remove(name);
    }

    /// Whether the node is marked: Ready=Unknown as a controller wrote it, or tainted.
    pub(crate) fn node_marked(&self, name: &str) -> bool {
        self.nodes.get(name).is_some_and(|m| *m != 0)
    }

    pub(crate) fn pod(&mut self, pod: &Pod, now: Time) -> Vec<TheirWrite> {
        let node = pod.node_name.as_deref().unwrap_or("");
        let mut marks = 0u8;
        let not_ready = pod.ready == Some(ConditionStatus::False);
        if not_ready && self.node_marked(node) {
            marks |= POD_NOT_READY;
            self.unattributed.remove(&pod.key);
        } else if not_ready && self.primed {
            if self.unattributed.len() >= UNATTRIBUTED_MAX {
                self.unattributed
                    .retain(|_, (_, at)| now.since(*at) <= POD_BEFORE_NODE);
            }
            if let Some(n) = pod
                .node_name
                .as_ref()
                .filter(|_| self.unattributed.len() < UNATTRIBUTED_MAX)
            {
                self.unattributed
                    .entry(pod.key.clone())
                    .or_insert_with(|| (n.clone(), now));
            }
        } else {
            self.unattributed.remove(&pod.key);
        }
        if pod.disruption_target {
            marks |= POD_EVICTED;
        }
        let before = self.pods.get(&pod.key).copied().unwrap_or(0);
        if marks == 0 {
            self.pods.remove(&pod.key);
        } else if marks != before {
            self.pods.insert(pod.key.clone(), marks);
        }
        if !self.primed {
            return Vec::new();
        }
        let subject = |kind| Subject {
            kind,
            node: node.to_string(),
            pod: Some(pod.key.to_string()),
            taint: None,
        };
        let mut out = Vec::new();
        if marks & POD_NOT_READY != 0 && before & POD_NOT_READY == 0 {
            out.push(TheirWrite {
                subject: subject(ShadowKind::PodNotReady),
                evidence: "Ready=False while the node is not Ready".to_string(),
            });
        }
        if marks & POD_EVICTED != 0 && before & POD_EVICTED == 0 {
            out.push(TheirWrite {
                subject: subject(ShadowKind::PodDeletion),
                evidence: format!(
                    "DisruptionTarget=DeletionByTaintManager{}",
                    if pod.deleting { ", deleting" } else { "" }
                ),
            });
        }
        out
    }

    pub(crate) fn pod_deleted(&mut self, key: &PodKey) {
        self.pods.remove(key);
        self.unattributed.remove(key);
    }
}
