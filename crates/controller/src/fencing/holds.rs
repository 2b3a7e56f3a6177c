//! What leaves a node unfenced whatever its health: a fleet pause of fencing
//! (`controller/fleet_pause.rs`, fed by `Controllers`), the node's maintenance annotation or
//! its `MaintenanceInProgress=True` condition (KEP-5683, with `lifecycle_conditions`), its
//! cordon (`spec.unschedulable`, with `skip_cordoned`). Asked before the live read (on the
//! cache) and again on the live read itself, just before the attempt is recorded: planned
//! work that started while the read was under way is honoured. Every step passes them: the
//! first, each escalation step and the power-on (`cycle.rs`), and a step resumed after a
//! restart. A pause of tainting (or `all`) holds the out-of-service taint as it holds every
//! new NoExecute taint.

use crate::model::{ConditionStatus, Maintenance, Node, maintenance};
use crate::time::Time;

use super::super::inputs::LeaseReadOutcome;
use super::super::world::{Facts, World};
use super::FenceTarget;
use super::machine::{Fencing, rfc, second};

impl Fencing {
    /// Why the cache says no fence command may run now, if so: the holds (maintenance, planned
    /// maintenance, cordon) and the gates (pause, zone, brake). Every step asks it.
    pub(super) fn refused_on_cache(
        &self,
        world: &World,
        facts: &dyn Facts,
        node: &Node,
        now: Time,
    ) -> Option<String> {
        let planned = self.lifecycle_conditions && node.in_planned_maintenance();
        self.held_off(&node.maintenance, planned, node.unschedulable, now)
            .or_else(|| self.gate(world, facts, &node.name, now))
    }

    /// The same on a live read of the node, just before a command runs.
    pub(super) fn refused_on_live_read(
        &self,
        world: &World,
        facts: &dyn Facts,
        name: &str,
        t: &FenceTarget,
        now: Time,
    ) -> Option<String> {
        let planned = self.lifecycle_conditions && t.maintenance_in_progress;
        self.held_off(&t.maintenance, planned, t.unschedulable, now)
            .or_else(|| self.gate(world, facts, name, now))
    }

    /// Whether a live read confirms the outage a fence is for: the node still Unknown since
    /// `outage`, its Lease read and not renewed within the grace. The Lease's renewTime if so,
    /// else why not.
    pub(super) fn live_read_confirms(
        &self,
        t: &FenceTarget,
        outage: Option<Time>,
        now: Time,
    ) -> Result<Option<Time>, String> {
        if t.ready != Some(ConditionStatus::Unknown) || t.ready_since.map(second) != outage {
            return Err(format!(
                "live read shows Ready={:?} since {}",
                t.ready,
                rfc(t.ready_since)
            ));
        }
        let renew = match &t.lease {
            LeaseReadOutcome::Found(lease) => lease.renew_time,
            LeaseReadOutcome::NotFound => None,
            LeaseReadOutcome::Failed(why) => return Err(format!("live Lease read failed: {why}")),
        };
        match renew {
            Some(r) if now.since(r) < self.grace => Err(format!(
                "Lease renewed at {}: the node is alive",
                r.to_rfc3339()
            )),
            _ => Ok(renew),
        }
    }

    /// The fleet pause holding fencing (its description), or `None`. A pause that ends lets
    /// the next check go on; `Controllers` asks for one at once.
    pub(crate) fn set_paused(&mut self, pause: Option<String>) {
        self.paused = pause;
    }

    /// The fleet pause holding NoExecute taints (`tainting`, `all`), or `None`: it holds the
    /// out-of-service taint after a successful power-off too (the taint waits, the command's
    /// success is kept); its end lets the taint go on.
    pub(crate) fn set_taint_paused(&mut self, pause: Option<String>) {
        self.taint_paused = pause;
    }

    /// Which pauses hold this machine: (fencing, tainting).
    pub(crate) fn pauses(&self) -> (bool, bool) {
        (self.paused.is_some(), self.taint_paused.is_some())
    }

    /// Why the out-of-service taint may not be written now, if so.
    pub(super) fn taint_held(&self) -> Option<String> {
        self.taint_paused
            .as_ref()
            .map(|p| format!("fleet pause of tainting holds the out-of-service taint: {p}"))
    }

    pub(super) fn held_off(
        &self,
        maintenance: &Maintenance,
        planned: bool,
        unschedulable: bool,
        now: Time,
    ) -> Option<String> {
        if let Some(p) = &self.paused {
            return Some(format!("fleet pause of fencing: {p}"));
        }
        if planned {
            return Some(
                "maintenance: condition MaintenanceInProgress=True (KEP-5683) and \
                 lifecycle_conditions = true"
                    .to_string(),
            );
        }
        if maintenance.holds(now) {
            return Some(format!(
                "maintenance: {} {}",
                maintenance::ANNOTATION,
                maintenance.describe()
            ));
        }
        if unschedulable && self.policy.skip_cordoned {
            return Some(
                "cordoned (spec.unschedulable) and fencing.skip_cordoned = true".to_string(),
            );
        }
        None
    }
}
