//! Everything the SIGUSR1 dump and `/metrics` show, as plain data gathered by the daemon at one
//! instant. The parts built elsewhere (leader election, reflectors, the API client) are copied
//! into the small structs below, so this module depends on none of them and a test can build a
//! snapshot by hand.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use crate::config::Config;
use crate::controller::StateDump;
use crate::controller::taint_eviction::{EvictionDump, LatencyHistogram};
use crate::kube::reflector::ReflectorStats;
use crate::model::{ClusterStore, StoreBytes};
use crate::time::Time;

use super::histogram::{HealthTimings, Histogram, exponential_buckets};

#[derive(Clone, Debug)]
pub struct DaemonSnapshot {
    /// When the snapshot was taken; every age below is relative to it.
    pub now: Time,
    pub build: BuildInfo,
    pub config_path: PathBuf,
    pub config: Config,
    /// What the daemon is doing or waiting for, as in `STATUS=`.
    pub status: String,
    pub leadership: LeaderSnapshot,
    pub reflectors: Vec<ReflectorSnapshot>,
    pub controller: StateDump,
    /// `None` in legacy mode (no taint eviction controller).
    pub evictions: Option<EvictionDump>,
    /// `taint_eviction_controller_pod_deletion_duration_seconds`; `None` in legacy mode.
    pub pod_deletion_duration: Option<LatencyHistogram>,
    pub health_timings: HealthTimings,
    pub client: ClientSnapshot,
    /// Resident memory; `None` where /proc is not readable.
    pub rss_bytes: Option<u64>,
    /// What the cluster store holds, and its heap bytes.
    pub store: StoreMemory,
    pub event_loop: LoopSnapshot,
    /// Fence command attempts and durations; `None` unless `[fencing]` is enabled.
    pub fencing: Option<FencingMetrics>,
    /// Decisions made so far, by kind (`Decision::kind`).
    pub decisions: BTreeMap<&'static str, u64>,
    /// The fleet pause in force, as read from the leader Lease.
    pub pause: Option<crate::controller::fleet_pause::FleetPause>,
    /// The last `status_command` answer per node (true: exit 0); empty when not run.
    pub fence_agent_ok: BTreeMap<String, bool>,
    /// Shadow mode's figures; `None` when it is off.
    pub shadow: Option<ShadowFigures>,
}

/// What shadow mode counted (`observe/shadow`), for `/metrics`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ShadowFigures {
    /// Pairs classed since the history began, by `class/kind`.
    pub(crate) totals: BTreeMap<String, u64>,
    /// Pairs waiting for their other half.
    pub(crate) pending: usize,
    /// Objects the incumbent marked that it keeps a note of, and their bytes.
    pub(crate) marked: usize,
    pub(crate) bytes: usize,
}

/// The cluster store's objects and heap bytes, by kind (see `model::ClusterStore::heap_bytes`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StoreMemory {
    pub(crate) nodes: usize,
    pub(crate) leases: usize,
    pub(crate) pods: usize,
    pub(crate) bytes: StoreBytes,
}

impl StoreMemory {
    pub(crate) fn of(store: &ClusterStore) -> StoreMemory {
        StoreMemory {
            nodes: store.node_count(),
            leases: store.lease_count(),
            pods: store.pod_count(),
            bytes: store.heap_bytes(),
        }
    }

    /// Heap bytes per node (its Lease included).
    pub(crate) fn bytes_per_node(&self) -> usize {
        (self.bytes.nodes + self.bytes.leases)
            .checked_div(self.nodes)
            .unwrap_or(0)
    }

