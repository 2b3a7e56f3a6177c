//! The executor's writes against the simulated API server (actions, dry run, faults, fencing) and
//! the fence commands run as real processes.
//!
//! One test binary; each module was its own before (one link step per group, not per file).

#[path = "../executor_support/mod.rs"]
mod executor_support;

mod actions;
mod dry_run;
mod faults;
mod fencing;
mod fencing_commands;
