//! The node lifecycle logic, sans-IO: `(input, now) -> actions`. Never reads a clock, opens a
//! socket or logs a decision it did not return.

pub mod events;
pub mod taint_eviction;
pub mod tolerations;
