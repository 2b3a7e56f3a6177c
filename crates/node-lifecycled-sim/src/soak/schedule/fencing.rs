//! The fence episode (`--fencing`): a node the daemons may fence goes silent, and a fleet pause
//! of fencing lands around its first fence step (before it, while it runs, or between the
//! steps of an escalation). No fence step may start while the pause holds; the fence goes on
//! once it ends (resumed by hand, or run out).

use std::time::Duration;

use super::{Fault, Planner};

impl Planner {
    pub(super) fn fence_episode(&mut self, at: Duration, max_down: usize) {
        if at < self.pause_busy_until {
            return;
        }
        let down_now = self.busy_until.iter().filter(|&&b| b > at).count();
        let free: Vec<usize> = self
            .fence_nodes
            .iter()
            .copied()
            .filter(|&i| self.busy_until[i] <= at)
            .collect();
        if free.is_empty() || down_now >= max_down {
            return;
        }
        let node = free[self.rng.below(free.len() as u64) as usize];
        let down = self.millis(20_000, 35_000);
        self.outage(&[node], at, 0, down, "fence-escalation-pause");
        // Step 1 starts about grace + after past the stop (the verdict comes up to one Lease
        // renew interval earlier than the grace); the pause lands from a second before that
        // to 1.5 s after: before step 1, or while it runs (it fails after 0.5 s, or times out
        // at 5 s: a pause that lands early in it must hold step 2).
        let first_step =
            (at + self.grace + self.fence_after).saturating_sub(Duration::from_secs(1));
        let pause_at = first_step + self.millis(0, 2_500);
        let length = self.millis(3_000, 10_000);
        if self.rng.chance(50) {
            // Resumed by hand before its end.
            self.push(
                pause_at,
                Fault::PauseFencing(length + Duration::from_secs(30)),
                "",
            );
            self.push(pause_at + length, Fault::ResumeFencing, "");
        } else {
            self.push(pause_at, Fault::PauseFencing(length), "");
        }
        self.pause_busy_until = pause_at + length + Duration::from_secs(1);
    }
}
