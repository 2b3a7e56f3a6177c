//! The fencing state machine: per node, where its current outage's fence stands. See the
//! module documentation of [`super`] for the rules.

use std::collections::BTreeMap;
use std::time::Duration;

use log::info;

use crate::model::{ConditionStatus, Name, Node};
use crate::runtime::TimerHeap;
use crate::time::Time;

use super::super::actions::{Action, ActionId};
use super::super::events::{Event, EventObject, EventType, NODE_CONTROLLER};
use super::super::inputs::{LeaseReadOutcome, Outcome};
use super::super::node_lifecycle::NodeLifecycle;
use super::super::settings::{CONFLICT_RETRIES, Settings};
use super::super::zones::ZoneState;
use super::{
    ATTEMPT_ANNOTATION, FenceCommand, FenceOutcome, FenceTarget, FenceTargetOutcome, FencingPolicy,
    OUT_OF_SERVICE_KEY, OUT_OF_SERVICE_VALUE, TAINT_ADDED_ANNOTATION, attempt_outage,
    attempt_record, is_out_of_service, out_of_service_taint,
};

/// Fencing's action ids live apart from the node lifecycle's (which count up from 1), so the
/// shell's answers can be routed by id alone.
pub const FENCE_ID_BASE: u64 = 1 << 62;

#[derive(Clone, Debug, PartialEq)]
enum Phase {
    Idle,
    /// The live read before a fence (`release: false`) or before removing a taint we may
    /// have added before a restart (`release: true`).
    Reading {
        id: ActionId,
        release: bool,
    },
    /// The attempt record is being written; the command runs once it is.
    Marking {
        id: ActionId,
        command: FenceCommand,
    },
    Running {
        id: ActionId,
    },
    /// The command succeeded; the taint is not written yet (or its write failed).
    Fenced,
    Tainting {
        id: ActionId,
    },
    Releasing {
        id: ActionId,
    },
    /// Nothing more for this outage: fenced and tainted, not selected, dry-run, or the node
    /// came back while its command ran.
    Done,
}

#[derive(Debug)]
struct NodeFence {
    uid: Name,
    /// Ready's `lastTransitionTime` while Ready is Unknown.
    outage: Option<Time>,
    phase: Phase,
    failures: u32,
    not_before: Time,
    /// This process made an attempt for this outage.
    attempted: bool,
    /// An attempt record left by an earlier run was found and waited out.
    inherited_waited: bool,
    /// Why the last check did not fence (logged when it changes, not every pass).
    blocked: Option<String>,
    /// The out-of-service taint on the node is ours (this process wrote it).
    taint_added: bool,
    /// A live read found the node's out-of-service taint is not ours.
    taint_foreign: bool,
    write_tries: u32,
}

impl NodeFence {
    fn new(uid: Name) -> NodeFence {
        NodeFence {
            uid,
            outage: None,
            phase: Phase::Idle,
            failures: 0,
            not_before: Time::ZERO,
            attempted: false,
            inherited_waited: false,
            blocked: None,
            taint_added: false,
            taint_foreign: false,
            write_tries: 0,
        }
    }

    fn busy(&self) -> bool {
        matches!(
            self.phase,
            Phase::Reading { .. }
                | Phase::Marking { .. }
                | Phase::Running { .. }
                | Phase::Tainting { .. }
                | Phase::Releasing { .. }
        )
    }

    fn holds_slot(&self) -> bool {
        matches!(
            self.phase,
            Phase::Reading { release: false, .. } | Phase::Marking { .. } | Phase::Running { .. }
        )
    }

    fn phase_id(&self) -> Option<ActionId> {
        match &self.phase {
            Phase::Reading { id, .. }
            | Phase::Marking { id, .. }
            | Phase::Running { id }
            | Phase::Tainting { id }
            | Phase::Releasing { id } => Some(*id),
            _ => None,
        }
    }
}

pub struct Fencing {
    policy: FencingPolicy,
    /// A Lease renewed within this is a live node (the Unknown verdict's rule).
    grace: Duration,
    /// How soon a blocked or failed check is tried again.
    recheck: Duration,
    next_id: u64,
    nodes: BTreeMap<Name, NodeFence>,
    timers: TimerHeap<Name>,
}

