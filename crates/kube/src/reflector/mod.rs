//! The reflector: list → watch → relist, per resource, sans-IO.
//!
//! It opens no socket and reads no clock. The shell asks [`Reflector::poll`] what to do next
//! (a LIST page, a watch, or nothing until some time), performs it, and feeds the results back
//! (`list_page_received`, `watch_event`, `watch_ended`, …). Consumers receive [`Delta`]s.
//!
//! It keeps nothing per object: a full state (the LIST after a start or a `410 Gone`, or a
//! watch-list's initial events) is delivered between [`Delta::Begin`] and [`Delta::Synced`],
//! and the consumer's store removes what it did not deliver and skips what did not change
//! (see `model::ClusterStore`). So the objects and their versions are held once, in the store.
//!
//! Watch-list (`sendInitialEvents=true`) is used only when the shell enables it (the server's
//! version is ≥ 1.32, see [`supports_watch_list`]): an older server ignores the parameter and
//! answers a plain watch from "now" with no initial events, which would look like an empty
//! cluster. As a safety net, a watch-list that ends twice without its initial-events-end
//! bookmark falls back to list+watch for good.

use std::fmt::Debug;
use std::marker::PhantomData;
use std::time::Duration;

use crate::time::{Rng, Time};

mod listing;
mod requests;
mod watch_end;
mod watching;

pub use requests::{ListRequest, ReflectorConfig, WatchRequest, Watched, supports_watch_list};
pub use watch_end::EndTarget;

/// `timeoutSeconds` of a probe watch ([`Reflector::set_probe_next`]): the API's smallest, so a
/// healthy server ends it one second after it answered.
pub const PROBE_TIMEOUT_SECONDS: u64 = 1;

/// What the shell should do now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    List(ListRequest),
    Watch(WatchRequest),
    /// Nothing before this time (backoff).
    Wait {
        until: Time,
    },
    /// A request is outstanding: wait for its result.
    InFlight,
}

/// What consumers receive.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Delta<T: Watched> {
    /// A full state starts: what it does not deliver before `Synced` is gone.
    Begin,
    Upsert(T),
    Delete(T::Key),
    /// A full state has been delivered (after the first list and after every relist).
    Synced,
}

/// Whether the shell should keep reading the current watch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WatchFlow {
    Continue,
    /// Close the stream: the reflector has moved on (relist or resume); do not report its end.
    Close,
}

/// A failed LIST request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListFailure {
    /// `410 Gone`: the continue token expired; the list restarts from the first page.
    pub gone: bool,
    pub message: String,
}

/// For the dump and the metrics.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReflectorStats {
    pub synced: bool,
    pub resource_version: Option<String>,
    pub last_event_at: Option<Time>,
    /// Watches opened after the first one.
    pub reconnects: u64,
    /// Full lists (or watch-lists) after the first one.
    pub relists: u64,
    /// Objects delivered by the last full state (the store holds the current count).
    pub objects: usize,
    /// Watch lines that could not be decoded and were skipped.
    pub skipped_events: u64,
    pub consecutive_failures: u32,
    pub last_error: Option<String>,
    pub watch_list: bool,
    /// When the current watch was opened; `None` while not watching.
    pub(crate) watching_since: Option<Time>,
}

#[derive(Debug)]
enum Phase {
    /// Paging through a LIST; `outstanding` while a page request is with the shell; `listed`
    /// counts the objects of the pages so far; `begun` once `Delta::Begin` was delivered;
    /// `from_cache` for one streamed `resourceVersion=0` LIST.
    Listing {
        continue_token: Option<String>,
        listed: usize,
        outstanding: bool,
        begun: bool,
        from_cache: bool,
    },
    /// Next: open a watch (from `resource_version`, or a watch-list if a full state is due).
    ToWatch,
    /// A watch request was handed out; `initial` while a watch-list's initial events are
    /// being delivered.
    Watching { initial: Option<InitialEvents> },
    /// Next: list.
    ToList,
}

/// A watch-list's initial events so far.
#[derive(Debug, Default)]
struct InitialEvents {
    /// `Delta::Begin` was delivered.
    begun: bool,
    delivered: usize,
}

