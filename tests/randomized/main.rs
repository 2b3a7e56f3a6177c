//! Random inputs with fixed seeds: the parsers of outside bytes fuzzed (a short pass of every
//! target, crafted inputs and the findings of long runs), and the controller's event-driven
//! monitor pass against upstream's batched one on random scripts.
//!
//! One test binary; each module was its own before (one link step per group, not per file).

#[path = "../fuzz_support/mod.rs"]
mod fuzz_support;

mod fuzz_parsers;
mod monitor_pass;
mod recordings;
