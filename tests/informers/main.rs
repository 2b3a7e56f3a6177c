//! The informers against the simulated API server: coalescing, faults, responsiveness, watch
//! rotation and scale.
//!
//! One test binary; each module was its own before (one link step per group, not per file).

#[path = "../informer_support/mod.rs"]
mod informer_support;

mod coalescing;
mod faults;
mod responsiveness;
mod rotation;
mod scale;
