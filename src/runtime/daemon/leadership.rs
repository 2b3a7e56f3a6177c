//! Leadership: owns the leader elector (its Lease, the clocks and the pause it carries), whether
//! this instance acts, the fleet pause as last read, and whether the lease was lost to an outage.
//! What acting means for the other parts is `acting.rs`.

use log::{info, warn};

use crate::controller::fleet_pause::FleetPause;
use crate::leader::clocks::Clocks;
use crate::leader::{LeaderElection, Transition};
use crate::observe::LeaderSnapshot;
use crate::time::Time;

/// Why a leader stops acting when its renewals failed (an API server outage, most likely).
pub(super) const NOT_RENEWED: &str = "leader lease not renewed in time";

pub(super) struct Leadership {
    elector: LeaderElection,
    /// The controllers got `InitialSyncDone`: they decide and the executor writes. Only while
    /// leading.
    acting: bool,
    /// The fleet pause annotation as last read from the leader Lease.
    pause_seen: Option<String>,
    /// The lease was lost because it could not be renewed (an API server outage): the next
    /// takeover starts a `disruption_cooldown`.
    lost_to_outage: bool,
}

impl Leadership {
    pub(super) fn new(elector: LeaderElection) -> Leadership {
        Leadership {
            elector,
            acting: false,
            pause_seen: None,
            lost_to_outage: false,
        }
    }

    pub(super) fn acting(&self) -> bool {
        self.acting
    }

    /// Whether writes are allowed at `now`.
    pub(super) fn is_leader(&self, now: Time) -> bool {
        self.elector.is_leader(now)
    }

    pub(super) fn election_enabled(&self) -> bool {
        self.elector.elector().is_enabled()
    }

    pub(super) fn next_deadline(&self) -> Option<Time> {
        self.elector.next_deadline()
    }

    /// Renews, retries or polls the Lease as due.
    pub(super) fn step(&mut self) -> Vec<Transition> {
        self.elector.step()
    }

    /// Gives the lease up (at shutdown).
    pub(super) fn release(&mut self) -> Result<(), String> {
        self.elector.release()
    }

    pub(super) fn start_acting(&mut self) {
        self.acting = true;
    }

    /// Stops acting for `why`; false when not acting. A lease not renewed in time is noted for
    /// the next takeover's cooldown.
    pub(super) fn stop_acting(&mut self, why: &str) -> bool {
        if !self.acting {
            return false;
        }
        self.acting = false;
        if why == NOT_RENEWED {
            self.lost_to_outage = true;
        }
        true
    }

    /// Acting stops without a loss of leadership (dry-run switched: the caches are rebuilt).
    pub(super) fn pause_acting(&mut self) {
        self.acting = false;
    }

    /// The clocks the previous leader left on the Lease (read with it at acquisition), and
    /// whether this instance lost the lease to an outage (a cooldown).
    pub(super) fn inherited_clocks(&mut self) -> Clocks {
        use crate::leader::clocks::{CLOCKS_ANNOTATION, decode};
        let mut clocks = match self
            .elector
            .lock()
            .annotation(CLOCKS_ANNOTATION)
            .map(decode)
        {
            None => Clocks::default(),
            Some(Ok(clocks)) => clocks,
            Some(Err(why)) => {
                warn!(
                    "leader lease {}: annotation {CLOCKS_ANNOTATION} cannot be read ({why}): \
                     holds, cooldowns and brakes start over",
                    self.elector.lock().describe()
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
        clocks
    }

    /// Puts the controllers' clocks in the Lease metadata the next renewal writes, when they
    /// changed (`leader/clocks.rs`).
    pub(super) fn publish_clocks(&mut self, clocks: &Clocks) {
        use crate::leader::clocks::{CLOCKS_ANNOTATION, encode};
        let current = self.elector.lock().annotation(CLOCKS_ANNOTATION);
        if clocks.is_empty() && current.is_none() {
            return;
        }
        let value = encode(clocks);
        if current != Some(value.as_str()) {
            self.elector
                .lock_mut()
                .set_annotation(CLOCKS_ANNOTATION, &value);
        }
    }

    /// The fleet pause when the Lease's annotation changed since last read (read by every
    /// instance: a leader's renewals and a follower's polls both bring it); `None` when not.
    pub(super) fn pause_changed(&mut self) -> Option<Option<FleetPause>> {
        use crate::leader::pause::{PAUSE_ANNOTATION, interpret};
        let raw = self.elector.lock().annotation(PAUSE_ANNOTATION);
        if raw == self.pause_seen.as_deref() {
            return None;
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
                    self.elector.lock().describe()
                );
                Some(held)
            }
        };
        Some(pause)
    }

    pub(super) fn snapshot(&self, now: Time) -> LeaderSnapshot {
        let stats = self.elector.stats(now);
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
