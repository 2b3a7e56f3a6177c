//! Talking to an API server: the unary client and its TLS, and the watch stream's framing.
//!
//! One test binary; each module was its own before (one link step per group, not per file).

#[path = "../kube_client_support/mod.rs"]
mod kube_client_support;

mod client;
mod client_tls;
mod watch_stream;
