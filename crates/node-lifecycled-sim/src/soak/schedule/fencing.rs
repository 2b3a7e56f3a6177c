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
        let down = self.millis(22_000, 35_000);
        self.outage(&[node], at, 0, down, "fence-escalation-pause");
        // Step 1 starts about grace + after + 0.5 s past the stop (the verdict, then `after`,
        // then the live read); the pause lands up to 1.5 s after that, inside step 1 where it
        // hangs into its 5 s timeout (step 2, due when it ends, must wait), or after a quick
        // escalation where step 1 fails at once (the retry must wait). It lasts longer than
        // step 1.
        let first_step = at + self.grace + self.fence_after + Duration::from_millis(500);
        let pause_at = first_step + self.millis(0, 1_500);
        // No fault that stops the daemons around it: `fence-while-paused` judges how soon
        // the daemons honour it.
        self.quiet.push((
            pause_at.saturating_sub(Duration::from_secs(4)),
            pause_at + Duration::from_secs(8),
        ));
        let length = self.millis(6_000, 12_000);
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
