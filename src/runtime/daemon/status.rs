//! What the daemon tells about itself, assembled from its parts: the STATUS line, the snapshot
//! behind the dump and the metrics, readiness, and the control socket's answers. Owns no state:
//! what shows it is `observability.rs`.

use super::Daemon;
use super::kinds::Watch;
use crate::observe::ask;
use crate::observe::explain::Acting;
use crate::observe::{
    ActionCount, BuildInfo, ClientSnapshot, DaemonSnapshot, LoopSnapshot, ReflectorSnapshot,
    RequestCount, StoreMemory,
};
use crate::runtime::control_socket::ControlEndpoints;
use crate::runtime::metrics_server::{Endpoints, Readiness};
use crate::runtime::state_dump::read_rss_bytes;
use crate::time::Time;

pub(super) fn http_method(verb: &str) -> &'static str {
    match verb {
        "get" => "GET",
        "patch" => "PATCH",
        "delete" => "DELETE",
        "create" => "POST",
        _ => "OTHER",
    }
}

impl Endpoints for Daemon {
    fn metrics(&self, now: Time, event_loop: LoopSnapshot) -> String {
        crate::observe::metrics::render(&self.snapshot(now, event_loop))
    }

    fn readiness(&self) -> Readiness {
        Readiness::of(
            self.informers.all_synced(),
            &self.leadership.snapshot(self.clock.now()),
        )
    }
}

/// The daemon lent to the control socket, with the loop's figures of the moment.
pub(super) struct Asked<'a> {
    pub(super) daemon: &'a Daemon,
    pub(super) event_loop: LoopSnapshot,
}

impl ControlEndpoints for Asked<'_> {
    fn answer(&self, request: &str, now: Time) -> String {
        let d = self.daemon;
        if request.split_whitespace().next() == Some("shadow") {
            return match &d.shadow {
                Some(shadow) => shadow.answer(request, now),
                None => crate::observe::shadow::report::answer(request, None, now),
            };
        }
        let acting = if d.leadership.acting() {
            Acting::Yes
        } else if !d.informers.all_synced() {
            Acting::NotSynced
        } else {
            Acting::Follower
        };
        ask::answer(
            request,
            &d.controllers,
            d.observability.decision_log(),
            acting,
            now,
            || d.snapshot(now, self.event_loop),
        )
    }
}

impl Daemon {
    /// `leader|follower|dry-run, N nodes, M not Ready, K pending evictions`, or what the
    /// daemon is waiting for.
    pub(super) fn status_line(&self) -> String {
        if !self.informers.all_synced() {
            let waiting = self.informers.unsynced();
            let error = self
                .informers
                .reflector_stats()
                .into_iter()
                .find_map(|(_, stats)| stats.last_error);
            return match error {
                Some(e) => format!(
                    "waiting for the initial sync of {} from {}: {e}",
                    waiting.join(", "),
                    self.informers.base_url()
                ),
                None => format!("waiting for the initial sync of {}", waiting.join(", ")),
            };
        }
        let role = match (self.leadership.acting(), self.executor.is_dry_run()) {
            (true, true) if self.shadow.is_some() => "shadow",
            (true, true) => "dry-run",
            (true, false) => "leader",
            (false, _) => "follower",
        };
        let store = self.controllers.store();
        let (nodes, not_ready) = (store.node_count(), store.nodes_not_ready());
        debug_assert_eq!(
            not_ready,
            store.nodes().filter(|n| n.is_not_ready()).count(),
            "the store's count of nodes not Ready is the count of them"
        );
        let pending = self
            .controllers
            .eviction()
            .filter(|_| self.leadership.acting())
            .map_or(0, |e| e.pending_len());
        format!("{role}, {nodes} nodes, {not_ready} not Ready, {pending} pending evictions")
    }

    pub(super) fn refresh_status(&mut self) {
        let line = self.status_line();
        self.observability.set_status(line);
    }

    /// Recomputes `STATUS=` on wake-ups the loop makes anyway: each one until the initial sync
    /// (few: list pages and retries, and what we wait for or fail on must show at once), then at
    /// most every `STATUS_PERIOD`.
    pub(super) fn maybe_refresh_status(&mut self, now: Time) {
        if self
            .observability
            .status_due(now, self.informers.all_synced())
        {
            self.refresh_status();
        }
    }

    pub(super) fn client_snapshot(&self) -> ClientSnapshot {
        let stats = self.executor.stats();
        let requests = stats
            .requests
            .iter()
            .map(|((verb, code), count)| RequestCount {
                verb: http_method(verb).to_string(),
                code: if *code == 0 {
                    "no_answer".to_string()
                } else {
                    code.to_string()
                },
                count: *count,
            })
            .collect();
        let dry_run_actions = self
            .executor
            .dry_run_log()
            .counts()
            .map(|(kind, count)| ActionCount {
                kind: kind.as_str().to_string(),
                count,
            })
            .collect();
        let request_durations = stats
            .request_durations
            .iter()
            .map(|(verb, h)| (http_method(verb).to_string(), h.clone()))
            .collect();
        ClientSnapshot {
            requests,
            request_durations,
            throttle_wait: stats.throttle_wait,
            dry_run_actions,
        }
    }

    /// Everything the dump and `/metrics` show, at `now`.
    pub(super) fn snapshot(&self, now: Time, event_loop: LoopSnapshot) -> DaemonSnapshot {
        let (controller, evictions) = self.controllers.dump(now);
        DaemonSnapshot {
            now,
            build: BuildInfo::current(self.clock.started_at(), self.clock.uptime()),
            config_path: self.config_path.clone(),
            config: self.config.clone(),
            status: self.observability.status().to_string(),
            leadership: self.leadership.snapshot(now),
            reflectors: self
                .informers
                .reflector_stats()
                .into_iter()
                .map(|(w, mut stats)| {
                    // The reflector counts its last full state; the store holds the objects.
                    let store = self.controllers.store();
                    stats.objects = match w {
                        Watch::Nodes => store.node_count(),
                        Watch::Leases => store.lease_count(),
                        Watch::Pods => store.pod_count(),
                    };
                    let down_since = self.informers.down_since(w);
                    ReflectorSnapshot::from_stats(w.resource(), &stats, down_since, now)
                })
                .collect(),
            controller,
            evictions,
            pod_deletion_duration: self
                .controllers
                .eviction()
                .map(|e| e.metrics.pod_deletion_duration.clone()),
            health_timings: self.observability.health_timings().clone(),
            client: self.client_snapshot(),
            rss_bytes: read_rss_bytes(),
            store: StoreMemory::of(self.controllers.store()),
            event_loop,
            fencing: self.config.fencing.enabled.then(|| self.fences.metrics()),
            decisions: self.observability.decision_log().decided.clone(),
            pause: self.controllers.pause(now).cloned(),
            fence_agent_ok: self.fences.agent_ok(),
            shadow: self.shadow.as_ref().map(|s| s.figures()),
        }
    }
}
