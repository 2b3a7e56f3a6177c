//! Taints: NoExecute not-ready/unreachable through the per-zone rate-limited queues, the
//! per-node taint and label writes, and the eviction pass that drains the queues.

use std::time::Duration;

use crate::actions::Action;
use crate::condition_taints::missing_no_execute;
use crate::decisions::taint_decision;
use crate::labels::labels_to_update;
use crate::model::{ClusterStore, ConditionStatus, Name};
use crate::settings::{NODE_EVICTION_PERIOD, TAINT_RETRY_DELAY};
use crate::taint_ops::{NoExecuteKind, TaintOp, desired_taints, has_no_execute};
use crate::time::Time;

use super::{NodeLifecycle, Pending, TaintWrite, Timer};

impl NodeLifecycle {
    pub(super) fn process_taint_based_eviction(
        &mut self,
        store: &ClusterStore,
        name: &Name,
        observed: ConditionStatus,
        now: Time,
        out: &mut Vec<Action>,
    ) {
        let Some(node) = store.node(name) else {
            return;
        };
        let kind = match observed {
            ConditionStatus::True => {
                self.mark_node_as_reachable(store, name, now, out);
                return;
            }
            ConditionStatus::False => NoExecuteKind::NotReady,
            ConditionStatus::Unknown => NoExecuteKind::Unreachable,
            // Upstream's switch has no case for an unreadable status: no taint, no queue.
            ConditionStatus::Other => return,
        };
        if has_no_execute(node, kind.opposite()) {
            // Already tainted with the opposite taint: swap at once, not rate limited.
            let op = TaintOp::Apply { kind, zone: None };
            if !self.taint_op_pending(
                name,
                |o| matches!(o, TaintOp::Apply { kind: k, .. } if *k == kind),
            ) {
                self.push_taint_op(store, name, op, now, out);
            }
        } else {
            self.mark_node_for_tainting(store, name, kind, now);
        }
    }

    /// Upstream's tainting pass runs every 100 ms after the 5 s health pass that queued a
    /// node; ours is armed for the next token. When a node update (a kubelet reporting
    /// Ready=False) queues its node, the zone's state is already recounted (`decide` runs
    /// `handle_disruption` first), so the node is tainted at once when its zone has a token
    /// and no verdict is in flight (the pass waits for those: see `hold_eviction_pass`).
    pub(super) fn taint_due_now(
        &mut self,
        store: &ClusterStore,
        name: &Name,
        now: Time,
        out: &mut Vec<Action>,
    ) {
        let Some(zone) = self.nodes.get(name).map(|e| e.zone.clone()) else {
            return;
        };
        // This runs for every node change: the zone's queue is asked first (almost always
        // empty), the writes in flight only when something is due.
        let due = self
            .zones
            .get(&zone)
            .filter(|z| !z.stopped(true, now))
            .and_then(|z| z.queue().head())
            .is_some_and(|(_, at)| at <= now);
        if !due || !self.pass_gate.caches_current() || self.verdicts_in_flight() {
            return;
        }
        let view = self.suspect_view(store, now);
        if !self.zone_may_act(store, &view, &zone) {
            return;
        }
        // The brake counts this very change (and the suspects) before anything is tainted.
        self.update_brakes(store, now);
        if self.brakes.fleet_engaged() {
            return;
        }
        self.drain_zone_queue(store, &zone, now, out, Self::taint_from_queue);
    }

    /// Whether a verdict (its live Lease read or its status write) is in flight: kept as a count
    /// (`InFlight::counting`), not found among the pod writes in flight.
    pub(super) fn verdicts_in_flight(&self) -> bool {
        self.in_flight.counted() > 0
    }

    pub(super) fn taint_op_pending(&self, name: &str, f: impl Fn(&TaintOp) -> bool) -> bool {
        self.nodes.get(name).is_some_and(|e| {
            e.busy.get().taint_ops.iter().any(&f)
                || e.busy
                    .get()
                    .taint_write
                    .as_ref()
                    .is_some_and(|w| w.ops.iter().any(&f))
        })
    }

    /// Upstream `markNodeForTainting`: a node whose taint is missing is re-queued (removed and
    /// added again), so a node processed earlier is tainted again. One still waiting in the
    /// queue keeps its place: the periodic pass evaluates every queued node again (in name
    /// order here), and re-stamping them there would taint a fully disrupted zone in name
    /// order rather than in the order its nodes were judged, as upstream's queue takes them.
    pub(super) fn mark_node_for_tainting(
        &mut self,
        store: &ClusterStore,
        name: &Name,
        kind: NoExecuteKind,
        now: Time,
    ) {
        let tainted = store
            .node(name)
            .is_some_and(|node| has_no_execute(node, kind))
            || self.taint_op_pending(
                name,
                |o| matches!(o, TaintOp::Apply { kind: k, .. } if *k == kind),
            );
        let Some(e) = self.nodes.get(name) else {
            return;
        };
        let Some(node) = store.node(name) else {
            return;
        };
        let uid = node.uid.clone();
        let Some(zone) = self.zones.get_mut(&e.zone) else {
            return;
        };
        zone.mark_for_tainting(name, &uid, tainted, now);
    }

