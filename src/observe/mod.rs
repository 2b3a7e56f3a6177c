//! What the daemon tells about itself: the SIGUSR1 state dump and the optional metrics endpoint
//! (`/metrics`, `/healthz`, `/readyz`) served by the event loop.
//!
//! Both render a [`DaemonSnapshot`]: plain data the daemon gathers from its parts at one instant,
//! so rendering never reaches into live state and a test can build one by hand.
//!
//! Wiring into the daemon: SIGUSR1 logs `snapshot.dump_lines()` one record per line (the
//! format follows `dump_format`). With `metrics_address` set, a `MetricsServer` is bound and
//! registered under one `SourceKind`; every event of that kind goes to `on_event`, one
//! `TimerKind` is kept at `next_deadline()` and routed to `on_timer`, and the daemon implements
//! [`Endpoints`] (`metrics::render` of its snapshot, `Readiness::of`). The daemon times each
//! controller pass and feeds [`HealthTimings`].

pub mod ask;
pub mod decision_line;
pub mod decision_log;
pub mod dump;
pub mod explain;
pub(crate) mod explain_brake;
mod exposition;
pub(crate) mod histogram;
pub(crate) mod history;
pub mod metrics;
mod partition_lines;
pub(crate) mod shadow;
pub(crate) mod snapshot;

pub use histogram::{HealthTimings, Histogram, api_request_histogram, exponential_buckets};
pub use snapshot::{
    ActionCount, BuildInfo, ClientSnapshot, DaemonSnapshot, FencingMetrics, LeaderSnapshot,
    LoopSnapshot, LoopStats, ReflectorSnapshot, RequestCount, ShadowFigures, StoreMemory,
};