/// An outage is named by Ready's `lastTransitionTime`, which the API keeps to the second; our
/// own status write's answer may carry milliseconds until the watch brings the stored value.
fn second(t: Time) -> Time {
    Time::from_unix_millis(t.as_unix_millis() / 1000 * 1000)
}

fn rfc(t: Option<Time>) -> String {
    t.map_or_else(|| "-".to_string(), Time::to_rfc3339)
}

fn event(node: &Node, event_type: EventType, reason: &'static str, message: String) -> Action {
    Action::RecordEvent(Event {
        object: EventObject::Node {
            name: node.name.clone(),
            uid: node.uid.clone(),
        },
        event_type,
        reason,
        message,
        component: NODE_CONTROLLER,
    })
}

impl Fencing {
    pub fn new(policy: FencingPolicy, settings: &Settings) -> Fencing {
        Fencing {
            policy,
            grace: settings.node_monitor_grace_period,
            recheck: settings.node_monitor_period,
            next_id: FENCE_ID_BASE,
            nodes: BTreeMap::new(),
            timers: TimerHeap::new(),
        }
    }

    /// Config reload: the new policy applies to the next decision.
    pub fn apply(&mut self, policy: FencingPolicy, settings: &Settings) {
        self.policy = policy;
        self.grace = settings.node_monitor_grace_period;
        self.recheck = settings.node_monitor_period;
    }

    pub fn policy(&self) -> &FencingPolicy {
        &self.policy
    }

    pub fn owns(id: ActionId) -> bool {
        id.0 > FENCE_ID_BASE
    }

    pub fn next_deadline(&self) -> Option<Time> {
        self.timers.next_deadline()
    }

    /// Fence commands under way (reads and attempt records before them count).
    pub fn in_flight(&self) -> usize {
        self.nodes.values().filter(|e| e.holds_slot()).count()
    }

    fn id(&mut self) -> ActionId {
        self.next_id += 1;
        ActionId(self.next_id)
    }

    /// The initial sync (of a new leadership): every node is judged.
    pub fn synced(&mut self, lc: &NodeLifecycle, now: Time, out: &mut Vec<Action>) {
        let names: Vec<Name> = lc.store().nodes().map(|n| n.name.clone()).collect();
        for name in &names {
            self.node_changed(lc, name, now, out);
        }
    }

    pub fn tick(&mut self, lc: &NodeLifecycle, now: Time, out: &mut Vec<Action>) {
        while let Some((name, _)) = self.timers.pop_due(now) {
            self.evaluate(lc, &name, now, out);
        }
    }

    pub fn node_gone(&mut self, name: &Name) {
        self.timers.cancel(name);
        if let Some(e) = self.nodes.remove(name)
            && matches!(e.phase, Phase::Running { .. })
        {
            info!(
                "fencing: node={name} deleted while its fence command runs; its result will be ignored"
            );
        }
    }

    pub fn node_changed(
        &mut self,
        lc: &NodeLifecycle,
        name: &Name,
        now: Time,
        out: &mut Vec<Action>,
    ) {
        let Some(node) = lc.store().node(name) else {
            self.node_gone(name);
            return;
        };
        // The common case, every heartbeat of every healthy node: nothing to do, no entry.
        let unknown = node.ready().map(|c| c.status) == Some(ConditionStatus::Unknown);
        if !unknown && !self.nodes.contains_key(name) && !node.taints.iter().any(is_out_of_service)
        {
            return;
        }
        self.evaluate(lc, name, now, out);
    }

    fn block(&mut self, name: &Name, why: String, retry_at: Time) {
        self.timers.schedule(name.clone(), retry_at);
        let Some(e) = self.nodes.get_mut(name) else {
            return;
        };
        if e.blocked.as_deref() != Some(why.as_str()) {
            info!(
                "fencing: decision=wait node={name} outage_since={} reason=\"{why}\"",
                rfc(e.outage)
            );
            e.blocked = Some(why);
        }
    }

