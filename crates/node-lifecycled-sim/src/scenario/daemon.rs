//! The daemon as a child process of `node-lifecycled-sim run`: its config (the demo's settings
//! under the scenario's and the user's), its kubeconfig, its start and stop, and its log
//! followed.

use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

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

pub(super) fn spawn_daemon(daemon: &Path, config: &Path, log: File) -> Result<Child, String> {
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
pub(super) fn stop_daemon(child: &mut Child) -> Option<ExitStatus> {
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
pub(super) struct DaemonLog {
    pub(super) file: Option<BufReader<File>>,
    pub(super) partial: String,
    pub(super) forwarded: usize,
}

impl DaemonLog {
    pub(super) fn open(path: &Path) -> DaemonLog {
        DaemonLog {
            file: File::open(path).ok().map(BufReader::new),
            partial: String::new(),
            forwarded: 0,
        }
    }

    pub(super) fn forward(&mut self, out: &mut dyn Write) {
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
