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
pub const COALESCE_MAX_EVENTS: usize = 64;

/// The coalescing period widens (doubles) while reads find fewer events than this on
/// average: each read is a wake-up with a fixed cost (epoll, timers, TLS records, cold
/// caches: a large share of the daemon's CPU per event), so a trickle is read less
/// often, up to `MAX_WIDENING` times the configured period.
const FEW_EVENTS_PER_READ: f32 = 12.0;
/// … and narrows (halves) back towards the configured period while reads find more than this:
/// a busy watch pays its wake-ups with many events each and is read on the configured grid.
/// More than twice `FEW_EVENTS_PER_READ`, so a doubling lands between the two and stays.
const MANY_EVENTS_PER_READ: f32 = 30.0;
/// The widest period, as a power of two times the configured one (the default 45 ms → 180 ms).
const MAX_WIDENING: u32 = 2;

/// The coalescing period of one informer: the configured period times 2^`widening`, chosen by
/// a moving average of the events per read (each read counts a quarter). Public so that the
/// simulator's floor reader (`node-lifecycled-sim floor-reader`) reads on the daemon's own grid.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct CoalescePeriod {
    widening: u32,
    /// `None` until the first read of a pause.
    events_per_read: Option<f32>,
}

impl CoalescePeriod {
    /// After a read on the grid that found `found` events (1 to 63: the stream stays paused).
    pub fn after_read(&mut self, found: usize) {
        let found = found as f32;
        let avg = self
            .events_per_read
            .map_or(found, |avg| avg + (found - avg) / 4.0);
        if avg < FEW_EVENTS_PER_READ && self.widening < MAX_WIDENING {
            self.widening += 1;
            // The next reads find twice as many: start the average there.
            self.events_per_read = Some(avg * 2.0);
        } else if avg > MANY_EVENTS_PER_READ && self.widening > 0 {
            self.widening -= 1;
            self.events_per_read = Some(avg / 2.0);
        } else {
            self.events_per_read = Some(avg);
        }
    }

    /// The stream is read on its readiness events again: the next pause starts afresh.
    pub fn reset(&mut self) {
        *self = CoalescePeriod::default();
    }

    pub fn period(&self, configured: Duration) -> Duration {
        configured * (1 << self.widening)
    }

    /// The widest period: an idle watch's longest wait.
    pub(super) fn widest(configured: Duration) -> Duration {
        configured * (1 << MAX_WIDENING)
    }
}

