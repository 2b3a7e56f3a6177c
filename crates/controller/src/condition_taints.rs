//! Custom condition taints: `[[condition_taint]]` maps a node condition (for example
//! node-problem-detector's `KernelDeadlock = "True"`) to a taint. Upstream's condition
//! → taint map is fixed; this one is the operator's.
//!
//! - `NoSchedule` taints are set and removed on every node change, like upstream's condition
//!   taints (`no_schedule.rs`).
//! - `NoExecute` taints are added through the zone's rate-limited queue, so they obey the same
//!   rates and disruption rules (no tainting in a fully disrupted cluster, a partially
//!   disrupted small zone, or a cooldown) as the not-ready/unreachable taints; they are
//!   removed at once when the condition clears (removing never costs a pod).
//!
//! The taint keys are refused at config time when they fall under the Kubernetes-owned
//! prefixes or repeat, so a key configured here is ours: only its configured effect is ever
//! touched, and a node carrying it without the condition loses it.

use crate::model::{ConditionStatus, Name, Node, Taint, TaintEffect};
use crate::time::Time;

/// One `[[condition_taint]]` of the config.
#[derive(Clone, Debug, PartialEq)]
pub struct ConditionTaint {
    /// The condition type, e.g. `KernelDeadlock`.
    pub condition: Name,
    pub status: ConditionStatus,
    pub key: Name,
    pub value: Name,
    /// `NoSchedule` or `NoExecute` (the only ones the config accepts).
    pub effect: TaintEffect,
}

impl ConditionTaint {
    /// The node reports the condition with the configured status.
    pub(crate) fn holds(&self, node: &Node) -> bool {
        node.condition_status(&self.condition) == Some(self.status)
    }

    /// The node carries this taint (key and effect; the value is ours to set).
    pub(crate) fn present(&self, node: &Node) -> bool {
        node.has_taint(&self.key, &self.effect)
    }

    pub(crate) fn taint(&self, time_added: Option<Time>) -> Taint {
        Taint {
            key: self.key.clone(),
            value: self.value.clone(),
            effect: self.effect.clone(),
            time_added,
        }
    }
}

/// NoExecute custom taints whose condition holds but which the node lacks: the node waits in
/// its zone queue for them.
pub(crate) fn missing_no_execute<'a>(
    rules: &'a [ConditionTaint],
    node: &'a Node,
) -> impl Iterator<Item = &'a ConditionTaint> {
    rules
        .iter()
        .filter(move |r| r.effect == TaintEffect::NoExecute && r.holds(node) && !r.present(node))
}

/// Applies the custom rules to `taints` (the node's list being prepared for a write):
/// NoSchedule ones are added and removed as their conditions say; NoExecute ones are only
/// removed here (when their condition no longer holds), and added when `add_no_execute` (the
/// zone queue granted the node its token).
pub(crate) fn reconcile(
    rules: &[ConditionTaint],
    node: &Node,
    taints: &mut Vec<Taint>,
    add_no_execute: bool,
    now: Time,
) {
    for rule in rules {
        let holds = rule.holds(node);
        let has = taints
            .iter()
            .position(|t| t.key == rule.key && t.effect == rule.effect);
        let wanted = holds && (rule.effect != TaintEffect::NoExecute || add_no_execute);
        match (has, holds) {
            (Some(i), false) => {
                taints.remove(i);
            }
            (None, true) if wanted => {
                // NoExecute taints carry `timeAdded` (second precision), as upstream's.
                let added = (rule.effect == TaintEffect::NoExecute)
                    .then(|| Time::from_unix_millis(now.as_unix_millis() / 1000 * 1000));
                taints.push(rule.taint(added));
            }
            _ => {}
        }
    }
}

/// A reload replaces `old` rules with `new` ones: the taints of rules gone stay ours and join
/// `retired` (removed from every node); a rule configured again leaves it.
pub(crate) fn retire_condition_taints(
    retired: &mut Vec<ConditionTaint>,
    old: &[ConditionTaint],
    new: &[ConditionTaint],
) {
    let same = |a: &ConditionTaint, b: &ConditionTaint| a.key == b.key && a.effect == b.effect;
    retired.retain(|r| !new.iter().any(|n| same(n, r)));
    for o in old {
        if !new.iter().any(|n| same(n, o)) && !retired.iter().any(|r| same(r, o)) {
            retired.push(o.clone());
        }
    }
}
