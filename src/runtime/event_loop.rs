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
pub(crate) const MAX_POLL_WAIT: Duration = Duration::from_secs(60);

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
    /// The grids (periods) of the sources read on a coalescing grid because their last read
    /// found events (see `Informer::coalesce_after_read`): while there is one, the loop wakes
    /// on its grid anyway. A handful at most (one per watch).
    grid_readers: Vec<Duration>,
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

    pub(crate) fn reregister<E: Source + ?Sized>(
        &mut self,
        io: &mut E,
        token: Token,
        interest: Interest,
    ) -> io::Result<()> {
        self.registry.reregister(io, token, interest)
    }

    /// The poll's registry, for a source that pauses and resumes its own readiness events
    /// (its token and kind stay known meanwhile).
    pub(crate) fn registry(&self) -> &Registry {
        &self.registry
    }

    /// Forgets the source; returns its kind. The OS-level deregistration error is ignored on
    /// purpose: the usual cause is a socket already closed, which deregisters itself.
    pub(crate) fn deregister<E: Source + ?Sized>(&mut self, io: &mut E, token: Token) -> Option<S> {
        let _ = self.registry.deregister(io);
        self.sources.remove(&token)
    }

    /// For a source that registers itself, such as a watch stream, which registers its socket
    /// as it starts connecting: `register` gets the registry and the token to use. The token is
    /// spent even if `register` fails (tokens are never reused).
    pub(crate) fn register_with<R, E>(
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
    pub(crate) fn deregister_with<R>(
        &mut self,
        token: Token,
        deregister: impl FnOnce(&Registry) -> R,
    ) -> (Option<S>, R) {
        let result = deregister(&self.registry);
        (self.sources.remove(&token), result)
    }

    #[cfg(test)]
    pub(crate) fn source(&self, token: Token) -> Option<&S> {
        self.sources.get(&token)
    }

    pub(crate) fn sources(&self) -> usize {
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

    pub(crate) fn clock(&self) -> &Clock {
        &self.clock
    }

    pub fn stats(&self) -> LoopStats {
        self.stats
    }

    /// The loop's counters and timers as the state dump and `/metrics` show them.
    pub(crate) fn snapshot(&self) -> LoopSnapshot {
        let now = self.now();
        LoopSnapshot {
            stats: self.stats,
            sources: self.sources(),
            timers_pending: self.timers().len(),
            next_timer_in: self.timers().next_deadline().map(|at| at - now),
        }
    }

    /// A source's coalescing grid changed from `old` to `new` (`None`: not read on one).
    pub(crate) fn note_grid_reader(&mut self, old: Option<Duration>, new: Option<Duration>) {
        if let Some(old) = old
            && let Some(i) = self.grid_readers.iter().position(|p| *p == old)
        {
            self.grid_readers.swap_remove(i);
        }
        self.grid_readers.extend(new);
    }

    /// The finest grid a source is read on, leaving out one source on `own` (the caller's).
    pub(crate) fn finest_grid(&self, own: Option<Duration>) -> Option<Duration> {
        let mut skip = own;
        self.grid_readers
            .iter()
            .filter(|p| {
                if skip == Some(**p) {
                    skip = None;
                    return false;
                }
                true
            })
            .min()
            .copied()
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
}

pub struct EventLoop<S, T> {
    poll: Poll,
    events: Events,
    control: LoopControl<S, T>,
    /// The timers due in a wake-up, kept between wake-ups so that one with timers due (most
    /// are: the watches' reads are timers) allocates nothing.
    due: Vec<(T, Time)>,
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
                grid_readers: Vec::new(),
            },
            due: Vec::new(),
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
            let due = &mut self.due;
            due.clear();
            lp.lazy.drain_due_into(woke_at, due);
            for (timer, _) in due.iter() {
                lp.timers.cancel(timer);
            }
            let lazy_due = due.len();
            lp.timers.drain_due_into(now, due);
            for (timer, _) in &due[lazy_due..] {
                lp.lazy.cancel(timer);
            }
            for (timer, at) in due.drain(..) {
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
pub(crate) fn poll_timeout(now: Time, next_deadline: Option<Time>, cap: Duration) -> Duration {
    match next_deadline {
        Some(at) => at.since(now).min(cap),
        None => cap,
    }
}

#[cfg(test)]
mod tests;
