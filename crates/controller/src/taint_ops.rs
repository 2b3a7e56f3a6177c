//! Changes the controller makes to a node's taint list, applied in order on top of the node's
//! latest taints when a write is prepared (and again after a 409 on the re-read node).

use crate::model::{Name, Node, Taint, TaintEffect, taint_keys};
use crate::time::Time;

use super::condition_taints::{self, ConditionTaint};
use super::no_schedule;

/// Which NoExecute taint mirrors a not-Ready node.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) enum NoExecuteKind {
    /// Ready False: `node.kubernetes.io/not-ready`.
    NotReady,
    /// Ready Unknown: `node.kubernetes.io/unreachable`.
    Unreachable,
}

impl NoExecuteKind {
    pub(crate) fn key(self) -> &'static str {
        match self {
            NoExecuteKind::NotReady => taint_keys::NOT_READY,
            NoExecuteKind::Unreachable => taint_keys::UNREACHABLE,
        }
    }

    pub(crate) fn opposite(self) -> NoExecuteKind {
        match self {
            NoExecuteKind::NotReady => NoExecuteKind::Unreachable,
            NoExecuteKind::Unreachable => NoExecuteKind::NotReady,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum TaintOp {
    /// Add `kind`, remove its opposite (`SwapNodeControllerTaint`). `zone` is set when the op
    /// comes from the zone's rate-limited queue: its outcome is reported back to the queue.
    Apply {
        kind: NoExecuteKind,
        zone: Option<Name>,
    },
    /// Remove both NoExecute taints (`markNodeAsReachable`).
    Reachable,
    /// Add the custom NoExecute condition taints whose conditions hold (the zone queue's
    /// token came; `zone` as for `Apply`).
    ConditionTaints { zone: Option<Name> },
}

/// Adds a taint, or replaces one of the same key and effect whose value differs. One already
/// there with the same value is kept with its `time_added`: upstream's `AddOrUpdateTaint`
/// would refresh it, but `timeAdded` is when the pods' countdowns started, and a zone queue
/// that takes a node already tainted (after a restart or a new leader) must not restart them.
fn add_or_update(taints: &mut Vec<Taint>, key: &str, effect: TaintEffect, now: Time) {
    let taint = Taint {
        key: Name::from(key),
        value: Name::from(""),
        effect,
        time_added: Some(Time::from_unix_millis(now.as_unix_millis() / 1000 * 1000)),
    };
    match taints.iter_mut().find(|t| t.matches(&taint)) {
        Some(existing) if existing.value == taint.value => {}
        Some(existing) => *existing = taint,
        None => taints.push(taint),
    }
}

fn remove(taints: &mut Vec<Taint>, key: &str, effect: &TaintEffect) {
    taints.retain(|t| !(&*t.key == key && &t.effect == effect));
}

/// The node's taints after the NoSchedule reconciliation and `ops`.
pub(crate) fn desired_taints(
    node: &Node,
    ops: &[TaintOp],
    (rules, retired): (&[ConditionTaint], &[ConditionTaint]),
    now: Time,
) -> Vec<Taint> {
    let mut taints = node.taints.clone();
    let (add, del) = no_schedule::diff(node);
    for key in add {
        add_or_update(&mut taints, key, TaintEffect::NoSchedule, now);
    }
    for key in del {
        remove(&mut taints, key, &TaintEffect::NoSchedule);
    }
    for op in ops {
        match op {
            TaintOp::Apply { kind, .. } => {
                add_or_update(&mut taints, kind.key(), TaintEffect::NoExecute, now);
                remove(&mut taints, kind.opposite().key(), &TaintEffect::NoExecute);
            }
            TaintOp::Reachable => {
                remove(
                    &mut taints,
                    taint_keys::UNREACHABLE,
                    &TaintEffect::NoExecute,
                );
                remove(&mut taints, taint_keys::NOT_READY, &TaintEffect::NoExecute);
            }
            TaintOp::ConditionTaints { .. } => {}
        }
    }
    for gone in retired {
        remove(&mut taints, &gone.key, &gone.effect);
    }
    if !rules.is_empty() {
        let add_no_execute = ops
            .iter()
            .any(|o| matches!(o, TaintOp::ConditionTaints { .. }));
        condition_taints::reconcile(rules, node, &mut taints, add_no_execute, now);
    }
    taints
}

pub(crate) fn has_no_execute(node: &Node, kind: NoExecuteKind) -> bool {
    node.has_taint(kind.key(), &TaintEffect::NoExecute)
}
