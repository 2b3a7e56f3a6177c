//! `/metrics`: what is exported, rendered from a [`DaemonSnapshot`] in the text format of
//! `exposition.rs`.
//!
//! Upstream's metrics keep upstream's names, help texts and buckets (docs/upstream.md, "Metrics"),
//! so dashboards and alerts written for kube-controller-manager work unchanged; ours are prefixed
//! `node_lifecycled_`. Upstream's deprecated `node_collector_evictions_number` (hidden since
//! 1.24) is not exported.

use super::exposition::Exposition;
use super::histogram::Histogram;
use super::snapshot::DaemonSnapshot;
use crate::controller::Decision;
use crate::controller::taint_eviction::{DELETION_LATENCY_BUCKETS_MS, LatencyHistogram};
use crate::controller::zones::ZoneState;
use crate::model::ConditionStatus;

/// The `Content-Type` of the body [`render`] returns.
pub(crate) const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

pub fn render(s: &DaemonSnapshot) -> String {
    let mut e = Exposition::default();
    zone_metrics(&mut e, s);
    health_timings(&mut e, s);
    taint_eviction(&mut e, s);
    ours(&mut e, s);
    zones_and_nodes(&mut e, s);
    watch_currency(&mut e, s);
    decisions(&mut e, s);
    api_latency(&mut e, s);
    pools(&mut e, s);
    fencing(&mut e, s);
    brakes(&mut e, s);
    paused(&mut e, s);
    fence_agent(&mut e, s);
    e.out
}

/// Only with `max_unhealthy` configured: each brake, engaged or not, and its count.
fn brakes(e: &mut Exposition, s: &DaemonSnapshot) {
    use crate::controller::brake::BrakeScope;
    let brakes = &s.controller.brakes;
    if brakes.is_empty() {
        return;
    }
    let labels = |scope: &BrakeScope| -> Vec<(&'static str, String)> {
        match scope {
            BrakeScope::Fleet => vec![("scope", "fleet".to_string())],
            BrakeScope::Pool(p) => vec![("scope", "pool".to_string()), ("pool", p.to_string())],
        }
    };
    e.family(
        "node_lifecycled_brake_engaged",
        "gauge",
        "1 while the brake on mass decisions (max_unhealthy) is engaged: no NoExecute taint, pod deletion or fence on the nodes of its scope (fleet, or a pool).",
    );
    for (scope, b) in brakes {
        let l = labels(scope);
        let l: Vec<(&str, &str)> = l.iter().map(|(k, v)| (*k, v.as_str())).collect();
        e.sample("node_lifecycled_brake_engaged", &l, u8::from(b.engaged()));
    }
    e.family(
        "node_lifecycled_brake_unhealthy_nodes",
        "gauge",
        "Nodes of the brake's scope not Ready or about to be judged (suspects), as last counted.",
    );
    for (scope, b) in brakes {
        let l = labels(scope);
        let l: Vec<(&str, &str)> = l.iter().map(|(k, v)| (*k, v.as_str())).collect();
        e.sample("node_lifecycled_brake_unhealthy_nodes", &l, b.unhealthy);
    }
}

/// What upstream's zone gauges leave to arithmetic: each zone's state (one sample per state,
/// 1 for the current one, as kube-state-metrics spells states), its NoExecute queue, and nodes
/// by their Ready status. The zone label is the raw key, as upstream's, so they join.
fn zones_and_nodes(e: &mut Exposition, s: &DaemonSnapshot) {
    let zones = &s.controller.zones;
    e.family(
        "node_lifecycled_zone_state",
        "gauge",
        "1 for the zone's disruption state (Initial, Normal, PartialDisruption, FullDisruption), 0 for the others; all 0 before the zone was first counted.",
    );
    for z in zones {
        for state in ZoneState::ALL {
            let current = z.state == Some(state);
            e.sample(
                "node_lifecycled_zone_state",
                &[("zone", &*z.key), ("state", state.as_str())],
                u8::from(current),
            );
        }
    }
    e.family(
        "node_lifecycled_zone_taint_queue",
        "gauge",
        "Nodes waiting in the zone's rate-limited queue for a NoExecute taint.",
    );
    for z in zones {
        e.sample(
            "node_lifecycled_zone_taint_queue",
            &[("zone", &*z.key)],
            z.queue_len,
        );
    }
    e.family(
        "node_lifecycled_nodes",
        "gauge",
        "Registered nodes by the status of their Ready condition (none: no readable Ready condition).",
    );
    let mut by_ready = [("True", 0usize), ("False", 0), ("Unknown", 0), ("none", 0)];
    for node in &s.controller.nodes {
        let i = match node.ready {
            Some(ConditionStatus::True) => 0,
            Some(ConditionStatus::False) => 1,
            Some(ConditionStatus::Unknown) => 2,
            Some(ConditionStatus::Other) | None => 3,
        };
        by_ready[i].1 += 1;
    }
    for (ready, count) in by_ready {
        e.sample("node_lifecycled_nodes", &[("ready", ready)], count);
    }
}

