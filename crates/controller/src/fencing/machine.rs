//! The fencing state machine: per node, where its current outage's fence stands. See the
//! module documentation of [`super`] for the rules.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::model::{ConditionStatus, Name, Node};
use crate::time::Time;
use crate::time::TimerHeap;

use super::super::actions::{Action, ActionId};
use super::super::decisions::Decision;
use super::super::events::{Event, EventObject, EventType, NODE_CONTROLLER};
use super::super::in_flight::ActionIds;
use super::super::inputs::{Input, Observed};
use super::super::settings::Settings;
use super::super::world::{Facts, World};
use super::super::zones::ZoneState;
use super::{FenceCommand, FenceTargetOutcome, FencingPolicy, is_out_of_service};

/// Fencing's action ids live apart from the node lifecycle's (which count up from 1), so the
/// shell's answers can be routed by id alone.
pub(crate) const FENCE_ID_BASE: u64 = crate::in_flight::FENCING_IDS;

#[derive(Clone, Debug, PartialEq)]
pub(super) enum Phase {
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
    /// A command runs: a power-off step (escalating to the next on failure) or the power-on.
    Running {
        id: ActionId,
        command: FenceCommand,
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
    /// `power-cycle` (`cycle.rs`): off and tainted; waiting until the node's pods are gone.
    WaitingPods,
    /// `power-cycle`: the live read before the power-on (the gates of the first step again).
    ReadingOn {
        id: ActionId,
    },
    /// `power-cycle`: the state record (`on=started`) is being written; the power-on runs once
    /// it is.
    MarkingOn {
        id: ActionId,
        command: FenceCommand,
    },
    /// `power-cycle`: the power-on succeeded; its record (`on=done`) is being written.
    MarkingOnDone {
        id: ActionId,
    },
    /// `power-cycle`: powered on; Ready is awaited until `until`.
    Recovering {
        until: Time,
    },
}

#[derive(Debug)]
pub(super) struct NodeFence {
    pub(super) uid: Name,
    /// Ready's `lastTransitionTime` while Ready is Unknown.
    pub(super) outage: Option<Time>,
    pub(super) phase: Phase,
    pub(super) failures: u32,
    pub(super) not_before: Time,
    /// This process made an attempt for this outage.
    pub(super) attempted: bool,
    /// An attempt record left by an earlier run was found and waited out.
    pub(super) inherited_waited: bool,
    /// Why the last check did not fence (logged when it changes, not every pass).
    pub(super) blocked: Option<String>,
    /// The out-of-service taint on the node is ours (this process wrote it).
    pub(super) taint_added: bool,
    /// A live read found the node's out-of-service taint is not ours.
    pub(super) taint_foreign: bool,
    pub(super) write_tries: u32,
    /// The power-off step the next attempt starts at (an earlier run's record, after a
    /// restart; else 0).
    pub(super) start_step: usize,
    /// `power-cycle`: the live read that looks for our earlier progress was made.
    pub(super) resume_checked: bool,
}

impl NodeFence {
    pub(super) fn new(uid: Name) -> NodeFence {
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
            start_step: 0,
            resume_checked: false,
        }
    }

    pub(super) fn busy(&self) -> bool {
        matches!(
            self.phase,
            Phase::Reading { .. }
                | Phase::ReadingOn { .. }
                | Phase::Marking { .. }
                | Phase::Running { .. }
                | Phase::Tainting { .. }
                | Phase::Releasing { .. }
                | Phase::MarkingOn { .. }
                | Phase::MarkingOnDone { .. }
        )
    }

    fn holds_slot(&self) -> bool {
        matches!(
            self.phase,
            Phase::Reading { release: false, .. }
                | Phase::ReadingOn { .. }
                | Phase::Marking { .. }
                | Phase::Running { .. }
                | Phase::MarkingOn { .. }
        )
    }

    fn phase_id(&self) -> Option<ActionId> {
        match &self.phase {
            Phase::Reading { id, .. }
            | Phase::ReadingOn { id }
            | Phase::Marking { id, .. }
            | Phase::Running { id, .. }
            | Phase::Tainting { id }
            | Phase::Releasing { id }
            | Phase::MarkingOn { id, .. }
            | Phase::MarkingOnDone { id } => Some(*id),
            _ => None,
        }
    }
}