    /// Why no node may be fenced in this node's zone now, if so.
    fn gate(&self, lc: &NodeLifecycle, name: &str) -> Option<String> {
        if lc.all_zones_down() {
            return Some("every zone is fully disrupted: the control plane may be cut off".into());
        }
        match lc.zone_state_of(name) {
            Some(ZoneState::Normal) => None,
            Some(state) => Some(format!("zone state is {state:?}")),
            None => Some("zone state not known yet".into()),
        }
    }

    fn evaluate(&mut self, lc: &NodeLifecycle, name: &Name, now: Time, out: &mut Vec<Action>) {
        let Some(node) = lc.store().node(name) else {
            self.node_gone(name);
            return;
        };
        let e = self
            .nodes
            .entry(name.clone())
            .or_insert_with(|| NodeFence::new(node.uid.clone()));
        if e.uid != node.uid {
            // Re-created under the same name: a new machine.
            *e = NodeFence::new(node.uid.clone());
        }
        let ready = node.ready();
        let status = ready.map(|c| c.status);
        let has_taint = node.taints.iter().any(is_out_of_service);
        if !has_taint {
            e.taint_added = false;
            e.taint_foreign = false;
        }
        if status != Some(ConditionStatus::Unknown) {
            // Alive (or unreadable): no outage. A command already running finishes; its
            // success will find the node back and add no taint.
            e.outage = None;
            e.blocked = None;
            if matches!(
                e.phase,
                Phase::Reading { release: false, .. }
                    | Phase::Marking { .. }
                    | Phase::Fenced
                    | Phase::Done
            ) {
                e.phase = Phase::Idle;
            }
            if status == Some(ConditionStatus::True)
                && has_taint
                && self.policy.remove_out_of_service_on_recovery
                && e.phase == Phase::Idle
            {
                if e.taint_added {
                    self.release(lc, name, now, out);
                } else if !e.taint_foreign {
                    let id = self.id();
                    let e = self.nodes.get_mut(name).expect("entry made above");
                    e.phase = Phase::Reading { id, release: true };
                    out.push(Action::ReadFenceTarget {
                        id,
                        node: name.clone(),
                    });
                }
            }
            if e_is_forgettable(self.nodes.get(name)) {
                self.nodes.remove(name);
                self.timers.cancel(name);
            }
            return;
        }
        let outage = ready
            .and_then(|c| c.last_transition_time)
            .map(second)
            .or(e.outage)
            .unwrap_or(now);
        if e.outage != Some(outage) {
            // A new outage: its own attempts, failures and waits.
            e.outage = Some(outage);
            e.failures = 0;
            e.not_before = Time::ZERO;
            e.attempted = false;
            e.inherited_waited = false;
            e.blocked = None;
            if !matches!(
                e.phase,
                Phase::Running { .. } | Phase::Tainting { .. } | Phase::Releasing { .. }
            ) {
                e.phase = Phase::Idle;
            }
        }
        match e.phase {
            Phase::Fenced => {
                self.taint(lc, name, now, out);
                return;
            }
            Phase::Idle => {}
            _ => return,
        }
        if has_taint {
            // Declared off already (by us before a restart, or by a person): nothing to add.
            e.phase = Phase::Done;
            return;
        }
        // The stored transition is truncated to the second: the node may have gone Unknown up
        // to a second later, and it must be Unknown for at least `after`.
        let due = outage
            .saturating_add(self.policy.after + Duration::from_secs(1))
            .max(e.not_before);
        if now < due {
            self.timers.schedule(name.clone(), due);
            return;
        }
        if let Some(why) = self.gate(lc, name) {
            self.block(name, why, now + self.recheck);
            return;
        }
        if self.in_flight() >= self.policy.max_concurrent {
            let why = format!(
                "max_concurrent={} fences under way",
                self.policy.max_concurrent
            );
            self.block(name, why, now + self.recheck);
            return;
        }
        let id = self.id();
        let e = self.nodes.get_mut(name).expect("entry made above");
        e.phase = Phase::Reading { id, release: false };
        out.push(Action::ReadFenceTarget {
            id,
            node: name.clone(),
        });
    }

    fn node_with(&self, id: ActionId) -> Option<Name> {
        self.nodes
            .iter()
            .find(|(_, e)| e.phase_id() == Some(id))
            .map(|(n, _)| n.clone())
    }

