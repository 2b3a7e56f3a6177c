//! The real kube-apiserver of `scripts/real-apiserver` for the tests that need one: started
//! with up.sh, stopped with down.sh on drop (also when a test panics). At most
//! [`SERVERS_AT_ONCE`] in the process (`NODE_LIFECYCLED_REAL_APISERVERS` overrides it; 1 runs
//! them one at a time): a further `start` waits for a server's drop. Four at once, as
//! `scripts/test` runs the tier four tests at a time (nearly all of its time is waiting); a
//! differential scenario takes two (one for us, one for kube-controller-manager). Servers start
//! side by side (each picks its ports here), and stop with the test process if it is killed
//! before its drops run (up.sh's `OWNER_PID`).
//! Unavailable → the test fails loudly, unless NODE_LIFECYCLED_SKIP_REAL_APISERVER=1 says why
//! it may be skipped.
//!
//! Two things make a server cheap to start and stop, which matters with one server per
//! scenario: the PKI up.sh makes (five RSA keys) is made once per process and copied into each
//! server's state folder (up.sh keeps a PKI it finds there), and a server is thrown away with
//! SIGKILL rather than waited for (down.sh's graceful stop waits up to 5 s per process for a
//! server nobody will read again).

pub mod audit;
pub mod decisions;
pub mod fleet;
pub mod reset_proxy;
pub mod upstream;
pub mod versions;

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Condvar, Mutex, OnceLock};

use serde_json::Value;

use versions::Kube;

pub const SKIP_VARIABLE: &str = "NODE_LIFECYCLED_SKIP_REAL_APISERVER";

/// What a test asks of its server beyond up.sh's flags.
#[derive(Clone, Debug, Default)]
pub struct ServerOptions {
    /// An audit policy (YAML): the server writes what it selects to `logs/audit.log` as JSON
    /// lines, the record of every request a scenario asserts on.
    pub audit: Option<String>,
    /// `--feature-gates` items (`Name=true`); a test that needs a gate says so here.
    pub feature_gates: Vec<String>,
}

impl ServerOptions {
    /// The kube-apiserver up.sh runs: the binary itself, or a wrapper in `state` that adds
    /// these flags (up.sh takes no flags of its own; `--version` passes through untouched).
    fn wrap(&self, apiserver: &Path, state: &Path) -> Result<PathBuf, String> {
        if self.audit.is_none() && self.feature_gates.is_empty() {
            return Ok(apiserver.to_path_buf());
        }
        let mut flags = Vec::new();
        if let Some(policy) = &self.audit {
            let file = state.join("audit-policy.yaml");
            std::fs::write(&file, policy).map_err(|e| format!("{}: {e}", file.display()))?;
            flags.push(format!("--audit-policy-file={}", file.display()));
            flags.push(format!(
                "--audit-log-path={}",
                state.join("logs/audit.log").display()
            ));
            flags.push("--audit-log-format=json".to_string());
            // Unbuffered: a scenario reads the log while the server runs.
            flags.push("--audit-log-mode=blocking".to_string());
        }
        if !self.feature_gates.is_empty() {
            flags.push(format!("--feature-gates={}", self.feature_gates.join(",")));
        }
        let wrapper = state.join("kube-apiserver");
        let bin = apiserver.display();
        let text = format!(
            "#!/bin/sh\ncase \"$1\" in --version) exec '{bin}' \"$@\";; esac\nexec '{bin}' \"$@\" {}\n",
            flags
                .iter()
                .map(|f| format!("'{f}'"))
                .collect::<Vec<_>>()
                .join(" ")
        );
        std::fs::write(&wrapper, text).map_err(|e| format!("{}: {e}", wrapper.display()))?;
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755))
            .map_err(|e| format!("{}: {e}", wrapper.display()))?;
        Ok(wrapper)
    }
}

/// A running etcd + kube-apiserver, stopped on drop (also when the scenario panics).
pub struct RealApiserver {
    kube: Kube,
    /// The audit log, when the server was started with a policy.
    audit_log: Option<PathBuf>,
    vars: HashMap<String, String>,
    scripts: PathBuf,
    /// Held until after down.sh has run (fields drop after `Drop::drop`).
    _slot: Slot,
}

