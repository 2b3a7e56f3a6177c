//! The two daemons of a soak: `node-lifecycled` child processes with leader election on, each
//! with its own bearer token (the write log tells them apart by it), config file and log (kept
//! across restarts). The soak kills the leader with SIGKILL and starts it again, and reloads
//! both with SIGHUP.

use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const SIGKILL: i32 = 9;
const SIGHUP: i32 = 1;
const SIGTERM: i32 = 15;
/// How long a daemon gets to stop after SIGTERM before it is killed.
const STOP_GRACE: Duration = Duration::from_secs(10);

/// The daemon settings of the soak: a node failure plays out in seconds (kubelets beat every
/// second), leader election with short stand-ins (upstream 15 s / 10 s / 2 s).
pub const GRACE: Duration = Duration::from_secs(5);
pub const EVICTION_RATE: f64 = 1.0;
pub const LEASE_DURATION: Duration = Duration::from_secs(3);
pub const RENEW_DEADLINE: Duration = Duration::from_secs(2);
pub const RETRY_PERIOD: Duration = Duration::from_millis(500);
pub const WATCH_IDLE_TIMEOUT: Duration = Duration::from_secs(2);

/// The release of the soak's brake waits this long (`disruption_cooldown`, also the zones').
pub const BRAKE_COOLDOWN: Duration = Duration::from_secs(2);
/// The brake of the soak's pool `z1` (`--pools`), a percentage of zone z1's nodes.
pub const POOL_BRAKE_PERCENT: f64 = 50.0;

/// The brake and pool policies a soak may run with (`SoakOptions::brake`, `::pools`).
#[derive(Clone, Debug, Default)]
pub struct Policy {
    pub brake: Option<usize>,
    pub pools: bool,
    /// Disruption domains by a site label, unless-disrupted, a hold and the site's pool
    /// (`domains::TOP_KEYS`, `domains::POOL`).
    pub partitions: bool,
    /// `[fencing]` with this fence agent (`fencing.rs`).
    pub fencing: Option<PathBuf>,
    /// `--shadow`: `shadow = true`, each daemon's `shadow_file` and `control_socket` in this
    /// directory (the run's), as [`shadow_paths`] names them.
    pub shadow: Option<PathBuf>,
}

/// A daemon's shadow history file and control socket under `--shadow`.
pub fn shadow_paths(dir: &Path, identity: &str) -> (PathBuf, PathBuf) {
    (
        dir.join(format!("{identity}.shadow.json")),
        dir.join(format!("{identity}.sock")),
    )
}

impl Policy {
    /// (top-level keys, tables after the rest).
    fn text(&self) -> (String, String) {
        let mut top = String::new();
        if self.partitions {
            top.push_str(super::domains::TOP_KEYS);
        }
        if let Some(n) = self.brake {
            top.push_str(&format!("max_unhealthy = {n}\n"));
        }
        if self.brake.is_some() || self.pools {
            top.push_str(&format!(
                "disruption_cooldown = \"{}s\"\n",
                BRAKE_COOLDOWN.as_secs()
            ));
        }
        let tables = if self.pools {
            format!(
                "[[pool]]\nname = \"z1\"\n\
             match_labels = {{ \"topology.kubernetes.io/zone\" = \"z1\" }}\n\
             max_unhealthy = \"{POOL_BRAKE_PERCENT}%\"\ndefault_toleration_seconds = 1\n\
             [[pool]]\nname = \"z2\"\n\
             match_labels = {{ \"topology.kubernetes.io/zone\" = \"z2\" }}\n\
             mark_pods_not_ready = false\n"
            )
        } else {
            String::new()
        };
        let mut tables = if self.partitions {
            format!("{tables}{}", super::domains::POOL)
        } else {
            tables
        };
        if let Some(agent) = &self.fencing {
            tables.push_str(&super::fencing::config_table(agent));
        }
        (top, tables)
    }
}

