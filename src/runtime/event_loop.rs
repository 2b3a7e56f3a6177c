//! The one loop: a `mio::Poll` for sockets and a `TimerHeap` for deadlines, sharing one wait
//! (Redis' `ae.c` shape). The poll timeout is the earliest deadline, so a timer fires on time
//! without a ticker, and an idle daemon sleeps.
//!
//! Sources (signal pipes now; watch streams and the metrics listener later) are registered with
//! a kind `S` chosen by the owner, and get a `Token` that is never reused, so an event for a
//! source deregistered earlier in the same batch is recognised as stale instead of being
//! delivered to whoever took its slot. Timers are keyed by `T`: one deadline per key.
//!
//! Handlers run to completion: a stop request (SIGTERM) is honoured between two handler calls,
//! which is what "finish the action in hand, then exit" means in a single-threaded loop.
//!
//! Lazy timers (`schedule_lazy`, systemd's `AccuracySec`, the kernel's timer slack): a timer
//! with a soft and a hard deadline fires at the first wake-up at or after `soft`, whatever
//! woke the loop, and wakes the loop itself only at `hard`; the poll timeout comes from hard
//! deadlines only. Work that may wait a little but need not be alone in a wake-up of its own
//! rides one that happens anyway (a rotated watch's response head, read at the next wake-up instead
//! of waking the loop a millisecond after the rotation). "At or after
//! `soft`" is judged against the time the loop woke, so a lazy timer armed during a turn with
//! `soft` later than that turn's wake-up never fires in the same turn.

use std::collections::HashMap;
use std::hash::Hash;
use std::io;
use std::time::Duration;

use mio::event::{Event, Source};
use mio::{Events, Interest, Poll, Registry, Token};

use super::clock::Clock;
use crate::observe::{LoopSnapshot, LoopStats};
use crate::time::Time;
use crate::time::TimerHeap;

/// Longest single wait. Nothing needs it (deadlines wake us), but a bounded wait keeps the loop
/// observable (wake-up counts move) and limits the damage of a deadline computed wrongly.
pub const MAX_POLL_WAIT: Duration = Duration::from_secs(60);

/// What the loop calls. `S` says what a registered source is, `T` what a timer is for.
pub trait Handler<S, T> {
    /// A registered source is ready (readable, writable, closed: see `event`).
    fn on_event(&mut self, lp: &mut LoopControl<S, T>, token: Token, source: S, event: &Event);

    /// A timer's deadline has passed; `now` is when the loop noticed.
    fn on_timer(&mut self, lp: &mut LoopControl<S, T>, timer: T, now: Time);

    /// Once per turn, after every handler of the turn and before the wait (Redis `ae.c`'s
    /// `beforesleep`): the work that follows from whatever happened — re-arming timers at the
    /// machines' next deadlines, flushing logs — done once, not after each handler. Also
    /// called before the first wait, and once more before `run` returns on a stop.
    fn before_sleep(&mut self, _lp: &mut LoopControl<S, T>) {}
}

/// Everything a handler may touch: registrations, timers, the clock, the stop flag.
pub struct LoopControl<S, T> {
    registry: Registry,
    sources: HashMap<Token, S>,
    next_token: usize,
    timers: TimerHeap<T>,
    /// The soft deadlines of lazy timers; their hard deadline is their entry in `timers`.
    lazy: TimerHeap<T>,
    clock: Clock,
    stats: LoopStats,
    stop_requested: bool,
}

impl<S: Clone, T: Eq + Hash + Clone> LoopControl<S, T> {
    /// Registers `io` and remembers it as `kind`; the token is what events will carry.
    pub fn register<E: Source + ?Sized>(
        &mut self,
        io: &mut E,
        interest: Interest,
        kind: S,
    ) -> io::Result<Token> {
        let token = Token(self.next_token);
        self.registry.register(io, token, interest)?;
        self.next_token += 1;
        self.sources.insert(token, kind);
        Ok(token)
    }

    pub fn reregister<E: Source + ?Sized>(
        &mut self,
        io: &mut E,
        token: Token,
        interest: Interest,
    ) -> io::Result<()> {
        self.registry.reregister(io, token, interest)
    }

