//! The shell: fence commands as child processes of the mio loop, with tiny real scripts. The loop
//! is driven as the daemon drives it: SIGCHLD through the signal pipe, then `try_wait`; output
//! pipes drained on readable events; the timeout on the timer heap.

use std::path::{Path, PathBuf};
use std::time::Duration;

use mio::event::Event;
use mio::{Interest, Token};

use node_lifecycled::config::FencingConfig;
use node_lifecycled::controller::fencing::{FenceCommand, FenceOutcome};
use node_lifecycled::controller::{ActionId, Input};
use node_lifecycled::model::Name;
use node_lifecycled::runtime::fencing::FenceRunner;
use node_lifecycled::runtime::signals::{Signal, Signals};
use node_lifecycled::runtime::{Clock, EventLoop, Handler, LoopControl};
use node_lifecycled::time::Time;

#[derive(Clone, Debug, PartialEq, Eq)]
enum Kind {
    Signal(Signal),
    Output,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Timer {
    Fence,
    /// Generous: this machine is busy.
    GiveUp,
}

struct Harness {
    runner: FenceRunner,
    signals: Signals,
    ended: Vec<(Input, Time)>,
}

impl Harness {
    fn after(&mut self, lp: &mut LoopControl<Kind, Timer>, inputs: Vec<Input>) {
        let now = lp.now();
        self.ended.extend(inputs.into_iter().map(|i| (i, now)));
        match self.runner.next_deadline() {
            Some(at) => lp.schedule(Timer::Fence, at),
            None => {
                lp.cancel(&Timer::Fence);
            }
        }
        if self.runner.running() == 0 {
            lp.stop();
        }
    }
}

impl Handler<Kind, Timer> for Harness {
    fn on_event(&mut self, lp: &mut LoopControl<Kind, Timer>, token: Token, kind: Kind, _: &Event) {
        let mut inputs = Vec::new();
        match kind {
            Kind::Signal(signal) => {
                if self.signals.drain(signal) > 0 && signal == Signal::ChildExited {
                    inputs = self.runner.reap(lp);
                }
            }
            Kind::Output => self.runner.on_output(token),
        }
        self.after(lp, inputs);
    }

