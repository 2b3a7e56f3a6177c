//! When a watch is read other than on its readiness events: the coalescing pause (a trickle
//! of events read in one wake-up) and a rotated watch's lazy first read. Both deregister the
//! stream and read it on the informer's timer; it is registered again only after a read that
//! drained the socket, so the registration itself reports nothing.

use std::hash::Hash;
use std::time::Duration;

use log::debug;

use super::Informer;
use crate::kube::reflector::Watched;
use crate::runtime::event_loop::LoopControl;
use crate::time::Time;

/// A read that found this many events or more is a burst, not a trickle: the watch goes back
/// to being read on each arrival (each read then carries many events anyway), so a burst is
/// never held back by the coalescing pause.
const COALESCE_MAX_EVENTS: usize = 64;

impl<T: Watched, S: Clone, K: Eq + Hash + Clone> Informer<T, S, K> {
    /// Reads events that arrive close together in one wake-up (issue #14: a wake-up per Lease
    /// renewal cost more than the renewal). After a read that found a few events, the stream's
    /// readiness events are paused and it is read again `watch_coalesce` later; a read that
    /// finds nothing, or a burst, resumes them, so a quiet watch costs no timer, its first
    /// event is read at once, and a burst or a full state flows at the socket's pace. An event
    /// is seen at most `watch_coalesce` late. Paused watches share the same read times.
    pub(super) fn coalesce_after_read(&mut self, lp: &mut LoopControl<S, K>, found: usize) {
        let Some(stream) = &mut self.stream else {
            self.paused_until = None;
            self.lazy_read_by = None;
            return;
        };
        // Without coalescing, a pause is only a rotated watch's lazy read: resumed below.
        if self.more_to_read || (self.watch_coalesce.is_zero() && self.paused_until.is_none()) {
            return;
        }
        let trickle = !self.watch_coalesce.is_zero()
            && (1..COALESCE_MAX_EVENTS).contains(&found)
            && self.reflector.is_synced()
            && !self.reflector.delivering_full_state();
        let next = coalesced_read_at(lp.now(), self.watch_coalesce);
        match (trickle, self.paused_until.is_some()) {
            (true, false) => match stream.pause(lp.registry()) {
                Ok(()) => self.paused_until = Some(next),
                Err(e) => debug!("{} watch: not paused ({e})", T::KIND),
            },
            (true, true) => self.paused_until = Some(next),
            (false, true) => match stream.resume(lp.registry()) {
                Ok(()) => self.paused_until = None,
                Err(e) => {
                    // No readiness events for it: keep reading it on the timer.
                    debug!("{} watch: not resumed ({e})", T::KIND);
                    self.paused_until = Some(next);
                }
            },
            (false, false) => {}
        }
    }

    /// A rotation costs one wake-up, the one that read the old watch's end (issue #14): the
    /// new watch's response head, a millisecond behind its request, is read at the loop's
    /// next wake-up, whatever causes it, instead of on its own readiness event. The stream is
    /// paused (deregistered, as the coalescing pause does) and its read is a lazy deadline:
    /// soft just after this turn, hard `rotated_watch_read_within` later (an idle daemon's
    /// next wake-up is the controller's pass). That is for a quiet watch, with no event for
    /// that long: one with events more recent is read on the coalescing grid at the latest
    /// (≤ 50 ms, the delay any of its events has anyway), since a busy watch's own reads are
    /// what wakes the loop (the bench's Lease watch, 500 events/s, would otherwise wait for
    /// the next executor timer, up to 200 ms away, and its renewals be seen that much later).
    /// "Recent", not "any in the last watch's life": a watch that fell silent (the bench's
    /// idle phase, a cluster at night) is quiet from the next pass on. Events that arrive meanwhile wait in the socket and are
    /// delivered at that read, in order; the stream's idle deadline still runs from the
    /// rewatch (a frozen server is still caught), and `is_streaming` is unchanged (nothing
    /// failed). The read drains the socket before re-registering it (`coalesce_after_read`),
    /// so the registration reports nothing and costs no wake-up. A kept connection the server
    /// closed is noticed at that read too, and the watch then resent at once.
    pub(super) fn read_rotated_watch_lazily(
        &mut self,
        lp: &mut LoopControl<S, K>,
        recent_events: bool,
    ) {
        if self.rotated_watch_read_within.is_zero() || self.paused_until.is_some() {
            return;
        }
        let now = lp.now();
        let read_by = match recent_events {
            false => now + self.rotated_watch_read_within,
            // Without coalescing, events are read as they arrive: so is this watch.
            true if self.watch_coalesce.is_zero() => return,
            true => coalesced_read_at(now, self.watch_coalesce),
        };
        let Some(stream) = &mut self.stream else {
            return;
        };
        match stream.pause(lp.registry()) {
            Ok(()) => {
                // Later than this turn's wake-up, so the read is not in this very turn.
                self.paused_until = Some(now + Duration::from_millis(1));
                self.lazy_read_by = Some(read_by);
            }
            Err(e) => debug!("{} watch: read on its readiness events ({e})", T::KIND),
        }
    }
}

/// When a paused watch is read again: the next multiple of `coalesce` since the epoch, so
/// within `coalesce` of `now` and the same instant for every informer — the Lease and Node
/// watches, both paused, are read in one wake-up instead of two (issue #14).
fn coalesced_read_at(now: Time, coalesce: Duration) -> Time {
    let period = crate::time::duration_millis(coalesce).max(1);
    Time::from_unix_millis((now.as_unix_millis() / period + 1) * period)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paused_watches_are_read_on_one_shared_grid_never_later_than_the_coalescing_period() {
        let period = Duration::from_millis(50);
        for now_ms in [1_000_000u64, 1_000_001, 1_000_037, 1_000_049] {
            let at = coalesced_read_at(Time::from_unix_millis(now_ms), period);
            assert_eq!(at, Time::from_unix_millis(1_000_050), "now {now_ms}");
        }
        // Exactly on the grid: the next point, not now (the read just happened).
        let at = coalesced_read_at(Time::from_unix_millis(1_000_050), period);
        assert_eq!(at, Time::from_unix_millis(1_000_100));
    }
}
