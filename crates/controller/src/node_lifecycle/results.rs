//! The answers to the writes and live reads the lifecycle asked for.

use crate::actions::{Action, ActionId};
use crate::decisions::LeaseEvidence;
use crate::events::EventType;
use crate::inputs::{LeaseReadOutcome, Outcome};
use crate::model::{ClusterStore, ConditionStatus, Name};
use crate::settings::{CONFLICT_RETRIES, STATUS_RETRY_DELAY, TAINT_CONFLICT_DELAY};
use crate::time::Time;

use super::{NodeEntry, NodeLifecycle, Pending, Timer, Verdict, pod_event, taint_jitter};

impl NodeLifecycle {
    pub(super) fn entry_for(&mut self, node: &Name, uid: &Name) -> Option<&mut NodeEntry> {
        self.nodes.get_mut(node).filter(|e| &e.uid == uid)
    }

    pub(super) fn on_result(
        &mut self,
        store: &ClusterStore,
        id: ActionId,
        outcome: Outcome,
        now: Time,
        out: &mut Vec<Action>,
    ) {
        let Some(pending) = self.in_flight.answered(id) else {
            return;
        };
        match pending {
            Pending::NodeStatus { node, uid } => {
                self.on_status_result(store, &node, &uid, id, outcome, now, out)
            }
            Pending::NodeTaints { node, uid } => {
                self.on_taints_result(store, &node, &uid, id, outcome, now, out)
            }
            Pending::NodeLabels { node, uid, .. } => {
                let Some(e) = self.entry_for(&node, &uid) else {
                    return;
                };
                if e.busy.get().label_write != Some(id) {
                    return;
                }
                e.busy.get_mut().label_write = None;
                // On success the labels are in the store already (`landed`, `World::apply`):
                // known to be written, whether or not its answer or the watch came yet.
                if outcome == Outcome::Conflict {
                    self.pump_labels(store, &node, out);
                }
            }
            Pending::LeaseRead { .. } => {}
            Pending::PodNotReady { pod, node } => {
                self.pod_work.marked(&pod);
                match outcome {
                    Outcome::NotFound => {}
                    Outcome::Ok => {
                        // The pod is NotReady in the store already (`landed`, `World::apply`).
                        if let Some(p) = store.pods().get(&pod) {
                            out.push(pod_event(
                                p,
                                EventType::Warning,
                                "NodeNotReady",
                                String::from("Node is not ready"),
                            ));
                        }
                    }
                    Outcome::Conflict | Outcome::Failed(_) => {
                        if let Some(e) = self.nodes.get_mut(&node) {
                            e.needs_pod_retry = true;
                        }
                        // Upstream records the event unless the pod was not found.
                        if let Some(p) = store.pods().get(&pod) {
                            out.push(pod_event(
                                p,
                                EventType::Warning,
                                "NodeNotReady",
                                String::from("Node is not ready"),
                            ));
                        }
                    }
                }
            }
            Pending::PodNodeLost { pod, node, uid } => {
                self.on_node_lost_result(store, &pod, &node, &uid, outcome, now, out)
            }
            Pending::DeletePod { node, uid, .. } => {
                self.on_delete_pod_result(&node, &uid, outcome, now)
            }
        }
    }