    /// Upstream `markNodeAsReachable`: both NoExecute taints off, out of the zone queue.
    pub(super) fn mark_node_as_reachable(
        &mut self,
        store: &ClusterStore,
        name: &Name,
        now: Time,
        out: &mut Vec<Action>,
    ) {
        let Some(e) = self.nodes.get(name) else {
            return;
        };
        let Some(node) = store.node(name) else {
            return;
        };
        let tainted = has_no_execute(node, NoExecuteKind::NotReady)
            || has_no_execute(node, NoExecuteKind::Unreachable)
            || self.taint_op_pending(name, |o| matches!(o, TaintOp::Apply { .. }));
        if let Some(zone) = self.zones.get_mut(&e.zone) {
            zone.forget(name);
        }
        if tainted && !self.taint_op_pending(name, |o| *o == TaintOp::Reachable) {
            self.push_taint_op(store, name, TaintOp::Reachable, now, out);
        }
    }

    pub(super) fn push_taint_op(
        &mut self,
        store: &ClusterStore,
        name: &Name,
        op: TaintOp,
        now: Time,
        out: &mut Vec<Action>,
    ) {
        if let Some(e) = self.nodes.get_mut(name) {
            e.busy.get_mut().taint_ops.push(op);
        }
        self.pump_taints(store, name, now, out);
    }

    /// Writes the node's desired taints (NoSchedule reconciliation + pending ops) unless a
    /// write is already in flight.
    pub(super) fn pump_taints(
        &mut self,
        store: &ClusterStore,
        name: &Name,
        now: Time,
        out: &mut Vec<Action>,
    ) {
        if self
            .nodes
            .get(name)
            .is_some_and(|e| e.busy.get().taint_write.is_none())
        {
            self.requeue_forbidden_ops(store, name, now);
        }
        let Some(e) = self.nodes.get_mut(name) else {
            return;
        };
        let Some(node) = store.node(name) else {
            return;
        };
        if !e.registered || e.busy.get().taint_write.is_some() || e.busy.get().taint_retry_pending {
            return;
        }
        let rules = (
            &self.settings.condition_taints[..],
            &self.retired_condition_taints[..],
        );
        let desired = desired_taints(node, &e.busy.get().taint_ops, rules, now);
        // Taken only when there are some: a settled node has no `Busy` box to make and drop.
        let ops = if e.busy.get().taint_ops.is_empty() {
            Vec::new()
        } else {
            std::mem::take(&mut e.busy.get_mut().taint_ops)
        };
        if desired == node.taints {
            self.taint_ops_done(name, &ops, true, now);
            return;
        }
        if e.busy.get().taint_tries == 0 {
            let decision = taint_decision(name, &e.zone, node, &desired, &ops);
            self.decisions.extend(decision);
        }
        let about = Pending::NodeTaints {
            node: name.clone(),
            uid: node.uid.clone(),
        };
        let taints = desired.clone();
        let id = self.in_flight.send(
            about,
            |id| Action::PatchNodeTaints {
                id,
                node: name.clone(),
                uid: node.uid.clone(),
                resource_version: node.resource_version.clone(),
                taints,
            },
            out,
        );
        let e = self.nodes.get_mut(name).expect("looked up above");
        e.busy.get_mut().taint_write = Some(TaintWrite {
            id,
            resource_version: node.resource_version.clone(),
            taints: desired,
            ops,
        });
    }

