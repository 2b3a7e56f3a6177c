//! Whether an informer's cache follows the server, judged by how its last watch failed
//! (`controller/cache_currency.rs` holds zone tainting and pod deletions while one does not).
//!
//! A watch resumed from our resourceVersion gets what it missed first: the API server sends
//! the backlog right behind the response head. So after a watch fails, the cache is current
//! again once its successor is known to be streaming from our version. What proves that
//! depends on how the failure looked:
//!
//! - **Broken connection** (reset, closed mid-body, refused, a non-200 answer, an error event):
//!   the server was talking and the path to it failed. The successor's response head (200,
//!   from our version) with every byte behind it read counts: the hold lasts the reconnect
//!   (backoff + one round trip), as long as upstream is blind anyway. The successor asks the
//!   server to end it after [`PROBE_TIMEOUT_SECONDS`]; if neither that end nor a line arrives
//!   within [`PROBATION`] of the head, the server answers but does not stream (a freeze that
//!   began before the reset, not yet caught by the idle timeout) and the failure counts as
//!   silent from then on.
//! - **Silence** (the idle timeout: nothing arrived, the soak's `watch-freeze`): a frozen server
//!   answers new watches and then sends nothing, so a head proves nothing. The mark is sticky:
//!   until a watch line arrives, a watch ends cleanly or a full state is delivered, later
//!   failures and heads (a reset during the freeze) do not clear it.
//!
//! A clean end (the server's `timeoutSeconds`) is no gap: the next watch resumes from our
//! version. A full state (a relist after `410 Gone`) is as current as it gets.

use std::time::Duration;

use crate::kube::reflector::PROBE_TIMEOUT_SECONDS;
use crate::time::Time;

/// How long after a broken watch's successor answered its probe end (or a line) may take:
/// the probe's `timeoutSeconds` and a second for a busy server and machine. Missing it makes
/// the failure silent; arriving later makes the cache current again (a short hold, no harm).
pub const PROBATION: Duration = Duration::from_secs(PROBE_TIMEOUT_SECONDS + 1);

/// How a watch failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Failure {
    /// Nothing arrived within the idle timeout.
    Silence,
    /// The connection broke, was refused, or the server answered with an error.
    Broken,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WatchCurrency {
    /// A watch failed and its successor has not been shown to stream from our version.
    interrupted: bool,
    /// A watch failed by silence (or a probe missed its end) and no watch line, clean end or
    /// full state arrived since: a response head is not enough.
    silent: bool,
    /// The successor of a broken watch counted as current at its head: its probe end (or a
    /// line) is due by then.
    probation_until: Option<Time>,
}

impl WatchCurrency {
    /// The cache follows the server (as far as its watches can tell).
    pub(crate) fn is_current(&self) -> bool {
        !self.interrupted
    }

    /// A watch failed: events may have been missed.
    pub(crate) fn failed(&mut self, how: Failure) {
        self.interrupted = true;
        self.probation_until = None;
        if how == Failure::Silence {
            self.silent = true;
        }
    }

    /// A watch line arrived, a watch ended cleanly, or a full state was delivered: the server
    /// streams from our version.
    pub(crate) fn streamed(&mut self) {
        *self = WatchCurrency::default();
    }

    /// The current watch's response head (200) arrived and the bytes behind it were read.
    /// Ends the interruption of a broken watch (not of a silent one), on probation until
    /// `now + PROBATION`; true if it did.
    pub(crate) fn answered(&mut self, now: Time) -> bool {
        if !self.interrupted || self.silent {
            return false;
        }
        self.interrupted = false;
        self.probation_until = Some(now + PROBATION);
        true
    }

    /// The probation ran out without a line or an end: the server answers but does not
    /// stream. True if it did just now.
    pub(crate) fn check(&mut self, now: Time) -> bool {
        match self.probation_until {
            Some(until) if now >= until => {
                self.failed(Failure::Silence);
                true
            }
            _ => false,
        }
    }

    /// When `check` has something to do.
    pub fn deadline(&self) -> Option<Time> {
        self.probation_until
    }

    /// The next watch should be a probe: its head will count, so its end must come soon.
    pub(crate) fn wants_probe(&self) -> bool {
        self.interrupted && !self.silent
    }

    /// A failure by silence is not yet cleared (for the dump and the logs).
    pub fn is_silent(&self) -> bool {
        self.silent
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(ms: u64) -> Time {
        Time::from_unix_millis(1_000_000 + ms)
    }

    #[test]
    fn a_broken_watch_is_current_again_at_its_successors_head() {
        let mut c = WatchCurrency::default();
        assert!(c.is_current());
        c.failed(Failure::Broken);
        assert!(!c.is_current());
        assert!(c.wants_probe());
        assert!(c.answered(at(500)));
        assert!(c.is_current());
        assert_eq!(c.deadline(), Some(at(500) + PROBATION));
        // The probe's end arrives in time: nothing left to watch for.
        c.streamed();
        assert_eq!(c.deadline(), None);
        assert!(!c.check(at(10_000)));
        assert!(c.is_current());
    }

    #[test]
    fn a_silent_watchs_successor_needs_a_line_or_an_end_not_a_head() {
        let mut c = WatchCurrency::default();
        c.failed(Failure::Silence);
        assert!(!c.wants_probe());
        assert!(!c.answered(at(100)));
        assert!(!c.is_current());
        // A reset during the freeze: still silent, its successor's head is not enough.
        c.failed(Failure::Broken);
        assert!(c.is_silent());
        assert!(!c.answered(at(700)));
        assert!(!c.is_current());
        c.streamed();
        assert!(c.is_current());
        assert!(!c.is_silent());
    }

    #[test]
    fn a_probe_that_misses_its_end_makes_the_failure_silent() {
        let mut c = WatchCurrency::default();
        c.failed(Failure::Broken);
        assert!(c.answered(at(0)));
        assert!(!c.check(at(0) + (PROBATION - Duration::from_millis(1))));
        assert!(c.is_current());
        assert!(c.check(at(0) + PROBATION));
        assert!(!c.is_current());
        assert!(c.is_silent());
        assert_eq!(c.deadline(), None);
        // The next watch's head (after its idle timeout) does not count either.
        c.failed(Failure::Broken);
        assert!(!c.answered(at(40_000)));
        // The late end does.
        c.streamed();
        assert!(c.is_current());
    }

    #[test]
    fn a_head_without_a_failure_changes_nothing() {
        let mut c = WatchCurrency::default();
        assert!(!c.answered(at(0)));
        assert_eq!(c.deadline(), None);
        assert!(c.is_current());
    }
}
