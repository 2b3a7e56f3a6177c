//! `node-lifecycled-sim bench`: the scale benchmark.
//!
//! For each cluster size: the simulated API server and kubelets run in this process (threads),
//! populated directly in the store; the release `node-lifecycled` runs as a child process against
//! it over loopback, so everything read from `/proc/PID` is the daemon's alone. Phases, in order:
//!
//! 1. sync: spawn → `READY=1` on our sd_notify socket; RSS sampled every 100 ms meanwhile.
//! 2. steady: after settling, a window with every kubelet renewing (500 renewals/s at 5,000
//!    nodes): CPU from utime+stime, median RSS, loop wake-ups (SIGUSR1 dumps at both ends).
//!    Then, as long again, the floor: a bare reader of the same Lease watch on this thread
//!    (`floor_reader`), whose CPU per event is what any reader pays in the same conditions.
//! 3. idle: every kubelet silent for a window well inside the grace period, so nothing changes
//!    in the cluster; wake-ups, CPU and context switches of a daemon with nothing to do. Then the
//!    kubelets resume at the phases of a fleet that has run a long time (an even rate).
//! 4. absorb: a burst of pod status updates written as fast as the simulator can, then a marker
//!    pod on a node carrying a foreign NoExecute taint: the daemon's DELETE of the marker says it
//!    has read every event before it.
//! 5. detection: `victims` nodes' kubelets stop at once; for each, the simulator's last heartbeat
//!    (Lease renewTime, or the status heartbeat if later) + grace against the daemon's
//!    Ready=Unknown write, then its NoExecute taint and the first DELETE of a pod that tolerates
//!    nothing.

mod absorb;
mod child;
mod curve;
mod detection;
pub mod floor_reader;
mod idle;
mod mass_failure;
mod options;
mod process;
mod profile;
mod report;
mod sync_steady;

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

pub use child::{DaemonChild, LoopCounters};
pub use curve::{CURVE_NODES, csv, fit, growth, marginal_us_per_event, steady_us_per_event};
pub use process::{ProcReading, RssSampler, clock_ticks_per_second};
pub use report::{
    AbsorbFigures, CallsPerVerdict, IdleFigures, Latencies, SizeReport, median, percentile, table,
};

use super::fixtures;
use super::kubelets::{KubeletConfig, Kubelets};
use super::population::{PodKind, PodPlan, Population, Toleration, WEB_NAMESPACE, zone_of};
use super::scenario::kubeconfig_yaml;
use super::timeline::{FactKind, FactReader};
use super::{Cluster, NODE_LEASE_NAMESPACE, Resource, SimConfig, SimHandle, SimServer, Verb};
use node_lifecycled::config::{Config, format_duration};
use node_lifecycled::time::Time;
pub use options::{BenchOptions, BenchSize, InitialList};
pub use profile::Profile;

/// The node that carries a foreign NoExecute taint and only ever runs marker pods.
pub const SINK_NODE: &str = "bench-sink";
pub const SINK_TAINT: &str = "bench.node-lifecycled.io/sink";
/// `default/bench-evict-<node>`: one pod per victim node that tolerates nothing.
pub const EVICT_POD_PREFIX: &str = "bench-evict-";
const MARKER_POD_PREFIX: &str = "bench-marker-";
/// The daemon's client throttle when the config does not set one (its own default).
const DEFAULT_QPS: f64 = 20.0;
/// RSS sampling period.
const RSS_PERIOD: Duration = Duration::from_millis(100);
/// How often the write log is read while waiting for the daemon.
const POLL: Duration = Duration::from_millis(5);

/// Runs every size in turn, printing progress and each size's table to `out`; returns the
/// figures. `Err` when a run could not happen (the daemon missing or exiting, a timeout).
pub fn run(options: &BenchOptions, out: &mut dyn Write) -> Result<Vec<SizeReport>, String> {
    options.validate()?;
    let root = match &options.work_dir {
        Some(d) => d.clone(),
        None => std::env::temp_dir().join(format!("node-lifecycled-bench-{}", std::process::id())),
    };
    let mut reports = Vec::new();
    for size in &options.sizes {
        let dir = root.join(format!("{}-nodes", size.nodes));
        fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        let report = SizeRun::new(options, size, &dir, out)?.run()?;
        let _ = writeln!(out, "\n{}", table(std::slice::from_ref(&report)));
        reports.push(report);
    }
    Ok(reports)
}

