//! The soak's driver, called every tick by [`run`](super::run): applies each planned fault,
//! feeds the write log and the kubelets' ground truth to the checker, re-creates the pods the
//! daemons deleted, and samples the daemons' CPU wait and resident memory.

use std::fs;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use super::daemons::{self, Daemon};
use super::invariants::{Checker, FaultClass};
use super::schedule::{BurstTarget, Fault, Step};
use crate::kubelets::Kubelets;
use crate::population::PodPlan;
use crate::{RequestMatch, Resource, Verb};

pub(super) struct Run<'a> {
    /// What the daemons' configs say beyond the soak's settings.
    pub(super) policy: daemons::Policy,
    pub(super) sim: &'a crate::SimHandle,
    pub(super) cluster: &'a crate::Cluster,
    pub(super) kubelets: &'a Kubelets,
    pub(super) checker: Checker,
    pub(super) daemons: Vec<(Daemon, PathBuf)>,
    pub(super) faults: std::collections::BTreeMap<String, u64>,
    /// The kubelets' state as last told to the checker.
    pub(super) alive: std::collections::BTreeMap<String, bool>,
    pub(super) pods: Vec<PodPlan>,
    pub(super) recreated: u64,
    pub(super) daemon_exits: Vec<String>,
    pub(super) slow_until: Option<Instant>,
    /// A bad config to replace with the good one at this time.
    pub(super) reload_restore: Option<Instant>,
    pub(super) log_level_debug: bool,
    /// Per daemon pid: run-queue wait read at the last tick.
    pub(super) cpu_wait_seen: std::collections::HashMap<u32, Duration>,
    /// Each fault as applied, with the write log's clock (for reading a violation's story).
    pub(super) fault_log: String,
    /// The fence agent's log (`--fencing`), and how far it has been read.
    pub(super) fence_runs: Option<PathBuf>,
    pub(super) fence_runs_read: usize,
}

