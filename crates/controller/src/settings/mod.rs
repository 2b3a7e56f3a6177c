//! The controller's tunables (docs/upstream.md, "Settings and their defaults"), as plain data.
//! `Default` is upstream's defaults, and the defaults of the config file's keys: the file fills
//! these fields in directly (`config/keys.rs` names each key's field), and `config::Config`
//! embeds this struct.
//!
//! What a node's pool or domain makes of them is read through the methods of `pools.rs` and
//! `partitions.rs` here; `fencing.rs` holds `[fencing]`'s part. The types the settings are made
//! of (pools, brakes, partition modes, condition taints) are defined by their own modules,
//! which never import the settings back.

use std::time::Duration;

use crate::model::Node;
use crate::time::Rate;

use super::brake::MaxUnhealthy;
use super::condition_taints::ConditionTaint;
use super::partitions::{FullDisruption, PodsNotReady};
use super::pools::Pool;

mod fencing;
mod partitions;
mod pools;

pub use fencing::FencingPolicy;

#[derive(Clone, Debug, PartialEq)]
pub struct Settings {
    /// Period of the full reconcile pass (a safety net: health verdicts have their own timers).
    pub node_monitor_period: Duration,
    /// How much before its tick the pass may run when the shell ticks the machine anyway
    /// (`monitor_pass_window`): the shell's wake-up for something else then runs it too, and
    /// the next tick is counted from this one's nominal instant, so passes stay on their grid
    /// and never run later than their tick. Zero: only at or after its tick, the next one a period
    /// after it ran (as upstream's `wait.Until`).
    pub monitor_pass_early: Duration,
    /// Silence allowed before Ready becomes Unknown.
    pub node_monitor_grace_period: Duration,
    /// Same, for a node that never posted a Ready condition.
    pub node_startup_grace_period: Duration,
    /// Zone tainting rate of a healthy (or a single fully disrupted) zone.
    pub node_eviction_rate: Rate,
    /// Rate of a partially disrupted zone larger than `large_cluster_size_threshold`.
    pub secondary_node_eviction_rate: Rate,
    /// Partially disrupted zones of this size or smaller are not tainted at all.
    pub large_cluster_size_threshold: u32,
    /// Not-Ready fraction (with more than 2 not-Ready nodes) for PartialDisruption.
    pub unhealthy_zone_threshold: f64,
    /// false: the legacy mode, direct pod eviction instead of NoExecute taints (docs/upstream.md,
    /// "Legacy direct eviction").
    pub taint_based_eviction: bool,
    /// Legacy mode only: how long a node is not Ready before its pods are deleted.
    pub pod_eviction_timeout: Duration,
    /// Honour the OpenYurt autonomy annotations (`autonomy.rs`).
    pub autonomy: bool,
    /// After the cluster leaves the all-zones-down stop, or a zone leaves full disruption, no
    /// NoExecute taint is added in it for this long (zero: upstream behaviour).
    pub disruption_cooldown: Duration,
    /// Beyond upstream: a node that has missed two Lease renewals counts as a suspect in the
    /// zone rules for NoExecute tainting and fencing (`node_lifecycle/suspects.rs`).
    pub early_suspects: bool,
    /// Beyond upstream (1.37 gives Node Lifecycle Conditions no meaning): a node whose
    /// `MaintenanceInProgress` condition is True is in planned maintenance, no failure: out of
    /// its zone's counts, never a suspect, not counted by the brake, not fenced.
    pub lifecycle_conditions: bool,
    /// Node pools, first match wins (`pools.rs`).
    pub pools: Vec<Pool>,
    /// Pods of a node that stops being Ready are marked NotReady always (upstream), unless its
    /// domain is disrupted, or never (`partitions.rs`).
    pub mark_pods_not_ready: PodsNotReady,
    /// The label keys whose values make a node's disruption domain (empty: the zone).
    pub disruption_domain: Vec<String>,
    /// A fully disrupted domain beside healthy ones is tainted (upstream) or held.
    pub full_disruption: FullDisruption,
    /// How long a domain is held (`None`: until it recovers).
    pub hold_max: Option<Duration>,
    /// Custom condition taints (`condition_taints.rs`).
    pub condition_taints: Vec<ConditionTaint>,
    /// `[fencing]` when enabled; `None`: no node is ever fenced.
    pub fencing: Option<FencingPolicy>,
    /// The fleet-wide brake (`brake.rs`); `None`: none (upstream).
    pub max_unhealthy: Option<MaxUnhealthy>,
    /// The `tolerationSeconds` kube-apiserver's admission gives the not-ready/unreachable
    /// tolerations it adds (`--default-not-ready-toleration-seconds`, 300 s by default): a pod
    /// whose two tolerations are exactly that is one that chose nothing (`tolerations.rs`).
    pub admission_default_toleration_seconds: u64,
    /// What stands in for the admission default of such pods (`[[pool]]` overrides it);
    /// `None`: the pods' own (upstream).
    pub default_toleration_seconds: Option<u64>,
}