pub struct Fencing {
    pub(super) policy: FencingPolicy,
    /// A Lease renewed within this is a live node (the Unknown verdict's rule).
    pub(super) grace: Duration,
    /// How soon a blocked or failed check is tried again.
    pub(super) recheck: Duration,
    /// KEP-5683's planned maintenance holds fences off (`Settings::lifecycle_conditions`).
    pub(super) lifecycle_conditions: bool,
    pub(super) ids: ActionIds,
    pub(super) nodes: BTreeMap<Name, NodeFence>,
    pub(super) timers: TimerHeap<Name>,
    /// Steps decided since the shell last took them (its decision log renders them).
    pub(super) decisions: Vec<Decision>,
    /// A fleet pause holding fencing, described (`holds.rs`).
    pub(super) paused: Option<String>,
    /// A fleet pause holding NoExecute taints (`tainting`, `all`), described: it holds the
    /// out-of-service taint too (`holds.rs`).
    pub(super) taint_paused: Option<String>,
    /// When this instance started acting (the initial sync of its leadership, or fencing
    /// turned on by a reload while acting): no fence before `after` has passed since, however
    /// old the outage (a new leader has not watched the node fail itself).
    pub(super) acting_since: Option<Time>,
}

/// An outage is named by Ready's `lastTransitionTime`, which the API keeps to the second; our
/// own status write's answer may carry milliseconds until the watch brings the stored value.
pub(super) fn second(t: Time) -> Time {
    Time::from_unix_millis(t.as_unix_millis() / 1000 * 1000)
}

pub(super) fn rfc(t: Option<Time>) -> String {
    t.map_or_else(|| "-".to_string(), Time::to_rfc3339)
}

