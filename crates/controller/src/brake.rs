//! The brake on mass decisions (`max_unhealthy`): when more nodes than a limit are not Ready, in
//! the fleet or in a `[[pool]]`, the controller stops acting on them: no new NoExecute taint, no
//! pod deletion by taint eviction (nor legacy eviction), no fence. Countdowns keep their deadlines
//! and act when the brake releases, which happens once the count has stayed
//! at or under the limit for `disruption_cooldown`.
//!
//! This module is the arithmetic and the state of one brake (a scope); the node lifecycle
//! counts (`node_lifecycle/brake.rs`) and gates its queues, taint eviction parks the deletions
//! of the nodes an engaged brake covers.
//!
//! What counts as unhealthy: a registered node whose Ready condition is not True (False,
//! Unknown, or none readable), or that is a **suspect** of the zone rules
//! (`node_lifecycle/suspects.rs`: a verdict in flight, a deadline within the next
//! `node_monitor_period`, a kubelet silent for two Lease renewals). Counting suspects is what
//! makes the brake engage before the first NoExecute taint of a mass failure: the first node
//! judged finds the others already counted, as upstream's batch pass would see them.
//!
//! Medik8s node-healthcheck (`maxUnhealthy`/`minHealthy`) and Cluster API's MachineHealthCheck
//! (`maxUnhealthy`) have the same brake; upstream kube-controller-manager has none.

use std::collections::{BTreeMap, HashSet};
use std::fmt;
use std::rc::Rc;
use std::time::Duration;

use crate::model::Name;
use crate::time::Time;

/// `max_unhealthy`: a count of nodes or a percentage of them.
#[derive(Copy, Clone, Debug, PartialEq)]
pub enum MaxUnhealthy {
    Count(u32),
    /// 0 to 100.
    Percent(f64),
}

impl MaxUnhealthy {
    /// More nodes than the limit are unhealthy: `unhealthy > n`, or `unhealthy > p % of total`.
    pub(crate) fn exceeded(self, unhealthy: usize, total: usize) -> bool {
        match self {
            MaxUnhealthy::Count(n) => unhealthy > n as usize,
            MaxUnhealthy::Percent(p) => unhealthy as f64 * 100.0 > p * total as f64,
        }
    }

    /// The value as the config file writes it (`10` or `"40%"`).
    pub fn to_toml(self) -> String {
        match self {
            MaxUnhealthy::Count(n) => n.to_string(),
            MaxUnhealthy::Percent(_) => format!("\"{self}\""),
        }
    }
}

impl fmt::Display for MaxUnhealthy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MaxUnhealthy::Count(n) => write!(f, "{n}"),
            MaxUnhealthy::Percent(p) => write!(f, "{p}%"),
        }
    }
}

/// What one brake covers: every node, or the nodes of one pool.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum BrakeScope {
    Fleet,
    Pool(Name),
}

impl fmt::Display for BrakeScope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BrakeScope::Fleet => f.write_str("fleet"),
            BrakeScope::Pool(p) => write!(f, "pool {p}"),
        }
    }
}

/// One brake's state.
#[derive(Clone, Debug, PartialEq)]
pub struct BrakeState {
    pub limit: MaxUnhealthy,
    /// Since when it is engaged; `None`: released.
    pub engaged_since: Option<Time>,
    /// While engaged: since when the count has been back within the limit.
    pub within_since: Option<Time>,
    /// The last count: unhealthy nodes (suspects included) and all nodes of the scope.
    pub unhealthy: usize,
    pub total: usize,
}

/// A brake engaged or released (one decision line each).
#[derive(Clone, Debug, PartialEq)]
pub struct BrakeChange {
    pub scope: BrakeScope,
    pub engaged: bool,
    pub unhealthy: usize,
    pub total: usize,
    pub limit: MaxUnhealthy,
}

impl BrakeState {
    pub(crate) fn new(limit: MaxUnhealthy) -> BrakeState {
        BrakeState {
            limit,
            engaged_since: None,
            within_since: None,
            unhealthy: 0,
            total: 0,
        }
    }

    pub fn engaged(&self) -> bool {
        self.engaged_since.is_some()
    }

