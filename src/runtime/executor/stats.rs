//! What the executor has done, for the SIGUSR1 dump and the metrics endpoint.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::observe::Histogram;
use crate::time::Time;

/// The code recorded for a request that got no HTTP answer (timeout, refused, reset).
pub const NO_ANSWER: u16 = 0;

#[derive(Clone, Debug, Default, PartialEq)]
pub struct ExecutorStats {
    /// Requests sent, by verb (`get`, `patch`, `delete`, `create`) and HTTP code. A success
    /// counts as 200 (201 for `create`): the client does not surface which 2xx it was. Calls
    /// the client throttle held back were not sent and are not counted.
    pub(crate) requests: BTreeMap<(&'static str, u16), u64>,
    /// How long the requests counted in `requests` took, by verb, from the call to its answer
    /// (or to the timeout): `node_lifecycled_api_request_duration_seconds`.
    pub(crate) request_durations: BTreeMap<&'static str, Histogram>,
    /// Time the head of the queue waited for the client throttle (qps/burst, Retry-After).
    pub throttle_wait: Duration,
    /// Times the executor backed off after a timeout, transport error or 5xx.
    pub backoffs: u64,
    /// While backing off: no call before this time.
    pub backoff_until: Option<Time>,
    /// Actions answered (results fed back to the controllers).
    pub(crate) actions_done: u64,
    /// Label patches retried after a 409.
    pub conflict_retries: u64,
    pub events_sent: u64,
    /// Events the API server refused or that got no answer (logged at debug, never retried).
    pub events_failed: u64,
    /// Events dropped, oldest first, because too many were waiting.
    pub events_dropped: u64,
    pub(crate) queued_actions: usize,
    pub(crate) queued_events: usize,
    /// Dry-run: writes not sent, by kind (`taints`, `pod_eviction`, `event`, …).
    pub dry_run_writes: BTreeMap<&'static str, u64>,
    /// Dry-run: objects whose changed copy dry-run keeps (see `Executor::overlay`).
    pub(crate) dry_run_shadows: usize,
    /// The last unexpected failure (not 404/409), with when it happened.
    pub last_error: Option<(Time, String)>,
}

impl ExecutorStats {
    /// Requests with this verb and code.
    pub fn requests_with(&self, verb: &str, code: u16) -> u64 {
        self.requests
            .iter()
            .filter(|((v, c), _)| *v == verb && *c == code)
            .map(|(_, n)| n)
            .sum()
    }

    pub fn requests_total(&self) -> u64 {
        self.requests.values().sum()
    }
}
