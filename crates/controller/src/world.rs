//! The cluster as the controllers know it, and the one way it changes.
//!
//! [`World`] owns the [`ClusterStore`]: the one copy of every node, Lease and pod, shared by the
//! three machines (node lifecycle, taint eviction, fencing). `Controllers` owns the `World`;
//! the machines read it through `&World` ([`World::store`]) and hold no copy of their own.
//!
//! [`World::apply`] is the only `&mut` path to the store (kube-runtime's reflector `Writer` /
//! `Store` split is the model): every change is an input it turns into an [`Observed`], so every
//! machine sees every change the same way. No `&mut ClusterStore` leaves this file, so the
//! compiler keeps the one writer. The watch's objects come in as upserts and deletions; a write
//! of ours known to have landed comes in as [`Input::Landed`] (made from its result by
//! `NodeLifecycle::landed`). A follower taking over a leader's store is [`World::adopt`].
//!
//! What a machine keeps per node beside the store is its own: `apply` tells it what changed
//! and it updates its entries afterwards (`NodeLifecycle::landed_applied`). The store gives
//! each node a key while it is there (`model::NodeKey`) and keeps it beside the node's Lease, so
//! a renewal comes out of `apply` with its node's key, and a machine's table indexed by keys
//! finds its entry with no lookup by name.
//!
//! What the lifecycle derives from the store for the others (brakes, zone states with their
//! suspects) it keeps itself, since its verdicts drive them; fencing reads them through
//! [`Facts`].

pub use crate::model::{ClusterStore, ConditionStatus, Kind, Name, Node, PodUpsert, Upserted};

use crate::time::Time;

use super::brake::{BrakeScope, BrakeState};
use super::inputs::{Input, Landed, Observed};
use super::zones::ZoneState;

/// What the node lifecycle derives from the store and the other machines act on: the engaged
/// brake covering a node, a zone's state with its suspects counted not ready, every zone down.
///
/// They follow the lifecycle's own verdicts (a node counts not ready in its zone once its
/// Unknown is written; a suspect is a node whose grace clock, kept per node by the lifecycle,
/// says it would be judged soon), so the lifecycle keeps them as nodes change, and the others
/// read them through this trait only, at the instant they decide, beside `&World`.
pub(crate) trait Facts {
    /// The engaged brake covering `node`, if any.
    fn brake_covering(
        &self,
        store: &ClusterStore,
        node: &str,
    ) -> Option<(&BrakeScope, &BrakeState)>;
    /// Every zone is fully disrupted, or would be with its suspects counted.
    fn all_zones_down_with_suspects(&self, store: &ClusterStore, now: Time) -> bool;
    /// The state of `node`'s zone, worse by its suspects when they make it worse than
    /// Normal (`None`: not known yet).
    fn zone_state_with_suspects(
        &self,
        store: &ClusterStore,
        node: &str,
        now: Time,
    ) -> Option<ZoneState>;
}

#[derive(Debug, Default)]
pub struct World {
    /// The cluster as known: changed only by [`World::apply`], replaced whole only by
    /// [`World::adopt`].
    store: ClusterStore,
}

impl World {
    pub(crate) fn new() -> World {
        World::default()
    }

    /// The cluster as the controllers know it: reads only.
    pub fn store(&self) -> &ClusterStore {
        &self.store
    }

    /// A follower takes over a leader's world (its caches stay warm across the change).
    pub(crate) fn adopt(&mut self, leader: World) {
        *self = leader;
    }

    /// Puts a watched object (or its deletion, or a full state's start or end, or a write of
    /// ours that landed) into the store and says what changed; other inputs pass through.
    pub(crate) fn apply(&mut self, input: Input) -> Observed {
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
                let Upserted::Changed { before } = stored.upserted else {
                    return Observed::Nothing;
                };
                let renewed = before.is_some_and(|b| b.renew_time < renew_time);
                Observed::Lease {
                    name: stored.name,
                    renew_time,
                    node: stored.node,
                    renewed,
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
        Observed::Node {
            name,
            before: Some(before),
        }
    }
}
