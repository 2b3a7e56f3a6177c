//! The real kube-apiserver of `../shared/real-apiserver` for the tests that need one: started
//! with up.sh, stopped with down.sh on drop (also when a test panics). One at a time in the
//! process: two servers with their etcds on a small machine would blur every timing a test
//! measures, so a second `start` waits for the first server's drop.
//! Unavailable → the test fails loudly, unless NODE_LIFECYCLED_SKIP_REAL_APISERVER=1 says why
//! it may be skipped.

pub mod fleet;
pub mod reset_proxy;

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Mutex, MutexGuard};

use serde_json::Value;

pub const SKIP_VARIABLE: &str = "NODE_LIFECYCLED_SKIP_REAL_APISERVER";

/// A running etcd + kube-apiserver, stopped on drop (also when the scenario panics).
pub struct RealApiserver {
    vars: HashMap<String, String>,
    scripts: PathBuf,
    /// Held until after down.sh has run (fields drop after `Drop::drop`).
    _one_at_a_time: MutexGuard<'static, ()>,
}

/// The one server of the process.
static ONE_SERVER: Mutex<()> = Mutex::new(());

impl RealApiserver {
    pub fn start() -> Option<RealApiserver> {
        // A test that panicked with the server up poisons the lock; its drop still stopped it.
        let one_at_a_time = ONE_SERVER
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let scripts = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/real-apiserver");
        let output = Command::new(scripts.join("up.sh")).output();
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
        let stdout = String::from_utf8_lossy(&output.unwrap().stdout).into_owned();
        let vars = stdout
            .lines()
            .filter_map(|l| l.split_once('='))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Some(RealApiserver {
            vars,
            scripts,
            _one_at_a_time: one_at_a_time,
        })
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
            let _ = Command::new(self.scripts.join("down.sh"))
                .arg(state)
                .status();
        }
    }
}
