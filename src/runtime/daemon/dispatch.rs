//! The daemon as the loop's handler: socket events and timers dispatched to their part, and
//! the before-sleep hook that starts fences, logs the turn's decisions and rearms every timer
//! at the machines' next deadlines. Owns no state: each event or timer goes to the part that
//! owns it, or to the `Daemon` method that coordinates parts.

use mio::Token;
use mio::event::Event;

use super::kinds::{SourceKind, TimerKind};
use super::status::Asked;
use super::{Daemon, Lp};
use crate::runtime::event_loop::Handler;
use crate::time::Time;

impl Handler<SourceKind, TimerKind> for Daemon {
    fn on_event(&mut self, lp: &mut Lp, token: Token, source: SourceKind, _event: &Event) {
        match source {
            SourceKind::Signal(signal) => self.on_signal(lp, signal),
            SourceKind::Watch(watch) => self.on_informer(lp, watch, Some(token)),
            SourceKind::Metrics => {
                if let Some(mut server) = self.observability.take_metrics() {
                    server.on_event(lp, token, SourceKind::Metrics, self);
                    self.observability.put_metrics(server);
                }
            }
            SourceKind::Control => {
                if let Some(mut server) = self.observability.take_control() {
                    let asked = Asked {
                        daemon: self,
                        event_loop: lp.snapshot(),
                    };
                    server.on_event(lp, token, SourceKind::Control, &asked);
                    self.observability.put_control(server);
                }
            }
            SourceKind::FenceOutput => self.fences.on_output(token),
        }
    }

    fn on_timer(&mut self, lp: &mut Lp, timer: TimerKind, now: Time) {
        match timer {
            TimerKind::Watchdog => self.observability.watchdog(lp, now),
            TimerKind::Informer(watch) => self.on_informer(lp, watch, None),
            TimerKind::Controller => self.on_controller_timer(now),
            TimerKind::Executor => self.on_executor_timer(lp),
            TimerKind::Leader => self.on_leader_timer(lp),
            TimerKind::Metrics => self.observability.on_metrics_timer(lp, now),
            TimerKind::Control => self.observability.on_control_timer(lp, now),
            // `rearm` below logs the summaries that came due.
            TimerKind::Decisions => {}
            TimerKind::Fence => {
                let ended = self.fences.on_deadline(lp);
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
        self.observability.arm_decisions(lp);
        self.observability.arm_control(lp);
        match self.fences.next_deadline(&self.config.fencing) {
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
        match self
            .executor
            .next_wakeup()
            .filter(|_| self.leadership.acting())
        {
            Some(at) => lp.schedule(TimerKind::Executor, at),
            None => {
                lp.cancel(&TimerKind::Executor);
            }
        }
        match self.leadership.next_deadline() {
            Some(at) => lp.schedule(TimerKind::Leader, at),
            None => {
                lp.cancel(&TimerKind::Leader);
            }
        }
        self.observability.arm_metrics(lp);
    }
}
