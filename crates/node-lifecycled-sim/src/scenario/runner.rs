//! `node-lifecycled-sim run`: the simulated cluster in this process, the real daemon as a child
//! process talking to it over loopback, the scenario's steps played on time, and the daemon's
//! writes printed as a timeline while they happen; then a per-zone summary and the verdict of
//! each expectation.

use std::fs::{self, File};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::time::{Duration, Instant};

use super::daemon::{DaemonLog, daemon_config, kubeconfig_yaml, spawn_daemon, stop_daemon};
use super::play::Play;
use super::{Check, Outcome, Scenario, evaluate, zone_summary};
use crate::kubelets::Kubelets;
use crate::timeline::{Fact, FactKind, FactReader, Timeline};
use crate::{SimConfig, SimServer};
use node_lifecycled::config::Config;

#[derive(Clone, Debug)]
pub struct RunOptions {
    /// The `node-lifecycled` binary.
    pub daemon: PathBuf,
    /// A daemon config file whose keys override the demo's (its `[api]` connection is replaced).
    pub config: Option<PathBuf>,
    /// Where the kubeconfig, the daemon config and the daemon log go (default: a new directory
    /// under the system temp dir).
    pub work_dir: Option<PathBuf>,
}

#[derive(Debug)]
pub struct RunReport {
    pub passed: bool,
    pub outcomes: Vec<Outcome>,
    pub facts: Vec<Fact>,
    pub summary: String,
    pub daemon_log: PathBuf,
    /// `None` when the daemon had to be killed.
    pub daemon_exit: Option<ExitStatus>,
    /// With an incumbent: the shadow report, as text.
    pub shadow_report: Option<String>,
}

/// The taint keys the expectations name: followed in the daemon's writes as its own are, so a
/// scenario can check that a write keeps another writer's taint (`readiness.k8s.io/…`). Such a
/// taint shows as added at the daemon's first write of the node: that write carries it.
fn expected_taint_keys(scenario: &Scenario) -> Vec<String> {
    scenario
        .expects
        .iter()
        .filter_map(|e| match &e.check {
            Check::Taint(t) | Check::Untaint(t) | Check::TaintAtEnd(t) => Some(t),
            _ => None,
        })
        .filter_map(|t| t.split(['=', ':']).next())
        .map(str::to_string)
        .collect()
}

fn work_dir(options: &RunOptions) -> io::Result<PathBuf> {
    let dir = match &options.work_dir {
        Some(d) => d.clone(),
        None => {
            // A folder no other run has: runs in one process (tests play scenarios at once)
            // are told apart by a counter, processes by their pid.
            static RUNS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
            loop {
                let run = RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let dir = std::env::temp_dir()
                    .join(format!("node-lifecycled-sim-{}-{run}", std::process::id()));
                match fs::create_dir(&dir) {
                    Ok(()) => return Ok(dir),
                    Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                    Err(e) => return Err(e),
                }
            }
        }
    };
    fs::create_dir_all(&dir)?;
    Ok(dir)
}

fn token() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!(
        "node-lifecycled-{:016x}",
        (nanos as u64) ^ u64::from(std::process::id())
    )
}

