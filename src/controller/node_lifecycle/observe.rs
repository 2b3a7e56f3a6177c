//! The store's one writer: every change to the [`ClusterStore`] is an input that goes through
//! [`NodeLifecycle::observe`], which says what changed ([`Observed`]) so that every machine
//! sees every change the same way (kube-runtime's reflector `Writer` is the model).
//! `tests/config_and_operator_files/layering.rs` fails if a store mutation appears elsewhere.
//!
//! The watch's objects come in as upserts and deletions; a write of ours known to have landed
//! comes in as [`Input::Landed`], made from its result by [`NodeLifecycle::landed`].

use super::*;
use crate::controller::inputs::Landed;

impl NodeLifecycle {
    /// Puts a watched object (or its deletion, or a full state's start or end, or a write of
    /// ours that landed) into the store and says what changed; other inputs pass through.
    pub fn observe(&mut self, input: Input) -> Observed {
        match input {
            Input::NodeUpsert(node) => {
                let name = node.name.clone();
                match self.store.upsert_node(node) {
                    Upserted::Changed { before } => Observed::Node { name, before },
                    Upserted::Older | Upserted::Unchanged => Observed::Nothing,
                }
            }
            Input::NodeDeleted(name) => match self.store.remove_node(&name) {
                Some(node) => Observed::NodesGone(vec![node]),
                None => Observed::Nothing,
            },
            Input::LeaseUpsert(lease) => {
                let renew_time = lease.renew_time;
                let stored = self.store.upsert_lease(lease);
                let Upserted::Changed { .. } = stored.upserted else {
                    return Observed::Nothing;
                };
                // The node's entry, at the slot kept beside the Lease while it is still there:
                // one lookup by name for a renewal, the store's.
                let entry = self.nodes.slot_hinted(&stored.name, stored.owner_slot);
                if let Some(slot) = entry.filter(|&slot| slot != stored.owner_slot) {
                    self.store.set_lease_owner_slot(&stored.name, slot);
                }
                Observed::Lease {
                    name: stored.name,
                    renew_time,
                    entry,
                }
            }
            Input::LeaseDeleted(name) => {
                self.store.remove_lease(&name);
                Observed::Nothing
            }
            Input::PodUpsert(pod) => match self.store.upsert_pod(pod) {
                PodUpsert::Changed(change) => Observed::Pod(change),
                PodUpsert::Older | PodUpsert::Unchanged => Observed::Nothing,
            },
            Input::PodDeleted(key) => match self.store.remove_pod(&key) {
                Some(node) => Observed::PodsGone(vec![(key, node)]),
                None => Observed::Nothing,
            },
            Input::FullStateBegin(kind) => {
                self.store.begin_full_state(kind);
                Observed::Nothing
            }
            Input::FullStateEnd(kind) => {
                let vanished = self.store.end_full_state(kind);
                match kind {
                    Kind::Nodes => Observed::NodesGone(vanished.nodes),
                    Kind::Leases => Observed::Nothing,
                    Kind::Pods => Observed::PodsGone(vanished.pods),
                }
            }
            Input::Landed(landed) => self.store_landed(landed),
            other => Observed::Input(other),
        }
    }

    /// A write of ours that landed, into the store (the resourceVersion is left as it was: the
    /// object's next version, from the watch or the write's answer, replaces it). A node
    /// changed is reported as any node change; a pod's readiness or deletion and a Lease read
    /// live change nothing another machine judges (taint eviction does not look at readiness,
    /// and there is no taint eviction in legacy mode, where the lifecycle deletes pods).
    fn store_landed(&mut self, landed: Landed) -> Observed {
        match landed {
            Landed::NodeConditions {
                node,
                resource_version,
                conditions,
            } => self.edit_node(node, |n| {
                let same = n.resource_version == resource_version;
                if same {
                    n.conditions = conditions;
                }
                same
            }),
            Landed::NodeTaints {
                node,
                resource_version,
                taints,
            } => self.edit_node(node, |n| {
                let same = n.resource_version == resource_version;
                if same {
                    n.taints = taints;
                }
                same
            }),
            Landed::NodeLabels { node, labels } => self.edit_node(node, |n| {
                for (k, v) in labels {
                    n.labels.set(k, v);
                }
                true
            }),
            Landed::PodNotReady(pod) => {
                self.store
                    .pods_mut()
                    .set_ready(&pod, ConditionStatus::False);
                Observed::Nothing
            }
            Landed::PodDeleting(pod) => {
                self.store.pods_mut().set_deleting(&pod);
                Observed::Nothing
            }
            Landed::Lease(lease) => {
                self.store.upsert_lease(lease);
                Observed::Nothing
            }
        }
    }

