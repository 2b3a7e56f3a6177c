//! The node lifecycle's side of the world's changes (`controller/world.rs`, whose
//! `World::apply` is the store's one writer): which of its writes a result says landed
//! ([`NodeLifecycle::landed`], a pure read: `Controllers` applies it to the world as
//! `Input::Landed`), what it updates of its own entries once one did
//! ([`NodeLifecycle::landed_applied`]).

use crate::inputs::{Input, LeaseReadOutcome, Observed, Outcome};
use crate::model::Name;

use super::health;
use super::{NodeLifecycle, Pending, Verdict};
use crate::inputs::Landed;

impl NodeLifecycle {
    /// A write of ours that landed changed the node `observed` names in the world: the
    /// lifecycle does not decide on this change (it decided on the result), but the grace kept
    /// for the node's renewals may no longer be its own (`health.rs`, `GraceMemo`).
    pub(crate) fn landed_applied(&mut self, observed: &Observed) {
        if let Observed::Node { name, .. } = observed
            && let Some(e) = self.nodes.get_mut(name)
        {
            e.grace_memo = health::GraceMemo::NONE;
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
