//! End-to-end harness: the real binary against the simulated API server over sockets.
//!
//! - [`Sim`]: a simulator accepting known bearer tokens, and a kubeconfig per token pointing at
//!   it over loopback http, so the sim's write log names the daemon that wrote.
//! - [`Kubelets`]: a thread playing the kubelets of the nodes marked alive: it renews their
//!   Leases and puts Ready back to True when the controller changed it.
//! - [`Daemon`]: the binary with a temp config; its stderr lines are collected by a thread so
//!   a test can wait for a line and show the whole log when something fails.
//! - [`wait_until`]: polls a condition every 50 ms up to a generous limit; correctness never
//!   depends on a fixed sleep.
#![allow(dead_code)] // shared by several test groups: each uses its own part

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use node_lifecycled_sim::{Cluster, Resource, SimConfig, SimHandle, SimServer, fixtures};
use serde_json::{Value, json};

pub const BIN: &str = env!("CARGO_BIN_EXE_node-lifecycled");
/// How often a condition is re-checked.
pub const POLL: Duration = Duration::from_millis(50);

/// A fresh temp directory, removed on drop.
pub struct TempDir(PathBuf);

impl TempDir {
    pub fn new(name: &str) -> TempDir {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos();
        let dir =
            std::env::temp_dir().join(format!("nlc-e2e-{name}-{}-{nanos}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }

    pub fn write(&self, name: &str, text: &str) -> PathBuf {
        let path = self.0.join(name);
        std::fs::write(&path, text).unwrap();
        path
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

pub struct Sim {
    pub handle: SimHandle,
    pub dir: TempDir,
}

impl Sim {
    /// A simulator that accepts `tokens` (anything else gets 401).
    pub fn start(name: &str, tokens: &[&str]) -> Sim {
        let _ = env_logger::builder().is_test(true).try_init();
        let handle = SimServer::start(SimConfig {
            tokens: Some(tokens.iter().map(|t| t.to_string()).collect()),
            ..SimConfig::default()
        })
        .unwrap();
        Sim {
            handle,
            dir: TempDir::new(name),
        }
    }

    pub fn cluster(&self) -> Cluster {
        self.handle.cluster()
    }

    /// A kubeconfig for `token` at this simulator.
    pub fn kubeconfig(&self, token: &str) -> PathBuf {
        let text = format!(
            "apiVersion: v1\nkind: Config\ncurrent-context: sim\n\
             clusters:\n- name: sim\n  cluster:\n    server: {}\n\
             users:\n- name: {token}\n  user:\n    token: {token}\n\
             contexts:\n- name: sim\n  context:\n    cluster: sim\n    user: {token}\n",
            self.handle.url()
        );
        self.dir.write(&format!("kubeconfig-{token}"), &text)
    }

    /// Creates a Ready node (zone `zone`) and its Lease, renewed now.
    pub fn add_node(&self, name: &str, zone: Option<&str>) {
        let c = self.cluster();
        c.create(Resource::Nodes, fixtures::ready_node(name, zone, c.now()))
            .unwrap();
        c.renew_lease(name, c.now()).unwrap();
    }

    /// Creates a running pod on `node` with exactly `tolerations`.
    pub fn add_pod(&self, name: &str, node: &str, tolerations: Value) {
        let mut pod = fixtures::running_pod("default", name, Some(node));
        pod["spec"]["tolerations"] = tolerations;
        self.cluster().create(Resource::Pods, pod).unwrap();
    }

    pub fn node(&self, name: &str) -> Value {
        self.cluster()
            .get(Resource::Nodes, None, name)
            .unwrap_or_else(|| panic!("node {name} not found"))
    }

    /// `(status, reason, message)` of a node condition.
    pub fn condition(&self, node: &str, kind: &str) -> Option<(String, String, String)> {
        let node = self.node(node);
        let conditions = node["status"]["conditions"].as_array()?.clone();
        conditions.iter().find(|c| c["type"] == kind).map(|c| {
            (
                c["status"].as_str().unwrap_or("").to_string(),
                c["reason"].as_str().unwrap_or("").to_string(),
                c["message"].as_str().unwrap_or("").to_string(),
            )
        })
    }

    pub fn ready(&self, node: &str) -> String {
        self.condition(node, "Ready")
            .map(|c| c.0)
            .unwrap_or_default()
    }

    /// `key:Effect` of every taint of the node.
    pub fn taints(&self, node: &str) -> BTreeSet<String> {
        self.node(node)["spec"]["taints"]
            .as_array()
            .map(|ts| {
                ts.iter()
                    .map(|t| {
                        format!(
                            "{}:{}",
                            t["key"].as_str().unwrap_or(""),
                            t["effect"].as_str().unwrap_or("")
                        )
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    pub fn has_taint(&self, node: &str, taint: &str) -> bool {
        self.taints(node).contains(taint)
    }

    /// The pod's Ready condition status (`""` when it has none or is gone).
    pub fn pod_ready(&self, name: &str) -> String {
        self.cluster()
            .get(Resource::Pods, Some("default"), name)
            .and_then(|p| {
                p["status"]["conditions"].as_array().and_then(|cs| {
                    cs.iter()
                        .find(|c| c["type"] == "Ready")
                        .and_then(|c| c["status"].as_str().map(str::to_string))
                })
            })
            .unwrap_or_default()
    }

    /// Pods with a deletion requested (graceful delete in progress) or gone.
    pub fn deleted_pods(&self) -> BTreeSet<String> {
        self.cluster()
            .terminating_pods()
            .into_iter()
            .map(|(_, name)| name)
            .collect()
    }

    /// `(reason, message, involved object name)` of every recorded Event.
    pub fn events(&self) -> Vec<(String, String, String)> {
        self.cluster()
            .list(Resource::Events, None)
            .iter()
            .map(|e| {
                (
                    e["reason"].as_str().unwrap_or("").to_string(),
                    e["message"].as_str().unwrap_or("").to_string(),
                    e["involvedObject"]["name"]
                        .as_str()
                        .unwrap_or("")
                        .to_string(),
                )
            })
            .collect()
    }

    pub fn has_event(&self, reason: &str, object: &str) -> bool {
        self.events()
            .iter()
            .any(|(r, _, o)| r == reason && o == object)
    }
}

/// A toleration of `node.kubernetes.io/unreachable:NoExecute`, for `seconds` or forever.
pub fn tolerating_unreachable(seconds: Option<u64>) -> Value {
    let mut t = json!({"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute"});
    if let Some(s) = seconds {
        t["tolerationSeconds"] = json!(s);
    }
    json!([t])
}

/// The simulated kubelets: every `period`, each alive node renews its Lease and, if its Ready
/// condition is not True (the controller marked it), posts Ready=True again.
pub struct Kubelets {
    alive: Arc<Mutex<BTreeSet<String>>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Kubelets {
    pub fn start(cluster: Cluster, nodes: &[String], period: Duration) -> Kubelets {
        let alive = Arc::new(Mutex::new(nodes.iter().cloned().collect::<BTreeSet<_>>()));
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let alive = alive.clone();
            let stop = stop.clone();
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let names: Vec<String> = alive.lock().unwrap().iter().cloned().collect();
                    for name in names {
                        let now = cluster.now();
                        let _ = cluster.renew_lease(&name, now);
                        let ready = cluster
                            .get(Resource::Nodes, None, &name)
                            .and_then(|n| {
                                n["status"]["conditions"].as_array().and_then(|cs| {
                                    cs.iter()
                                        .find(|c| c["type"] == "Ready")
                                        .map(|c| c["status"] == "True")
                                })
                            })
                            .unwrap_or(false);
                        if !ready {
                            let _ = cluster.set_node_condition(&name, "Ready", "True", now);
                        }
                    }
                    // The kubelets' heartbeat period, not a wait for a result.
                    std::thread::sleep(period);
                }
            })
        };
        Kubelets {
            alive,
            stop,
            thread: Some(thread),
        }
    }

    pub fn set_alive(&self, node: &str, alive: bool) {
        let mut set = self.alive.lock().unwrap();
        if alive {
            set.insert(node.to_string());
        } else {
            set.remove(node);
        }
    }

    /// These nodes fall silent together: one change of the set, so the kubelet thread cannot
    /// renew some of them a period after the others stopped.
    pub fn silence(&self, nodes: &[String]) {
        let mut set = self.alive.lock().unwrap();
        for node in nodes {
            set.remove(node);
        }
    }

    /// Every node falls silent at once.
    pub fn silence_all(&self) {
        self.alive.lock().unwrap().clear();
    }
}

impl Drop for Kubelets {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Short durations standing in for upstream's (50 s grace, 15 s lease ...).
#[derive(Clone, Debug)]
pub struct Timing {
    pub grace: &'static str,
    pub startup_grace: &'static str,
    pub monitor_period: &'static str,
    pub eviction_rate: f64,
    pub secondary_rate: f64,
    pub large_cluster_size_threshold: u32,
    /// `Some(identity)`: leader election on, with a 3 s lease, 2 s renew deadline, 500 ms retry.
    pub leader: Option<String>,
    pub dry_run: bool,
    pub dump_format: &'static str,
    /// `api.watch_idle_timeout` (the installed default is 30 s).
    pub watch_idle_timeout: &'static str,
}

impl Default for Timing {
    fn default() -> Timing {
        Timing {
            grace: "3s",
            startup_grace: "4s",
            monitor_period: "1s",
            eviction_rate: 100.0,
            secondary_rate: 0.01,
            large_cluster_size_threshold: 50,
            leader: None,
            dry_run: false,
            dump_format: "text",
            watch_idle_timeout: "2s",
        }
    }
}

/// A daemon config for `kubeconfig` with `timing`.
pub fn config_text(kubeconfig: &Path, timing: &Timing) -> String {
    let leader = match &timing.leader {
        None => "enabled = false\n".to_string(),
        Some(identity) => format!(
            "enabled = true\nidentity = \"{identity}\"\nlease_duration = \"3s\"\n\
             renew_deadline = \"2s\"\nretry_period = \"500ms\"\n"
        ),
    };
    format!(
        "node_monitor_period = \"{}\"\nnode_monitor_grace_period = \"{}\"\n\
         node_startup_grace_period = \"{}\"\nnode_eviction_rate = {:?}\n\
         secondary_node_eviction_rate = {:?}\nlarge_cluster_size_threshold = {}\n\
         dry_run = {}\ndump_format = \"{}\"\n\
         [api]\nkubeconfig = \"{}\"\nqps = 500.0\nburst = 500\nrequest_timeout = \"1s\"\n\
         watch_idle_timeout = \"{}\"\n[leader_election]\n{leader}",
        timing.monitor_period,
        timing.grace,
        timing.startup_grace,
        timing.eviction_rate,
        timing.secondary_rate,
        timing.large_cluster_size_threshold,
        timing.dry_run,
        timing.dump_format,
        kubeconfig.display(),
        timing.watch_idle_timeout,
    )
}

/// The running binary.
pub struct Daemon {
    pub name: String,
    pub child: Child,
    lines: Arc<Mutex<Vec<String>>>,
    /// Lines before this index were consumed by `wait_log`.
    cursor: usize,
    pub config: PathBuf,
    reader: Option<JoinHandle<()>>,
}

impl Daemon {
    /// Starts the binary with `config_text` and waits until it listens for signals.
    pub fn start(name: &str, dir: &TempDir, config_text: &str, env: &[(&str, &str)]) -> Daemon {
        let mut d = Daemon::spawn(name, dir, config_text, env);
        d.wait_log("ready for signals", Duration::from_secs(15));
        d
    }

    pub fn spawn(name: &str, dir: &TempDir, config_text: &str, env: &[(&str, &str)]) -> Daemon {
        let config = dir.write(&format!("{name}.toml"), config_text);
        let mut cmd = Command::new(BIN);
        cmd.args(["run", "--config", config.to_str().unwrap()])
            .env_remove("RUST_LOG")
            .env_remove("JOURNAL_STREAM")
            .env_remove("NOTIFY_SOCKET")
            .env_remove("WATCHDOG_USEC")
            .env_remove("WATCHDOG_PID")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().unwrap();
        let stderr = child.stderr.take().unwrap();
        let lines = Arc::new(Mutex::new(Vec::new()));
        let reader = {
            let lines = lines.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(stderr).lines() {
                    let Ok(line) = line else { break };
                    lines.lock().unwrap().push(line);
                }
            })
        };
        Daemon {
            name: name.to_string(),
            child,
            lines,
            cursor: 0,
            config,
            reader: Some(reader),
        }
    }

    pub fn log(&self) -> String {
        let lines = self.lines.lock().unwrap();
        let start = lines.len().saturating_sub(400);
        format!(
            "--- {} stderr (last {} lines) ---\n{}",
            self.name,
            lines.len() - start,
            lines[start..].join("\n")
        )
    }

    pub fn lines(&self) -> Vec<String> {
        self.lines.lock().unwrap().clone()
    }

    pub fn has_line(&self, needle: &str) -> bool {
        self.lines
            .lock()
            .unwrap()
            .iter()
            .any(|l| l.contains(needle))
    }

    /// The next line (after the last one waited for) containing `needle`.
    pub fn wait_log(&mut self, needle: &str, limit: Duration) -> String {
        let deadline = Instant::now() + limit;
        loop {
            {
                let lines = self.lines.lock().unwrap();
                if let Some(i) = lines[self.cursor..].iter().position(|l| l.contains(needle)) {
                    self.cursor += i + 1;
                    return lines[self.cursor - 1].clone();
                }
            }
            if Instant::now() > deadline {
                panic!(
                    "{}: no line with {needle:?} within {limit:?}\n{}",
                    self.name,
                    self.log()
                );
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                std::thread::sleep(POLL);
                let lines = self.lines.lock().unwrap();
                if let Some(i) = lines[self.cursor..].iter().position(|l| l.contains(needle)) {
                    self.cursor += i + 1;
                    return lines[self.cursor - 1].clone();
                }
                drop(lines);
                panic!(
                    "{}: exited ({status}) before {needle:?}\n{}",
                    self.name,
                    self.log()
                );
            }
            std::thread::sleep(POLL);
        }
    }

    pub fn signal(&self, name: &str) {
        let status = Command::new("kill")
            .arg(format!("-{name}"))
            .arg(self.child.id().to_string())
            .status()
            .unwrap();
        assert!(status.success(), "kill -{name} failed");
    }

    /// Waits for the process to exit; returns its status and how long that took, not counting
    /// the time the daemon waited for a CPU meanwhile (a busy machine's, not the daemon's).
    pub fn wait_exit(&mut self, limit: Duration) -> (ExitStatus, Duration) {
        let started = Instant::now();
        let waited_before = self.runqueue_wait();
        let mut waited = waited_before;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                if let Some(r) = self.reader.take() {
                    let _ = r.join();
                }
                let starved = waited.saturating_sub(waited_before);
                return (status, started.elapsed().saturating_sub(starved));
            }
            // Read while the process exists: its /proc entry goes with it.
            waited = self.runqueue_wait().max(waited);
            assert!(
                started.elapsed() < limit,
                "{}: still running after {limit:?}\n{}",
                self.name,
                self.log()
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// How long the daemon (one thread) has waited for a CPU so far: time a busy machine took
    /// from it, which real-time upper bounds discount. From /proc's schedstat; zero where that
    /// is not available.
    pub fn runqueue_wait(&self) -> Duration {
        std::fs::read_to_string(format!("/proc/{}/schedstat", self.child.id()))
            .ok()
            .and_then(|s| s.split_whitespace().nth(1)?.parse::<u64>().ok())
            .map(Duration::from_nanos)
            .unwrap_or_default()
    }

    pub fn rewrite_config(&self, text: &str) {
        std::fs::write(&self.config, text).unwrap();
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        if std::thread::panicking() {
            eprintln!("{}", self.log());
        }
    }
}

/// Polls `done` every 50 ms until it holds; panics with `what` (and `context()`) after `limit`.
/// Returns how long it took.
pub fn wait_until(
    what: &str,
    limit: Duration,
    mut done: impl FnMut() -> bool,
    context: impl Fn() -> String,
) -> Duration {
    let started = Instant::now();
    loop {
        if done() {
            return started.elapsed();
        }
        if started.elapsed() > limit {
            panic!("{what}: not within {limit:?}\n{}", context());
        }
        std::thread::sleep(POLL);
    }
}

/// Asserts `holds` stays true for `window`, polling every 50 ms.
pub fn holds_for(
    what: &str,
    window: Duration,
    mut holds: impl FnMut() -> bool,
    context: impl Fn() -> String,
) {
    let started = Instant::now();
    while started.elapsed() < window {
        assert!(
            holds(),
            "{what}: broken after {:?}\n{}",
            started.elapsed(),
            context()
        );
        std::thread::sleep(POLL);
    }
}

/// Nodes `n1` and `n2` (zone `z1`) with live kubelets, and the daemon acting on them with its
/// metrics endpoint on `port`. Fields drop in order: the daemon stops first.
pub struct MetricsRun {
    pub daemon: Daemon,
    pub kubelets: Kubelets,
    pub sim: Sim,
    pub port: u16,
}

/// Starts a [`MetricsRun`]; `extra` is appended to the daemon's configuration (after its
/// `[leader_election]` table, so it starts a table of its own).
pub fn metrics_run(name: &str, token: &str, extra: &str) -> MetricsRun {
    metrics_run_with(name, token, "", extra)
}

/// [`metrics_run`] with top-level keys `top` set before the sections.
pub fn metrics_run_with(name: &str, token: &str, top: &str, extra: &str) -> MetricsRun {
    let sim = Sim::start(name, &[token]);
    let nodes: Vec<String> = ["n1", "n2"].iter().map(|s| s.to_string()).collect();
    for n in &nodes {
        sim.add_node(n, Some("z1"));
    }
    let kubelets = Kubelets::start(sim.cluster(), &nodes, Duration::from_millis(300));
    let port = free_port();
    let text = format!(
        "metrics_address = \"127.0.0.1:{port}\"\n{top}{}{extra}",
        config_text(&sim.kubeconfig(token), &Timing::default())
    );
    let mut daemon = Daemon::start(name, &sim.dir, &text, &[]);
    daemon.wait_log("acting (leader election disabled)", Duration::from_secs(15));
    MetricsRun {
        daemon,
        kubelets,
        sim,
        port,
    }
}

/// A loopback port that was free a moment ago, for the daemon's `metrics_address`.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// `node-lifecycled <args> --config <config>`, a one-shot command run as an operator would:
/// its exit code, and stdout then stderr.
pub fn cli(config: &Path, args: &[&str]) -> (i32, String) {
    let out = Command::new(BIN)
        .args(args)
        .arg("--config")
        .arg(config)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code().unwrap_or(-1), text)
}

/// One HTTP/1.1 GET to the daemon's metrics endpoint on loopback: `(status, body)`.
pub fn http_get(port: u16, path: &str) -> (u16, String) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    let code = text
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    (code, body)
}
