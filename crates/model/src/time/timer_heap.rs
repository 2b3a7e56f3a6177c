//! A min-heap of deadlines keyed by what they are for.
//!
//! Every key has at most one deadline: scheduling a key that is already pending moves it, so
//! "re-arm the grace timer of node n" or "cancel the eviction of pod p" are O(log n) without
//! tombstones piling up. The heap is indexed (key -> slot), which is what makes cancel cheap.
//! Entries with equal deadlines fire in the order they were scheduled.
//!
//! The index hashes with the store's keyed name hash, not SipHash: the event loop's own heap
//! is looked up several times a wake-up (the due timers taken out, the before-sleep hook's
//! re-arming), where SipHash would be a visible share of a follower's CPU at 5,000 nodes.
//! The hash is keyed per process, as SipHash is, so pod keys chosen to collide cannot be
//! precomputed (the taint eviction's heap is keyed by pod).

use std::collections::HashMap;
use std::hash::Hash;

use super::NameHashState;
use crate::time::Time;

/// Up to this many entries, a key's absence is checked by comparing it with each (cheaper than
/// hashing it).
const SCAN_MAX: usize = 4;

#[derive(Debug)]
struct Entry<K> {
    at: Time,
    seq: u64,
    key: K,
}

#[derive(Debug)]
pub struct TimerHeap<K> {
    heap: Vec<Entry<K>>,
    slot: HashMap<K, usize, NameHashState>,
    next_seq: u64,
}

impl<K> Default for TimerHeap<K> {
    fn default() -> Self {
        TimerHeap {
            heap: Vec::new(),
            slot: HashMap::default(),
            // 0 is left free: `DeadlineLanes` reads it as "disarmed".
            next_seq: 1,
        }
    }
}

impl<K: Eq + Hash + Clone> TimerHeap<K> {
    pub fn new() -> Self {
        Self::default()
    }

    /// Arms `key` to fire at `at`, replacing any deadline it had. Returns the replaced deadline.
    pub fn schedule(&mut self, key: K, at: Time) -> Option<Time> {
        let seq = self.next_seq;
        self.next_seq += 1;
        if let Some(&i) = self.slot.get(&key) {
            let old = self.heap[i].at;
            self.heap[i].at = at;
            self.heap[i].seq = seq;
            self.restore(i);
            return Some(old);
        }
        let i = self.heap.len();
        self.slot.insert(key.clone(), i);
        self.heap.push(Entry { at, seq, key });
        self.sift_up(i);
        None
    }

    /// Arms `key` only if it has no deadline yet ("keep the countdown already running").
    pub fn schedule_if_absent(&mut self, key: K, at: Time) -> bool {
        if self.slot.contains_key(&key) {
            return false;
        }
        self.schedule(key, at);
        true
    }

    /// Whether `key` is surely not armed, seen without hashing it: a heap of a few entries is
    /// scanned instead (the node lifecycle's holds its periodic pass and little else, and a
    /// Lease renewal asks whether the zone queues' pass is armed: `arm_eviction_pass`).
    fn absent_by_scan(&self, key: &K) -> bool {
        self.heap.len() <= SCAN_MAX && !self.heap.iter().any(|e| e.key == *key)
    }

    /// Disarms `key`; returns the deadline it had, if any.
    pub fn cancel(&mut self, key: &K) -> Option<Time> {
        if self.absent_by_scan(key) {
            return None;
        }
        let i = self.slot.remove(key)?;
        let last = self.heap.len() - 1;
        self.heap.swap(i, last);
        let entry = self.heap.pop().expect("slot pointed into the heap");
        if i < self.heap.len() {
            self.note_slot(i);
            self.restore(i);
        }
        Some(entry.at)
    }

    pub fn deadline(&self, key: &K) -> Option<Time> {
        if self.absent_by_scan(key) {
            return None;
        }
        self.slot.get(key).map(|&i| self.heap[i].at)
    }

