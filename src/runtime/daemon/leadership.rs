//! Acting or not: leadership gained and lost, the leader timer, and what the dump says of it.

use super::*;

/// Why a leader stops acting when its renewals failed (an API server outage, most likely).
const NOT_RENEWED: &str = "leader lease not renewed in time";

impl Daemon {
    /// Starts deciding and writing if we lead and the caches are complete.
    pub(super) fn maybe_act(&mut self, now: Time) {
        if self.acting || !self.all_synced() || !self.leader.is_leader(now) {
            return;
        }
        self.acting = true;
        self.inherit_clocks();
        info!(
            "acting{}: deciding on {} nodes",
            if self.leader.elector().is_enabled() {
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
        if !self.acting {
            return;
        }
        self.acting = false;
        if why == NOT_RENEWED {
            self.lost_to_outage = true;
        }
        self.fences_to_start.clear();
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

    // ---- timers ---------------------------------------------------------------------------

    pub(super) fn on_leader_timer(&mut self, lp: &mut Lp) {
        let transitions = self.leader.step();
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
        if self.acting && !self.leader.is_leader(now) {
            self.stop_acting(now, NOT_RENEWED);
        }
        if self.acting {
            self.publish_clocks(now);
        }
        self.refresh_status();
    }

    /// Hands the controllers the clocks the previous leader left on the Lease (read with it at
    /// acquisition), and whether this instance lost the lease to an outage (a cooldown).
    fn inherit_clocks(&mut self) {
        use crate::leader::clocks::{CLOCKS_ANNOTATION, Clocks, decode};
        let mut clocks = match self.leader.lock().annotation(CLOCKS_ANNOTATION).map(decode) {
            None => Clocks::default(),
            Some(Ok(clocks)) => clocks,
            Some(Err(why)) => {
                warn!(
                    "leader lease {}: annotation {CLOCKS_ANNOTATION} cannot be read ({why}): \
                     holds, cooldowns and brakes start over",
                    self.leader.lock().describe()
                );
                Clocks::default()
            }
        };
        clocks.after_outage = std::mem::take(&mut self.lost_to_outage);
        if !clocks.is_empty() {
            info!(
                "honouring the previous leader's clocks: {} hold start(s), {} cooldown(s), \
                 {} brake(s){}",
                clocks.full_since.len(),
                clocks.cooldown_until.len(),
                clocks.brakes.len(),
                if clocks.after_outage {
                    "; a disruption cooldown after the outage that cost the lease"
                } else {
                    ""
                }
            );
        }
        self.controllers.inherit_clocks(clocks);
    }

    /// Puts the controllers' clocks in the Lease metadata the next renewal writes, when they
    /// changed (`leader/clocks.rs`).
    fn publish_clocks(&mut self, now: Time) {
        use crate::leader::clocks::{CLOCKS_ANNOTATION, encode};
        let clocks = self.controllers.clocks(now);
        let current = self.leader.lock().annotation(CLOCKS_ANNOTATION);
        if clocks.is_empty() && current.is_none() {
            return;
        }
        let value = encode(&clocks);
        if current != Some(value.as_str()) {
            self.leader
                .lock_mut()
                .set_annotation(CLOCKS_ANNOTATION, &value);
        }
    }

    /// Feeds the controllers the fleet pause when the Lease's annotation changed (read by every
    /// instance: a leader's renewals and a follower's polls both bring it).
    fn sync_pause(&mut self, now: Time) {
        use crate::leader::pause::{PAUSE_ANNOTATION, interpret};
        let raw = self.leader.lock().annotation(PAUSE_ANNOTATION);
        if raw == self.pause_seen.as_deref() {
            return;
        }
        self.pause_seen = raw.map(str::to_string);
        let pause = match interpret(raw) {
            None => None,
            Some(Ok(p)) => Some(p),
            Some(Err((held, why))) => {
                warn!(
                    "leader lease {}: annotation {PAUSE_ANNOTATION} cannot be read ({why}): \
                     everything is paused until its next valid write (node-lifecycled pause \
                     or resume)",
                    self.leader.lock().describe()
                );
                Some(held)
            }
        };
        self.feed(Input::FleetPause(pause), now);
    }

    pub(super) fn leader_snapshot(&self, now: Time) -> LeaderSnapshot {
        let stats = self.leader.stats(now);
        if !stats.enabled {
            return LeaderSnapshot::disabled(stats.identity);
        }
        LeaderSnapshot {
            enabled: true,
            identity: stats.identity,
            holder: stats.holder,
            is_leader: stats.is_leader,
            renew_age: stats.last_renew_age.filter(|_| stats.is_leader),
        }
    }
}
