//! Escalation and `power-cycle`.
//!
//! Escalation: a power-off step that fails (exit status, signal, its own timeout, a program
//! that cannot start) is followed by the next one without a backoff, but only through the
//! checks of the first (`holds.rs` and `confirm.rs`: fleet pause, maintenance, cordon, zone
//! gate, brake, a live read of the node and its Lease), and recorded on the node first
//! (`fence-attempt … step=N`); a check that fails holds the next step and tries again every
//! `node_monitor_period`. Only when the last step fails does the attempt count as failed
//! (backoff, then from step 1 again). A restart picks up at the recorded step, through the
//! same checks.
//!
//! `power-cycle`: off (the steps) → out-of-service taint → every pod of the node gone (but
//! those that tolerate the out-of-service taint forever, as DaemonSets' kube-proxy and CNI
//! pods do: nothing ever evicts them) → the checks of the first step again (a live read) →
//! power-on (`on_command`; [`STATE_ANNOTATION`] `on=started` written before it runs,
//! `on=done` after it succeeds) → Ready within `recover_timeout` → the taint is removed (the
//! recovery path of `machine.rs`). A node that comes back in the middle is released at once.
//! A restart or a new leader reads the node live: our taint for this outage (the off
//! succeeded: never powered off again) with the state record says where to go on; a taint we
//! did not add is never followed by a power-on.

use std::time::Duration;

use crate::model::{ConditionStatus, Name};
use crate::time::Time;

use super::super::actions::Action;
use super::super::events::EventType;
use super::super::tolerations::{Verdict, verdict};
use super::super::world::{Facts, World};
use super::machine::{Fencing, Phase, event, rfc, second};
use super::{
    FenceCommand, FenceOutcome, FenceStep, FenceTarget, FenceTargetOutcome, STATE_ANNOTATION,
    out_of_service_taint, parse_state, state_record,
};

/// The pods bound to the node that keep its power-on waiting: every one but those that
/// tolerate the out-of-service taint forever and are not being deleted (DaemonSets' pods that
/// tolerate every taint, as kube-proxy and CNI agents do: nothing evicts them, so they stay
/// bound while the node is off). A pod that tolerates it for a while is evicted then, and a
/// Terminating one is force-deleted (non-graceful node shutdown): both are waited for.
fn blocking_pods(world: &World, name: &str, now: Time) -> usize {
    let taint = [out_of_service_taint(now)];
    let pods = world.store().pods();
    pods.on_node(name)
        .into_iter()
        .map(|id| pods.view(id))
        .filter(|pod| {
            pod.deleting() || verdict(&taint, pod.tolerations()) != Verdict::TolerateForever
        })
        .count()
}