pub(super) fn event(
    node: &Node,
    event_type: EventType,
    reason: &'static str,
    message: String,
) -> Action {
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
    pub(crate) fn new(policy: FencingPolicy, settings: &Settings) -> Fencing {
        Fencing {
            policy,
            grace: settings.node_monitor_grace_period,
            recheck: settings.node_monitor_period,
            lifecycle_conditions: settings.lifecycle_conditions,
            ids: ActionIds::starting_after(FENCE_ID_BASE),
            nodes: BTreeMap::new(),
            timers: TimerHeap::new(),
            decisions: Vec::new(),
            paused: None,
            taint_paused: None,
            acting_since: None,
        }
    }

    /// Config reload: the new policy applies to the next decision.
    pub(crate) fn apply(&mut self, policy: FencingPolicy, settings: &Settings) {
        self.policy = policy;
        self.grace = settings.node_monitor_grace_period;
        self.recheck = settings.node_monitor_period;
        self.lifecycle_conditions = settings.lifecycle_conditions;
    }

    pub fn policy(&self) -> &FencingPolicy {
        &self.policy
    }

    fn owns(id: ActionId) -> bool {
        id.0 > FENCE_ID_BASE
    }

    /// When this machine must be ticked next: the earliest per-node wake-up (an outage's
    /// `after` running out, a blocked or failed node's recheck, a backoff). Changed by node
    /// changes, its answers and ticks.
    pub(crate) fn next_deadline(&self) -> Option<Time> {
        self.timers.next_deadline()
    }

    /// Fence commands under way (reads and attempt records before them count).
    pub(crate) fn in_flight(&self) -> usize {
        self.nodes.values().filter(|e| e.holds_slot()).count()
    }

    pub(super) fn id(&mut self) -> ActionId {
        self.ids.allocate()
    }

    /// This instance starts acting (the initial sync of its leadership): `after` counts from
    /// now too. Called once per leadership, before the first [`Fencing::synced`].
    pub(crate) fn started_acting(&mut self, now: Time) {
        self.acting_since = Some(now);
    }

    /// The machine API, the shape of the other two (`TaintEviction::decide`): decides on what
    /// `World::apply` reported at `now` (a node changed or gone, a tick, the initial sync) or
    /// on one of its own answers (a live read, a command's exit, a write's result, which
    /// change nothing the other machines judge), reading the cluster from `world` and what the
    /// node lifecycle derives from it from `facts`; pushes its actions to `out`. Before this
    /// instance acts (its initial sync) it only forgets the nodes that go.
    pub(crate) fn decide(
        &mut self,
        world: &World,
        facts: &dyn Facts,
        observed: &Observed,
        now: Time,
        out: &mut Vec<Action>,
    ) {
        if let Observed::NodesGone(nodes) = observed {
            for node in nodes {
                self.node_gone(&node.name);
            }
        }
        if self.acting_since.is_none() {
            if matches!(observed, Observed::Input(Input::InitialSyncDone)) {
                self.started_acting(now);
                self.judge_all(world, facts, now, out);
            }
            return;
        }
        match observed {
            Observed::Node { name, .. } => self.node_changed(world, facts, name, now, out),
            Observed::Input(Input::Tick) => self.tick(world, facts, now, out),
            Observed::Input(Input::FenceTargetRead { id, outcome }) => {
                self.on_target_read(world, facts, *id, outcome.clone(), now, out);
            }
            Observed::Input(Input::FenceExited { id, outcome, took }) => {
                self.on_exited(world, facts, *id, outcome.clone(), *took, now, out);
            }
            Observed::Input(Input::Result { id, outcome }) if Fencing::owns(*id) => {
                self.on_result(world, *id, outcome.clone(), now, out);
            }
            _ => {}
        }
    }

    /// Fencing's own answers, which go to it alone (`Controllers::handle`).
    pub(crate) fn answers(input: &Input) -> bool {
        match input {
            Input::FenceTargetRead { .. } | Input::FenceExited { .. } => true,
            Input::Result { id, .. } => Fencing::owns(*id),
            _ => false,
        }
    }

    /// Every node judged again (the initial sync, a pause's end, a reload).
    pub(crate) fn judge_all(
        &mut self,
        world: &World,
        facts: &dyn Facts,
        now: Time,
        out: &mut Vec<Action>,
    ) {
        let names: Vec<Name> = world.store().nodes().map(|n| n.name.clone()).collect();
        for name in &names {
            self.node_changed(world, facts, name, now, out);
        }
    }

    fn tick(&mut self, world: &World, facts: &dyn Facts, now: Time, out: &mut Vec<Action>) {
        while let Some((name, _)) = self.timers.pop_due(now) {
            self.evaluate(world, facts, &name, now, out);
        }
    }

    /// The steps decided since the last call, oldest first.
    pub(crate) fn take_decisions(&mut self) -> Vec<Decision> {
        std::mem::take(&mut self.decisions)
    }

    pub(super) fn node_gone(&mut self, name: &Name) {
        self.timers.cancel(name);
        if let Some(e) = self.nodes.remove(name)
            && matches!(e.phase, Phase::Running { .. })
        {
            decide!(
                self,
                name,
                "fencing: node={name} deleted while its fence command runs; its result will be ignored"
            );
        }
    }

    fn node_changed(
        &mut self,
        world: &World,
        facts: &dyn Facts,
        name: &Name,
        now: Time,
        out: &mut Vec<Action>,
    ) {
        let Some(node) = world.store().node(name) else {
            self.node_gone(name);
            return;
        };
        // The common case, every heartbeat of every healthy node: nothing to do, no entry.
        let unknown = node.ready().map(|c| c.status) == Some(ConditionStatus::Unknown);
        if !unknown && !self.nodes.contains_key(name) && !node.taints.iter().any(is_out_of_service)
        {
            return;
        }
        self.evaluate(world, facts, name, now, out);
    }

    pub(super) fn block(&mut self, name: &Name, why: String, retry_at: Time) {
        self.timers.schedule(name.clone(), retry_at);
        let Some(e) = self.nodes.get_mut(name) else {
            return;
        };
        if e.blocked.as_deref() != Some(why.as_str()) {
            decide!(
                self,
                name,
                "fencing: decision=wait node={name} outage_since={} reason=\"{why}\"",
                rfc(e.outage)
            );
            e.blocked = Some(why);
        }
    }

    /// Why no node may be fenced in this node's zone now, if so. The zone is seen whole: its
    /// nodes about to be judged count as not ready (`node_lifecycle/suspects.rs`).
    pub(super) fn gate(
        &self,
        world: &World,
        facts: &dyn Facts,
        name: &str,
        now: Time,
    ) -> Option<String> {
        if let Some((scope, b)) = facts.brake_covering(world.store(), name) {
            return Some(format!(
                "the brake is engaged ({scope}: {} of {} nodes unhealthy, max_unhealthy = {})",
                b.unhealthy, b.total, b.limit
            ));
        }
        if facts.all_zones_down_with_suspects(world.store(), now) {
            return Some("every zone is fully disrupted: the control plane may be cut off".into());
        }
        match facts.zone_state_with_suspects(world.store(), name, now) {
            Some(ZoneState::Normal) => None,
            Some(state) => Some(format!("zone state is {state:?}")),
            None => Some("zone state not known yet".into()),
        }
    }

    pub(super) fn node_with(&self, id: ActionId) -> Option<Name> {
        self.nodes
            .iter()
            .find(|(_, e)| e.phase_id() == Some(id))
            .map(|(n, _)| n.clone())
    }

    fn on_target_read(
        &mut self,
        world: &World,
        facts: &dyn Facts,
        id: ActionId,
        outcome: FenceTargetOutcome,
        now: Time,
        out: &mut Vec<Action>,
    ) {
        let Some(name) = self.node_with(id) else {
            return;
        };
        // `node_with` found it; never a panic on the way.
        let Some(e) = self.nodes.get_mut(&name) else {
            return;
        };
        let release = match e.phase {
            Phase::Reading { release, .. } => release,
            Phase::ReadingOn { .. } => {
                // Waiting again until the read says the power-on may run (`cycle.rs`).
                e.phase = Phase::WaitingPods;
                self.confirm_power_on(world, facts, &name, outcome, now, out);
                return;
            }
            _ => return,
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
                self.release(world, &name, now, out);
            } else {
                e.taint_foreign = true;
                decide!(
                    self,
                    name,
                    "fencing: decision=keep node={name} reason=\"the out-of-service taint was not added by node-lifecycled\""
                );
            }
            return;
        }
        self.confirm(world, facts, &name, *target, now, out);
    }
}
