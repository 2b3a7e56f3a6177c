//! Upstream's `RateLimitedTimedQueue`: a per-zone queue of nodes ordered by due time, with one
//! entry per node and a token bucket (burst 1) pacing how fast entries are processed.
//!
//! Semantics kept from upstream on purpose:
//! - the "set" outlives processing: a processed node stays in it, so adding it again is a no-op
//!   until [`RateLimitedTimedQueue::remove`] is called;
//! - every attempt takes a token first, even when the head is not due yet;
//! - swapping the rate to the same value keeps the bucket; to zero means never; to another
//!   value gives a new full bucket, drained if the old one had no token.
//!
//! Sans-IO: instead of upstream's `Try(fn)` callback the caller loops on
//! [`RateLimitedTimedQueue::pop_due`] and hands a failed entry back with `retry_at`.

use std::collections::{BTreeMap, HashMap};

use crate::model::Name;
use crate::time::Time;
use crate::time::{Rate, TokenBucket};

#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct TimedValue {
    pub(crate) value: Name,
    pub(crate) uid: Name,
    pub(crate) added_at: Time,
    pub(crate) process_at: Time,
}

#[derive(Debug)]
struct Entry {
    uid: Name,
    added_at: Time,
    /// Position in `order` while queued; `None` once processed (still in the set).
    slot: Option<(Time, u64)>,
}

#[derive(Debug)]
pub(crate) struct RateLimitedTimedQueue {
    order: BTreeMap<(Time, u64), Name>,
    set: HashMap<Name, Entry>,
    limiter: TokenBucket,
    next_seq: u64,
}

/// Every zone bucket has burst 1 (upstream `EvictionRateLimiterBurst`).
const BURST: u64 = 1;

impl RateLimitedTimedQueue {
    pub(crate) fn new(rate: Rate, now: Time) -> RateLimitedTimedQueue {
        RateLimitedTimedQueue {
            order: BTreeMap::new(),
            set: HashMap::new(),
            limiter: TokenBucket::new(rate, BURST, now),
            next_seq: 0,
        }
    }

    /// Queues `value` due now; false (and nothing changes) if it is already in the set.
    pub(crate) fn add(&mut self, value: &Name, uid: &Name, now: Time) -> bool {
        if self.set.contains_key(value) {
            return false;
        }
        let slot = self.push(value, now);
        self.set.insert(
            value.clone(),
            Entry {
                uid: uid.clone(),
                added_at: now,
                slot: Some(slot),
            },
        );
        true
    }

    /// Puts `value` in the set as processed (not queued): a node a previous leader already
    /// tainted, found at a takeover, is not queued again (adding it is then a no-op, as for a
    /// node this queue processed itself).
    pub(crate) fn add_processed(&mut self, value: &Name, uid: &Name, now: Time) {
        self.set.entry(value.clone()).or_insert_with(|| Entry {
            uid: uid.clone(),
            added_at: now,
            slot: None,
        });
    }

    /// Whether `value` waits in the queue (in the set and not processed yet).
    pub(crate) fn is_queued(&self, value: &str) -> bool {
        self.set.get(value).is_some_and(|e| e.slot.is_some())
    }

    /// Forgets `value` (queued or processed); true if it was in the set.
    pub(crate) fn remove(&mut self, value: &str) -> bool {
        match self.set.remove(value) {
            Some(entry) => {
                if let Some(slot) = entry.slot {
                    self.order.remove(&slot);
                }
                true
            }
            None => false,
        }
    }

    #[cfg(test)]
    pub(crate) fn clear(&mut self) {
        self.order.clear();
        self.set.clear();
    }

    /// One step of upstream's `Try` loop: takes a token (even if the head is not due), then
    /// hands out the head if it is due. The entry leaves the queue but stays in the set.
    pub(crate) fn pop_due(&mut self, now: Time) -> Option<TimedValue> {
        let (&slot, _) = self.order.first_key_value()?;
        if !self.limiter.try_take(now) {
            return None;
        }
        if now < slot.0 {
            return None;
        }
        let value = self.order.remove(&slot)?;
        let entry = self.set.get_mut(&value)?;
        entry.slot = None;
        Some(TimedValue {
            value,
            uid: entry.uid.clone(),
            added_at: entry.added_at,
            process_at: slot.0,
        })
    }

    /// Puts a handed-out entry back, due at `at`; ignored if it was removed meanwhile.
    pub(crate) fn retry_at(&mut self, value: &Name, at: Time) -> bool {
        let Some(slot) = self.set.get(value).map(|e| e.slot) else {
            return false;
        };
        if slot.is_some() {
            return false;
        }
        let slot = self.push(value, at);
        if let Some(entry) = self.set.get_mut(value) {
            entry.slot = Some(slot);
        }
        true
    }

