//! A simulated Kubernetes API server for tests, the demo and the benchmark.
//!
//! Its own crate (node-lifecycled's workspace): a dev-dependency of the product's tests and the
//! `node-lifecycled-sim` binary, never linked into the daemon. It uses the product's library
//! only for the daemon config (scenario files carry one), durations and `Time`.
//!
//! Served over loopback HTTP or TLS: nodes (+`/status`), pods (+`/status`), leases and core/v1
//! events, with a global resourceVersion counter, paginated LIST, WATCH (bookmarks, watch-list,
//! 410 for expired versions, chunked lines), nodes, pods and leases in protobuf to a client that
//! asks for it first in `Accept` (LISTs and watches, as kube-apiserver answers kube-controller-
//! manager; `SimConfig::protobuf = false` answers JSON only), PUT with conflict detection, strategic-merge /
//! merge / JSON PATCH with resourceVersion and uid preconditions, graceful pod DELETE, a write
//! log recording who wrote what, and fault injection (drop/stall/corrupt watches, injected
//! statuses, delays, refused connections).
//!
//! Threads are fine here (this is not the daemon): one per connection, blocking std::net, one
//! mutex over the store and a condvar waking watches. Objects are kept as compact JSON (and, for
//! nodes, pods and leases, protobuf), encoded once per version and shared by the store, the
//! watch history and every response.
//!
//! ```no_run
//! use node_lifecycled_sim::{SimConfig, SimServer, Resource, fixtures};
//! let sim = SimServer::start(SimConfig::default()).unwrap();
//! let cluster = sim.cluster();
//! cluster.create(Resource::Nodes, fixtures::ready_node("n1", Some("z1"), cluster.now())).unwrap();
//! println!("API at {}", sim.url());
//! ```

mod api;
pub mod bench;
pub mod client;
mod cluster;
mod diff;
mod faults;
pub mod fixtures;
mod http;
pub mod incumbent;
pub mod kubelets;
mod list_body;
mod object;
mod patch;
pub mod population;
mod proto;
mod resource;
pub mod scenario;
mod schema;
mod selector;
mod server;
mod shared;
pub mod soak;
mod status;
/// The seeded generator (kubelet jitter, the soak's plan; the product's fuzz support): the
/// product's one PRNG, under the name the simulator's users know. And the one counting
/// allocator the tests and examples install (the test kit's, `crates/testkit`).
pub mod testing {
    pub use node_lifecycled::time::Rng;
    pub use node_lifecycled_testkit::{
        CountingAlloc, allocations_made, live_blocks, live_bytes, take_largest_allocation,
    };
}
pub mod timeline;
mod tls;
mod watch;
mod write_log;

pub use cluster::{Cluster, DeleteOptions, NODE_LEASE_NAMESPACE};
pub use faults::{Faults, RequestMatch};
pub use proto::{
    encode_object as protobuf_message, field_numbers as protobuf_field_numbers,
    message_fields as protobuf_fields,
};
pub use resource::{Resource, Verb};
pub use server::{SimConfig, SimHandle, SimServer};
pub use shared::SimClock;
pub use status::ApiError;
pub use tls::SimTls;
pub use write_log::{Identity, WriteRecord};

/// The last `lines` lines of a log file, indented, for error messages about a child daemon.
pub(crate) fn log_tail(path: &std::path::Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..]
        .iter()
        .map(|l| format!("  {l}"))
        .collect::<Vec<_>>()
        .join("\n")
}
