//! Legacy direct eviction (`taint_based_eviction = false`, docs/upstream.md, "Legacy direct
//! eviction"; upstream before 1.27): instead of NoExecute taints, a node not Ready for longer than
//! `pod_eviction_timeout` is queued in its zone's (rate-limited) queue, and processing it deletes
//! its pods after setting their status reason to `NodeLost`. DaemonSet pods and pods already being
//! deleted stay.

use crate::model::{ClusterStore, ConditionStatus, Name, PodKey};
use crate::time::Time;

use super::{EvictionJob, LegacyEviction, NodeLifecycle, Pending};
use crate::actions::Action;
use crate::events::{Event, EventObject, EventType, NODE_CONTROLLER};
use crate::inputs::Outcome;

/// `NodeUnreachablePodReason`.
pub const NODE_LOST_REASON: &str = "NodeLost";

impl NodeLifecycle {
    /// Upstream `processNoTaintBaseEviction`.
    pub(super) fn process_no_taint_based_eviction(
        &mut self,
        store: &ClusterStore,
        name: &Name,
        observed: ConditionStatus,
        now: Time,
        out: &mut Vec<Action>,
    ) {
        let timeout = self.settings.pod_eviction_timeout;
        let Some(e) = self.nodes.get(name) else {
            return;
        };
        let due = match observed {
            ConditionStatus::True => {
                self.cancel_pod_eviction(name);
                return;
            }
            ConditionStatus::False => now > e.health.ready_transition_time() + timeout,
            ConditionStatus::Unknown => now > e.health.probe_time() + timeout,
            // Upstream's switch has no case for it: nothing to do.
            ConditionStatus::Other => return,
        };
        if due {
            self.evict_pods(store, name, now, out);
        }
    }

    /// Upstream `evictPods`: an evicted node's new pods go at once; otherwise the node is queued.
    fn evict_pods(&mut self, store: &ClusterStore, name: &Name, now: Time, out: &mut Vec<Action>) {
        // An engaged brake covering the node holds its deletions (`brake.rs`).
        let braked = self.brake_covering(store, name).is_some();
        let Some(e) = self.nodes.get_mut(name) else {
            return;
        };
        if e.legacy == LegacyEviction::Evicted {
            if e.busy.get().legacy_job.is_none() && !braked {
                let zone = e.zone.clone();
                self.start_delete_job(store, name, false, out);
                // A pass with nothing to delete must close its job, or the next pass's new
                // pods would wait behind it forever.
                self.finish_job_if_done(name, &zone, now);
            }
            return;
        }
        e.legacy = LegacyEviction::ToBeEvicted;
        let uid = e.uid.clone();
        if let Some(zone) = self.zones.get_mut(&e.zone) {
            zone.enqueue(name, &uid, now);
        }
    }

    /// Upstream `cancelPodEviction`.
    pub(super) fn cancel_pod_eviction(&mut self, name: &Name) {
        let Some(e) = self.nodes.get_mut(name) else {
            return;
        };
        e.legacy = LegacyEviction::Unmarked;
        if let Some(zone) = self.zones.get_mut(&e.zone) {
            zone.forget(name);
        }
    }

    pub(super) fn evict_from_queue(
        &mut self,
        store: &ClusterStore,
        zone: &Name,
        name: &Name,
        now: Time,
        out: &mut Vec<Action>,
    ) {
        let Some(e) = self.nodes.get_mut(name) else {
            return; // gone: done
        };
        if e.busy.get().legacy_job.is_some() {
            if let Some(job) = &mut e.busy.get_mut().legacy_job {
                job.from_queue = true;
            }
        } else {
            self.start_delete_job(store, name, true, out);
        }
        // A job with nothing to do completes at once.
        self.finish_job_if_done(name, zone, now);
    }

    /// Upstream `DeletePods` for every pod bound to the node.
    fn start_delete_job(
        &mut self,
        store: &ClusterStore,
        name: &Name,
        from_queue: bool,
        out: &mut Vec<Action>,
    ) {
        let ids = store.pods().on_node(name);
        let Some(node) = store.node(name) else {
            return;
        };
        let node = node.clone();
        // The event is recorded only for a pass that deletes something: upstream records it
        // whenever pods remain and relies on client-go's event correlator to drop the repeats;
        // we have no correlator, so an evicted node with terminating pods would repeat it on
        // every pass.
        let mut steps = Vec::new();
        let deleting_all_pods = Action::RecordEvent(Event {
            object: EventObject::Node {
                name: node.name.clone(),
                uid: node.uid.clone(),
            },
            event_type: EventType::Normal,
            reason: "DeletingAllPods",
            message: format!(
                "Node {} event: Deleting all Pods from Node {}.",
                node.name, node.name
            ),
            component: NODE_CONTROLLER,
        });
        let mut job = EvictionJob {
            outstanding: 0,
            failed: false,
            from_queue,
        };
        for id in ids {
            let pod = store.pods().view(id);
            if pod.node_name() != Some(name) {
                continue;
            }
            let key = pod.key();
            let uid = pod.uid();
            if self.pod_work.is_node_lost(&key) {
                job.outstanding += usize::from(self.delete_step(store, &key, name, &mut steps));
                continue;
            }
            let about = Pending::PodNodeLost {
                pod: key.clone(),
                node: name.clone(),
                uid: node.uid.clone(),
            };
            let message = format!(
                "Node {} which was running pod {} is unresponsive",
                name, key.name
            );
            let write = |id| Action::SetPodStatusNodeLost {
                id,
                message,
                pod: key,
                uid,
            };
            self.in_flight.send(about, write, &mut steps);
            job.outstanding += 1;
        }
        if job.outstanding > 0 {
            out.push(deleting_all_pods);
            out.append(&mut steps);
        }
        if let Some(e) = self.nodes.get_mut(name) {
            e.busy.get_mut().legacy_job = Some(job);
        }
    }

