//! Fence commands as child processes of the single-threaded daemon.
//!
//! Nothing blocks and no thread is added:
//! - the command is spawned with `std::process::Command` (an argv, no shell), stdin from
//!   /dev/null, stdout and stderr into pipes that are non-blocking and registered with the
//!   loop: each readable event drains them, keeping the first [`OUTPUT_KEPT`] bytes of each for
//!   the log (a chatty command can never fill a pipe and hang);
//! - its exit is noticed through SIGCHLD, which reaches the loop through the signal pipe like
//!   every other signal; then every child is polled with `try_wait` (signals coalesce);
//! - its timeout is a deadline on the loop's timer heap: past it the child is killed
//!   (SIGKILL) and reaped on the SIGCHLD that follows. Only the child itself is killed, not
//!   programs it started: a wrapper script should `exec` its last command (conf/fencing/ does).
//!
//! Each end becomes an [`Input::FenceExited`] for the controllers. Dry-run runs nothing: it logs
//! `would fence NODE (command …)` and answers at once.

use std::io::{self, Read};
use std::os::unix::process::ExitStatusExt;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use log::{info, warn};
use mio::unix::pipe::Receiver;
use mio::{Interest, Token};

use crate::config::{FenceStepConfig, FencingConfig, format_duration};
use crate::controller::fencing::{FenceCommand, FenceOutcome, FenceStep};
use crate::controller::{ActionId, Input};
use crate::observe::FencingMetrics;
use crate::time::Time;

use super::LoopControl;

/// Bytes of each of stdout and stderr kept for the log; the rest is read and counted.
pub(crate) const OUTPUT_KEPT: usize = 4096;

struct Output {
    pipe: Option<(Receiver, Token)>,
    kept: Vec<u8>,
    dropped: usize,
}

impl Output {
    fn drain(&mut self) {
        let Some((pipe, _)) = self.pipe.as_mut() else {
            return;
        };
        let mut buf = [0u8; 4096];
        loop {
            match pipe.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => {
                    let room = OUTPUT_KEPT.saturating_sub(self.kept.len()).min(n);
                    self.kept.extend_from_slice(&buf[..room]);
                    self.dropped += n - room;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => break,
            }
        }
    }

    fn text(&self) -> String {
        let mut s = String::from_utf8_lossy(&self.kept)
            .trim_end()
            .replace('\n', " | ");
        if self.dropped > 0 {
            s.push_str(&format!(" … ({} more bytes not kept)", self.dropped));
        }
        s
    }
}

struct Running {
    id: ActionId,
    step: FenceStep,
    node: String,
    child: Child,
    started: Time,
    deadline: Time,
    killed: bool,
    stdout: Output,
    stderr: Output,
}

pub struct FenceRunner {
    /// The power-off steps (`[[fencing.step]]`, or `command` with `timeout`).
    steps: Vec<FenceStepConfig>,
    /// `power-cycle`'s power-on (`on_command`, with `timeout`).
    on: Option<FenceStepConfig>,
    /// The credential check (`status_command`, with `timeout`).
    status: Option<FenceStepConfig>,
    running: Vec<Running>,
    pub metrics: FencingMetrics,
}

/// The command's environment for `command` (FENCE_STEP, NODE_*, DRY_RUN).
fn command_env(command: &FenceCommand) -> Vec<(&'static str, String)> {
    vec![
        ("FENCE_STEP", command.step.env()),
        ("NODE_NAME", command.node.to_string()),
        ("NODE_UID", command.uid.to_string()),
        ("NODE_ADDRESSES", addresses_env(&command.addresses)),
        ("NODE_LABELS", labels_env(&command.labels)),
        ("DRY_RUN", "false".to_string()),
    ]
}