    pub fn on_target_read(
        &mut self,
        lc: &NodeLifecycle,
        id: ActionId,
        outcome: FenceTargetOutcome,
        now: Time,
        out: &mut Vec<Action>,
    ) {
        let Some(name) = self.node_with(id) else {
            return;
        };
        let e = self.nodes.get_mut(&name).expect("found above");
        let Phase::Reading { release, .. } = e.phase else {
            return;
        };
        e.phase = Phase::Idle;
        let target = match outcome {
            FenceTargetOutcome::Found(t) => t,
            FenceTargetOutcome::NotFound => {
                self.node_gone(&name);
                return;
            }
            FenceTargetOutcome::Failed(why) => {
                let why = format!("live read of the node and its Lease failed: {why}");
                self.block(&name, why, now + self.recheck);
                return;
            }
        };
        if target.uid != e.uid {
            self.timers.schedule(name.clone(), now + self.recheck);
            return;
        }
        if release {
            if target.out_of_service && target.taint_added.is_some() {
                e.taint_added = true;
                self.release(lc, &name, now, out);
            } else {
                e.taint_foreign = true;
                info!(
                    "fencing: decision=keep node={name} reason=\"the out-of-service taint was not added by node-lifecycled\""
                );
            }
            return;
        }
        self.confirm(lc, &name, *target, now, out);
    }

    /// Step 2: the live read must confirm everything before the attempt is recorded.
    fn confirm(
        &mut self,
        lc: &NodeLifecycle,
        name: &Name,
        t: FenceTarget,
        now: Time,
        out: &mut Vec<Action>,
    ) {
        let e = self.nodes.get_mut(name).expect("caller found it");
        let outage = e.outage;
        if t.ready != Some(ConditionStatus::Unknown) || t.ready_since.map(second) != outage {
            let why = format!(
                "live read shows Ready={:?} since {}",
                t.ready,
                rfc(t.ready_since)
            );
            self.block(name, why, now + self.recheck);
            return;
        }
        let renew = match &t.lease {
            LeaseReadOutcome::Found(lease) => lease.renew_time,
            LeaseReadOutcome::NotFound => None,
            LeaseReadOutcome::Failed(why) => {
                let why = format!("live Lease read failed: {why}");
                self.block(name, why, now + self.recheck);
                return;
            }
        };
        if let Some(r) = renew
            && now.since(r) < self.grace
        {
            let why = format!("Lease renewed at {}: the node is alive", r.to_rfc3339());
            self.block(name, why, now + self.recheck);
            return;
        }
        if !self.policy.selects(&t.labels) {
            info!(
                "fencing: decision=skip node={name} outage_since={} reason=\"labels do not match fencing.match_labels\"",
                rfc(outage)
            );
            e.phase = Phase::Done;
            return;
        }
        if t.out_of_service {
            e.phase = Phase::Done;
            return;
        }
        let inherited = t.attempt.as_deref().and_then(attempt_outage);
        if inherited.is_some() && inherited == outage && !e.attempted && !e.inherited_waited {
            e.inherited_waited = true;
            e.not_before = now.saturating_add(self.policy.after);
            info!(
                "fencing: decision=wait node={name} outage_since={} record=\"{}\" reason=\"an earlier run started a fence for this outage: one more full `after` ({}) for a fresh verdict\"",
                rfc(outage),
                t.attempt.as_deref().unwrap_or(""),
                crate::config::format_duration(self.policy.after)
            );
            self.timers.schedule(name.clone(), e.not_before);
            return;
        }
        if let Some(why) = self.gate(lc, name) {
            self.block(name, why, now + self.recheck);
            return;
        }
        let Some(node) = lc.store().node(name) else {
            return;
        };
        let Some(outage) = outage else {
            return;
        };
        let id = self.id();
        let e = self.nodes.get_mut(name).expect("caller found it");
        e.blocked = None;
        info!(
            "fencing: decision=fence node={name} uid={} outage_since={} lease_renew={} zone=Normal attempt={} evidence=\"Ready Unknown for {}s, Lease stale, read live\"",
            node.uid,
            outage.to_rfc3339(),
            rfc(renew),
            e.failures + 1,
            now.since(outage).as_secs()
        );
        e.phase = Phase::Marking {
            id,
            command: FenceCommand {
                node: name.clone(),
                uid: node.uid.clone(),
                addresses: t.addresses,
                labels: t.labels,
            },
        };
        out.push(Action::PatchNodeFencing {
            id,
            node: name.clone(),
            uid: node.uid.clone(),
            resource_version: node.resource_version.clone(),
            annotations: vec![(ATTEMPT_ANNOTATION, Some(attempt_record(outage, now)))],
            taints: None,
        });
    }

