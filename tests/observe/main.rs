//! What operators read: the control socket, the state dump, the HTTP endpoints, the metrics and
//! `status`.
//!
//! One test binary; each module was its own before (one link step per group, not per file).

#[path = "../observe_support/mod.rs"]
mod observe_support;

mod brake;
mod control;
mod dump;
mod http;
mod metrics;
mod status;