    /// Applies `edit` (false: not applicable) to the stored node `name`: a change is reported
    /// with the version it replaced.
    fn edit_node(&mut self, name: Name, edit: impl FnOnce(&mut Node) -> bool) -> Observed {
        let edited = self.store.edit_node(&name, |node| {
            let before = node.clone();
            (edit(node) && *node != before).then_some(before)
        });
        let Some(Some(before)) = edited else {
            return Observed::Nothing;
        };
        // The lifecycle does not decide on this change (it decided on the result): the grace
        // kept for the node's renewals may no longer be its own (`health.rs`, `GraceMemo`).
        if let Some(e) = self.nodes.get_mut(&name) {
            e.grace_memo = health::GraceMemo::NONE;
        }
        Observed::Node {
            name,
            before: Some(before),
        }
    }

    /// What the write (or live read) a `Result` or `LeaseRead` answers put in the cluster, when
    /// its success is known and its node (or pod) is still the one it was sent for: the effect
    /// the store must hold at once. A pure read: the answer itself is decided on afterwards
    /// (`results.rs`), with the store already holding this.
    pub fn landed(&self, observed: &Observed) -> Option<Landed> {
        let entry = |node: &Name, uid: &Name| self.nodes.get(node).filter(|e| &e.uid == uid);
        match observed {
            Observed::Input(Input::Result {
                id,
                outcome: Outcome::Ok,
            }) => match self.in_flight.get(*id)? {
                Pending::NodeStatus { node, uid } => match &entry(node, uid)?.busy.get().verdict {
                    Verdict::Writing {
                        id: wid,
                        resource_version,
                        conditions,
                        ..
                    } if wid == id => Some(Landed::NodeConditions {
                        node: node.clone(),
                        resource_version: resource_version.clone(),
                        conditions: conditions.clone(),
                    }),
                    _ => None,
                },
                Pending::NodeTaints { node, uid } => {
                    let write = entry(node, uid)?.busy.get().taint_write.as_ref()?;
                    (write.id == *id).then(|| Landed::NodeTaints {
                        node: node.clone(),
                        resource_version: write.resource_version.clone(),
                        taints: write.taints.clone(),
                    })
                }
                Pending::NodeLabels { node, uid, labels } => {
                    (entry(node, uid)?.busy.get().label_write == Some(*id)).then(|| {
                        Landed::NodeLabels {
                            node: node.clone(),
                            labels: labels.clone(),
                        }
                    })
                }
                Pending::PodNotReady { pod, .. } => Some(Landed::PodNotReady(pod.clone())),
                Pending::DeletePod { pod, .. } => Some(Landed::PodDeleting(pod.clone())),
                Pending::LeaseRead { .. } | Pending::PodNodeLost { .. } => None,
            },
            Observed::Input(Input::LeaseRead {
                id,
                outcome: LeaseReadOutcome::Found(lease),
            }) => {
                let Pending::LeaseRead { node, uid } = self.in_flight.get(*id)? else {
                    return None;
                };
                let e = entry(node, uid)?;
                // Fresher than what the watch told us (the verdict is cancelled on it).
                (e.busy.get().verdict == Verdict::ReadingLease(*id)
                    && e.health.is_newer_renewal(lease.renew_time))
                .then(|| Landed::Lease(lease.clone()))
            }
            _ => None,
        }
    }
}

#[cfg(test)]
#[path = "observe_tests.rs"]
mod tests;