/// Servers running at once by default.
pub const SERVERS_AT_ONCE: usize = 4;

/// How many servers run now, and the limit's waiters.
static RUNNING: (Mutex<usize>, Condvar) = (Mutex::new(0), Condvar::new());

/// A server's place among those running at once, given back on drop.
struct Slot;

impl Slot {
    fn take() -> Slot {
        let limit = std::env::var("NODE_LIFECYCLED_REAL_APISERVERS")
            .ok()
            .and_then(|v| v.parse().ok())
            .filter(|n: &usize| *n > 0)
            .unwrap_or(SERVERS_AT_ONCE);
        // A test that panicked while holding the lock poisons it; the count stays right.
        let mut running = RUNNING.0.lock().unwrap_or_else(|p| p.into_inner());
        while *running >= limit {
            running = RUNNING.1.wait(running).unwrap_or_else(|p| p.into_inner());
        }
        *running += 1;
        Slot
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        *RUNNING.0.lock().unwrap_or_else(|p| p.into_inner()) -= 1;
        RUNNING.1.notify_one();
    }
}

/// Three loopback ports free a moment ago and never given out before in this process (the
/// kernel may hand a port it just reported free to the next caller asking for one).
fn unique_ports() -> [u16; 3] {
    static GIVEN: Mutex<Vec<u16>> = Mutex::new(Vec::new());
    let mut given = GIVEN.lock().unwrap_or_else(|p| p.into_inner());
    let mut ports = [0; 3];
    let mut found = 0;
    while found < ports.len() {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free loopback port")
            .port();
        if !given.contains(&port) {
            given.push(port);
            ports[found] = port;
            found += 1;
        }
    }
    ports
}

/// The PKI of the process's first server, copied into every later server's state folder.
static PKI: OnceLock<PathBuf> = OnceLock::new();

/// A fresh state folder for up.sh, holding a copy of the process's PKI once there is one.
fn fresh_state() -> PathBuf {
    let base = std::env::temp_dir();
    let state = (0u32..)
        .map(|i| base.join(format!("real-apiserver.{}.{i}", std::process::id())))
        .find(|p| std::fs::create_dir(p).is_ok())
        .expect("a fresh state folder");
    if let Some(pki) = PKI.get() {
        let copy = state.join("pki");
        std::fs::create_dir(&copy).expect("pki folder");
        for entry in std::fs::read_dir(pki).expect("cached pki") {
            let entry = entry.expect("cached pki entry");
            std::fs::copy(entry.path(), copy.join(entry.file_name())).expect("copy pki");
        }
    }
    state
}

