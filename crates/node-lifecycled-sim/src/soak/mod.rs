//! `node-lifecycled-sim soak`: the real daemon, two instances with leader election, against the
//! simulator for a long time while a seeded random plan injects faults (`schedule`), with
//! safety and liveness invariants checked all along (`invariants`) and a report at the end
//! (`report`).
//!
//! The cluster is small and fast (24 nodes in 3 zones, kubelets beating every second, a 5 s
//! grace period, one taint per second per zone) so that 30 minutes see hundreds of faults. Pods
//! deleted by the daemon are created again (same name, same node) once their kubelet has
//! finished them, as a ReplicaSet would, so evictions keep happening.

pub mod brake_rule;
mod daemons;
mod decisions;
#[cfg(test)]
mod domain_tests;
pub mod domains;
mod driver;
pub mod fencing;
#[cfg(test)]
mod invariant_tests;
pub mod invariants;
pub mod limits;
mod liveness;
pub mod report;
mod safety;
pub mod schedule;
mod shadow;
pub mod shadow_rules;
mod zone_rules;

use std::fs;
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use daemons::Daemon;
use driver::Run;
use invariants::{Checker, DRIVER, KUBELET};
use limits::Limits;
use schedule::PlanShape;

use crate::kubelets::{KubeletConfig, Kubelets};
use crate::population::{PodKind, PodPlan, Population, Toleration, WEB_NAMESPACE, zone_of};
use crate::scenario::kubeconfig_yaml;
use crate::{Identity, Resource, SimConfig, SimServer};

pub use report::SoakReport;

#[derive(Clone, Debug)]
pub struct SoakOptions {
    pub duration: Duration,
    pub seed: u64,
    /// The `node-lifecycled` binary.
    pub daemon: PathBuf,
    /// Where configs and logs go (default: a new directory under the system temp dir).
    pub dir: Option<PathBuf>,
    pub nodes: usize,
    pub zones: usize,
    /// Disruption domains by label, pods kept Ready, held dark domains, a pool (`domains.rs`).
    pub partitions: bool,
    /// Set (by a SIGINT/SIGTERM handler) to end the run early: the daemons are stopped and
    /// the run reports an error. `None`: the run goes to its end.
    pub stop: Option<Arc<AtomicBool>>,
    /// The daemons run with `max_unhealthy` (and a 2 s `disruption_cooldown`), judged by
    /// `decision-under-brake`. `None`: no brake, as before.
    pub brake: Option<usize>,
    /// The daemons' config has `[[pool]]`s (zone z1: its own brake at 50 % and
    /// `default_toleration_seconds`, which the soak's pods, tolerating other than the admission
    /// default, ignore; zone z2: `mark_pods_not_ready = false`).
    pub pools: bool,
    /// The daemons fence a quarter of the nodes through a fence agent that escalates and never
    /// succeeds, and the plan pauses fencing around fence steps (`fencing.rs`).
    pub fencing: bool,
    /// The simulator's incumbent (`crate::incumbent`) writes; the daemons run in shadow mode,
    /// each with its history file, and are restarted with SIGTERM too (`shadow_rules.rs`).
    pub shadow: bool,
}

impl SoakOptions {
    pub fn new(duration: Duration, seed: u64, daemon: PathBuf) -> SoakOptions {
        SoakOptions {
            duration,
            seed,
            daemon,
            dir: None,
            nodes: 24,
            zones: 3,
            partitions: false,
            stop: None,
            brake: None,
            pools: false,
            fencing: false,
            shadow: false,
        }
    }
}

/// Web pods' NoExecute tolerations, in turn node by node: none (evicted at once) to 20 s.
const TOLERATIONS: [Toleration; 5] = [
    Toleration::None,
    Toleration::Seconds(3),
    Toleration::Seconds(6),
    Toleration::Seconds(10),
    Toleration::Seconds(20),
];
const WEB_PODS_PER_NODE: usize = 2;
/// The driver's loop period: faults applied, write log read, pods re-created.
const TICK: Duration = Duration::from_millis(100);
const DAEMON_NAMES: [&str; 2] = ["daemon-a", "daemon-b"];

/// Sets the label `key=value` on `node`.
fn label(cluster: &crate::Cluster, node: &str, key: &str, value: &str) -> Result<(), String> {
    cluster
        .update(Resource::Nodes, None, node, |v| {
            if let Some(meta) = v.get_mut("metadata").and_then(|m| m.as_object_mut()) {
                let labels = meta
                    .entry("labels")
                    .or_insert_with(|| serde_json::json!({}));
                if let Some(labels) = labels.as_object_mut() {
                    labels.insert(key.into(), serde_json::json!(value));
                }
            }
        })
        .map(|_| ())
        .map_err(|e| format!("cannot label node {node}: {}", e.message))
}

