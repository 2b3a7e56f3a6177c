//! Pods on a node that is not Ready are marked NotReady (upstream's `MarkPodsNotReady`).

use std::collections::{BTreeSet, HashSet};

use crate::actions::Action;
use crate::decisions::Decision;
use crate::model::{ClusterStore, ConditionStatus, Name, PodKey};
use crate::time::Time;

use super::{NodeLifecycle, Pending};

/// The pod work under way, owned here: pods whose NotReady mark is in flight, nodes whose
/// pods are kept Ready (`partitions.rs` says which), and, in legacy mode, pods whose status
/// already says NodeLost (`legacy_eviction.rs`).
#[derive(Debug, Default)]
pub(super) struct PodWork {
    marking: HashSet<PodKey>,
    kept_ready: BTreeSet<Name>,
    node_lost: HashSet<PodKey>,
}

impl PodWork {
    /// A NotReady mark for `pod` is sent: false if one is in flight already.
    fn start_marking(&mut self, pod: &PodKey) -> bool {
        if self.marking.contains(pod) {
            return false;
        }
        self.marking.insert(pod.clone());
        true
    }

    /// The mark's answer came.
    pub(super) fn marked(&mut self, pod: &PodKey) {
        self.marking.remove(pod);
    }

    /// The node's pods are kept Ready: false if they were already.
    pub(super) fn keep_ready(&mut self, node: &Name) -> bool {
        self.kept_ready.insert(node.clone())
    }

    /// The node's pods are no longer kept Ready.
    pub(super) fn stop_keeping(&mut self, node: &Name) {
        self.kept_ready.remove(node);
    }

    /// The nodes whose pods are kept Ready.
    pub(super) fn kept_ready(&self) -> Vec<Name> {
        self.kept_ready.iter().cloned().collect()
    }

    /// Legacy: the pod's status says NodeLost (its DELETE is next).
    pub(super) fn is_node_lost(&self, pod: &PodKey) -> bool {
        self.node_lost.contains(pod)
    }

    pub(super) fn set_node_lost(&mut self, pod: &PodKey) {
        self.node_lost.insert(pod.clone());
    }

    /// The pod is gone.
    pub(super) fn pod_gone(&mut self, pod: &PodKey) {
        self.node_lost.remove(pod);
    }
}

impl NodeLifecycle {
    /// Upstream `MarkPodsNotReady`: every pod on the node whose Ready is True (or only `only`).
    pub(super) fn mark_pods_not_ready(
        &mut self,
        store: &ClusterStore,
        node: &Name,
        only: Option<&PodKey>,
        now: Time,
        out: &mut Vec<Action>,
    ) {
        // Only a pass over the whole node settles its retry (upstream's per-pod path never
        // touches `nodesToRetry`).
        if only.is_none()
            && let Some(e) = self.nodes.get_mut(node)
        {
            e.needs_pod_retry = false;
        }
        // An autonomous edge node's pods keep serving; a pool may opt out as well.
        if store
            .node(node)
            .is_some_and(|n| !self.settings.marks_pods_not_ready(n))
        {
            return;
        }
        // `unless-disrupted`: not while the node's domain is disrupted (`partitions.rs`).
        if let Some(why) = self.keeps_pods_ready(store, node, now) {
            self.keep_pods_ready(node, why);
            return;
        }
        self.pod_work.stop_keeping(node);
        let pods = store.pods();
        let ids = match only {
            Some(k) => pods.id(k).into_iter().collect(),
            None => pods.on_node(node),
        };
        let mut marked = Vec::new();
        for id in ids {
            let pod = pods.view(id);
            // Every Ready condition not already False is set False (an Unknown one too); a pod
            // without one is left alone, as upstream.
            if pod.node_name() != Some(node)
                || matches!(pod.ready(), None | Some(ConditionStatus::False))
            {
                continue;
            }
            let key = pod.key();
            if !self.pod_work.start_marking(&key) {
                continue;
            }
            let uid = pod.uid();
            marked.push(key.clone());
            let about = Pending::PodNotReady {
                pod: key.clone(),
                node: node.clone(),
            };
            self.in_flight.send(
                about,
                |id| Action::MarkPodNotReady {
                    id,
                    pod: key,
                    uid,
                    node: node.clone(),
                },
                out,
            );
        }
        if !marked.is_empty() {
            let zone = self
                .nodes
                .get(node)
                .map(|e| e.zone.clone())
                .unwrap_or_default();
            self.decisions.push(Decision::PodsNotReady {
                node: node.clone(),
                zone,
                pods: marked,
            });
        }
    }

    // ---- results -----------------------------------------------------------------------------
}
