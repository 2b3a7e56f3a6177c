//! Whether the caches may be acted on: the rule "no cluster mutation on a guess" applied to the
//! informers, as the live Lease read applies it to the Unknown verdict.
//!
//! After a watch fails, the informer backs off and reconnects (or relists); until then the
//! store is a picture of the past. A zone whose node came back looks fully disrupted and is
//! tainted at the full rate; a taint removed meanwhile still runs its pods' countdowns (SOAK.md
//! finding 2). So while any informer does not follow the server, and for a settle after all of
//! them do again (the backlog since our version is delivered then), new zone NoExecute taints
//! and pod deletions are held. Nothing is dropped: queued nodes and countdowns keep their
//! deadlines and are acted on when the caches are current again. Untainting, NoSchedule
//! reconciliation and the Unknown verdict (guarded by its live Lease read) are not held: they
//! make the cluster safer, or read the evidence live.
//!
//! **The hold is never later than upstream by more than re-establishing the watch.** Upstream
//! acts on its cache throughout; the allowance here is the reconnect: the backoff (0.5 s ± 20 %
//! after a first failure) and one round trip, or the relist. When an informer follows the
//! server again (`runtime/informer/currency.rs`, `Informer::is_streaming`):
//!
//! - after a **broken connection** (a reset, an API server restart, a refused connect, a
//!   non-200 answer): at its successor's response head, 200 from our resourceVersion, with the
//!   bytes behind it read — the server sends what we missed right behind the head. The
//!   successor is a probe (`timeoutSeconds=1`): if neither its end nor a line arrives within
//!   2 s of the head, the server answers without streaming and the failure counts as silent;
//! - after **silence** (the watch idle timeout; the soak's `watch-freeze`, where new watches
//!   are answered and then sent nothing): at a watch line, a clean end or a full state, never
//!   at a head; the mark is sticky, so a reset during a freeze still waits for a line;
//! - after `410 Gone`: when the relist completes; a watch the server ends at its
//!   `timeoutSeconds` (a rotation) is no failure at all.
//!
//! The settle after the last one is back is that watch's round trip (request sent → head,
//! connect and TLS included), 50–500 ms ([`cache_settle`]): the backlog follows the head by
//! about as long as the server took to answer.
//!
//! Why a broken connection is current again at its successor's head, not at its first line: a
//! quiet watch's successor may send its first line (a bookmark) only tens of seconds after it
//! is opened, and a hold that waited for it would delete pods that late. With this rule the hold
//! after a reset lasts the backoff and the reconnect plus the settle
//! (`tests/real_apiserver/upstream_safety.rs`, the stale-cache section, checks it against a real
//! API server).
//!
//! Until the shell says otherwise the caches count as current (a machine fed by hand, as the
//! controller tests and the simulator's scenarios do, has nothing to wait for).

use std::time::Duration;

use crate::time::Time;

/// The settle's bounds (see [`cache_settle`]).
pub(crate) const CACHE_SETTLE_MIN: Duration = Duration::from_millis(50);
pub(crate) const CACHE_SETTLE_MAX: Duration = Duration::from_millis(500);

/// After every informer streams again, how long before the caches count as current: the
/// events missed since our version arrive right behind the watch's response head, written by
/// the server a moment after it (a goroutine hands them to the response), so this leaves them
/// as long as the server took to answer the watch that came back (`rtt`: request sent →
/// response head, on a new connection: connect and TLS handshake included), at least
/// `CACHE_SETTLE_MIN` for a busy machine to run the server and read them, at most
/// `CACHE_SETTLE_MAX` (a server that slow is backed off from anyway). A cache made current
/// by a full state (`rtt` unknown) waits the least.
pub fn cache_settle(rtt: Option<Duration>) -> Duration {
    rtt.unwrap_or_default()
        .clamp(CACHE_SETTLE_MIN, CACHE_SETTLE_MAX)
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct CacheCurrency {
    /// Since when every informer has been streaming, and the settle after it; `None` while
    /// one is not.
    watching_since: Option<(Time, Duration)>,
}

impl Default for CacheCurrency {
    fn default() -> Self {
        CacheCurrency {
            watching_since: Some((Time::ZERO, Duration::ZERO)),
        }
    }
}

impl CacheCurrency {
    /// The shell's report (`Input::InformersWatching`): `Some(settle)` when every informer
    /// streams (a repeated report keeps the first time and settle), `None` when one does not.
    pub(crate) fn watching(&mut self, all: Option<Duration>, now: Time) {
        match (all, self.watching_since) {
            (Some(settle), None) => self.watching_since = Some((now, settle)),
            (Some(_), Some(_)) => {}
            (None, _) => self.watching_since = None,
        }
    }

    /// The caches may be acted on at `now`.
    pub(crate) fn is_current(&self, now: Time) -> bool {
        self.current_at().is_some_and(|at| now >= at)
    }

    /// When the caches become current if every informer keeps watching; `None` while one is
    /// not watching (an input, not a time, ends that wait).
    pub(crate) fn current_at(&self) -> Option<Time> {
        self.watching_since.map(|(since, settle)| since + settle)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_caches_are_current_a_settle_after_every_informer_watches_again() {
        let t0 = Time::ZERO + Duration::from_secs(100);
        let settle = Duration::from_millis(120);
        let mut c = CacheCurrency::default();
        assert!(c.is_current(t0), "current until told otherwise");
        c.watching(None, t0);
        assert!(!c.is_current(t0 + Duration::from_secs(60)));
        assert_eq!(c.current_at(), None);
        c.watching(Some(settle), t0 + Duration::from_secs(2));
        c.watching(
            Some(CACHE_SETTLE_MAX),
            t0 + Duration::from_secs(2) + Duration::from_millis(100),
        );
        let at = t0 + Duration::from_secs(2) + settle;
        assert_eq!(
            c.current_at(),
            Some(at),
            "the first report's time and settle"
        );
        let just_before = Time::from_unix_millis(at.as_unix_millis() - 1);
        assert!(!c.is_current(just_before));
        assert!(c.is_current(at));
    }

    #[test]
    fn the_settle_is_the_answers_round_trip_within_its_bounds() {
        let ms = Duration::from_millis;
        assert_eq!(cache_settle(None), CACHE_SETTLE_MIN);
        assert_eq!(cache_settle(Some(ms(3))), CACHE_SETTLE_MIN);
        assert_eq!(cache_settle(Some(ms(180))), ms(180));
        assert_eq!(cache_settle(Some(ms(4_000))), CACHE_SETTLE_MAX);
    }
}