    /// The answer to a `PatchNodeFencing`.
    pub fn on_result(
        &mut self,
        lc: &NodeLifecycle,
        id: ActionId,
        outcome: Outcome,
        now: Time,
        out: &mut Vec<Action>,
    ) {
        let Some(name) = self.node_with(id) else {
            return;
        };
        let e = self.nodes.get_mut(&name).expect("found above");
        let phase = std::mem::replace(&mut e.phase, Phase::Idle);
        if outcome == Outcome::NotFound {
            self.node_gone(&name);
            return;
        }
        let ok = outcome == Outcome::Ok;
        let retry = outcome == Outcome::Conflict && e.write_tries + 1 < CONFLICT_RETRIES;
        e.write_tries = if ok || !retry { 0 } else { e.write_tries + 1 };
        match phase {
            Phase::Marking { command, .. } if ok => {
                e.attempted = true;
                let run = self.id();
                let e = self.nodes.get_mut(&name).expect("found above");
                e.phase = Phase::Running { id: run };
                if let Some(node) = lc.store().node(&name) {
                    out.push(event(
                        node,
                        EventType::Warning,
                        "FencingNode",
                        format!(
                            "Node {name} has been Ready=Unknown since {}: running the fence command (try {})",
                            rfc(e.outage),
                            e.failures + 1
                        ),
                    ));
                }
                out.push(Action::RunFenceCommand { id: run, command });
            }
            Phase::Marking { .. } => {
                // A conflict brought the fresh node first: decide again on it, read and all.
                let at = if retry { now } else { now + self.recheck };
                self.timers.schedule(name.clone(), at);
            }
            Phase::Tainting { .. } if ok => {
                e.taint_added = true;
                e.phase = Phase::Done;
                info!(
                    "fencing: decision=taint node={name} outage_since={} taint={OUT_OF_SERVICE_KEY}={OUT_OF_SERVICE_VALUE}:NoExecute",
                    rfc(e.outage)
                );
                if let Some(node) = lc.store().node(&name) {
                    out.push(event(
                        node,
                        EventType::Warning,
                        "NodeFenced",
                        format!(
                            "Node {name} was fenced (powered off): added taint {OUT_OF_SERVICE_KEY}={OUT_OF_SERVICE_VALUE}:NoExecute"
                        ),
                    ));
                }
            }
            Phase::Tainting { .. } => {
                e.phase = Phase::Fenced;
                let at = if retry { now } else { now + self.recheck };
                self.timers.schedule(name.clone(), at);
            }
            Phase::Releasing { .. } if ok => {
                e.taint_added = false;
                info!(
                    "fencing: decision=release node={name} reason=\"Ready again: removed the out-of-service taint we added\""
                );
                if let Some(node) = lc.store().node(&name) {
                    out.push(event(
                        node,
                        EventType::Normal,
                        "NodeFenced",
                        format!("Node {name} is Ready again: removed taint {OUT_OF_SERVICE_KEY} added when it was fenced"),
                    ));
                }
            }
            Phase::Releasing { .. } => {
                let at = if retry { now } else { now + self.recheck };
                self.timers.schedule(name.clone(), at);
            }
            other => e.phase = other,
        }
    }

