//! Partitions are not failures, in the node lifecycle (`controller/partitions.rs` has the
//! settings):
//!
//! - **Pods kept Ready** (`mark_pods_not_ready = "unless-disrupted"`). Pods are marked NotReady
//!   at the verdict, when the node's domain may not look disrupted yet: in a correlated failure
//!   the domain reads partially disrupted only after several verdicts. So the domain is judged
//!   with its suspects (`suspects.rs`): the first node of a dying site counts the rest of the
//!   site, about to be judged, as not ready, and its pods stay Ready. A node whose pods were
//!   kept is looked at again when a domain's state changes and at each periodic pass: once its
//!   domain is Normal again (its suspects renewed, or the rest of the site came back) while it
//!   is still not Ready, it is failing alone, and its pods are marked then.
//! - **A held domain** (`full_disruption = "hold"`). A fully disrupted domain beside healthy
//!   ones (upstream taints it at the normal rate) adds no NoExecute taint and evicts nothing
//!   until `hold_max` has passed since it became fully disrupted. Its queue keeps its nodes, as
//!   in a cooldown; entering and leaving the hold are one decision line each.

use std::collections::{BTreeMap, BTreeSet};

use crate::actions::Action;
use crate::decisions::Decision;
use crate::model::{ClusterStore, ConditionStatus, Name, Node};
use crate::time::Time;
use crate::zones::ZoneState;

use super::{NodeLifecycle, domain_name};
use crate::partitions::PodsNotReady;

impl NodeLifecycle {
    /// Whether the node's pods stay Ready now: its mode is `unless-disrupted` and its domain,
    /// counted with its suspects, is partially or fully disrupted, or every domain is down.
    pub(super) fn keeps_pods_ready(
        &self,
        store: &ClusterStore,
        name: &Name,
        now: Time,
    ) -> Option<(ZoneState, bool)> {
        let node = store.node(name)?;
        if self.settings.pods_not_ready_mode(node) != PodsNotReady::UnlessDisrupted {
            return None;
        }
        let e = self.nodes.get(name).filter(|e| e.registered)?;
        let view = self.suspect_view(store, now);
        let all_down = self.all_zones_fully_disrupted() || self.all_suspected_down(&view);
        // As counted now: the zone's recorded state is recomputed only after this input.
        let state = self
            .suspected_state(&view, &e.zone)
            .unwrap_or(ZoneState::Normal);
        let disrupted = matches!(
            state,
            ZoneState::PartialDisruption | ZoneState::FullDisruption
        );
        (disrupted || all_down).then_some((state, all_down))
    }

    /// Records that the node's pods stay Ready (one decision line per episode).
    pub(super) fn keep_pods_ready(&mut self, name: &Name, (state, all_down): (ZoneState, bool)) {
        if !self.pod_work.keep_ready(name) {
            return;
        }
        let zone = self
            .nodes
            .get(name)
            .map(|e| e.zone.clone())
            .unwrap_or_default();
        self.decisions.push(Decision::PodsKeptReady {
            node: name.clone(),
            zone,
            state,
            all_down,
        });
    }

    /// The nodes whose pods were kept Ready, looked at again: Ready again or gone, forgotten;
    /// still not Ready in a domain no longer disrupted (failing alone), their pods are marked.
    pub(super) fn recheck_kept_pods(
        &mut self,
        store: &ClusterStore,
        now: Time,
        out: &mut Vec<Action>,
    ) {
        for name in self.pod_work.kept_ready() {
            let ready = store.node(&name).map(|n| n.ready().map(|c| c.status));
            match ready {
                None | Some(Some(ConditionStatus::True)) => {
                    self.pod_work.stop_keeping(&name);
                }
                // Unknown but heard from again (its Lease renewed since its verdict): the
                // kubelet is back and its Ready follows; its domain may read Normal a moment
                // before, as its nodes return one by one. Not failing alone.
                Some(Some(ConditionStatus::Unknown)) if self.heard_since_verdict(&name, now) => {}
                Some(_) => {
                    if self.keeps_pods_ready(store, &name, now).is_none() {
                        self.pod_work.stop_keeping(&name);
                        self.mark_pods_not_ready(store, &name, None, now, out);
                    }
                }
            }
        }
    }

    /// The node's kubelet was heard from within the last `node_monitor_period` (a renewal
    /// reached us), though its Ready is still Unknown.
    fn heard_since_verdict(&self, name: &Name, now: Time) -> bool {
        self.nodes
            .get(name)
            .is_some_and(|e| now.since(e.health.probe_time()) < self.settings.node_monitor_period)
    }

    /// A reload may change the node's disruption domain (`disruption_domain`, its pool's).
    pub(super) fn move_to_domain(&mut self, store: &ClusterStore, name: &Name, now: Time) {
        let (Some(e), Some(node)) = (self.nodes.get(name), store.node(name)) else {
            return;
        };
        if !e.registered || self.settings.has_domain_key(node, &e.zone) {
            return;
        }
        let domain = domain_name(&self.zones, self.settings.domain_key(node));
        let ready = node.ready().map(|c| c.status);
        self.move_zone(name, domain, now);
        self.update_contribution(store, name, ready, now);
    }

