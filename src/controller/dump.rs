//! What the SIGUSR1 dump shows: plain data about every zone, queue and node, in a stable order.

use std::time::Duration;

use crate::model::{ConditionStatus, Name};
use crate::time::Rate;
use crate::time::Time;

use super::zones::ZoneState;

/// Legacy mode (docs/upstream.md, "Legacy direct eviction"): where a node's pod eviction stands.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) enum LegacyEviction {
    Unmarked,
    ToBeEvicted,
    Evicted,
}

#[derive(Clone, Debug, PartialEq)]
pub struct StateDump {
    pub(crate) now: Time,
    pub(crate) synced: bool,
    pub(crate) taint_based_eviction: bool,
    /// Every zone is in FullDisruption: nothing is tainted or evicted.
    pub(crate) all_zones_fully_disrupted: bool,
    pub(crate) next_deadline: Option<Time>,
    pub(crate) zones: Vec<ZoneDump>,
    pub(crate) nodes: Vec<NodeDump>,
    /// Writes sent and not answered yet.
    pub(crate) writes_in_flight: usize,
    /// Every brake configured (`brake.rs`), fleet first; empty without `max_unhealthy`.
    pub(crate) brakes: Vec<(super::brake::BrakeScope, super::brake::BrakeState)>,
}

#[derive(Clone, Debug, PartialEq)]
pub(crate) struct ZoneDump {
    /// The raw zone key (`region:\0:zone`, empty without labels).
    pub(crate) key: Name,
    /// `region/zone`.
    pub(crate) display: String,
    /// `None` until the first disruption pass saw it counted.
    pub(crate) state: Option<ZoneState>,
    pub(crate) size: usize,
    pub(crate) unhealthy: usize,
    pub(crate) rate: Rate,
    pub(crate) tokens: u64,
    pub(crate) queue_len: usize,
    /// Node at the head of the queue and when it is due.
    pub(crate) queue_head: Option<(Name, Time)>,
    pub(crate) evictions_total: u64,
    /// End of the disruption cooldown, while one runs.
    pub(crate) cooldown_until: Option<Time>,
}

#[derive(Clone, Debug, PartialEq)]
pub(crate) struct NodeDump {
    pub(crate) name: Name,
    pub(crate) zone: String,
    /// The Ready condition's status as last seen (`None`: no Ready condition).
    pub(crate) ready: Option<ConditionStatus>,
    pub(crate) probe_age: Duration,
    pub(crate) grace: Duration,
    /// `key:Effect` of every taint.
    pub(crate) taints: Vec<String>,
    /// When the health verdict is due (`probe_time + grace`), if armed.
    pub(crate) pending_deadline: Option<Time>,
    /// `idle`, `reading-lease`, `writing-status`.
    pub(crate) verdict: &'static str,
    pub(crate) excluded_from_disruption: bool,
    /// In planned maintenance (KEP-5683's `MaintenanceInProgress=True`, with
    /// `lifecycle_conditions`): no failure of its zone, the brake or fencing.
    pub(crate) planned_maintenance: bool,
    pub(crate) legacy: Option<LegacyEviction>,
    /// The `[[pool]]` the node belongs to (`None`: no pool, the global settings).
    pub(crate) pool: Option<Name>,
    /// Edge autonomy in force for the node (annotated, and `autonomy` on).
    pub(crate) autonomous: bool,
}
