//! What leaves a node unfenced whatever its health: a fleet pause of fencing
//! (`controller/fleet_pause.rs`, fed by `Controllers`), the node's maintenance annotation or
//! its `MaintenanceInProgress=True` condition (KEP-5683, with `lifecycle_conditions`), its
//! cordon (`spec.unschedulable`, with `skip_cordoned`). Asked before the live read (on the
//! cache) and again on the live read itself, just before the attempt is recorded: planned
//! work that started while the read was under way is honoured. Every step passes them: the
//! first, each escalation step and the power-on (`cycle.rs`), and a step resumed after a
//! restart. A pause of tainting (or `all`) holds the out-of-service taint as it holds every
//! new NoExecute taint.

use crate::model::{Maintenance, maintenance};
use crate::time::Time;

use super::machine::Fencing;

impl Fencing {
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
