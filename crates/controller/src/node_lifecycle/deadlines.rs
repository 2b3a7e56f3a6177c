//! The node lifecycle's timers, owned here: one heap for the passes, retries and the brake's
//! release ([`Timer`]), and a FIFO lane per grace for the nodes' grace deadlines (a renewal
//! appends to its lane, no heap move). The two are one queue to the rest of the machine: a
//! deadline is numbered when it is armed, whichever holds it, and [`Deadlines::pop_due`] gives
//! them back in the order one heap holding both would (deadline, then when it was armed).

use std::time::Duration;

use crate::model::Name;
use crate::time::{Armed, DeadlineLanes, Time, TimerHeap};

/// What the lifecycle waits for.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) enum Timer {
    /// The periodic full pass.
    MonitorPass,
    /// The zone queues' pass (NoExecute tainting, or legacy pod eviction).
    EvictionPass,
    /// `probe_time + grace` of a node, when it cannot join its lane in `graces` (see
    /// `arm_grace`).
    NodeGrace(Name),
    /// A failed live Lease read, tried again.
    LeaseReadRetry(Name),
    /// A failed status write (not a conflict), tried again.
    StatusRetry(Name),
    /// A taint write that met a conflict, tried again after upstream's backoff.
    TaintRetry(Name),
    /// An engaged brake's count has been within its limit: it releases after the cooldown.
    BrakeRelease,
}

#[derive(Debug, Default)]
pub(super) struct Deadlines {
    timers: TimerHeap<Timer>,
    graces: DeadlineLanes<Name>,
}

/// Where a node's grace deadline is armed (kept in its entry).
#[derive(Debug, Default)]
pub(super) struct GraceArming {
    /// The deadline armed (`probe_time + grace`), in its lane or in the heap.
    pub(super) due: Option<Time>,
    /// Its place in its lane, if it is kept there.
    pub(super) armed: Armed,
    /// The deadline is a `Timer::NodeGrace` in the heap instead.
    pub(super) in_heap: bool,
}

impl Deadlines {
    pub(super) fn schedule(&mut self, timer: Timer, at: Time) {
        self.timers.schedule(timer, at);
    }

    pub(super) fn cancel(&mut self, timer: &Timer) {
        self.timers.cancel(timer);
    }

    pub(super) fn deadline(&self, timer: &Timer) -> Option<Time> {
        self.timers.deadline(timer)
    }

    pub(super) fn contains(&self, timer: &Timer) -> bool {
        self.timers.contains(timer)
    }

    /// The earliest deadline of the heap and the lanes.
    pub(super) fn next_deadline(&self) -> Option<Time> {
        let graces = self.graces.head().map(|(at, _)| at);
        [self.timers.next_deadline(), graces]
            .into_iter()
            .flatten()
            .min()
    }

    /// The heap's earliest deadline alone (the SIGUSR1 dump).
    pub(super) fn next_timer(&self) -> Option<Time> {
        self.timers.next_deadline()
    }

    /// The next timer due at `now`, from the heap or the lanes, in the order one heap holding
    /// both would give. A grace deadline comes out as `Timer::NodeGrace`; the caller marks the
    /// node's arming as fired.
    pub(super) fn pop_due(&mut self, now: Time) -> Option<Timer> {
        let lane = self.graces.head().filter(|(at, _)| *at <= now);
        let heap = self.timers.head().filter(|(at, _)| *at <= now);
        let from_lane = match (lane, heap) {
            (None, None) => return None,
            (Some(l), Some(h)) => l < h,
            (lane, _) => lane.is_some(),
        };
        if from_lane {
            Some(Timer::NodeGrace(self.graces.pop_head()?.0))
        } else {
            Some(self.timers.pop_due(now)?.0)
        }
    }

    /// Arms `name`'s grace deadline at `at` (nothing when it is not after `now`), in its lane
    /// or, when it cannot join one, in the heap.
    pub(super) fn arm_grace(
        &mut self,
        name: &Name,
        grace: Duration,
        at: Time,
        arming: &mut GraceArming,
        now: Time,
    ) {
        // The number is taken whether the deadline goes to its lane or to the heap, so that
        // deadlines fire in the order they were armed, as from one heap.
        let seq = self.timers.take_seq();
        let in_lane = at > now && self.graces.push(grace, at, seq, name, &mut arming.armed);
        if !in_lane {
            self.graces.disarm(&arming.armed);
        }
        let in_heap = at > now && !in_lane;
        if in_heap {
            self.timers.schedule(Timer::NodeGrace(name.clone()), at);
        } else if arming.in_heap {
            self.timers.cancel(&Timer::NodeGrace(name.clone()));
        }
        arming.in_heap = in_heap;
        arming.due = (at > now).then_some(at);
    }

    /// The node is forgotten: its grace deadline and its retries go.
    pub(super) fn forget(&mut self, name: &Name, arming: &mut GraceArming) {
        self.graces.release(&mut arming.armed);
        if arming.in_heap {
            self.timers.cancel(&Timer::NodeGrace(name.clone()));
        }
        self.timers.cancel(&Timer::LeaseReadRetry(name.clone()));
        self.timers.cancel(&Timer::StatusRetry(name.clone()));
        self.timers.cancel(&Timer::TaintRetry(name.clone()));
    }
}
