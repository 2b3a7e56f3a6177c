//! Deadlines that only move later, in O(1): a FIFO per span ("lane") with lazy invalidation.
//!
//! Every Lease renewal moves its node's grace deadline to `probe_time + grace`. In a heap that is a
//! sift down thousands of entries per renewal. But `probe_time` is the
//! controller's own observation time, which never goes back, so with one grace value every new
//! deadline is at or after every deadline already queued with that grace: appending to the
//! lane keeps it sorted. The entry a key had before stays where it is and is dropped when it
//! reaches the front (it no longer matches the key's [`Armed`] handle). So a renewal costs one
//! push, the next deadline is the front of a lane, and no timer fires for a stale entry.
//!
//! A renewal leaves its key's entry before stale, and with a grace of 50 s and renewals every
//! 10 s each node would have five entries queued, four stale (25,000 at 5,000 nodes, ~1.3 MB of
//! queue). So once the stale entries outnumber the current ones, every lane is compacted to its
//! current entries (in order, so a lane stays sorted): at most about two entries per key,
//! amortised O(1) per push.
//!
//! A deadline that would break a lane's order (a node first seen with its creation time as its
//! probe time) is refused; the caller keeps it in its [`super::TimerHeap`]. Sequence numbers
//! come from that heap, so entries of both fire in exactly the order one heap would give.

use std::cell::Cell;
use std::collections::VecDeque;
use std::rc::Rc;
use std::time::Duration;

use crate::time::Time;

/// Most lanes kept (distinct spans: the global graces, pools' own); more go to the heap.
const MAX_LANES: usize = 16;

/// A key's handle on its lane entry: the sequence number of the entry that is current, 0 for
/// none. Shared (an `Rc`) between the key's owner and its entries, so checking an entry needs
/// no lookup.
#[derive(Clone, Debug, Default)]
pub(crate) struct Armed(Rc<Cell<u64>>);

impl Armed {
    pub(crate) fn is_armed(&self) -> bool {
        self.0.get() != 0
    }
}

#[derive(Debug)]
struct Entry<K> {
    at: Time,
    seq: u64,
    key: K,
    armed: Armed,
}

impl<K> Entry<K> {
    fn current(&self) -> bool {
        self.armed.0.get() == self.seq
    }
}

#[derive(Debug)]
struct Lane<K> {
    span: Duration,
    queue: VecDeque<Entry<K>>,
}

/// Below this many stale entries the lanes are not compacted (a small queue costs nothing).
const COMPACT_MIN_STALE: usize = 256;

#[derive(Debug)]
pub(crate) struct DeadlineLanes<K> {
    lanes: Vec<Lane<K>>,
    /// Entries queued, stale ones included.
    queued: usize,
    /// Entries queued that are no longer current (superseded or disarmed).
    stale: usize,
}

impl<K> Default for DeadlineLanes<K> {
    fn default() -> Self {
        DeadlineLanes {
            lanes: Vec::new(),
            queued: 0,
            stale: 0,
        }
    }
}

impl<K> DeadlineLanes<K> {
    /// Arms `armed`'s key at `at` in the lane of `span`, replacing its current entry, with the
    /// sequence number `seq` (non-zero, increasing; ties fire in `seq` order). Returns false,
    /// changing nothing, if `at` is before the lane's last deadline (or there are too many
    /// lanes): the caller schedules it elsewhere and disarms this handle.
    pub(crate) fn push(
        &mut self,
        span: Duration,
        at: Time,
        seq: u64,
        key: K,
        armed: &Armed,
    ) -> bool {
        debug_assert!(seq != 0, "0 means disarmed");
        let lane = match self.lanes.iter().position(|l| l.span == span) {
            Some(i) => i,
            None if self.lanes.len() < MAX_LANES => {
                self.lanes.push(Lane {
                    span,
                    queue: VecDeque::new(),
                });
                self.lanes.len() - 1
            }
            None => return false,
        };
        let queue = &mut self.lanes[lane].queue;
        if queue.back().is_some_and(|last| last.at > at) {
            return false;
        }
        if armed.is_armed() {
            // Its entry before, in this lane or another, is stale from now on.
            self.stale += 1;
        }
        armed.0.set(seq);
        queue.push_back(Entry {
            at,
            seq,
            key,
            armed: armed.clone(),
        });
        self.queued += 1;
        self.prune();
        true
    }

