//! What gates the zone queues' pass (NoExecute tainting, or legacy pod eviction), owned here:
//! whether the caches may be acted on, and since when the pass has waited for verdicts in
//! flight.

use crate::settings::EVICTION_PASS_MAX_HOLD;
use crate::time::Time;

#[derive(Debug)]
pub(super) struct PassGate {
    /// False while the informers' caches may be stale or a fleet pause holds tainting
    /// (`Controllers`, `cache_currency.rs`): the pass waits.
    caches_current: bool,
    /// Since when the pass has been held back for health verdicts in flight.
    held_since: Option<Time>,
}

impl Default for PassGate {
    fn default() -> PassGate {
        PassGate {
            caches_current: true,
            held_since: None,
        }
    }
}

impl PassGate {
    pub(super) fn set_caches_current(&mut self, current: bool) {
        self.caches_current = current;
    }

    pub(super) fn caches_current(&self) -> bool {
        self.caches_current
    }

    /// Upstream judges every node in one monitor pass, then sets the zones' rates, before the
    /// next tainting decision. Here a verdict waits for its live Lease read and its status
    /// write, so when many nodes fall silent together (a zone losing power) their verdicts
    /// arrive one API round-trip after another, and the zone would still look healthy, at its
    /// normal rate, to a pass running between them. So the pass waits while verdicts are in
    /// flight, at most `EVICTION_PASS_MAX_HOLD`, and then counts the zone with all of them.
    pub(super) fn holds_for_verdicts(&mut self, verdicts_in_flight: bool, now: Time) -> bool {
        if !verdicts_in_flight {
            self.held_since = None;
            return false;
        }
        let since = *self.held_since.get_or_insert(now);
        if now.since(since) < EVICTION_PASS_MAX_HOLD {
            return true;
        }
        self.held_since = None;
        false
    }
}
