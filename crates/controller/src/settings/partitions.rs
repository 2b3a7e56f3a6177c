//! The settings of disruption domains as a node's pool overrides them
//! (`controller/partitions.rs`).

use crate::model::Node;

use super::super::partitions::{FullDisruption, HoldFor, PodsNotReady};
#[cfg(test)]
use super::super::pools::node_label_keys;
use super::super::pools::pool_of;
use super::Settings;

impl Settings {
    /// The node's pod marking mode: its pool's, else the global one (autonomy is applied by
    /// [`Settings::marks_pods_not_ready`]).
    pub(crate) fn pods_not_ready_mode(&self, node: &Node) -> PodsNotReady {
        pool_of(&self.pools, node)
            .and_then(|p| p.mark_pods_not_ready)
            .unwrap_or(self.mark_pods_not_ready)
    }

    /// The label keys that make the node's disruption domain (empty: the zone key).
    fn domain_labels<'a>(&'a self, node: &Node) -> &'a [String] {
        pool_of(&self.pools, node)
            .and_then(|p| p.disruption_domain.as_deref())
            .unwrap_or(&self.disruption_domain)
    }

    /// No domain by label anywhere: every node's domain is its zone key.
    pub(crate) fn domains_are_zones(&self) -> bool {
        self.disruption_domain.is_empty()
            && self
                .pools
                .iter()
                .all(|p| p.disruption_domain.as_ref().is_none_or(Vec::is_empty))
    }

    /// The node's disruption domain key: the values of its domain labels (`k=v`, joined by
    /// `,`), or upstream's zone key when none is configured or the node lacks one of them.
    pub(crate) fn domain_key(&self, node: &Node) -> String {
        if self.domains_are_zones() {
            return node.zone_key();
        }
        let labels = self.domain_labels(node);
        if labels.is_empty() {
            return node.zone_key();
        }
        let mut key = String::new();
        for label in labels {
            let Some(value) = node.label(label) else {
                return node.zone_key();
            };
            if !key.is_empty() {
                key.push(',');
            }
            key.push_str(label);
            key.push('=');
            key.push_str(value);
        }
        key
    }

    /// Whether the node's domain key is `key` (without building it when domains are zones).
    pub(crate) fn has_domain_key(&self, node: &Node, key: &str) -> bool {
        if self.domains_are_zones() {
            return node.has_zone_key(key);
        }
        self.domain_key(node) == key
    }

    /// Every label key a domain is made of, without repeats (the decoder must keep them).
    #[cfg(test)]
    pub(crate) fn domain_label_keys(&self) -> Vec<String> {
        node_label_keys(&[], &self.pools, &self.disruption_domain)
    }

    /// No pool or global setting holds a fully disrupted domain.
    pub(crate) fn never_holds(&self) -> bool {
        self.full_disruption == FullDisruption::Evict
            && self
                .pools
                .iter()
                .all(|p| p.full_disruption != Some(FullDisruption::Hold))
    }

    /// The node's own (mode, hold_max): its pool's, else the global ones.
    fn full_disruption_of(&self, node: &Node) -> (FullDisruption, HoldFor) {
        let pool = pool_of(&self.pools, node);
        (
            pool.and_then(|p| p.full_disruption)
                .unwrap_or(self.full_disruption),
            pool.and_then(|p| p.hold_max).or(self.hold_max),
        )
    }

    /// A domain whose nodes are `members` is held when any member says hold (the safer choice
    /// wins, as the lowest rate does), for the longest `hold_max` among those that hold (one
    /// without `hold_max`: without end). `None`: the domain is not held (upstream).
    pub(crate) fn domain_hold<'a>(
        &self,
        members: impl Iterator<Item = &'a Node>,
    ) -> Option<HoldFor> {
        if self.never_holds() {
            return None;
        }
        let mut hold: Option<HoldFor> = None;
        for node in members {
            let (mode, max) = self.full_disruption_of(node);
            if mode != FullDisruption::Hold {
                continue;
            }
            hold = Some(match (hold, max) {
                (None, max) => max,
                (Some(None), _) | (Some(_), None) => None,
                (Some(Some(a)), Some(b)) => Some(a.max(b)),
            });
        }
        hold
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::super::super::pools::Pool;
    use super::*;

    fn node(labels: &[(&str, &str)]) -> Node {
        let mut n = crate::tests::harness::node("n").build();
        for (k, v) in labels {
            n.labels.push(((*k).into(), (*v).into()));
        }
        n
    }

    fn pool(name: &str, label: (&str, &str)) -> Pool {
        Pool {
            name: name.into(),
            match_labels: vec![(label.0.to_string(), label.1.to_string())],
            ..Default::default()
        }
    }

    #[test]
    fn domain_key_is_the_zone_key_by_default_and_the_labels_when_set() {
        let zone = "topology.kubernetes.io/zone";
        let n = node(&[(zone, "a"), ("example.com/site", "lab-3")]);
        let mut s = Settings::default();
        assert_eq!(s.domain_key(&n), n.zone_key());
        s.disruption_domain = vec!["example.com/site".into()];
        assert_eq!(s.domain_key(&n), "example.com/site=lab-3");
        assert!(s.has_domain_key(&n, "example.com/site=lab-3"));
        s.disruption_domain = vec!["example.com/site".into(), zone.into()];
        assert_eq!(
            s.domain_key(&n),
            "example.com/site=lab-3,topology.kubernetes.io/zone=a"
        );
        // Without one of the labels: the zone key.
        let bare = node(&[(zone, "a")]);
        assert_eq!(s.domain_key(&bare), bare.zone_key());
    }

    #[test]
    fn a_pool_sets_its_own_domain_labels() {
        let n = node(&[("pool", "edge"), ("example.com/rack", "r1")]);
        let mut s = Settings::default();
        let mut p = pool("edge", ("pool", "edge"));
        p.disruption_domain = Some(vec!["example.com/rack".into()]);
        s.pools.push(p);
        assert_eq!(s.domain_key(&n), "example.com/rack=r1");
        assert_eq!(s.domain_label_keys(), vec!["example.com/rack".to_string()]);
        let other = node(&[("example.com/rack", "r1")]);
        assert_eq!(s.domain_key(&other), other.zone_key());
    }

    #[test]
    fn hold_wins_in_a_domain_of_several_pools_with_the_longest_hold_max() {
        let mut s = Settings::default();
        let a = node(&[("pool", "a")]);
        let b = node(&[("pool", "b")]);
        assert_eq!(s.domain_hold([&a, &b].into_iter()), None);
        let mut pa = pool("a", ("pool", "a"));
        pa.full_disruption = Some(FullDisruption::Hold);
        pa.hold_max = Some(Duration::from_secs(60));
        s.pools.push(pa);
        assert_eq!(
            s.domain_hold([&a, &b].into_iter()),
            Some(Some(Duration::from_secs(60)))
        );
        assert_eq!(s.domain_hold([&b].into_iter()), None);
        // The global setting holds without end: the longer hold wins.
        s.full_disruption = FullDisruption::Hold;
        assert_eq!(s.domain_hold([&a, &b].into_iter()), Some(None));
        s.hold_max = Some(Duration::from_secs(600));
        assert_eq!(
            s.domain_hold([&a, &b].into_iter()),
            Some(Some(Duration::from_secs(600)))
        );
    }
}
