//! The daemon binary end to end against the simulated cluster: start-up, node failure, zones,
//! faults, leader election, signals, the journal, operation and the fence agent's status check.
//!
//! One test binary; each module was its own before (one link step per group, not per file).

#[path = "../e2e_support/mod.rs"]
mod e2e_support;

mod daemon_signals;
mod faults;
mod fence_status;
mod journal;
mod leader;
mod leader_sim;
mod node_failure;
mod operation;
mod pause_cli;
mod shadow;
mod signals;
mod startup;
mod zones;
