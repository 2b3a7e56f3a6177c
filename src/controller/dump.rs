//! What the SIGUSR1 dump shows: plain data about every zone, queue and node, in a stable order.

use std::time::Duration;

use crate::model::{ConditionStatus, Name, TaintEffect};
use crate::time::Rate;
use crate::time::Time;

use super::health::NodeHealth;
use super::node_lifecycle::{LegacyEviction, NodeLifecycle, Timer, Verdict, age};
use super::pools::pool_of;
use super::zones::{ZoneState, display_zone};

#[derive(Clone, Debug, PartialEq)]
pub struct StateDump {
    pub now: Time,
    pub synced: bool,
    pub taint_based_eviction: bool,
    /// Every zone is in FullDisruption: nothing is tainted or evicted.
    pub all_zones_fully_disrupted: bool,
    pub next_deadline: Option<Time>,
    pub zones: Vec<ZoneDump>,
    pub nodes: Vec<NodeDump>,
    /// Writes sent and not answered yet.
    pub writes_in_flight: usize,
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
    pub legacy: Option<LegacyEviction>,
    /// The `[[pool]]` the node belongs to (`None`: no pool, the global settings).
    pub pool: Option<Name>,
    /// Edge autonomy in force for the node (annotated, and `autonomy` on).
    pub autonomous: bool,
}

impl NodeLifecycle {
    pub fn dump(&self, now: Time) -> StateDump {
        let zones = self
            .zones
            .values()
            .map(|z| ZoneDump {
                key: z.key.clone(),
                display: display_zone(&z.key),
                state: z.state,
                size: z.size,
                unhealthy: z.unhealthy(),
                rate: z.queue.rate(),
                tokens: z.queue.tokens(now),
                queue_len: z.queue.len(),
                queue_head: z.queue.head().map(|(n, t)| (n.clone(), t)),
                evictions_total: z.evictions_total,
                cooldown_until: z.cooldown_until.filter(|_| z.in_cooldown(now)),
            })
            .collect();
        let nodes = self
            .nodes
            .iter()
            .filter(|(_, e)| e.registered)
            .filter_map(|(name, e)| Some((e, self.store.node(name)?)))
            .map(|(e, node)| NodeDump {
                name: node.name.clone(),
                zone: display_zone(&e.zone),
                ready: node.ready().map(|c| c.status),
                probe_age: age(now, e.health.probe_time),
                grace: {
                    let (monitor, startup) = self.settings.graces(node);
                    NodeHealth::grace(node, monitor, startup)
                },
                pool: pool_of(&self.settings.pools, node).map(|p| p.name.clone()),
                autonomous: self.settings.is_autonomous(node),
                taints: node
                    .taints
                    .iter()
                    .map(|t| {
                        let effect = match &t.effect {
                            TaintEffect::Other(s) => s.to_string(),
                            other => other.as_str().to_string(),
                        };
                        format!("{}:{}", t.key, effect)
                    })
                    .collect(),
                pending_deadline: self.timers.deadline(&Timer::NodeGrace(node.name.clone())),
                verdict: match e.verdict {
                    Verdict::Idle => "idle",
                    Verdict::ReadingLease(_) => "reading-lease",
                    Verdict::Writing { .. } => "writing-status",
                },
                excluded_from_disruption: node.excluded_from_disruption(),
                legacy: (!self.taint_based).then_some(e.legacy),
            })
            .collect();
        let states: Vec<ZoneState> = self.zones.values().filter_map(|z| z.state).collect();
        StateDump {
            now,
            synced: self.synced,
            taint_based_eviction: self.taint_based,
            all_zones_fully_disrupted: !states.is_empty()
                && states.iter().all(|s| *s == ZoneState::FullDisruption),
            next_deadline: self.timers.next_deadline(),
            zones,
            nodes,
            writes_in_flight: self.in_flight.len(),
        }
    }
}