    /// A NoExecute taint the zone queue gave out may wait here behind a write of the same node
    /// in flight (a slow or failing API server). If its zone has stopped tainting meanwhile
    /// (partially disrupted and small, every zone down, a cooldown, a brake), or the caches
    /// went stale or a fleet pause of tainting began, it goes back to the queue
    /// instead of out: the zone rules are judged when the taint is written, not only when it
    /// was queued (soak seed 31: a taint given out in a Normal zone landed 2.7 s after the zone
    /// became partially disrupted).
    fn requeue_forbidden_ops(&mut self, store: &ClusterStore, name: &Name, now: Time) {
        // An engaged brake covering the node holds every queued NoExecute decision too.
        let braked = self.brake_covering(store, name).is_some();
        let caches_current = self.pass_gate.caches_current();
        let Some(e) = self
            .nodes
            .get_mut(name)
            .filter(|e| !e.busy.get().taint_ops.is_empty())
        else {
            return;
        };
        let zones = &self.zones;
        let mut requeue = Vec::new();
        e.busy.get_mut().taint_ops.retain(|op| {
            let (TaintOp::Apply {
                zone: Some(zone), ..
            }
            | TaintOp::ConditionTaints { zone: Some(zone) }) = op
            else {
                return true;
            };
            // Stale caches or a fleet pause of tainting (`caches_current`) hold it too: the
            // zone queue's pass would not have given it out now.
            let stopped = braked
                || !caches_current
                || zones
                    .get(zone)
                    .is_some_and(|z| z.queue().rate().is_never() || z.stopped(true, now));
            if stopped {
                requeue.push(zone.clone());
            }
            !stopped
        });
        for zone in requeue {
            if let Some(z) = self.zones.get_mut(&zone) {
                z.retry(name, now);
            }
        }
    }

    /// Reports the outcome of taint ops to the zone queues they came from.
    pub(super) fn taint_ops_done(&mut self, name: &Name, ops: &[TaintOp], ok: bool, now: Time) {
        for op in ops {
            let (TaintOp::Apply {
                zone: Some(zone), ..
            }
            | TaintOp::ConditionTaints { zone: Some(zone) }) = op
            else {
                continue;
            };
            let Some(z) = self.zones.get_mut(zone) else {
                continue;
            };
            if ok {
                z.count_eviction();
            } else {
                z.retry(name, now);
            }
        }
    }

    pub(super) fn pump_labels(&mut self, store: &ClusterStore, name: &Name, out: &mut Vec<Action>) {
        let Some(e) = self.nodes.get(name) else {
            return;
        };
        let Some(node) = store.node(name) else {
            return;
        };
        if !e.registered || e.busy.get().label_write.is_some() {
            return;
        }
        let labels = labels_to_update(node);
        if labels.is_empty() {
            return;
        }
        let about = Pending::NodeLabels {
            node: name.clone(),
            uid: node.uid.clone(),
            labels: labels.clone(),
        };
        let id = self.in_flight.send(
            about,
            |id| Action::PatchNodeLabels {
                id,
                node: name.clone(),
                uid: node.uid.clone(),
                labels,
            },
            out,
        );
        let e = self.nodes.get_mut(name).expect("looked up above");
        e.busy.get_mut().label_write = Some(id);
    }

    /// The zone queues' pass, every 100 ms while some queue has work.
    pub(super) fn eviction_pass(&mut self, store: &ClusterStore, now: Time, out: &mut Vec<Action>) {
        // On a stale cache a zone's recovery may be unseen: no new taint (nor legacy
        // eviction) until the caches are current; the queues keep their order and tokens.
        if !self.pass_gate.caches_current() || self.hold_eviction_pass(now) {
            return;
        }
        // A hold may have run out (`hold_max`): the pass is armed for it.
        self.refresh_holds(store, now);
        let keys: Vec<Name> = self.zones.keys().cloned().collect();
        // Built once, and only when some zone has work due: the zones' counts with their
        // suspects (`suspects.rs`).
        let mut view = None;
        // Counted once, with the suspects, before any NoExecute decision (`brake.rs`).
        let mut brakes_counted = false;
        for zone in keys {
            // A held domain, or a zone cooling down: nothing to look at (`take_due` would give
            // nothing out), and no suspects or brakes counted for it.
            let taint_based = self.taint_based;
            if self
                .zones
                .get(&zone)
                .is_some_and(|z| z.stopped(taint_based, now))
            {
                continue;
            }
            let due = self
                .zones
                .get(&zone)
                .and_then(|z| z.queue().head())
                .is_some_and(|(_, at)| at <= now);
            // A head not due yet still takes a token below, as upstream's `Try` does.
            if due {
                let view = view.get_or_insert_with(|| self.suspect_view(store, now));
                if !self.zone_may_act(store, view, &zone) {
                    continue;
                }
                if !brakes_counted {
                    brakes_counted = true;
                    self.update_brakes(store, now);
                }
                // Everything is braked: the queues keep their order and tokens.
                if self.brakes.fleet_engaged() {
                    continue;
                }
            }
            if self.taint_based {
                self.drain_zone_queue(store, &zone, now, out, Self::taint_from_queue);
            } else {
                self.drain_zone_queue(store, &zone, now, out, Self::evict_from_queue);
            }
        }
    }