/// One size's run: the simulator, the kubelets, the daemon, and what has been measured so far.
struct SizeRun<'a> {
    options: &'a BenchOptions,
    out: &'a mut dyn Write,
    dir: PathBuf,
    token: String,
    sim: SimHandle,
    cluster: Cluster,
    kubelets: Kubelets,
    /// Every node with a kubelet, the sink included.
    nodes: Vec<String>,
    victims: Vec<String>,
    pods: Vec<PodPlan>,
    report: SizeReport,
    started: Instant,
}

impl<'a> SizeRun<'a> {
    fn new(
        options: &'a BenchOptions,
        size: &BenchSize,
        dir: &Path,
        out: &'a mut dyn Write,
    ) -> Result<SizeRun<'a>, String> {
        let started = Instant::now();
        let token = format!("node-lifecycled-bench-{:08x}", std::process::id());
        let sim = SimServer::start(SimConfig {
            tokens: Some(vec![token.clone()]),
            // As a real API server; the daemon's idle deadline, not bookmarks, detects dead
            // watches (`watch_idle_timeout` in conf/config.toml).
            bookmark_interval: Duration::from_secs(60),
            // The burst must not push a watch out of the history (that would measure a relist).
            history_size: (options.burst_events * 2).max(100_000),
            minor_version: options.initial_list.minor_version(),
            protobuf: options.protobuf,
            ..SimConfig::default()
        })
        .map_err(|e| format!("cannot start the simulated API server: {e}"))?;
        let cluster = sim.cluster();
        let population = Population {
            nodes: size.nodes,
            zones: size.zones,
            pods_per_node: size.pods_per_node - 1,
            daemonset: true,
            ..Population::default()
        };
        let _ = writeln!(
            out,
            "== {} nodes, {} pods per node, {} zones ==",
            size.nodes, size.pods_per_node, size.zones
        );
        let populated = population
            .populate(&cluster)
            .map_err(|e| format!("cannot populate the simulated cluster: {}", e.message))?;
        options.profile.prepare(&cluster, &populated.nodes)?;
        let victims = pick_victims(&populated.nodes, options.victims);
        let mut pods = populated.pods;
        for victim in &victims {
            let pod = PodPlan {
                namespace: WEB_NAMESPACE.into(),
                name: format!("{EVICT_POD_PREFIX}{victim}"),
                node: victim.clone(),
                kind: PodKind::Added,
                toleration: Toleration::None,
            };
            cluster
                .create(Resource::Pods, pod.object())
                .map_err(|e| format!("cannot create {}: {}", pod.key(), e.message))?;
            pods.push(pod);
        }
        let mut sink =
            fixtures::ready_node(SINK_NODE, Some(zone_of(&populated.nodes[0])), cluster.now());
        sink["spec"]["taints"] = json!([{"key": SINK_TAINT, "effect": "NoExecute"}]);
        cluster
            .create(Resource::Nodes, sink)
            .and_then(|_| cluster.renew_lease(SINK_NODE, cluster.now()))
            .map_err(|e| format!("cannot create {SINK_NODE}: {}", e.message))?;
        let mut nodes = populated.nodes;
        nodes.push(SINK_NODE.to_string());
        let kubelets = Kubelets::start(
            cluster.clone(),
            KubeletConfig {
                renew_interval: options.renew_interval,
                seed: options.seed,
                ..KubeletConfig::default()
            },
        )
        .map_err(|e| format!("cannot start the simulated kubelets: {e}"))?;
        for node in &nodes {
            kubelets.add_node(node);
        }
        let report = SizeReport {
            label: format!("{} nodes", size.nodes),
            nodes: size.nodes,
            pods: pods.len(),
            zones: population.zone_count(),
            populate: started.elapsed(),
            victims: victims.len(),
            grace: options.grace,
            qps: options.qps.unwrap_or(DEFAULT_QPS),
            ..SizeReport::default()
        };
        let _ = writeln!(
            out,
            "populated {} nodes (+ {SINK_NODE}) and {} pods in {:.1}s; kubelets renew every {}",
            size.nodes,
            pods.len(),
            report.populate.as_secs_f64(),
            format_duration(options.renew_interval)
        );
        Ok(SizeRun {
            options,
            out,
            dir: dir.to_path_buf(),
            token,
            sim,
            cluster,
            kubelets,
            nodes,
            victims,
            pods,
            report,
            started,
        })
    }

    /// The simulator's write log from `seq` on, `seq` moved past it. A reader polling the log
    /// copies only what is new: a copy of the whole log (65,000 start-up Events at 65,000
    /// nodes) under its lock, every 50 ms, held up the simulator's own writes and showed as
    /// the daemon's latency.
    fn writes_since(&self, seq: &mut u64) -> Vec<crate::WriteRecord> {
        let new = self.sim.writes_after(*seq);
        if let Some(last) = new.last() {
            *seq = last.seq;
        }
        new
    }

    /// Where the write log ends now (for [`Self::writes_since`]).
    fn writes_end(&self) -> u64 {
        self.sim.writes().last().map_or(0, |r| r.seq)
    }

    fn say(&mut self, line: impl AsRef<str>) {
        let _ = writeln!(self.out, "  {}", line.as_ref());
        let _ = self.out.flush();
    }

    fn run(mut self) -> Result<SizeReport, String> {
        let config = self.write_config()?;
        // Populating a large fleet takes longer than a Lease's duration: started at once, the
        // daemon would find every kubelet silent since its Lease was created. It starts once
        // every kubelet has renewed (a renew interval from their start), as in a running
        // cluster.
        let waited = Instant::now();
        let wanted = self.nodes.len() as u64;
        while self.kubelets.stats().lease_renewals < wanted
            && waited.elapsed() < self.options.renew_interval + Duration::from_secs(5)
        {
            std::thread::sleep(Duration::from_millis(200));
        }
        std::thread::sleep(
            self.options
                .renew_interval
                .saturating_sub(waited.elapsed())
                .min(self.options.renew_interval),
        );
        self.say(format!(
            "kubelets renewed {} times in {:.1}s before the daemon starts",
            self.kubelets.stats().lease_renewals,
            waited.elapsed().as_secs_f64()
        ));
        let mut daemon = DaemonChild::spawn(&self.options.daemon, &config, &self.dir)?;
        self.say(format!(
            "daemon {} (pid {}), log {}",
            self.options.daemon.display(),
            daemon.pid,
            daemon.log_path.display()
        ));
        let mut sampler = RssSampler::start(daemon.pid, RSS_PERIOD)
            .map_err(|e| format!("cannot start the RSS sampler: {e}"))?;
        let result = self.measure(&mut daemon, &sampler);
        sampler.stop();
        daemon.stop();
        // For a look afterwards: every write the daemon made, with its time.
        let writes = self.dir.join("writes.log");
        if let Err(e) = fs::write(&writes, self.sim.write_log_text()) {
            self.say(format!("cannot write {}: {e}", writes.display()));
        }
        self.kubelets.shutdown();
        self.sim.shutdown();
        result?;
        self.report.wall = self.started.elapsed();
        Ok(self.report)
    }

    fn measure(&mut self, daemon: &mut DaemonChild, sampler: &RssSampler) -> Result<(), String> {
        self.sync(daemon, sampler)?;
        std::thread::sleep(self.options.settle);
        self.steady(daemon, sampler)?;
        if self.options.mass_failure {
            self.mass_failure(daemon)?;
        } else {
            self.floor()?;
            self.idle(daemon)?;
            self.absorb(daemon)?;
            self.detection(daemon)?;
        }
        self.report.hwm_end_kib = ProcReading::of(daemon.pid).map_or(0, |r| r.hwm_kib);
        Ok(())
    }

    fn write_config(&self) -> Result<PathBuf, String> {
        let kubeconfig = self.dir.join("kubeconfig");
        fs::write(&kubeconfig, kubeconfig_yaml(self.sim.url(), &self.token))
            .map_err(|e| format!("cannot write {}: {e}", kubeconfig.display()))?;
        let o = self.options;
        let mut api = format!("kubeconfig = {:?}\n", kubeconfig.display().to_string());
        if let Some(qps) = o.qps {
            api.push_str(&format!("qps = {qps:?}\n"));
        }
        if let Some(burst) = o.burst {
            api.push_str(&format!("burst = {burst}\n"));
        }
        // The daemon insists a dead watch is noticed well before nodes are judged.
        if o.grace <= Duration::from_secs(30) {
            api.push_str(&format!(
                "watch_idle_timeout = {:?}\n",
                format_duration(o.grace / 2)
            ));
        }
        let (profile_top, profile_tables) = o.profile.config(self.report.zones);
        let text = format!(
            "# written by node-lifecycled-sim bench (profile {}); every other key: the daemon's \
             default\n{profile_top}\
             node_monitor_period = {:?}\n\
             node_monitor_grace_period = {:?}\n\
             node_startup_grace_period = {:?}\n\
             # upstream 0.1/s would take 5.5 min to taint 100 nodes in 3 zones\n\
             node_eviction_rate = {:?}\n\
             log_level = \"info\"\n\
             dump_format = \"json\"\n\n\
             [api]\n{api}\n\
             [leader_election]\nenabled = false\n\n{profile_tables}",
            o.profile.as_str(),
            format_duration(o.monitor_period),
            format_duration(o.grace),
            format_duration(o.grace.max(Duration::from_secs(60))),
            o.eviction_rate,
        );
        let path = self.dir.join("config.toml");
        fs::write(&path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        Config::load(&path).map_err(|e| format!("the bench's daemon config is invalid: {e}"))?;
        Ok(path)
    }
}