pub struct Reflector<T: Watched> {
    config: ReflectorConfig,
    phase: Phase,
    /// Not before this time (backoff), for `ToList`, `ToWatch` and a paused `Listing`.
    ready_at: Time,
    /// Objects delivered by the last full state.
    listed: usize,
    resource_version: Option<String>,
    needs_full_state: bool,
    watch_list: bool,
    watch_list_misses: u32,
    /// A `resourceVersion=0` LIST failed: full states use consistent pages from then on.
    cache_list_failed: bool,
    full_states: u64,
    watches_opened: u64,
    attempt: u32,
    last_failure_at: Option<Time>,
    last_event_at: Option<Time>,
    skipped_events: u64,
    last_error: Option<String>,
    watching_since: Option<Time>,
    rng: Rng,
    /// Where the next watch's end should land (`watch_end.rs`), and when the last watch sent
    /// is expected to end.
    end_target: Option<EndTarget>,
    expected_end: Option<Time>,
    /// The next watch (not a watch-list) is a probe: `timeoutSeconds` of
    /// [`PROBE_TIMEOUT_SECONDS`].
    probe_next: bool,
    kind: PhantomData<fn() -> T>,
}

impl<T: Watched> Reflector<T> {
    /// `seed` feeds the backoff and timeout jitter (tests pass a constant).
    pub fn new(config: ReflectorConfig, seed: u64) -> Reflector<T> {
        let watch_list = config.watch_list;
        Reflector {
            config,
            phase: if watch_list {
                Phase::ToWatch
            } else {
                Phase::ToList
            },
            ready_at: Time::ZERO,
            listed: 0,
            resource_version: None,
            needs_full_state: true,
            watch_list,
            watch_list_misses: 0,
            cache_list_failed: false,
            full_states: 0,
            watches_opened: 0,
            attempt: 0,
            last_failure_at: None,
            last_event_at: None,
            skipped_events: 0,
            last_error: None,
            watching_since: None,
            rng: Rng::new(seed),
            end_target: None,
            expected_end: None,
            probe_next: false,
            kind: PhantomData,
        }
    }

    pub fn stats(&self) -> ReflectorStats {
        ReflectorStats {
            synced: self.full_states > 0,
            resource_version: self.resource_version.clone(),
            last_event_at: self.last_event_at,
            reconnects: self.watches_opened.saturating_sub(1),
            relists: self.full_states.saturating_sub(1),
            objects: self.listed,
            skipped_events: self.skipped_events,
            consecutive_failures: self.attempt,
            last_error: self.last_error.clone(),
            watch_list: self.watch_list,
            watching_since: match self.phase {
                Phase::Watching { .. } => self.watching_since,
                _ => None,
            },
        }
    }

    pub fn is_synced(&self) -> bool {
        self.full_states > 0
    }

    /// A full state is due (after a `410 Gone`) or being delivered: the cache may be behind.
    pub fn needs_full_state(&self) -> bool {
        self.needs_full_state
    }

    /// A full state is being delivered (LIST pages, or a watch-list's initial events).
    pub fn delivering_full_state(&self) -> bool {
        matches!(
            self.phase,
            Phase::Listing { .. } | Phase::Watching { initial: Some(_) }
        )
    }

    /// The next full state (after a `410 Gone`) is a watch-list: the server's version, unknown
    /// at the start, turned out to support it. A full state in progress is not interrupted.
    pub fn enable_watch_list(&mut self) {
        self.watch_list = true;
        self.watch_list_misses = 0;
    }

    /// The next thing to do. Calling it again without feeding a result returns `InFlight`.
    pub fn poll(&mut self, now: Time) -> Step {
        let ready = now >= self.ready_at;
        match &mut self.phase {
            Phase::Listing {
                outstanding: true, ..
            }
            | Phase::Watching { .. } => Step::InFlight,
            _ if !ready => Step::Wait {
                until: self.ready_at,
            },
            Phase::Listing {
                continue_token,
                outstanding,
                ..
            } => {
                *outstanding = true;
                Step::List(ListRequest {
                    continue_token: continue_token.clone(),
                    limit: self.config.page_size,
                    from_watch_cache: false,
                })
            }
            Phase::ToList => {
                let from_cache = self.config.initial_list_from_cache
                    && self.full_states == 0
                    && !self.cache_list_failed;
                self.phase = Phase::Listing {
                    continue_token: None,
                    listed: 0,
                    outstanding: true,
                    begun: false,
                    from_cache,
                };
                Step::List(ListRequest {
                    continue_token: None,
                    limit: self.config.page_size,
                    from_watch_cache: from_cache,
                })
            }
            Phase::ToWatch => {
                let full = self.needs_full_state;
                self.phase = Phase::Watching {
                    initial: full.then(InitialEvents::default),
                };
                self.watches_opened += 1;
                let timeout_seconds = if self.probe_next && !full {
                    self.expected_end = Some(now + Duration::from_secs(PROBE_TIMEOUT_SECONDS));
                    PROBE_TIMEOUT_SECONDS
                } else {
                    self.watch_timeout_seconds(now)
                };
                Step::Watch(WatchRequest {
                    resource_version: if full {
                        None
                    } else {
                        self.resource_version.clone()
                    },
                    allow_bookmarks: true,
                    timeout_seconds,
                    send_initial_events: full,
                    idle_timeout: self.config.idle_timeout,
                })
            }
        }
    }

