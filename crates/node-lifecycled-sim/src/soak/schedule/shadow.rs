//! The restart episode (`--shadow`): a daemon stopped with SIGTERM (it saves its shadow
//! history on the way out) and started again, the leader two times in three. SIGKILLs
//! (`kill-leader`, `kill-leader-in-outage`) stay: a killed daemon may lose what it classed
//! since its last save, a stopped one nothing.

use std::time::Duration;

use super::{Fault, Planner};

impl Planner {
    pub(super) fn restart_episode(&mut self, at: Duration) {
        let leader = !self.rng.chance(33);
        let after = self.millis(500, 3_000);
        self.push(at, Fault::RestartDaemon { leader, after }, "daemon-restart");
    }
}