/// The daemon's writes (all, and event POSTs) among the records after `from`.
fn daemon_writes(sim: &SimHandle, token: &str, from: usize) -> (usize, usize) {
    let writes = sim.writes();
    let mine: Vec<_> = writes[from.min(writes.len())..]
        .iter()
        .filter(|w| w.identity.token.as_deref() == Some(token))
        .collect();
    let events = mine
        .iter()
        .filter(|w| w.resource == Resource::Events)
        .count();
    (mine.len(), events)
}

fn show(v: Option<i64>) -> String {
    v.map_or_else(|| "—".into(), |v| v.to_string())
}

fn read(daemon: &mut DaemonChild) -> Result<ProcReading, String> {
    daemon.exited_early()?;
    ProcReading::of(daemon.pid).ok_or_else(|| format!("cannot read /proc/{}", daemon.pid))
}

/// The daemon's CPU over `window`, % of one core: from schedstat's nanoseconds where the kernel
/// keeps them, else from the 10 ms ticks of utime + stime.
fn cpu_percent(r0: ProcReading, r1: ProcReading, hz: f64, window: Duration) -> f64 {
    100.0 * cpu_seconds(r0, r1, hz) / window.as_secs_f64().max(1e-9)
}

/// The daemon's CPU seconds between two readings (see [`cpu_percent`]).
fn cpu_seconds(r0: ProcReading, r1: ProcReading, hz: f64) -> f64 {
    if r1.cpu_ns > 0 && r1.cpu_ns >= r0.cpu_ns {
        (r1.cpu_ns - r0.cpu_ns) as f64 / 1e9
    } else {
        r1.cpu_ticks.saturating_sub(r0.cpu_ticks) as f64 / hz
    }
}