impl Fencing {
    /// Step `step` failed and another follows: judged as the first was, then recorded, then
    /// run.
    // The world and the lifecycle's derived facts are read apart: the lifecycle keeps the
    // facts, since its verdicts drive them (`world.rs`, `Facts`).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn escalate(
        &mut self,
        world: &World,
        facts: &dyn Facts,
        name: &Name,
        step: usize,
        outcome: &FenceOutcome,
        now: Time,
        out: &mut Vec<Action>,
    ) {
        let Some(node) = world.store().node(name) else {
            return;
        };
        let Some(outage) = self.nodes.get(name).and_then(|e| e.outage) else {
            return;
        };
        let steps = self.policy.steps;
        decide!(
            self,
            name,
            "fencing: decision=escalate node={name} outage_since={} failed_step={}/{steps} result={} next_step={}/{steps}",
            rfc(Some(outage)),
            step + 1,
            outcome.result(),
            step + 2
        );
        out.push(event(
            node,
            EventType::Warning,
            "FencingEscalated",
            format!(
                "Fence step {}/{steps} for node {name} failed: {outcome}; trying step {}",
                step + 1,
                step + 2
            ),
        ));
        let Some(e) = self.nodes.get_mut(name) else {
            return;
        };
        // The next step starts where the first did: every check, then the live read
        // (`Fencing::evaluate`, `confirm.rs`), then its record, then the command.
        e.start_step = step + 1;
        e.phase = Phase::Idle;
        e.blocked = None;
        self.evaluate(world, facts, name, now, out);
    }

    /// `power-cycle`, after the taint: the power-on waits for every pod of the node to be gone.
    pub(super) fn wait_pods(
        &mut self,
        world: &World,
        facts: &dyn Facts,
        name: &Name,
        now: Time,
        out: &mut Vec<Action>,
    ) {
        let Some(node) = world.store().node(name) else {
            return;
        };
        let Some(e) = self.nodes.get(name) else {
            return;
        };
        let (outage, not_before) = (e.outage, e.not_before);
        let pods = blocking_pods(world, name, now);
        if pods > 0 || now < not_before {
            let why = if pods > 0 {
                format!("power-cycle: {pods} pods still bound to the node")
            } else {
                "power-cycle: power-on retry backoff".to_string()
            };
            let at = (now + self.recheck).max(not_before);
            self.block(name, why, at);
            return;
        }
        if outage.is_none() {
            return;
        }
        // The gates of the first step, on the cache, then again on the live read.
        if let Some(why) = self.refused_on_cache(world, facts, node, now) {
            self.block(name, why, now + self.recheck);
            return;
        }
        let id = self.id();
        let Some(e) = self.nodes.get_mut(name) else {
            return;
        };
        e.phase = Phase::ReadingOn { id };
        out.push(Action::ReadFenceTarget {
            id,
            node: name.clone(),
        });
    }

    /// `power-cycle`: the live read before the power-on. It runs only if the read confirms
    /// what the first step's did (same node, still Unknown for the same outage, Lease stale)
    /// and the holds and gates still let it; else the node waits (phase `WaitingPods`) and is
    /// checked again every `node_monitor_period`.
    pub(super) fn confirm_power_on(
        &mut self,
        world: &World,
        facts: &dyn Facts,
        name: &Name,
        outcome: FenceTargetOutcome,
        now: Time,
        out: &mut Vec<Action>,
    ) {
        let Some(e) = self.nodes.get(name) else {
            return;
        };
        let outage = e.outage;
        let t = match outcome {
            FenceTargetOutcome::Found(t) => *t,
            FenceTargetOutcome::NotFound => {
                self.node_gone(name);
                return;
            }
            FenceTargetOutcome::Failed(why) => {
                let why = format!("power-cycle: live read of the node and its Lease failed: {why}");
                self.block(name, why, now + self.recheck);
                return;
            }
        };
        if t.uid != e.uid {
            self.timers.schedule(name.clone(), now + self.recheck);
            return;
        }
        let renew = match self.live_read_confirms(&t, outage, now) {
            Ok(renew) => renew,
            Err(why) => {
                self.block(name, format!("power-cycle: {why}"), now + self.recheck);
                return;
            }
        };
        if let Some(why) = self.refused_on_live_read(world, facts, name, &t, now) {
            self.block(name, why, now + self.recheck);
            return;
        }
        let (Some(node), Some(outage)) = (world.store().node(name), outage) else {
            return;
        };
        decide!(
            self,
            name,
            "fencing: decision=power-on node={name} outage_since={} lease_renew={} reason=\"off, tainted out-of-service, its pods gone (but those tolerating the taint forever), read live\"",
            rfc(Some(outage)),
            rfc(renew)
        );
        let command = FenceCommand {
            step: FenceStep::On,
            node: name.clone(),
            uid: node.uid.clone(),
            addresses: t.addresses,
            labels: t.labels,
        };
        let id = self.id();
        let Some(e) = self.nodes.get_mut(name) else {
            return;
        };
        e.blocked = None;
        e.phase = Phase::MarkingOn { id, command };
        out.push(Action::PatchNodeFencing {
            id,
            node: name.clone(),
            uid: node.uid.clone(),
            resource_version: node.resource_version.clone(),
            annotations: vec![(STATE_ANNOTATION, Some(state_record(outage, "started", now)))],
            taints: None,
        });
    }

    /// `power-cycle`, powered on: Ready by `until`, or the taint stays and a person looks.
    pub(super) fn recovering(
        &mut self,
        world: &World,
        name: &Name,
        until: Time,
        now: Time,
        out: &mut Vec<Action>,
    ) {
        if now < until {
            self.timers.schedule(name.clone(), until);
            return;
        }
        let Some(e) = self.nodes.get_mut(name) else {
            return;
        };
        e.phase = Phase::Done;
        decide!(
            self,
            name,
            "fencing: decision=not-recovered node={name} recover_timeout={} reason=\"powered on but not Ready in time: the out-of-service taint stays\"",
            crate::time::format_duration(self.policy.recover_timeout)
        );
        if let Some(node) = world.store().node(name) {
            out.push(event(
                node,
                EventType::Warning,
                "FencedNodeNotRecovered",
                format!(
                    "Node {name} was powered on but is not Ready after {}: the out-of-service taint stays",
                    crate::time::format_duration(self.policy.recover_timeout)
                ),
            ));
        }
    }

    /// A restart or a new leader found an out-of-service taint on the Unknown node: if it is
    /// ours for this outage the power-off succeeded; go on from the state record.
    pub(super) fn resume_cycle(&mut self, name: &Name, t: &FenceTarget, now: Time) {
        let Some(e) = self.nodes.get_mut(name) else {
            return;
        };
        let ours = t
            .taint_added
            .as_deref()
            .and_then(Time::parse_rfc3339)
            .map(second)
            == e.outage;
        if !ours {
            decide!(
                self,
                name,
                "fencing: decision=keep node={name} reason=\"out-of-service taint not added by node-lifecycled for this outage: no power-on\""
            );
            return;
        }
        e.taint_added = true;
        let state = t
            .fence_state
            .as_deref()
            .and_then(parse_state)
            .filter(|(outage, _, _)| Some(second(*outage)) == e.outage);
        let (phase, step) = match state {
            Some((_, on, at)) if on == "done" => {
                let until = at.saturating_add(self.policy.recover_timeout);
                (Phase::Recovering { until }, "recover")
            }
            // Not started, or started with no known end: the power-on (again).
            _ => (Phase::WaitingPods, "wait-pods"),
        };
        e.phase = phase;
        decide!(
            self,
            name,
            "fencing: decision=resume node={name} outage_since={} at_step={step} record=\"{}\" reason=\"the power-off succeeded before a restart or failover: not repeated\"",
            rfc(e.outage),
            t.fence_state.as_deref().unwrap_or("")
        );
        self.timers.schedule(name.clone(), now);
    }

    /// The power-on ended.
    // The world and the lifecycle's derived facts are read apart: the lifecycle keeps the
    // facts, since its verdicts drive them (`world.rs`, `Facts`).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn on_power_on_exited(
        &mut self,
        world: &World,
        facts: &dyn Facts,
        name: &Name,
        outcome: FenceOutcome,
        took: Duration,
        now: Time,
        out: &mut Vec<Action>,
    ) {
        let Some(node) = world.store().node(name) else {
            return;
        };
        let Some(e) = self.nodes.get_mut(name) else {
            return;
        };
        let still_down = node.ready().map(|c| c.status) == Some(ConditionStatus::Unknown);
        match outcome {
            FenceOutcome::Exited(0) | FenceOutcome::DryRun => {
                decide!(
                    self,
                    name,
                    "fencing: node={name} power-on command succeeded after {}ms; Ready awaited within {}",
                    took.as_millis(),
                    crate::time::format_duration(self.policy.recover_timeout)
                );
                let Some(outage) = e.outage.filter(|_| still_down) else {
                    // Back already: the recovery path releases it.
                    self.evaluate(world, facts, name, now, out);
                    return;
                };
                let id = self.id();
                let Some(e) = self.nodes.get_mut(name) else {
                    return;
                };
                e.phase = Phase::MarkingOnDone { id };
                out.push(Action::PatchNodeFencing {
                    id,
                    node: name.clone(),
                    uid: node.uid.clone(),
                    resource_version: node.resource_version.clone(),
                    annotations: vec![(STATE_ANNOTATION, Some(state_record(outage, "done", now)))],
                    taints: None,
                });
            }
            failure => {
                e.failures += 1;
                let wait = self.policy.backoff(e.failures);
                e.not_before = now.saturating_add(wait);
                e.phase = Phase::WaitingPods;
                decide!(
                    self,
                    name,
                    "fencing: decision=retry-power-on node={name} result={} tries={} backoff={}",
                    failure.result(),
                    e.failures,
                    crate::time::format_duration(wait)
                );
                out.push(event(
                    node,
                    EventType::Warning,
                    "PowerOnFailed",
                    format!("Power-on command for node {name} failed: {failure}"),
                ));
                self.timers.schedule(name.clone(), e.not_before);
            }
        }
    }
}
