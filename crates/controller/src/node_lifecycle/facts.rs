//! What the node lifecycle derives from the store for the other machines (`world::Facts`):
//! the brake covering a node (`brake.rs`), zone states with their suspects and every zone down
//! (`suspects.rs`). Owns nothing: it answers from those files' state.

use crate::brake::{BrakeScope, BrakeState};
use crate::model::ClusterStore;
use crate::time::Time;
use crate::world::Facts;
use crate::zones::ZoneState;

use super::NodeLifecycle;

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