/// Whether each cache follows the server, and for how long it has not: decisions that need
/// current caches wait meanwhile, and a watch down longer than the grace period means nodes
/// are being judged on old news. The grace period is exported so an alert can compare.
fn watch_currency(e: &mut Exposition, s: &DaemonSnapshot) {
    e.family(
        "node_lifecycled_watch_up",
        "gauge",
        "1 while the resource's cache follows the server (listed, watching, no failure since), else 0.",
    );
    for r in &s.reflectors {
        e.sample(
            "node_lifecycled_watch_up",
            &[("resource", r.resource.as_str())],
            u8::from(r.down_for.is_none()),
        );
    }
    e.family(
        "node_lifecycled_watch_down_seconds",
        "gauge",
        "How long the resource's cache has not followed the server (watch failed, backing off, relisting); 0 while it does.",
    );
    for r in &s.reflectors {
        e.sample(
            "node_lifecycled_watch_down_seconds",
            &[("resource", r.resource.as_str())],
            r.down_for.unwrap_or_default().as_secs_f64(),
        );
    }
    e.family(
        "node_lifecycled_node_monitor_grace_period_seconds",
        "gauge",
        "node_monitor_grace_period from the configuration ([[pool]] overrides not included).",
    );
    e.sample(
        "node_lifecycled_node_monitor_grace_period_seconds",
        &[],
        s.config.controller.node_monitor_grace_period.as_secs_f64(),
    );
}

/// Every kind of the decision log (`DECISION=` in the journal), zero included.
fn decisions(e: &mut Exposition, s: &DaemonSnapshot) {
    e.family(
        "node_lifecycled_decisions_total",
        "counter",
        "Decisions made, by kind (the journal's DECISION= field), whether their log line was folded or not.",
    );
    // A kind missing from KINDS still shows once it has been counted.
    let counted = s.decisions.keys().filter(|k| !Decision::KINDS.contains(k));
    for kind in Decision::KINDS.iter().chain(counted) {
        let n = s.decisions.get(kind).copied().unwrap_or(0);
        e.sample("node_lifecycled_decisions_total", &[("decision", kind)], n);
    }
}

fn api_latency(e: &mut Exposition, s: &DaemonSnapshot) {
    let name = "node_lifecycled_api_request_duration_seconds";
    e.family(
        name,
        "histogram",
        "How long the API requests counted in node_lifecycled_api_requests_total took, by HTTP verb.",
    );
    for (verb, h) in &s.client.request_durations {
        e.histogram_samples(name, &[("verb", verb)], h);
    }
}

/// Registered nodes per `[[pool]]`; absent when no node is in a pool.
fn pools(e: &mut Exposition, s: &DaemonSnapshot) {
    let mut counts: std::collections::BTreeMap<&str, usize> = std::collections::BTreeMap::new();
    for node in &s.controller.nodes {
        if let Some(pool) = &node.pool {
            *counts.entry(pool).or_default() += 1;
        }
    }
    if counts.is_empty() {
        return;
    }
    e.family(
        "node_lifecycled_pool_nodes",
        "gauge",
        "Registered nodes per pool (the first [[pool]] whose selector matches the node's labels).",
    );
    for (pool, count) in counts {
        e.sample("node_lifecycled_pool_nodes", &[("pool", pool)], count);
    }
}

/// The fleet pause: 1 for what a pause in force holds, else 0 (always exported, so an alert can
/// watch it).
fn paused(e: &mut Exposition, s: &DaemonSnapshot) {
    e.family(
        "node_lifecycled_paused",
        "gauge",
        "1 while a fleet pause (node-lifecycled pause) holds fencing or tainting, else 0.",
    );
    for what in ["fencing", "tainting"] {
        let on = s.pause.as_ref().is_some_and(|p| match what {
            "fencing" => p.what.fencing(),
            _ => p.what.tainting(),
        });
        e.sample("node_lifecycled_paused", &[("what", what)], u64::from(on));
    }
}

