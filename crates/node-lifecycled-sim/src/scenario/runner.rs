//! `node-lifecycled-sim run`: the simulated cluster in this process, the real daemon as a child
//! process talking to it over loopback, the scenario's steps played on time, and the daemon's
//! writes printed as a timeline while they happen; then a per-zone summary and the verdict of
//! each expectation.

use std::fs::{self, File};
use std::io::{self, BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::{Action, Outcome, Scenario, evaluate, zone_summary};
use crate::kubelets::Kubelets;
use crate::population::{PodKind, PodPlan, WEB_NAMESPACE};
use crate::timeline::{Fact, FactKind, FactReader, Timeline};
use crate::{Cluster, Resource, SimConfig, SimHandle, SimServer};
use node_lifecycled::config::Config;

/// The daemon settings of every demo run, under the scenario's `[daemon]` and the user's
/// `--config`: fast enough that a node failure plays out in seconds, consistent with the
/// kubelets' 1 s heartbeat.
const DEMO_DAEMON_CONFIG: &str = r#"
node_monitor_period = "1s"
node_monitor_grace_period = "5s"
node_startup_grace_period = "10s"
node_eviction_rate = 1.0
secondary_node_eviction_rate = 0.1
log_level = "info"

[api]
qps = 100.0
burst = 200
request_timeout = "2s"
watch_idle_timeout = "3s"
"#;

/// `[api]` keys naming a connection: ours replaces them all.
const API_SOURCE_KEYS: [&str; 8] = [
    "kubeconfig",
    "context",
    "in_cluster",
    "server",
    "certificate_authority",
    "client_certificate",
    "client_key",
    "token_file",
];

/// How long the daemon gets to stop after SIGTERM before it is killed.
const STOP_GRACE: Duration = Duration::from_secs(10);
/// Daemon log lines echoed to the terminal at most (the rest stay in the log file).
const FORWARDED_LINES: usize = 20;

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
}

/// Writes a kubeconfig for `url` with a bearer token.
pub fn kubeconfig_yaml(url: &str, token: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: sim\n  cluster:\n    server: {url}\n\
         users:\n- name: node-lifecycled\n  user:\n    token: {token}\n\
         contexts:\n- name: sim\n  context:\n    cluster: sim\n    user: node-lifecycled\n\
         current-context: sim\n"
    )
}

/// The daemon's config: the demo defaults, then `scenario` overrides, then `user` overrides,
/// and the connection through `kubeconfig`.
pub fn daemon_config(
    scenario: &toml::Table,
    user: Option<&toml::Table>,
    kubeconfig: &Path,
) -> Result<toml::Table, String> {
    let mut config: toml::Table =
        toml::from_str(DEMO_DAEMON_CONFIG).map_err(|e| format!("built-in demo config: {e}"))?;
    merge(&mut config, scenario);
    if let Some(user) = user {
        merge(&mut config, user);
    }
    let api = config
        .entry("api")
        .or_insert_with(|| toml::Value::Table(toml::Table::new()));
    let toml::Value::Table(api) = api else {
        return Err("api: must be a table".to_string());
    };
    for key in API_SOURCE_KEYS {
        api.remove(key);
    }
    api.insert(
        "kubeconfig".into(),
        toml::Value::String(kubeconfig.display().to_string()),
    );
    Ok(config)
}