impl Run<'_> {
    pub(super) fn apply(&mut self, step: &Step) -> Result<(), String> {
        if !step.kind.is_empty() {
            *self.faults.entry(step.kind.to_string()).or_default() += 1;
        }
        let kind = if step.kind.is_empty() {
            String::new()
        } else {
            format!("  [{}]", step.kind)
        };
        self.fault_log.push_str(&format!(
            "{:>9.3}s {:?}{kind}\n",
            self.cluster.elapsed().as_secs_f64(),
            step.fault
        ));
        let faults = self.sim.faults();
        let now = self.cluster.now();
        let secs = |d: Duration| now + d;
        match &step.fault {
            Fault::KubeletStop(node) => {
                let _ = self.kubelets.stop_heartbeat(node);
            }
            Fault::KubeletResume(node) => {
                let _ = self.kubelets.resume_heartbeat(node);
            }
            Fault::KubeletReboot(node, down) => {
                let _ = self.kubelets.reboot(node, *down);
            }
            Fault::DropWatches => {
                faults.drop_watches();
                self.checker
                    .fault(FaultClass::Reset, "watch-drop", now, now);
            }
            Fault::StallWatches(d) => {
                faults.stall_watches(Some(*d));
                self.checker.quiet_until(secs(*d));
                // A stalled watch is dropped at the watch idle timeout.
                let end = secs(*d + daemons::WATCH_IDLE_TIMEOUT);
                self.checker
                    .fault(FaultClass::Blocking, "watch-stall", now, end);
            }
            Fault::ExpireWatches(n) => {
                faults.fail_next(RequestMatch::verb(Verb::Watch), *n, 410);
                // Taken by the next watch requests: the watches end within the idle timeout.
                let end = secs(daemons::WATCH_IDLE_TIMEOUT);
                self.checker.fault(FaultClass::Reset, "watch-410", now, end);
            }
            Fault::CorruptLines => {
                faults.corrupt_watches();
                self.checker
                    .fault(FaultClass::Reset, "corrupt-line", now, now);
            }
            Fault::ApiRestart(d) => {
                faults.restart(*d);
                self.checker.quiet_until(secs(*d));
                // Longer than the renew deadline less a retry period, the leader may lose its
                // Lease: a takeover, not a mere reconnect.
                let class = if *d < daemons::RENEW_DEADLINE - daemons::RETRY_PERIOD {
                    FaultClass::Reset
                } else {
                    FaultClass::Blocking
                };
                self.checker.fault(class, "api-restart", now, secs(*d));
            }
            Fault::ErrorBurst {
                code,
                count,
                target,
            } => {
                let matchers = match target {
                    BurstTarget::Any => vec![RequestMatch::any()],
                    BurstTarget::NodeWrites => vec![
                        RequestMatch::on(Verb::Update, "nodes"),
                        RequestMatch::on(Verb::Patch, "nodes"),
                    ],
                    BurstTarget::Leases => vec![RequestMatch::resource("leases")],
                };
                for m in matchers {
                    if *code == 429 {
                        faults.throttle_next(m, *count, 1);
                        self.checker.quiet_until(secs(Duration::from_secs(1)));
                    } else {
                        faults.fail_next(m, *count, *code);
                    }
                }
                // A 409 only makes a node write retry; 429 and 500 back the daemons off (the
                // executor up to 3.2 s) once the next requests take them.
                if *code != 409 {
                    let kind = if *code == 429 {
                        "burst-429"
                    } else {
                        "burst-500"
                    };
                    let end = secs(Duration::from_secs(5));
                    self.checker.fault(FaultClass::Blocking, kind, now, end);
                }
            }
            Fault::SlowResponses(delay, length) => {
                faults.delay_responses(RequestMatch::any(), *delay);
                self.slow_until = Some(Instant::now() + *length);
                let end = secs(*length);
                self.checker
                    .fault(FaultClass::Blocking, "slow-responses", now, end);
            }
            Fault::KillLeader(restart) => {
                let holder = self
                    .cluster
                    .get(Resource::Leases, Some("kube-system"), "node-lifecycled")
                    .and_then(|l| {
                        l.pointer("/spec/holderIdentity")?
                            .as_str()
                            .map(str::to_string)
                    });
                let victim = self
                    .daemons
                    .iter_mut()
                    .find(|(d, _)| Some(&d.name) == holder.as_ref())
                    .map(|(d, _)| d);
                if let Some(daemon) = victim {
                    daemon.kill(*restart);
                    let name = daemon.name.clone();
                    self.checker.daemon_ended(&name, now, false);
                    self.checker.leader_killed(now);
                    // The other takes over after the Lease expires, then syncs.
                    let end = secs(daemons::LEASE_DURATION + Duration::from_secs(5));
                    self.checker.quiet_until(end);
                    self.checker
                        .fault(FaultClass::Blocking, "kill-leader", now, end);
                }
            }
            Fault::RestartDaemon { leader, after } => self.restart_daemon(*leader, *after),
            Fault::PauseFencing(length) => {
                // On the wall clock, as `node-lifecycled pause` writes it, and in whole seconds,
                // as the annotation carries it (RFC 3339 without fractions): the pause ends for
                // the daemons at this instant, not at `now + length`.
                let ahead = super::fencing::wall_ahead_ms(now);
                let until = secs(*length).as_unix_millis() as i64 + ahead;
                let until = node_lifecycled::time::Time::from_unix_millis(
                    until.max(0) as u64 / 1000 * 1000,
                );
                let value = super::fencing::pause_value(until);
                if self.set_pause(Some(value)) {
                    let until = super::fencing::wall_to_sim(until, ahead);
                    self.checker.pause_fencing(self.cluster.now(), until);
                }
            }
            Fault::ResumeFencing => {
                if self.set_pause(None) {
                    self.checker.resume_fencing(self.cluster.now());
                }
            }
            Fault::Reload { valid } => {
                for (daemon, kubeconfig) in &self.daemons {
                    let text = if *valid {
                        let level = if self.log_level_debug {
                            "info"
                        } else {
                            "debug"
                        };
                        daemons::config_text(kubeconfig, &daemon.name, level, &self.policy)
                    } else {
                        format!(
                            "{}node_monitor_grace_period_typo = \"5s\"\n",
                            daemons::config_text(kubeconfig, &daemon.name, "info", &self.policy)
                        )
                    };
                    daemon.write_config(&text)?;
                    daemon.reload();
                }
                if *valid {
                    self.log_level_debug = !self.log_level_debug;
                } else {
                    self.reload_restore = Some(Instant::now() + Duration::from_secs(2));
                }
            }
        }
        Ok(())
    }

    pub(super) fn tick(&mut self) -> Result<(), String> {
        if self.slow_until.is_some_and(|t| Instant::now() >= t) {
            self.sim.faults().clear_delays();
            self.slow_until = None;
        }
        // A daemon started again while a `reload-bad` config is on disk would refuse it and
        // exit (a fault of the soak's making, not the daemon's): the good file goes back first.
        if self.reload_restore.is_some() && self.daemons.iter().any(|(d, _)| d.restart_due()) {
            self.reload_restore = Some(Instant::now());
        }
        if self.reload_restore.is_some_and(|t| Instant::now() >= t) {
            self.reload_restore = None;
            let level = if self.log_level_debug {
                "debug"
            } else {
                "info"
            };
            for (daemon, kubeconfig) in &self.daemons {
                daemon.write_config(&daemons::config_text(
                    kubeconfig,
                    &daemon.name,
                    level,
                    &self.policy,
                ))?;
            }
        }
        for (daemon, _) in &mut self.daemons {
            if let Err(e) = daemon.poll() {
                self.daemon_exits.push(e);
            }
        }
        let now = self.cluster.now();
        for (node, alive) in self.alive.iter_mut() {
            let now_alive = self.kubelets.is_alive(node);
            if now_alive != *alive {
                *alive = now_alive;
                self.checker.kubelet(node, now_alive, now);
            }
        }
        let seq = self.checker_seq();
        let records = self.sim.writes_after(seq);
        self.checker.on_writes(&records);
        self.read_fence_runs();
        // A ReplicaSet's work: a pod that is gone comes back on its (live) node.
        for pod in &self.pods {
            if !self.alive.get(&pod.node).copied().unwrap_or(false) {
                continue;
            }
            let exists = self
                .cluster
                .get(Resource::Pods, Some(&pod.namespace), &pod.name)
                .is_some();
            if !exists && self.cluster.create(Resource::Pods, pod.object()).is_ok() {
                self.recreated += 1;
            }
        }
        Ok(())
    }

    /// The name of the daemon holding the leader Lease.
    pub(super) fn leader(&self) -> Option<String> {
        self.cluster
            .get(Resource::Leases, Some("kube-system"), "node-lifecycled")
            .and_then(|l| {
                l.pointer("/spec/holderIdentity")?
                    .as_str()
                    .map(str::to_string)
            })
    }

    /// Writes (or, `None`, takes off) the pause annotation on the leader Lease, as
    /// `node-lifecycled pause` / `resume` do; false (and a line in the fault log) when the
    /// Lease cannot be written.
    fn set_pause(&mut self, value: Option<String>) -> bool {
        let (namespace, name) = super::fencing::LEADER_LEASE;
        let result = self
            .cluster
            .update(Resource::Leases, Some(namespace), name, |lease| {
                let Some(meta) = lease.get_mut("metadata").and_then(|m| m.as_object_mut()) else {
                    return;
                };
                let annotations = meta
                    .entry("annotations")
                    .or_insert_with(|| serde_json::json!({}));
                if let Some(map) = annotations.as_object_mut() {
                    match &value {
                        Some(v) => {
                            map.insert(super::fencing::PAUSE_ANNOTATION.into(), v.clone().into());
                        }
                        None => {
                            map.remove(super::fencing::PAUSE_ANNOTATION);
                        }
                    }
                }
            });
        match result {
            Ok(_) => true,
            Err(e) => {
                self.fault_log.push_str(&format!(
                    "  the pause could not be written: {}\n",
                    e.message
                ));
                false
            }
        }
    }

    /// The fence agent's runs logged since the last read, to the checker.
    pub(super) fn read_fence_runs(&mut self) {
        let Some(path) = &self.fence_runs else {
            return;
        };
        let (runs, offset) = super::fencing::read_runs(path, self.fence_runs_read);
        self.fence_runs_read = offset;
        // The agent stamps its runs with `date`: the wall clock.
        let ahead = super::fencing::wall_ahead_ms(self.cluster.now());
        for (at, node, step) in runs {
            let at = super::fencing::wall_to_sim(at, ahead);
            self.checker.fence_run(&node, step, at);
        }
    }

    pub(super) fn checker_seq(&self) -> u64 {
        self.checker.last_seq()
    }

    /// Each daemon's run-queue wait since the last tick, for the checker.
    pub(super) fn sample_cpu_wait(&mut self) {
        let now = self.cluster.now();
        for (daemon, _) in &self.daemons {
            let Some(pid) = daemon.pid() else { continue };
            let total = runqueue_wait(pid);
            let last = self.cpu_wait_seen.insert(pid, total).unwrap_or(total);
            self.checker
                .cpu_wait(&daemon.name, now, total.saturating_sub(last));
        }
    }

    pub(super) fn sample_rss(&mut self) {
        let now = self.cluster.now();
        for (daemon, _) in &self.daemons {
            let Some(pid) = daemon.pid() else { continue };
            if let Some(reading) = crate::bench::ProcReading::of(pid) {
                self.checker.rss(&daemon.name, pid, reading.rss_kib, now);
            }
        }
    }
}

/// Nanoseconds the process's threads spent ready to run but waiting for a CPU (the second field
/// of /proc/PID/schedstat: the daemon is single-threaded); zero when unreadable.
fn runqueue_wait(pid: u32) -> Duration {
    fs::read_to_string(format!("/proc/{pid}/schedstat"))
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<u64>().ok())
        .map(Duration::from_nanos)
        .unwrap_or_default()
}
