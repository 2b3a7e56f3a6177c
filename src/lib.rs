//! node-lifecycled: Kubernetes' node lifecycle and NoExecute taint eviction controllers as one
//! single-threaded daemon.
//!
//! # Layers
//!
//! Dependencies point down. A module imports only modules below it; modules on one line know
//! nothing of each other. `tests/config_and_operator_files/layering.rs` checks every `crate::X` path in `src/` against
//! this table and fails on one that points up or sideways.
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
//! Everything is `pub(crate)` unless something outside this library uses it; what is `pub`
//! is there for one of these users (the compiler checks it: an item made `pub(crate)` that one of
//! them needs fails `cargo build --workspace --all-targets`):
//!
//! | module       | the daemon binary (`src/main.rs`)             | the simulator, `tests/`, `examples/`                       |
//! |--------------|-----------------------------------------------|------------------------------------------------------------|
//! | `config`     | `Config::load`, the default path              | configs built and rendered, durations parsed               |
//! | `runtime`    | `daemon::run`, the API connection check       | the event loop, informers, executor and endpoints, driven alone |
//! | `doctor`     | `node-lifecycled doctor`, pause and resume    | —                                                          |
//! | `leader`     | the pause scopes                              | the elector on a virtual clock                             |
//! | `logging`    | the log output set up                         | the journal's protocol                                     |
//! | `observe`    | —                                             | snapshots rendered: dump, metrics, decision log, explain   |
//! | `controller` | —                                             | `Controllers` fed inputs (fuzzing, the monitor pass against upstream's, cost benches); `testing::FakeApi`, the one fake API server (test-only, hidden from the docs) |
//! | `kube`       | —                                             | the client, watch streams, reflector and decoding against the simulator |
//! | `model`      | —                                             | the compact objects and the cluster store                  |
//! | `time`       | durations                                     | the virtual clock's instants, rates and the seeded random generator |
//!
//! Only the daemon binary is the product's interface; the rest of the surface exists for the
//! simulator crate and the tests, and carries no stability promise. Switches that only tests
//! flip (`Controllers::use_full_monitor_pass`) are documented as such where they are defined.

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