    /// Disarms the key of `armed` (its entry is dropped when it reaches the front).
    pub(crate) fn disarm(&mut self, armed: &Armed) {
        if armed.is_armed() {
            armed.0.set(0);
            self.stale += 1;
            self.prune();
        }
    }

    /// The earliest current deadline and its sequence number.
    pub(crate) fn head(&self) -> Option<(Time, u64)> {
        self.lanes
            .iter()
            .filter_map(|l| l.queue.front())
            .map(|e| (e.at, e.seq))
            .min()
    }

    /// Removes the earliest current entry (its key is disarmed) and returns its key.
    pub(crate) fn pop_head(&mut self) -> Option<(K, Time)> {
        let (at, seq) = self.head()?;
        let lane = self
            .lanes
            .iter_mut()
            .find(|l| l.queue.front().is_some_and(|e| e.seq == seq))?;
        let entry = lane.queue.pop_front()?;
        entry.armed.0.set(0);
        self.queued -= 1;
        self.prune();
        Some((entry.key, at))
    }

    /// Entries queued, stale ones included (for tests: stale entries do not pile up).
    #[cfg(test)]
    pub(crate) fn queued(&self) -> usize {
        debug_assert_eq!(
            self.queued,
            self.lanes.iter().map(|l| l.queue.len()).sum::<usize>()
        );
        self.queued
    }