    // The world's store is passed in beside the result's own fields.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn on_status_result(
        &mut self,
        store: &ClusterStore,
        node: &Name,
        uid: &Name,
        id: ActionId,
        outcome: Outcome,
        now: Time,
        out: &mut Vec<Action>,
    ) {
        let Some(e) = self.entry_for(node, uid) else {
            return;
        };
        let Verdict::Writing { id: wid, .. } = &e.busy.get().verdict else {
            return;
        };
        if *wid != id {
            return;
        }
        let Verdict::Writing {
            observed,
            conditions,
            ..
        } = std::mem::replace(&mut e.busy.get_mut().verdict, Verdict::Idle)
        else {
            return;
        };
        match outcome {
            Outcome::Ok => {
                e.busy.get_mut().verdict_tries = 0;
                let ready = conditions
                    .iter()
                    .find(|c| c.kind == crate::model::NodeConditionType::Ready);
                e.health.verdict_written(ready, now);
                // The write succeeded: the node's conditions in the store are what was written,
                // whether or not the watch has delivered the new version yet
                // (`NodeLifecycle::landed`, `World::apply`: they went in before this answer is
                // decided on).
                let current = Some(ConditionStatus::Unknown);
                self.after_health(store, node, observed, current, now, out);
                // Upstream queues the node for its NoExecute taint one pass later, when it
                // observes the Unknown it wrote; the write's success is that observation.
                if self.taint_based {
                    self.process_taint_based_eviction(
                        store,
                        node,
                        ConditionStatus::Unknown,
                        now,
                        out,
                    );
                } else {
                    self.process_no_taint_based_eviction(
                        store,
                        node,
                        ConditionStatus::Unknown,
                        now,
                        out,
                    );
                }
                // The conditions we wrote call for the unreachable NoSchedule taint; when the
                // write's answer (or the watch) already brought them, this finds nothing to do.
                self.pump_taints(store, node, now, out);
            }
            Outcome::Conflict => {
                e.busy.get_mut().verdict_tries += 1;
                if e.busy.get().verdict_tries < CONFLICT_RETRIES {
                    // The shell fed the re-read node first: decide again on it.
                    self.evaluate(store, node, now, out);
                } else {
                    e.busy.get_mut().verdict_tries = 0;
                }
            }
            Outcome::Failed(_) => {
                // Upstream tries the health update again after 20 ms, 5 tries in all; then
                // the next pass.
                e.busy.get_mut().verdict_tries += 1;
                if e.busy.get().verdict_tries < CONFLICT_RETRIES {
                    self.deadlines
                        .schedule(Timer::StatusRetry(node.clone()), now + STATUS_RETRY_DELAY);
                } else {
                    e.busy.get_mut().verdict_tries = 0;
                }
            }
            Outcome::NotFound => e.busy.get_mut().verdict_tries = 0,
        }
    }

    // The world's store is passed in beside the result's own fields.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn on_taints_result(
        &mut self,
        store: &ClusterStore,
        node: &Name,
        uid: &Name,
        id: ActionId,
        outcome: Outcome,
        now: Time,
        out: &mut Vec<Action>,
    ) {
        let period = self.settings.node_monitor_period;
        let Some(e) = self.entry_for(node, uid) else {
            return;
        };
        let Some(write) = e.busy.get_mut().taint_write.take_if(|w| w.id == id) else {
            return;
        };
        match outcome {
            Outcome::Ok => {
                e.busy.get_mut().taint_tries = 0;
                // The taints written are in the store already (`landed`, `World::apply`).
                self.taint_ops_done(node, &write.ops, true, now);
                self.pump_taints(store, node, now, out);
            }
            Outcome::Conflict => {
                e.busy.get_mut().taint_tries += 1;
                if e.busy.get().taint_tries < CONFLICT_RETRIES {
                    let mut ops = write.ops;
                    ops.append(&mut e.busy.get_mut().taint_ops);
                    e.busy.get_mut().taint_ops = ops;
                    // Upstream's backoff: 100 ms plus up to 100 ms of jitter (here derived
                    // from the node's name and the try, so runs are reproducible).
                    e.busy.get_mut().taint_retry_pending = true;
                    let jitter = taint_jitter(node, e.busy.get().taint_tries);
                    self.deadlines.schedule(
                        Timer::TaintRetry(node.clone()),
                        now + TAINT_CONFLICT_DELAY + jitter,
                    );
                } else {
                    e.busy.get_mut().taint_tries = 0;
                    self.taint_ops_done(node, &write.ops, false, now);
                }
            }
            Outcome::NotFound => {}
            Outcome::Failed(_) => {
                e.busy.get_mut().taint_tries = 0;
                // Ops queued behind the failed write (a recovered node's untaint) would wait
                // for the next node change, and a healthy node may not change for minutes:
                // try them after a monitor period (not at once: no busy loop on API errors).
                let queued = !e.busy.get().taint_ops.is_empty();
                if queued {
                    e.busy.get_mut().taint_retry_pending = true;
                    self.deadlines
                        .schedule(Timer::TaintRetry(node.clone()), now + period);
                }
                self.taint_ops_done(node, &write.ops, false, now);
            }
        }
    }

    pub(super) fn on_lease_read(
        &mut self,
        store: &ClusterStore,
        id: ActionId,
        outcome: LeaseReadOutcome,
        now: Time,
        out: &mut Vec<Action>,
    ) {
        let Some(Pending::LeaseRead { node, uid }) = self.in_flight.answered(id) else {
            return;
        };
        let period = self.settings.node_monitor_period;
        let Some(e) = self.entry_for(&node, &uid) else {
            return;
        };
        if e.busy.get().verdict != Verdict::ReadingLease(id) {
            return;
        }
        e.busy.get_mut().verdict = Verdict::Idle;
        match outcome {
            LeaseReadOutcome::Found(lease) => {
                let renew = lease.renew_time;
                if e.health.observe_lease(renew, now) {
                    // Fresher than what the watch told us: the verdict is cancelled (the Lease
                    // is in the store already: `NodeLifecycle::landed`, `World::apply`).
                    self.arm_grace(store, &node, now);
                    return;
                }
                e.busy.get_mut().lease_confirmed_for = Some(e.health.probe_time());
                e.busy.get_mut().lease_evidence = Some(LeaseEvidence::Stale {
                    read_at: now,
                    renew_time: renew,
                });
            }
            LeaseReadOutcome::NotFound => {
                e.busy.get_mut().lease_confirmed_for = Some(e.health.probe_time());
                e.busy.get_mut().lease_evidence = Some(LeaseEvidence::Missing { read_at: now });
            }
            LeaseReadOutcome::Failed(_) => {
                // The API server cannot be read: wait, decide nothing.
                self.deadlines
                    .schedule(Timer::LeaseReadRetry(node.clone()), now + period);
                return;
            }
        }
        self.evaluate(store, &node, now, out);
    }
}