/// Keeps the first server's PKI for the next ones (best effort: without it up.sh makes one).
fn keep_pki(state: &Path) {
    if PKI.get().is_some() {
        return;
    }
    let keep = std::env::temp_dir().join(format!("real-apiserver-pki.{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&keep);
    let copied = std::fs::create_dir(&keep).is_ok()
        && std::fs::read_dir(state.join("pki")).is_ok_and(|entries| {
            entries
                .flatten()
                .all(|entry| std::fs::copy(entry.path(), keep.join(entry.file_name())).is_ok())
        });
    if copied {
        let _ = PKI.set(keep);
    }
}

impl RealApiserver {
    /// A server of release `kube` (its binaries built on first use, before a slot is taken).
    pub fn start(kube: Kube) -> Option<RealApiserver> {
        RealApiserver::start_with(kube, &ServerOptions::default())
    }

    /// The same with an audit log or feature gates.
    pub fn start_with(kube: Kube, options: &ServerOptions) -> Option<RealApiserver> {
        let binaries = kube.binaries();
        // A test that panicked with the server up poisons the lock; its drop still stopped it.
        let slot = Slot::take();
        let scripts = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/real-apiserver");
        // Until the process keeps a PKI, one start at a time: the first makes it and keeps it,
        // those waiting behind it copy it (two first starts would each make one and keep
        // their files over each other's).
        static FIRST: Mutex<()> = Mutex::new(());
        let first = PKI
            .get()
            .is_none()
            .then(|| FIRST.lock().unwrap_or_else(|p| p.into_inner()));
        let state = fresh_state();
        let mut up = Command::new(scripts.join("up.sh"));
        up.env("STATE", &state);
        let output = match binaries.and_then(|b| options.wrap(&b.apiserver, &state).map(|a| (a, b)))
        {
            Err(why) => Err(std::io::Error::other(why)),
            Ok((apiserver, binaries)) => {
                up.env("APISERVER", apiserver).env("ETCD", &binaries.etcd);
                // Servers left by a test binary killed before its drops stop with it.
                up.env("OWNER_PID", std::process::id().to_string());
                // The ports are picked here, never twice in this process, so servers start
                // side by side (up.sh picking its own, two starting together could pick the
                // same; one at a time, a start's ~10 s of waiting for readiness queued them).
                for (variable, port) in ["ETCD_PORT", "PEER_PORT", "API_PORT"]
                    .into_iter()
                    .zip(unique_ports())
                {
                    up.env(variable, port.to_string());
                }
                up.output()
            }
        };
        let failure = match &output {
            Err(e) => Some(format!(
                "cannot run {}: {e}",
                scripts.join("up.sh").display()
            )),
            Ok(out) if !out.status.success() => Some(format!(
                "{} failed ({}): {}",
                scripts.join("up.sh").display(),
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            )),
            Ok(_) => None,
        };
        if let Some(why) = failure {
            if std::env::var(SKIP_VARIABLE).as_deref() == Ok("1") {
                eprintln!("SKIPPED: real kube-apiserver unavailable ({SKIP_VARIABLE}=1): {why}");
                return None;
            }
            panic!("real kube-apiserver unavailable: {why} (set {SKIP_VARIABLE}=1 to skip)");
        }
        keep_pki(&state);
        drop(first);
        let stdout = String::from_utf8_lossy(&output.unwrap().stdout).into_owned();
        let vars = stdout
            .lines()
            .filter_map(|l| l.split_once('='))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Some(RealApiserver {
            kube,
            audit_log: options.audit.as_ref().map(|_| state.join("logs/audit.log")),
            vars,
            scripts,
            _slot: slot,
        })
    }

    /// The audit log's path (`ServerOptions::audit`).
    pub fn audit_log(&self) -> &Path {
        self.audit_log
            .as_deref()
            .expect("the server was started without an audit policy")
    }

    /// The release this server runs.
    pub fn kube(&self) -> Kube {
        self.kube
    }

    pub fn var(&self, key: &str) -> &str {
        self.vars
            .get(key)
            .unwrap_or_else(|| panic!("up.sh did not print {key}"))
    }

    /// Runs kubectl with the admin kubeconfig (and `stdin`, if given); fails the test on error.
    pub fn kubectl(&self, args: &[&str], stdin: Option<&str>) -> String {
        let mut child = Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(self.var("ADMIN_KUBECONFIG"))
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("kubectl");
        if let Some(input) = stdin {
            child
                .stdin
                .take()
                .unwrap()
                .write_all(input.as_bytes())
                .unwrap();
        }
        drop(child.stdin.take());
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "kubectl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    pub fn apply(&self, manifest: &str) {
        self.kubectl(&["apply", "-f", "-"], Some(manifest));
    }

    /// `kubectl get ARGS -o json`, parsed.
    pub fn get(&self, args: &[&str]) -> Value {
        let mut all = vec!["get"];
        all.extend_from_slice(args);
        all.extend_from_slice(&["-o", "json"]);
        serde_json::from_str(&self.kubectl(&all, None)).unwrap()
    }

    /// The server's objects, as `kubectl get -o json` lists them.
    pub fn items(&self, args: &[&str]) -> Vec<Value> {
        self.get(args)["items"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    }
}

impl Drop for RealApiserver {
    fn drop(&mut self) {
        if let Some(state) = self.vars.get("STATE") {
            // Killed outright (nothing reads this server again), then down.sh finds both
            // processes gone and removes the folder.
            for process in ["kube-apiserver", "etcd"] {
                let pid = std::fs::read_to_string(
                    Path::new(state).join("run").join(format!("{process}.pid")),
                );
                if let Ok(pid) = pid.as_deref().map(str::trim) {
                    let _ = Command::new("kill").args(["-KILL", pid]).status();
                }
            }
            let _ = Command::new(self.scripts.join("down.sh"))
                .arg(state)
                .status();
        }
    }
}
