//! The daemon as the loop's handler: socket events and timers dispatched to their part, and
//! the before-sleep hook that starts fences, logs the turn's decisions and rearms every timer
//! at the machines' next deadlines.

use super::*;

impl Handler<SourceKind, TimerKind> for Daemon {
    fn on_event(&mut self, lp: &mut Lp, token: Token, source: SourceKind, _event: &Event) {
        match source {
            SourceKind::Signal(signal) => self.on_signal(lp, signal),
            SourceKind::Watch(watch) => self.on_informer(lp, watch, Some(token)),
            SourceKind::Metrics => {
                if let Some(mut server) = self.metrics.take() {
                    server.on_event(lp, token, SourceKind::Metrics, self);
                    self.metrics = Some(server);
                }
            }
            SourceKind::Control => {
                if let Some(mut server) = self.control.take() {
                    let asked = Asked {
                        daemon: self,
                        event_loop: lp.snapshot(),
                    };
                    server.on_event(lp, token, SourceKind::Control, &asked);
                    self.control = Some(server);
                }
            }
            SourceKind::FenceOutput => self.fencer.on_output(token),
        }
    }

    fn on_timer(&mut self, lp: &mut Lp, timer: TimerKind, now: Time) {
        match timer {
            TimerKind::Watchdog => {
                trace!("watchdog ping");
                report("WATCHDOG=1", self.notifier.watchdog());
                if let Some(every) = self.watchdog_every {
                    lp.schedule(TimerKind::Watchdog, now + every);
                }
            }
            TimerKind::Informer(watch) => self.on_informer(lp, watch, None),
            TimerKind::Controller => self.on_controller_timer(now),
            TimerKind::Executor => self.on_executor_timer(lp),
            TimerKind::Leader => self.on_leader_timer(lp),
            TimerKind::Metrics => {
                if let Some(server) = &mut self.metrics {
                    server.on_timer(lp, now);
                }
            }
            TimerKind::Control => {
                if let Some(server) = &mut self.control {
                    server.on_timer(lp, now);
                }
            }
            // `rearm` below logs the summaries that came due.
            TimerKind::Decisions => {}
            TimerKind::Fence => {
                let ended = self.fencer.on_deadline(lp);
                self.feed_all(ended, now);
            }
        }
    }

    /// Once per loop turn, whatever happened in it: `rearm`.
    fn before_sleep(&mut self, lp: &mut Lp) {
        self.rearm(lp);
    }
}

impl Daemon {
    /// Starts the fences asked for, logs the turn's decisions and keeps the machines' timers at
    /// their next deadlines: the loop's before-sleep hook, once per turn.
    pub(super) fn rearm(&mut self, lp: &mut Lp) {
        // Fences first: an answer known at once (dry-run) is a decision logged below.
        self.start_fences(lp);
        self.probe_fence_agent(lp);
        self.log_decisions(lp.now());
        match self.decision_log.next_deadline() {
            Some(at) => lp.schedule(TimerKind::Decisions, at),
            None => {
                lp.cancel(&TimerKind::Decisions);
            }
        }
        if let Some(at) = self.control.as_ref().and_then(ControlServer::next_deadline) {
            lp.schedule(TimerKind::Control, at);
        }
        match [self.fencer.next_deadline(), self.status_due()]
            .into_iter()
            .flatten()
            .min()
        {
            Some(at) => lp.schedule(TimerKind::Fence, at),
            None => {
                lp.cancel(&TimerKind::Fence);
            }
        }
        // The pass may ride a wake-up in the window before its tick (a watch's end aimed
        // there: `aim_watch_ends`); alone, it wakes the loop at its tick.
        match (
            self.controllers.next_deadline(),
            self.controllers.next_soft_deadline(),
        ) {
            (Some(at), Some(soft)) => lp.schedule_lazy(TimerKind::Controller, soft, at),
            (Some(at), None) => lp.schedule(TimerKind::Controller, at),
            (None, _) => {
                lp.cancel(&TimerKind::Controller);
            }
        }
        let period = self.config.controller.node_monitor_period;
        let window = self.controllers.monitor_pass_window();
        self.informers.aim_watch_ends(window, period);
        match self.executor.next_wakeup().filter(|_| self.acting) {
            Some(at) => lp.schedule(TimerKind::Executor, at),
            None => {
                lp.cancel(&TimerKind::Executor);
            }
        }
        match self.leader.next_deadline() {
            Some(at) => lp.schedule(TimerKind::Leader, at),
            None => {
                lp.cancel(&TimerKind::Leader);
            }
        }
        if let Some(at) = self.metrics.as_ref().and_then(MetricsServer::next_deadline) {
            lp.schedule(TimerKind::Metrics, at);
        }
    }
}
