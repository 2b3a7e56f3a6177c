//! Site episodes (`--partitions`): a whole disruption domain goes dark and the leader is killed
//! while it is dark, so a new leader takes over a held site.
//!
//! - `site-dark-failover`: the site comes back within about its `hold_max`; the new leader must
//!   keep the dark site's pods Ready (`unless-disrupted`) and taint nothing in it.
//! - `hold-across-takeover`: the site stays dark past `hold_max`, and the leader is killed in
//!   the middle of the hold; the new leader must end the hold when the first leader would have
//!   (the hold's start outlives the leader), not `hold_max` after its own start.

use std::time::Duration;

use super::{Fault, Planner, millis_of};

/// The hold assumed for a site with none (`hold_max` unset: held until it is back).
const NO_HOLD_MAX: Duration = Duration::from_secs(15);

impl Planner {
    pub(super) fn site_episode(&mut self, kind: &'static str, at: Duration) {
        if self.sites.is_empty() {
            return;
        }
        let site = self.sites[self.rng.below(self.sites.len() as u64) as usize].clone();
        // Every node of the site dark: the episode starts once the last of them is free (they
        // are reserved from now on, so no episode planned meanwhile takes them).
        let start = site
            .nodes
            .iter()
            .map(|&i| self.busy_until[i])
            .max()
            .unwrap_or_default()
            .max(at);
        let hold = site.hold_max.unwrap_or(NO_HOLD_MAX);
        // The site reads fully disrupted about a grace period (+ the 1 s spread of the
        // silences) after the first stop; the hold counts from then.
        let dark = self.grace + Duration::from_secs(1);
        let (down, kill) = if kind == "hold-across-takeover" {
            let down = dark + hold + self.millis(8_000, 14_000);
            let into_hold = hold.mul_f64(0.3 + self.rng.below(41) as f64 / 100.0);
            // No fault that stops the daemons around the hold's end: `hold-overrun` judges
            // when the first taint lands.
            let end = start + dark + hold;
            self.quiet.push((
                end.saturating_sub(Duration::from_secs(4)),
                end + Duration::from_secs(8),
            ));
            (down, dark + into_hold)
        } else {
            let down = self.millis(8_000, millis_of(dark + hold).max(9_000));
            let latest = down.saturating_sub(Duration::from_millis(500));
            let earliest = (self.grace + Duration::from_millis(1_500)).min(latest);
            (down, self.millis(millis_of(earliest), millis_of(latest)))
        };
        self.outage(&site.nodes, start, 1000, down, kind);
        let restart = self.millis(500, 3_000);
        self.push(start + kill, Fault::KillLeader(restart), "");
    }
}