fn merge(base: &mut toml::Table, over: &toml::Table) {
    for (key, value) in over {
        match (base.get_mut(key), value) {
            (Some(toml::Value::Table(b)), toml::Value::Table(o)) => merge(b, o),
            _ => {
                base.insert(key.clone(), value.clone());
            }
        }
    }
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
    let config = daemon_config(&scenario.daemon, user.as_ref(), &kubeconfig)?;
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
                .map(|c| c.key.to_string()),
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
    let outcomes = evaluate(&scenario.expects, &facts, &pods, reader.controller_taints());
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
    if daemon_writes == 0 {
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

fn spawn_daemon(daemon: &Path, config: &Path, log: File) -> Result<Child, String> {
    let stdout = log
        .try_clone()
        .map_err(|e| format!("cannot share the daemon log: {e}"))?;
    Command::new(daemon)
        .arg("--config")
        .arg(config)
        .stdin(Stdio::null())
        .stdout(stdout)
        .stderr(log)
        // Not a systemd service here, whatever the environment says.
        .env_remove("NOTIFY_SOCKET")
        .env_remove("WATCHDOG_USEC")
        .env_remove("WATCHDOG_PID")
        // Where a scenario's fence command records its runs.
        .env(
            "NODE_LIFECYCLED_SIM_WORK_DIR",
            config.parent().unwrap_or(Path::new(".")),
        )
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", daemon.display()))
}

/// SIGTERM, as systemd stops it; SIGKILL if it does not exit within `STOP_GRACE`.
fn stop_daemon(child: &mut Child) -> Option<ExitStatus> {
    unsafe extern "C" {
        fn kill(pid: i32, sig: i32) -> i32;
    }
    const SIGTERM: i32 = 15;
    if let Ok(Some(status)) = child.try_wait() {
        return Some(status);
    }
    if let Ok(pid) = i32::try_from(child.id()) {
        // SAFETY: kill(2) on our own child's pid, which is not yet reaped (try_wait said it
        // runs), so the pid cannot have been reused.
        unsafe {
            kill(pid, SIGTERM);
        }
    }
    let deadline = Instant::now() + STOP_GRACE;
    while Instant::now() < deadline {
        if let Ok(Some(status)) = child.try_wait() {
            return Some(status);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
    None
}

/// The daemon's log, followed: warnings and errors are echoed (a few), the rest stays in the file.
struct DaemonLog {
    file: Option<BufReader<File>>,
    partial: String,
    forwarded: usize,
}

impl DaemonLog {
    fn open(path: &Path) -> DaemonLog {
        DaemonLog {
            file: File::open(path).ok().map(BufReader::new),
            partial: String::new(),
            forwarded: 0,
        }
    }

    fn forward(&mut self, out: &mut dyn Write) {
        let Some(file) = &mut self.file else { return };
        loop {
            let mut line = String::new();
            match file.read_line(&mut line) {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
            if !line.ends_with('\n') {
                // Half a line: the daemon is still writing it.
                self.partial.push_str(&line);
                return;
            }
            let full = std::mem::take(&mut self.partial) + &line;
            let lower = full.to_ascii_lowercase();
            let key = lower.contains("error")
                || lower.contains("warn")
                || lower.contains("panicked")
                || lower.contains("leader");
            if key && self.forwarded < FORWARDED_LINES {
                self.forwarded += 1;
                let _ = write!(out, "  daemon│ {full}");
                if self.forwarded == FORWARDED_LINES {
                    let _ = writeln!(out, "  daemon│ (more in its log)");
                }
            }
        }
    }
}

struct Play<'a> {
    sim: &'a SimHandle,
    cluster: &'a Cluster,
    kubelets: &'a Kubelets,
    pods: Vec<PodPlan>,
    reader: FactReader,
    timeline: Timeline,
    facts: Vec<Fact>,
    start: Instant,
    log: DaemonLog,
}

impl Play<'_> {
    fn emit(&mut self, fact: Fact, out: &mut dyn Write) {
        for line in self.timeline.push(&fact) {
            let _ = writeln!(out, "{line}");
        }
        self.facts.push(fact);
    }

    /// New daemon writes into facts and lines; daemon log lines worth showing.
    fn catch_up(&mut self, out: &mut dyn Write) {
        let facts = self.reader.read(&self.sim.writes());
        for fact in facts {
            self.emit(fact, out);
        }
        for line in self.timeline.flush(self.start.elapsed()) {
            let _ = writeln!(out, "{line}");
        }
        self.log.forward(out);
    }

    fn step(&mut self, action: &Action, out: &mut dyn Write) {
        self.catch_up(out);
        let t = self.start.elapsed();
        let problems = self.perform(action);
        let mut text = action.describe();
        if !problems.is_empty() {
            text.push_str(&format!(" [failed: {}]", problems.join("; ")));
        }
        self.emit(
            Fact {
                t,
                kind: FactKind::Step(text),
            },
            out,
        );
    }

    /// Does the step; returns what went wrong (the run goes on).
    fn perform(&mut self, action: &Action) -> Vec<String> {
        let mut problems = Vec::new();
        let mut note = |r: Result<(), String>| {
            if let Err(e) = r {
                problems.push(e);
            }
        };
        let faults = self.sim.faults();
        match action {
            Action::StopHeartbeat(nodes) => {
                for n in nodes {
                    note(self.kubelets.stop_heartbeat(n).map_err(|e| e.to_string()));
                }
            }
            Action::ResumeHeartbeat(nodes) => {
                for n in nodes {
                    note(self.kubelets.resume_heartbeat(n).map_err(|e| e.to_string()));
                }
            }
            Action::Reboot { nodes, down } => {
                for n in nodes {
                    note(self.kubelets.reboot(n, *down).map_err(|e| e.to_string()));
                }
            }
            Action::SetCondition {
                nodes,
                condition,
                status,
            } => {
                for n in nodes {
                    note(
                        self.kubelets
                            .set_condition(n, condition, status)
                            .map_err(|e| e.to_string()),
                    );
                }
            }
            Action::AddTaint {
                nodes,
                key,
                value,
                effect,
            } => {
                let mut taint = json!({"key": key, "effect": effect,
                                       "timeAdded": self.cluster.now().to_rfc3339()});
                if !value.is_empty() {
                    taint["value"] = json!(value);
                }
                for n in nodes {
                    note(edit_taints(self.cluster, n, |list| {
                        list.retain(|t| {
                            !(t["key"] == key.as_str() && t["effect"] == effect.as_str())
                        });
                        list.push(taint.clone());
                    }));
                }
            }
            Action::RemoveTaint { nodes, key, effect } => {
                for n in nodes {
                    note(edit_taints(self.cluster, n, |list| {
                        list.retain(|t| {
                            !(t["key"] == key.as_str() && t["effect"] == effect.as_str())
                        });
                    }));
                }
            }
            Action::SetMetadata {
                nodes,
                annotation,
                key,
                value,
            } => {
                let field = if *annotation { "annotations" } else { "labels" };
                for n in nodes {
                    let set = self.cluster.update(Resource::Nodes, None, n, |v| {
                        if let Some(meta) = v.get_mut("metadata").and_then(Value::as_object_mut) {
                            let map = meta.entry(field).or_insert_with(|| json!({}));
                            if let Some(map) = map.as_object_mut() {
                                map.insert(key.clone(), json!(value));
                            }
                        }
                    });
                    note(set.map(|_| ()).map_err(|e| format!("{n}: {}", e.message)));
                }
            }
            Action::AddPods {
                nodes,
                per_node,
                prefix,
                toleration,
            } => {
                for n in nodes {
                    for i in 0..*per_node {
                        let pod = PodPlan {
                            namespace: WEB_NAMESPACE.into(),
                            name: format!("{prefix}-{n}-{i}"),
                            node: n.clone(),
                            kind: PodKind::Added,
                            toleration: *toleration,
                        };
                        match self.cluster.create(Resource::Pods, pod.object()) {
                            Ok(_) => self.pods.push(pod),
                            Err(e) => problems.push(format!("{}: {}", pod.key(), e.message)),
                        }
                    }
                }
            }
            Action::DropWatches => faults.drop_watches(),
            Action::StallWatches(d) => faults.stall_watches(Some(*d)),
            Action::RestartApi(d) => {
                // Returns once the port refuses; the server listens again after `d` by itself.
                faults.restart(*d);
            }
            Action::Note(_) => {}
        }
        problems
    }
}

fn edit_taints(
    cluster: &Cluster,
    node: &str,
    change: impl FnOnce(&mut Vec<Value>),
) -> Result<(), String> {
    cluster
        .update(Resource::Nodes, None, node, |v| {
            let mut list: Vec<Value> = v
                .pointer("/spec/taints")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            change(&mut list);
            if let Some(spec) = v
                .as_object_mut()
                .map(|o| o.entry("spec").or_insert_with(|| json!({})))
                .and_then(Value::as_object_mut)
            {
                spec.insert("taints".into(), Value::Array(list));
            }
        })
        .map(|_| ())
        .map_err(|e| format!("{node}: {}", e.message))
}