    fn on_timer(&mut self, lp: &mut LoopControl<Kind, Timer>, timer: Timer, _: Time) {
        match timer {
            Timer::Fence => {
                let inputs = self.runner.on_deadline(lp);
                self.after(lp, inputs);
            }
            Timer::GiveUp => lp.stop(),
        }
    }
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("fencing-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn script(dir: &Path, body: &str) -> String {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join("fence.sh");
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path.display().to_string()
}

fn config(command: Vec<String>, timeout: Duration) -> FencingConfig {
    FencingConfig {
        enabled: true,
        command,
        after: Duration::from_secs(300),
        timeout,
        max_concurrent: 1,
        match_labels: Vec::new(),
        retry_backoff: Duration::from_secs(60),
        retry_backoff_max: Duration::from_secs(600),
        remove_out_of_service_on_recovery: true,
        ..FencingConfig::default()
    }
}

fn target() -> FenceCommand {
    FenceCommand {
        step: Default::default(),
        node: Name::from("worker-7"),
        uid: Name::from("uid-7"),
        addresses: vec![
            ("InternalIP".into(), "10.0.0.7".into()),
            ("Hostname".into(), "worker-7".into()),
        ],
        labels: vec![("bmc.example.com/address".into(), "10.9.0.7".into())],
    }
}

/// Runs one fence command to its end on a real loop; returns its answer and how long it took.
fn run(config: FencingConfig, dry_run: bool) -> (FenceOutcome, Duration, FenceRunner) {
    let mut lp: EventLoop<Kind, Timer> = EventLoop::new(Clock::start()).unwrap();
    let mut signals = Signals::install().unwrap();
    for (signal, read_end) in signals.sources_mut() {
        lp.control()
            .register(read_end, Interest::READABLE, Kind::Signal(signal))
            .unwrap();
    }
    let mut h = Harness {
        runner: FenceRunner::new(&config),
        signals,
        ended: Vec::new(),
    };
    let started = lp.control().now();
    lp.control()
        .schedule_in(Timer::GiveUp, Duration::from_secs(60));
    let immediate = h
        .runner
        .start(lp.control(), Kind::Output, ActionId(1), target(), dry_run);
    if let Some(input) = immediate {
        h.ended.push((input, started));
    } else {
        if let Some(at) = h.runner.next_deadline() {
            lp.control().schedule(Timer::Fence, at);
        }
        lp.run(&mut h).unwrap();
    }
    assert_eq!(h.ended.len(), 1, "one answer: {:?}", h.ended);
    let (input, at) = h.ended.pop().unwrap();
    let Input::FenceExited { id, outcome, took } = input else {
        panic!("not a FenceExited: {input:?}");
    };
    assert_eq!(id, ActionId(1));
    assert!(took <= at.since(started) + Duration::from_millis(5));
    (outcome, took, h.runner)
}

#[test]
fn a_fence_command_gets_the_nodes_environment_and_its_exit_status_is_reported() {
    let dir = scratch("env");
    let record = dir.join("record");
    let cmd = script(
        &dir,
        &format!(
            "echo \"args=$*\" >> {r}\necho \"NODE_NAME=$NODE_NAME NODE_UID=$NODE_UID\" >> {r}\n\
             echo \"NODE_ADDRESSES=$NODE_ADDRESSES\" >> {r}\necho \"NODE_LABELS=$NODE_LABELS\" >> {r}\n\
             echo \"DRY_RUN=$DRY_RUN\" >> {r}\necho powered off; exit 0",
            r = record.display()
        ),
    );
    let argv = vec![cmd.clone(), "--force".into(), "chassis power off".into()];
    let (outcome, _, runner) = run(config(argv, Duration::from_secs(30)), false);
    assert_eq!(outcome, FenceOutcome::Exited(0));
    let got = std::fs::read_to_string(&record).unwrap();
    assert_eq!(
        got,
        "args=--force chassis power off\nNODE_NAME=worker-7 NODE_UID=uid-7\n\
         NODE_ADDRESSES=InternalIP=10.0.0.7,Hostname=worker-7\n\
         NODE_LABELS={\"bmc.example.com/address\":\"10.9.0.7\"}\nDRY_RUN=false\n"
    );
    assert_eq!(runner.metrics.attempts.get("success"), Some(&1));
    assert_eq!(runner.metrics.duration.count, 1);

    let failing = script(&dir, "echo 'BMC unreachable' >&2; exit 3");
    let (outcome, _, runner) = run(config(vec![failing], Duration::from_secs(30)), false);
    assert_eq!(outcome, FenceOutcome::Exited(3));
    assert_eq!(runner.metrics.attempts.get("failure"), Some(&1));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The child is killed at the timeout, reaped, and reported as a timeout.
#[test]
fn a_fence_command_past_its_timeout_is_killed() {
    let dir = scratch("timeout");
    let pid_file = dir.join("pid");
    let cmd = script(
        &dir,
        &format!("echo $$ > {}\nexec sleep 30", pid_file.display()),
    );
    let (outcome, took, runner) = run(config(vec![cmd], Duration::from_millis(300)), false);
    assert_eq!(outcome, FenceOutcome::TimedOut);
    assert!(took >= Duration::from_millis(300), "{took:?}");
    assert!(took < Duration::from_secs(20), "killed late: {took:?}");
    assert_eq!(runner.metrics.attempts.get("timeout"), Some(&1));
    let pid = std::fs::read_to_string(&pid_file).unwrap();
    assert!(
        !Path::new(&format!("/proc/{}", pid.trim())).exists(),
        "process {pid} still exists (not killed or not reaped)"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn dry_run_runs_nothing() {
    let dir = scratch("dry");
    let marker = dir.join("ran");
    let cmd = script(&dir, &format!("touch {}", marker.display()));
    let (outcome, took, runner) = run(config(vec![cmd], Duration::from_secs(30)), true);
    assert_eq!(outcome, FenceOutcome::DryRun);
    assert_eq!(took, Duration::ZERO);
    assert_eq!(runner.running(), 0);
    std::thread::sleep(Duration::from_millis(200));
    assert!(!marker.exists(), "the command ran in dry-run");
    assert_eq!(runner.metrics.attempts.get("dry_run"), Some(&1));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_program_that_cannot_start_is_reported_not_panicked() {
    let (outcome, _, runner) = run(
        config(vec!["/nonexistent/fence".into()], Duration::from_secs(30)),
        false,
    );
    let FenceOutcome::SpawnFailed(why) = outcome else {
        panic!("{outcome:?}");
    };
    assert!(why.contains("/nonexistent/fence"), "{why}");
    assert_eq!(runner.metrics.attempts.get("spawn_error"), Some(&1));
}

/// 1 MiB of output: more than a pipe holds. Drained on the loop, the command cannot block on
/// a full pipe; only the first 4 KiB are kept for the log.
#[test]
fn a_chatty_command_cannot_fill_its_pipe_and_hang() {
    let dir = scratch("chatty");
    let cmd = script(&dir, "head -c 1048576 /dev/zero | tr '\\0' x\nexit 0");
    let (outcome, took, _) = run(config(vec![cmd], Duration::from_secs(30)), false);
    assert_eq!(outcome, FenceOutcome::Exited(0), "took {took:?}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The status command (credentials checked before the outage), as a real process: the node's
/// environment with FENCE_STEP=status, its exit status and output reported, its
/// timeout enforced — the blocking form `doctor --fence-sample` uses.
#[test]
fn the_status_command_reports_each_answer_with_the_nodes_environment_and_its_timeout() {
    use node_lifecycled::controller::fencing::FenceStep;
    use node_lifecycled::runtime::fencing::run_blocking;
    let dir = scratch("status");
    let record = dir.join("record");
    let ok = script(
        &dir,
        &format!(
            "echo \"$FENCE_STEP $NODE_NAME $NODE_ADDRESSES $*\" >> {}\necho Chassis Power is on; exit 0",
            record.display()
        ),
    );
    let command = FenceCommand {
        step: FenceStep::Status,
        ..target()
    };
    let argv = vec![ok, "power".to_string(), "status".to_string()];
    let (outcome, output) = run_blocking(&argv, Duration::from_secs(10), &command);
    assert_eq!(outcome, FenceOutcome::Exited(0));
    assert_eq!(output, "Chassis Power is on");
    assert_eq!(
        std::fs::read_to_string(&record).unwrap(),
        "status worker-7 InternalIP=10.0.0.7,Hostname=worker-7 power status\n"
    );

    let refused = script(
        &dir,
        "echo 'Error: Unable to establish IPMI v2 / RMCP+ session' >&2; exit 1",
    );
    let (outcome, output) = run_blocking(&[refused], Duration::from_secs(10), &command);
    assert_eq!(outcome, FenceOutcome::Exited(1));
    assert!(output.contains("Unable to establish IPMI"), "{output}");

    let hangs = script(&dir, "exec sleep 30");
    let started = std::time::Instant::now();
    let (outcome, _) = run_blocking(&[hangs], Duration::from_millis(300), &command);
    assert_eq!(outcome, FenceOutcome::TimedOut);
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );

    let (outcome, _) = run_blocking(
        &["/nonexistent/status".to_string()],
        Duration::from_secs(1),
        &command,
    );
    assert!(
        matches!(outcome, FenceOutcome::SpawnFailed(_)),
        "{outcome:?}"
    );
}