    /// Takes a new count at `now`. Engages at once when over the limit; releases once the
    /// count has stayed within it for `cooldown` (zero: at once). True when it changed.
    pub(crate) fn step(
        &mut self,
        unhealthy: usize,
        total: usize,
        now: Time,
        cooldown: Duration,
    ) -> bool {
        self.unhealthy = unhealthy;
        self.total = total;
        let over = self.limit.exceeded(unhealthy, total);
        match (self.engaged_since, over) {
            (None, true) => {
                self.engaged_since = Some(now);
                self.within_since = None;
                true
            }
            (None, false) => false,
            (Some(_), true) => {
                self.within_since = None;
                false
            }
            (Some(_), false) => {
                let since = *self.within_since.get_or_insert(now);
                if now.since(since) >= cooldown {
                    self.engaged_since = None;
                    self.within_since = None;
                    true
                } else {
                    false
                }
            }
        }
    }

    /// When an engaged brake whose count is within the limit releases.
    pub(crate) fn releases_at(&self, cooldown: Duration) -> Option<Time> {
        self.engaged_since?;
        self.within_since.map(|t| t + cooldown)
    }
}

/// The brakes configured, by scope.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Brakes {
    pub scopes: BTreeMap<BrakeScope, BrakeState>,
    /// While only pool brakes are engaged: the nodes of their pools, kept until a brake
    /// engages or releases, or a node joins, leaves or changes labels (`None` then).
    pub(crate) pool_cover: Option<Rc<HashSet<Name>>>,
}

impl Brakes {
    pub fn any_engaged(&self) -> bool {
        self.scopes.values().any(BrakeState::engaged)
    }

    pub(crate) fn fleet_engaged(&self) -> bool {
        self.scopes
            .get(&BrakeScope::Fleet)
            .is_some_and(BrakeState::engaged)
    }

    /// The engaged brake covering a node of `pool`, if any (the fleet's first).
    pub(crate) fn covering(&self, pool: Option<&Name>) -> Option<(&BrakeScope, &BrakeState)> {
        if let Some((scope, state)) = self.scopes.get_key_value(&BrakeScope::Fleet)
            && state.engaged()
        {
            return Some((scope, state));
        }
        let pool = pool?;
        self.scopes
            .get_key_value(&BrakeScope::Pool(pool.clone()))
            .filter(|(_, s)| s.engaged())
    }
}

/// Which nodes' pod deletions an engaged brake holds (what taint eviction is told).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) enum BrakeCover {
    #[default]
    Nothing,
    Everything,
    /// Shared: the brake's cover is kept (`Brakes::pool_cover`) and handed out at every input
    /// while engaged; an unchanged one compares equal by address.
    Nodes(Rc<HashSet<Name>>),
}

impl BrakeCover {
    pub(crate) fn covers(&self, node: &str) -> bool {
        match self {
            BrakeCover::Nothing => false,
            BrakeCover::Everything => true,
            BrakeCover::Nodes(nodes) => nodes.contains(node),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_count_is_exceeded_only_above_it_and_a_percentage_of_the_scope() {
        assert!(!MaxUnhealthy::Count(2).exceeded(2, 10));
        assert!(MaxUnhealthy::Count(2).exceeded(3, 10));
        assert!(MaxUnhealthy::Count(0).exceeded(1, 10));
        assert!(!MaxUnhealthy::Percent(40.0).exceeded(4, 10));
        assert!(MaxUnhealthy::Percent(40.0).exceeded(5, 10));
        assert!(!MaxUnhealthy::Percent(100.0).exceeded(10, 10));
        assert!(!MaxUnhealthy::Percent(0.0).exceeded(0, 0));
        assert_eq!(MaxUnhealthy::Percent(40.0).to_toml(), "\"40%\"");
        assert_eq!(MaxUnhealthy::Count(7).to_toml(), "7");
    }

    #[test]
    fn a_brake_engages_at_once_and_releases_after_the_cooldown_within_the_limit() {
        let t = |s: u64| Time::from_unix_millis(s * 1000);
        let cooldown = Duration::from_secs(30);
        let mut b = BrakeState::new(MaxUnhealthy::Count(2));
        assert!(!b.step(2, 10, t(0), cooldown));
        assert!(b.step(3, 10, t(1), cooldown));
        assert!(b.engaged());
        assert!(!b.step(1, 10, t(10), cooldown));
        assert_eq!(b.releases_at(cooldown), Some(t(40)));
        // Over the limit again: the cooldown starts over.
        assert!(!b.step(5, 10, t(20), cooldown));
        assert_eq!(b.releases_at(cooldown), None);
        assert!(!b.step(0, 10, t(30), cooldown));
        assert!(!b.step(0, 10, t(59), cooldown));
        assert!(b.step(0, 10, t(60), cooldown));
        assert!(!b.engaged());
    }
}
