//! What the SIGUSR1 dump shows of the node lifecycle (the types are in `controller/dump.rs`).

use crate::health::NodeHealth;
use crate::model::ClusterStore;
use crate::time::Time;
use crate::zones::ZoneState;

use super::{NodeLifecycle, Verdict, age};
use crate::dump::{NodeDump, StateDump, ZoneDump};
use crate::model::TaintEffect;
use crate::pools::pool_of;
use crate::zones::display_zone;

impl NodeLifecycle {
    pub fn dump(&self, store: &ClusterStore, now: Time) -> StateDump {
        let zones = self
            .zones
            .values()
            .map(|z| ZoneDump {
                key: z.key.clone(),
                display: display_zone(&z.key),
                state: z.state,
                size: z.counts.size(),
                unhealthy: z.counts.unhealthy(),
                rate: z.queue().rate(),
                tokens: z.queue().tokens(now),
                queue_len: z.queue().len(),
                queue_head: z.queue().head().map(|(n, t)| (n.clone(), t)),
                evictions_total: z.evictions_total(),
                cooldown_until: z.hold.cooldown_until().filter(|_| z.hold.in_cooldown(now)),
            })
            .collect();
        let nodes = self
            .nodes
            .iter()
            .filter(|(_, e)| e.registered)
            .filter_map(|(name, e)| Some((e, store.node(name)?)))
            .map(|(e, node)| NodeDump {
                name: node.name.clone(),
                zone: display_zone(&e.zone),
                ready: node.ready().map(|c| c.status),
                probe_age: age(now, e.health.probe_time()),
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
                pending_deadline: e.grace.due,
                verdict: match e.busy.get().verdict {
                    Verdict::Idle => "idle",
                    Verdict::ReadingLease(_) => "reading-lease",
                    Verdict::Writing { .. } => "writing-status",
                },
                excluded_from_disruption: node.excluded_from_disruption(),
                planned_maintenance: self.settings.in_planned_maintenance(node),
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
            next_deadline: self.deadlines.next_timer(),
            zones,
            nodes,
            writes_in_flight: self.in_flight.len(),
            brakes: self
                .brakes
                .scopes
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        }
    }
}
