//! The liveness half of the soak's invariants (see `invariants`): obligations judged once each
//! when they fall due, and the daemons' resident memory.

use std::time::Duration;

use super::invariants::{Checker, UNREACHABLE};
use node_lifecycled::time::Time;

impl Checker {
    /// Judges the liveness obligations due at `now`.
    pub fn check_liveness(&mut self, now: Time) {
        if self.shadow.is_some() {
            // The daemons owe no write: the incumbent acts (`shadow_rules.rs`).
            return;
        }
        self.update_brake(now);
        if !self.holds.is_empty() {
            // A hold runs out with time (`domains.rs`): its dead nodes are due from then.
            self.update_zones(now);
        }
        let allowance = self.limits.liveness_allowance;
        let mut found = Vec::new();
        let dead_in_zone = |zone: &str| {
            self.nodes
                .values()
                .filter(|n| n.zone == zone && !n.alive)
                .count() as u32
        };
        let mut judged_nodes = Vec::new();
        for (name, n) in &self.nodes {
            if n.judged == Some(n.kubelet_since) {
                continue;
            }
            if !n.alive {
                if self
                    .forbidden_since
                    .get(&n.zone)
                    .copied()
                    .flatten()
                    .is_some()
                {
                    continue;
                }
                let allowed = self
                    .allowed_since
                    .get(&n.zone)
                    .copied()
                    .unwrap_or(Time::ZERO);
                let due = (n.kubelet_since.max(self.all_full_exit) + self.limits.grace)
                    .max(allowed)
                    .max(self.quiet_until)
                    + self.limits.taint_interval * dead_in_zone(&n.zone)
                    + allowance
                    + self.starved(n.kubelet_since, now);
                if now <= due {
                    continue;
                }
                judged_nodes.push(name.clone());
                if n.taints.iter().any(|t| t == UNREACHABLE) {
                    self.obligations.dead_nodes_tainted += 1;
                } else {
                    found.push((
                        "dead-node-not-tainted",
                        format!(
                            "{name} silent for {:.1}s without {UNREACHABLE} (Ready={})",
                            now.since(n.kubelet_since).as_secs_f64(),
                            n.ready
                        ),
                    ));
                }
            } else {
                let due = n.kubelet_since.max(self.quiet_until)
                    + self.limits.status_interval
                    + allowance
                    + self.starved(n.kubelet_since, now);
                if now <= due {
                    continue;
                }
                judged_nodes.push(name.clone());
                if n.ready == "Unknown" || n.noexec() {
                    found.push((
                        "recovered-node-tainted",
                        format!(
                            "{name} alive for {:.1}s but Ready={} taints {:?}",
                            now.since(n.kubelet_since).as_secs_f64(),
                            n.ready,
                            n.taints
                        ),
                    ));
                } else {
                    self.obligations.recovered_untainted += 1;
                }
            }
        }
        for name in judged_nodes {
            if let Some(n) = self.nodes.get_mut(&name) {
                n.judged = Some(n.kubelet_since);
            }
        }
        let mut judged_pods = Vec::new();
        for (key, p) in &self.pods {
            let (Some(toleration), Some(n)) = (p.toleration, self.nodes.get(&p.node)) else {
                continue;
            };
            let Some(since) = n.noexec_since else {
                continue;
            };
            if p.judged == Some((p.created, since)) {
                continue;
            }
            let due = since.max(p.created).max(self.quiet_until)
                + toleration
                + allowance
                + self.starved(since, now);
            if now <= due {
                continue;
            }
            judged_pods.push((key.clone(), (p.created, since)));
            if p.deleted.is_some() {
                self.obligations.pods_evicted += 1;
            } else {
                found.push((
                    "pod-not-evicted",
                    format!(
                        "{key} on {} still there {:.1}s after the NoExecute taint, tolerating {}s",
                        p.node,
                        now.since(since).as_secs_f64(),
                        toleration.as_secs()
                    ),
                ));
            }
        }
        for (key, judged) in judged_pods {
            if let Some(p) = self.pods.get_mut(&key) {
                p.judged = Some(judged);
            }
        }
        for (rule, detail) in found {
            self.violation(now, rule, detail);
        }
        self.check_decisions(now);
        self.check_hold_overrun(now);
    }

    /// The longest either daemon waited for a CPU between `from` and `now`: a deadline moves
    /// back by it (the leader could not act meanwhile; which daemon led is not tracked).
    pub(super) fn starved(&self, from: Time, now: Time) -> Duration {
        self.cpu_waits
            .keys()
            .map(|d| self.waited(d, from.since(Time::ZERO), now))
            .max()
            .unwrap_or_default()
    }

    /// One reading of a daemon's resident memory. A process is judged against the limit at
    /// every reading, and for growth at [`Checker::finish`]: once it has lived a minute its RSS
    /// is the baseline; at the end it may not exceed twice that plus 16 MiB.
    pub fn rss(&mut self, daemon: &str, pid: u32, kib: u64, at: Time) {
        let limit = self.limits.rss_limit_kib;
        let track = self.rss.entry((daemon.to_string(), pid)).or_default();
        let started = *track.started.get_or_insert(at);
        if at.since(started) >= Duration::from_secs(60) && track.baseline_kib.is_none() {
            track.baseline_kib = Some(kib);
        }
        track.last_kib = kib;
        track.peak_kib = track.peak_kib.max(kib);
        if kib > limit && !track.reported {
            track.reported = true;
            self.violation(
                at,
                "rss",
                format!("{daemon} (pid {pid}) resident memory {kib} KiB over {limit} KiB"),
            );
        }
    }

    /// End of the run: the growth part of the RSS rule.
    pub fn finish(&mut self, at: Time) {
        let mut found = Vec::new();
        for ((daemon, pid), t) in &self.rss {
            let Some(base) = t.baseline_kib else { continue };
            let lived = t.started.map_or(Duration::ZERO, |s| at.since(s));
            if lived >= Duration::from_secs(300) && t.last_kib > base * 2 + 16 * 1024 {
                found.push(format!(
                    "{daemon} (pid {pid}) resident memory grew from {base} KiB to {} KiB",
                    t.last_kib
                ));
            }
        }
        for detail in found {
            self.violation(at, "rss", detail);
        }
        if self.missed_records > 0 {
            let detail = format!("{} write log records dropped unread", self.missed_records);
            self.violation(at, "write-log", detail);
        }
    }

    /// (daemon, pid, peak KiB, last KiB) per daemon process.
    pub fn rss_summary(&self) -> Vec<(String, u32, u64, u64)> {
        self.rss
            .iter()
            .map(|((d, pid), t)| (d.clone(), *pid, t.peak_kib, t.last_kib))
            .collect()
    }
}