pub fn config_text(kubeconfig: &Path, identity: &str, log_level: &str, policy: &Policy) -> String {
    let (mut top, tables) = policy.text();
    if let Some(dir) = &policy.shadow {
        let (file, socket) = shadow_paths(dir, identity);
        top.push_str(&format!(
            "shadow = true\nshadow_file = \"{}\"\ncontrol_socket = \"{}\"\n",
            file.display(),
            socket.display()
        ));
    }
    format!(
        "{top}node_monitor_period = \"1s\"\n\
         node_monitor_grace_period = \"{}s\"\n\
         node_startup_grace_period = \"10s\"\n\
         node_eviction_rate = {EVICTION_RATE:?}\n\
         secondary_node_eviction_rate = 0.1\n\
         large_cluster_size_threshold = 50\n\
         unhealthy_zone_threshold = 0.55\n\
         log_level = \"{log_level}\"\n\
         [api]\n\
         kubeconfig = \"{}\"\n\
         qps = 200.0\n\
         burst = 400\n\
         request_timeout = \"1s\"\n\
         watch_idle_timeout = \"{}s\"\n\
         [leader_election]\n\
         enabled = true\n\
         identity = \"{identity}\"\n\
         lease_duration = \"{}s\"\n\
         renew_deadline = \"{}s\"\n\
         retry_period = \"{}ms\"\n{tables}",
        GRACE.as_secs(),
        kubeconfig.display(),
        WATCH_IDLE_TIMEOUT.as_secs(),
        LEASE_DURATION.as_secs(),
        RENEW_DEADLINE.as_secs(),
        RETRY_PERIOD.as_millis(),
    )
}

pub struct Daemon {
    pub name: String,
    binary: PathBuf,
    pub config: PathBuf,
    pub log: PathBuf,
    child: Option<Child>,
    restart_at: Option<Instant>,
    pub starts: u32,
}

impl Daemon {
    pub fn new(name: &str, binary: &Path, dir: &Path) -> Daemon {
        Daemon {
            name: name.to_string(),
            binary: binary.to_path_buf(),
            config: dir.join(format!("{name}.toml")),
            log: dir.join(format!("{name}.log")),
            child: None,
            restart_at: None,
            starts: 0,
        }
    }

