//! Pods on a node that is not Ready are marked NotReady (upstream's `MarkPodsNotReady`).

use super::*;

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
        self.pods_kept_ready.remove(node);
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
            if self.pods_marking.contains(&key) {
                continue;
            }
            let uid = pod.uid();
            self.pods_marking.insert(key.clone());
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
