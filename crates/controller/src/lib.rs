//! The node lifecycle logic, sans-IO: `(input, now) -> actions`. Never reads a clock, opens a
//! socket or logs a decision it did not return.

// The layers below, under the names every file of this crate uses (`crate::model`,
// `crate::time`).
use node_lifecycled_model::{model, time};

pub(crate) mod actions;
pub(crate) mod autonomy;
pub mod brake;
pub mod cache_currency;
pub mod clocks;
pub mod condition_taints;
pub(crate) mod controllers;
pub mod decisions;
pub(crate) mod dump;
pub mod events;
pub mod explain;
pub mod fencing;
pub mod fleet_pause;
pub(crate) mod health;
pub(crate) mod in_flight;
pub(crate) mod inputs;
pub(crate) mod labels;
pub(crate) mod no_schedule;
pub(crate) mod node_lifecycle;
pub mod partitions;
pub mod pool_timing;
pub mod pools;
pub(crate) mod rate_limited_queue;
pub(crate) mod settings;
pub mod taint_eviction;
pub(crate) mod taint_ops;
#[cfg(any(test, feature = "testing"))]
#[doc(hidden)]
pub mod testing;
pub(crate) mod tolerations;
pub(crate) mod world;
pub mod zones;

#[cfg(test)]
mod tests;

pub use actions::{Action, ActionId};
pub use controllers::Controllers;
pub use decisions::{Decision, Heartbeat, LeaseEvidence, TaintReason};
pub use dump::{LegacyEviction, NodeDump, StateDump, ZoneDump};
pub use inputs::{Input, LeaseReadOutcome, Observed, Outcome};
pub use node_lifecycle::NODE_LOST_REASON;

/// The sizes of the node lifecycle controller's per-node entry and its parts (bytes), for
/// `examples/node_floor.rs`.
#[doc(hidden)]
pub fn node_entry_sizes() -> Vec<(&'static str, usize)> {
    node_lifecycle::entry_sizes()
}
pub use settings::Settings;
pub use zones::ZoneState;