/// Runs `argv` for `command` to its end or `timeout` (then killed), blocking: for
/// `doctor --fence-sample`, never for the daemon. Returns the outcome and the first
/// [`OUTPUT_KEPT`] bytes of stdout and stderr together.
pub fn run_blocking(
    argv: &[String],
    timeout: Duration,
    command: &FenceCommand,
) -> (FenceOutcome, String) {
    let Some((program, args)) = argv.split_first() else {
        return (
            FenceOutcome::SpawnFailed("no command".into()),
            String::new(),
        );
    };
    let file = match tempfile_for_output() {
        Ok(f) => f,
        Err(e) => return (FenceOutcome::SpawnFailed(e.to_string()), String::new()),
    };
    let (out, err) = match (file.try_clone(), file.try_clone()) {
        (Ok(a), Ok(b)) => (a, b),
        (Err(e), _) | (_, Err(e)) => {
            return (FenceOutcome::SpawnFailed(e.to_string()), String::new());
        }
    };
    let spawned = Command::new(program)
        .args(args)
        .envs(command_env(command))
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .spawn();
    let mut child = match spawned {
        Ok(c) => c,
        Err(e) => {
            return (
                FenceOutcome::SpawnFailed(format!("{}: {e}", argv.join(" "))),
                String::new(),
            );
        }
    };
    let started = std::time::Instant::now();
    let outcome = loop {
        match child.try_wait() {
            Ok(Some(s)) => {
                break match (s.code(), s.signal()) {
                    (Some(code), _) => FenceOutcome::Exited(code),
                    (None, Some(sig)) => FenceOutcome::Signalled(sig),
                    (None, None) => FenceOutcome::Exited(-1),
                };
            }
            Ok(None) if started.elapsed() >= timeout => {
                let _ = child.kill();
                let _ = child.wait();
                break FenceOutcome::TimedOut;
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => break FenceOutcome::SpawnFailed(format!("waiting for it failed: {e}")),
        }
    };
    let mut text = String::new();
    let mut file = file;
    use std::io::Seek;
    let _ = file.seek(io::SeekFrom::Start(0));
    let mut kept = Vec::new();
    let _ = (&mut file).take(OUTPUT_KEPT as u64).read_to_end(&mut kept);
    text.push_str(String::from_utf8_lossy(&kept).trim_end());
    (outcome, text.replace('\n', " | "))
}

/// An unnamed temporary file for a blocking run's output (no pipe to drain while waiting).
fn tempfile_for_output() -> io::Result<std::fs::File> {
    let path = std::env::temp_dir().join(format!(
        "node-lifecycled-status-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0)
    ));
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .open(&path)?;
    let _ = std::fs::remove_file(&path);
    Ok(file)
}

/// `type=address,…` as in `status.addresses`.
fn addresses_env(addresses: &[(String, String)]) -> String {
    addresses
        .iter()
        .map(|(t, a)| format!("{t}={a}"))
        .collect::<Vec<_>>()
        .join(",")
}

fn labels_env(labels: &[(String, String)]) -> String {
    let map: serde_json::Map<String, serde_json::Value> = labels
        .iter()
        .map(|(k, v)| (k.clone(), serde_json::Value::String(v.clone())))
        .collect();
    serde_json::Value::Object(map).to_string()
}

impl FenceRunner {
    pub fn new(config: &FencingConfig) -> FenceRunner {
        let mut runner = FenceRunner {
            steps: Vec::new(),
            on: None,
            status: None,
            running: Vec::new(),
            metrics: FencingMetrics::default(),
        };
        runner.apply(config);
        runner
    }

    /// Config reload: the next command runs with these; running ones keep their deadline.
    pub(crate) fn apply(&mut self, config: &FencingConfig) {
        self.steps = config.effective_steps();
        self.on = (!config.on_command.is_empty()).then(|| FenceStepConfig {
            command: config.on_command.clone(),
            timeout: config.timeout,
        });
        self.status = (!config.status_command.is_empty()).then(|| FenceStepConfig {
            command: config.status_command.clone(),
            timeout: config.timeout,
        });
    }

    /// The command and timeout of `step` (`None`: not configured).
    fn step(&self, step: FenceStep) -> Option<&FenceStepConfig> {
        match step {
            FenceStep::Off(i) => self.steps.get(i),
            FenceStep::On => self.on.as_ref(),
            FenceStep::Status => self.status.as_ref(),
        }
    }

    pub fn running(&self) -> usize {
        self.running.len()
    }

    /// The earliest timeout of a command not yet killed.
    pub fn next_deadline(&self) -> Option<Time> {
        self.running
            .iter()
            .filter(|r| !r.killed)
            .map(|r| r.deadline)
            .min()
    }

    fn count(&mut self, outcome: &FenceOutcome, took: Duration) {
        *self.metrics.attempts.entry(outcome.result()).or_default() += 1;
        if !matches!(outcome, FenceOutcome::DryRun | FenceOutcome::SpawnFailed(_)) {
            self.metrics.duration.observe(took);
        }
    }

    /// Starts the command for `command.node`; an answer that is known at once (dry-run, the
    /// program could not start) is returned.
    pub fn start<S: Clone, T: Eq + std::hash::Hash + Clone>(
        &mut self,
        lp: &mut LoopControl<S, T>,
        output_source: S,
        id: ActionId,
        command: FenceCommand,
        dry_run: bool,
    ) -> Option<Input> {
        let now = lp.now();
        let node = command.node.to_string();
        let (argv, timeout) = self
            .step(command.step)
            .map_or((Vec::new(), Duration::ZERO), |s| {
                (s.command.clone(), s.timeout)
            });
        let shown = argv.join(" ");
        if dry_run {
            info!("would fence {node} (command {shown})");
            let outcome = FenceOutcome::DryRun;
            self.count(&outcome, Duration::ZERO);
            return Some(Input::FenceExited {
                id,
                outcome,
                took: Duration::ZERO,
            });
        }
        let spawned = match argv.split_first() {
            None => Err(io::Error::other(format!(
                "no command configured for step {}",
                command.step.env()
            ))),
            Some((program, args)) => Command::new(program)
                .args(args)
                .envs(command_env(&command))
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn(),
        };
        let mut child = match spawned {
            Ok(child) => child,
            Err(e) => {
                let outcome = FenceOutcome::SpawnFailed(format!("{shown}: {e}"));
                warn!("fence command for node {node} {outcome}");
                self.count(&outcome, Duration::ZERO);
                return Some(Input::FenceExited {
                    id,
                    outcome,
                    took: Duration::ZERO,
                });
            }
        };
        let mut register = |pipe: Option<Receiver>| -> Output {
            let pipe = pipe.and_then(|mut p| {
                p.set_nonblocking(true).ok()?;
                let token = lp
                    .register(&mut p, Interest::READABLE, output_source.clone())
                    .ok()?;
                Some((p, token))
            });
            Output {
                pipe,
                kept: Vec::new(),
                dropped: 0,
            }
        };
        let stdout = register(child.stdout.take().map(Receiver::from));
        let stderr = register(child.stderr.take().map(Receiver::from));
        info!(
            "fencing: started command for node={node} step={} pid={} timeout={} command=\"{shown}\"",
            command.step.env(),
            child.id(),
            format_duration(timeout),
        );
        self.running.push(Running {
            id,
            step: command.step,
            node,
            child,
            started: now,
            deadline: now.saturating_add(timeout),
            killed: false,
            stdout,
            stderr,
        });
        None
    }

    /// A command's output pipe is readable.
    pub fn on_output(&mut self, token: Token) {
        for r in &mut self.running {
            for out in [&mut r.stdout, &mut r.stderr] {
                if out.pipe.as_ref().is_some_and(|(_, t)| *t == token) {
                    out.drain();
                }
            }
        }
    }

    /// The timeout: overdue commands are killed; the SIGCHLD that follows reaps them.
    pub fn on_deadline<S: Clone, T: Eq + std::hash::Hash + Clone>(
        &mut self,
        lp: &mut LoopControl<S, T>,
    ) -> Vec<Input> {
        let now = lp.now();
        for r in self
            .running
            .iter_mut()
            .filter(|r| !r.killed && r.deadline <= now)
        {
            warn!(
                "fence command for node {} (pid {}) still running after {}: killing it",
                r.node,
                r.child.id(),
                format_duration(now.since(r.started))
            );
            if let Err(e) = r.child.kill() {
                warn!("could not kill fence command pid {}: {e}", r.child.id());
            }
            r.killed = true;
        }
        self.reap(lp)
    }

    /// SIGCHLD (or a kill): every child that ended is reaped, its output logged.
    pub fn reap<S: Clone, T: Eq + std::hash::Hash + Clone>(
        &mut self,
        lp: &mut LoopControl<S, T>,
    ) -> Vec<Input> {
        let now = lp.now();
        let mut ended = Vec::new();
        let mut i = 0;
        while i < self.running.len() {
            match self.running[i].child.try_wait() {
                Ok(None) => i += 1,
                Ok(Some(status)) => ended.push((self.running.remove(i), Ok(status))),
                Err(e) => ended.push((self.running.remove(i), Err(e))),
            }
        }
        let mut inputs = Vec::new();
        for (mut r, status) in ended {
            let took = now.since(r.started);
            let outcome = match status {
                _ if r.killed => FenceOutcome::TimedOut,
                Ok(s) => match (s.code(), s.signal()) {
                    (Some(code), _) => FenceOutcome::Exited(code),
                    (None, Some(sig)) => FenceOutcome::Signalled(sig),
                    (None, None) => FenceOutcome::Exited(-1),
                },
                Err(e) => FenceOutcome::SpawnFailed(format!("waiting for it failed: {e}")),
            };
            for out in [&mut r.stdout, &mut r.stderr] {
                out.drain();
                if let Some((mut pipe, token)) = out.pipe.take() {
                    lp.deregister(&mut pipe, token);
                }
            }
            info!(
                "fencing: command for node={} ended: {outcome} after {}ms; stdout=\"{}\" stderr=\"{}\"",
                r.node,
                took.as_millis(),
                r.stdout.text(),
                r.stderr.text()
            );
            if r.step != FenceStep::Status {
                self.count(&outcome, took);
            }
            inputs.push(Input::FenceExited {
                id: r.id,
                outcome,
                took,
            });
        }
        inputs
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_environment_names_addresses_and_labels() {
        let addresses = vec![
            ("InternalIP".to_string(), "10.0.0.7".to_string()),
            ("Hostname".to_string(), "n7".to_string()),
        ];
        assert_eq!(addresses_env(&addresses), "InternalIP=10.0.0.7,Hostname=n7");
        let labels = vec![("bmc".to_string(), "10.9.0.7".to_string())];
        assert_eq!(labels_env(&labels), r#"{"bmc":"10.9.0.7"}"#);
    }
}