    /// The domain's hold at `now`: `None` when it is not held, else when the hold ends
    /// (`None`: with the domain's recovery only). Its members' vote is kept (`fill_hold_votes`).
    fn hold_of(&self, store: &ClusterStore, key: &Name, now: Time) -> Option<Option<Time>> {
        let z = self.zones.get(key)?;
        if z.state != Some(ZoneState::FullDisruption) || self.all_zones_fully_disrupted() {
            return None;
        }
        let since = z.hold.full_since()?;
        match self.hold_vote(store, key)? {
            None => Some(None),
            Some(max) => {
                let until = since + max;
                (now < until).then_some(Some(until))
            }
        }
    }

    /// What the domain's members say of a hold (`Settings::domain_hold`): the vote kept, else
    /// a walk of the fleet.
    pub(super) fn hold_vote(
        &self,
        store: &ClusterStore,
        key: &Name,
    ) -> Option<crate::partitions::HoldFor> {
        match self.zones.get(key).and_then(|z| z.hold.vote()) {
            Some(vote) => {
                if cfg!(debug_assertions) && self.nodes.len() <= 2_000 {
                    let walked = self.settings.domain_hold(self.members_of(store, key));
                    assert_eq!(vote, walked, "the kept hold vote of {key:?}");
                }
                vote
            }
            None => self.settings.domain_hold(self.members_of(store, key)),
        }
    }

    fn members_of<'a>(
        &'a self,
        store: &'a ClusterStore,
        key: &'a Name,
    ) -> impl Iterator<Item = &'a Node> + 'a {
        self.nodes
            .iter()
            .filter(move |(_, e)| e.registered && e.zone == *key)
            .filter_map(|(n, _)| store.node(n))
    }

    /// Takes the members' vote of every fully disrupted domain that has none kept, in one walk
    /// of the fleet: after a node joined, left or changed labels, not at every zone change.
    fn fill_hold_votes(&mut self, store: &ClusterStore) {
        let wanted: BTreeSet<Name> = self
            .zones
            .iter()
            .filter(|(_, z)| z.state == Some(ZoneState::FullDisruption) && z.hold.vote().is_none())
            .map(|(k, _)| k.clone())
            .collect();
        if wanted.is_empty() {
            return;
        }
        self.tally.walks.hold_votes += 1;
        let mut members: BTreeMap<&Name, Vec<&Node>> = BTreeMap::new();
        for (name, e) in self.nodes.iter() {
            if e.registered
                && wanted.contains(&e.zone)
                && let Some(node) = store.node(name)
            {
                members.entry(&e.zone).or_default().push(node);
            }
        }
        let votes: Vec<(Name, Option<crate::partitions::HoldFor>)> = wanted
            .iter()
            .map(|k| {
                let m = members.get(k).map(Vec::as_slice).unwrap_or_default();
                (k.clone(), self.settings.domain_hold(m.iter().copied()))
            })
            .collect();
        for (k, vote) in votes {
            if let Some(z) = self.zones.get_mut(&k) {
                z.hold.keep_vote(vote);
            }
        }
    }

    /// A node joined, left or changed labels (or the settings changed): every domain's vote is
    /// taken again when next needed.
    pub(super) fn hold_votes_changed(&mut self) {
        for z in self.zones.values_mut() {
            z.hold.forget_vote();
        }
    }

    /// Brings every domain's hold up to date; entering and leaving are decision lines.
    pub(super) fn refresh_holds(&mut self, store: &ClusterStore, now: Time) {
        if self.settings.never_holds() && !self.zones.values().any(|z| z.hold.held()) {
            return;
        }
        self.fill_hold_votes(store);
        let keys: Vec<Name> = self.zones.keys().cloned().collect();
        for key in keys {
            let hold = self.hold_of(store, &key, now);
            let all_down = self.all_zones_fully_disrupted();
            let never_holds = self.settings.never_holds();
            let Some(z) = self.zones.get_mut(&key) else {
                continue;
            };
            let entered = hold.is_some() && !z.hold.held();
            if !z.hold.set(hold) {
                continue;
            }
            let end = if z.hold.held() {
                None
            } else if z.state != Some(ZoneState::FullDisruption) {
                Some(HoldEnd::Recovered)
            } else if all_down {
                Some(HoldEnd::AllDown)
            } else if never_holds || z.hold.full_since().is_none() {
                Some(HoldEnd::Settings)
            } else {
                Some(HoldEnd::HoldMax)
            };
            if entered || end.is_some() {
                self.decisions.push(Decision::DomainHold {
                    zone: key.clone(),
                    until: hold.flatten(),
                    end,
                });
            }
        }
    }
}

pub(crate) use crate::decisions::HoldEnd;
