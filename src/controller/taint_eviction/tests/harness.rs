//! A virtual clock and builders, so each upstream case is a few lines.

use std::rc::Rc;
use std::time::Duration;

use super::super::{EvictionResult, TaintEviction};
use crate::controller::events::Event;
use crate::controller::{Action, ActionId};
use crate::controller::{Input, Observed};
use crate::model::{
    ClusterStore, Name, Node, Pod, PodKey, PodUpsert, Taint, TaintEffect, Toleration,
    TolerationOperator, Upserted, taint_keys,
};
use crate::time::Time;

pub fn n(s: &str) -> Name {
    Name::from(s)
}

pub fn key(name: &str) -> PodKey {
    PodKey {
        namespace: n("default"),
        name: n(name),
    }
}

pub const SEC: Duration = Duration::from_secs(1);
pub const MS: Duration = Duration::from_millis(1);

/// 2015-01-01T12:00:00Z, upstream's `fakeNow`.
pub fn start() -> Time {
    Time::parse_rfc3339("2015-01-01T12:00:00Z").expect("valid stamp")
}

/// Upstream's `createNoExecuteTaint(i)`: `testTaint{i}=test{i}:NoExecute`.
pub fn taint(i: u32, time_added: Time) -> Taint {
    Taint {
        key: n(&format!("testTaint{i}")),
        value: n(&format!("test{i}")),
        effect: TaintEffect::NoExecute,
        time_added: Some(time_added),
    }
}

pub fn no_execute(key: &str) -> Taint {
    Taint {
        key: n(key),
        value: n(""),
        effect: TaintEffect::NoExecute,
        time_added: None,
    }
}

/// Upstream's `addToleration(pod, i, secs)`: tolerates `testTaint{i}=test{i}:NoExecute`;
/// negative `secs` means forever.
pub fn toleration(i: u32, secs: i64) -> Toleration {
    Toleration {
        key: n(&format!("testTaint{i}")),
        operator: TolerationOperator::Equal,
        value: n(&format!("test{i}")),
        effect: Some(TaintEffect::NoExecute),
        toleration_seconds: (secs >= 0).then_some(secs),
    }
}

/// What the API server's DefaultTolerationSeconds admission adds (or a user writes):
/// `Exists` on the not-ready and unreachable NoExecute taints for `secs`.
pub fn default_tolerations(secs: Option<i64>) -> Vec<Toleration> {
    [taint_keys::NOT_READY, taint_keys::UNREACHABLE]
        .into_iter()
        .map(|k| Toleration {
            key: n(k),
            operator: TolerationOperator::Exists,
            value: n(""),
            effect: Some(TaintEffect::NoExecute),
            toleration_seconds: secs,
        })
        .collect()
}

pub fn node(name: &str, taints: Vec<Taint>) -> Node {
    Node {
        name: n(name),
        uid: n(&format!("uid-{name}")),
        resource_version: n("1"),
        creation_timestamp: start(),
        labels: Vec::new(),
        taints,
        unschedulable: false,
        conditions: Vec::new(),
        other_conditions: Vec::new(),
        autonomy: Default::default(),
        maintenance: Default::default(),
    }
}

/// Upstream's `testutil.NewPod(name, host)`; an empty host is an unscheduled pod.
pub fn pod(name: &str, host: &str) -> Pod {
    Pod {
        key: key(name),
        uid: n(&format!("uid-{name}")),
        resource_version: n("1"),
        node_name: (!host.is_empty()).then(|| n(host)),
        ready: None,
        tolerations: Rc::from(Vec::new()),
        deleting: false,
        daemonset_owned: false,
        disruption_target: false,
        creation_timestamp: None,
    }
}

pub fn tolerating(mut p: Pod, tolerations: Vec<Toleration>) -> Pod {
    p.tolerations = tolerations.into();
    p
}

/// The fake API server: the result for attempt `n` of evicting a pod (`None`: answer later).
pub type ApiAnswer = dyn FnMut(&PodKey, u32) -> Option<EvictionResult>;

/// Every action with the virtual time it was emitted at.
#[derive(Clone, Debug, PartialEq)]
pub struct Logged {
    pub at: Time,
    pub action: Action,
}

pub struct Harness {
    pub te: TaintEviction,
    /// The cluster as known: the machine reads nodes and pods from here.
    pub store: ClusterStore,
    rv: u64,
    pub now: Time,
    /// Everything emitted since the last `take`.
    pub log: Vec<Logged>,
    /// How the fake API server answers each `EvictPod` (at once, same instant).
    pub answer: Box<ApiAnswer>,
    out: Vec<Action>,
}