    pub(crate) fn swap_limiter(&mut self, rate: Rate, now: Time) {
        if self.limiter.rate() == rate {
            return;
        }
        let had_token = self.limiter.try_take(now);
        let mut bucket = TokenBucket::new(rate, BURST, now);
        if !rate.is_never() && !had_token {
            bucket.drain(now);
        }
        self.limiter = bucket;
    }

    pub(crate) fn rate(&self) -> Rate {
        self.limiter.rate()
    }

    /// When the next token is there (`now` if it already is); `None` at rate zero.
    pub(crate) fn next_token(&self, now: Time) -> Option<Time> {
        self.limiter.next_available(now)
    }

    pub(crate) fn tokens(&self, now: Time) -> u64 {
        self.limiter.tokens(now)
    }

    /// Entries waiting in the queue (processed ones are only in the set).
    pub(crate) fn len(&self) -> usize {
        self.order.len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.order.is_empty()
    }

    pub(crate) fn contains(&self, value: &str) -> bool {
        self.set.contains_key(value)
    }

    pub(crate) fn head(&self) -> Option<(&Name, Time)> {
        self.order.first_key_value().map(|(slot, v)| (v, slot.0))
    }

    /// Queued values in processing order.
    pub(crate) fn queued(&self) -> impl Iterator<Item = &Name> {
        self.order.values()
    }

    fn push(&mut self, value: &Name, at: Time) -> (Time, u64) {
        let slot = (at, self.next_seq);
        self.next_seq += 1;
        self.order.insert(slot, value.clone());
        slot
    }
}

#[cfg(test)]
mod tests {
    //! Ports of upstream `scheduler/rate_limited_queue_test.go`. Upstream's
    //! `FakeAlwaysRateLimiter` is a bucket too fast to ever run dry within a test.
    use super::*;
    use std::rc::Rc;

    fn t(ms: u64) -> Time {
        Time::from_unix_millis(ms)
    }

    fn n(s: &str) -> Name {
        Rc::from(s)
    }

    fn always() -> RateLimitedTimedQueue {
        RateLimitedTimedQueue::new(Rate::per_second(1_000_000), t(0))
    }

    fn three(q: &mut RateLimitedTimedQueue) {
        q.add(&n("first"), &n("11111"), t(1));
        q.add(&n("second"), &n("22222"), t(2));
        q.add(&n("third"), &n("33333"), t(3));
    }

    fn queued(q: &RateLimitedTimedQueue) -> Vec<String> {
        q.queued().map(|v| v.to_string()).collect()
    }

    /// Upstream `Try` with a callback returning (done, wait): processes entries while the head
    /// is due. As upstream's fake clock in `TestTryOrdering`, time advances 1 ms per attempt
    /// (our buckets refill per millisecond). Returns the time reached.
    fn try_all(
        q: &mut RateLimitedTimedQueue,
        mut now: Time,
        mut f: impl FnMut(&TimedValue) -> Option<u64>,
    ) -> Time {
        while q.head().is_some_and(|(_, due)| due <= now) {
            if let Some(v) = q.pop_due(now)
                && let Some(wait) = f(&v)
            {
                q.retry_at(&v.value, now + std::time::Duration::from_millis(wait + 1));
            }
            now += std::time::Duration::from_millis(1);
        }
        now
    }

    #[test]
    fn test_unique_queue_get_order_is_by_due_time() {
        let mut q = always();
        q.add(&n("late"), &n("1"), t(30));
        q.add(&n("early"), &n("2"), t(10));
        q.add(&n("middle"), &n("3"), t(20));
        let mut got = Vec::new();
        try_all(&mut q, t(100), |v| {
            got.push(v.value.to_string());
            None
        });
        assert_eq!(got, ["early", "middle", "late"]);
        // Handed out, still in the set: adding again is a no-op.
        assert!(!q.add(&n("early"), &n("2"), t(100)));
    }

    #[test]
    fn test_add_node() {
        let mut q = always();
        three(&mut q);
        assert_eq!(queued(&q), ["first", "second", "third"]);
        assert!(q.contains("first") && q.contains("second") && q.contains("third"));
    }

    #[test]
    fn test_del_node_first_middle_last() {
        for (gone, rest) in [
            ("first", ["second", "third"]),
            ("second", ["first", "third"]),
            ("third", ["first", "second"]),
        ] {
            let mut q = always();
            three(&mut q);
            assert!(q.remove(gone));
            assert_eq!(queued(&q), rest, "removing {gone}");
            assert!(!q.contains(gone));
            assert_eq!(q.set.len(), 2);
        }
    }

