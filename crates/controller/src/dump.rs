//! What the SIGUSR1 dump shows: plain data about every zone, queue and node, in a stable order.

use std::time::Duration;

use crate::model::{ConditionStatus, Name};
use crate::time::Rate;
use crate::time::Time;

use super::zones::ZoneState;

/// Legacy mode (docs/upstream.md, "Legacy direct eviction"): where a node's pod eviction stands.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum LegacyEviction {
    Unmarked,
    ToBeEvicted,
    Evicted,
}

#[derive(Clone, Debug, PartialEq)]
pub struct StateDump {
    pub(crate) now: Time,
    pub synced: bool,
    pub taint_based_eviction: bool,
    /// Every zone is in FullDisruption: nothing is tainted or evicted.
    pub all_zones_fully_disrupted: bool,
    pub next_deadline: Option<Time>,
    pub zones: Vec<ZoneDump>,
    pub nodes: Vec<NodeDump>,
    /// Writes sent and not answered yet.
    pub writes_in_flight: usize,
    /// Every brake configured (`brake.rs`), fleet first; empty without `max_unhealthy`.
    pub brakes: Vec<(super::brake::BrakeScope, super::brake::BrakeState)>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct ZoneDump {
    /// The raw zone key (`region:\0:zone`, empty without labels).
    pub key: Name,
    /// `region/zone`.
    pub display: String,
    /// `None` until the first disruption pass saw it counted.
    pub state: Option<ZoneState>,
    pub size: usize,
    pub unhealthy: usize,
    pub rate: Rate,
    pub tokens: u64,
    pub queue_len: usize,
    /// Node at the head of the queue and when it is due.
    pub queue_head: Option<(Name, Time)>,
    pub evictions_total: u64,
    /// End of the disruption cooldown, while one runs.
    pub cooldown_until: Option<Time>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct NodeDump {
    pub name: Name,
    pub zone: String,
    /// The Ready condition's status as last seen (`None`: no Ready condition).
    pub ready: Option<ConditionStatus>,
    pub probe_age: Duration,
    pub grace: Duration,
    /// `key:Effect` of every taint.
    pub taints: Vec<String>,
    /// When the health verdict is due (`probe_time + grace`), if armed.
    pub pending_deadline: Option<Time>,
    /// `idle`, `reading-lease`, `writing-status`.
    pub verdict: &'static str,
    pub excluded_from_disruption: bool,
    /// In planned maintenance (KEP-5683's `MaintenanceInProgress=True`, with
    /// `lifecycle_conditions`): no failure of its zone, the brake or fencing.
    pub planned_maintenance: bool,
    pub legacy: Option<LegacyEviction>,
    /// The `[[pool]]` the node belongs to (`None`: no pool, the global settings).
    pub pool: Option<Name>,
    /// Edge autonomy in force for the node (annotated, and `autonomy` on).
    pub autonomous: bool,
}