    /// The pass waits while verdicts are in flight, at most `EVICTION_PASS_MAX_HOLD`
    /// (`pass_gate.rs` says why).
    pub(super) fn hold_eviction_pass(&mut self, now: Time) -> bool {
        let verdicts = self.verdicts_in_flight();
        self.pass_gate.holds_for_verdicts(verdicts, now)
    }

    pub(super) fn taint_from_queue(
        &mut self,
        store: &ClusterStore,
        zone: &Name,
        name: &Name,
        now: Time,
        out: &mut Vec<Action>,
    ) {
        let Some(node) = store.node(name) else {
            return; // gone: done
        };
        if missing_no_execute(&self.settings.condition_taints, node)
            .next()
            .is_some()
        {
            let op = TaintOp::ConditionTaints {
                zone: Some(zone.clone()),
            };
            self.push_taint_op(store, name, op, now, out);
        }
        let Some(node) = store.node(name) else {
            return;
        };
        let kind = match node.ready().map(|c| c.status) {
            None => {
                if let Some(z) = self.zones.get_mut(zone) {
                    z.retry(name, now + TAINT_RETRY_DELAY);
                }
                return;
            }
            // Ready again, or a status upstream's pass does not taint: nothing to do.
            Some(ConditionStatus::True | ConditionStatus::Other) => return,
            Some(ConditionStatus::False) => NoExecuteKind::NotReady,
            Some(ConditionStatus::Unknown) => NoExecuteKind::Unreachable,
        };
        let op = TaintOp::Apply {
            kind,
            zone: Some(zone.clone()),
        };
        self.push_taint_op(store, name, op, now, out);
    }

    /// Arms the zone queues' pass: every 100 ms while a queue has work and a non-zero rate,
    /// sooner when a due head only waits for its zone's next token.
    pub(super) fn arm_eviction_pass(&mut self, store: &ClusterStore, now: Time) {
        let mut at: Option<Time> = None;
        // A braked head waits for the release, which arms the pass again (`decide`).
        let braked = self.brakes.any_engaged();
        for z in self.zones.values() {
            if let Some(until) = z.hold.until().filter(|_| z.hold.held()) {
                // The hold's end is a decision line, queue or not.
                at = Some(at.map_or(until, |a| a.min(until)));
            }
            if z.queue().is_empty() || z.queue().rate().is_never() || z.hold.held() {
                continue;
            }
            if braked
                && z.queue()
                    .head()
                    .is_some_and(|(head, _)| self.brake_covering(store, head).is_some())
            {
                continue;
            }
            let mut next = now + NODE_EVICTION_PERIOD;
            if self.taint_based
                && let Some(until) = z.hold.cooldown_until().filter(|_| z.hold.in_cooldown(now))
            {
                // Nothing is tainted here before the cooldown ends.
                next = until;
            } else if z.waiting_for_suspects {
                // The zone waits for nodes about to be judged (`suspects.rs`): their verdicts
                // and renewals are inputs of their own; until then it is looked at again at
                // upstream's pass period, not at its next token (a millisecond away).
            } else if z.queue().head().is_some_and(|(_, due)| due <= now)
                && let Some(token) = z.queue().next_token(now)
            {
                next = next.min(token.max(now + Duration::from_millis(1)));
            }
            at = Some(at.map_or(next, |a| a.min(next)));
        }
        match at {
            Some(at) => {
                if self
                    .deadlines
                    .deadline(&Timer::EvictionPass)
                    .is_none_or(|current| current > at)
                {
                    self.deadlines.schedule(Timer::EvictionPass, at);
                }
            }
            None => {
                self.deadlines.cancel(&Timer::EvictionPass);
            }
        }
    }

    // ---- zones (docs/upstream.md, "Zones") ------------------------------------------------------
}

impl NodeLifecycle {
    /// A node lacking a custom NoExecute condition taint waits in its zone's queue for it (see
    /// `condition_taints.rs`); one already queued keeps its place.
    pub(super) fn queue_condition_taints(&mut self, store: &ClusterStore, name: &Name, now: Time) {
        if self.settings.condition_taints.is_empty() {
            return;
        }
        let Some(node) = store.node(name) else {
            return;
        };
        if missing_no_execute(&self.settings.condition_taints, node)
            .next()
            .is_none()
            || self.taint_op_pending(name, |o| matches!(o, TaintOp::ConditionTaints { .. }))
        {
            return;
        }
        let uid = node.uid.clone();
        let Some(e) = self.nodes.get(name).filter(|e| e.registered) else {
            return;
        };
        let Some(zone) = self.zones.get_mut(&e.zone) else {
            return;
        };
        zone.enqueue(name, &uid, now);
    }
}
