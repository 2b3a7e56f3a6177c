//! What the node lifecycle derives from the store for the other machines (`world::Facts`):
//! the brake covering a node (`brake.rs`), zone states with their suspects and every zone down
//! (`suspects.rs`). Owns nothing: it answers from those files' state, and brings them to each
//! change of the world before any machine decides on it ([`NodeLifecycle::follow`]).

use crate::brake::{BrakeScope, BrakeState};
use crate::inputs::Observed;
use crate::model::ClusterStore;
use crate::time::Time;
use crate::world::Facts;
use crate::zones::ZoneState;

use super::NodeLifecycle;

impl NodeLifecycle {
    /// The derived facts follow what `World::apply` just changed at `now`, before any machine
    /// decides on it: the suspects' tally, then the brakes' counts (`brake.rs`: a deletion due
    /// at the very instant a mass failure is seen waits).
    pub(crate) fn follow(&mut self, store: &ClusterStore, observed: &Observed, now: Time) {
        self.tally_observed(store, observed, now);
        self.brakes_before(store, observed, now);
    }
}

impl Facts for NodeLifecycle {
    fn brake_covering(
        &self,
        store: &ClusterStore,
        node: &str,
    ) -> Option<(&BrakeScope, &BrakeState)> {
        NodeLifecycle::brake_covering(self, store, node)
    }

    fn all_zones_down_with_suspects(&self, store: &ClusterStore, now: Time) -> bool {
        NodeLifecycle::all_zones_down_with_suspects(self, store, now)
    }

    fn zone_state_with_suspects(
        &self,
        store: &ClusterStore,
        node: &str,
        now: Time,
    ) -> Option<ZoneState> {
        NodeLifecycle::zone_state_with_suspects(self, store, node, now)
    }
}