impl<T: Watched, S: Clone, K: Eq + Hash + Clone> Informer<T, S, K> {
    /// Reads events that arrive close together in one wake-up (a wake-up per Lease renewal cost
    /// more than the renewal). After a read that found a few events, the stream's readiness events
    /// are paused and it is read again `watch_coalesce` later; a read that
    /// finds nothing, or a burst, resumes them, so a quiet watch costs no timer, its first
    /// event is read at once, and a burst or a full state flows at the socket's pace. An event
    /// is seen at most the coalescing period late: `watch_coalesce`, widened up to four times
    /// while reads find few events (`CoalescePeriod`). Paused watches share the same read
    /// times (the periods are powers of two times one period, so their grids nest).
    ///
    /// A watch borrows the wake-ups of a busier one: while another watch is read on a finer
    /// grid (`LoopControl::finest_grid`: at 5,000 nodes the Lease watch every 45 ms, while the
    /// node watch's trickle of status heartbeats, a few per read, widens its own to 180 ms),
    /// its read is lazy, at the loop's first wake-up on or after the next point of that grid,
    /// at the latest on its own. Its events are then read no later than the busier watch's, in
    /// wake-ups the loop makes anyway.
    ///
    /// A read that finds nothing resumes the readiness events, unless another watch is read on
    /// a grid at least as fine as this watch's own: then the watch stays paused, idle, read at
    /// that grid's next wake-up, at the latest on the widest grid. Resuming it would make each of its next events a wake-up of
    /// its own (two: its arrival and the read after it). An idle watch is not on a grid, so
    /// two idle watches do not keep each other paused; alone, a watch behaves as before.
    pub(super) fn coalesce_after_read(&mut self, lp: &mut LoopControl<S, K>, found: usize) {
        let Some(stream) = &mut self.stream else {
            self.clear_pause(lp);
            return;
        };
        // Without coalescing, a pause is only a rotated watch's lazy read: resumed below.
        if self.more_to_read || (self.watch_coalesce.is_zero() && self.paused_until.is_none()) {
            return;
        }
        let streaming = self.reflector.is_synced() && !self.reflector.delivering_full_state();
        let coalescing = !self.watch_coalesce.is_zero() && streaming;
        let trickle = coalescing && (1..COALESCE_MAX_EVENTS).contains(&found);
        let busier = lp.finest_grid(self.on_grid);
        // Idle only to borrow a grid at least as fine as its own: a busy watch whose read found
        // nothing (a pause in its events, or a rotated watch read before the server's first
        // events) is not held on a quieter watch's coarser grid, or its next events would be
        // seen that much later than its own grid allows.
        let own = self.coalesce.period(self.watch_coalesce);
        let idle = coalescing
            && found == 0
            && self.paused_until.is_some()
            && busier.is_some_and(|grid| grid <= own);
        // Only reads on the grid count: the one that pauses the stream read what one arrival
        // brought.
        match (trickle, self.paused_until.is_some()) {
            (true, true) => self.coalesce.after_read(found),
            (true, false) => {}
            (false, _) if idle => {}
            (false, _) => self.coalesce.reset(),
        }
        let period = match idle {
            true => CoalescePeriod::widest(self.watch_coalesce),
            false => self.coalesce.period(self.watch_coalesce),
        };
        let (soft, hard) = coalesced_read(lp.now(), busier, period);
        let paused = match (trickle || idle, self.paused_until.is_some()) {
            (true, false) => match stream.pause(lp.registry()) {
                Ok(()) => true,
                Err(e) => {
                    debug!("{} watch: not paused ({e})", T::KIND);
                    self.coalesce.reset();
                    false
                }
            },
            (true, true) => true,
            (false, true) => match stream.resume(lp.registry()) {
                Ok(()) => false,
                Err(e) => {
                    // No readiness events for it: keep reading it on the timer.
                    debug!("{} watch: not resumed ({e})", T::KIND);
                    true
                }
            },
            (false, false) => false,
        };
        if !paused {
            self.clear_pause(lp);
            return;
        }
        self.paused_until = Some(soft.unwrap_or(hard));
        self.lazy_read_by = soft.map(|_| hard);
        self.set_grid_reader(lp, trickle.then_some(period));
    }

    /// The stream's readiness events are not paused (or it is gone): nothing to read on the
    /// timer.
    pub(super) fn clear_pause(&mut self, lp: &mut LoopControl<S, K>) {
        self.paused_until = None;
        self.lazy_read_by = None;
        self.set_grid_reader(lp, None);
    }

    fn set_grid_reader(&mut self, lp: &mut LoopControl<S, K>, grid: Option<Duration>) {
        if self.on_grid != grid {
            lp.note_grid_reader(self.on_grid, grid);
            self.on_grid = grid;
        }
    }

