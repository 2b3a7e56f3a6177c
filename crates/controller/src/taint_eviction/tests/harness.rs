//! A virtual clock, builders and taint eviction's view of the one fake API, so each upstream
//! case is a few lines.

use std::rc::Rc;
use std::time::Duration;

use super::super::{EvictionResult, TaintEviction};
use crate::events::Event;
use crate::model::{
    ClusterStore, Name, Node, Pod, PodKey, Taint, TaintEffect, Toleration, TolerationOperator,
    taint_keys,
};
use crate::testing::{EvictionAnswer, FakeApi};
use crate::time::Time;
use crate::{Action, ActionId, Controllers, Input, Settings};

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
        labels: Default::default(),
        taints,
        unschedulable: false,
        conditions: Vec::new(),
        other_conditions: Vec::new(),
        autonomy: Default::default(),
        maintenance: Default::default(),
        writers: Default::default(),
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
pub type ApiAnswer = EvictionAnswer;

/// Every action with the virtual time it was emitted at.
#[derive(Clone, Debug, PartialEq)]
pub struct Logged {
    pub at: Time,
    pub action: Action,
}

/// Taint eviction's view of the one fake API (`controller::testing::FakeApi`), over
/// `Controllers::taint_eviction_alone`. Why alone: these suites port upstream's
/// `taint_eviction_test.go`, which runs the taint eviction controller with no node lifecycle
/// controller; their nodes carry the tests' own taints and no heartbeat, which the node
/// lifecycle would judge and taint itself. The composed machine is tested in
/// `controller/tests/lifecycle_with_eviction/`.
///
/// The machine starts (its initial sync) at the first node change, or when `found_at_start`
/// says the nodes listed so far were there at the start: pods stored before that are judged
/// then, as upstream's informers deliver them before the controller runs.
pub struct Harness {
    api: FakeApi,
    pub now: Time,
    /// How the fake API server answers each `EvictPod` (at once, same instant).
    pub answer: Box<ApiAnswer>,
    /// Actions already handed out by `take`.
    taken: usize,
}

impl Harness {
    pub fn new() -> Harness {
        let settings = Settings {
            // `TaintEviction::new`'s own default; `set_autonomy` turns it on.
            autonomy: false,
            ..Settings::default()
        };
        let now = start();
        Harness {
            api: FakeApi::over(Controllers::taint_eviction_alone(settings, now), now),
            now,
            answer: Box::new(|_, _| Some(EvictionResult::Deleted)),
            taken: 0,
        }
    }

    /// Runs `f` on the fake API at `now`, answering evictions with `answer`.
    fn on_api(&mut self, f: impl FnOnce(&mut FakeApi)) {
        self.api.now = self.now;
        let answer = std::mem::replace(&mut self.answer, Box::new(|_, _| None));
        self.api.eviction_answer = Some(answer);
        f(&mut self.api);
        if let Some(answer) = self.api.eviction_answer.take() {
            self.answer = answer;
        }
        self.now = self.api.now;
    }

    fn ensure_started(&mut self) {
        if !self.api.ctl.is_synced() {
            self.on_api(|api| api.feed(Input::InitialSyncDone));
        }
    }

    /// The machine under test.
    pub fn te(&self) -> &TaintEviction {
        self.api
            .ctl
            .eviction()
            .expect("taint eviction runs in these suites")
    }

    /// The cluster as the machine knows it.
    pub fn store(&self) -> &ClusterStore {
        self.api.ctl.store()
    }

    pub fn take_decisions(&mut self) -> Vec<crate::Decision> {
        self.api.ctl.take_decisions()
    }

    /// Edge autonomy on or off (config `autonomy`), as a reload.
    pub fn set_autonomy(&mut self, on: bool) {
        self.ensure_started();
        let settings = Settings {
            autonomy: on,
            ..Settings::default()
        };
        self.on_api(|api| api.apply_settings(settings));
    }

    /// The API server stores `node` (with a new resourceVersion) and the watch delivers it.
    pub fn node(&mut self, node: &Node) {
        self.ensure_started();
        let node = node.clone();
        self.on_api(|api| api.put_node(node));
    }

    /// `node` was already there when this machine started (or took over): stored, then the
    /// initial sync judges it.
    pub fn found_at_start(&mut self, node: &Node) {
        let node = node.clone();
        self.on_api(|api| api.put_node(node));
        self.ensure_started();
    }

    pub fn delete_node(&mut self, name: &str) {
        self.ensure_started();
        self.on_api(|api| api.delete_node(name));
    }

    /// The API server stores `pod` (with a new resourceVersion) and the watch delivers it.
    pub fn pod(&mut self, pod: &Pod) {
        let pod = pod.clone();
        self.on_api(|api| api.put_pod(pod));
    }

    pub fn delete_pod(&mut self, name: &str) {
        self.ensure_started();
        self.on_api(|api| api.delete_pod(&key(name)));
    }

    pub fn result(&mut self, id: ActionId, result: EvictionResult) {
        self.ensure_started();
        self.on_api(|api| api.feed(Input::EvictionResult { id, result }));
    }

    /// The NoExecute taints of `node` in the store.
    pub fn node_taints(&self, node: &str) -> Option<Vec<Taint>> {
        self.store()
            .node(node)
            .map(|n| n.no_execute_taints().cloned().collect())
    }

    /// Moves the clock forward by `d`, waking exactly at every deadline on the way, as the
    /// event loop does with `next_deadline` as its poll timeout.
    pub fn advance(&mut self, d: Duration) {
        let target = self.now + d;
        while let Some(at) = self.api.ctl.next_deadline() {
            if at > target {
                break;
            }
            assert!(at >= self.now, "deadline {at} in the past of {}", self.now);
            self.now = at;
            self.on_api(|api| api.feed(Input::Tick));
        }
        self.now = target;
    }

    /// Every action emitted since the last `take`, then forgets them.
    pub fn take(&mut self) -> Vec<Logged> {
        let new = self.api.log[self.taken..]
            .iter()
            .map(|(at, action)| Logged {
                at: *at,
                action: action.clone(),
            })
            .collect();
        self.taken = self.api.log.len();
        new
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