/// Plays `scenario` and prints as it goes to `out`; `Err` when the run itself could not happen
/// (bad config, daemon missing or exited early), `Ok` with the verdict otherwise.
pub fn run(
    scenario: &Scenario,
    options: &RunOptions,
    out: &mut dyn Write,
) -> Result<RunReport, String> {
    let dir = work_dir(options).map_err(|e| format!("cannot create a work directory: {e}"))?;
    let token = token();
    let sim = SimServer::start(SimConfig {
        tokens: Some(vec![token.clone()]),
        bookmark_interval: Duration::from_secs(1),
        ..SimConfig::default()
    })
    .map_err(|e| format!("cannot start the simulated API server: {e}"))?;
    let cluster = sim.cluster();
    let populated = scenario
        .population
        .populate(&cluster)
        .map_err(|e| format!("cannot populate the simulated cluster: {}", e.message))?;
    let kubelets = Kubelets::start(cluster.clone(), scenario.kubelet.clone())
        .map_err(|e| format!("cannot start the simulated kubelets: {e}"))?;
    for node in &populated.nodes {
        kubelets.add_node(node);
    }

    let kubeconfig = dir.join("kubeconfig");
    fs::write(&kubeconfig, kubeconfig_yaml(sim.url(), &token))
        .map_err(|e| format!("cannot write {}: {e}", kubeconfig.display()))?;
    let user = match &options.config {
        Some(path) => {
            let text = fs::read_to_string(path)
                .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
            Some(
                toml::from_str::<toml::Table>(&text)
                    .map_err(|e| format!("{}: {}", path.display(), e.message()))?,
            )
        }
        None => None,
    };
    let mut config = daemon_config(&scenario.daemon, user.as_ref(), &kubeconfig)?;
    if scenario.incumbent {
        super::shadow::configure(&mut config, &dir);
    }
    let config_path = dir.join("config.toml");
    let config_text = format!(
        "# written by node-lifecycled-sim for scenario {:?}\n{}",
        scenario.name,
        toml::to_string(&config).map_err(|e| format!("cannot write the daemon config: {e}"))?
    );
    fs::write(&config_path, &config_text)
        .map_err(|e| format!("cannot write {}: {e}", config_path.display()))?;
    // The daemon would refuse a bad file with exit 78; saying so here names the scenario.
    let checked = Config::load(&config_path).map_err(|e| {
        format!(
            "the daemon config made from scenario {:?} is invalid: {e}",
            scenario.name
        )
    })?;

    let log_path = dir.join("node-lifecycled.log");
    let log = File::create(&log_path)
        .map_err(|e| format!("cannot create {}: {e}", log_path.display()))?;
    let pods_total = populated.pods.len();
    let _ = writeln!(
        out,
        "scenario {}: {}\n  cluster  {} nodes in {} zones, {pods_total} pods; kubelets renew every {}; API {}\n  daemon   {} (grace {}, eviction rate {}/s)\n  config   {}\n  log      {}\n",
        scenario.name,
        scenario.description,
        populated.nodes.len(),
        scenario.population.zone_count(),
        node_lifecycled::config::format_duration(scenario.kubelet.renew_interval),
        sim.url(),
        options.daemon.display(),
        node_lifecycled::config::format_duration(checked.controller.node_monitor_grace_period),
        checked.controller.node_eviction_rate.as_f64(),
        config_path.display(),
        log_path.display(),
    );

    let incumbent = match scenario.incumbent {
        true => {
            let _ = writeln!(
                out,
                "  incumbent  kube-controller-manager's batch rules beside the daemon, which runs in shadow mode\n"
            );
            Some(super::shadow::start(&cluster, &checked)?)
        }
        false => None,
    };
    let mut child = spawn_daemon(&options.daemon, &config_path, log)?;
    let start_elapsed = cluster.elapsed();
    let mut play = Play {
        sim: &sim,
        cluster: &cluster,
        kubelets: &kubelets,
        pods: populated.pods.clone(),
        reader: FactReader::new(Some(&token), start_elapsed).owning(
            checked
                .controller
                .condition_taints
                .iter()
                .map(|c| c.key.to_string())
                .chain(expected_taint_keys(scenario)),
        ),
        timeline: Timeline::default(),
        facts: Vec::new(),
        start: Instant::now(),
        log: DaemonLog::open(&log_path),
    };
    let mut next_step = 0;
    let mut early_exit = None;
    while play.start.elapsed() < scenario.duration {
        while let Some(step) = scenario.steps.get(next_step) {
            if step.at > play.start.elapsed() {
                break;
            }
            play.step(&step.action, out);
            next_step += 1;
        }
        play.catch_up(out);
        if let Ok(Some(status)) = child.try_wait() {
            early_exit = Some(status);
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    if let Some(status) = early_exit {
        play.catch_up(out);
        return Err(format!(
            "node-lifecycled exited early ({status}) at t={:.1}s; last lines of {}:\n{}",
            play.start.elapsed().as_secs_f64(),
            log_path.display(),
            crate::log_tail(&log_path, 10)
        ));
    }
    let shadow = incumbent
        .as_ref()
        .and_then(|_| super::shadow::socket(&checked));
    let shadow_report = shadow.map(|socket| {
        let text = super::shadow::report(&socket, "text");
        let json = super::shadow::report(&socket, "json");
        (
            text,
            serde_json::from_str(&json).unwrap_or(serde_json::Value::Null),
        )
    });
    drop(incumbent);
    let daemon_exit = stop_daemon(&mut child);
    play.catch_up(out);
    let Play {
        mut facts,
        pods,
        reader,
        mut timeline,
        ..
    } = play;
    facts.extend(fence_runs(&dir, scenario.duration));
    for line in timeline.finish() {
        let _ = writeln!(out, "{line}");
    }
    drop(kubelets);

    let summary = zone_summary(&facts, &populated.nodes, &pods);
    let mut outcomes = evaluate(&scenario.expects, &facts, &pods, reader.controller_taints());
    if let Some((text, json)) = &shadow_report {
        let _ = writeln!(out, "\n{text}");
        outcomes.extend(super::shadow::judge(&scenario.shadow_expects, json));
    }
    let passed = outcomes.iter().all(|o| o.held);
    let _ = writeln!(
        out,
        "\nsummary after {:.0}s:\n{summary}",
        scenario.duration.as_secs_f64()
    );
    let daemon_writes = facts
        .iter()
        .filter(|f| !matches!(f.kind, FactKind::Step(_)))
        .count();
    if daemon_writes == 0 && !scenario.incumbent {
        let _ = writeln!(
            out,
            "the daemon made no writes at all: check its log ({}); is it wired to the API?\n",
            log_path.display()
        );
    }
    let _ = writeln!(out, "expectations:");
    for outcome in &outcomes {
        let _ = writeln!(out, "  {outcome}");
    }
    let held = outcomes.iter().filter(|o| o.held).count();
    let _ = writeln!(
        out,
        "\n{}: {held} of {} expectations held",
        if passed { "PASS" } else { "FAIL" },
        outcomes.len()
    );
    sim.shutdown();
    Ok(RunReport {
        passed,
        outcomes,
        facts,
        summary,
        daemon_log: log_path,
        daemon_exit,
        shadow_report: shadow_report.map(|(text, _)| text),
    })
}

/// The runs a scenario's fence command recorded, one line `NODE_NAME …` each.
fn fence_runs(dir: &Path, end: Duration) -> Vec<Fact> {
    let text = fs::read_to_string(dir.join("fence-runs")).unwrap_or_default();
    text.lines()
        .filter_map(|line| line.split_whitespace().next())
        .map(|node| Fact {
            t: end,
            kind: FactKind::FenceRun {
                node: node.to_string(),
            },
        })
        .collect()
}
