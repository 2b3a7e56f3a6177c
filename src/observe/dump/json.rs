//! The state dump as one JSON object (`dump_format = "json"`), cut to fit one log record
//! (moved unchanged from observe/dump.rs).

use super::*;

impl DaemonSnapshot {
    /// The whole dump as one JSON object on one line, under [`JSON_LINE_MAX`] bytes: if the
    /// lists make it longer, the not-Ready nodes, then the zones, then the pending evictions are
    /// cut (halving) and `omitted` says how many.
    pub fn to_json_line(&self) -> String {
        let mut caps = JsonCaps {
            nodes: JSON_NODES_SHOWN,
            zones: JSON_ZONES_SHOWN,
            evictions: usize::MAX,
        };
        loop {
            let line = self.to_json(caps).to_string();
            if line.len() <= JSON_LINE_MAX {
                return line;
            }
            if caps.nodes > 0 {
                caps.nodes /= 2;
            } else if caps.zones > 0 {
                caps.zones /= 2;
            } else if caps.evictions > 0 {
                caps.evictions = if caps.evictions == usize::MAX {
                    10
                } else {
                    caps.evictions / 2
                };
            } else {
                // Only unbounded strings are left (config path, identity): still one line.
                return line;
            }
        }
    }

    fn to_json(&self, caps: JsonCaps) -> Value {
        let b = &self.build;
        let l = &self.leadership;
        let c = &self.controller;
        let not_ready = self.not_ready_nodes();
        let nodes_shown = not_ready.len().min(caps.nodes);
        let zones_shown = c.zones.len().min(caps.zones);
        let mut v = json!({
            "dump": "node-lifecycled",
            "now": self.now.to_rfc3339(),
            "version": {
                "version": b.version,
                "pid": b.pid,
                "started_at": b.started_at.to_rfc3339(),
                "uptime_ms": millis(b.uptime),
                "status": self.status,
            },
            "config": json_config(&self.config, self),
            "leadership": {
                "enabled": l.enabled,
                "identity": l.identity,
                "holder": l.holder,
                "is_leader": l.is_leader,
                "renew_age_ms": l.renew_age.map(millis),
            },
            "reflectors": self.reflectors.iter().map(|r| json!({
                "resource": r.resource,
                "synced": r.synced,
                "resource_version": r.resource_version,
                "last_event_age_ms": r.last_event_age.map(millis),
                "reconnects": r.reconnects,
                "relists": r.relists,
                "objects": r.objects,
            })).collect::<Vec<_>>(),
            "controller": {
                "synced": c.synced,
                "taint_based_eviction": c.taint_based_eviction,
                "all_zones_fully_disrupted": c.all_zones_fully_disrupted,
                "nodes": c.nodes.len(),
                "writes_in_flight": c.writes_in_flight,
                "next_deadline_in_ms": self.until(c.next_deadline).map(millis),
            },
            "zones": {
                "count": c.zones.len(),
                "omitted": c.zones.len() - zones_shown,
                "items": c.zones[..zones_shown].iter().map(|z| self.json_zone(z)).collect::<Vec<_>>(),
            },
            "not_ready": {
                "count": not_ready.len(),
                "omitted": not_ready.len() - nodes_shown,
                "nodes": not_ready[..nodes_shown].iter().map(|n| self.json_node(n)).collect::<Vec<_>>(),
            },
            "evictions": self.json_evictions(caps.evictions),
            "client": {
                "requests": self.client.requests.iter().map(|r| json!({
                    "verb": r.verb, "code": r.code, "count": r.count,
                })).collect::<Vec<_>>(),
                "throttle_wait_ms": millis(self.client.throttle_wait),
                "dry_run_actions": self.client.dry_run_actions.iter().map(|a| json!({
                    "kind": a.kind, "count": a.count,
                })).collect::<Vec<_>>(),
            },
            "memory": {
                "rss_bytes": self.rss_bytes,
                "store": {
                    "nodes": self.store.nodes,
                    "leases": self.store.leases,
                    "pods": self.store.pods,
                    "node_bytes": self.store.bytes.nodes,
                    "lease_bytes": self.store.bytes.leases,
                    "pod_bytes": self.store.bytes.pods,
                    "bytes_per_node": self.store.bytes_per_node(),
                    "bytes_per_pod": self.store.bytes_per_pod(),
                },
            },
            "loop": {
                "wakeups": self.event_loop.stats.wakeups,
                "io_events": self.event_loop.stats.io_events,
                "stale_events": self.event_loop.stats.stale_events,
                "timers_fired": self.event_loop.stats.timers_fired,
                "sources": self.event_loop.sources,
                "timers_pending": self.event_loop.timers_pending,
                "next_timer_in_ms": self.event_loop.next_timer_in.map(millis),
            },
        });
        // Only with a brake configured, so a dump without one is as before.
        if !c.brakes.is_empty()
            && let Some(o) = v.as_object_mut()
        {
            let brakes: Vec<Value> = c
                .brakes
                .iter()
                .map(|(scope, b)| {
                    json!({
                        "scope": scope.to_string(),
                        "engaged": b.engaged(),
                        "unhealthy": b.unhealthy,
                        "total": b.total,
                        "max_unhealthy": b.limit.to_string(),
                        "engaged_since": b.engaged_since.map(|t| t.to_rfc3339()),
                    })
                })
                .collect();
            o.insert("brakes".into(), Value::Array(brakes));
        }
        v
    }