    pub fn start(&mut self) -> Result<(), String> {
        let log = File::options()
            .create(true)
            .append(true)
            .open(&self.log)
            .map_err(|e| format!("cannot open {}: {e}", self.log.display()))?;
        let mut command = Command::new(&self.binary);
        command
            .arg("run")
            .arg("--config")
            .arg(&self.config)
            .env_remove("NOTIFY_SOCKET")
            .env_remove("JOURNAL_STREAM")
            .env_remove("WATCHDOG_USEC")
            .env_remove("RUST_LOG")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log);
        die_with_parent(&mut command);
        let child = command
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", self.binary.display()))?;
        self.child = Some(child);
        self.restart_at = None;
        self.starts += 1;
        Ok(())
    }

    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// SIGKILL, and start again `restart_after` from now (at a later `poll`).
    pub fn kill(&mut self, restart_after: Duration) {
        if let Some(mut child) = self.child.take() {
            signal(child.id(), SIGKILL);
            let _ = child.wait();
        }
        self.restart_at = Some(Instant::now() + restart_after);
    }

    /// SIGTERM (SIGKILL after the stop grace), and start again `restart_after` from now (at a
    /// later `poll`); true when it stopped by itself.
    pub fn terminate(&mut self, restart_after: Duration) -> bool {
        let clean = self.stop();
        self.restart_at = Some(Instant::now() + restart_after);
        clean
    }

    /// Killed and due to start again (at the next `poll`).
    pub fn restart_due(&self) -> bool {
        self.child.is_none() && self.restart_at.is_some_and(|at| Instant::now() >= at)
    }

    pub fn reload(&self) {
        if let Some(pid) = self.pid() {
            signal(pid, SIGHUP);
        }
    }

    pub fn write_config(&self, text: &str) -> Result<(), String> {
        fs::write(&self.config, text)
            .map_err(|e| format!("cannot write {}: {e}", self.config.display()))
    }

    /// Restarts a killed daemon when due; `Err` names an exit the soak did not cause.
    pub fn poll(&mut self) -> Result<(), String> {
        if let Some(child) = self.child.as_mut() {
            if let Ok(Some(status)) = child.try_wait() {
                self.child = None;
                let tail = crate::log_tail(&self.log, 10);
                // Started again so the soak goes on; the exit is a finding.
                self.restart_at = Some(Instant::now());
                return Err(format!(
                    "{} exited by itself ({status}); log:\n{tail}",
                    self.name
                ));
            }
        }
        if self.restart_at.is_some_and(|at| Instant::now() >= at) {
            self.start()?;
        }
        Ok(())
    }

    /// SIGTERM, then SIGKILL after a grace; true when it stopped by itself.
    pub fn stop(&mut self) -> bool {
        self.restart_at = None;
        let Some(mut child) = self.child.take() else {
            return true;
        };
        signal(child.id(), SIGTERM);
        let deadline = Instant::now() + STOP_GRACE;
        while Instant::now() < deadline {
            if let Ok(Some(_)) = child.try_wait() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = child.kill();
        let _ = child.wait();
        false
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// The daemon gets SIGKILL when the soak dies, however it dies (SIGKILL, abort, a panic that
/// does not unwind): the Drop guard and the signal handling cover the rest, this covers them.
/// Linux `prctl(PR_SET_PDEATHSIG)`; a parent already gone before it took effect is checked.
fn die_with_parent(command: &mut Command) {
    use std::os::unix::process::CommandExt;
    const PR_SET_PDEATHSIG: i32 = 1;
    unsafe extern "C" {
        fn prctl(option: i32, arg2: u64, arg3: u64, arg4: u64, arg5: u64) -> i32;
        fn getppid() -> i32;
    }
    let parent = std::process::id() as i32;
    // SAFETY: runs in the child between fork and exec; prctl and getppid are
    // async-signal-safe system calls that allocate nothing.
    unsafe {
        command.pre_exec(move || {
            if prctl(PR_SET_PDEATHSIG, SIGKILL as u64, 0, 0, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            if getppid() != parent {
                return Err(std::io::Error::other(
                    "the soak exited before its daemon started",
                ));
            }
            Ok(())
        });
    }
}

fn signal(pid: u32, sig: i32) {
    unsafe extern "C" {
        fn kill(pid: i32, sig: i32) -> i32;
    }
    if let Ok(pid) = i32::try_from(pid) {
        // SAFETY: kill(2) has no memory effects; the pid is our own child's.
        unsafe {
            kill(pid, sig);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use node_lifecycled::config::Config;

    #[test]
    fn the_shadow_config_elects_on_its_own_lease_and_is_accepted() {
        let dir = Path::new("/run/soak");
        let policy = Policy {
            shadow: Some(dir.to_path_buf()),
            ..Policy::default()
        };
        let text = config_text(
            Path::new("/run/soak/a.kubeconfig"),
            "daemon-a",
            "info",
            &policy,
        );
        let name = Path::new("daemon-a.toml");
        let config = Config::from_str(&text, name).unwrap_or_else(|e| panic!("{e}\n{text}"));
        assert!(config.shadow && config.leader_election.enabled);
        assert_eq!(config.shadow_file, Some(shadow_paths(dir, "daemon-a").0));
        assert_eq!(config.control_socket, Some(shadow_paths(dir, "daemon-a").1));
        // The one election shadow mode refuses: on the incumbent's own Lease.
        let on_theirs = text.replace(
            "[leader_election]\n",
            "[leader_election]\nname = \"kube-controller-manager\"\n",
        );
        assert!(Config::from_str(&on_theirs, name).is_err());
        // Without --shadow, no shadow key.
        let plain = config_text(Path::new("/a"), "daemon-a", "info", &Policy::default());
        assert!(!plain.contains("shadow"));
    }
}
