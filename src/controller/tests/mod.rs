//! Scenario tests of the node lifecycle core, driven by a virtual clock and a fake API.
//! `upstream_*` files port upstream's test cases (named after them); `beyond_upstream`
//! proves where we deliberately differ.

mod beyond_upstream;
mod fleet_pause;
pub(crate) mod harness;
mod lifecycle_with_eviction;
mod monitor_pass;
mod policies;
mod restarts;
mod upstream_monitor;
mod upstream_review;
mod upstream_taints;
mod zone_suspects;
