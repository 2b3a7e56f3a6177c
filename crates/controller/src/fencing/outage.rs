//! Step 1 of the fencing machine, on the cache: a node's change or a tick tracks its current
//! outage (a new one starts its attempts over; a node back ends it, and may release the
//! out-of-service taint we added), and once the outage is due and no gate holds it, asks for
//! the live read that step 2 confirms (see [`super`]).

use std::time::Duration;

use crate::model::{ConditionStatus, Name};
use crate::time::Time;

use super::super::actions::Action;
use super::super::world::{Facts, World};
use super::is_out_of_service;
use super::machine::{Fencing, NodeFence, Phase, second};

impl Fencing {
    pub(super) fn evaluate(
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
            e.resume_checked = false;
            if matches!(
                e.phase,
                Phase::Reading { release: false, .. }
                    | Phase::ReadingOn { .. }
                    | Phase::Marking { .. }
                    | Phase::Fenced
                    | Phase::Done
                    | Phase::WaitingPods
                    | Phase::Recovering { .. }
            ) {
                if matches!(
                    e.phase,
                    Phase::WaitingPods | Phase::ReadingOn { .. } | Phase::Recovering { .. }
                ) {
                    decide!(
                        self,
                        name,
                        "fencing: decision=recovered node={name} reason=\"Ready again during the power-cycle\""
                    );
                }
                e.phase = Phase::Idle;
            }
            if status == Some(ConditionStatus::True)
                && has_taint
                && (self.policy.remove_out_of_service_on_recovery || self.policy.power_cycle)
                && e.phase == Phase::Idle
            {
                if e.taint_added {
                    self.release(world, name, now, out);
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
            e.start_step = 0;
            e.resume_checked = false;
            if !matches!(
                e.phase,
                Phase::Running { .. }
                    | Phase::Tainting { .. }
                    | Phase::Releasing { .. }
                    | Phase::MarkingOn { .. }
                    | Phase::MarkingOnDone { .. }
            ) {
                e.phase = Phase::Idle;
            }
        }
        match e.phase {
            Phase::Fenced => {
                self.taint(world, name, now, out);
                return;
            }
            Phase::WaitingPods => {
                self.wait_pods(world, facts, name, now, out);
                return;
            }
            Phase::Recovering { until } => {
                self.recovering(world, name, until, now, out);
                return;
            }
            Phase::Idle => {}
            _ => return,
        }
        if has_taint && self.policy.power_cycle && !e.resume_checked {
            // Ours before a restart or a failover? Only the live read's annotations tell: it
            // picks the power-cycle up where it was (`cycle.rs`).
            e.resume_checked = true;
            let id = self.id();
            let e = self.nodes.get_mut(name).expect("entry made above");
            e.phase = Phase::Reading { id, release: false };
            out.push(Action::ReadFenceTarget {
                id,
                node: name.clone(),
            });
            return;
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
        // A new leader (or a restart) has not watched the outage itself: `after` counts from
        // when it started acting too.
        if let Some(since) = self.acting_since
            && now < since.saturating_add(self.policy.after)
        {
            let at = since.saturating_add(self.policy.after);
            let why = format!(
                "this instance started acting at {}: no fence before `after` ({}) has passed since",
                since.to_rfc3339(),
                crate::time::format_duration(self.policy.after)
            );
            self.block(name, why, at);
            return;
        }
        if let Some(why) = self.refused_on_cache(world, facts, node, now) {
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
