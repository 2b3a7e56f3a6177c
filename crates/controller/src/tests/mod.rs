//! Scenario tests of the node lifecycle core, driven by a virtual clock and a fake API.
//! `upstream_*` files port upstream's test cases (named after them); `beyond_upstream`
//! proves where we deliberately differ.

mod beyond_upstream;
mod brake;
mod disrupted_sites;
mod echo_orders;
mod edge_autonomy;
mod fleet_pause;
mod foreign_taints;
pub(crate) mod harness;
mod legacy_mode;
mod lifecycle_with_eviction;
mod monitor_pass;
mod operation;
mod partitions;
mod partitions_hold;
mod planned_maintenance;
mod policies;
mod pool_timing;
mod renewal_lookup;
mod restarts;
mod takeovers;
mod upstream_monitor;
mod upstream_review;
mod upstream_taints;
mod walks;
mod zone_suspects;
