//! Per-pod eviction deadlines: upstream's `TimedWorkerQueue`, without goroutines.
//!
//! One entry per pod key, as upstream's map: `Scheduled` waits for its deadline, `Running` has
//! fired and is being executed by the shell (possibly waiting in backoff for its next attempt).
//! Adding work for a key that has any entry is a no-op; cancelling only stops a `Scheduled` entry
//! (upstream's `CancelWork` returns true only for a pending timer: a running eviction cannot be
//! called back). Both kinds of deadline share one indexed timer heap keyed by the pod.

use std::collections::HashMap;

use crate::actions::ActionId;
use crate::model::PodKey;
use crate::time::Time;
use crate::time::timer_heap::TimerHeap;

#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Work {
    /// Waiting to fire at `fire_at`; `created_at` is when this machine scheduled it (kept when
    /// the pod is re-examined later: lengthening a toleration does not postpone the eviction),
    /// `counted_from` when the countdown started (its taint's `timeAdded`, or `created_at`).
    Scheduled {
        created_at: Time,
        counted_from: Time,
        fire_at: Time,
    },
    /// Fired at `fire_at`. `in_flight` is the attempt the shell is executing; `None` while
    /// waiting in backoff for attempt `attempt + 1`.
    Running {
        fire_at: Time,
        attempt: u32,
        in_flight: Option<ActionId>,
    },
}

/// A deadline that came due.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Due {
    /// A scheduled eviction fires. `fire_at` is when it came due for this machine: its
    /// deadline, or when it was scheduled if that deadline had passed already (a restart);
    /// `counted_from` is when its countdown started.
    Fire { fire_at: Time, counted_from: Time },
    /// A failed attempt's backoff is over: try again.
    Retry,
}

#[derive(Debug, Default)]
pub(crate) struct TimedEvictions {
    work: HashMap<PodKey, Work>,
    timers: TimerHeap<PodKey>,
    scheduled: usize,
}

impl TimedEvictions {
    /// `AddWork`: schedules `key` to fire at `fire_at` unless it already has an entry, its
    /// countdown started at `created_at`.
    pub(crate) fn add(&mut self, key: PodKey, created_at: Time, fire_at: Time) -> bool {
        self.add_counted(key, created_at, created_at, fire_at)
    }

    /// `add` of a countdown that started at `counted_from`, maybe before `created_at`. A
    /// deadline at or before now fires on the next `pop_due` (upstream runs it at once).
    pub(crate) fn add_counted(
        &mut self,
        key: PodKey,
        created_at: Time,
        counted_from: Time,
        fire_at: Time,
    ) -> bool {
        if self.work.contains_key(&key) {
            return false;
        }
        self.timers.schedule(key.clone(), fire_at);
        self.work.insert(
            key,
            Work::Scheduled {
                created_at,
                counted_from,
                fire_at,
            },
        );
        self.scheduled += 1;
        true
    }

    /// Moves a `Scheduled` entry to a new countdown, keeping nothing of the old one.
    pub(crate) fn reschedule(
        &mut self,
        key: &PodKey,
        created_at: Time,
        counted_from: Time,
        fire_at: Time,
    ) {
        if let Some(w @ Work::Scheduled { .. }) = self.work.get_mut(key) {
            *w = Work::Scheduled {
                created_at,
                counted_from,
                fire_at,
            };
            self.timers.schedule(key.clone(), fire_at);
        }
    }

    /// `CancelWork`: true only when a pending deadline was stopped.
    pub(crate) fn cancel(&mut self, key: &PodKey) -> bool {
        match self.work.get(key) {
            Some(Work::Scheduled { .. }) => {
                self.work.remove(key);
                self.timers.cancel(key);
                self.scheduled -= 1;
                true
            }
            _ => false,
        }
    }

    /// Drops every trace of `key` (the pod is gone or already being deleted): a scheduled
    /// deadline, a running eviction and its retries. True when a pending deadline was stopped.
    pub(crate) fn forget(&mut self, key: &PodKey) -> bool {
        if self.cancel(key) {
            return true;
        }
        if self.work.remove(key).is_some() {
            self.timers.cancel(key);
        }
        false
    }

    pub(crate) fn get(&self, key: &PodKey) -> Option<&Work> {
        self.work.get(key)
    }

    /// The earliest due deadline, if any.
    pub(crate) fn pop_due(&mut self, now: Time) -> Option<(PodKey, Due)> {
        let (key, _) = self.timers.pop_due(now)?;
        self.take_due(key)
    }

