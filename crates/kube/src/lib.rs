//! Speaks the Kubernetes API; knows nothing of node lifecycle.
//!
//! `connection` is the resolved endpoint every call and stream uses, built from a kubeconfig
//! (`kubeconfig`), the in-cluster service account (`in_cluster`) or our own settings
//! (`explicit`); `tls` makes its rustls configuration and `token` its bearer tokens. `client` makes
//! the short, throttled (`throttle`) calls; failures are `error::ApiError`. `watch` streams run on
//! the mio loop; `reflector` is the sans-IO list → watch → relist machine; `decode` projects JSON
//! straight into the compact `model` types; `body` turns typed (k8s-openapi) request bodies into
//! JSON.

// The layers below, under the names every file of this crate uses (`crate::model`,
// `crate::time`).
use node_lifecycled_model::{model, time};

pub mod body;
pub(crate) mod client;
pub(crate) mod connection;
pub mod decode;
pub(crate) mod error;
pub(crate) mod explicit;
pub mod in_cluster;
pub(crate) mod kubeconfig;
pub mod reflector;
pub mod request;
mod resolve;
pub(crate) mod throttle;
pub(crate) mod tls;
pub(crate) mod token;
mod transport;
pub mod watch;

#[cfg(test)]
mod test_dir;

pub use client::{ApiClient, Budget, ClientSettings, ListPage, PatchType, Preconditions};
pub use connection::{Connection, Credentials, Scheme, ServerUrl};
pub use error::{ApiError, ApiStatus, KubeConfigError};
pub use explicit::ExplicitSettings;
pub use token::TokenSource;
