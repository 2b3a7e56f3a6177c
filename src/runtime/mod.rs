//! The imperative shell's machinery: the event loop, signals, sd_notify, the executor, the
//! daemon's wiring. (The timer heap and token bucket are pure data and live in `time`.)

pub mod api;
pub mod clock;
pub mod control_socket;
pub mod daemon;
pub mod event_loop;
pub mod executor;
pub mod fencing;
pub mod informer;
pub mod memory;
pub mod metrics_server;
pub mod sd_notify;
pub mod settings;
pub mod signals;
pub mod state_dump;

pub use clock::Clock;
pub use event_loop::{EventLoop, Handler, LoopControl};
pub use metrics_server::{Endpoints, Limits, MetricsServer, Readiness, ServerStats};