    /// Keeps every lane's front current (so `head` needs no mutation), compacts the lanes once
    /// most of what they hold is stale, and drops empty lanes.
    fn prune(&mut self) {
        if self.stale >= COMPACT_MIN_STALE && self.stale * 2 > self.queued {
            for lane in &mut self.lanes {
                lane.queue.retain(Entry::current);
                if lane.queue.capacity() > 2 * lane.queue.len() + 64 {
                    lane.queue.shrink_to(lane.queue.len() * 3 / 2 + 16);
                }
            }
            self.queued = self.lanes.iter().map(|l| l.queue.len()).sum();
            self.stale = 0;
        }
        for lane in &mut self.lanes {
            while lane.queue.front().is_some_and(|e| !e.current()) {
                lane.queue.pop_front();
                self.queued -= 1;
                self.stale = self.stale.saturating_sub(1);
            }
        }
        self.lanes.retain(|l| !l.queue.is_empty());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::Rng;
    use crate::time::TimerHeap;

    fn t(ms: u64) -> Time {
        Time::from_unix_millis(ms)
    }

    #[test]
    fn a_renewed_deadline_fires_once_at_its_latest_time_and_the_stale_entries_are_gone() {
        let mut lanes = DeadlineLanes::default();
        let armed = Armed::default();
        let span = Duration::from_secs(50);
        for (seq, at) in [(1, 100), (2, 200), (3, 300)] {
            assert!(lanes.push(span, t(at), seq, "n1", &armed));
        }
        assert_eq!(lanes.head(), Some((t(300), 3)));
        assert_eq!(lanes.queued(), 1, "stale entries dropped from the front");
        assert_eq!(lanes.pop_head(), Some(("n1", t(300))));
        assert!(!armed.is_armed());
        assert_eq!(lanes.head(), None);
    }

    /// 2,000 keys renewed 40 times each, a grace of 5 renewals: without compaction five entries
    /// per key would stay queued; with it, at most about two, and the last deadlines still fire
    /// in order, each once.
    #[test]
    fn stale_entries_of_renewals_are_compacted_away_and_the_current_ones_fire_in_order() {
        let mut lanes = DeadlineLanes::default();
        let keys = 2_000u64;
        let armed: Vec<Armed> = (0..keys).map(|_| Armed::default()).collect();
        let span = Duration::from_secs(50);
        let mut seq = 0;
        let mut most = 0;
        for round in 0..40u64 {
            for k in 0..keys {
                seq += 1;
                let at = t(round * 10_000 + k * 5 + 50_000);
                assert!(lanes.push(span, at, seq, k, &armed[k as usize]));
                most = most.max(lanes.queued());
            }
        }
        assert!(
            most <= 2 * keys as usize + COMPACT_MIN_STALE,
            "{most} entries queued for {keys} keys"
        );
        let mut fired = Vec::new();
        while let Some((k, at)) = lanes.pop_head() {
            fired.push((k, at));
        }
        let expected: Vec<(u64, Time)> = (0..keys)
            .map(|k| (k, t(39 * 10_000 + k * 5 + 50_000)))
            .collect();
        assert_eq!(fired, expected);
        assert_eq!(lanes.queued(), 0);
    }

    #[test]
    fn an_earlier_deadline_than_the_lane_holds_is_refused_for_the_heap() {
        let mut lanes = DeadlineLanes::default();
        let (a, b) = (Armed::default(), Armed::default());
        let span = Duration::from_secs(50);
        assert!(lanes.push(span, t(500), 1, "a", &a));
        assert!(!lanes.push(span, t(400), 2, "b", &b));
        assert!(!b.is_armed());
        // Another span is another lane.
        assert!(lanes.push(Duration::from_secs(60), t(400), 3, "b", &b));
        assert_eq!(lanes.pop_head(), Some(("b", t(400))));
        assert_eq!(lanes.pop_head(), Some(("a", t(500))));
    }

    /// Property: lanes plus a heap (for refused pushes) fire in the order of one heap holding
    /// every key, ties included. 300 seeds x 400 operations, deadlines mostly moving later.
    #[test]
    fn lanes_with_a_heap_fallback_fire_as_one_heap_would() {
        for seed in 1..=300u64 {
            let mut rng = Rng::new(seed);
            let mut reference: TimerHeap<u32> = TimerHeap::new();
            let mut heap: TimerHeap<u32> = TimerHeap::new();
            let mut lanes = DeadlineLanes::default();
            let armed: Vec<Armed> = (0..16).map(|_| Armed::default()).collect();
            let mut now = 0u64;
            for step in 0..400 {
                let key = rng.below(16) as u32;
                match rng.below(10) {
                    0..=5 => {
                        let span = [10, 20, 35][rng.below(3) as usize];
                        let early = rng.chance(10);
                        let at = t(if early { now } else { now + span });
                        reference.schedule(key, at);
                        let seq = heap.take_seq();
                        let span = Duration::from_millis(span);
                        if lanes.push(span, at, seq, key, &armed[key as usize]) {
                            heap.cancel(&key);
                        } else {
                            lanes.disarm(&armed[key as usize]);
                            heap.schedule(key, at);
                        }
                    }
                    6 => {
                        let had = reference.cancel(&key).is_some();
                        let in_lane = armed[key as usize].is_armed();
                        lanes.disarm(&armed[key as usize]);
                        assert_eq!(had, in_lane || heap.cancel(&key).is_some(), "seed {seed}");
                    }
                    _ => {
                        now += rng.below(30);
                        loop {
                            let expected = reference.pop_due(t(now));
                            let got = match (lanes.head(), heap.head()) {
                                (Some(l), h) if l.0 <= t(now) && h.is_none_or(|h| l < h) => {
                                    lanes.pop_head()
                                }
                                _ => heap.pop_due(t(now)),
                            };
                            assert_eq!(got, expected, "seed {seed} step {step}");
                            if got.is_none() {
                                break;
                            }
                        }
                    }
                }
            }
        }
    }
}
