//! What leaves a node unfenced whatever its health: a fleet pause of fencing
//! (`controller/fleet_pause.rs`, fed by `Controllers`), the node's maintenance annotation or
//! its `MaintenanceInProgress=True` condition (KEP-5683, with `lifecycle_conditions`), its
//! cordon (`spec.unschedulable`, with `skip_cordoned`). Asked before the live read (on the
//! cache) and again on the live read itself, just before the attempt is recorded: planned
//! work that started while the read was under way is honoured.

use crate::model::{Maintenance, maintenance};
use crate::time::Time;

use super::machine::Fencing;

impl Fencing {
    /// The fleet pause holding fencing (its description), or `None`. A pause that ends lets
    /// the next check go on; `Controllers` asks for one at once.
    pub(crate) fn set_paused(&mut self, pause: Option<String>) {
        self.paused = pause;
    }

    pub(crate) fn is_paused(&self) -> bool {
        self.paused.is_some()
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