    /// The poll's registry, for a source that pauses and resumes its own readiness events
    /// (its token and kind stay known meanwhile).
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// Forgets the source; returns its kind. The OS-level deregistration error is ignored on
    /// purpose: the usual cause is a socket already closed, which deregisters itself.
    pub fn deregister<E: Source + ?Sized>(&mut self, io: &mut E, token: Token) -> Option<S> {
        let _ = self.registry.deregister(io);
        self.sources.remove(&token)
    }

    /// For a source that registers itself, such as a watch stream, which registers its socket
    /// as it starts connecting: `register` gets the registry and the token to use. The token is
    /// spent even if `register` fails (tokens are never reused).
    pub fn register_with<R, E>(
        &mut self,
        kind: S,
        register: impl FnOnce(&Registry, Token) -> Result<R, E>,
    ) -> Result<R, E> {
        let token = Token(self.next_token);
        self.next_token += 1;
        let registered = register(&self.registry, token)?;
        self.sources.insert(token, kind);
        Ok(registered)
    }

    /// The counterpart of `register_with`: `deregister` gets the registry, the source is forgotten.
    pub fn deregister_with<R>(
        &mut self,
        token: Token,
        deregister: impl FnOnce(&Registry) -> R,
    ) -> (Option<S>, R) {
        let result = deregister(&self.registry);
        (self.sources.remove(&token), result)
    }

    pub fn source(&self, token: Token) -> Option<&S> {
        self.sources.get(&token)
    }

    pub fn sources(&self) -> usize {
        self.sources.len()
    }

    /// Arms `timer` for `at`, replacing its previous deadline (a lazy one too).
    pub fn schedule(&mut self, timer: T, at: Time) {
        self.lazy.cancel(&timer);
        self.timers.schedule(timer, at);
    }

    /// Arms `timer` for `after` from now.
    pub fn schedule_in(&mut self, timer: T, after: Duration) {
        let at = self.clock.now() + after;
        self.schedule(timer, at);
    }

    /// Arms `timer` lazily (see the module doc): it fires at the first wake-up at or after
    /// `soft`, and wakes the loop itself at `hard`. Replaces its previous deadline; a `soft`
    /// at or after `hard` is a plain deadline at `hard`.
    pub fn schedule_lazy(&mut self, timer: T, soft: Time, hard: Time) {
        if soft >= hard {
            return self.schedule(timer, hard);
        }
        self.lazy.schedule(timer.clone(), soft);
        self.timers.schedule(timer, hard);
    }

    /// Disarms `timer`; returns its (hard) deadline.
    pub fn cancel(&mut self, timer: &T) -> Option<Time> {
        self.lazy.cancel(timer);
        self.timers.cancel(timer)
    }

    /// The soft deadline of a lazy timer.
    pub fn soft_deadline(&self, timer: &T) -> Option<Time> {
        self.lazy.deadline(timer)
    }

    /// Every armed timer at its hard deadline.
    pub fn timers(&self) -> &TimerHeap<T> {
        &self.timers
    }

    pub fn now(&self) -> Time {
        self.clock.now()
    }

    pub fn clock(&self) -> &Clock {
        &self.clock
    }

    pub fn stats(&self) -> LoopStats {
        self.stats
    }

    /// The loop's counters and timers as the state dump and `/metrics` show them.
    pub fn snapshot(&self) -> LoopSnapshot {
        let now = self.now();
        LoopSnapshot {
            stats: self.stats,
            sources: self.sources(),
            timers_pending: self.timers().len(),
            next_timer_in: self.timers().next_deadline().map(|at| at - now),
        }
    }

    /// Ends `run` once the current handler returns.
    pub fn stop(&mut self) {
        self.stop_requested = true;
    }

    /// Withdraws a stop request, so `run` can be called again (an owner, or a test, that runs
    /// the loop in phases).
    pub fn resume(&mut self) {
        self.stop_requested = false;
    }

    pub fn is_stopping(&self) -> bool {
        self.stop_requested
    }
}

pub struct EventLoop<S, T> {
    poll: Poll,
    events: Events,
    control: LoopControl<S, T>,
}

impl<S: Clone, T: Eq + Hash + Clone> EventLoop<S, T> {
    pub fn new(clock: Clock) -> io::Result<EventLoop<S, T>> {
        let poll = Poll::new()?;
        let registry = poll.registry().try_clone()?;
        Ok(EventLoop {
            poll,
            events: Events::with_capacity(256),
            control: LoopControl {
                registry,
                sources: HashMap::new(),
                next_token: 0,
                timers: TimerHeap::new(),
                lazy: TimerHeap::new(),
                clock,
                stats: LoopStats::default(),
                stop_requested: false,
            },
        })
    }

