//! Step 2 of the fencing machine: the live read must confirm everything before the attempt
//! is recorded (see [`super`]); and the record of each step before it runs.

use crate::model::{Name, Node};
use crate::time::Time;

use super::super::actions::Action;
use super::super::world::{Facts, World};
use super::machine::{Fencing, Phase, rfc};
use super::{
    ATTEMPT_ANNOTATION, FenceCommand, FenceStep, FenceTarget, attempt_outage, attempt_record,
    attempt_record_step, attempt_step,
};

impl Fencing {
    /// Step 2: the live read must confirm everything before the attempt is recorded.
    pub(super) fn confirm(
        &mut self,
        world: &World,
        facts: &dyn Facts,
        name: &Name,
        t: FenceTarget,
        now: Time,
        out: &mut Vec<Action>,
    ) {
        let outage = self.nodes.get(name).expect("caller found it").outage;
        let renew = match self.live_read_confirms(&t, outage, now) {
            Ok(renew) => renew,
            Err(why) => {
                self.block(name, why, now + self.recheck);
                return;
            }
        };
        let e = self.nodes.get_mut(name).expect("caller found it");
        if !self.policy.selects(&t.labels) {
            decide!(
                self,
                name,
                "fencing: decision=skip node={name} outage_since={} reason=\"labels do not match fencing.match_labels\"",
                rfc(outage)
            );
            e.phase = Phase::Done;
            return;
        }
        if t.out_of_service {
            e.phase = Phase::Done;
            if self.policy.power_cycle {
                self.resume_cycle(name, &t, now);
            }
            return;
        }
        let inherited = t.attempt.as_deref().and_then(attempt_outage);
        if inherited.is_some() && inherited == outage && !e.attempted && !e.inherited_waited {
            e.inherited_waited = true;
            // Escalation picks up at the step that was running (its result is unknown).
            e.start_step = t
                .attempt
                .as_deref()
                .map_or(0, attempt_step)
                .min(self.policy.steps.saturating_sub(1));
            // One more full `after` since this instance started acting (the record is older):
            // with the live read at its end, a fresh verdict. No read comes earlier (`evaluate`),
            // so this is a re-read at once unless the shell fed a record sooner.
            e.not_before = self
                .acting_since
                .unwrap_or(now)
                .saturating_add(self.policy.after)
                .max(now);
            decide!(
                self,
                name,
                "fencing: decision=wait node={name} outage_since={} record=\"{}\" reason=\"an earlier run started a fence for this outage: one more full `after` ({}) since this instance started acting, then a fresh verdict\"",
                rfc(outage),
                t.attempt.as_deref().unwrap_or(""),
                crate::time::format_duration(self.policy.after)
            );
            self.timers.schedule(name.clone(), e.not_before);
            return;
        }
        if let Some(why) = self.refused_on_live_read(world, facts, name, &t, now) {
            self.block(name, why, now + self.recheck);
            return;
        }
        let Some(node) = world.store().node(name) else {
            return;
        };
        let Some(outage) = outage else {
            return;
        };
        let e = self.nodes.get_mut(name).expect("caller found it");
        e.blocked = None;
        let step = e.start_step;
        let steps = if self.policy.steps > 1 {
            format!(" step={}/{}", step + 1, self.policy.steps)
        } else {
            String::new()
        };
        decide!(
            self,
            name,
            "fencing: decision=fence node={name} uid={} outage_since={} lease_renew={} zone=Normal attempt={}{steps} evidence=\"Ready Unknown for {}s, Lease stale, read live\"",
            node.uid,
            outage.to_rfc3339(),
            rfc(renew),
            e.failures + 1,
            now.since(outage).as_secs()
        );
        let command = FenceCommand {
            step: FenceStep::Off(step),
            node: name.clone(),
            uid: node.uid.clone(),
            addresses: t.addresses,
            labels: t.labels,
        };
        self.mark_step(node, outage, command, now, out);
    }

    /// Records the attempt of `command`'s step on the node; the command runs once it is
    /// written. Step 0 writes today's record, later steps name themselves (`step=N`).
    pub(super) fn mark_step(
        &mut self,
        node: &Node,
        outage: Time,
        command: FenceCommand,
        now: Time,
        out: &mut Vec<Action>,
    ) {
        let record = match command.step {
            FenceStep::Off(0) | FenceStep::On | FenceStep::Status => attempt_record(outage, now),
            FenceStep::Off(i) => attempt_record_step(outage, now, i),
        };
        let id = self.id();
        let Some(e) = self.nodes.get_mut(&node.name) else {
            return;
        };
        e.phase = Phase::Marking { id, command };
        out.push(Action::PatchNodeFencing {
            id,
            node: node.name.clone(),
            uid: node.uid.clone(),
            resource_version: node.resource_version.clone(),
            annotations: vec![(ATTEMPT_ANNOTATION, Some(record))],
            taints: None,
        });
    }
}
