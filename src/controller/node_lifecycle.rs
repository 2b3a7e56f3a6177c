//! The node lifecycle controller as a deterministic state machine: `(input, now) -> actions`.
//!
//! Upstream runs a 5 s `monitorNodeHealth` pass, a 100 ms NoExecute tainting pass and node/pod
//! event workers. Here the same decisions are driven by events and exact timers:
//! - a node's health verdict is due at `probe_time + grace` (its own timer), and before
//!   declaring it Unknown on an expired Lease the Lease is read live (KEP-5647);
//! - node updates reconcile NoSchedule taints and labels at once;
//! - the periodic pass (every `node_monitor_period`) re-evaluates every node as a safety net;
//! - zone disruption is recomputed whenever a node's Ready changes (counts kept incrementally).
//!
//! Writes are optimistic and asynchronous: each carries an id, the result comes back as an
//! input. At most one taint write, one label write and one status write per node is in flight.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::rc::Rc;
use std::time::Duration;

use crate::model::{
    ClusterStore, ConditionStatus, Kind, Name, Node, PodChange, PodKey, PodUpsert, PodView,
    Upserted,
};
use crate::time::Time;
use crate::time::{Rate, TimerHeap};

use super::actions::{Action, ActionId};
use super::condition_taints::{ConditionTaint, missing_no_execute, retire_condition_taints};
use super::decisions::{Decision, Heartbeat, LeaseEvidence, taint_decision};
use super::events::{Event, EventObject, EventType, NODE_CONTROLLER};
use super::health::{NodeHealth, ReadySnapshot, stale_conditions};
use super::inputs::{Input, LeaseReadOutcome, Observed, Outcome};
use super::labels::labels_to_update;
use super::rate_limited_queue::RateLimitedTimedQueue;
use super::settings::{
    CONFLICT_RETRIES, EVICTION_PASS_MAX_HOLD, NODE_EVICTION_PERIOD, STATUS_RETRY_DELAY, Settings,
    TAINT_CONFLICT_DELAY, TAINT_RETRY_DELAY,
};
use super::taint_ops::{NoExecuteKind, TaintOp, desired_taints, has_no_execute};
use super::zones::{Zone, ZoneState, compute_zone_state, zone_rate_with};

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) enum Timer {
    /// The periodic full pass.
    MonitorPass,
    /// The zone queues' pass (NoExecute tainting, or legacy pod eviction).
    EvictionPass,
    /// `probe_time + grace` of a node.
    NodeGrace(Name),
    /// A failed live Lease read, tried again.
    LeaseReadRetry(Name),
    /// A failed status write (not a conflict), tried again.
    StatusRetry(Name),
    /// A taint write that met a conflict, tried again after upstream's backoff.
    TaintRetry(Name),
}

/// Where a node's health verdict stands.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum Verdict {
    Idle,
    /// The node looks overdue; its Lease is being read live before deciding.
    ReadingLease(ActionId),
    /// Conditions set Unknown are being written. `observed` is Ready before the write.
    Writing {
        id: ActionId,
        observed: ConditionStatus,
        resource_version: Name,
        conditions: Vec<crate::model::NodeCondition>,
    },
}

/// Legacy mode (SPEC §9): where a node's pod eviction stands.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum LegacyEviction {
    Unmarked,
    ToBeEvicted,
    Evicted,
}

#[derive(Debug)]
pub(super) struct EvictionJob {
    pub outstanding: usize,
    pub failed: bool,
    /// Started by the zone queue (its outcome is reported back) or directly.
    pub from_queue: bool,
}

#[derive(Debug)]
pub(super) struct TaintWrite {
    pub id: ActionId,
    pub resource_version: Name,
    pub taints: Vec<crate::model::Taint>,
    pub ops: Vec<TaintOp>,
}

#[derive(Debug)]
pub(super) struct NodeEntry {
    /// The node's uid: the node itself is in the store; results for another node of the same
    /// name are ignored.
    pub uid: Name,
    /// Seen after the initial sync: `RegisteredNode` emitted, health tracked, zone counted.
    pub registered: bool,
    pub health: NodeHealth,
    pub zone: Name,
    /// `Some(ready)` while counted in its zone (not excluded from disruption checks).
    pub counted: Option<bool>,
    /// Upstream `nodesToRetry`: mark pods NotReady again on the next evaluation.
    pub needs_pod_retry: bool,
    pub verdict: Verdict,
    pub verdict_tries: u32,
    /// The probe time a live Lease read confirmed as stale (evidence for the verdict).
    pub lease_confirmed_for: Option<Time>,
    /// What that read found, for the decision log.
    pub lease_evidence: Option<LeaseEvidence>,
    pub taint_write: Option<TaintWrite>,
    pub taint_ops: Vec<TaintOp>,
    pub taint_tries: u32,
    /// A conflicted taint write waits for its retry timer.
    pub taint_retry_pending: bool,
    pub label_write: Option<ActionId>,
    pub legacy: LegacyEviction,
    pub legacy_job: Option<EvictionJob>,
}

#[derive(Debug)]
pub(super) enum Pending {
    NodeStatus {
        node: Name,
        uid: Name,
    },
    NodeTaints {
        node: Name,
        uid: Name,
    },
    NodeLabels {
        node: Name,
        uid: Name,
        labels: Vec<(Name, Name)>,
    },
    LeaseRead {
        node: Name,
        uid: Name,
    },
    PodNotReady {
        pod: PodKey,
        node: Name,
    },
    PodNodeLost {
        pod: PodKey,
        node: Name,
        uid: Name,
    },
    DeletePod {
        pod: PodKey,
        node: Name,
        uid: Name,
    },
}

pub struct NodeLifecycle {
    pub(super) settings: Settings,
    /// Fixed at start: switching eviction modes needs a restart.
    pub(super) taint_based: bool,
    pub(super) synced: bool,
    pub(super) next_id: u64,
    /// The cluster as known: the one copy of every node, Lease and pod (taint eviction reads it
    /// too, through [`super::Controllers`]).
    pub(super) store: ClusterStore,
    /// What the controller keeps per node beside the node itself.
    pub(super) nodes: BTreeMap<Name, NodeEntry>,
    pub(super) zones: BTreeMap<Name, Zone>,
    /// Eviction counts of zones that lost their last node (a zone that comes back resumes it).
    pub(super) past_evictions: BTreeMap<Name, u64>,
    pub(super) timers: TimerHeap<Timer>,
    pub(super) pending: HashMap<ActionId, Pending>,
    pub(super) pods_marking: HashSet<PodKey>,
    /// Legacy: pods whose status already says NodeLost.
    pub(super) node_lost: HashSet<PodKey>,
    pub(super) disruption_dirty: bool,
    /// Since when the zone queues' pass has been held back for health verdicts in flight.
    pub(super) eviction_pass_held_since: Option<Time>,
    /// What was decided and why since the shell last took them (see [`Decision`]).
    pub(super) decisions: Vec<Decision>,
    /// Custom condition taints a reload dropped from the config: still ours, so they are
    /// removed from every node rather than left behind.
    pub(super) retired_condition_taints: Vec<ConditionTaint>,
}

