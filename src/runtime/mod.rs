//! The imperative shell's machinery: the event loop, signals, sd_notify, the executor, the
//! daemon's wiring. (The timer heap and token bucket are pure data and live in `time`.)

pub mod api;
pub(crate) mod clock;
pub mod control_socket;
pub mod daemon;
pub(crate) mod event_loop;
pub mod executor;
pub mod fencing;
pub mod informer;
pub(crate) mod memory;
pub(crate) mod metrics_server;
pub(crate) mod sd_notify;
pub(crate) mod settings;
pub mod signals;
pub(crate) mod state_dump;

pub use clock::Clock;
pub use event_loop::{EventLoop, Handler, LoopControl};
pub use metrics_server::{Endpoints, Limits, MetricsServer, Readiness, ServerStats};
pub use settings::WATCH_COALESCE;
