//! The node lifecycle logic, sans-IO: `(input, now) -> actions`. Never reads a clock, opens a
//! socket or logs a decision it did not return.

pub mod actions;
pub mod autonomy;
pub mod brake;
pub mod cache_currency;
pub mod condition_taints;
pub mod controllers;
pub mod decisions;
pub mod dump;
pub mod events;
pub mod explain;
pub mod fencing;
pub mod fleet_pause;
pub mod health;
pub mod in_flight;
pub mod inputs;
pub mod labels;
pub mod no_schedule;
pub mod node_lifecycle;
pub mod partitions;
pub mod pool_timing;
pub mod pools;
pub mod rate_limited_queue;
pub mod settings;
pub mod taint_eviction;
pub mod taint_ops;
#[doc(hidden)]
pub mod testing;
pub mod tolerations;
pub mod zones;

#[cfg(test)]
mod tests;

pub use actions::{Action, ActionId};
pub use controllers::Controllers;
pub use decisions::{Decision, Heartbeat, LeaseEvidence, TaintReason};
pub use dump::{LegacyEviction, NodeDump, StateDump, ZoneDump};
pub use inputs::{Input, LeaseReadOutcome, Observed, Outcome};
pub use node_lifecycle::{NODE_LOST_REASON, NodeLifecycle};
pub use settings::Settings;
pub use zones::ZoneState;
