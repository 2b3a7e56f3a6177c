//! What the daemon tells about itself: the SIGUSR1 state dump and the optional metrics endpoint
//! (`/metrics`, `/healthz`, `/readyz`) served by the event loop.
//!
//! Both render a [`DaemonSnapshot`]: plain data the daemon gathers from its parts at one instant,
//! so rendering never reaches into live state and a test can build one by hand.

pub mod dump;
pub mod histogram;
pub mod http;
pub mod metrics;
pub mod snapshot;

pub use histogram::{HealthTimings, Histogram, exponential_buckets};
pub use http::{Endpoints, Limits, MetricsServer, Readiness, ServerStats};
pub use snapshot::{
    ActionCount, BuildInfo, ClientSnapshot, DaemonSnapshot, LeaderSnapshot, LoopSnapshot,
    ReflectorSnapshot, RequestCount,
};
