//! `--shadow`'s side of the driver: the daemons' shadow reports asked over their control
//! sockets (every [`REPORT_EVERY`], before each SIGTERM, at the end), the graceful restarts,
//! and at the end each daemon's log and history file handed to the checker
//! (`shadow_rules.rs`).

use std::time::{Duration, Instant};

use super::daemons::shadow_paths;
use super::driver::Run;

/// How often each running daemon is asked for its report.
pub const REPORT_EVERY: Duration = Duration::from_secs(10);
/// How long an answer may take.
const ASK_TIMEOUT: Duration = Duration::from_secs(2);

impl Run<'_> {
    /// Asks `daemon` (by index) for its report and hands the answer to the checker.
    fn ask_report(&mut self, index: usize) {
        let Some(dir) = self.policy.shadow.clone() else {
            return;
        };
        let (daemon, _) = &self.daemons[index];
        if daemon.pid().is_none() {
            return;
        }
        let name = daemon.name.clone();
        let (_, socket) = shadow_paths(&dir, &name);
        let answer = node_lifecycled::runtime::control_socket::ask(
            &socket,
            "shadow report --format json",
            ASK_TIMEOUT,
        )
        .ok();
        // Stamped when asked: the daemon answers from the history it has by then.
        let at = self.cluster.now();
        self.checker.shadow_report(&name, at, answer.as_deref());
    }

    /// Every running daemon's report, when due.
    pub(super) fn shadow_reports(&mut self, last: &mut Instant) {
        if self.policy.shadow.is_none() || last.elapsed() < REPORT_EVERY {
            return;
        }
        *last = Instant::now();
        for i in 0..self.daemons.len() {
            self.ask_report(i);
        }
    }

    /// `daemon-restart`: the leader (or the other daemon) asked for its report, stopped with
    /// SIGTERM, started again `after` later.
    pub(super) fn restart_daemon(&mut self, leader: bool, after: Duration) {
        let holder = self.leader();
        let Some(index) = self
            .daemons
            .iter()
            .position(|(d, _)| (Some(&d.name) == holder.as_ref()) == leader && d.pid().is_some())
        else {
            self.fault_log.push_str("  no such daemon running\n");
            return;
        };
        self.ask_report(index);
        let (daemon, _) = &mut self.daemons[index];
        let name = daemon.name.clone();
        let clean = daemon.terminate(after);
        let now = self.cluster.now();
        self.checker.daemon_ended(&name, now, clean);
        if leader {
            self.checker.leader_killed(now);
        }
    }

    /// At the end, before the daemons are stopped: each one's report.
    pub(super) fn final_reports(&mut self) {
        for i in 0..self.daemons.len() {
            self.ask_report(i);
        }
    }

    /// Once the daemons are stopped (`stopped[i]`: daemon `i` stopped in time after SIGTERM):
    /// each one's log and history file judged.
    pub(super) fn judge_shadow(&mut self, stopped: &[bool]) {
        let Some(dir) = self.policy.shadow.clone() else {
            return;
        };
        let now = self.cluster.now();
        for (i, (daemon, _)) in self.daemons.iter().enumerate() {
            let name = daemon.name.clone();
            let log = std::fs::read_to_string(&daemon.log).unwrap_or_default();
            let (file, _) = shadow_paths(&dir, &name);
            let file = std::fs::read_to_string(file).ok();
            self.checker
                .daemon_ended(&name, now, stopped.get(i).copied().unwrap_or(false));
            self.checker.judge_shadow(&name, &log, file.as_deref(), now);
        }
    }
}