    pub fn contains(&self, key: &K) -> bool {
        !self.absent_by_scan(key) && self.slot.contains_key(key)
    }

    /// The earliest deadline: the event loop's poll timeout.
    pub fn next_deadline(&self) -> Option<Time> {
        self.heap.first().map(|e| e.at)
    }

    /// The earliest entry's deadline and sequence number: entries of another queue that took
    /// their numbers from [`TimerHeap::take_seq`] are merged with this one by comparing these.
    pub fn head(&self) -> Option<(Time, u64)> {
        self.heap.first().map(|e| (e.at, e.seq))
    }

    /// A sequence number in this heap's order, for an entry kept elsewhere (`DeadlineLanes`):
    /// equal deadlines fire in the order they were armed, wherever they are kept.
    pub fn take_seq(&mut self) -> u64 {
        let seq = self.next_seq;
        self.next_seq += 1;
        seq
    }

    /// Removes and returns the earliest entry if it is due at `now` (deadline <= now).
    pub fn pop_due(&mut self, now: Time) -> Option<(K, Time)> {
        let head = self.heap.first()?;
        if head.at > now {
            return None;
        }
        let key = head.key.clone();
        let at = self.cancel(&key)?;
        Some((key, at))
    }

    /// Every entry due at `now`, in firing order, appended to `due` (the event loop's buffer,
    /// kept from one wake-up to the next instead of allocated in each).
    pub fn drain_due_into(&mut self, now: Time, due: &mut Vec<(K, Time)>) {
        while let Some(e) = self.pop_due(now) {
            due.push(e);
        }
    }

    /// Every entry due at `now`, in firing order.
    #[cfg(test)]
    pub(crate) fn drain_due(&mut self, now: Time) -> Vec<(K, Time)> {
        let mut due = Vec::new();
        self.drain_due_into(now, &mut due);
        due
    }