/// The kernel's share of the CPU ticks between two readings, % (`None` under a few ticks).
fn kernel_share(r0: ProcReading, r1: ProcReading) -> Option<f64> {
    let all = r1.cpu_ticks.saturating_sub(r0.cpu_ticks);
    let system = r1.system_ticks.saturating_sub(r0.system_ticks);
    (all >= 5).then(|| 100.0 * system as f64 / all as f64)
}

fn time_at(v: &Value, pointer: &str) -> Option<Time> {
    v.pointer(pointer)
        .and_then(Value::as_str)
        .and_then(Time::parse_rfc3339)
}

/// `count` nodes spread evenly over the list (so over the zones, which are contiguous in it).
pub fn pick_victims(nodes: &[String], count: usize) -> Vec<String> {
    let count = count.min(nodes.len());
    (0..count)
        .map(|i| nodes[i * nodes.len() / count.max(1)].clone())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn victims_are_spread_over_every_zone() {
        let nodes = Population {
            nodes: 300,
            zones: 3,
            ..Population::default()
        }
        .node_names();
        let v = pick_victims(&nodes, 30);
        assert_eq!(v.len(), 30);
        for zone in ["z1", "z2", "z3"] {
            assert_eq!(
                v.iter().filter(|n| zone_of(n) == zone).count(),
                10,
                "{zone}"
            );
        }
        let unique: std::collections::HashSet<_> = v.iter().collect();
        assert_eq!(unique.len(), 30);
    }

    #[test]
    fn options_refuse_an_idle_window_that_reaches_grace_and_too_many_victims() {
        let o = BenchOptions::standard(PathBuf::from("x"));
        assert_eq!(o.validate(), Ok(()));
        let long_idle = BenchOptions {
            idle_window: Duration::from_secs(40),
            ..o.clone()
        };
        assert!(long_idle.validate().is_err());
        let tiny = BenchOptions {
            sizes: vec![BenchSize {
                nodes: 100,
                pods_per_node: 3,
                zones: 3,
            }],
            ..o
        };
        assert!(tiny.validate().unwrap_err().contains("victims"));
    }
}
