//! Deadlines that only move later, in O(1): a FIFO per span ("lane") with lazy invalidation.
//!
//! Every Lease renewal moves its node's grace deadline to `probe_time + grace`. In a heap that is a
//! sift down thousands of entries per renewal. But `probe_time` is the
//! controller's own observation time, which never goes back, so with one grace value every new
//! deadline is at or after every deadline already queued with that grace: appending to the
//! lane keeps it sorted. The entry a key had before stays where it is and is dropped when it
//! reaches the front (it no longer matches the sequence number its key's [`Armed`] slot holds).
//! So a renewal costs one push, the next deadline is the front of a lane, and no timer fires
//! for a stale entry.
//!
//! A renewal leaves its key's entry before stale, and with a grace of 50 s and renewals every
//! 10 s each node would have five entries queued, four stale (25,000 at 5,000 nodes). So once the
//! stale entries outnumber the current ones, every lane is compacted to its current entries (in
//! order, so a lane stays sorted): at most about two entries per key, amortised O(1) per push.
//!
//! An entry names its key by a slot (a `u32`) in two dense tables the lanes own: the sequence
//! number of each slot's current entry, and its key. A renewal's push and the later drop of the
//! entry it made stale read one word of the first table (5,000 slots are 40 KB), where a handle
//! shared by `Rc` with its entries would be a heap object of its own per node, and a key held by
//! each entry a reference count on the node's name: two cache misses at the push and two more at
//! the stale entry's drop, at every renewal (the cache lines the server's work evicts between
//! the daemon's reads). Sequence numbers are never reused, so a slot given back and
//! taken by another key cannot be matched by the entries the first key left queued.
//!
//! A deadline that would break a lane's order (a node first seen with its creation time as its
//! probe time) is refused; the caller keeps it in its [`super::TimerHeap`]. Sequence numbers
//! come from that heap, so entries of both fire in exactly the order one heap would give.

use std::collections::VecDeque;
use std::time::Duration;

use crate::time::Time;

/// Most lanes kept (distinct spans: the global graces, pools' own); more go to the heap.
const MAX_LANES: usize = 16;

/// No slot taken yet (or given back).
const NO_SLOT: u32 = u32::MAX;

/// A key's handle on its lane entry: its slot in the lanes' tables, taken at its first push
/// and given back by [`DeadlineLanes::release`] when the key's owner goes. One owner: not
/// `Clone`.
#[derive(Debug)]
pub struct Armed(u32);

impl Default for Armed {
    fn default() -> Self {
        Armed(NO_SLOT)
    }
}

#[derive(Debug)]
struct Entry {
    at: Time,
    seq: u64,
    slot: u32,
}

#[derive(Debug)]
struct Lane {
    span: Duration,
    queue: VecDeque<Entry>,
}

/// Below this many stale entries the lanes are not compacted (a small queue costs nothing).
const COMPACT_MIN_STALE: usize = 256;

#[derive(Debug)]
pub struct DeadlineLanes<K> {
    lanes: Vec<Lane>,
    /// Per slot: the sequence number of its current entry, 0 for none.
    current: Vec<u64>,
    /// Per slot: its key (`None`: free).
    keys: Vec<Option<K>>,
    free: Vec<u32>,
    /// Entries queued, stale ones included.
    queued: usize,
    /// Entries queued that are no longer current (superseded or disarmed).
    stale: usize,
}

impl<K> Default for DeadlineLanes<K> {
    fn default() -> Self {
        DeadlineLanes {
            lanes: Vec::new(),
            current: Vec::new(),
            keys: Vec::new(),
            free: Vec::new(),
            queued: 0,
            stale: 0,
        }
    }
}