fn node_event(node: &Node, reason: &'static str, message: String) -> Action {
    Action::RecordEvent(Event {
        object: EventObject::Node {
            name: node.name.clone(),
            uid: node.uid.clone(),
        },
        event_type: EventType::Normal,
        reason,
        message,
        component: NODE_CONTROLLER,
    })
}

fn pod_event(
    pod: PodView<'_>,
    event_type: EventType,
    reason: &'static str,
    message: String,
) -> Action {
    Action::RecordEvent(Event {
        object: EventObject::Pod {
            namespace: pod.namespace().clone(),
            name: Name::from(pod.name()),
            uid: pod.uid(),
        },
        event_type,
        reason,
        message,
        component: NODE_CONTROLLER,
    })
}

impl NodeLifecycle {
    pub fn new(settings: Settings, _now: Time) -> NodeLifecycle {
        NodeLifecycle {
            taint_based: settings.taint_based_eviction,
            settings,
            synced: false,
            next_id: 0,
            store: ClusterStore::new(),
            nodes: BTreeMap::new(),
            zones: BTreeMap::new(),
            past_evictions: BTreeMap::new(),
            timers: TimerHeap::new(),
            pending: HashMap::new(),
            pods_marking: HashSet::new(),
            node_lost: HashSet::new(),
            disruption_dirty: false,
            eviction_pass_held_since: None,
            decisions: Vec::new(),
            retired_condition_taints: Vec::new(),
        }
    }

    /// The decisions taken since the last call, oldest first.
    pub fn take_decisions(&mut self) -> Vec<Decision> {
        std::mem::take(&mut self.decisions)
    }

    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// When the shell must call `handle(Input::Tick, now)` next.
    pub fn next_deadline(&self) -> Option<Time> {
        self.timers.next_deadline()
    }

    /// The cluster as the controller knows it.
    pub fn store(&self) -> &ClusterStore {
        &self.store
    }

    /// The store, for a follower built from this machine (see `Controllers::into_follower`).
    pub(super) fn into_store(self) -> ClusterStore {
        self.store
    }

    /// The node as the controller last saw it.
    pub fn node(&self, name: &str) -> Option<&Node> {
        self.store.node(name)
    }

    /// The state of the node's zone (fencing's gate: only `Normal` zones are fenced in).
    pub fn zone_state_of(&self, node: &str) -> Option<ZoneState> {
        let e = self.nodes.get(node).filter(|e| e.registered)?;
        self.zones.get(&e.zone)?.state
    }

    /// Every zone is fully disrupted: most likely our own view of the cluster is broken.
    pub fn all_zones_down(&self) -> bool {
        self.all_zones_fully_disrupted()
    }

    /// Takes over another machine's store (a follower keeps the leader's caches warm): every
    /// node gets an entry, unregistered until the initial sync.
    pub(super) fn adopt_store(&mut self, store: ClusterStore, now: Time) {
        self.store = store;
        let names: Vec<Name> = self.store.nodes().map(|n| n.name.clone()).collect();
        let mut out = Vec::new();
        for name in &names {
            self.on_node_changed(name, None, now, &mut out);
        }
        debug_assert!(out.is_empty(), "an unsynced machine decides nothing");
    }

    /// Applies one input: watched objects go into the store first, then the decision.
    pub fn handle(&mut self, input: Input, now: Time) -> Vec<Action> {
        let observed = self.observe(input);
        self.decide(observed, now)
    }