    /// `pop_due`, except that a due key `held` says must wait is parked instead: its timer
    /// goes, its work stays (deadline and all) until [`TimedEvictions::unpark`].
    pub(crate) fn pop_due_unless(
        &mut self,
        now: Time,
        held: impl Fn(&PodKey) -> bool,
        parked: &mut Vec<PodKey>,
    ) -> Option<(PodKey, Due)> {
        loop {
            let (key, _) = self.timers.pop_due(now)?;
            if held(&key) && self.work.contains_key(&key) {
                parked.push(key);
                continue;
            }
            return self.take_due(key);
        }
    }

    /// Re-arms a parked key at its deadline (a deadline passed meanwhile fires on the next
    /// `pop_due`; a failed attempt waiting for its retry is retried now).
    pub(crate) fn unpark(&mut self, key: &PodKey, now: Time) {
        match self.work.get(key) {
            Some(Work::Scheduled {
                created_at,
                fire_at,
                ..
            }) => {
                let at = (*fire_at).max(*created_at);
                self.timers.schedule(key.clone(), at);
            }
            Some(Work::Running {
                in_flight: None, ..
            }) => {
                self.timers.schedule(key.clone(), now);
            }
            _ => {}
        }
    }

    fn take_due(&mut self, key: PodKey) -> Option<(PodKey, Due)> {
        match self.work.get(&key) {
            Some(Work::Scheduled {
                created_at,
                counted_from,
                fire_at,
            }) => {
                let due = Due::Fire {
                    fire_at: (*fire_at).max(*created_at),
                    counted_from: *counted_from,
                };
                self.work.remove(&key);
                self.scheduled -= 1;
                Some((key, due))
            }
            Some(Work::Running { .. }) => Some((key, Due::Retry)),
            // Every timer has an entry (they are added and removed together).
            None => None,
        }
    }

    /// Marks `key` as executing attempt `attempt` of an eviction that fired at `fire_at`.
    pub(crate) fn start_attempt(&mut self, key: PodKey, fire_at: Time, attempt: u32, id: ActionId) {
        self.timers.cancel(&key);
        if let Some(Work::Scheduled { .. }) = self.work.get(&key) {
            self.scheduled -= 1;
        }
        self.work.insert(
            key,
            Work::Running {
                fire_at,
                attempt,
                in_flight: Some(id),
            },
        );
    }

    /// Parks a running eviction whose attempt failed until `at`.
    pub(crate) fn retry_at(&mut self, key: &PodKey, at: Time) {
        if let Some(Work::Running { in_flight, .. }) = self.work.get_mut(key) {
            *in_flight = None;
            self.timers.schedule(key.clone(), at);
        }
    }

    /// The running eviction of `key` is over (done or given up).
    pub(crate) fn finish(&mut self, key: &PodKey) {
        if let Some(Work::Running { .. }) = self.work.get(key) {
            self.work.remove(key);
            self.timers.cancel(key);
        }
    }

    pub(crate) fn next_deadline(&self) -> Option<Time> {
        self.timers.next_deadline()
    }

    /// Pods waiting for their deadline.
    pub(crate) fn scheduled_len(&self) -> usize {
        self.scheduled
    }

    /// Evictions fired and not finished (in flight or in backoff).
    pub(crate) fn running_len(&self) -> usize {
        self.work.len() - self.scheduled
    }

    /// Every pending deadline (scheduled and retries), unordered.
    pub(crate) fn deadlines(&self) -> impl Iterator<Item = (&PodKey, Time)> {
        self.timers.iter()
    }
}

#[cfg(test)]
mod tests {
    //! Upstream's `timed_workers_test.go`, on a virtual clock: "executed" = came due.
    use super::*;
    use std::time::Duration;

    use crate::model::Name;

    fn key(s: &str) -> PodKey {
        PodKey {
            namespace: Name::from(s),
            name: Name::from(s),
        }
    }

    fn now() -> Time {
        Time::from_unix_millis(1_700_000_000_000)
    }

    fn run_due(q: &mut TimedEvictions, at: Time) -> Vec<PodKey> {
        let mut fired = Vec::new();
        while let Some((k, due)) = q.pop_due(at) {
            assert!(matches!(due, Due::Fire { .. }));
            fired.push(k);
        }
        fired
    }

