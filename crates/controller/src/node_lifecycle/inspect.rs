//! What the tests read of the machine's state beside its API.

use crate::health::NodeHealth;
use crate::model::Name;
use crate::zones::ZoneState;

use super::NodeLifecycle;
use super::suspect_tally;

impl NodeLifecycle {
    /// The state of the node's zone (fencing's gate: only `Normal` zones are fenced in).
    pub(crate) fn zone_state_of(&self, node: &str) -> Option<ZoneState> {
        let e = self.nodes.get(node).filter(|e| e.registered)?;
        self.zones.get(&e.zone)?.state
    }

    /// Whether the domain is held now (`full_disruption = "hold"`).
    pub(crate) fn zone_held(&self, zone: &Name) -> bool {
        self.zones.get(zone).is_some_and(|z| z.hold.held())
    }

    /// How many times the fleet was walked for the counts kept as nodes change.
    pub(crate) fn walks(&self) -> &suspect_tally::Walks {
        self.tally.walks()
    }

    /// The node's health record (its probe time and the Ready condition last saved).
    pub(crate) fn health(&self, node: &str) -> Option<&NodeHealth> {
        self.nodes.get(node).map(|e| &e.health)
    }
}