    pub(crate) fn bytes_per_pod(&self) -> usize {
        self.bytes.pods.checked_div(self.pods).unwrap_or(0)
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BuildInfo {
    pub(crate) version: &'static str,
    pub(crate) pid: u32,
    pub(crate) started_at: Time,
    pub(crate) uptime: Duration,
}

impl BuildInfo {
    /// This binary's version and process.
    pub fn current(started_at: Time, uptime: Duration) -> BuildInfo {
        BuildInfo {
            version: env!("CARGO_PKG_VERSION"),
            pid: std::process::id(),
            started_at,
            uptime,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaderSnapshot {
    /// Leader election configured; without it this instance always acts.
    pub enabled: bool,
    pub identity: String,
    /// Holder of the lease as last read; `None` before the first read or when nobody holds it.
    pub holder: Option<String>,
    pub is_leader: bool,
    /// Time since the lease was last renewed (by us when leading, by the holder otherwise).
    pub renew_age: Option<Duration>,
}

impl LeaderSnapshot {
    /// Leader election off: this instance is the only one and acts.
    pub(crate) fn disabled(identity: String) -> LeaderSnapshot {
        LeaderSnapshot {
            enabled: false,
            holder: None,
            is_leader: true,
            renew_age: None,
            identity,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReflectorSnapshot {
    /// `nodes`, `pods`, `leases`.
    pub resource: String,
    pub synced: bool,
    pub resource_version: Option<String>,
    /// `None` before the first event.
    pub last_event_age: Option<Duration>,
    pub reconnects: u64,
    pub relists: u64,
    pub objects: usize,
    /// How long the cache has not followed the server (watch down, backing off, relisting);
    /// `None` while it does.
    pub down_for: Option<Duration>,
}

impl ReflectorSnapshot {
    /// `down_since`: since when the cache has not followed the server, `None` while it does.
    pub(crate) fn from_stats(
        resource: &str,
        stats: &ReflectorStats,
        down_since: Option<Time>,
        now: Time,
    ) -> ReflectorSnapshot {
        ReflectorSnapshot {
            resource: resource.to_string(),
            synced: stats.synced,
            resource_version: stats.resource_version.clone(),
            last_event_age: stats.last_event_at.map(|at| now - at),
            reconnects: stats.reconnects,
            relists: stats.relists,
            objects: stats.objects,
            down_for: down_since.map(|at| now - at),
        }
    }
}

/// What the API client did: requests by verb and outcome, time spent waiting for the throttle,
/// and in dry-run mode the writes it would have made.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ClientSnapshot {
    pub requests: Vec<RequestCount>,
    /// How long the requests took, by HTTP verb.
    pub request_durations: Vec<(String, Histogram)>,
    /// Total time calls were held back by the client-side throttle (qps/burst, 429 Retry-After).
    pub throttle_wait: Duration,
    pub dry_run_actions: Vec<ActionCount>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequestCount {
    /// HTTP method: `GET`, `PUT`, `PATCH`, ...
    pub verb: String,
    /// HTTP status (`200`, `409`) or, without a response, what happened instead (`timeout`,
    /// `transport`).
    pub code: String,
    pub count: u64,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ActionCount {
    /// The action's kind, e.g. `PatchNodeTaints`.
    pub kind: String,
    pub count: u64,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LoopSnapshot {
    pub stats: LoopStats,
    pub sources: usize,
    pub timers_pending: usize,
    /// Time to the earliest deadline, `None` with no timer armed.
    pub next_timer_in: Option<Duration>,
}

/// Counters for the state dump.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LoopStats {
    /// Returns from `poll` (events, timeouts, interruptions).
    pub wakeups: u64,
    pub io_events: u64,
    pub timers_fired: u64,
    /// Events for a token deregistered earlier in the same batch.
    pub stale_events: u64,
}

/// `node_lifecycled_fencing_attempts_total{result}` and the duration histogram.
#[derive(Clone, Debug)]
pub struct FencingMetrics {
    pub attempts: BTreeMap<&'static str, u64>,
    pub duration: Histogram,
}

impl Default for FencingMetrics {
    fn default() -> FencingMetrics {
        FencingMetrics {
            attempts: BTreeMap::new(),
            // 0.5 s to about 17 min: an IPMI call takes seconds, a timeout minutes.
            duration: Histogram::new(exponential_buckets(0.5, 2.0, 12)),
        }
    }
}
