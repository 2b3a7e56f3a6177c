//! The simulator's commands against the real daemon: the scenarios with their expectations, the
//! soak, the benchmark.
//!
//! One test binary; each module was its own before (one link step per group, not per file).

mod bench;
mod plays;
mod scenarios;
mod soak;