    /// For set-up before `run` (registering the first sources, arming the first timers).
    pub fn control(&mut self) -> &mut LoopControl<S, T> {
        &mut self.control
    }

    /// Waits and dispatches until a handler calls `stop`. Errors only if `poll` itself fails.
    pub fn run<H: Handler<S, T>>(&mut self, handler: &mut H) -> io::Result<()> {
        let lp = &mut self.control;
        loop {
            handler.before_sleep(lp);
            if lp.stop_requested {
                break;
            }
            let timeout = poll_timeout(lp.clock.now(), lp.timers.next_deadline(), MAX_POLL_WAIT);
            match self.poll.poll(&mut self.events, Some(timeout)) {
                Ok(()) => {}
                // A signal interrupted epoll_wait, and its handler has written its byte to its
                // pipe by now: collect that readiness at once, in this same wake-up. Going
                // round the loop instead made every signal two wake-ups (the bench's SIGUSR1 dumps
                // were 0.05/s of the idle figure).
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {
                    match self.poll.poll(&mut self.events, Some(Duration::ZERO)) {
                        Ok(()) => {}
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                        Err(e) => return Err(e),
                    }
                }
                Err(e) => return Err(e),
            }
            lp.stats.wakeups += 1;
            let woke_at = lp.clock.now();
            for event in self.events.iter() {
                if lp.stop_requested {
                    break;
                }
                let Some(source) = lp.sources.get(&event.token()).cloned() else {
                    lp.stats.stale_events += 1;
                    continue;
                };
                lp.stats.io_events += 1;
                handler.on_event(lp, event.token(), source, event);
            }
            let now = lp.clock.now();
            // Collected first: a handler re-arming its own timer at `now` runs next turn, not
            // in an endless loop here. Lazy timers whose soft deadline the wake-up reached go
            // first: what they read (a watch's events) is then there for the turn's other
            // timers (the controller's pass).
            let mut due = lp.lazy.drain_due(woke_at);
            for (timer, _) in &due {
                lp.timers.cancel(timer);
            }
            for (timer, at) in lp.timers.drain_due(now) {
                lp.lazy.cancel(&timer);
                due.push((timer, at));
            }
            for (timer, at) in due {
                if lp.stop_requested {
                    // Not fired, so still due: a later `run` (after `resume`) fires it. Dropping
                    // it would silence its owner for good (an informer that never reopens its
                    // watch). A handler that re-armed the key meanwhile keeps its own deadline.
                    // A lazy one comes back at its soft deadline, passed: it fires at once.
                    lp.timers.schedule_if_absent(timer, at);
                    continue;
                }
                lp.stats.timers_fired += 1;
                handler.on_timer(lp, timer, now);
            }
        }
        Ok(())
    }
}