    fn json_zone(&self, z: &ZoneDump) -> Value {
        let mut v = json!({
            "key": &*z.key,
            "name": z.display,
            "state": zone_state(z),
            "size": z.size,
            "unhealthy": z.unhealthy,
            "rate": z.rate.as_f64(),
            "tokens": z.tokens,
            "queue": z.queue_len,
            "next": z.queue_head.as_ref().map(|(n, _)| n.to_string()),
            "next_due_in_ms": z.queue_head.as_ref().map(|(_, at)| millis(*at - self.now)),
            "evictions_total": z.evictions_total,
        });
        if let (Some(until), Some(o)) = (z.cooldown_until, v.as_object_mut()) {
            o.insert("cooldown_in_ms".into(), json!(millis(until - self.now)));
        }
        v
    }

    fn json_node(&self, n: &NodeDump) -> Value {
        let mut v = json!({
            "name": &*n.name,
            "zone": n.zone,
            "ready": ready(n.ready),
            "probe_age_ms": millis(n.probe_age),
            "grace_ms": millis(n.grace),
            "verdict": n.verdict,
            "deadline_in_ms": self.until(n.pending_deadline).map(millis),
            "excluded": n.excluded_from_disruption,
            "legacy": n.legacy.map(legacy_state),
            "taints": n.taints,
        });
        if let Some(o) = v.as_object_mut() {
            if let Some(pool) = &n.pool {
                o.insert("pool".into(), json!(&**pool));
            }
            if n.autonomous {
                o.insert("autonomous".into(), json!(true));
            }
            if n.planned_maintenance {
                o.insert("planned_maintenance".into(), json!(true));
            }
        }
        v
    }

    fn json_evictions(&self, cap: usize) -> Value {
        let Some(e) = &self.evictions else {
            return json!({ "mode": "legacy", "pending": 0 });
        };
        let shown = e.next.len().min(cap);
        json!({
            "mode": "taint",
            "pending": e.pending,
            "running": e.running,
            "deleted": e.pod_deletions_total,
            "gave_up": e.gave_up_total,
            "next": e.next[..shown].iter().map(|p| json!({
                "pod": p.pod.to_string(),
                "due": p.deadline.to_rfc3339(),
                "in_ms": millis(p.remaining),
            })).collect::<Vec<_>>(),
            "recent_gave_up": e.recent_gave_up.iter().take(shown).map(|g| json!({
                "pod": g.pod.to_string(),
                "at": g.at.to_rfc3339(),
                "error": truncate(&g.error, VALUE_MAX),
            })).collect::<Vec<_>>(),
        })
    }
}

#[derive(Clone, Copy)]
struct JsonCaps {
    nodes: usize,
    zones: usize,
    evictions: usize,
}

fn json_config(c: &Config, s: &DaemonSnapshot) -> Value {
    json!({
        "path": s.config_path.display().to_string(),
        "api": c.api.source.describe(),
        "qps": c.api.qps.as_f64(),
        "burst": c.api.burst,
        "leader_election": leader_election(c),
        "taint_based_eviction": c.controller.taint_based_eviction,
        "dry_run": c.dry_run,
        "log_level": c.log_level.as_str().to_ascii_lowercase(),
        "dump_format": dump_format(c.dump_format),
        "metrics_address": metrics_address(c),
        "node_monitor_period_ms": millis(c.controller.node_monitor_period),
        "node_monitor_grace_period_ms": millis(c.controller.node_monitor_grace_period),
        "node_startup_grace_period_ms": millis(c.controller.node_startup_grace_period),
        "node_eviction_rate": c.controller.node_eviction_rate.as_f64(),
        "secondary_node_eviction_rate": c.controller.secondary_node_eviction_rate.as_f64(),
        "large_cluster_size_threshold": c.controller.large_cluster_size_threshold,
        "unhealthy_zone_threshold": c.controller.unhealthy_zone_threshold,
        "pod_eviction_timeout_ms": millis(c.controller.pod_eviction_timeout),
    })
}
