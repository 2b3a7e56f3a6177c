//! Fencing's answers: the attempt record and taint writes, and the fence command's end.

use std::time::Duration;

use crate::model::{ConditionStatus, Name};
use crate::time::Time;

use super::super::actions::{Action, ActionId};
use super::super::events::EventType;
use super::super::inputs::Outcome;
use super::super::settings::CONFLICT_RETRIES;
use super::super::world::{Facts, World};
use super::machine::{Fencing, Phase, event, rfc, second};
use super::{
    ATTEMPT_ANNOTATION, FenceOutcome, FenceStep, OUT_OF_SERVICE_KEY, OUT_OF_SERVICE_VALUE,
    STATE_ANNOTATION, TAINT_ADDED_ANNOTATION, is_out_of_service, out_of_service_taint,
};

impl Fencing {
    /// The answer to a `PatchNodeFencing`.
    pub(super) fn on_result(
        &mut self,
        world: &World,
        id: ActionId,
        outcome: Outcome,
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
                let steps = self.policy.steps;
                // `node_with` found it; never a panic on the way.
                let Some(e) = self.nodes.get_mut(&name) else {
                    return;
                };
                e.phase = Phase::Running {
                    id: run,
                    command: command.clone(),
                };
                if let Some(node) = world.store().node(&name) {
                    let step = match command.step {
                        FenceStep::Off(i) if steps > 1 => format!(", step {}/{steps}", i + 1),
                        _ => String::new(),
                    };
                    out.push(event(
                        node,
                        EventType::Warning,
                        "FencingNode",
                        format!(
                            "Node {name} has been Ready=Unknown since {}: running the fence command (try {}{step})",
                            rfc(e.outage),
                            e.failures + 1
                        ),
                    ));
                }
                out.push(Action::RunFenceCommand { id: run, command });
            }
            Phase::MarkingOn { command, .. } if ok => {
                let run = self.id();
                let Some(e) = self.nodes.get_mut(&name) else {
                    return;
                };
                e.phase = Phase::Running {
                    id: run,
                    command: command.clone(),
                };
                if let Some(node) = world.store().node(&name) {
                    out.push(event(
                        node,
                        EventType::Normal,
                        "PoweringOnNode",
                        format!(
                            "Node {name} is off and its pods are gone: running the power-on command"
                        ),
                    ));
                }
                out.push(Action::RunFenceCommand { id: run, command });
            }
            Phase::MarkingOn { .. } => {
                e.phase = Phase::WaitingPods;
                let at = if retry { now } else { now + self.recheck };
                self.timers.schedule(name.clone(), at);
            }
            Phase::MarkingOnDone { .. } => {
                // Written or not, the power-on succeeded: Ready is awaited from now.
                let until = now.saturating_add(self.policy.recover_timeout);
                e.phase = Phase::Recovering { until };
                self.timers.schedule(name.clone(), until);
            }
            Phase::Marking { .. } => {
                // A conflict brought the fresh node first: decide again on it, read and all.
                let at = if retry { now } else { now + self.recheck };
                self.timers.schedule(name.clone(), at);
            }
            Phase::Tainting { .. } if ok => {
                e.taint_added = true;
                e.phase = if self.policy.power_cycle {
                    // Next: the pods gone, then the power-on (`cycle.rs`).
                    self.timers.schedule(name.clone(), now);
                    Phase::WaitingPods
                } else {
                    Phase::Done
                };
                decide!(
                    self,
                    name,
                    "fencing: decision=taint node={name} outage_since={} taint={OUT_OF_SERVICE_KEY}={OUT_OF_SERVICE_VALUE}:NoExecute",
                    rfc(e.outage)
                );
                if let Some(node) = world.store().node(&name) {
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
                decide!(
                    self,
                    name,
                    "fencing: decision=release node={name} reason=\"Ready again: removed the out-of-service taint we added\""
                );
                if let Some(node) = world.store().node(&name) {
                    out.push(event(
                        node,
                        EventType::Normal,
                        "FencedNodeRecovered",
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

    #[allow(clippy::too_many_arguments)]
    pub(super) fn on_exited(
        &mut self,
        world: &World,
        facts: &dyn Facts,
        id: ActionId,
        outcome: FenceOutcome,
        took: Duration,
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
        let Phase::Running { command, .. } = std::mem::replace(&mut e.phase, Phase::Idle) else {
            return;
        };
        if command.step == FenceStep::On {
            self.on_power_on_exited(world, facts, &name, outcome, took, now, out);
            return;
        }
        let step = match command.step {
            FenceStep::Off(i) => i,
            FenceStep::On | FenceStep::Status => 0,
        };
        let failed = !matches!(outcome, FenceOutcome::Exited(0) | FenceOutcome::DryRun);
        if failed && step + 1 < self.policy.steps {
            self.escalate(world, facts, &name, step, &outcome, now, out);
            return;
        }
        let Some(e) = self.nodes.get_mut(&name) else {
            return;
        };
        e.start_step = 0;
        match outcome {
            FenceOutcome::Exited(0) => {
                decide!(
                    self,
                    name,
                    "fencing: node={name} fence command succeeded after {}ms",
                    took.as_millis()
                );
                e.failures = 0;
                e.phase = Phase::Fenced;
                self.taint(world, &name, now, out);
            }
            FenceOutcome::DryRun => e.phase = Phase::Done,
            failure => {
                e.failures += 1;
                let wait = self.policy.backoff(e.failures);
                e.not_before = now.saturating_add(wait);
                let message = format!(
                    "Fence command for node {name} failed: {failure} (try {}); next try in {} at the earliest",
                    e.failures,
                    crate::time::format_duration(wait)
                );
                decide!(
                    self,
                    name,
                    "fencing: decision=retry node={name} result={} tries={} backoff={}",
                    failure.result(),
                    e.failures,
                    crate::time::format_duration(wait)
                );
                self.timers.schedule(name.clone(), e.not_before);
                if let Some(node) = world.store().node(&name) {
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
            self.evaluate(world, facts, n, now, out);
        }
    }

    /// Step 3: the command succeeded; the taint goes on only if the node is still down.
    pub(super) fn taint(&mut self, world: &World, name: &Name, now: Time, out: &mut Vec<Action>) {
        let Some(node) = world.store().node(name) else {
            return;
        };
        let e = self.nodes.get_mut(name).expect("caller made it");
        let ready = node.ready();
        let still_down = ready.map(|c| c.status) == Some(ConditionStatus::Unknown)
            && ready.and_then(|c| c.last_transition_time).map(second) == e.outage;
        if !still_down || node.taints.iter().any(is_out_of_service) {
            e.phase = Phase::Done;
            if !still_down {
                decide!(
                    self,
                    name,
                    "fencing: decision=no-taint node={name} reason=\"the node came back while its fence command ran\""
                );
            }
            return;
        }
        let Some(outage) = e.outage else {
            return;
        };
        if let Some(why) = self.taint_held() {
            // Kept `Fenced`: the taint goes on at the recheck after the pause (its end also
            // judges every node at once: `Controllers`).
            self.block(name, why, now + self.recheck);
            return;
        }
        let mut taints = node.taints.clone();
        taints.push(out_of_service_taint(now));
        let id = self.id();
        let e = self.nodes.get_mut(name).expect("caller made it");
        e.blocked = None;
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
    pub(super) fn release(
        &mut self,
        world: &World,
        name: &Name,
        _now: Time,
        out: &mut Vec<Action>,
    ) {
        let Some(node) = world.store().node(name) else {
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
        let mut annotations = vec![(TAINT_ADDED_ANNOTATION, None), (ATTEMPT_ANNOTATION, None)];
        if self.policy.power_cycle {
            annotations.push((STATE_ANNOTATION, None));
        }
        out.push(Action::PatchNodeFencing {
            id,
            node: name.clone(),
            uid: node.uid.clone(),
            resource_version: node.resource_version.clone(),
            annotations,
            taints: Some(taints),
        });
    }
}