/// How long to wait: until the earliest deadline, at most `cap`, zero if already due.
pub fn poll_timeout(now: Time, next_deadline: Option<Time>, cap: Duration) -> Duration {
    match next_deadline {
        Some(at) => at.since(now).min(cap),
        None => cap,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write as _;

    #[test]
    fn poll_waits_until_the_earliest_deadline_capped() {
        let now = Time::from_unix_millis(10_000);
        let cap = Duration::from_secs(60);
        assert_eq!(poll_timeout(now, None, cap), cap);
        assert_eq!(
            poll_timeout(now, Some(Time::from_unix_millis(10_250)), cap),
            Duration::from_millis(250)
        );
        assert_eq!(
            poll_timeout(now, Some(Time::from_unix_millis(9_000)), cap),
            Duration::ZERO
        );
        assert_eq!(poll_timeout(now, Some(now), cap), Duration::ZERO);
        assert_eq!(poll_timeout(now, Some(Time::MAX), cap), cap);
    }

    #[derive(Clone, Debug, PartialEq)]
    enum Kind {
        Pipe(&'static str),
    }

    #[derive(Clone, Debug, PartialEq, Eq, Hash)]
    enum Timer {
        Early,
        Late,
        Rearm,
    }

    #[derive(Default)]
    struct Recorder {
        log: Vec<String>,
        rearms: u32,
        stop_after_timer: Option<Timer>,
    }

    impl Handler<Kind, Timer> for Recorder {
        fn on_event(
            &mut self,
            lp: &mut LoopControl<Kind, Timer>,
            _: Token,
            source: Kind,
            _: &Event,
        ) {
            self.log.push(format!("{source:?}"));
            lp.stop();
        }

        fn on_timer(&mut self, lp: &mut LoopControl<Kind, Timer>, timer: Timer, now: Time) {
            assert!(lp.now() >= now);
            self.log.push(format!("{timer:?}"));
            if timer == Timer::Rearm && self.rearms < 3 {
                self.rearms += 1;
                lp.schedule(Timer::Rearm, now);
            }
            if self.stop_after_timer.as_ref() == Some(&timer) {
                lp.stop();
            }
        }
    }

    /// Redis' `beforesleep`: the hook runs once per turn, after all the turn's handlers (two
    /// timers due together fire in one turn), and once more when a handler stops the loop.
    #[test]
    fn before_sleep_runs_once_per_turn_after_the_turns_handlers() {
        struct Turns(Vec<&'static str>);
        impl Handler<Kind, Timer> for Turns {
            fn on_event(&mut self, _: &mut LoopControl<Kind, Timer>, _: Token, _: Kind, _: &Event) {
            }
            fn on_timer(&mut self, lp: &mut LoopControl<Kind, Timer>, timer: Timer, now: Time) {
                self.0.push(match timer {
                    Timer::Early => "early",
                    Timer::Late => "late",
                    Timer::Rearm => "stop",
                });
                match timer {
                    // Due at once, yet fired on the next turn (collected before dispatch).
                    Timer::Late => lp.schedule(Timer::Rearm, now),
                    Timer::Rearm => lp.stop(),
                    Timer::Early => {}
                }
            }
            fn before_sleep(&mut self, _: &mut LoopControl<Kind, Timer>) {
                self.0.push("sleep");
            }
        }
        let mut lp: EventLoop<Kind, Timer> = EventLoop::new(Clock::start()).unwrap();
        let now = lp.control().now();
        lp.control().schedule(Timer::Early, now);
        lp.control().schedule(Timer::Late, now);
        let mut turns = Turns(Vec::new());
        lp.run(&mut turns).unwrap();
        let mut first_turn = turns.0[1..3].to_vec();
        first_turn.sort_unstable();
        assert_eq!(first_turn, ["early", "late"], "{:?}", turns.0);
        assert_eq!(turns.0[0], "sleep", "{:?}", turns.0);
        assert_eq!(turns.0[3..], ["sleep", "stop", "sleep"], "{:?}", turns.0);
    }

    #[test]
    fn timers_fire_in_deadline_order_and_a_stop_ends_the_run() {
        let mut lp: EventLoop<Kind, Timer> = EventLoop::new(Clock::start()).unwrap();
        let now = lp.control().now();
        lp.control()
            .schedule(Timer::Late, now + Duration::from_millis(30));
        lp.control()
            .schedule(Timer::Early, now + Duration::from_millis(10));
        let mut rec = Recorder {
            stop_after_timer: Some(Timer::Late),
            ..Recorder::default()
        };
        lp.run(&mut rec).unwrap();
        assert_eq!(rec.log, ["Early", "Late"]);
        let clock_now = lp.control().now();
        assert!(clock_now >= now + Duration::from_millis(30));
        assert_eq!(lp.control().stats().timers_fired, 2);
        assert!(lp.control().timers().is_empty());
    }

    #[test]
    fn timers_due_with_the_one_that_stops_the_run_fire_in_the_next_run() {
        let mut lp: EventLoop<Kind, Timer> = EventLoop::new(Clock::start()).unwrap();
        let now = lp.control().now();
        // Both due in the same turn; `Late` sorts first by deadline and stops the run.
        lp.control().schedule(Timer::Late, now);
        lp.control()
            .schedule(Timer::Early, now + Duration::from_millis(1));
        std::thread::sleep(Duration::from_millis(5));
        let mut rec = Recorder {
            stop_after_timer: Some(Timer::Late),
            ..Recorder::default()
        };
        lp.run(&mut rec).unwrap();
        assert_eq!(rec.log, ["Late"]);
        assert_eq!(
            lp.control().timers().deadline(&Timer::Early),
            Some(now + Duration::from_millis(1))
        );
        lp.control().resume();
        rec.stop_after_timer = Some(Timer::Early);
        lp.run(&mut rec).unwrap();
        assert_eq!(rec.log, ["Late", "Early"]);
    }

    #[test]
    fn a_timer_rearmed_at_now_runs_on_the_next_turn_not_forever() {
        let mut lp: EventLoop<Kind, Timer> = EventLoop::new(Clock::start()).unwrap();
        let now = lp.control().now();
        lp.control().schedule(Timer::Rearm, now);
        // Far enough that the three re-arms' turns finish first on a loaded machine (at 20 ms
        // a busy host once let Late in between): the order, not the gap, is what is tested.
        lp.control()
            .schedule(Timer::Late, now + Duration::from_millis(500));
        let mut rec = Recorder {
            stop_after_timer: Some(Timer::Late),
            ..Recorder::default()
        };
        lp.run(&mut rec).unwrap();
        assert_eq!(rec.log, ["Rearm", "Rearm", "Rearm", "Rearm", "Late"]);
        assert!(lp.control().stats().wakeups >= 4);
    }

    #[test]
    fn readable_sources_are_dispatched_with_their_kind_and_deregistered_ones_are_not() {
        let mut lp: EventLoop<Kind, Timer> = EventLoop::new(Clock::start()).unwrap();
        let (mut quiet_read, _quiet_write) = mio::net::UnixStream::pair().unwrap();
        let (mut gone_read, mut gone_write) = mio::net::UnixStream::pair().unwrap();
        let (mut loud_read, mut loud_write) = mio::net::UnixStream::pair().unwrap();
        let ctl = lp.control();
        ctl.register(&mut quiet_read, Interest::READABLE, Kind::Pipe("quiet"))
            .unwrap();
        let gone = ctl
            .register(&mut gone_read, Interest::READABLE, Kind::Pipe("gone"))
            .unwrap();
        let loud = ctl
            .register(&mut loud_read, Interest::READABLE, Kind::Pipe("loud"))
            .unwrap();
        assert_ne!(gone, loud);
        assert_eq!(ctl.source(loud), Some(&Kind::Pipe("loud")));
        assert_eq!(
            ctl.deregister(&mut gone_read, gone),
            Some(Kind::Pipe("gone"))
        );
        assert_eq!(ctl.sources(), 2);
        gone_write.write_all(b"x").unwrap();
        loud_write.write_all(b"x").unwrap();
        // A safety net so a broken dispatch fails the test instead of hanging it.
        let safety = ctl.now() + Duration::from_secs(5);
        ctl.schedule(Timer::Late, safety);
        let mut rec = Recorder {
            stop_after_timer: Some(Timer::Late),
            ..Recorder::default()
        };
        lp.run(&mut rec).unwrap();
        assert_eq!(rec.log, ["Pipe(\"loud\")"]);
        assert_eq!(lp.control().stats().io_events, 1);
    }

    /// Records each timer with the wake-up it fired in and when.
    #[derive(Default)]
    struct Fired {
        log: Vec<(Timer, u64, Time)>,
        stop_on: Option<Timer>,
    }

    impl Handler<Kind, Timer> for Fired {
        fn on_event(&mut self, _: &mut LoopControl<Kind, Timer>, _: Token, _: Kind, _: &Event) {}
        fn on_timer(&mut self, lp: &mut LoopControl<Kind, Timer>, timer: Timer, now: Time) {
            self.log.push((timer.clone(), lp.stats().wakeups, now));
            if self.stop_on.as_ref() == Some(&timer) {
                lp.stop();
            }
        }
    }

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// The rotated watch's read (`Lazy`) rides the next wake-up after its soft deadline that
    /// something else (`Late`, the controller's pass) causes, not a wake-up of its own.
    #[test]
    fn a_lazy_timer_fires_on_an_unrelated_wakeup_after_its_soft_deadline() {
        let mut lp: EventLoop<Kind, Timer> = EventLoop::new(Clock::start()).unwrap();
        let now = lp.control().now();
        let ctl = lp.control();
        ctl.schedule_lazy(Timer::Rearm, now + ms(20), now + Duration::from_secs(60));
        ctl.schedule(Timer::Late, now + ms(100));
        assert_eq!(ctl.timers().next_deadline(), Some(now + ms(100)));
        let mut fired = Fired {
            stop_on: Some(Timer::Late),
            ..Fired::default()
        };
        lp.run(&mut fired).unwrap();
        let order: Vec<(Timer, u64)> = fired.log.iter().map(|(t, w, _)| (t.clone(), *w)).collect();
        assert_eq!(
            order,
            [(Timer::Rearm, 1), (Timer::Late, 1)],
            "one wake-up, lazy first"
        );
        assert!(lp.control().timers().is_empty());
    }

    #[test]
    fn a_lazy_timer_never_fires_before_its_soft_deadline() {
        let mut lp: EventLoop<Kind, Timer> = EventLoop::new(Clock::start()).unwrap();
        let now = lp.control().now();
        let ctl = lp.control();
        ctl.schedule_lazy(Timer::Rearm, now + ms(150), now + Duration::from_secs(60));
        ctl.schedule(Timer::Early, now);
        ctl.schedule(Timer::Late, now + ms(200));
        let mut fired = Fired {
            stop_on: Some(Timer::Late),
            ..Fired::default()
        };
        lp.run(&mut fired).unwrap();
        let timers: Vec<&Timer> = fired.log.iter().map(|(t, _, _)| t).collect();
        assert_eq!(timers, [&Timer::Early, &Timer::Rearm, &Timer::Late]);
        let (_, early_wakeup, _) = fired.log[0];
        let (_, lazy_wakeup, lazy_at) = fired.log[1];
        assert!(
            lazy_wakeup > early_wakeup,
            "not in the wake-up before its soft deadline"
        );
        assert!(lazy_at >= now + ms(150), "fired at {lazy_at:?}");
    }

    #[test]
    fn a_lazy_timer_alone_wakes_the_loop_only_at_its_hard_deadline() {
        let mut lp: EventLoop<Kind, Timer> = EventLoop::new(Clock::start()).unwrap();
        let now = lp.control().now();
        lp.control()
            .schedule_lazy(Timer::Rearm, now + ms(1), now + ms(80));
        assert_eq!(lp.control().timers().next_deadline(), Some(now + ms(80)));
        let mut fired = Fired {
            stop_on: Some(Timer::Rearm),
            ..Fired::default()
        };
        lp.run(&mut fired).unwrap();
        let (_, wakeup, at) = fired.log[0];
        assert_eq!(fired.log.len(), 1);
        assert_eq!(wakeup, 1, "the poll slept until the hard deadline");
        assert!(at >= now + ms(80), "fired at {at:?}");
    }

    #[test]
    fn a_plain_schedule_or_a_cancel_replaces_a_lazy_timer() {
        let mut lp: EventLoop<Kind, Timer> = EventLoop::new(Clock::start()).unwrap();
        let now = lp.control().now();
        let ctl = lp.control();
        ctl.schedule_lazy(Timer::Early, now + ms(1), now + ms(50));
        assert_eq!(ctl.cancel(&Timer::Early), Some(now + ms(50)));
        assert!(ctl.timers().is_empty());
        assert_eq!(ctl.soft_deadline(&Timer::Early), None);
        // Replaced by a plain deadline: not fired at the wake-up past the old soft deadline.
        ctl.schedule_lazy(Timer::Rearm, now + ms(1), now + Duration::from_secs(60));
        ctl.schedule(Timer::Rearm, now + ms(150));
        assert_eq!(ctl.soft_deadline(&Timer::Rearm), None);
        ctl.schedule(Timer::Late, now + ms(50));
        // A lazy deadline replaces a plain one as well; a soft one past the hard is plain.
        ctl.schedule_lazy(Timer::Early, now + ms(500), now + ms(100));
        assert_eq!(ctl.soft_deadline(&Timer::Early), None);
        let mut fired = Fired {
            stop_on: Some(Timer::Rearm),
            ..Fired::default()
        };
        lp.run(&mut fired).unwrap();
        let order: Vec<(Timer, u64)> = fired.log.iter().map(|(t, w, _)| (t.clone(), *w)).collect();
        assert_eq!(
            order,
            [(Timer::Late, 1), (Timer::Early, 2), (Timer::Rearm, 3)]
        );
        assert!(fired.log[2].2 >= now + ms(150));
    }
}