impl Settings {
    /// The node is in planned maintenance (KEP-5683's `MaintenanceInProgress=True`) and
    /// `lifecycle_conditions` is on: no failure for its zone, the brake or fencing.
    pub(crate) fn in_planned_maintenance(&self, node: &Node) -> bool {
        self.lifecycle_conditions && node.in_planned_maintenance()
    }
}

impl Default for Settings {
    fn default() -> Settings {
        Settings {
            node_monitor_period: Duration::from_secs(5),
            monitor_pass_early: Duration::ZERO,
            node_monitor_grace_period: Duration::from_secs(50),
            node_startup_grace_period: Duration::from_secs(60),
            node_eviction_rate: Rate::from_micro_per_second(100_000),
            secondary_node_eviction_rate: Rate::from_micro_per_second(10_000),
            large_cluster_size_threshold: 50,
            unhealthy_zone_threshold: 0.55,
            taint_based_eviction: true,
            pod_eviction_timeout: Duration::from_secs(300),
            autonomy: true,
            disruption_cooldown: Duration::ZERO,
            early_suspects: true,
            lifecycle_conditions: true,
            pools: Vec::new(),
            mark_pods_not_ready: PodsNotReady::Always,
            disruption_domain: Vec::new(),
            full_disruption: FullDisruption::Evict,
            hold_max: None,
            condition_taints: Vec::new(),
            fencing: None,
            max_unhealthy: None,
            admission_default_toleration_seconds: DEFAULT_ADMISSION_TOLERATION_SECONDS,
            default_toleration_seconds: None,
        }
    }
}

/// kube-apiserver's `--default-not-ready-toleration-seconds` and
/// `--default-unreachable-toleration-seconds`.
pub(crate) const DEFAULT_ADMISSION_TOLERATION_SECONDS: u64 = 300;

/// Period of the NoExecute tainting (or legacy eviction) pass over the zone queues.
pub(crate) const NODE_EVICTION_PERIOD: Duration = Duration::from_millis(100);
/// Longest the zone queues' pass waits for health verdicts in flight (live Lease reads, status
/// writes), so that nodes falling silent together are counted together before any is tainted.
pub(crate) const EVICTION_PASS_MAX_HOLD: Duration = Duration::from_secs(2);
/// Retry delay of a queued node whose Ready condition is missing.
pub(crate) const TAINT_RETRY_DELAY: Duration = Duration::from_millis(50);
/// Writes retried after a 409 (upstream: node health update and taint backoff, 5 steps).
pub(crate) const CONFLICT_RETRIES: u32 = 5;
/// Upstream retries a failed node health update after 20 ms (`retrySleepTime`), 5 tries in all
/// (`NodeHealthUpdateRetry`), whatever the error.
pub(crate) const STATUS_RETRY_DELAY: Duration = Duration::from_millis(20);
/// Upstream's taint updates retry a conflict after 100 ms with jitter 1.0 (`UpdateTaintBackoff`):
/// 100–200 ms.
pub(crate) const TAINT_CONFLICT_DELAY: Duration = Duration::from_millis(100);
