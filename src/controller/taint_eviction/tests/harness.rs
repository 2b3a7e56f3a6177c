//! A virtual clock and builders, so each upstream case is a few lines.

use std::rc::Rc;
use std::time::Duration;

use super::super::{EvictionAction, EvictionId, EvictionResult, TaintEviction};
use crate::controller::events::Event;
use crate::model::{
    Name, Node, Pod, PodKey, Taint, TaintEffect, Toleration, TolerationOperator, taint_keys,
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
    }
}

pub fn tolerating(mut p: Pod, tolerations: Vec<Toleration>) -> Pod {
    p.tolerations = tolerations.into();
    p
}

/// The fake API server: the result for attempt `n` of evicting a pod (`None`: answer later).
pub type ApiAnswer = dyn FnMut(&PodKey, u32) -> Option<EvictionResult>;

/// Every action with the virtual time it was emitted at.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Logged {
    pub at: Time,
    pub action: EvictionAction,
}

pub struct Harness {
    pub te: TaintEviction,
    pub now: Time,
    /// Everything emitted since the last `take`.
    pub log: Vec<Logged>,
    /// How the fake API server answers each `EvictPod` (at once, same instant).
    pub answer: Box<ApiAnswer>,
    out: Vec<EvictionAction>,
}

impl Harness {
    pub fn new() -> Harness {
        Harness {
            te: TaintEviction::new(),
            now: start(),
            log: Vec::new(),
            answer: Box::new(|_, _| Some(EvictionResult::Deleted)),
            out: Vec::new(),
        }
    }

    pub fn node(&mut self, node: &Node) {
        self.te.node_upserted(node, self.now, &mut self.out);
        self.settle();
    }

    pub fn delete_node(&mut self, name: &str) {
        self.te.node_deleted(name, self.now, &mut self.out);
        self.settle();
    }

    pub fn pod(&mut self, pod: &Pod) {
        self.te.pod_upserted(pod, self.now, &mut self.out);
        self.settle();
    }

    pub fn delete_pod(&mut self, name: &str) {
        self.te.pod_deleted(&key(name), self.now, &mut self.out);
        self.settle();
    }

    pub fn result(&mut self, id: EvictionId, result: EvictionResult) {
        self.te.eviction_result(id, result, self.now, &mut self.out);
        self.settle();
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
            self.te.tick(self.now, &mut self.out);
            self.settle();
        }
        self.now = target;
    }

    /// Logs new actions and answers evictions through `answer` until nothing new comes out.
    fn settle(&mut self) {
        while !self.out.is_empty() {
            let batch = std::mem::take(&mut self.out);
            for action in batch {
                if let EvictionAction::EvictPod {
                    id, pod, attempt, ..
                } = &action
                {
                    if let Some(result) = (self.answer)(pod, *attempt) {
                        self.te
                            .eviction_result(*id, result, self.now, &mut self.out);
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
                EvictionAction::EvictPod { pod, .. } => Some((l.at, pod.name.to_string())),
                EvictionAction::RecordEvent(_) => None,
            })
            .collect()
    }

    /// Event messages since the last `take`, then forgets every logged action.
    pub fn events(&mut self) -> Vec<String> {
        self.take()
            .into_iter()
            .filter_map(|l| match l.action {
                EvictionAction::RecordEvent(Event { message, .. }) => Some(message),
                EvictionAction::EvictPod { .. } => None,
            })
            .collect()
    }
}
