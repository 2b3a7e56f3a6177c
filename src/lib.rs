//! node-lifecycled: Kubernetes' node lifecycle and NoExecute taint eviction controllers as one
//! single-threaded daemon.
//!
//! # Layers
//!
//! Dependencies point down. A layer imports only layers below it; layers on one line know
//! nothing of each other. The bottom ones are crates of their own, so Cargo keeps them apart
//! (`crates/model`: `time` and `model`; `crates/kube`; `crates/controller`), re-exported here
//! under their layer names. The daemon's own layers are this crate's modules:
//! `tests/config_and_operator_files/layering.rs` checks every `crate::X` path in `src/` against
//! this table, and each crate's dependencies against it too.
//!
//! ```text
//! main, bin                        CLI, exit codes
//! doctor                           `node-lifecycled doctor`, built from the runtime's wiring
//! runtime                          event loop, executor, informers, daemon, endpoints on the loop
//! observe                          renders snapshots: state dump, metrics, decision log
//! config                           TOML -> validated settings owned by the layers below
//! leader                           Lease-based leader election
//! kube  |  controller  |  logging  speaks the API / decides, sans-IO / writes log lines
//! model                            compact Node / Pod / Lease, the cluster store
//! time                             instants, durations, timer heap, token bucket (pure data)
//! ```
//!
//! So the controller never imports `kube` or `runtime`; `kube` knows nothing of node lifecycle
//! (its request shapes take model and time types); `config` parses into settings types their
//! layer owns (`leader::LeaderElectionConfig`, `logging::LogFormat`, the controller's pools and
//! condition taints); `observe` renders plain snapshots and the endpoints that need the loop
//! live in `runtime`. `time` (the virtual clock, timers, token buckets and the one seeded
//! random generator) sits at the bottom, importing nothing.
//!
//! The simulated cluster the tests, the demo and the benchmark run against is not here: it is the
//! workspace crate `crates/node-lifecycled-sim` (library and the `node-lifecycled-sim` binary), a
//! dev-dependency of this package's tests that depends on this library, never the other way.
//!
//! # The public surface
//!
//! In each crate, everything is `pub(crate)` unless another crate uses it: `pub` is a crate's
//! API to the layers above and to the tests, the simulator and the examples (the compiler checks
//! it: an item made `pub(crate)` that one of them needs fails `cargo build --workspace
//! --all-targets`). Test-only helpers sit behind a crate's `testing` feature
//! (`controller::testing::FakeApi`, the one fake API server), built for tests only.
//!
//! Only the daemon binary is the product's interface; the rest of the surface exists for the
//! simulator crate and the tests, and carries no stability promise. Switches that only tests
//! flip (`Controllers::use_full_monitor_pass`) are documented as such where they are defined.

pub mod config;
pub mod doctor;
pub mod leader;
pub mod logging;
pub mod observe;
pub mod runtime;

// The layers below the daemon are crates of their own (`crates/`), under their layer names here,
// so every path into them reads as it did when they were modules.
pub use node_lifecycled_controller as controller;
pub use node_lifecycled_kube as kube;
pub use node_lifecycled_model::{model, time};
