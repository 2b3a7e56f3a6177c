//! Status and metrics: owns what the daemon shows outside — the systemd notifier (READY, the
//! watchdog, the STATUS line and when it was last recomputed), the metrics server, the control
//! socket, the health timings and the decision log. What they show is assembled from every part
//! in `status.rs`.

use std::io;
use std::time::Duration;

use log::{trace, warn};

use super::Lp;
use super::kinds::TimerKind;
use crate::controller::Decision;
use crate::observe::HealthTimings;
use crate::observe::decision_log::{DecisionLog, LogLine};
use crate::runtime::control_socket::ControlServer;
use crate::runtime::metrics_server::MetricsServer;
use crate::runtime::sd_notify::Notifier;
use crate::time::Time;

/// How often `STATUS=` is recomputed at most (it is sent only when it changed). It rides on the
/// controller's timers, which fire at least every `node_monitor_period`: no wake-up of its own.
const STATUS_PERIOD: Duration = Duration::from_secs(5);

pub(super) struct Observability {
    notifier: Notifier,
    watchdog_every: Option<Duration>,
    ready_sent: bool,
    /// The STATUS line last sent.
    status: String,
    /// When `STATUS=` was last recomputed by the controller timer.
    status_refreshed: Time,
    metrics: Option<MetricsServer>,
    control: Option<ControlServer>,
    health_timings: HealthTimings,
    /// Every decision as one line (folded in floods), and the history `explain` shows.
    decision_log: DecisionLog,
}

fn report(what: &str, result: io::Result<()>) {
    if let Err(e) = result {
        warn!("sd_notify {what}: {e}");
    }
}

impl Observability {
    pub(super) fn new(
        notifier: Notifier,
        watchdog_every: Option<Duration>,
        metrics: Option<MetricsServer>,
        control: Option<ControlServer>,
    ) -> Observability {
        Observability {
            notifier,
            watchdog_every,
            ready_sent: false,
            status: String::new(),
            status_refreshed: Time::ZERO,
            metrics,
            control,
            health_timings: HealthTimings::default(),
            decision_log: DecisionLog::new(),
        }
    }

    // ---- systemd --------------------------------------------------------------------------

    /// Where sd_notify messages go, or "off".
    pub(super) fn notify_address(&self) -> &str {
        if self.notifier.is_enabled() {
            self.notifier.address()
        } else {
            "off"
        }
    }

    pub(super) fn watchdog_every(&self) -> Option<Duration> {
        self.watchdog_every
    }

    /// `WATCHDOG=1`, and the next ping armed.
    pub(super) fn watchdog(&mut self, lp: &mut Lp, now: Time) {
        trace!("watchdog ping");
        report("WATCHDOG=1", self.notifier.watchdog());
        if let Some(every) = self.watchdog_every {
            lp.schedule(TimerKind::Watchdog, now + every);
        }
    }

    /// `READY=1`, the first time only.
    pub(super) fn ready_once(&mut self) {
        if !self.ready_sent {
            self.ready_sent = true;
            report("READY=1", self.notifier.ready());
        }
    }

    pub(super) fn stopping(&self) {
        report("STOPPING=1", self.notifier.stopping());
    }

    /// What the daemon is doing, for `systemctl status` and the state dump; sent on change.
    pub(super) fn set_status(&mut self, status: String) {
        if status != self.status {
            report("STATUS", self.notifier.status(&status));
            self.status = status;
        }
    }

    /// The STATUS line last sent.
    pub(super) fn status(&self) -> &str {
        &self.status
    }

    /// Whether `STATUS=` is to be recomputed now (noted as done): each time until the initial
    /// sync (`all_synced`), then at most every [`STATUS_PERIOD`].
    pub(super) fn status_due(&mut self, now: Time, all_synced: bool) -> bool {
        if !all_synced
            || self.status_refreshed == Time::ZERO
            || now.since(self.status_refreshed) >= STATUS_PERIOD
        {
            self.status_refreshed = now;
            return true;
        }
        false
    }

    /// The next `status_due` says yes.
    pub(super) fn refresh_status_soon(&mut self) {
        self.status_refreshed = Time::ZERO;
    }

    // ---- health timings and decisions -----------------------------------------------------

    /// One pass over every node took this long.
    pub(super) fn observe_all_nodes_health(&mut self, took: Duration) {
        self.health_timings.update_all_nodes_health.observe(took);
    }

    /// One node's health update took this long.
    pub(super) fn observe_node_health(&mut self, took: Duration) {
        self.health_timings.update_node_health.observe(took);
    }

    pub(super) fn health_timings(&self) -> &HealthTimings {
        &self.health_timings
    }

    pub(super) fn decision_log(&self) -> &DecisionLog {
        &self.decision_log
    }

    /// A turn without decisions: the summaries of folded lines that came due.
    pub(super) fn flush_decisions(&mut self, now: Time) -> Vec<LogLine> {
        self.decision_log.flush(now)
    }

    /// A turn's decisions: their lines (folded).
    pub(super) fn record_decisions(
        &mut self,
        now: Time,
        decisions: Vec<Decision>,
        dry_run: bool,
    ) -> Vec<LogLine> {
        self.decision_log.record(now, decisions, dry_run)
    }

    /// Arms the Decisions timer at the next summary of folded lines.
    pub(super) fn arm_decisions(&self, lp: &mut Lp) {
        match self.decision_log.next_deadline() {
            Some(at) => lp.schedule(TimerKind::Decisions, at),
            None => {
                lp.cancel(&TimerKind::Decisions);
            }
        }
    }

    // ---- the metrics server and the control socket ----------------------------------------

    /// The metrics server, lent out while it serves a connection with what the daemon
    /// shows (it is then given back: `put_metrics`).
    pub(super) fn take_metrics(&mut self) -> Option<MetricsServer> {
        self.metrics.take()
    }

    pub(super) fn put_metrics(&mut self, server: MetricsServer) {
        self.metrics = Some(server);
    }

    /// The control socket, lent out while it answers a client (given back: `put_control`).
    pub(super) fn take_control(&mut self) -> Option<ControlServer> {
        self.control.take()
    }

    pub(super) fn put_control(&mut self, server: ControlServer) {
        self.control = Some(server);
    }

    pub(super) fn on_metrics_timer(&mut self, lp: &mut Lp, now: Time) {
        if let Some(server) = &mut self.metrics {
            server.on_timer(lp, now);
        }
    }

    pub(super) fn arm_metrics(&self, lp: &mut Lp) {
        if let Some(at) = self.metrics.as_ref().and_then(MetricsServer::next_deadline) {
            lp.schedule(TimerKind::Metrics, at);
        }
    }

    pub(super) fn on_control_timer(&mut self, lp: &mut Lp, now: Time) {
        if let Some(server) = &mut self.control {
            server.on_timer(lp, now);
        }
    }

    pub(super) fn arm_control(&self, lp: &mut Lp) {
        if let Some(at) = self.control.as_ref().and_then(ControlServer::next_deadline) {
            lp.schedule(TimerKind::Control, at);
        }
    }

    /// Closes the metrics server, then the control socket (at shutdown).
    pub(super) fn close_all(&mut self, lp: &mut Lp) {
        if let Some(mut server) = self.metrics.take() {
            server.close_all(lp);
        }
        if let Some(mut server) = self.control.take() {
            server.close_all(lp);
        }
    }
}
