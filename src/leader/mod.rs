//! Leader election on a coordination.k8s.io/v1 Lease, as client-go's `leaderelection` with a
//! `LeaseLock` (default `kube-system/node-lifecycled`, 15 s / 10 s / 2 s).
//!
//! Only the leader writes; followers keep their caches warm. `elector` is the sans-IO state
//! machine (tested on a virtual clock), `record` the Lease's spec as a record, `jitter` the
//! followers' retry spread, `lease_lock` the shell that performs the requests with the blocking
//! API client and hands the event loop its next deadline.

pub mod clocks;
pub(crate) mod elector;
pub(crate) mod jitter;
pub(crate) mod lease_lock;
pub mod pause;
pub(crate) mod record;
pub(crate) mod settings;

#[cfg(test)]
mod tests;

pub use elector::Transition;
pub use elector::{ElectionSettings, ElectionStats, LeaderElector, LeaseRequest, LeaseResponse};
pub(crate) use jitter::Jitter;
pub use lease_lock::{LeaderElection, LeaseLock};
pub(crate) use settings::LeaderElectionConfig;