    /// The time `poll` will have something to do, if it is waiting on backoff.
    pub fn next_wakeup(&self) -> Option<Time> {
        match self.phase {
            Phase::Listing {
                outstanding: true, ..
            }
            | Phase::Watching { .. } => None,
            _ => Some(self.ready_at),
        }
    }

    /// `410 Gone`: our resourceVersion was compacted away. Start over with a full state at
    /// once (no backoff: this is not the server failing).
    fn gone(&mut self, now: Time, message: String) {
        self.needs_full_state = true;
        self.resource_version = None;
        self.last_error = Some(message);
        self.phase = self.full_state_phase();
        self.ready_at = now;
    }

    fn full_state_phase(&self) -> Phase {
        if self.watch_list {
            Phase::ToWatch
        } else {
            Phase::ToList
        }
    }

    fn fail(&mut self, now: Time, message: String) {
        if self
            .last_failure_at
            .is_some_and(|at| now.since(at) >= self.config.backoff_reset_after)
        {
            self.attempt = 0;
        }
        self.last_failure_at = Some(now);
        let delay = self.backoff(self.attempt);
        self.attempt = self.attempt.saturating_add(1);
        self.ready_at = now + delay;
        self.last_error = Some(message);
        if self.needs_full_state {
            if let Phase::ToWatch = self.phase {
                self.phase = self.full_state_phase();
            }
        }
    }

    fn full_state_complete(&mut self, delivered: usize, out: &mut Vec<Delta<T>>) {
        self.listed = delivered;
        self.needs_full_state = false;
        self.full_states += 1;
        out.push(Delta::Synced);
    }

    /// `backoff_initial · 2^attempt`, at most `backoff_max`, ±20 % jitter (capped again).
    fn backoff(&mut self, attempt: u32) -> Duration {
        let base = self
            .config
            .backoff_initial
            .saturating_mul(1u32 << attempt.min(20))
            .min(self.config.backoff_max);
        let jitter_permille = 800 + self.random_below(401);
        (base * jitter_permille as u32 / 1000).min(self.config.backoff_max)
    }

    /// 70–90 % of the idle timeout (whole seconds, rounded down), at least one second. Each
    /// rotation of a quiet watch costs wake-ups (two on a kept connection), so it asks for as much
    /// as leaves the server a tenth of the idle timeout (3 s at 30 s) to send
    /// the end before the idle deadline; the jitter keeps the three watches from rotating
    /// together forever. A frozen watch is still caught by the idle deadline itself.
    /// 70–90 % of the idle timeout in whole seconds, aimed at `end_target` when one fits.
    fn watch_timeout_seconds(&mut self, now: Time) -> u64 {
        let idle_ms = crate::time::duration_millis(self.config.idle_timeout);
        let lo = (idle_ms * 7 / 10 / 1000).max(1);
        let hi = (idle_ms * 9 / 10 / 1000).max(1);
        let target = self.end_target;
        let s = watch_end::choose_timeout_seconds(now, lo, hi, target.as_ref(), |n| {
            self.random_below(n)
        });
        self.expected_end = Some(now + std::time::Duration::from_secs(s));
        s
    }

    /// Whether the next watch resuming from our version is a probe, one the server ends after
    /// [`PROBE_TIMEOUT_SECONDS`]: after a broken watch, the shell counts its successor as
    /// current at its response head and wants the server to prove soon that it streams
    /// (`runtime/informer/currency.rs`). A watch-list (a full state) is never a probe.
    pub fn set_probe_next(&mut self, probe: bool) {
        self.probe_next = probe;
    }

    /// Where later watches' ends should land (`None`: anywhere in the range).
    pub fn set_end_target(&mut self, target: Option<EndTarget>) {
        self.end_target = target;
    }

    /// When the server is expected to end the watch last asked for (sent, not yet ended).
    pub fn expected_watch_end(&self) -> Option<Time> {
        self.expected_end
    }

    fn random_below(&mut self, n: u64) -> u64 {
        self.rng.below(n)
    }
}

#[cfg(test)]
mod tests;
