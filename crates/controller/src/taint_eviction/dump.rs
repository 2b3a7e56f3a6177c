//! The taint eviction part of the SIGUSR1 state dump.

use std::fmt;
use std::time::Duration;

use super::TaintEviction;
use super::metrics::GaveUp;
use super::timed_evictions::Work;
use crate::model::PodKey;
use crate::time::Time;

/// How many upcoming evictions the dump lists.
pub(crate) const DUMP_NEXT: usize = 20;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PendingEviction {
    pub pod: PodKey,
    pub deadline: Time,
    /// Time left at dump time (zero when overdue).
    pub remaining: Duration,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EvictionDump {
    /// Pods waiting for their eviction deadline.
    pub pending: usize,
    /// Evictions handed to the shell or waiting to retry.
    pub running: usize,
    /// The next [`DUMP_NEXT`] pending evictions, soonest first.
    pub next: Vec<PendingEviction>,
    pub pod_deletions_total: u64,
    pub gave_up_total: u64,
    pub recent_gave_up: Vec<GaveUp>,
}

/// Where a pod's eviction stands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PodEviction {
    None,
    /// Deleted at `fire_at` unless the taint goes; the countdown started at `since`.
    Scheduled {
        since: Time,
        fire_at: Time,
    },
    /// Fired at `fire_at`: being deleted, attempt `attempt`.
    Running {
        fire_at: Time,
        attempt: u32,
    },
}

impl TaintEviction {
    /// Where the pod's eviction stands (for `explain`).
    pub(crate) fn eviction_of(&self, pod: &PodKey) -> PodEviction {
        match self.evictions.get(pod) {
            None => PodEviction::None,
            Some(Work::Scheduled {
                counted_from,
                fire_at,
                ..
            }) => PodEviction::Scheduled {
                since: *counted_from,
                fire_at: *fire_at,
            },
            Some(Work::Running {
                fire_at, attempt, ..
            }) => PodEviction::Running {
                fire_at: *fire_at,
                attempt: *attempt,
            },
        }
    }

    /// Cost O(pending): only on a signal, never on the hot path.
    pub(crate) fn dump(&self, now: Time) -> EvictionDump {
        let mut next: Vec<(Time, &PodKey)> = self
            .evictions
            .deadlines()
            .filter(|(key, _)| matches!(self.evictions.get(key), Some(Work::Scheduled { .. })))
            .map(|(key, at)| (at, key))
            .collect();
        if next.len() > DUMP_NEXT {
            next.select_nth_unstable(DUMP_NEXT);
            next.truncate(DUMP_NEXT);
        }
        next.sort_unstable();
        EvictionDump {
            pending: self.evictions.scheduled_len(),
            running: self.evictions.running_len(),
            next: next
                .into_iter()
                .map(|(deadline, pod)| PendingEviction {
                    pod: pod.clone(),
                    deadline,
                    remaining: deadline - now,
                })
                .collect(),
            pod_deletions_total: self.metrics.pod_deletions_total,
            gave_up_total: self.metrics.gave_up_total,
            recent_gave_up: self.metrics.recent_gave_up.clone(),
        }
    }
}

impl fmt::Display for EvictionDump {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "taint eviction: {} pending, {} running, {} deleted, {} given up",
            self.pending, self.running, self.pod_deletions_total, self.gave_up_total
        )?;
        for p in &self.next {
            writeln!(
                f,
                "  evict {} at {} (in {:.3}s)",
                p.pod,
                p.deadline,
                p.remaining.as_secs_f64()
            )?;
        }
        for g in &self.recent_gave_up {
            writeln!(f, "  gave up on {} at {}: {}", g.pod, g.at, g.error)?;
        }
        Ok(())
    }
}