/// The last `status_command` answer per node, once one has run.
fn fence_agent(e: &mut Exposition, s: &DaemonSnapshot) {
    // With fencing on the family is always there (alerts can name it); samples once run.
    if s.fencing.is_none() && s.fence_agent_ok.is_empty() {
        return;
    }
    e.family(
        "node_lifecycled_fence_agent_ok",
        "gauge",
        "1 when fencing.status_command last answered exit 0 for the node (its fence agent reachable with our credentials), else 0.",
    );
    for (node, ok) in &s.fence_agent_ok {
        e.sample(
            "node_lifecycled_fence_agent_ok",
            &[("node", node)],
            u64::from(*ok),
        );
    }
}

/// Only with `[fencing]` enabled.
fn fencing(e: &mut Exposition, s: &DaemonSnapshot) {
    let Some(f) = &s.fencing else {
        return;
    };
    e.family(
        "node_lifecycled_fencing_attempts_total",
        "counter",
        "Fence commands started (or, in dry-run, not started), by result: success, failure, timeout, spawn_error, dry_run.",
    );
    for result in ["success", "failure", "timeout", "spawn_error", "dry_run"] {
        let n = f.attempts.get(result).copied().unwrap_or(0);
        e.sample(
            "node_lifecycled_fencing_attempts_total",
            &[("result", result)],
            n,
        );
    }
    e.histogram(
        "node_lifecycled_fencing_duration_seconds",
        "How long fence commands ran, start to exit (or kill at the timeout).",
        &f.duration,
    );
}

fn zone_metrics(e: &mut Exposition, s: &DaemonSnapshot) {
    let zones = &s.controller.zones;
    e.family(
        "node_collector_zone_health",
        "gauge",
        "[ALPHA] Gauge measuring percentage of healthy nodes per zone.",
    );
    for z in zones {
        // An empty zone reads 100, the value upstream leaves behind for a zone that vanished.
        let health = if z.size == 0 {
            100.0
        } else {
            100.0 * (z.size - z.unhealthy.min(z.size)) as f64 / z.size as f64
        };
        e.sample("node_collector_zone_health", &[("zone", &*z.key)], health);
    }
    e.family(
        "node_collector_zone_size",
        "gauge",
        "[ALPHA] Gauge measuring number of registered Nodes per zones.",
    );
    for z in zones {
        e.sample("node_collector_zone_size", &[("zone", &*z.key)], z.size);
    }
    e.family(
        "node_collector_unhealthy_nodes_in_zone",
        "gauge",
        "[ALPHA] Gauge measuring number of not Ready Nodes per zones.",
    );
    for z in zones {
        e.sample(
            "node_collector_unhealthy_nodes_in_zone",
            &[("zone", &*z.key)],
            z.unhealthy,
        );
    }
    e.family(
        "node_collector_evictions_total",
        "counter",
        "[STABLE] Number of Node evictions that happened since current instance of NodeController started.",
    );
    for z in zones {
        e.sample(
            "node_collector_evictions_total",
            &[("zone", &*z.key)],
            z.evictions_total,
        );
    }
}

fn health_timings(e: &mut Exposition, s: &DaemonSnapshot) {
    e.histogram(
        "node_collector_update_node_health_duration_seconds",
        "[ALPHA] Duration in seconds for NodeController to update the health of a single node.",
        &s.health_timings.update_node_health,
    );
    e.histogram(
        "node_collector_update_all_nodes_health_duration_seconds",
        "[ALPHA] Duration in seconds for NodeController to update the health of all nodes.",
        &s.health_timings.update_all_nodes_health,
    );
}

/// Only when the taint eviction controller runs, as upstream registers them.
fn taint_eviction(e: &mut Exposition, s: &DaemonSnapshot) {
    let Some(evictions) = &s.evictions else {
        return;
    };
    e.family(
        "taint_eviction_controller_pod_deletions_total",
        "counter",
        "[ALPHA] Total number of Pods deleted by TaintEvictionController since its start.",
    );
    e.sample(
        "taint_eviction_controller_pod_deletions_total",
        &[],
        evictions.pod_deletions_total,
    );
    let latency = s.pod_deletion_duration.as_ref().map_or_else(
        || deletion_histogram(&LatencyHistogram::default()),
        deletion_histogram,
    );
    e.histogram(
        "taint_eviction_controller_pod_deletion_duration_seconds",
        "[ALPHA] Latency, in seconds, between the time when a taint effect has been activated for the Pod and its deletion via TaintEvictionController.",
        &latency,
    );
}

/// The controller keeps whole milliseconds; the exposition speaks seconds.
fn deletion_histogram(h: &LatencyHistogram) -> Histogram {
    Histogram {
        bounds: DELETION_LATENCY_BUCKETS_MS
            .iter()
            .map(|ms| *ms as f64 / 1000.0)
            .collect(),
        counts: h.counts.to_vec(),
        count: h.count,
        sum_seconds: h.sum_ms as f64 / 1000.0,
    }
}