    pub fn on_exited(
        &mut self,
        lc: &NodeLifecycle,
        id: ActionId,
        outcome: FenceOutcome,
        took: Duration,
        now: Time,
        out: &mut Vec<Action>,
    ) {
        let Some(name) = self.node_with(id) else {
            return;
        };
        let e = self.nodes.get_mut(&name).expect("found above");
        e.phase = Phase::Idle;
        match outcome {
            FenceOutcome::Exited(0) => {
                info!(
                    "fencing: node={name} fence command succeeded after {}ms",
                    took.as_millis()
                );
                e.failures = 0;
                e.phase = Phase::Fenced;
                self.taint(lc, &name, now, out);
            }
            FenceOutcome::DryRun => e.phase = Phase::Done,
            failure => {
                e.failures += 1;
                let wait = self.policy.backoff(e.failures);
                e.not_before = now.saturating_add(wait);
                let message = format!(
                    "Fence command for node {name} failed: {failure} (try {}); next try in {} at the earliest",
                    e.failures,
                    crate::config::format_duration(wait)
                );
                info!(
                    "fencing: decision=retry node={name} result={} tries={} backoff={}",
                    failure.result(),
                    e.failures,
                    crate::config::format_duration(wait)
                );
                self.timers.schedule(name.clone(), e.not_before);
                if let Some(node) = lc.store().node(&name) {
                    out.push(event(node, EventType::Warning, "FencingFailed", message));
                }
            }
        }
        // A slot is free: candidates that waited for it go now.
        let waiting: Vec<Name> = self
            .nodes
            .iter()
            .filter(|(n, e)| **n != name && e.phase == Phase::Idle && e.outage.is_some())
            .map(|(n, _)| n.clone())
            .collect();
        for n in &waiting {
            self.evaluate(lc, n, now, out);
        }
    }

    /// Step 3: the command succeeded; the taint goes on only if the node is still down.
    fn taint(&mut self, lc: &NodeLifecycle, name: &Name, now: Time, out: &mut Vec<Action>) {
        let Some(node) = lc.store().node(name) else {
            return;
        };
        let e = self.nodes.get_mut(name).expect("caller made it");
        let ready = node.ready();
        let still_down = ready.map(|c| c.status) == Some(ConditionStatus::Unknown)
            && ready.and_then(|c| c.last_transition_time).map(second) == e.outage;
        if !still_down || node.taints.iter().any(is_out_of_service) {
            e.phase = Phase::Done;
            if !still_down {
                info!(
                    "fencing: decision=no-taint node={name} reason=\"the node came back while its fence command ran\""
                );
            }
            return;
        }
        let Some(outage) = e.outage else {
            return;
        };
        let mut taints = node.taints.clone();
        taints.push(out_of_service_taint(now));
        let id = self.id();
        let e = self.nodes.get_mut(name).expect("caller made it");
        e.phase = Phase::Tainting { id };
        out.push(Action::PatchNodeFencing {
            id,
            node: name.clone(),
            uid: node.uid.clone(),
            resource_version: node.resource_version.clone(),
            annotations: vec![(TAINT_ADDED_ANNOTATION, Some(outage.to_rfc3339()))],
            taints: Some(taints),
        });
    }

    /// Step 4: the node is Ready again; remove the taint we added, and our record of it.
    fn release(&mut self, lc: &NodeLifecycle, name: &Name, _now: Time, out: &mut Vec<Action>) {
        let Some(node) = lc.store().node(name) else {
            return;
        };
        let taints: Vec<_> = node
            .taints
            .iter()
            .filter(|t| !is_out_of_service(t))
            .cloned()
            .collect();
        let id = self.id();
        let Some(e) = self.nodes.get_mut(name) else {
            return;
        };
        e.phase = Phase::Releasing { id };
        out.push(Action::PatchNodeFencing {
            id,
            node: name.clone(),
            uid: node.uid.clone(),
            resource_version: node.resource_version.clone(),
            annotations: vec![(TAINT_ADDED_ANNOTATION, None), (ATTEMPT_ANNOTATION, None)],
            taints: Some(taints),
        });
    }
}

/// A node with no outage, nothing in flight and nothing of ours on it needs no entry.
fn e_is_forgettable(e: Option<&NodeFence>) -> bool {
    e.is_some_and(|e| {
        e.outage.is_none()
            && !e.busy()
            && !e.taint_added
            && !e.taint_foreign
            && e.phase == Phase::Idle
    })
}
