//! Node pools: groups of nodes, chosen by label selector, with their own grace periods, pod marking
//! and zone tainting rates. A rack on a flaky switch and the control
//! plane's own nodes no longer share one 50 s grace.
//!
//! A node belongs to the first pool whose selector matches its labels, and to none when no
//! pool matches (then the global settings apply). The pool is recomputed from the labels each
//! time it is needed, so a node whose labels change moves at once.

use std::time::Duration;

use crate::model::{Name, Node};
use crate::time::Rate;

use super::brake::MaxUnhealthy;
use super::partitions::{FullDisruption, PodsNotReady};

/// A set-based selector requirement (`matchExpressions` of a Kubernetes label selector).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LabelRequirement {
    pub key: String,
    pub operator: SelectorOperator,
    /// Empty for `Exists` and `DoesNotExist`.
    pub values: Vec<String>,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum SelectorOperator {
    In,
    NotIn,
    Exists,
    DoesNotExist,
}

impl SelectorOperator {
    pub fn parse(s: &str) -> Option<SelectorOperator> {
        match s {
            "In" => Some(SelectorOperator::In),
            "NotIn" => Some(SelectorOperator::NotIn),
            "Exists" => Some(SelectorOperator::Exists),
            "DoesNotExist" => Some(SelectorOperator::DoesNotExist),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            SelectorOperator::In => "In",
            SelectorOperator::NotIn => "NotIn",
            SelectorOperator::Exists => "Exists",
            SelectorOperator::DoesNotExist => "DoesNotExist",
        }
    }
}

impl LabelRequirement {
    /// Kubernetes' semantics: `NotIn` and `DoesNotExist` match a node without the label.
    pub(crate) fn matches(&self, node: &Node) -> bool {
        let value = node.label(&self.key);
        match self.operator {
            SelectorOperator::In => value.is_some_and(|v| self.values.iter().any(|w| **w == **v)),
            SelectorOperator::NotIn => {
                value.is_none_or(|v| !self.values.iter().any(|w| **w == **v))
            }
            SelectorOperator::Exists => value.is_some(),
            SelectorOperator::DoesNotExist => value.is_none(),
        }
    }
}

/// One `[[pool]]` of the config: a selector and the settings it overrides (`Default`: an
/// unnamed pool selecting every node, overriding nothing).
#[derive(Clone, Debug, PartialEq, Default)]
pub struct Pool {
    pub name: Name,
    pub match_labels: Vec<(String, String)>,
    pub match_expressions: Vec<LabelRequirement>,
    pub node_monitor_grace_period: Option<Duration>,
    pub node_startup_grace_period: Option<Duration>,
    /// `mark_pods_not_ready` (the old boolean reads as `always` / `never`).
    pub mark_pods_not_ready: Option<PodsNotReady>,
    pub node_eviction_rate: Option<Rate>,
    pub secondary_node_eviction_rate: Option<Rate>,
    /// The pool's own brake, counted over its nodes (`brake.rs`).
    pub max_unhealthy: Option<MaxUnhealthy>,
    /// Stands in for the admission default toleration of the pool's pods.
    pub default_toleration_seconds: Option<u64>,
    /// The label keys of its nodes' disruption domain (`partitions.rs`).
    pub disruption_domain: Option<Vec<String>>,
    /// What a fully disrupted domain holding its nodes means.
    pub full_disruption: Option<FullDisruption>,
    /// How long such a domain is held.
    pub hold_max: Option<Duration>,
}

impl Pool {
    /// Every `match_labels` pair and every expression hold (an empty selector matches all).
    pub(crate) fn matches(&self, node: &Node) -> bool {
        self.match_labels
            .iter()
            .all(|(k, v)| node.label(k).is_some_and(|have| **have == **v))
            && self.match_expressions.iter().all(|r| r.matches(node))
    }

    /// The label keys the selector reads (the decoder must keep them).
    pub(crate) fn label_keys(&self) -> impl Iterator<Item = &str> {
        self.match_labels
            .iter()
            .map(|(k, _)| k.as_str())
            .chain(self.match_expressions.iter().map(|r| r.key.as_str()))
    }

    pub(crate) fn overrides_rates(&self) -> bool {
        self.node_eviction_rate.is_some() || self.secondary_node_eviction_rate.is_some()
    }
}

/// The first pool matching the node.
pub fn pool_of<'a>(pools: &'a [Pool], node: &Node) -> Option<&'a Pool> {
    pools.iter().find(|p| p.matches(node))
}

/// Every label key some pool selector reads, without repeats.
pub fn selector_label_keys(pools: &[Pool]) -> Vec<String> {
    let mut keys: Vec<String> = Vec::new();
    for key in pools.iter().flat_map(Pool::label_keys) {
        if !keys.iter().any(|k| k == key) {
            keys.push(key.to_string());
        }
    }
    keys
}

/// Every node label key the controller reads beyond the built-in ones: the pool selectors'
/// and the disruption domains' (the decoder keeps them), without repeats, after `first`.
pub fn node_label_keys(first: &[String], pools: &[Pool], domain: &[String]) -> Vec<String> {
    let mut keys: Vec<String> = first.to_vec();
    let pool_domains = pools.iter().filter_map(|p| p.disruption_domain.as_ref());
    for key in domain.iter().chain(pool_domains.flatten()) {
        if !keys.contains(key) {
            keys.push(key.clone());
        }
    }
    keys
}