    pub fn len(&self) -> usize {
        self.heap.len()
    }

    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }

    /// Pending entries in no particular order (for state dumps).
    pub fn iter(&self) -> impl Iterator<Item = (&K, Time)> {
        self.heap.iter().map(|e| (&e.key, e.at))
    }

    fn less(&self, a: usize, b: usize) -> bool {
        let (x, y) = (&self.heap[a], &self.heap[b]);
        (x.at, x.seq) < (y.at, y.seq)
    }

    /// Records where the entry at `i` now is: a lookup, no key clone (every Lease renewal moves its
    /// node's grace deadline down a heap of thousands).
    fn note_slot(&mut self, i: usize) {
        if let Some(slot) = self.slot.get_mut(&self.heap[i].key) {
            *slot = i;
        }
    }

    fn restore(&mut self, i: usize) {
        if i > 0 && self.less(i, (i - 1) / 2) {
            self.sift_up(i);
        } else {
            self.sift_down(i);
        }
    }

    /// The entry at `i` moves up past later parents; each parent passed moves down one level.
    /// Only the entries that moved are re-indexed, the moving one once at the end.
    fn sift_up(&mut self, mut i: usize) {
        let start = i;
        while i > 0 {
            let parent = (i - 1) / 2;
            if !self.less(i, parent) {
                break;
            }
            self.heap.swap(i, parent);
            self.note_slot(i);
            i = parent;
        }
        if i != start {
            self.note_slot(i);
        }
    }

    fn sift_down(&mut self, mut i: usize) {
        let start = i;
        loop {
            let (l, r) = (2 * i + 1, 2 * i + 2);
            let mut smallest = i;
            if l < self.heap.len() && self.less(l, smallest) {
                smallest = l;
            }
            if r < self.heap.len() && self.less(r, smallest) {
                smallest = r;
            }
            if smallest == i {
                break;
            }
            self.heap.swap(i, smallest);
            self.note_slot(i);
            i = smallest;
        }
        if i != start {
            self.note_slot(i);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::Rng;

    fn t(ms: u64) -> Time {
        Time::from_unix_millis(ms)
    }

    #[test]
    fn fires_in_deadline_order_then_schedule_order() {
        let mut h = TimerHeap::new();
        h.schedule("c", t(30));
        h.schedule("a", t(10));
        h.schedule("b", t(10));
        assert_eq!(h.next_deadline(), Some(t(10)));
        assert_eq!(h.drain_due(t(29)), vec![("a", t(10)), ("b", t(10))]);
        assert_eq!(h.pop_due(t(29)), None);
        assert_eq!(h.pop_due(t(30)), Some(("c", t(30))));
        assert!(h.is_empty());
    }

    #[test]
    fn rescheduling_moves_and_cancel_removes() {
        let mut h = TimerHeap::new();
        h.schedule(1, t(10));
        h.schedule(2, t(20));
        assert_eq!(h.schedule(1, t(30)), Some(t(10)));
        assert!(!h.schedule_if_absent(2, t(5)));
        assert_eq!(h.deadline(&2), Some(t(20)));
        assert_eq!(h.cancel(&2), Some(t(20)));
        assert_eq!(h.cancel(&2), None);
        assert_eq!(h.drain_due(t(100)), vec![(1, t(30))]);
    }

    /// The naive model: a list of (deadline, seq, key), one per key, popped by linear scan.
    #[derive(Default)]
    struct Model {
        entries: Vec<(Time, u64, u32)>,
        seq: u64,
    }

    impl Model {
        fn schedule(&mut self, k: u32, at: Time) {
            self.entries.retain(|e| e.2 != k);
            self.entries.push((at, self.seq, k));
            self.seq += 1;
        }
        fn cancel(&mut self, k: u32) -> Option<Time> {
            let i = self.entries.iter().position(|e| e.2 == k)?;
            Some(self.entries.remove(i).0)
        }
        fn pop_due(&mut self, now: Time) -> Option<(u32, Time)> {
            let i = (0..self.entries.len())
                .filter(|&i| self.entries[i].0 <= now)
                .min_by_key(|&i| (self.entries[i].0, self.entries[i].1))?;
            let e = self.entries.remove(i);
            Some((e.2, e.0))
        }
    }

    /// Property: any random sequence of schedule / cancel / pop gives the same firing order as
    /// the naive model. 300 seeds x 400 operations over a small key space (lots of collisions).
    #[test]
    fn property_matches_naive_model() {
        for seed in 1..=300u64 {
            let mut rng = Rng::new(seed);
            let (mut heap, mut model) = (TimerHeap::new(), Model::default());
            let mut now = 0u64;
            for step in 0..400 {
                let key = rng.below(24) as u32;
                match rng.below(10) {
                    0..=4 => {
                        let at = t(now + rng.below(1000));
                        heap.schedule(key, at);
                        model.schedule(key, at);
                    }
                    5 | 6 => assert_eq!(
                        heap.cancel(&key),
                        model.cancel(key),
                        "seed {seed} step {step}"
                    ),
                    _ => {
                        now += rng.below(300);
                        loop {
                            let (a, b) = (heap.pop_due(t(now)), model.pop_due(t(now)));
                            assert_eq!(a, b, "seed {seed} step {step}");
                            if a.is_none() {
                                break;
                            }
                        }
                    }
                }
                assert_eq!(heap.len(), model.entries.len());
                let model_next = model.entries.iter().map(|e| e.0).min();
                assert_eq!(heap.next_deadline(), model_next, "seed {seed} step {step}");
                // Every key's slot still points at its own entry.
                for k in 0..24u32 {
                    let expected = model.entries.iter().find(|e| e.2 == k).map(|e| e.0);
                    assert_eq!(
                        heap.deadline(&k),
                        expected,
                        "seed {seed} step {step} key {k}"
                    );
                }
            }
        }
    }
}