    #[test]
    fn test_try_skips_removed_value() {
        let mut q = always();
        three(&mut q);
        q.remove("second");
        let mut done = Vec::new();
        try_all(&mut q, t(10), |v| {
            done.push(v.value.to_string());
            None
        });
        assert_eq!(done, ["first", "third"]);
    }

    #[test]
    fn test_try_ordering_retried_value_comes_after_the_others() {
        let mut q = always();
        three(&mut q);
        let (mut order, mut count, mut queued_once) = (Vec::new(), 0, false);
        let mut retried_at = None;
        let mut f = |v: &TimedValue| {
            count += 1;
            assert!(v.process_at > Time::ZERO);
            if &*v.value == "second" {
                assert_eq!(v.added_at, t(2));
                if !queued_once {
                    queued_once = true;
                    return Some(2);
                }
                retried_at = Some(v.process_at);
                return None;
            }
            order.push(v.value.to_string());
            None
        };
        // "second" (attempted at 5 ms) asks to wait 2 ms: "third" goes first, and the pass
        // stops at a head that is not due yet.
        let reached = try_all(&mut q, t(4), &mut f);
        assert_eq!(reached, t(7));
        try_all(&mut q, t(8), &mut f);
        assert_eq!(order, ["first", "third"]);
        assert_eq!(count, 4);
        assert_eq!(retried_at, Some(t(8)));
    }

    #[test]
    fn test_try_removing_while_try_is_not_retried() {
        let mut q = always();
        three(&mut q);
        let mut order = Vec::new();
        let mut count = 0;
        let mut now = t(10);
        while let Some(v) = q.pop_due(now) {
            now += std::time::Duration::from_millis(1);
            count += 1;
            if &*v.value == "second" {
                // Removed while being processed, then the processing asks for a retry.
                q.remove("second");
                assert!(!q.retry_at(&v.value, t(11)));
                continue;
            }
            order.push(v.value.to_string());
        }
        assert_eq!(order, ["first", "third"]);
        assert_eq!(count, 3);
        assert!(q.pop_due(t(100)).is_none());
    }

    #[test]
    fn test_clear() {
        let mut q = always();
        three(&mut q);
        q.clear();
        assert!(q.is_empty());
        assert!(!q.contains("first"));
    }

    #[test]
    fn test_swap_limiter() {
        let mut q = always();
        let fast = Rate::per_second(1_000_000);
        assert_eq!(q.rate(), fast);
        q.swap_limiter(Rate::NEVER, t(0));
        assert_eq!(q.rate(), Rate::NEVER);
        let created = Rate::from_f64(5.5).unwrap();
        q.swap_limiter(created, t(0));
        assert_eq!(q.rate(), created);
        // From "never" (no token) the new bucket starts drained: the first token comes after
        // 1/5.5 s, not at once.
        q.add(&n("a"), &n("1"), t(0));
        assert!(q.pop_due(t(0)).is_none());
        assert!(q.pop_due(t(182)).is_some());
    }

    #[test]
    fn test_swap_limiter_to_the_same_rate_keeps_the_bucket() {
        let rate = Rate::from_f64(0.1).unwrap();
        let mut q = RateLimitedTimedQueue::new(rate, t(0));
        q.add(&n("a"), &n("1"), t(0));
        q.add(&n("b"), &n("2"), t(0));
        assert!(q.pop_due(t(0)).is_some());
        q.swap_limiter(rate, t(1));
        // Same bucket: still empty, next token 10 s after the first.
        assert!(q.pop_due(t(9_999)).is_none());
        assert!(q.pop_due(t(10_000)).is_some());
    }

    #[test]
    fn test_add_after_try_needs_explicit_remove() {
        let mut q = always();
        three(&mut q);
        q.remove("second");
        let mut done = Vec::new();
        try_all(&mut q, t(10), |v| {
            done.push(v.value.to_string());
            None
        });
        assert_eq!(done, ["first", "third"]);
        assert!(!q.add(&n("first"), &n("11111"), t(11)));
        try_all(&mut q, t(20), |v| {
            panic!("{} processed twice without Remove", v.value)
        });
        assert!(q.remove("first"));
        assert!(q.add(&n("first"), &n("11111"), t(21)));
    }

    #[test]
    fn a_token_is_taken_even_when_the_head_is_not_due() {
        let mut q = RateLimitedTimedQueue::new(Rate::from_f64(0.1).unwrap(), t(0));
        q.add(&n("a"), &n("1"), t(0));
        q.pop_due(t(0)).unwrap();
        q.retry_at(&n("a"), t(10_050));
        // A token is there at 10 s, the head is due at 10.05 s: the token is spent for nothing.
        assert!(q.pop_due(t(10_000)).is_none());
        assert!(q.pop_due(t(10_050)).is_none());
        assert!(q.pop_due(t(20_000)).is_some());
    }
}
