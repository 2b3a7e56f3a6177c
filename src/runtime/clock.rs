//! The daemon's clock: wall time read once at start-up, advanced by the monotonic clock.
//!
//! `Time` values must never run backwards while the daemon runs (deadlines in the timer heap
//! are `Time`s), yet they must convert to the RFC 3339 stamps the API server wants. Reading the
//! wall clock once and adding `Instant` elapsed gives both: NTP steps after start-up do not move
//! our deadlines. The cost is that stamps drift with the monotonic clock over very long runs,
//! which is the same trade the kubelet-facing heartbeat comparisons already make (we compare
//! our own observations, never the kubelet's stamps: docs/upstream.md, "Node health").

use std::time::{Duration, Instant, SystemTime};

use crate::time::{Time, duration_millis};

#[derive(Clone, Debug)]
pub struct Clock {
    wall_at_start: Time,
    started: Instant,
}

impl Clock {
    pub fn start() -> Clock {
        let wall = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map(duration_millis)
            // A clock before 1970 is a broken host; start at the epoch rather than refuse to run.
            .unwrap_or(0);
        Clock {
            wall_at_start: Time::from_unix_millis(wall),
            started: Instant::now(),
        }
    }

    /// Now, in whole milliseconds (rounded down, so a deadline computed from it is never early).
    pub fn now(&self) -> Time {
        self.wall_at_start.saturating_add(self.started.elapsed())
    }

    pub(crate) fn started_at(&self) -> Time {
        self.wall_at_start
    }

    pub(crate) fn uptime(&self) -> Duration {
        self.started.elapsed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn now_starts_at_the_wall_clock_and_never_goes_back() {
        let clock = Clock::start();
        let wall = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap()
            .as_millis() as u64;
        let start = clock.started_at().as_unix_millis();
        assert!(wall.abs_diff(start) < 1_000, "wall {wall} start {start}");
        let mut last = clock.now();
        assert!(last >= clock.started_at());
        for _ in 0..1000 {
            let t = clock.now();
            assert!(t >= last);
            last = t;
        }
    }
}
