//! Zones and their disruption state (docs/upstream.md, "Zones", upstream `ComputeZoneState`,
//! `setLimiterInZone`).

use crate::model::Name;
#[cfg(test)]
use crate::model::Node;
use crate::time::Rate;
use crate::time::Time;

use super::rate_limited_queue::RateLimitedTimedQueue;
use super::settings::Settings;

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum ZoneState {
    Initial,
    Normal,
    FullDisruption,
    PartialDisruption,
}

impl ZoneState {
    pub const ALL: [ZoneState; 4] = [
        ZoneState::Initial,
        ZoneState::Normal,
        ZoneState::FullDisruption,
        ZoneState::PartialDisruption,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ZoneState::Initial => "Initial",
            ZoneState::Normal => "Normal",
            ZoneState::FullDisruption => "FullDisruption",
            ZoneState::PartialDisruption => "PartialDisruption",
        }
    }
}

/// The state of a zone with `ready` Ready nodes out of `size` (nodes without a Ready condition
/// count as not ready).
pub(crate) fn compute_zone_state(size: usize, ready: usize, unhealthy_threshold: f64) -> ZoneState {
    let not_ready = size.saturating_sub(ready);
    if ready == 0 && not_ready > 0 {
        ZoneState::FullDisruption
    } else if not_ready > 2 && not_ready as f64 / size as f64 >= unhealthy_threshold {
        ZoneState::PartialDisruption
    } else {
        ZoneState::Normal
    }
}

/// The tainting rate of a zone in `state` with `size` nodes (`None`: leave the limiter alone,
/// as upstream does for `Initial`).
#[cfg(test)]
pub(crate) fn zone_rate(state: ZoneState, size: usize, settings: &Settings) -> Option<Rate> {
    let rates = (
        settings.node_eviction_rate,
        settings.secondary_node_eviction_rate,
    );
    zone_rate_with(state, size, settings, rates)
}

/// [`zone_rate`] with the zone's (healthy, secondary) rates, which its pools may lower.
pub(crate) fn zone_rate_with(
    state: ZoneState,
    size: usize,
    settings: &Settings,
    (healthy, secondary): (Rate, Rate),
) -> Option<Rate> {
    match state {
        ZoneState::Normal | ZoneState::FullDisruption => Some(healthy),
        ZoneState::PartialDisruption => {
            if size > settings.large_cluster_size_threshold as usize {
                Some(secondary)
            } else {
                Some(Rate::NEVER)
            }
        }
        ZoneState::Initial => None,
    }
}

/// `node.kubernetes.io/exclude-disruption` present (any value).
#[cfg(test)]
pub(crate) fn is_node_excluded_from_disruption_checks(node: &Node) -> bool {
    node.excluded_from_disruption()
}

/// A zone: its queue (NoExecute tainting, or pod eviction in legacy mode), the health counts
/// of its non-excluded nodes, and its state once computed.
#[derive(Debug)]
pub(crate) struct Zone {
    pub(crate) key: Name,
    /// Registered nodes in the zone, excluded ones too (they are tainted all the same).
    pub(crate) members: usize,
    /// Non-excluded nodes (upstream `zone_size`).
    pub(crate) size: usize,
    /// Non-excluded nodes whose current Ready is True.
    pub(crate) ready: usize,
    /// Of those, the suspects (`node_lifecycle/suspect_tally.rs`; kept while the node lifecycle
    /// is synced).
    pub(crate) suspects: usize,
    /// `None` until the first disruption pass sees the zone (upstream: no entry in zoneStates).
    pub(crate) state: Option<ZoneState>,
    pub(crate) queue: RateLimitedTimedQueue,
    /// `node_collector_evictions_total{zone}`: taints applied (or, legacy, nodes evicted).
    pub(crate) evictions_total: u64,
    /// End of the disruption cooldown: no NoExecute taint is added here before it.
    pub(crate) cooldown_until: Option<Time>,
    /// Its NoExecute decisions wait for suspects (`node_lifecycle/suspects.rs`): the wait's
    /// start is logged once.
    pub(crate) waiting_for_suspects: bool,
    /// Since when it has been fully disrupted (`hold_max` counts from there).
    pub(crate) full_since: Option<Time>,
    /// Held (`full_disruption = "hold"`): no NoExecute taint nor eviction from its queue.
    pub(crate) held: bool,
    /// When the hold ends (`hold_max`); `None` with the domain's recovery only.
    pub(crate) hold_until: Option<Time>,
    /// What its members say of a hold (`Settings::domain_hold`), kept until a node joins,
    /// leaves or changes labels (`None`: to be taken again).
    pub(crate) hold_vote: Option<Option<crate::partitions::HoldFor>>,
}

impl Zone {
    /// Within the cooldown that follows the end of a full disruption (`disruption_cooldown`):
    /// the kubelets are still catching up, so silence is not yet evidence. The queue keeps its
    /// nodes; those that report in meanwhile leave it and are never tainted.
    pub(crate) fn in_cooldown(&self, now: Time) -> bool {
        self.cooldown_until.is_some_and(|until| now < until)
    }

    /// Starts the cooldown (nothing with a zero `cooldown`, the upstream behaviour).
    pub(crate) fn start_cooldown(&mut self, cooldown: std::time::Duration, now: Time) {
        if !cooldown.is_zero() {
            self.cooldown_until = Some(now + cooldown);
        }
    }

    /// Nothing is tainted (nor evicted) from its queue now: a cooldown or a hold.
    pub(crate) fn stops_tainting(&self, now: Time) -> bool {
        self.in_cooldown(now) || self.held
    }

    pub(crate) fn unhealthy(&self) -> usize {
        self.size.saturating_sub(self.ready)
    }
}

/// How the zone key reads in logs and dumps: `region/zone`, without the NUL separator.
pub fn display_zone(key: &str) -> String {
    if key.is_empty() {
        return String::from("(none)");
    }
    key.replacen(":\x00:", "/", 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compute_zone_state_thresholds() {
        // Everything down: full; 2 down of 5: never partial (needs > 2); 3 of 5 >= 0.55.
        assert_eq!(compute_zone_state(4, 0, 0.55), ZoneState::FullDisruption);
        assert_eq!(compute_zone_state(5, 3, 0.55), ZoneState::Normal);
        assert_eq!(compute_zone_state(5, 2, 0.55), ZoneState::PartialDisruption);
        assert_eq!(compute_zone_state(4, 1, 0.55), ZoneState::PartialDisruption);
        assert_eq!(compute_zone_state(10, 6, 0.55), ZoneState::Normal);
        assert_eq!(compute_zone_state(0, 0, 0.55), ZoneState::Normal);
    }

    #[test]
    fn partial_disruption_rate_depends_on_zone_size() {
        let s = Settings::default();
        assert_eq!(
            zone_rate(ZoneState::PartialDisruption, 50, &s),
            Some(Rate::NEVER)
        );
        assert_eq!(
            zone_rate(ZoneState::PartialDisruption, 51, &s),
            Some(s.secondary_node_eviction_rate)
        );
        assert_eq!(
            zone_rate(ZoneState::FullDisruption, 3, &s),
            Some(s.node_eviction_rate)
        );
        assert_eq!(zone_rate(ZoneState::Initial, 3, &s), None);
    }
}
