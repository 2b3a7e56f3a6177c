//! Acting or not: what leadership gained and lost means for the controllers, the executor and
//! the fences, and the leader timer. Owns no state: leadership's is `leadership.rs`.

use log::{info, warn};

use super::leadership::NOT_RENEWED;
use super::{Daemon, Lp};
use crate::controller::{Controllers, Input};
use crate::leader::Transition;
use crate::runtime::settings::controller_settings;
use crate::time::Time;

impl Daemon {
    /// Starts deciding and writing if we lead and the caches are complete.
    pub(super) fn maybe_act(&mut self, now: Time) {
        if self.leadership.acting()
            || !self.informers.all_synced()
            || !self.leadership.is_leader(now)
        {
            return;
        }
        self.leadership.start_acting();
        self.inherit_clocks();
        info!(
            "acting{}: deciding on {} nodes",
            if self.leadership.election_enabled() {
                " as leader"
            } else {
                " (leader election disabled)"
            },
            self.controllers.store().node_count()
        );
        self.feed(Input::InitialSyncDone, now);
    }

    /// We may no longer write: drop what is queued at once, and keep only what a follower has.
    pub(super) fn stop_acting(&mut self, now: Time, why: &str) {
        if !self.leadership.stop_acting(why) {
            return;
        }
        self.fences.clear_queued();
        let abandoned = self.executor.abandon(why);
        let settings = controller_settings(&self.config);
        let old = std::mem::replace(&mut self.controllers, Controllers::new(settings, now));
        self.controllers = old.into_follower(now);
        warn!(
            "stopped acting ({why}): {} queued writes abandoned; standing by as a follower",
            abandoned.len()
        );
        self.refresh_status();
    }

    pub(super) fn on_leader_timer(&mut self, lp: &mut Lp) {
        let transitions = self.leadership.step();
        // The pause first: a takeover honours the pause its acquiring read brought.
        self.sync_pause(lp.now());
        for transition in transitions {
            let now = lp.now();
            match transition {
                Transition::Acquired => self.maybe_act(now),
                Transition::Lost => self.stop_acting(now, "leadership lost"),
                Transition::NewLeader(_) => {}
            }
        }
        let now = lp.now();
        if self.leadership.acting() && !self.leadership.is_leader(now) {
            self.stop_acting(now, NOT_RENEWED);
        }
        if self.leadership.acting() {
            self.publish_clocks(now);
        }
        self.refresh_status();
    }

    /// Hands the controllers the clocks the previous leader left on the Lease.
    fn inherit_clocks(&mut self) {
        let clocks = self.leadership.inherited_clocks();
        self.controllers.inherit_clocks(clocks);
    }

    /// Puts the controllers' clocks on the Lease the next renewal writes, when they changed.
    fn publish_clocks(&mut self, now: Time) {
        let clocks = self.controllers.clocks(now);
        self.leadership.publish_clocks(&clocks);
    }

    /// Feeds the controllers the fleet pause when the Lease's annotation changed.
    fn sync_pause(&mut self, now: Time) {
        if let Some(pause) = self.leadership.pause_changed() {
            self.feed(Input::FleetPause(pause), now);
        }
    }
}