impl<K: Clone> DeadlineLanes<K> {
    /// Arms `armed`'s key at `at` in the lane of `span`, replacing its current entry, with the
    /// sequence number `seq` (non-zero, increasing; ties fire in `seq` order). `key` is kept
    /// at the handle's first push (a handle's key never changes). Returns false, changing
    /// nothing, if `at` is before the lane's last deadline (or there are too many lanes): the
    /// caller schedules it elsewhere and disarms this handle.
    pub fn push(&mut self, span: Duration, at: Time, seq: u64, key: &K, armed: &mut Armed) -> bool {
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
        if self.lanes[lane]
            .queue
            .back()
            .is_some_and(|last| last.at > at)
        {
            return false;
        }
        let slot = self.slot_for(key, armed);
        let current = &mut self.current[slot as usize];
        if *current != 0 {
            // Its entry before, in this lane or another, is stale from now on.
            self.stale += 1;
        }
        *current = seq;
        self.lanes[lane].queue.push_back(Entry { at, seq, slot });
        self.queued += 1;
        self.prune();
        true
    }

    /// The handle's slot, taken now if it has none.
    fn slot_for(&mut self, key: &K, armed: &mut Armed) -> u32 {
        if armed.0 != NO_SLOT {
            return armed.0;
        }
        let slot = match self.free.pop() {
            Some(slot) => {
                self.keys[slot as usize] = Some(key.clone());
                slot
            }
            None => {
                self.current.push(0);
                self.keys.push(Some(key.clone()));
                (self.keys.len() - 1) as u32
            }
        };
        armed.0 = slot;
        slot
    }

    /// Whether `armed`'s key has a current entry.
    #[cfg(test)]
    pub(crate) fn is_armed(&self, armed: &Armed) -> bool {
        self.current
            .get(armed.0 as usize)
            .is_some_and(|&seq| seq != 0)
    }

    /// Disarms the key of `armed` (its entry is dropped when it reaches the front).
    pub fn disarm(&mut self, armed: &Armed) {
        if let Some(seq) = self.current.get_mut(armed.0 as usize)
            && *seq != 0
        {
            *seq = 0;
            self.stale += 1;
            self.prune();
        }
    }

    /// The key's owner is gone: disarms it and gives its slot back for another key.
    pub fn release(&mut self, armed: &mut Armed) {
        self.disarm(armed);
        if let Some(key) = self.keys.get_mut(armed.0 as usize) {
            *key = None;
            self.free.push(armed.0);
        }
        armed.0 = NO_SLOT;
    }

    /// The earliest current deadline and its sequence number.
    pub fn head(&self) -> Option<(Time, u64)> {
        self.lanes
            .iter()
            .filter_map(|l| l.queue.front())
            .map(|e| (e.at, e.seq))
            .min()
    }