    /// Puts a watched object (or its deletion, or a full state's start or end) into the store
    /// and says what changed; other inputs pass through.
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
                let name = lease.name.clone();
                match self.store.upsert_lease(lease) {
                    Upserted::Changed { .. } => Observed::Lease(name),
                    Upserted::Older | Upserted::Unchanged => Observed::Nothing,
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
            other => Observed::Input(other),
        }
    }

    /// Decides on what [`NodeLifecycle::observe`] reported.
    pub fn decide(&mut self, observed: Observed, now: Time) -> Vec<Action> {
        let mut out = Vec::new();
        let mut changed_node = None;
        match observed {
            Observed::Nothing => {}
            Observed::Node { name, before } => {
                self.on_node_changed(&name, before.as_ref(), now, &mut out);
                changed_node = Some(name);
            }
            Observed::NodesGone(nodes) => {
                for node in &nodes {
                    self.forget_node(node, &mut out);
                }
            }
            Observed::Lease(name) => self.on_lease_changed(&name, now),
            Observed::Pod(change) => self.on_pod_changed(&change, now, &mut out),
            Observed::PodsGone(pods) => {
                for (key, _) in &pods {
                    self.node_lost.remove(key);
                }
            }
            Observed::Input(input) => match input {
                Input::InitialSyncDone => self.on_initial_sync(now, &mut out),
                Input::Tick => self.on_tick(now, &mut out),
                Input::Result { id, outcome } => self.on_result(id, outcome, now, &mut out),
                Input::LeaseRead { id, outcome } => self.on_lease_read(id, outcome, now, &mut out),
                // Watched objects went through `observe`; eviction results are routed to the
                // taint eviction machine by `Controllers`.
                _ => {}
            },
        }
        if self.synced {
            if self.disruption_dirty {
                self.handle_disruption(now, &mut out);
            }
            if let Some(name) = changed_node {
                self.taint_due_now(&name, now, &mut out);
            }
            self.arm_eviction_pass(now);
        }
        out
    }

    /// Applies new settings (config reload): rates, thresholds, graces and the period take
    /// effect now. `taint_based_eviction` is kept as started (a mode switch needs a restart).
    pub fn apply_settings(&mut self, mut settings: Settings, now: Time) -> Vec<Action> {
        settings.taint_based_eviction = self.taint_based;
        let period_changed = settings.node_monitor_period != self.settings.node_monitor_period;
        retire_condition_taints(
            &mut self.retired_condition_taints,
            &self.settings.condition_taints,
            &settings.condition_taints,
        );
        self.settings = settings;
        let mut out = Vec::new();
        if !self.synced {
            return out;
        }
        if period_changed {
            self.timers
                .schedule(Timer::MonitorPass, now + self.settings.node_monitor_period);
        }
        let names: Vec<Name> = self.nodes.keys().cloned().collect();
        for name in &names {
            self.arm_grace(name, now);
        }
        if !self.all_zones_fully_disrupted() {
            let keys: Vec<Name> = self.zones.keys().cloned().collect();
            for key in keys {
                self.set_limiter_in_zone(&key, now);
            }
        }
        self.disruption_dirty = true;
        self.handle_disruption(now, &mut out);
        for name in &names {
            self.evaluate(name, now, &mut out);
            // The condition taint rules may have changed.
            self.pump_taints(name, now, &mut out);
            if self.taint_based {
                self.queue_condition_taints(name, now);
            }
        }
        self.arm_eviction_pass(now);
        out
    }

    // ---- inputs ----------------------------------------------------------------------------

    fn on_node_changed(
        &mut self,
        name: &Name,
        before: Option<&Node>,
        now: Time,
        out: &mut Vec<Action>,
    ) {
        let Some(node) = self.store.node(name) else {
            return;
        };
        let uid = node.uid.clone();
        if let Some(e) = self.nodes.get(name)
            && e.uid != uid
            && let Some(old) = before
        {
            // Re-created with the same name: the old one is gone, this one starts fresh.
            self.forget_node(old, out);
        }
        let Some(node) = self.store.node(name) else {
            return;
        };
        let Some(e) = self.nodes.get_mut(name) else {
            let zone: Name = Rc::from(node.zone_key());
            let health = NodeHealth::first_seen(node, now);
            self.nodes.insert(
                name.clone(),
                NodeEntry {
                    uid,
                    registered: false,
                    health,
                    zone,
                    counted: None,
                    needs_pod_retry: false,
                    verdict: Verdict::Idle,
                    verdict_tries: 0,
                    lease_confirmed_for: None,
                    lease_evidence: None,
                    taint_write: None,
                    taint_ops: Vec::new(),
                    taint_tries: 0,
                    taint_retry_pending: false,
                    label_write: None,
                    legacy: LegacyEviction::Unmarked,
                    legacy_job: None,
                },
            );
            if self.synced {
                self.register(name, now, out);
            }
            return;
        };
        if !e.registered {
            return;
        }
        let no_execute = |n: Option<&Node>| {
            n.map_or((false, false), |n| {
                (
                    has_no_execute(n, NoExecuteKind::NotReady),
                    has_no_execute(n, NoExecuteKind::Unreachable),
                )
            })
        };
        let old_ready = before.and_then(|b| b.ready()).map(|c| c.status);
        let old_no_execute = no_execute(before);
        e.health.observe_node(node, now);
        let new_ready = node.ready().map(|c| c.status);
        let new_no_execute = no_execute(Some(node));
        let labels_changed = before.is_some_and(|b| b.labels != node.labels);
        let zone: Name = Rc::from(node.zone_key());
        if before.is_some() && new_ready == Some(ConditionStatus::True) && old_ready != new_ready {
            self.decisions.push(Decision::NodeReady {
                node: name.clone(),
                zone: zone.clone(),
                was: old_ready,
            });
        }
        if zone != e.zone {
            self.move_zone(name, zone, now);
        }
        self.arm_grace(name, now);
        self.update_contribution(name, new_ready);
        if labels_changed {
            // The node may have changed pools, and its zone's rate with it.
            let zone = self.nodes.get(name).map(|e| e.zone.clone());
            if let Some(zone) = zone {
                self.refresh_zone_rate(&zone, now);
            }
        }
        self.pump_taints(name, now, out);
        self.pump_labels(name, out);
        if old_ready != new_ready || old_no_execute != new_no_execute {
            self.evaluate(name, now, out);
        }
        if self.taint_based {
            self.queue_condition_taints(name, now);
        }
    }

    fn on_lease_changed(&mut self, name: &Name, now: Time) {
        let renew = self.store.lease(name).and_then(|l| l.renew_time);
        let Some(e) = self.nodes.get_mut(name) else {
            return;
        };
        if e.registered && e.health.observe_lease(renew, now) {
            self.arm_grace(name, now);
        }
    }

    fn on_pod_changed(&mut self, change: &PodChange, now: Time, out: &mut Vec<Action>) {
        if !self.synced {
            return;
        }
        // Upstream `processPod`: a pod newly bound to (or moved onto) a node not Ready.
        let pod = self.store.pods().view(change.id);
        let Some(node_name) = pod.node_name().cloned() else {
            return;
        };
        let old_node = change.before.as_ref().and_then(|b| b.node.as_ref());
        if old_node == Some(&node_name) {
            return;
        }
        let Some(e) = self.nodes.get(&node_name) else {
            return;
        };
        if !e.registered {
            return;
        }
        let Some(ready) = e.health.saved_ready.as_ref().map(|r| r.status) else {
            return;
        };
        if ready == ConditionStatus::True {
            return;
        }
        self.mark_pods_not_ready(&node_name, Some(&change.key), out);
        if !self.taint_based {
            self.process_no_taint_based_eviction(&node_name, ready, now, out);
        }
    }

    fn on_initial_sync(&mut self, now: Time, out: &mut Vec<Action>) {
        if self.synced {
            return;
        }
        self.synced = true;
        let names: Vec<Name> = self.nodes.keys().cloned().collect();
        for name in &names {
            self.register(name, now, out);
        }
        self.disruption_dirty = true;
        self.timers
            .schedule(Timer::MonitorPass, now + self.settings.node_monitor_period);
    }

    fn on_tick(&mut self, now: Time, out: &mut Vec<Action>) {
        if !self.synced {
            return;
        }
        while let Some((timer, _)) = self.timers.pop_due(now) {
            match timer {
                Timer::MonitorPass => {
                    self.monitor_pass(now, out);
                    self.timers
                        .schedule(Timer::MonitorPass, now + self.settings.node_monitor_period);
                }
                Timer::EvictionPass => self.eviction_pass(now, out),
                Timer::TaintRetry(name) => {
                    if let Some(e) = self.nodes.get_mut(&name) {
                        e.taint_retry_pending = false;
                    }
                    self.pump_taints(&name, now, out);
                }
                Timer::NodeGrace(name) | Timer::LeaseReadRetry(name) | Timer::StatusRetry(name) => {
                    self.evaluate(&name, now, out);
                    if self.disruption_dirty {
                        self.handle_disruption(now, out);
                    }
                }
            }
        }
    }

    // ---- node lifecycle ----------------------------------------------------------------------

    /// First sight of a node once synced (upstream: "added" in `classifyNodes`).
    fn register(&mut self, name: &Name, now: Time, out: &mut Vec<Action>) {
        let lease_renew = self.store.lease(name).and_then(|l| l.renew_time);
        let eviction_rate = self.settings.node_eviction_rate;
        let (Some(e), Some(node)) = (self.nodes.get_mut(name), self.store.node(name)) else {
            return;
        };
        e.registered = true;
        e.health = NodeHealth::first_seen(node, now);
        e.health.observe_lease(lease_renew, now);
        e.zone = Rc::from(node.zone_key());
        // After a restart, pods still Ready on a node already Unknown (not heard from) are
        // marked (kubernetes#135205: upstream leaves them Ready). A node whose kubelet reports
        // Ready=False is alive and manages its pods; upstream does not mark them on a restart,
        // and neither do we. A node that never posted Ready has no pods running yet.
        e.needs_pod_retry = node
            .ready()
            .is_some_and(|c| c.status == ConditionStatus::Unknown);
        out.push(node_event(
            node,
            "RegisteredNode",
            format!(
                "Node {} event: Registered Node {} in Controller",
                node.name, node.name
            ),
        ));
        let zone = e.zone.clone();
        let ready = node.ready().map(|c| c.status);
        self.join_zone(zone.clone(), eviction_rate, now);
        self.update_contribution(name, ready);
        self.refresh_zone_rate(&zone, now);
        if self.taint_based {
            self.mark_node_as_reachable(name, now, out);
        } else {
            self.cancel_pod_eviction(name);
        }
        self.arm_grace(name, now);
        self.pump_taints(name, now, out);
        self.pump_labels(name, out);
        self.evaluate(name, now, out);
    }

    /// The node is gone (or re-created): forget its state, queue entries and timers.
    fn forget_node(&mut self, node: &Node, out: &mut Vec<Action>) {
        let name = &node.name;
        let Some(e) = self.nodes.remove(name) else {
            return;
        };
        self.timers.cancel(&Timer::NodeGrace(name.clone()));
        self.timers.cancel(&Timer::LeaseReadRetry(name.clone()));
        self.timers.cancel(&Timer::StatusRetry(name.clone()));
        self.timers.cancel(&Timer::TaintRetry(name.clone()));
        if !e.registered {
            return;
        }
        out.push(node_event(
            node,
            "RemovingNode",
            format!(
                "Node {} event: Removing Node {} from Controller",
                node.name, node.name
            ),
        ));
        self.leave_zone(name, &e.zone, e.counted);
    }

    fn leave_zone(&mut self, name: &str, zone_key: &Name, counted: Option<bool>) {
        if let Some(zone) = self.zones.get_mut(zone_key) {
            zone.queue.remove(name);
            zone.members = zone.members.saturating_sub(1);
            if let Some(ready) = counted {
                zone.size = zone.size.saturating_sub(1);
                if ready {
                    zone.ready = zone.ready.saturating_sub(1);
                }
                self.disruption_dirty = true;
            }
            if zone.members == 0 {
                // `node_collector_evictions_total{zone}` is a counter: it outlives the zone.
                if let Some(gone) = self.zones.remove(zone_key)
                    && gone.evictions_total > 0
                {
                    self.past_evictions
                        .insert(zone_key.clone(), gone.evictions_total);
                }
                self.disruption_dirty = true;
            }
        }
    }

    fn move_zone(&mut self, name: &Name, zone: Name, now: Time) {
        let eviction_rate = self.settings.node_eviction_rate;
        let Some(e) = self.nodes.get_mut(name) else {
            return;
        };
        let (old, counted) = (std::mem::replace(&mut e.zone, zone.clone()), e.counted);
        e.counted = None;
        self.leave_zone(name, &old, counted);
        self.join_zone(zone, eviction_rate, now);
    }

    /// Counts one more member in `zone`, creating the zone (state Initial, a full bucket at the
    /// healthy rate) on first use.
    fn join_zone(&mut self, zone: Name, eviction_rate: Rate, now: Time) {
        let past_evictions = &mut self.past_evictions;
        self.zones
            .entry(zone.clone())
            .or_insert_with(|| Zone {
                evictions_total: past_evictions.remove(&zone).unwrap_or(0),
                cooldown_until: None,
                key: zone,
                members: 0,
                size: 0,
                ready: 0,
                state: None,
                queue: RateLimitedTimedQueue::new(eviction_rate, now),
            })
            .members += 1;
    }

    /// Keeps the zone's counts in line with the node's current Ready and exclusion label.
    fn update_contribution(&mut self, name: &str, current: Option<ConditionStatus>) {
        let Some(e) = self.nodes.get_mut(name) else {
            return;
        };
        let Some(node) = self.store.node(name) else {
            return;
        };
        let new = if node.excluded_from_disruption() {
            None
        } else {
            Some(current == Some(ConditionStatus::True))
        };
        if e.counted == new {
            return;
        }
        let old = std::mem::replace(&mut e.counted, new);
        let Some(zone) = self.zones.get_mut(&e.zone) else {
            return;
        };
        if let Some(ready) = old {
            zone.size = zone.size.saturating_sub(1);
            zone.ready = zone.ready.saturating_sub(usize::from(ready));
        }
        if let Some(ready) = new {
            zone.size += 1;
            zone.ready += usize::from(ready);
        }
        self.disruption_dirty = true;
    }

    fn arm_grace(&mut self, name: &Name, now: Time) {
        let Some(e) = self.nodes.get(name) else {
            return;
        };
        let Some(node) = self.store.node(name) else {
            return;
        };
        if !e.registered {
            return;
        }
        let (monitor, startup) = self.settings.graces(node);
        let grace = NodeHealth::grace(node, monitor, startup);
        let at = e.health.verdict_at(grace);
        let key = Timer::NodeGrace(name.clone());
        if at > now {
            self.timers.schedule(key, at);
        } else {
            self.timers.cancel(&key);
        }
    }

    fn monitor_pass(&mut self, now: Time, out: &mut Vec<Action>) {
        let names: Vec<Name> = self.nodes.keys().cloned().collect();
        for name in &names {
            self.evaluate(name, now, out);
        }
        // The safety net recomputes zone states even if no count changed.
        self.disruption_dirty = true;
        self.handle_disruption(now, out);
    }

    /// Upstream's per-node body of `monitorNodeHealth`: the health verdict, then the NoExecute
    /// (or legacy eviction) decision and pod readiness from the Ready observed before it.
    pub(super) fn evaluate(&mut self, name: &Name, now: Time, out: &mut Vec<Action>) {
        let retry_pending = self.timers.contains(&Timer::LeaseReadRetry(name.clone()));
        let id = ActionId(self.next_id + 1);
        let Some(e) = self.nodes.get_mut(name) else {
            return;
        };
        let Some(node) = self.store.node(name) else {
            return;
        };
        if !e.registered || e.verdict != Verdict::Idle {
            return;
        }
        let (monitor, startup) = self.settings.graces(node);
        let grace = NodeHealth::grace(node, monitor, startup);
        let observed = node
            .ready()
            .map(|c| c.status)
            .unwrap_or(ConditionStatus::Unknown);
        if now > e.health.probe_time + grace
            && let Some(conditions) = stale_conditions(node, now)
        {
            // No verdict without fresh evidence: a node that heartbeats through a Lease is only
            // declared Unknown once a live read confirms the Lease is stale.
            if e.health.lease_renew.is_some() && e.lease_confirmed_for != Some(e.health.probe_time)
            {
                if !retry_pending {
                    self.next_id += 1;
                    e.verdict = Verdict::ReadingLease(id);
                    let uid = node.uid.clone();
                    self.pending.insert(
                        id,
                        Pending::LeaseRead {
                            node: name.clone(),
                            uid,
                        },
                    );
                    out.push(Action::ReadLease {
                        id,
                        node: name.clone(),
                    });
                }
                return;
            }
            self.next_id += 1;
            if e.verdict_tries == 0 {
                let heartbeat = match e.health.lease_renew {
                    Some(renew) => Heartbeat::Lease {
                        renew_time: Some(renew),
                    },
                    None => Heartbeat::NodeStatus {
                        last_heartbeat: node.ready().and_then(|c| c.last_heartbeat_time),
                    },
                };
                let lease = match e.health.lease_renew {
                    Some(_) => e.lease_evidence.clone().unwrap_or(LeaseEvidence::NoLease),
                    None => LeaseEvidence::NoLease,
                };
                self.decisions.push(Decision::NodeUnknown {
                    node: name.clone(),
                    zone: e.zone.clone(),
                    last_seen: e.health.probe_time,
                    heartbeat,
                    grace,
                    lease,
                });
            }
            // The saved Ready condition changes only once the write succeeded (upstream keeps
            // the old one when its update fails): see `on_status_result`.
            e.verdict = Verdict::Writing {
                id,
                observed,
                resource_version: node.resource_version.clone(),
                conditions: conditions.clone(),
            };
            self.pending.insert(
                id,
                Pending::NodeStatus {
                    node: name.clone(),
                    uid: node.uid.clone(),
                },
            );
            out.push(Action::UpdateNodeConditions {
                id,
                node: name.clone(),
                uid: node.uid.clone(),
                resource_version: node.resource_version.clone(),
                conditions,
            });
            return;
        }
        let current = node.ready().map(|c| c.status);
        self.after_health(name, observed, current, now, out);
    }

    /// The part of the pass that follows the health update.
    fn after_health(
        &mut self,
        name: &Name,
        observed: ConditionStatus,
        current: Option<ConditionStatus>,
        now: Time,
        out: &mut Vec<Action>,
    ) {
        self.update_contribution(name, current);
        let Some(current) = current else {
            return;
        };
        if self.taint_based {
            self.process_taint_based_eviction(name, observed, now, out);
            self.queue_condition_taints(name, now);
        } else {
            self.process_no_taint_based_eviction(name, observed, now, out);
        }
        let Some(e) = self.nodes.get_mut(name) else {
            return;
        };
        let Some(node) = self.store.node(name) else {
            return;
        };
        if current != ConditionStatus::True && observed == ConditionStatus::True {
            out.push(node_event(
                node,
                "NodeNotReady",
                format!("Node {} status is now: NodeNotReady", node.name),
            ));
            self.mark_pods_not_ready(name, None, out);
        } else if e.needs_pod_retry && observed != ConditionStatus::True {
            self.mark_pods_not_ready(name, None, out);
        } else {
            e.needs_pod_retry = false;
        }
    }

    // ---- NoExecute tainting (SPEC §5) --------------------------------------------------------

    fn process_taint_based_eviction(
        &mut self,
        name: &Name,
        observed: ConditionStatus,
        now: Time,
        out: &mut Vec<Action>,
    ) {
        let Some(node) = self.store.node(name) else {
            return;
        };
        let kind = match observed {
            ConditionStatus::True => {
                self.mark_node_as_reachable(name, now, out);
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
                self.push_taint_op(name, op, now, out);
            }
        } else {
            self.mark_node_for_tainting(name, kind, now);
        }
    }

    /// Upstream's tainting pass runs every 100 ms after the 5 s health pass that queued a
    /// node; ours is armed for the next token. When a node update (a kubelet reporting
    /// Ready=False) queues its node, the zone's state is already recounted (`decide` runs
    /// `handle_disruption` first), so the node is tainted at once when its zone has a token
    /// and no verdict is in flight (the pass waits for those: see `hold_eviction_pass`).
    fn taint_due_now(&mut self, name: &Name, now: Time, out: &mut Vec<Action>) {
        let Some(zone) = self.nodes.get(name).map(|e| e.zone.clone()) else {
            return;
        };
        // This runs for every node change: the zone's queue is asked first (almost always
        // empty), the writes in flight only when something is due.
        let due = self
            .zones
            .get(&zone)
            .filter(|z| !z.in_cooldown(now))
            .and_then(|z| z.queue.head())
            .is_some_and(|(_, at)| at <= now);
        if !due || self.verdicts_in_flight() {
            return;
        }
        while let Some(value) = self.zones.get_mut(&zone).and_then(|z| z.queue.pop_due(now)) {
            self.taint_from_queue(&zone, &value.value, now, out);
        }
    }

    fn verdicts_in_flight(&self) -> bool {
        self.pending
            .values()
            .any(|p| matches!(p, Pending::LeaseRead { .. } | Pending::NodeStatus { .. }))
    }

    pub(super) fn taint_op_pending(&self, name: &str, f: impl Fn(&TaintOp) -> bool) -> bool {
        self.nodes.get(name).is_some_and(|e| {
            e.taint_ops.iter().any(&f)
                || e.taint_write.as_ref().is_some_and(|w| w.ops.iter().any(&f))
        })
    }

    /// Upstream `markNodeForTainting`: a node whose taint is missing is re-queued (removed and
    /// added again), so a node processed earlier is tainted again.
    fn mark_node_for_tainting(&mut self, name: &Name, kind: NoExecuteKind, now: Time) {
        let tainted = self
            .store
            .node(name)
            .is_some_and(|node| has_no_execute(node, kind))
            || self.taint_op_pending(
                name,
                |o| matches!(o, TaintOp::Apply { kind: k, .. } if *k == kind),
            );
        let Some(e) = self.nodes.get(name) else {
            return;
        };
        let Some(node) = self.store.node(name) else {
            return;
        };
        let uid = node.uid.clone();
        let Some(zone) = self.zones.get_mut(&e.zone) else {
            return;
        };
        if !tainted {
            zone.queue.remove(name);
        }
        zone.queue.add(name, &uid, now);
    }

    /// Upstream `markNodeAsReachable`: both NoExecute taints off, out of the zone queue.
    fn mark_node_as_reachable(&mut self, name: &Name, now: Time, out: &mut Vec<Action>) {
        let Some(e) = self.nodes.get(name) else {
            return;
        };
        let Some(node) = self.store.node(name) else {
            return;
        };
        let tainted = has_no_execute(node, NoExecuteKind::NotReady)
            || has_no_execute(node, NoExecuteKind::Unreachable)
            || self.taint_op_pending(name, |o| matches!(o, TaintOp::Apply { .. }));
        if let Some(zone) = self.zones.get_mut(&e.zone) {
            zone.queue.remove(name);
        }
        if tainted && !self.taint_op_pending(name, |o| *o == TaintOp::Reachable) {
            self.push_taint_op(name, TaintOp::Reachable, now, out);
        }
    }

    fn push_taint_op(&mut self, name: &Name, op: TaintOp, now: Time, out: &mut Vec<Action>) {
        if let Some(e) = self.nodes.get_mut(name) {
            e.taint_ops.push(op);
        }
        self.pump_taints(name, now, out);
    }

    /// Writes the node's desired taints (NoSchedule reconciliation + pending ops) unless a
    /// write is already in flight.
    fn pump_taints(&mut self, name: &Name, now: Time, out: &mut Vec<Action>) {
        let Some(e) = self.nodes.get_mut(name) else {
            return;
        };
        let Some(node) = self.store.node(name) else {
            return;
        };
        if !e.registered || e.taint_write.is_some() || e.taint_retry_pending {
            return;
        }
        let rules = (
            &self.settings.condition_taints[..],
            &self.retired_condition_taints[..],
        );
        let desired = desired_taints(node, &e.taint_ops, rules, now);
        let ops = std::mem::take(&mut e.taint_ops);
        if desired == node.taints {
            self.taint_ops_done(name, &ops, true, now);
            return;
        }
        if e.taint_tries == 0 {
            let decision = taint_decision(name, &e.zone, node, &desired, &ops);
            self.decisions.extend(decision);
        }
        self.next_id += 1;
        let id = ActionId(self.next_id);
        let e = self.nodes.get_mut(name).expect("looked up above");
        e.taint_write = Some(TaintWrite {
            id,
            resource_version: node.resource_version.clone(),
            taints: desired.clone(),
            ops,
        });
        self.pending.insert(
            id,
            Pending::NodeTaints {
                node: name.clone(),
                uid: node.uid.clone(),
            },
        );
        out.push(Action::PatchNodeTaints {
            id,
            node: name.clone(),
            uid: node.uid.clone(),
            resource_version: node.resource_version.clone(),
            taints: desired,
        });
    }

    /// Reports the outcome of taint ops to the zone queues they came from.
    fn taint_ops_done(&mut self, name: &Name, ops: &[TaintOp], ok: bool, now: Time) {
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
                z.evictions_total += 1;
            } else {
                z.queue.retry_at(name, now);
            }
        }
    }

    fn pump_labels(&mut self, name: &Name, out: &mut Vec<Action>) {
        let Some(e) = self.nodes.get(name) else {
            return;
        };
        let Some(node) = self.store.node(name) else {
            return;
        };
        if !e.registered || e.label_write.is_some() {
            return;
        }
        let labels = labels_to_update(node);
        if labels.is_empty() {
            return;
        }
        self.next_id += 1;
        let id = ActionId(self.next_id);
        let e = self.nodes.get_mut(name).expect("looked up above");
        e.label_write = Some(id);
        self.pending.insert(
            id,
            Pending::NodeLabels {
                node: name.clone(),
                uid: node.uid.clone(),
                labels: labels.clone(),
            },
        );
        out.push(Action::PatchNodeLabels {
            id,
            node: name.clone(),
            uid: node.uid.clone(),
            labels,
        });
    }

    /// The zone queues' pass, every 100 ms while some queue has work.
    fn eviction_pass(&mut self, now: Time, out: &mut Vec<Action>) {
        if self.hold_eviction_pass(now) {
            return;
        }
        let keys: Vec<Name> = self.zones.keys().cloned().collect();
        for zone in keys {
            if self.taint_based && self.zones.get(&zone).is_some_and(|z| z.in_cooldown(now)) {
                continue;
            }
            while let Some(value) = self.zones.get_mut(&zone).and_then(|z| z.queue.pop_due(now)) {
                if self.taint_based {
                    self.taint_from_queue(&zone, &value.value, now, out);
                } else {
                    self.evict_from_queue(&zone, &value.value, now, out);
                }
            }
        }
    }

    /// Upstream judges every node in one monitor pass, then sets the zones' rates, before the
    /// next tainting decision. Here a verdict waits for its live Lease read and its status write,
    /// so when many nodes fall silent together (a zone losing power) their verdicts arrive one
    /// API round-trip after another, and the zone would still look healthy, at its normal rate,
    /// to a pass running between them. So the pass waits while verdicts are in flight, at most
    /// `EVICTION_PASS_MAX_HOLD`, and then counts the zone with all of them.
    fn hold_eviction_pass(&mut self, now: Time) -> bool {
        if !self.verdicts_in_flight() {
            self.eviction_pass_held_since = None;
            return false;
        }
        let since = *self.eviction_pass_held_since.get_or_insert(now);
        if now.since(since) < EVICTION_PASS_MAX_HOLD {
            return true;
        }
        self.eviction_pass_held_since = None;
        false
    }

    fn taint_from_queue(&mut self, zone: &Name, name: &Name, now: Time, out: &mut Vec<Action>) {
        let Some(node) = self.store.node(name) else {
            return; // gone: done
        };
        if missing_no_execute(&self.settings.condition_taints, node)
            .next()
            .is_some()
        {
            let op = TaintOp::ConditionTaints {
                zone: Some(zone.clone()),
            };
            self.push_taint_op(name, op, now, out);
        }
        let Some(node) = self.store.node(name) else {
            return;
        };
        let kind = match node.ready().map(|c| c.status) {
            None => {
                if let Some(z) = self.zones.get_mut(zone) {
                    z.queue.retry_at(name, now + TAINT_RETRY_DELAY);
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
        self.push_taint_op(name, op, now, out);
    }

    /// Arms the zone queues' pass: every 100 ms while a queue has work and a non-zero rate,
    /// sooner when a due head only waits for its zone's next token.
    pub(super) fn arm_eviction_pass(&mut self, now: Time) {
        let mut at: Option<Time> = None;
        for z in self.zones.values() {
            if z.queue.is_empty() || z.queue.rate().is_never() {
                continue;
            }
            let mut next = now + NODE_EVICTION_PERIOD;
            if self.taint_based
                && let Some(until) = z.cooldown_until.filter(|_| z.in_cooldown(now))
            {
                // Nothing is tainted here before the cooldown ends.
                next = until;
            } else if z.queue.head().is_some_and(|(_, due)| due <= now)
                && let Some(token) = z.queue.next_token(now)
            {
                next = next.min(token.max(now + Duration::from_millis(1)));
            }
            at = Some(at.map_or(next, |a| a.min(next)));
        }
        match at {
            Some(at) => {
                if self
                    .timers
                    .deadline(&Timer::EvictionPass)
                    .is_none_or(|current| current > at)
                {
                    self.timers.schedule(Timer::EvictionPass, at);
                }
            }
            None => {
                self.timers.cancel(&Timer::EvictionPass);
            }
        }
    }

    // ---- zones (SPEC §4) ---------------------------------------------------------------------

    pub(super) fn all_zones_fully_disrupted(&self) -> bool {
        let mut any = false;
        for z in self.zones.values() {
            if let Some(state) = z.state {
                any = true;
                if state != ZoneState::FullDisruption {
                    return false;
                }
            }
        }
        any
    }

    pub(super) fn set_limiter_in_zone(&mut self, key: &Name, now: Time) {
        let rates = self.settings.zone_rates(
            self.nodes
                .iter()
                .filter(|(_, e)| e.registered && e.zone == *key)
                .filter_map(|(n, _)| self.store.node(n)),
        );
        let Some(z) = self.zones.get_mut(key) else {
            return;
        };
        let Some(state) = z.state else {
            return;
        };
        if let Some(rate) = zone_rate_with(state, z.size, &self.settings, rates) {
            z.queue.swap_limiter(rate, now);
        }
    }

    /// Upstream `handleDisruption`.
    pub(super) fn handle_disruption(&mut self, now: Time, out: &mut Vec<Action>) {
        self.disruption_dirty = false;
        let threshold = self.settings.unhealthy_zone_threshold;
        let mut new_states: BTreeMap<Name, ZoneState> = BTreeMap::new();
        for (key, z) in self.zones.iter_mut() {
            if z.size == 0 {
                // No node counted any more: the zone's state is forgotten.
                z.state = None;
                continue;
            }
            new_states.insert(key.clone(), compute_zone_state(z.size, z.ready, threshold));
            if z.state.is_none() {
                z.state = Some(ZoneState::Initial);
            }
        }
        let all_are_full = new_states.values().all(|s| *s == ZoneState::FullDisruption);
        let all_were_full = self
            .zones
            .values()
            .filter_map(|z| z.state)
            .all(|s| s == ZoneState::FullDisruption);
        if all_are_full && all_were_full {
            return;
        }
        let registered = |nodes: &BTreeMap<Name, NodeEntry>| -> Vec<Name> {
            nodes
                .iter()
                .filter(|(_, e)| e.registered)
                .map(|(n, _)| n.clone())
                .collect()
        };
        if all_are_full {
            let names = registered(&self.nodes);
            // Entering "master disruption mode": every zone is down, most likely our own
            // view of the cluster is broken. Stop everything.
            for name in &names {
                if self.taint_based {
                    self.mark_node_as_reachable(name, now, out);
                } else {
                    self.cancel_pod_eviction(name);
                }
            }
            for z in self.zones.values_mut().filter(|z| z.state.is_some()) {
                z.queue.swap_limiter(Rate::NEVER, now);
                z.state = Some(ZoneState::FullDisruption);
            }
            self.decisions.push(Decision::AllZonesDown {
                entered: true,
                zones: new_states.len(),
            });
            return;
        }
        if all_were_full {
            self.decisions.push(Decision::AllZonesDown {
                entered: false,
                zones: new_states.len(),
            });
            let names = registered(&self.nodes);
            // Exiting: every node gets a fresh grace period (upstream behaviour).
            for name in &names {
                if let Some(e) = self.nodes.get_mut(name) {
                    e.health.probe_time = now;
                    e.health.ready_transition_time = now;
                }
                self.arm_grace(name, now);
            }
            for (key, state) in &new_states {
                let mut from = None;
                if let Some(z) = self.zones.get_mut(key) {
                    from = z.state.replace(*state);
                    z.start_cooldown(self.settings.disruption_cooldown, now);
                }
                self.set_limiter_in_zone(key, now);
                self.zone_state_decision(key, from);
            }
            return;
        }
        for (key, state) in &new_states {
            let Some(z) = self.zones.get_mut(key) else {
                continue;
            };
            if z.state == Some(*state) {
                continue;
            }
            if z.state == Some(ZoneState::FullDisruption) {
                z.start_cooldown(self.settings.disruption_cooldown, now);
            }
            let from = z.state.replace(*state);
            self.set_limiter_in_zone(key, now);
            self.zone_state_decision(key, from);
        }
    }

    fn zone_state_decision(&mut self, key: &Name, from: Option<ZoneState>) {
        let Some(z) = self.zones.get(key) else {
            return;
        };
        let Some(to) = z.state else {
            return;
        };
        if from == Some(to) {
            return;
        }
        self.decisions.push(Decision::ZoneState {
            zone: key.clone(),
            from,
            to,
            size: z.size,
            not_ready: z.unhealthy(),
            rate: z.queue.rate(),
        });
    }

    // ---- pods (SPEC §7) ----------------------------------------------------------------------

    /// Upstream `MarkPodsNotReady`: every pod on the node whose Ready is True (or only `only`).
    fn mark_pods_not_ready(&mut self, node: &Name, only: Option<&PodKey>, out: &mut Vec<Action>) {
        // Only a pass over the whole node settles its retry (upstream's per-pod path never
        // touches `nodesToRetry`).
        if only.is_none()
            && let Some(e) = self.nodes.get_mut(node)
        {
            e.needs_pod_retry = false;
        }
        // An autonomous edge node's pods keep serving; a pool may opt out as well.
        if self
            .store
            .node(node)
            .is_some_and(|n| !self.settings.marks_pods_not_ready(n))
        {
            return;
        }
        let pods = self.store.pods();
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
            self.next_id += 1;
            let id = ActionId(self.next_id);
            self.pods_marking.insert(key.clone());
            self.pending.insert(
                id,
                Pending::PodNotReady {
                    pod: key.clone(),
                    node: node.clone(),
                },
            );
            marked.push(key.clone());
            out.push(Action::MarkPodNotReady {
                id,
                pod: key,
                uid,
                node: node.clone(),
            });
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

    fn entry_for(&mut self, node: &Name, uid: &Name) -> Option<&mut NodeEntry> {
        self.nodes.get_mut(node).filter(|e| &e.uid == uid)
    }

    fn on_result(&mut self, id: ActionId, outcome: Outcome, now: Time, out: &mut Vec<Action>) {
        let Some(pending) = self.pending.remove(&id) else {
            return;
        };
        match pending {
            Pending::NodeStatus { node, uid } => {
                self.on_status_result(&node, &uid, id, outcome, now, out)
            }
            Pending::NodeTaints { node, uid } => {
                self.on_taints_result(&node, &uid, id, outcome, now, out)
            }
            Pending::NodeLabels { node, uid, labels } => {
                let Some(e) = self.entry_for(&node, &uid) else {
                    return;
                };
                if e.label_write != Some(id) {
                    return;
                }
                e.label_write = None;
                if outcome == Outcome::Ok {
                    // Known to be written, whether or not its answer or the watch came yet.
                    if let Some(n) = self.store.node_mut(&node) {
                        for (k, v) in labels {
                            match n.labels.iter_mut().find(|(key, _)| *key == k) {
                                Some(slot) => slot.1 = v,
                                None => n.labels.push((k, v)),
                            }
                        }
                    }
                } else if outcome == Outcome::Conflict {
                    self.pump_labels(&node, out);
                }
            }
            Pending::LeaseRead { .. } => {}
            Pending::PodNotReady { pod, node } => {
                self.pods_marking.remove(&pod);
                match outcome {
                    Outcome::NotFound => {}
                    Outcome::Ok => {
                        self.store
                            .pods_mut()
                            .set_ready(&pod, ConditionStatus::False);
                        if let Some(p) = self.store.pods().get(&pod) {
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
                        if let Some(p) = self.store.pods().get(&pod) {
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
                self.on_node_lost_result(&pod, &node, &uid, outcome, now, out)
            }
            Pending::DeletePod { pod, node, uid } => {
                self.on_delete_pod_result(&pod, &node, &uid, outcome, now)
            }
        }
    }

    fn on_status_result(
        &mut self,
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
        let Verdict::Writing { id: wid, .. } = &e.verdict else {
            return;
        };
        if *wid != id {
            return;
        }
        let Verdict::Writing {
            observed,
            resource_version,
            conditions,
            ..
        } = std::mem::replace(&mut e.verdict, Verdict::Idle)
        else {
            return;
        };
        match outcome {
            Outcome::Ok => {
                e.verdict_tries = 0;
                e.health.ready_transition_time = now;
                if let Some(ready) = conditions
                    .iter()
                    .find(|c| c.kind == crate::model::NodeConditionType::Ready)
                {
                    e.health.saved_ready = Some(ReadySnapshot::of(ready));
                }
                // The write succeeded: the node's conditions are what was written, whether or
                // not the watch has delivered the new version yet.
                if let Some(n) = self.store.node_mut(node)
                    && n.resource_version == resource_version
                {
                    n.conditions = conditions;
                }
                let current = Some(ConditionStatus::Unknown);
                self.after_health(node, observed, current, now, out);
                // Upstream queues the node for its NoExecute taint one pass later, when it
                // observes the Unknown it wrote; the write's success is that observation.
                if self.taint_based {
                    self.process_taint_based_eviction(node, ConditionStatus::Unknown, now, out);
                } else {
                    self.process_no_taint_based_eviction(node, ConditionStatus::Unknown, now, out);
                }
                // The conditions we wrote call for the unreachable NoSchedule taint; when the
                // write's answer (or the watch) already brought them, this finds nothing to do.
                self.pump_taints(node, now, out);
            }
            Outcome::Conflict => {
                e.verdict_tries += 1;
                if e.verdict_tries < CONFLICT_RETRIES {
                    // The shell fed the re-read node first: decide again on it.
                    self.evaluate(node, now, out);
                } else {
                    e.verdict_tries = 0;
                }
            }
            Outcome::Failed(_) => {
                // Upstream tries the health update again after 20 ms, 5 tries in all; then
                // the next pass.
                e.verdict_tries += 1;
                if e.verdict_tries < CONFLICT_RETRIES {
                    self.timers
                        .schedule(Timer::StatusRetry(node.clone()), now + STATUS_RETRY_DELAY);
                } else {
                    e.verdict_tries = 0;
                }
            }
            Outcome::NotFound => e.verdict_tries = 0,
        }
    }

    fn on_taints_result(
        &mut self,
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
        let Some(write) = e.taint_write.take_if(|w| w.id == id) else {
            return;
        };
        match outcome {
            Outcome::Ok => {
                e.taint_tries = 0;
                if let Some(n) = self.store.node_mut(node)
                    && n.resource_version == write.resource_version
                {
                    n.taints = write.taints;
                }
                self.taint_ops_done(node, &write.ops, true, now);
                self.pump_taints(node, now, out);
            }
            Outcome::Conflict => {
                e.taint_tries += 1;
                if e.taint_tries < CONFLICT_RETRIES {
                    let mut ops = write.ops;
                    ops.append(&mut e.taint_ops);
                    e.taint_ops = ops;
                    // Upstream's backoff: 100 ms plus up to 100 ms of jitter (here derived
                    // from the node's name and the try, so runs are reproducible).
                    e.taint_retry_pending = true;
                    let jitter = taint_jitter(node, e.taint_tries);
                    self.timers.schedule(
                        Timer::TaintRetry(node.clone()),
                        now + TAINT_CONFLICT_DELAY + jitter,
                    );
                } else {
                    e.taint_tries = 0;
                    self.taint_ops_done(node, &write.ops, false, now);
                }
            }
            Outcome::NotFound => {}
            Outcome::Failed(_) => {
                e.taint_tries = 0;
                // Ops queued behind the failed write (a recovered node's untaint) would wait
                // for the next node change, and a healthy node may not change for minutes:
                // try them after a monitor period (not at once: no busy loop on API errors).
                let queued = !e.taint_ops.is_empty();
                if queued {
                    e.taint_retry_pending = true;
                    self.timers
                        .schedule(Timer::TaintRetry(node.clone()), now + period);
                }
                self.taint_ops_done(node, &write.ops, false, now);
            }
        }
    }

    fn on_lease_read(
        &mut self,
        id: ActionId,
        outcome: LeaseReadOutcome,
        now: Time,
        out: &mut Vec<Action>,
    ) {
        let Some(Pending::LeaseRead { node, uid }) = self.pending.remove(&id) else {
            return;
        };
        let period = self.settings.node_monitor_period;
        let Some(e) = self.entry_for(&node, &uid) else {
            return;
        };
        if e.verdict != Verdict::ReadingLease(id) {
            return;
        }
        e.verdict = Verdict::Idle;
        match outcome {
            LeaseReadOutcome::Found(lease) => {
                let renew = lease.renew_time;
                if e.health.observe_lease(renew, now) {
                    // Fresher than what the watch told us: the verdict is cancelled.
                    self.store.upsert_lease(lease);
                    self.arm_grace(&node, now);
                    return;
                }
                e.lease_confirmed_for = Some(e.health.probe_time);
                e.lease_evidence = Some(LeaseEvidence::Stale {
                    read_at: now,
                    renew_time: renew,
                });
            }
            LeaseReadOutcome::NotFound => {
                e.lease_confirmed_for = Some(e.health.probe_time);
                e.lease_evidence = Some(LeaseEvidence::Missing { read_at: now });
            }
            LeaseReadOutcome::Failed(_) => {
                // The API server cannot be read: wait, decide nothing.
                self.timers
                    .schedule(Timer::LeaseReadRetry(node.clone()), now + period);
                return;
            }
        }
        self.evaluate(&node, now, out);
    }
}

/// 0–100 ms, from the node's name and the try (FNV-1a): spreads the retries of nodes that
/// conflicted together, as upstream's random jitter does, and keeps runs reproducible.
fn taint_jitter(node: &str, tries: u32) -> Duration {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in node.bytes().chain(tries.to_le_bytes()) {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    Duration::from_millis(h % 101)
}

/// Time elapsed, for the dump (`Duration::ZERO` when `then` is in the future).
pub(super) fn age(now: Time, then: Time) -> Duration {
    now.since(then)
}