fn ours(e: &mut Exposition, s: &DaemonSnapshot) {
    e.family(
        "node_lifecycled_build_info",
        "gauge",
        "Always 1; the version label says which build runs.",
    );
    e.sample(
        "node_lifecycled_build_info",
        &[("version", s.build.version)],
        1u8,
    );
    e.family(
        "node_lifecycled_leader",
        "gauge",
        "1 while this instance acts (holds the lease, or runs without leader election), else 0.",
    );
    e.sample(
        "node_lifecycled_leader",
        &[],
        u8::from(s.leadership.is_leader),
    );
    e.family(
        "node_lifecycled_synced",
        "gauge",
        "1 once the initial list of nodes, leases and pods is complete.",
    );
    e.sample("node_lifecycled_synced", &[], u8::from(s.controller.synced));

    e.family(
        "node_lifecycled_watch_reconnects_total",
        "counter",
        "Watches reopened after the first one, per resource.",
    );
    for r in &s.reflectors {
        e.sample(
            "node_lifecycled_watch_reconnects_total",
            &[("resource", r.resource.as_str())],
            r.reconnects,
        );
    }
    e.family(
        "node_lifecycled_watch_relists_total",
        "counter",
        "Full lists after the first one, per resource.",
    );
    for r in &s.reflectors {
        e.sample(
            "node_lifecycled_watch_relists_total",
            &[("resource", r.resource.as_str())],
            r.relists,
        );
    }
    e.family(
        "node_lifecycled_watch_objects",
        "gauge",
        "Objects in the local cache, per resource.",
    );
    for r in &s.reflectors {
        e.sample(
            "node_lifecycled_watch_objects",
            &[("resource", r.resource.as_str())],
            r.objects,
        );
    }

    e.family(
        "node_lifecycled_api_requests_total",
        "counter",
        "API requests by HTTP verb and status code (no_answer: a timeout or transport error, no response).",
    );
    for r in &s.client.requests {
        e.sample(
            "node_lifecycled_api_requests_total",
            &[("verb", r.verb.as_str()), ("code", r.code.as_str())],
            r.count,
        );
    }
    e.family(
        "node_lifecycled_api_throttle_wait_seconds_total",
        "counter",
        "Time API calls were held back by the client-side rate limit.",
    );
    e.sample(
        "node_lifecycled_api_throttle_wait_seconds_total",
        &[],
        s.client.throttle_wait.as_secs_f64(),
    );
    e.family(
        "node_lifecycled_dry_run_actions_total",
        "counter",
        "Writes not made because dry_run is on, by action kind.",
    );
    for a in &s.client.dry_run_actions {
        e.sample(
            "node_lifecycled_dry_run_actions_total",
            &[("kind", a.kind.as_str())],
            a.count,
        );
    }

    if let Some(shadow) = &s.shadow {
        super::shadow::report::metrics(e, shadow);
    }
    if let Some(ev) = &s.evictions {
        e.family(
            "node_lifecycled_pending_pod_evictions",
            "gauge",
            "Pods waiting for their NoExecute eviction deadline.",
        );
        e.sample("node_lifecycled_pending_pod_evictions", &[], ev.pending);
    }
    e.family(
        "node_lifecycled_loop_wakeups_total",
        "counter",
        "Returns from the event loop's wait.",
    );
    e.sample(
        "node_lifecycled_loop_wakeups_total",
        &[],
        s.event_loop.stats.wakeups,
    );
    e.family(
        "node_lifecycled_store_bytes",
        "gauge",
        "Heap bytes the cluster store holds, by kind of object.",
    );
    for (kind, bytes) in [
        ("nodes", s.store.bytes.nodes),
        ("leases", s.store.bytes.leases),
        ("pods", s.store.bytes.pods),
    ] {
        e.sample("node_lifecycled_store_bytes", &[("kind", kind)], bytes);
    }
    e.family(
        "node_lifecycled_store_objects",
        "gauge",
        "Objects the cluster store holds, by kind.",
    );
    for (kind, count) in [
        ("nodes", s.store.nodes),
        ("leases", s.store.leases),
        ("pods", s.store.pods),
    ] {
        e.sample("node_lifecycled_store_objects", &[("kind", kind)], count);
    }
    if let Some(rss) = s.rss_bytes {
        e.family(
            "process_resident_memory_bytes",
            "gauge",
            "Resident memory size in bytes.",
        );
        e.sample("process_resident_memory_bytes", &[], rss);
    }
}