    /// A rotation costs one wake-up, the one that read the old watch's end: the new watch's
    /// response head, a millisecond behind its request, is read at the loop's
    /// next wake-up, whatever causes it, instead of on its own readiness event. The stream is
    /// paused (deregistered, as the coalescing pause does) and its read is a lazy deadline:
    /// soft just after this turn, hard `rotated_watch_read_within` later (an idle daemon's
    /// next wake-up is the controller's pass). That is for a quiet watch, with no event for
    /// that long: one with events more recent is read on the coalescing grid at the latest
    /// (within the coalescing period, 45 ms by default: the delay any of its events has
    /// anyway), since a busy watch's own reads are what wakes the loop (the bench's Lease
    /// watch, 500 events/s, would otherwise wait for the next executor timer, up to 200 ms
    /// away, and its renewals be seen that much later).
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
            true => coalesced_read_at(now, self.coalesce.period(self.watch_coalesce)),
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
/// watches, both paused, are read in one wake-up instead of two.
fn coalesced_read_at(now: Time, coalesce: Duration) -> Time {
    let period = crate::time::duration_millis(coalesce).max(1);
    Time::from_unix_millis((now.as_unix_millis() / period + 1) * period)
}

/// A paused watch's next read on a grid of `period`: the point of its own grid (hard), and,
/// when a busier watch is read on a finer grid, that grid's next point (soft: read there, the
/// loop wakes then anyway). All grids are the configured period times powers of two, so they
/// nest.
fn coalesced_read(now: Time, busier: Option<Duration>, period: Duration) -> (Option<Time>, Time) {
    let hard = coalesced_read_at(now, period);
    let soft = busier
        .filter(|busier| *busier < period)
        .map(|busier| coalesced_read_at(now, busier))
        .filter(|soft| *soft < hard);
    (soft, hard)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reads on the grid at a steady rate: `per_second` events, the period in use each time.
    fn settle(period: &mut CoalescePeriod, per_second: f32, reads: usize) -> Duration {
        let base = Duration::from_millis(50);
        for _ in 0..reads {
            let found = per_second * period.period(base).as_secs_f32();
            period.after_read(found.round() as usize);
        }
        period.period(base)
    }

    /// 200 Lease renewals a second (2,000 nodes) are read every 100 ms, 20 a read, not every 50 ms;
    /// 33 node status patches a second every 200 ms (the widest); 500
    /// renewals a second (5,000 nodes) stay on the configured 50 ms; a watch that gets busier
    /// narrows back, and a resumed one starts again from the configured period.
    #[test]
    fn a_trickle_is_read_on_a_wider_grid_and_a_busy_watch_on_the_configured_one() {
        let ms = Duration::from_millis;
        let mut leases = CoalescePeriod::default();
        assert_eq!(settle(&mut leases, 200.0, 40), ms(100));
        let mut nodes = CoalescePeriod::default();
        assert_eq!(settle(&mut nodes, 33.0, 40), ms(200));
        let mut busy = CoalescePeriod::default();
        assert_eq!(settle(&mut busy, 500.0, 400), ms(50));
        assert_eq!(settle(&mut nodes, 500.0, 40), ms(50), "busier: narrowed");
        assert_eq!(settle(&mut leases, 5.0, 40), ms(200), "quieter: widened");
        leases.reset();
        assert_eq!(leases.period(ms(50)), ms(50));
    }

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

    /// A widened (or idle) watch's read: on its own grid at the latest, at a wake-up on a busier
    /// watch's finer grid if there is one; none when the busier grid is not finer, nor when the
    /// two grids meet next at the same point.
    #[test]
    fn a_widened_watch_is_read_at_the_next_wakeup_on_a_busier_watchs_grid_at_the_latest_on_its_own()
    {
        let ms = Duration::from_millis;
        let at = Time::from_unix_millis;
        // 1,000,010: the next multiples of 45 and 180 are 1,000,035 and 1,000,080.
        let now = at(1_000_010);
        assert_eq!(
            coalesced_read(now, Some(ms(45)), ms(180)),
            (Some(at(1_000_035)), at(1_000_080))
        );
        // No busier watch, or none on a finer grid: its own grid only.
        assert_eq!(coalesced_read(now, None, ms(180)), (None, at(1_000_080)));
        assert_eq!(
            coalesced_read(now, Some(ms(180)), ms(180)),
            (None, at(1_000_080))
        );
        assert_eq!(
            coalesced_read(now, Some(ms(90)), ms(45)),
            (None, at(1_000_035))
        );
        // 1,000,085: the next points of 90 and 180 are 1,000,170 and 1,000,260.
        assert_eq!(
            coalesced_read(at(1_000_085), Some(ms(90)), CoalescePeriod::widest(ms(45))),
            (Some(at(1_000_170)), at(1_000_260))
        );
        // 1,000,060: the next point of both grids is 1,000,080.
        assert_eq!(
            coalesced_read(at(1_000_060), Some(ms(45)), ms(180)),
            (None, at(1_000_080))
        );
    }
}
