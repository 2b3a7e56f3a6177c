//! Whether the caches may be acted on: the rule "no cluster mutation on a guess" applied to the
//! informers, as the live Lease read applies it to the Unknown verdict.
//!
//! After a watch fails, the informer backs off and reconnects (or relists); until then the
//! store is a picture of the past. A zone whose node came back looks fully disrupted and is
//! tainted at the full rate; a taint removed meanwhile still runs its pods' countdowns (SOAK.md
//! finding 2). So while any informer is not watching, and for `CACHE_SETTLE` after all of them
//! are watching again (the backlog since the last version is delivered then), new zone NoExecute
//! taints and pod deletions are held. Nothing is dropped: queued nodes and countdowns keep
//! their deadlines and are acted on when the caches are current again. Untainting, NoSchedule
//! reconciliation and the Unknown verdict (guarded by its live Lease read) are not held: they
//! make the cluster safer, or read the evidence live.
//!
//! Until the shell says otherwise the caches count as current (a machine fed by hand, as the
//! controller tests and the simulator's scenarios do, has nothing to wait for).

use std::time::Duration;

use crate::time::Time;

/// After every informer is watching again, how long before the caches count as current: the
/// events since the last version seen arrive right behind the watch's response head; this
/// leaves room for a busy machine to read them.
pub const CACHE_SETTLE: Duration = Duration::from_millis(500);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CacheCurrency {
    /// Since when every informer has been watching; `None` while one is not.
    watching_since: Option<Time>,
}

impl Default for CacheCurrency {
    fn default() -> Self {
        CacheCurrency {
            watching_since: Some(Time::ZERO),
        }
    }
}

impl CacheCurrency {
    /// The shell's report (`Input::InformersWatching`); a repeated `true` keeps the first time.
    pub fn watching(&mut self, all: bool, now: Time) {
        match (all, self.watching_since) {
            (true, None) => self.watching_since = Some(now),
            (true, Some(_)) => {}
            (false, _) => self.watching_since = None,
        }
    }

    /// The caches may be acted on at `now`.
    pub fn is_current(&self, now: Time) -> bool {
        self.current_at().is_some_and(|at| now >= at)
    }

    /// When the caches become current if every informer keeps watching; `None` while one is
    /// not watching (an input, not a time, ends that wait).
    pub fn current_at(&self) -> Option<Time> {
        self.watching_since.map(|since| since + CACHE_SETTLE)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_caches_are_current_a_settle_after_every_informer_watches_again() {
        let t0 = Time::ZERO + Duration::from_secs(100);
        let mut c = CacheCurrency::default();
        assert!(c.is_current(t0), "current until told otherwise");
        c.watching(false, t0);
        assert!(!c.is_current(t0 + Duration::from_secs(60)));
        assert_eq!(c.current_at(), None);
        c.watching(true, t0 + Duration::from_secs(2));
        c.watching(
            true,
            t0 + Duration::from_secs(2) + Duration::from_millis(300),
        );
        let at = t0 + Duration::from_secs(2) + CACHE_SETTLE;
        assert_eq!(c.current_at(), Some(at));
        let just_before = t0 + Duration::from_secs(2) + (CACHE_SETTLE - Duration::from_millis(1));
        assert!(!c.is_current(just_before));
        assert!(c.is_current(at));
    }
}