    fn add_five_twice(q: &mut TimedEvictions, created: Time, fire: Time) {
        for round in 0..2 {
            for i in 1..=5 {
                let added = q.add(key(&i.to_string()), created, fire);
                assert_eq!(added, round == 0, "duplicates are no-ops");
            }
        }
    }

    #[test]
    fn test_execute() {
        let mut q = TimedEvictions::default();
        add_five_twice(&mut q, now(), now());
        assert_eq!(run_due(&mut q, now()).len(), 5);
        assert_eq!(q.scheduled_len(), 0);
    }

    #[test]
    fn test_execute_delayed() {
        let mut q = TimedEvictions::default();
        let then = now() + Duration::from_secs(10);
        add_five_twice(&mut q, now(), then);
        assert!(run_due(&mut q, now() + Duration::from_millis(9_999)).is_empty());
        assert_eq!(q.next_deadline(), Some(then));
        assert_eq!(run_due(&mut q, now() + Duration::from_secs(11)).len(), 5);
    }

    #[test]
    fn test_cancel() {
        let mut q = TimedEvictions::default();
        add_five_twice(&mut q, now(), now() + Duration::from_secs(10));
        assert!(q.cancel(&key("2")));
        assert!(q.cancel(&key("4")));
        assert!(
            !q.cancel(&key("4")),
            "a second cancel finds nothing pending"
        );
        let fired = run_due(&mut q, now() + Duration::from_secs(11));
        assert_eq!(fired, vec![key("1"), key("3"), key("5")]);
    }

    /// A countdown that ran out before it was scheduled (a restart finding an old taint) fires
    /// at once, as come due when it was scheduled; its start is kept for the evidence.
    #[test]
    fn a_countdown_over_before_it_was_scheduled_fires_at_once() {
        let mut q = TimedEvictions::default();
        let later = now() + Duration::from_secs(30);
        q.add_counted(key("p"), later, now(), now() + Duration::from_secs(20));
        assert_eq!(
            q.pop_due(later),
            Some((
                key("p"),
                Due::Fire {
                    fire_at: later,
                    counted_from: now()
                }
            ))
        );
    }

    #[test]
    fn test_cancel_and_readd() {
        let mut q = TimedEvictions::default();
        let then = now() + Duration::from_secs(10);
        add_five_twice(&mut q, now(), then);
        q.cancel(&key("2"));
        q.cancel(&key("4"));
        assert!(q.add(key("2"), now(), then));
        assert_eq!(run_due(&mut q, now() + Duration::from_secs(11)).len(), 4);
    }

    /// Upstream's `TestRunningWorkerCompletionDoesNotRemoveReplacement` is about a goroutine
    /// race we do not have; what is left of it: a running eviction cannot be cancelled or
    /// replaced, and finishing it leaves the key free for new work.
    #[test]
    fn running_eviction_is_not_cancelled_or_replaced() {
        let mut q = TimedEvictions::default();
        q.add(key("p"), now(), now());
        let (k, due) = q.pop_due(now()).expect("due");
        assert_eq!(
            due,
            Due::Fire {
                fire_at: now(),
                counted_from: now()
            }
        );
        q.start_attempt(k.clone(), now(), 1, ActionId(1));
        assert!(!q.cancel(&k));
        assert!(!q.add(k.clone(), now(), now() + Duration::from_secs(10)));
        assert_eq!(q.running_len(), 1);
        q.finish(&k);
        assert!(q.add(k.clone(), now(), now() + Duration::from_secs(10)));
        assert!(q.cancel(&k));
        assert!(q.get(&k).is_none());
    }

    #[test]
    fn retry_deadline_comes_due_as_retry_and_forget_drops_it() {
        let mut q = TimedEvictions::default();
        q.add(key("p"), now(), now());
        let (k, _) = q.pop_due(now()).expect("due");
        q.start_attempt(k.clone(), now(), 1, ActionId(1));
        q.retry_at(&k, now() + Duration::from_millis(100));
        assert_eq!(q.next_deadline(), Some(now() + Duration::from_millis(100)));
        assert_eq!(
            q.pop_due(now() + Duration::from_millis(100)),
            Some((k.clone(), Due::Retry))
        );
        q.retry_at(&k, now() + Duration::from_millis(300));
        assert!(
            !q.forget(&k),
            "a running eviction is not a pending deadline"
        );
        assert_eq!(q.next_deadline(), None);
        assert!(q.get(&k).is_none());
    }
}
