//! The node lifecycle logic, sans-IO: `(input, now) -> actions`. Never reads a clock, opens a
//! socket or logs a decision it did not return.

pub(crate) mod actions;
pub(crate) mod autonomy;
pub mod brake;
pub(crate) mod cache_currency;
pub mod clocks;
pub(crate) mod condition_taints;
pub(crate) mod controllers;
pub(crate) mod decisions;
pub(crate) mod dump;
pub mod events;
pub(crate) mod explain;
pub mod fencing;
pub mod fleet_pause;
pub(crate) mod health;
pub(crate) mod in_flight;
pub(crate) mod inputs;
pub(crate) mod labels;
pub(crate) mod no_schedule;
pub(crate) mod node_lifecycle;
pub(crate) mod partitions;
pub(crate) mod pool_timing;
pub mod pools;
pub(crate) mod rate_limited_queue;
pub(crate) mod settings;
pub mod taint_eviction;
pub(crate) mod taint_ops;
#[doc(hidden)]
pub mod testing;
pub(crate) mod tolerations;
pub(crate) mod world;
pub(crate) mod zones;

#[cfg(test)]
mod tests;

pub use actions::{Action, ActionId};
pub use controllers::Controllers;
pub use decisions::{Decision, Heartbeat, LeaseEvidence, TaintReason};
pub(crate) use dump::{LegacyEviction, NodeDump, StateDump, ZoneDump};
pub use inputs::{Input, LeaseReadOutcome, Observed, Outcome};
pub(crate) use node_lifecycle::NODE_LOST_REASON;

/// The sizes of the node lifecycle controller's per-node entry and its parts (bytes), for
/// `examples/node_floor.rs`.
#[doc(hidden)]
pub fn node_entry_sizes() -> Vec<(&'static str, usize)> {
    node_lifecycle::entry_sizes()
}
pub use settings::Settings;
pub(crate) use zones::ZoneState;