    /// Deletes the pod unless it is a DaemonSet's or already being deleted. True if a delete
    /// was sent.
    fn delete_step(
        &mut self,
        store: &ClusterStore,
        key: &PodKey,
        node: &Name,
        out: &mut Vec<Action>,
    ) -> bool {
        let Some(pod) = store.pods().get(key) else {
            return false;
        };
        if pod.deleting() || pod.daemonset_owned() {
            return false;
        }
        let node_uid = self
            .nodes
            .get(node)
            .map(|e| e.uid.clone())
            .unwrap_or_else(|| Name::from(""));
        let uid = pod.uid();
        out.push(Action::RecordEvent(Event {
            object: EventObject::Pod {
                namespace: key.namespace.clone(),
                name: key.name.clone(),
                uid: uid.clone(),
            },
            event_type: EventType::Normal,
            reason: "NodeControllerEviction",
            message: format!("Marking for deletion Pod {} from Node {}", key.name, node),
            component: NODE_CONTROLLER,
        }));
        let about = Pending::DeletePod {
            pod: key.clone(),
            node: node.clone(),
            uid: node_uid,
        };
        let delete = |id| Action::DeletePod {
            id,
            pod: key.clone(),
            uid,
        };
        self.in_flight.send(about, delete, out);
        true
    }

    // The world's store is passed in beside the result's own fields.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn on_node_lost_result(
        &mut self,
        store: &ClusterStore,
        pod: &PodKey,
        node: &Name,
        node_uid: &Name,
        outcome: Outcome,
        now: Time,
        out: &mut Vec<Action>,
    ) {
        match outcome {
            Outcome::Ok => {
                self.pod_work.set_node_lost(pod);
            }
            Outcome::Conflict => self.job_failed(node),
            _ => {}
        }
        let proceed = !matches!(outcome, Outcome::Conflict | Outcome::NotFound);
        let sent =
            proceed && self.job_alive(node, node_uid) && self.delete_step(store, pod, node, out);
        if !sent {
            self.job_step_done(node, node_uid, now);
        }
    }

    pub(super) fn on_delete_pod_result(
        &mut self,
        node: &Name,
        node_uid: &Name,
        outcome: Outcome,
        now: Time,
    ) {
        match outcome {
            // On success the pod is known to be deleting, whether or not the watch said so
            // yet: it is in the store so already (`NodeLifecycle::landed`, `World::apply`).
            Outcome::Ok | Outcome::NotFound => {}
            Outcome::Conflict | Outcome::Failed(_) => self.job_failed(node),
        }
        self.job_step_done(node, node_uid, now);
    }

    fn job_alive(&self, node: &Name, uid: &Name) -> bool {
        self.nodes
            .get(node)
            .is_some_and(|e| &e.uid == uid && e.busy.get().legacy_job.is_some())
    }

    fn job_failed(&mut self, node: &Name) {
        if let Some(e) = self.nodes.get_mut(node)
            && let Some(job) = &mut e.busy.get_mut().legacy_job
        {
            job.failed = true;
        }
    }

    fn job_step_done(&mut self, node: &Name, uid: &Name, now: Time) {
        if !self.job_alive(node, uid) {
            return;
        }
        let Some(e) = self.nodes.get_mut(node) else {
            return;
        };
        if let Some(job) = e.busy.get_mut().legacy_job.as_mut() {
            job.outstanding = job.outstanding.saturating_sub(1);
        }
        let zone = e.zone.clone();
        self.finish_job_if_done(node, &zone, now);
    }

    fn finish_job_if_done(&mut self, node: &Name, zone: &Name, now: Time) {
        let Some(e) = self.nodes.get_mut(node) else {
            return;
        };
        if e.busy
            .get()
            .legacy_job
            .as_ref()
            .is_none_or(|j| j.outstanding > 0)
        {
            return;
        }
        let Some(job) = e.busy.get_mut().legacy_job.take() else {
            return;
        };
        if !job.from_queue {
            return;
        }
        let Some(z) = self.zones.get_mut(zone) else {
            return;
        };
        if job.failed {
            z.retry(node, now);
        } else {
            e.legacy = LegacyEviction::Evicted;
            z.count_eviction();
        }
    }
}
