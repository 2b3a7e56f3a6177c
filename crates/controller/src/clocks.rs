//! Clocks that outlive a leader: the hold's start per domain (`hold_max` counts from there),
//! the disruption cooldown's end per zone, and each engaged brake's start and release window.
//! The leader keeps them on its Lease (`leader/clocks.rs`, an annotation, as the fleet pause);
//! the next leader reads them at its takeover and honours them (`Controllers::inherit_clocks`):
//! repeated failovers neither hold a site forever nor hold it again mid-drain, a cooldown
//! under way goes on, and a brake in its release window is still engaged.

use std::collections::BTreeMap;

use crate::time::Time;

/// What the next leader honours (times on the writer's clock, wall clocks of one cluster).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Clocks {
    /// Per domain (zone) key: since when it has been fully disrupted.
    pub full_since: BTreeMap<String, Time>,
    /// Per domain (zone) key: when its disruption cooldown ends.
    pub cooldown_until: BTreeMap<String, Time>,
    /// Per brake scope (`fleet`, or a pool's name): since when it has been engaged, and since
    /// when its count has been within the limit (the release window), if it has.
    pub brakes: BTreeMap<String, (Time, Option<Time>)>,
    /// Not written: set by the shell when this instance acquires the lease after losing it to
    /// an API server outage. Every zone starts a `disruption_cooldown` at the takeover.
    pub after_outage: bool,
}

impl Clocks {
    /// Nothing to honour.
    pub fn is_empty(&self) -> bool {
        self.full_since.is_empty()
            && self.cooldown_until.is_empty()
            && self.brakes.is_empty()
            && !self.after_outage
    }
}