/// The disruption domains of `--partitions` for the plan: node indices by site, with each
/// site's `hold_max`.
fn site_plan(nodes: &[String]) -> Vec<schedule::Site> {
    let holds = domains::holds();
    let mut sites: Vec<(String, schedule::Site)> = Vec::new();
    for (i, node) in nodes.iter().enumerate() {
        let domain = domains::domain_of(node);
        match sites.iter_mut().find(|(d, _)| *d == domain) {
            Some((_, site)) => site.nodes.push(i),
            None => {
                let hold_max = holds.get(&domain).copied().flatten();
                sites.push((
                    domain,
                    schedule::Site {
                        nodes: vec![i],
                        hold_max,
                    },
                ));
            }
        }
    }
    sites.into_iter().map(|(_, s)| s).collect()
}

/// Runs the soak; `Err` when it could not run (simulator, daemon binary, files).
pub fn run(options: &SoakOptions, out: &mut dyn Write) -> Result<SoakReport, String> {
    let dir = match &options.dir {
        Some(d) => d.clone(),
        None => std::env::temp_dir().join(format!(
            "node-lifecycled-soak-{}-seed{}",
            std::process::id(),
            options.seed
        )),
    };
    fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let tokens: Vec<String> = DAEMON_NAMES
        .iter()
        .map(|n| format!("soak-{n}-{:x}", options.seed))
        .collect();
    let sim = SimServer::start(SimConfig {
        tokens: Some(tokens.clone()),
        bookmark_interval: Duration::from_secs(1),
        log_direct_writes: true,
        ..SimConfig::default()
    })
    .map_err(|e| format!("cannot start the simulated API server: {e}"))?;
    let cluster = sim.cluster().with_identity(Identity::direct(DRIVER));
    let population = Population {
        nodes: options.nodes,
        zones: options.zones,
        pods_per_node: 0,
        daemonset: true,
        ..Population::default()
    };
    let populated = population
        .populate(&cluster)
        .map_err(|e| format!("cannot populate the simulated cluster: {}", e.message))?;
    let mut pods = populated.pods.clone();
    for (i, node) in populated.nodes.iter().enumerate() {
        for j in 0..WEB_PODS_PER_NODE {
            let index = i * WEB_PODS_PER_NODE + j;
            pods.push(PodPlan {
                namespace: WEB_NAMESPACE.into(),
                name: format!("web-{index}"),
                node: node.clone(),
                kind: PodKind::Web,
                toleration: TOLERATIONS[index % TOLERATIONS.len()],
            });
        }
    }
    for pod in pods.iter().filter(|p| p.kind == PodKind::Web) {
        cluster
            .create(Resource::Pods, pod.object())
            .map_err(|e| format!("cannot create pod {}: {}", pod.key(), e.message))?;
    }
    let kubelets = Kubelets::start(
        sim.cluster().with_identity(Identity::direct(KUBELET)),
        KubeletConfig {
            renew_interval: Duration::from_secs(1),
            status_update_interval: Duration::from_secs(1),
            status_report_interval: Duration::from_secs(60),
            jitter: 0.04,
            finalize_interval: Duration::from_millis(500),
            seed: options.seed,
        },
    )
    .map_err(|e| format!("cannot start the simulated kubelets: {e}"))?;
    for node in &populated.nodes {
        kubelets.add_node(node);
    }

    let max_delay = Duration::from_millis(schedule::MAX_INJECTED_DELAY_MS);
    let mut limits = Limits::for_soak(daemons::GRACE, daemons::EVICTION_RATE, max_delay);
    if options.brake.is_some() || options.pools {
        limits.brake = Some(brake_rule::BrakeRule {
            max_unhealthy: options.brake,
            cooldown: daemons::BRAKE_COOLDOWN,
            zones: if options.pools {
                vec![("z1".to_string(), daemons::POOL_BRAKE_PERCENT)]
            } else {
                Vec::new()
            },
        });
    }
    let policy = daemons::Policy {
        brake: options.brake,
        pools: options.pools,
        partitions: options.partitions,
        fencing: if options.fencing {
            Some(fencing::write_agent(&dir)?)
        } else {
            None
        },
        shadow: options.shadow.then(|| dir.clone()),
    };
    let fence_nodes = if options.fencing {
        fencing::fence_nodes(populated.nodes.len())
    } else {
        Vec::new()
    };
    for &i in &fence_nodes {
        label(&cluster, &populated.nodes[i], fencing::FENCE_LABEL, "soak")?;
    }
    let start = cluster.now();
    let pairs: Vec<(&str, &str)> = tokens
        .iter()
        .map(String::as_str)
        .zip(DAEMON_NAMES)
        .collect();
    let mut checker = Checker::new(limits, &pairs, &populated.nodes, start);
    // The writer of record under --shadow: upstream's batch rules on the daemons' timing.
    let incumbent = if options.shadow {
        checker.use_shadow();
        let config = crate::incumbent::IncumbentConfig {
            period: Duration::from_secs(1),
            grace: daemons::GRACE,
            eviction_rate: daemons::EVICTION_RATE,
            large_cluster_size_threshold: 50,
            unhealthy_zone_threshold: 0.55,
        };
        Some(
            crate::incumbent::Incumbent::start(&cluster, config)
                .map_err(|e| format!("cannot start the incumbent: {e}"))?,
        )
    } else {
        None
    };
    if options.partitions {
        checker.use_domains(domains::domain_of, domains::holds(), start);
        checker.keep_pods_ready_in(domains::keeping_pods_ready());
        for node in &populated.nodes {
            label(&cluster, node, domains::SITE_LABEL, domains::site_of(node))?;
        }
    }
    for pod in &pods {
        let toleration = match pod.toleration {
            Toleration::None => Some(Duration::ZERO),
            Toleration::Seconds(s) => Some(Duration::from_secs(s)),
            Toleration::Forever => None,
        };
        checker.add_pod(&pod.key(), &pod.node, toleration, start);
    }

    let mut daemons = Vec::new();
    for (name, token) in DAEMON_NAMES.iter().zip(&tokens) {
        let kubeconfig = dir.join(format!("{name}.kubeconfig"));
        fs::write(&kubeconfig, kubeconfig_yaml(sim.url(), token))
            .map_err(|e| format!("cannot write {}: {e}", kubeconfig.display()))?;
        let mut daemon = Daemon::new(name, &options.daemon, &dir);
        daemon.write_config(&daemons::config_text(&kubeconfig, name, "info", &policy))?;
        let _ = fs::remove_file(&daemon.log);
        if options.shadow {
            let _ = fs::remove_file(daemons::shadow_paths(&dir, name).0);
        }
        daemon.start()?;
        daemons.push((daemon, kubeconfig));
    }

    let mut zones: Vec<Vec<String>> = Vec::new();
    for node in &populated.nodes {
        match zones.last_mut() {
            Some(z) if zone_of(&z[0]) == zone_of(node) => z.push(node.clone()),
            _ => zones.push(vec![node.clone()]),
        }
    }
    let shape = PlanShape {
        zones,
        duration: options.duration,
        warmup: Duration::from_secs(10).min(options.duration / 4),
        cooldown: Duration::from_secs(40).min(options.duration / 3),
        max_single_down: (options.nodes / 4).max(1),
        grace: daemons::GRACE,
        tolerations: populated
            .nodes
            .iter()
            .map(|node| {
                pods.iter()
                    .filter(|p| &p.node == node && p.kind == PodKind::Web)
                    .filter_map(|p| match p.toleration {
                        Toleration::None => Some(Duration::ZERO),
                        Toleration::Seconds(s) => Some(Duration::from_secs(s)),
                        Toleration::Forever => None,
                    })
                    .collect()
            })
            .collect(),
        sites: if options.partitions {
            site_plan(&populated.nodes)
        } else {
            Vec::new()
        },
        fence_nodes,
        fence_after: fencing::AFTER,
        shadow: options.shadow,
    };
    let steps = schedule::plan(options.seed, &shape);
    let _ = writeln!(
        out,
        "soak seed {}: {} nodes in {} zones, {} pods, 2 daemons ({}), {} planned steps over {}s\n  dir {}",
        options.seed,
        populated.nodes.len(),
        shape.zones.len(),
        pods.len(),
        options.daemon.display(),
        steps.len(),
        options.duration.as_secs(),
        dir.display()
    );

    let mut run = Run {
        sim: &sim,
        cluster: &cluster,
        kubelets: &kubelets,
        checker,
        daemons,
        faults: Default::default(),
        alive: populated.nodes.iter().map(|n| (n.clone(), true)).collect(),
        pods,
        recreated: 0,
        daemon_exits: Vec::new(),
        slow_until: None,
        reload_restore: None,
        log_level_debug: false,
        fault_log: String::new(),
        cpu_wait_seen: Default::default(),
        fence_runs: options.fencing.then(|| dir.join(fencing::RUNS_FILE)),
        fence_runs_read: 0,
        policy,
    };
    let began = Instant::now();
    let mut next = 0;
    let mut last_liveness = Instant::now();
    let mut last_rss = Instant::now();
    let mut last_progress = Instant::now();
    let mut last_report = Instant::now();
    let mut printed = 0;
    while began.elapsed() < options.duration {
        if options
            .stop
            .as_ref()
            .is_some_and(|s| s.load(Ordering::Relaxed))
        {
            // Returning drops the daemons, which kills them: no daemon outlives its soak.
            return Err(format!(
                "stopped by a signal after {}s (both daemons killed; run directory {})",
                began.elapsed().as_secs(),
                dir.display()
            ));
        }
        while let Some(step) = steps.get(next) {
            if step.at > began.elapsed() {
                break;
            }
            run.apply(step)?;
            next += 1;
        }
        run.tick()?;
        run.sample_cpu_wait();
        if last_liveness.elapsed() >= Duration::from_secs(1) {
            last_liveness = Instant::now();
            run.checker.check_liveness(cluster.now());
        }
        run.shadow_reports(&mut last_report);
        if last_rss.elapsed() >= Duration::from_secs(5) {
            last_rss = Instant::now();
            run.sample_rss();
        }
        // Violations as they happen, so a long run can be looked into while it goes on.
        for v in run.checker.violations.iter().skip(printed) {
            let _ = writeln!(out, "  VIOLATION {} {}: {}", v.at, v.rule, v.detail);
        }
        printed = run.checker.violations.len();
        if last_progress.elapsed() >= Duration::from_secs(60) {
            last_progress = Instant::now();
            let _ = writeln!(
                out,
                "  {:>5}s  {} faults, {} violations",
                began.elapsed().as_secs(),
                run.faults.values().sum::<u64>(),
                run.checker.violations.len()
            );
        }
        std::thread::sleep(TICK);
    }
    run.tick()?;
    let end = cluster.now();
    run.checker.check_liveness(end);
    run.checker.finish(end);
    run.final_reports();
    let stopped: Vec<bool> = run.daemons.iter_mut().map(|(d, _)| d.stop()).collect();
    let clean_stops = stopped.iter().filter(|&&s| s).count();
    run.judge_shadow(&stopped);
    for v in run.checker.violations.iter().skip(printed) {
        let _ = writeln!(out, "  VIOLATION {} {}: {}", v.at, v.rule, v.detail);
    }
    let report = SoakReport {
        seed: options.seed,
        duration: options.duration,
        nodes: populated.nodes.len(),
        zones: shape.zones.len(),
        pods: run.pods.len(),
        faults: run.faults.clone(),
        decisions: run.checker.decisions.clone(),
        obligations: run.checker.obligations(),
        violations: run.checker.violations.clone(),
        rss: run.checker.rss_summary(),
        daemon_exits: run.daemon_exits.clone(),
        pods_recreated: run.recreated,
        daemon_starts: run
            .daemons
            .iter()
            .map(|(d, _)| (d.name.clone(), d.starts))
            .collect(),
        clean_stops,
        dir,
        policy_args: format!(
            "{}{}{}{}{}",
            options
                .brake
                .map(|n| format!(" --brake {n}"))
                .unwrap_or_default(),
            if options.pools { " --pools" } else { "" },
            if options.fencing { " --fencing" } else { "" },
            if options.partitions {
                " --partitions"
            } else {
                ""
            },
            if options.shadow { " --shadow" } else { "" }
        ),
    };
    // Every write of the run, the kubelets' included, for reading a violation's story.
    let writes = report.dir.join("writes.log");
    if let Err(e) = fs::write(&writes, sim.write_log_text()) {
        let _ = writeln!(out, "cannot write {}: {e}", writes.display());
    }
    let faults = report.dir.join("faults.log");
    if let Err(e) = fs::write(&faults, &run.fault_log) {
        let _ = writeln!(out, "cannot write {}: {e}", faults.display());
    }
    drop(incumbent);
    kubelets.shutdown();
    sim.shutdown();
    Ok(report)
}
