//! node-lifecycled: Kubernetes' node lifecycle and NoExecute taint eviction controllers as one
//! single-threaded daemon. See DESIGN.md in the project's shared notes for the layering:
//! `main -> runtime -> {kube, controller} -> model -> time`; `controller` never imports `kube` or
//! `runtime`. Time (instants, the timer heap, the token bucket) is pure data at the bottom.
//!
//! The simulated cluster the tests, the demo and the benchmark run against is not here: it is the
//! workspace crate `crates/node-lifecycled-sim` (library and the `node-lifecycled-sim` binary), a
//! dev-dependency of this package's tests that depends on this library, never the other way.

pub mod config;
pub mod controller;
pub mod doctor;
pub mod kube;
pub mod leader;
pub mod logging;
pub mod model;
pub mod observe;
pub mod runtime;
pub mod time;

/// The seeded test generator, for unit tests only: the daemon's library does not ship it. The
/// simulator crate compiles the same file for itself and for the integration tests' fuzz support.
#[cfg(test)]
mod testing;
