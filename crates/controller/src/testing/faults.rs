//! The faults a test injects into the fake API (`FakeApi::faults`).

use std::collections::BTreeSet;

use crate::model::Lease;

/// Injected API behaviour.
#[derive(Default)]
pub struct Faults {
    /// Fail this many upcoming pod status writes (MarkPodNotReady) with an error.
    pub fail_pod_status: usize,
    /// Fail every pod status write of these pods (by name) while they are listed.
    pub fail_pod_status_of: BTreeSet<String>,
    /// Answer this many upcoming taint writes 409 (another writer changed the node first).
    pub conflict_taint_writes: usize,
    /// Fail this many upcoming taint writes with an error (a 500).
    pub fail_taint_writes: usize,
    /// Fail this many upcoming node status writes (UpdateNodeConditions) with an error (a 500).
    pub fail_node_status: usize,
    /// Fail live Lease reads while true.
    pub lease_reads_fail: bool,
    /// Answer live Lease reads with this Lease instead of the API's (a watch that lags).
    pub lease_read_override: Option<Lease>,
    /// Fail the live reads of fencing targets while true (a 503).
    pub fence_reads_fail: bool,
}