    /// Removes the earliest current entry (its key is disarmed) and returns its key.
    pub fn pop_head(&mut self) -> Option<(K, Time)> {
        let (at, seq) = self.head()?;
        let lane = self
            .lanes
            .iter_mut()
            .find(|l| l.queue.front().is_some_and(|e| e.seq == seq))?;
        let entry = lane.queue.pop_front()?;
        self.queued -= 1;
        let slot = entry.slot as usize;
        self.current[slot] = 0;
        let key = self.keys[slot].clone();
        self.prune();
        Some((key?, at))
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

    /// Slots held by keys (for tests: released slots are taken again).
    #[cfg(test)]
    pub(crate) fn slots(&self) -> (usize, usize) {
        (self.keys.len(), self.free.len())
    }

    /// Keeps every lane's front current (so `head` needs no mutation), compacts the lanes once
    /// most of what they hold is stale, and drops empty lanes.
    fn prune(&mut self) {
        let current = &self.current;
        let is_current = |e: &Entry| current[e.slot as usize] == e.seq;
        if self.stale >= COMPACT_MIN_STALE && self.stale * 2 > self.queued {
            for lane in &mut self.lanes {
                lane.queue.retain(is_current);
                if lane.queue.capacity() > 2 * lane.queue.len() + 64 {
                    lane.queue.shrink_to(lane.queue.len() * 3 / 2 + 16);
                }
            }
            self.queued = self.lanes.iter().map(|l| l.queue.len()).sum();
            self.stale = 0;
        }
        for lane in &mut self.lanes {
            while lane.queue.front().is_some_and(|e| !is_current(e)) {
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
        let mut armed = Armed::default();
        let span = Duration::from_secs(50);
        for (seq, at) in [(1, 100), (2, 200), (3, 300)] {
            assert!(lanes.push(span, t(at), seq, &"n1", &mut armed));
        }
        assert_eq!(lanes.head(), Some((t(300), 3)));
        assert_eq!(lanes.queued(), 1, "stale entries dropped from the front");
        assert_eq!(lanes.pop_head(), Some(("n1", t(300))));
        assert!(!lanes.is_armed(&armed));
        assert_eq!(lanes.head(), None);
    }

    /// 2,000 keys renewed 40 times each, a grace of 5 renewals: without compaction five entries
    /// per key would stay queued; with it, at most about two, and the last deadlines still fire
    /// in order, each once.
    #[test]
    fn stale_entries_of_renewals_are_compacted_away_and_the_current_ones_fire_in_order() {
        let mut lanes = DeadlineLanes::default();
        let keys = 2_000u64;
        let mut armed: Vec<Armed> = (0..keys).map(|_| Armed::default()).collect();
        let span = Duration::from_secs(50);
        let mut seq = 0;
        let mut most = 0;
        for round in 0..40u64 {
            for k in 0..keys {
                seq += 1;
                let at = t(round * 10_000 + k * 5 + 50_000);
                assert!(lanes.push(span, at, seq, &k, &mut armed[k as usize]));
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
        let (mut a, mut b) = (Armed::default(), Armed::default());
        let span = Duration::from_secs(50);
        assert!(lanes.push(span, t(500), 1, &"a", &mut a));
        assert!(!lanes.push(span, t(400), 2, &"b", &mut b));
        assert!(!lanes.is_armed(&b));
        // Another span is another lane.
        assert!(lanes.push(Duration::from_secs(60), t(400), 3, &"b", &mut b));
        assert_eq!(lanes.pop_head(), Some(("b", t(400))));
        assert_eq!(lanes.pop_head(), Some(("a", t(500))));
    }

    /// A key whose owner goes gives its slot back; the next key takes it, and the entries the
    /// first key left queued (stale or current when it went) never fire for the second.
    #[test]
    fn a_released_slot_is_taken_by_the_next_key_and_the_entries_left_behind_never_fire_for_it() {
        let mut lanes = DeadlineLanes::default();
        let span = Duration::from_secs(50);
        let mut gone = Armed::default();
        assert!(lanes.push(span, t(100), 1, &"gone", &mut gone));
        assert!(lanes.push(span, t(200), 2, &"gone", &mut gone));
        lanes.release(&mut gone);
        assert!(!lanes.is_armed(&gone));
        assert_eq!(lanes.head(), None, "nothing current is left");
        assert_eq!(lanes.slots(), (1, 1));
        let mut next = Armed::default();
        assert!(!lanes.is_armed(&next));
        assert!(lanes.push(span, t(300), 3, &"next", &mut next));
        assert_eq!(lanes.slots(), (1, 0), "the slot given back is taken again");
        assert_eq!(lanes.pop_head(), Some(("next", t(300))));
        assert_eq!(lanes.pop_head(), None);
        // Released while an entry of an earlier key waits behind another key's: only the
        // current one fires.
        let (mut a, mut b) = (Armed::default(), Armed::default());
        assert!(lanes.push(span, t(400), 4, &"a", &mut a));
        assert!(lanes.push(span, t(500), 5, &"b", &mut b));
        lanes.release(&mut a);
        let mut c = Armed::default();
        assert!(lanes.push(span, t(600), 6, &"c", &mut c));
        assert_eq!(lanes.pop_head(), Some(("b", t(500))));
        assert_eq!(lanes.pop_head(), Some(("c", t(600))));
        assert_eq!(lanes.pop_head(), None);
        assert_eq!(lanes.queued(), 0);
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
            let mut armed: Vec<Armed> = (0..16).map(|_| Armed::default()).collect();
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
                        if lanes.push(span, at, seq, &key, &mut armed[key as usize]) {
                            heap.cancel(&key);
                        } else {
                            lanes.disarm(&armed[key as usize]);
                            heap.schedule(key, at);
                        }
                    }
                    6 => {
                        let had = reference.cancel(&key).is_some();
                        let in_lane = lanes.is_armed(&armed[key as usize]);
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
