//! The two controllers composed ([`Controllers`]): the lifecycle's NoExecute taints reach taint
//! eviction through the watch, nothing is decided before the initial sync, a follower keeps
//! caches but no work, and legacy mode runs no taint eviction (`eviction.rs`); no decision on a
//! stale cache (`cache_hold.rs`). Here: the fake API they share.

use std::collections::{BTreeMap, VecDeque};

use crate::controller::Action;
use crate::controller::controllers::Controllers;
use crate::controller::events::Event;
use crate::controller::inputs::Input;
use crate::controller::settings::Settings;
use crate::controller::taint_eviction::EvictionResult;
use crate::controller::tests::harness::{lease, n};
use crate::controller::{ActionId, Outcome};
use crate::model::{
    Node, Pod, PodKey, Taint, TaintEffect, Toleration, TolerationOperator, taint_keys,
};
use crate::time::Time;

/// A fake API for the composed machine: node writes are applied and fed back through the
/// "watch" (that is how the lifecycle's NoExecute taints reach taint eviction), pod
/// evictions delete the pod.
pub(crate) struct Cluster {
    pub(crate) ctl: Controllers,
    pub(crate) now: Time,
    pub(crate) nodes: BTreeMap<crate::model::Name, Node>,
    pub(crate) pods: BTreeMap<PodKey, Pod>,
    /// (time, pod) of every eviction executed.
    pub(crate) evicted: Vec<(Time, PodKey)>,
    /// (time, event) of every event recorded.
    pub(crate) events: Vec<(Time, Event)>,
    /// (time, node, taints) of every taint write sent.
    pub(crate) taint_writes: Vec<(Time, crate::model::Name, Vec<Taint>)>,
    /// A second daemon standing by (never told `InitialSyncDone`): it gets every watch event
    /// the leader gets, and must decide nothing.
    pub(crate) standby: Option<Controllers>,
    /// A node just written, delivered by the "watch" before the write's result.
    pending_node: Option<Node>,
    /// Deliver a taint write's answer before the watch echoes the node (the usual order
    /// over HTTP: the response comes back before the watch event).
    answer_first: bool,
    rv: u64,
}

impl Cluster {
    pub(crate) fn new(settings: Settings, now: Time) -> Cluster {
        Cluster {
            ctl: Controllers::new(settings, now),
            now,
            nodes: BTreeMap::new(),
            pods: BTreeMap::new(),
            evicted: Vec::new(),
            events: Vec::new(),
            taint_writes: Vec::new(),
            standby: None,
            pending_node: None,
            answer_first: false,
            rv: 1,
        }
    }

    pub(crate) fn feed(&mut self, input: Input) {
        let mut inputs = VecDeque::from([input]);
        while let Some(input) = inputs.pop_front() {
            if let Some(standby) = self.standby.as_mut()
                && matches!(
                    input,
                    Input::NodeUpsert(_)
                        | Input::NodeDeleted(_)
                        | Input::LeaseUpsert(_)
                        | Input::LeaseDeleted(_)
                        | Input::PodUpsert(_)
                        | Input::PodDeleted(_)
                )
            {
                let decided = standby.handle(input.clone(), self.now);
                assert!(decided.is_empty(), "a standby decided {decided:?}");
            }
            for action in self.ctl.handle(input, self.now) {
                self.execute(action, &mut inputs);
            }
        }
    }

    fn write_node(&mut self, name: &str, change: impl FnOnce(&mut Node)) -> Outcome {
        let Some(mut node) = self.nodes.get(name).cloned() else {
            return Outcome::NotFound;
        };
        change(&mut node);
        self.rv += 1;
        node.resource_version = n(&self.rv.to_string());
        self.nodes.insert(node.name.clone(), node.clone());
        self.pending_node = Some(node);
        Outcome::Ok
    }

    fn execute(&mut self, action: Action, inputs: &mut VecDeque<Input>) {
        let result = |id: ActionId, outcome| Input::Result { id, outcome };
        match action {
            Action::UpdateNodeConditions {
                id,
                node,
                conditions,
                ..
            } => {
                let outcome = self.write_node(&node, |n| n.conditions = conditions);
                self.flush_node(inputs);
                inputs.push_back(result(id, outcome));
            }
            Action::PatchNodeTaints {
                id, node, taints, ..
            } => {
                self.taint_writes
                    .push((self.now, node.clone(), taints.clone()));
                let outcome = self.write_node(&node, |n| n.taints = taints);
                if self.answer_first {
                    inputs.push_back(result(id, outcome));
                    self.flush_node(inputs);
                } else {
                    self.flush_node(inputs);
                    inputs.push_back(result(id, outcome));
                }
            }
            Action::PatchNodeLabels { id, .. }
            | Action::MarkPodNotReady { id, .. }
            | Action::SetPodStatusNodeLost { id, .. }
            | Action::DeletePod { id, .. } => inputs.push_back(result(id, Outcome::Ok)),
            Action::ReadLease { id, node } => {
                let outcome = crate::controller::LeaseReadOutcome::Found(lease(&node, Time::ZERO));
                inputs.push_back(Input::LeaseRead { id, outcome });
            }
            Action::RecordEvent(event) => self.events.push((self.now, event)),
            // Fencing is off in these tests.
            Action::ReadFenceTarget { .. }
            | Action::PatchNodeFencing { .. }
            | Action::RunFenceCommand { .. } => {}
            Action::EvictPod { id, pod, .. } => {
                let result = match self.pods.remove(&pod) {
                    Some(_) => {
                        self.evicted.push((self.now, pod.clone()));
                        inputs.push_back(Input::PodDeleted(pod));
                        EvictionResult::Deleted
                    }
                    None => EvictionResult::NotFound,
                };
                inputs.push_back(Input::EvictionResult { id, result });
            }
        }
    }

    fn flush_node(&mut self, inputs: &mut VecDeque<Input>) {
        if let Some(node) = self.pending_node.take() {
            inputs.push_back(Input::NodeUpsert(node));
        }
    }

    pub(crate) fn put_node(&mut self, node: Node) {
        self.nodes.insert(node.name.clone(), node.clone());
        self.feed(Input::NodeUpsert(node));
    }

    pub(crate) fn put_pod(&mut self, pod: Pod) {
        self.pods.insert(pod.key.clone(), pod.clone());
        self.feed(Input::PodUpsert(pod));
    }

    pub(crate) fn run_until(&mut self, until: Time) {
        while let Some(t) = self.ctl.next_deadline() {
            if t > until {
                break;
            }
            self.now = self.now.max(t);
            self.feed(Input::Tick);
        }
        self.now = until;
    }

    pub(crate) fn evicted_names(&self) -> Vec<String> {
        self.evicted
            .iter()
            .map(|(_, p)| p.name.to_string())
            .collect()
    }
}

pub(crate) fn tolerating_unreachable(seconds: Option<i64>) -> Toleration {
    Toleration {
        key: n(taint_keys::UNREACHABLE),
        operator: TolerationOperator::Exists,
        value: n(""),
        effect: Some(TaintEffect::NoExecute),
        toleration_seconds: seconds,
    }
}

pub(crate) fn with_tolerations(mut p: Pod, t: Vec<Toleration>) -> Pod {
    p.tolerations = t.into();
    p
}

mod cache_hold;
mod eviction;