impl Harness {
    pub fn new() -> Harness {
        Harness {
            te: TaintEviction::new(),
            store: ClusterStore::new(),
            rv: 1,
            now: start(),
            log: Vec::new(),
            answer: Box::new(|_, _| Some(EvictionResult::Deleted)),
            out: Vec::new(),
        }
    }

    /// The API server stores `node` (with a new resourceVersion) and the watch delivers it.
    pub fn node(&mut self, node: &Node) {
        let name = node.name.clone();
        let mut node = node.clone();
        node.resource_version = self.next_rv();
        if let Upserted::Changed { before } = self.store.upsert_node(node) {
            let changed = Observed::Node { name, before };
            self.te
                .decide(&self.store, &changed, self.now, &mut self.out);
        }
        self.settle();
    }

    /// `node` was already there when this machine started (or took over): stored, then the
    /// initial sync judges it.
    pub fn found_at_start(&mut self, node: &Node) {
        let mut node = node.clone();
        node.resource_version = self.next_rv();
        self.store.upsert_node(node);
        self.te.initial_sync(&self.store, self.now, &mut self.out);
        self.settle();
    }

    pub fn delete_node(&mut self, name: &str) {
        if let Some(node) = self.store.remove_node(name) {
            let gone = Observed::NodesGone(vec![node]);
            self.te.decide(&self.store, &gone, self.now, &mut self.out);
        }
        self.settle();
    }

    /// The API server stores `pod` (with a new resourceVersion) and the watch delivers it.
    pub fn pod(&mut self, pod: &Pod) {
        let mut pod = pod.clone();
        pod.resource_version = self.next_rv();
        if let PodUpsert::Changed(change) = self.store.upsert_pod(pod) {
            let changed = Observed::Pod(change);
            self.te
                .decide(&self.store, &changed, self.now, &mut self.out);
        }
        self.settle();
    }

    pub fn delete_pod(&mut self, name: &str) {
        let node = self.store.remove_pod(&key(name)).flatten();
        let gone = Observed::PodsGone(vec![(key(name), node)]);
        self.te.decide(&self.store, &gone, self.now, &mut self.out);
        self.settle();
    }

    pub fn result(&mut self, id: ActionId, result: EvictionResult) {
        let answer = Observed::Input(Input::EvictionResult { id, result });
        self.te
            .decide(&self.store, &answer, self.now, &mut self.out);
        self.settle();
    }

    fn next_rv(&mut self) -> Name {
        self.rv += 1;
        n(&self.rv.to_string())
    }

    /// The NoExecute taints of `node` in the store.
    pub fn node_taints(&self, node: &str) -> Option<Vec<Taint>> {
        self.store
            .node(node)
            .map(|n| n.no_execute_taints().cloned().collect())
    }

    /// Moves the clock forward by `d`, waking exactly at every deadline on the way, as the
    /// event loop does with `next_deadline` as its poll timeout.
    pub fn advance(&mut self, d: Duration) {
        let target = self.now + d;
        while let Some(at) = self.te.next_deadline() {
            if at > target {
                break;
            }
            assert!(at >= self.now, "deadline {at} in the past of {}", self.now);
            self.now = at;
            let tick = Observed::Input(Input::Tick);
            self.te.decide(&self.store, &tick, self.now, &mut self.out);
            self.settle();
        }
        self.now = target;
    }

    /// Logs new actions and answers evictions through `answer` until nothing new comes out.
    fn settle(&mut self) {
        while !self.out.is_empty() {
            let batch = std::mem::take(&mut self.out);
            for action in batch {
                if let Action::EvictPod {
                    id, pod, attempt, ..
                } = &action
                {
                    if let Some(result) = (self.answer)(pod, *attempt) {
                        let answer = Observed::Input(Input::EvictionResult { id: *id, result });
                        self.te
                            .decide(&self.store, &answer, self.now, &mut self.out);
                    }
                }
                self.log.push(Logged {
                    at: self.now,
                    action,
                });
            }
        }
    }

    pub fn take(&mut self) -> Vec<Logged> {
        std::mem::take(&mut self.log)
    }

    /// `(time, pod name)` of every eviction attempt since the last `take`, then forgets them.
    pub fn evicted(&mut self) -> Vec<(Time, String)> {
        self.take()
            .into_iter()
            .filter_map(|l| match l.action {
                Action::EvictPod { pod, .. } => Some((l.at, pod.name.to_string())),
                _ => None,
            })
            .collect()
    }

    /// Event messages since the last `take`, then forgets every logged action.
    pub fn events(&mut self) -> Vec<String> {
        self.take()
            .into_iter()
            .filter_map(|l| match l.action {
                Action::RecordEvent(Event { message, .. }) => Some(message),
                _ => None,
            })
            .collect()
    }
}
