//! What a standby (or a leader, for the next one) remembers of the countdowns it does not run:
//! when a pod's tolerations last changed, and which not-ready/unreachable NoExecute taint a
//! swap replaced. At a takeover the countdowns are found again from the taints' `timeAdded`
//! (`initial_sync`); these say when a pod's own countdown could have started at the
//! earliest, as a leader that ran all along counted it:
//! - a toleration edited later (forever, then 600 s) counts from the edit, not from
//!   `timeAdded`;
//! - under a taint swapped (not-ready to unreachable, or back) the countdown the first taint
//!   started is kept, as upstream keeps the countdown that started earlier.
//!
//! A process that did not watch the pod or the node (a fresh start) cannot know either: it
//! counts from `timeAdded` (rounded up to the next second) or the pod's creation, the later.
//! Kept only for pods edited and nodes swapped: nothing for a settled cluster.

use std::collections::HashMap;

use crate::inputs::Observed;
use crate::model::{ClusterStore, Name, Node, PodKey, Taint};
use crate::taint_ops::NoExecuteKind;
use crate::time::Time;

#[derive(Debug, Default)]
pub(crate) struct History {
    /// When this process last saw the pod's tolerations change.
    toleration_edits: HashMap<PodKey, Time>,
    /// Per node: the lifecycle NoExecute taint a swap replaced (with its `timeAdded`), and
    /// when the swap was seen.
    swaps: HashMap<Name, (Taint, Time)>,
}

/// The lifecycle's NoExecute taint of `kind` on `node`.
fn no_execute_of(node: &Node, kind: NoExecuteKind) -> Option<&Taint> {
    node.no_execute_taints().find(|t| *t.key == *kind.key())
}

impl History {
    /// Notes what `observed` changed (every input, synced or not).
    pub(crate) fn note(&mut self, store: &ClusterStore, observed: &Observed, now: Time) {
        match observed {
            Observed::Pod(change) => {
                let Some(before) = &change.before else {
                    return;
                };
                if before.replaced {
                    self.toleration_edits.remove(&change.key);
                    return;
                }
                let pod = store.pods().view(change.id);
                if before.tolerations != *pod.tolerations() {
                    self.toleration_edits.insert(change.key.clone(), now);
                }
            }
            Observed::PodsGone(pods) => {
                for (key, _) in pods {
                    self.toleration_edits.remove(key);
                }
            }
            Observed::NodesGone(nodes) => {
                for node in nodes {
                    self.swaps.remove(&node.name);
                }
            }
            Observed::Node { name, before } => {
                let Some(node) = store.node(name) else {
                    return;
                };
                let kinds = [NoExecuteKind::NotReady, NoExecuteKind::Unreachable];
                let now_has = kinds.map(|k| no_execute_of(node, k).is_some());
                if !now_has[0] && !now_has[1] {
                    if !self.swaps.is_empty() {
                        self.swaps.remove(name);
                    }
                    return;
                }
                let Some(before) = before else {
                    return;
                };
                for (i, kind) in kinds.iter().enumerate() {
                    // `kind` went, its opposite came: a swap. The first taint is kept through
                    // several swaps (its countdown is the one that started earliest).
                    if let Some(old) = no_execute_of(before, *kind)
                        && !now_has[i]
                        && now_has[1 - i]
                        && no_execute_of(before, kind.opposite()).is_none()
                    {
                        self.swaps
                            .entry(name.clone())
                            .or_insert_with(|| (old.clone(), now));
                    }
                }
            }
            _ => {}
        }
    }

    /// When the pod's tolerations last changed, as this process saw.
    pub(crate) fn tolerations_changed(&self, pod: &PodKey) -> Option<Time> {
        self.toleration_edits.get(pod).copied()
    }

    /// The node's NoExecute taints with the taint a swap replaced put back in place of its
    /// opposite, for a pod that came under them (`floor`) before the swap; `None` otherwise.
    pub(crate) fn before_swap(&self, node: &Node, floor: Time) -> Option<Vec<Taint>> {
        let (old, at) = self.swaps.get(&node.name)?;
        if floor >= *at {
            return None;
        }
        let swapped_key = [NoExecuteKind::NotReady, NoExecuteKind::Unreachable]
            .into_iter()
            .find(|k| *old.key == *k.key())?
            .opposite();
        Some(
            node.no_execute_taints()
                .map(|t| {
                    if *t.key == *swapped_key.key() {
                        old.clone()
                    } else {
                        t.clone()
                    }
                })
                .collect(),
        )
    }
}
