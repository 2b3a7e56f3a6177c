//! What the suites assert on: the API's objects and the log of actions the controllers returned.

use crate::events::{Event, EventObject};
use crate::model::{ConditionStatus, Name, NodeCondition, Taint, TaintEffect};
use crate::time::Time;
use crate::{Action, StateDump, ZoneState};

use super::FakeApi;

impl FakeApi {
    /// The node lifecycle's state dump at `now`.
    pub fn dump(&self) -> StateDump {
        self.ctl.dump(self.now).0
    }

    pub fn zone_state(&self, region: &str, zone: &str) -> Option<ZoneState> {
        let key = if region.is_empty() && zone.is_empty() {
            String::new()
        } else {
            format!("{region}:\x00:{zone}")
        };
        self.dump()
            .zones
            .iter()
            .find(|z| *z.key == key)
            .and_then(|z| z.state)
    }

    pub fn status_writes(&self) -> Vec<(Time, Name, Vec<NodeCondition>)> {
        self.log
            .iter()
            .filter_map(|(t, a)| match a {
                Action::UpdateNodeConditions {
                    node, conditions, ..
                } => Some((*t, node.clone(), conditions.clone())),
                _ => None,
            })
            .collect()
    }

    /// The times `MarkPodNotReady` was sent for pod `name`.
    pub fn pod_marks(&self, name: &str) -> Vec<Time> {
        self.log
            .iter()
            .filter_map(|(t, a)| match a {
                Action::MarkPodNotReady { pod, .. } if &*pod.name == name => Some(*t),
                _ => None,
            })
            .collect()
    }

    /// (time, node, taints) of every taint write sent.
    pub fn taint_writes(&self) -> Vec<(Time, Name, Vec<Taint>)> {
        self.log
            .iter()
            .filter_map(|(t, a)| match a {
                Action::PatchNodeTaints { node, taints, .. } => {
                    Some((*t, node.clone(), taints.clone()))
                }
                _ => None,
            })
            .collect()
    }

    /// The times of taint writes of `node` whose list holds `key` with `effect`.
    pub fn taint_writes_with(&self, node: &str, key: &str, effect: TaintEffect) -> Vec<Time> {
        self.taint_writes()
            .into_iter()
            .filter(|(_, n, taints)| {
                &**n == node && taints.iter().any(|x| &*x.key == key && x.effect == effect)
            })
            .map(|(t, _, _)| t)
            .collect()
    }

    pub fn pod_status_updates(&self) -> usize {
        self.log
            .iter()
            .filter(|(_, a)| matches!(a, Action::MarkPodNotReady { .. }))
            .count()
    }

    pub fn lease_reads(&self) -> usize {
        self.log
            .iter()
            .filter(|(_, a)| matches!(a, Action::ReadLease { .. }))
            .count()
    }

    /// (time, event) of every event recorded.
    pub fn timed_events(&self) -> Vec<(Time, Event)> {
        self.log
            .iter()
            .filter_map(|(t, a)| match a {
                Action::RecordEvent(e) => Some((*t, e.clone())),
                _ => None,
            })
            .collect()
    }

    pub fn events(&self) -> Vec<Event> {
        self.timed_events().into_iter().map(|(_, e)| e).collect()
    }

    pub fn node_events(&self) -> Vec<(String, &'static str, String)> {
        self.events()
            .into_iter()
            .filter_map(|e| match e.object {
                EventObject::Node { name, .. } => Some((name.to_string(), e.reason, e.message)),
                EventObject::Pod { .. } => None,
            })
            .collect()
    }

    /// The names of the pods evicted, in order.
    pub fn evicted_names(&self) -> Vec<String> {
        self.evicted
            .iter()
            .map(|(_, p)| p.name.to_string())
            .collect()
    }

    /// A node's taints in the API; none for a node it does not hold.
    pub fn taints(&self, node: &str) -> Vec<(String, TaintEffect)> {
        self.nodes
            .get(node)
            .map(|n| {
                n.taints
                    .iter()
                    .map(|t| (t.key.to_string(), t.effect.clone()))
                    .collect()
            })
            .unwrap_or_default()
    }

    pub fn has_taint(&self, node: &str, key: &str, effect: TaintEffect) -> bool {
        self.nodes
            .get(node)
            .is_some_and(|n| n.has_taint(key, &effect))
    }

    pub fn ready_of(&self, node: &str) -> Option<ConditionStatus> {
        self.nodes
            .get(node)
            .and_then(|n| n.ready().map(|c| c.status))
    }
}
