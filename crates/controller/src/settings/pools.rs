//! The settings as a node's pool overrides them (`controller/pools.rs`).

use std::time::Duration;

use crate::model::{Name, Node};
use crate::time::Rate;

use super::super::partitions::PodsNotReady;
use super::super::pools::{Pool, pool_of};
use super::Settings;

impl Settings {
    /// The node's (monitor, startup) grace periods: its pool's, else the global ones.
    pub(crate) fn graces(&self, node: &Node) -> (Duration, Duration) {
        let pool = pool_of(&self.pools, node);
        (
            pool.and_then(|p| p.node_monitor_grace_period)
                .unwrap_or(self.node_monitor_grace_period),
            pool.and_then(|p| p.node_startup_grace_period)
                .unwrap_or(self.node_startup_grace_period),
        )
    }

    /// Whether the node's pods may be marked NotReady when it stops being Ready: its pool's
    /// choice, else the global one (default yes, as upstream), and never for an autonomous edge
    /// node. `unless-disrupted` says yes here: the node lifecycle then asks its domain.
    pub(crate) fn marks_pods_not_ready(&self, node: &Node) -> bool {
        self.pods_not_ready_mode(node) != PodsNotReady::Never && !self.is_autonomous(node)
    }

    /// The (healthy, secondary) tainting rates of a zone whose nodes are `members`.
    ///
    /// A zone holding nodes of several pools is tainted at the lowest rate among them (nodes
    /// in no pool count with the global rates): the rate bounds how fast a zone loses its
    /// workloads, so the most cautious member decides. Without any pool overriding a rate,
    /// the global rates, without looking at the members.
    pub(crate) fn zone_rates<'a>(&self, members: impl Iterator<Item = &'a Node>) -> (Rate, Rate) {
        let global = (self.node_eviction_rate, self.secondary_node_eviction_rate);
        if !self.pools.iter().any(Pool::overrides_rates) {
            return global;
        }
        let mut rates: Option<(Rate, Rate)> = None;
        for node in members {
            let pool = pool_of(&self.pools, node);
            let mine = (
                pool.and_then(|p| p.node_eviction_rate).unwrap_or(global.0),
                pool.and_then(|p| p.secondary_node_eviction_rate)
                    .unwrap_or(global.1),
            );
            rates = Some(match rates {
                None => mine,
                Some((a, b)) => (a.min(mine.0), b.min(mine.1)),
            });
        }
        rates.unwrap_or(global)
    }
}

impl Settings {
    /// Some brake is configured, fleet-wide or in a pool (`brake.rs`).
    pub(crate) fn brakes_configured(&self) -> bool {
        self.max_unhealthy.is_some() || self.pools.iter().any(|p| p.max_unhealthy.is_some())
    }

    /// What stands in for the admission default toleration of the node's pods: its pool's
    /// `default_toleration_seconds`, else the global one; `None`: the pods' own (upstream).
    pub fn default_toleration_for(&self, node: &Node) -> Option<(u64, Option<&Name>)> {
        let pool = pool_of(&self.pools, node);
        match pool.and_then(|p| p.default_toleration_seconds) {
            Some(s) => Some((s, pool.map(|p| &p.name))),
            None => self.default_toleration_seconds.map(|s| (s, None)),
        }
    }
}
