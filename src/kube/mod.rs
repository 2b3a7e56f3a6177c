//! Speaks the Kubernetes API; knows nothing of node lifecycle.
//!
//! `connection` is the resolved endpoint every call and stream uses (from a kubeconfig, the
//! in-cluster service account, or explicit settings).

pub mod connection;
pub mod decode;
pub mod reflector;
pub mod watch;

pub use connection::{Connection, Credentials, Scheme};
