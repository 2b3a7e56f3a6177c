//! The fake API server and its feedback loop (the modes: `testing/mod.rs`).

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use crate::inputs::EvictionResult;
use crate::model::{
    ConditionStatus, ConditionText, Lease, Name, Node, NodeCondition, NodeConditionType, Pod,
    PodKey,
};
use crate::time::Time;
use crate::{
    Action, ActionId, Controllers, Input, LeaseReadOutcome, NODE_LOST_REASON, Outcome, Settings,
};

pub use super::faults::Faults;

/// How often a live kubelet renews its Lease and posts status in `run_until`.
const KUBELET_PERIOD: std::time::Duration = std::time::Duration::from_secs(10);

/// The order in which a successful write's answer and its watch echo reach the controllers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum EchoOrder {
    /// The written object, then the answer (the live executor's order).
    #[default]
    EchoFirst,
    /// The answer, then the written object.
    AnswerFirst,
    /// The answer alone; the echo waits in `late` until `deliver_late`.
    AnswerOnly,
}

/// What the fake API delivers to the controllers passes through this first (`FakeApi::wire`).
pub type Wire = dyn FnMut(Input) -> Input;

/// How a test answers evictions itself (`FakeApi::eviction_answer`).
pub type EvictionAnswer = dyn FnMut(&PodKey, u32) -> Option<EvictionResult>;

pub struct FakeApi {
    pub ctl: Controllers,
    pub now: Time,
    pub nodes: BTreeMap<Name, Node>,
    pub leases: BTreeMap<Name, Lease>,
    pub pods: BTreeMap<PodKey, Pod>,
    /// Node annotations fencing writes and reads (the `Node` model does not keep them).
    pub annotations: BTreeMap<Name, BTreeMap<String, String>>,
    /// Pod `status.reason` as written (legacy NodeLost).
    pub pod_reasons: BTreeMap<PodKey, String>,
    /// Every action the controllers returned, with the time it was returned.
    pub log: Vec<(Time, Action)>,
    /// How many writes were answered 409 (a stale resourceVersion).
    pub conflicts: usize,
    /// (time, pod) of every eviction that deleted a pod.
    pub evicted: Vec<(Time, PodKey)>,
    /// Fence commands started and not yet ended (`exit_fence`).
    pub running: Vec<(ActionId, Name)>,
    pub faults: Faults,
    pub echo: EchoOrder,
    /// Echoes held back by [`EchoOrder::AnswerOnly`], oldest first.
    pub late: Vec<Input>,
    /// A second daemon standing by (never told `InitialSyncDone`): it gets every watch event
    /// the leader gets, and must decide nothing.
    pub standby: Option<Controllers>,
    /// An eviction deletes the pod at once (`true`, the default: its kubelet confirms in no
    /// time); `false`: the pod stays, terminating, until the test deletes it (its node's
    /// kubelet is down, as on a node fencing powers off).
    pub evictions_remove: bool,
    /// When set, it answers every eviction instead: the result for attempt `n` of evicting a
    /// pod, `None` for no answer (the test feeds one later); the pod is left as it is (taint
    /// eviction's own suites: what the machine does with the answer alone).
    pub eviction_answer: Option<Box<EvictionAnswer>>,
    /// Nodes whose kubelet is up while time runs (`run_until`): it renews its Lease and posts
    /// its Ready condition every 10 s.
    pub alive: BTreeSet<Name>,
    /// Kubelets of `alive` that post Ready=False (alive, not ready).
    pub reporting_not_ready: BTreeSet<Name>,
    /// Actions wait here unanswered, oldest first, while `hold_answers` is set, until
    /// [`FakeApi::answer_held`] answers one (record events are not held: nothing answers them).
    pub held: Vec<Action>,
    /// Hold every action instead of executing it (a script picks which to answer, when, and
    /// how: the randomized controller runs in `tests/fuzz_support/controller/`).
    pub hold_answers: bool,
    /// Every input goes through it before the controllers see it (the randomized runs render
    /// objects to JSON and decode them, as a watch delivers them).
    pub wire: Option<Box<Wire>>,
    /// When set, the controllers' decisions are taken after every turn and kept here, each
    /// with the length `log` had before that turn's actions (so decisions and actions can be
    /// told in the order they came); when not, they stay in the controllers.
    pub decisions: Option<Vec<(usize, Time, crate::Decision)>>,
    /// Print every input and action (replaying a randomized run's finding).
    pub trace: bool,
    /// The object the action being executed wrote (or re-read after a conflict).
    pending_echo: Option<Input>,
    rv: u64,
}

impl FakeApi {
    /// The composed controllers as the daemon runs them.
    pub fn new(settings: Settings, now: Time) -> FakeApi {
        FakeApi::over(Controllers::new(settings, now), now)
    }

    /// Any controllers (e.g. `Controllers::without_taint_eviction`), empty API.
    pub fn over(ctl: Controllers, now: Time) -> FakeApi {
        FakeApi {
            ctl,
            now,
            nodes: BTreeMap::new(),
            leases: BTreeMap::new(),
            pods: BTreeMap::new(),
            annotations: BTreeMap::new(),
            pod_reasons: BTreeMap::new(),
            log: Vec::new(),
            conflicts: 0,
            evicted: Vec::new(),
            running: Vec::new(),
            faults: Faults::default(),
            echo: EchoOrder::default(),
            late: Vec::new(),
            standby: None,
            evictions_remove: true,
            eviction_answer: None,
            alive: BTreeSet::new(),
            reporting_not_ready: BTreeSet::new(),
            held: Vec::new(),
            hold_answers: false,
            wire: None,
            decisions: None,
            trace: false,
            pending_echo: None,
            rv: 1,
        }
    }

    /// Lists `leases`, `pods` and `nodes` (in that order) and finishes the initial sync at
    /// `now` (upstream: stores synced, first `monitorNodeHealth`).
    pub fn start(&mut self, nodes: Vec<Node>, pods: Vec<Pod>, leases: Vec<Lease>) {
        for l in leases {
            self.put_lease(l);
        }
        for p in pods {
            self.put_pod(p);
        }
        for node in nodes {
            self.put_node(node);
        }
        self.feed(Input::InitialSyncDone);
    }

    fn next_rv(&mut self) -> Name {
        self.rv += 1;
        Name::from(self.rv.to_string())
    }

    /// Creates or replaces a node in the API (new resourceVersion; the watch delivers it).
    pub fn put_node(&mut self, mut node: Node) {
        node.resource_version = self.next_rv();
        self.nodes.insert(node.name.clone(), node.clone());
        self.feed(Input::NodeUpsert(node));
    }

    /// Replaces a node's status conditions (the kubelet posting status).
    pub fn set_conditions(&mut self, name: &str, conditions: Vec<NodeCondition>) {
        if let Some(mut node) = self.nodes.get(name).cloned() {
            node.conditions = conditions;
            self.put_node(node);
        }
    }

    pub fn delete_node(&mut self, name: &str) {
        self.nodes.remove(name);
        self.feed(Input::NodeDeleted(Name::from(name)));
    }

    pub fn delete_lease(&mut self, name: &str) {
        self.leases.remove(name);
        self.feed(Input::LeaseDeleted(Name::from(name)));
    }

    pub fn put_lease(&mut self, mut l: Lease) {
        l.resource_version = self.next_rv().into();
        self.leases.insert(Name::from(&*l.name), l.clone());
        self.feed(Input::LeaseUpsert(l));
    }

    pub fn put_pod(&mut self, mut p: Pod) {
        p.resource_version = self.next_rv();
        self.pods.insert(p.key.clone(), p.clone());
        self.feed(Input::PodUpsert(p));
    }

    pub fn delete_pod(&mut self, key: &PodKey) {
        self.pods.remove(key);
        self.feed(Input::PodDeleted(key.clone()));
    }

    /// Moves the clock without firing timers (upstream tests jump `now` between passes).
    pub fn jump(&mut self, d: std::time::Duration) {
        self.now += d;
    }

    /// Fires every timer due at `now`, in deadline order, all at `now`.
    pub fn tick(&mut self) {
        while self.ctl.next_deadline().is_some_and(|t| t <= self.now) {
            self.feed(Input::Tick);
        }
    }

    /// Lets virtual time run to `until`, firing each timer at its own deadline; the kubelets
    /// of `alive` post every 10 s on the way and at `until`.
    pub fn run_until(&mut self, until: Time) {
        if self.alive.is_empty() {
            self.fire_until(until);
            return;
        }
        while self.now < until {
            let step = (self.now + KUBELET_PERIOD).min(until);
            self.fire_until(step);
            self.kubelets_post();
        }
    }

    fn fire_until(&mut self, until: Time) {
        while let Some(t) = self.ctl.next_deadline() {
            if t > until {
                break;
            }
            self.now = self.now.max(t);
            self.feed(Input::Tick);
        }
        self.now = self.now.max(until);
    }

    /// Every live kubelet renews its Lease and posts its Ready condition at `now` (the
    /// transition time kept while the status does not change).
    fn kubelets_post(&mut self) {
        let alive: Vec<Name> = self.alive.iter().cloned().collect();
        for name in alive {
            let mut lease = self.leases.get(&name).cloned().unwrap_or_else(|| Lease {
                name: (&*name).into(),
                renew_time: None,
                duration_seconds: None,
                resource_version: "1".into(),
            });
            lease.renew_time = Some(self.now);
            self.put_lease(lease);
            let status = if self.reporting_not_ready.contains(&name) {
                ConditionStatus::False
            } else {
                ConditionStatus::True
            };
            let Some(mut node) = self.nodes.get(&name).cloned() else {
                continue;
            };
            let since = node
                .ready()
                .filter(|c| c.status == status)
                .and_then(|c| c.last_transition_time)
                .unwrap_or(self.now);
            node.conditions = vec![NodeCondition {
                kind: NodeConditionType::Ready,
                status,
                last_heartbeat_time: Some(self.now),
                last_transition_time: Some(since),
                text: ConditionText::new(None, None),
            }];
            self.put_node(node);
        }
    }

    pub fn run_for(&mut self, d: std::time::Duration) {
        let until = self.now + d;
        self.run_until(until);
    }

    /// Upstream `doNoExecuteTaintingPass` right after a pass: our tainting pass runs 100 ms later.
    /// (Our buckets give at most one token per millisecond: upstream's "unlimited" 100000 QPS
    /// takes a few virtual milliseconds to drain a queue.)
    pub fn tainting_pass(&mut self) {
        self.run_for(std::time::Duration::from_millis(100));
    }

    /// A config reload at `now`: its actions are executed like any others.
    pub fn apply_settings(&mut self, settings: Settings) {
        let actions = self.ctl.apply_settings(settings, self.now);
        self.run_actions(actions);
    }

    /// The echoes [`EchoOrder::AnswerOnly`] held back arrive now, oldest first.
    pub fn deliver_late(&mut self) {
        for input in std::mem::take(&mut self.late) {
            self.feed(input);
        }
    }

    /// A fence command ends: the first one running for `name`, after `took`.
    pub fn exit_fence(
        &mut self,
        name: &str,
        outcome: crate::inputs::FenceOutcome,
        took: std::time::Duration,
    ) {
        let Some(at) = self.running.iter().position(|(_, node)| &**node == name) else {
            return;
        };
        let (id, _) = self.running.remove(at);
        self.feed(Input::FenceExited { id, outcome, took });
    }

    /// Feeds one input, executes the returned actions against the fake API and feeds their
    /// results back until nothing is left.
    pub fn feed(&mut self, input: Input) {
        let mut inputs = VecDeque::from([input]);
        while let Some(input) = inputs.pop_front() {
            let input = match self.wire.as_mut() {
                Some(wire) => wire(input),
                None => input,
            };
            if self.trace {
                eprintln!("{:?} <- {input:?}", self.now);
            }
            self.tell_standby(&input);
            let actions = self.ctl.handle(input, self.now);
            if let Some(kept) = self.decisions.as_mut() {
                let (at, now) = (self.log.len(), self.now);
                kept.extend(self.ctl.take_decisions().into_iter().map(|d| (at, now, d)));
            }
            for action in actions {
                if self.trace {
                    eprintln!("{:?} -> {action:?}", self.now);
                }
                // Nothing answers a record event; a fence command is held in `running`.
                let answerless = matches!(
                    action,
                    Action::RecordEvent(_) | Action::RunFenceCommand { .. }
                );
                if self.hold_answers && !answerless {
                    self.log.push((self.now, action.clone()));
                    self.held.push(action);
                } else {
                    self.execute(action, &mut inputs);
                }
            }
        }
    }

    /// Executes actions the controllers returned outside `feed` (a reload), and what follows.
    pub fn run_actions(&mut self, actions: Vec<Action>) {
        let mut inputs = VecDeque::new();
        for action in actions {
            self.execute(action, &mut inputs);
        }
        while let Some(input) = inputs.pop_front() {
            self.feed(input);
        }
    }

    fn tell_standby(&mut self, input: &Input) {
        let Some(standby) = self.standby.as_mut() else {
            return;
        };
        if matches!(
            input,
            Input::NodeUpsert(_)
                | Input::NodeDeleted(_)
                | Input::LeaseUpsert(_)
                | Input::LeaseDeleted(_)
                | Input::PodUpsert(_)
                | Input::PodDeleted(_)
        ) {
            let decided = standby.handle(input.clone(), self.now);
            assert!(decided.is_empty(), "a standby decided {decided:?}");
        }
    }

    pub(super) fn execute(&mut self, action: Action, inputs: &mut VecDeque<Input>) {
        self.log.push((self.now, action.clone()));
        let failed = |what: &str| Outcome::Failed(String::from(what));
        match action {
            Action::UpdateNodeConditions {
                id,
                node,
                resource_version,
                conditions,
                ..
            } => {
                let outcome = if self.faults.fail_node_status > 0 {
                    self.faults.fail_node_status -= 1;
                    failed("500 Internal Server Error")
                } else {
                    self.write_node(&node, Some(&resource_version), |n| {
                        n.conditions = conditions
                    })
                };
                self.answer(id, outcome, inputs);
            }
            Action::PatchNodeTaints {
                id,
                node,
                resource_version,
                taints,
                ..
            } => {
                let outcome = if self.faults.fail_taint_writes > 0 {
                    self.faults.fail_taint_writes -= 1;
                    failed("500 Internal Server Error")
                } else if self.faults.conflict_taint_writes > 0 {
                    self.faults.conflict_taint_writes -= 1;
                    // Another writer changed the node first: ours is stale.
                    match self.nodes.get(&node).cloned() {
                        Some(current) => {
                            let stale = current.resource_version.clone();
                            self.write_node(&node, None, |_| {});
                            self.write_node(&node, Some(&stale), |n| n.taints = taints)
                        }
                        None => Outcome::NotFound,
                    }
                } else {
                    self.write_node(&node, Some(&resource_version), |n| n.taints = taints)
                };
                self.answer(id, outcome, inputs);
            }
            Action::PatchNodeLabels {
                id, node, labels, ..
            } => {
                // A merge patch without a resourceVersion: never stale.
                let outcome = self.write_node(&node, None, |n| {
                    for (k, v) in labels {
                        n.labels.set(k, v);
                    }
                });
                self.answer(id, outcome, inputs);
            }
            Action::PatchNodeFencing {
                id,
                node,
                resource_version,
                annotations,
                taints,
                ..
            } => {
                let outcome = self.write_node(&node, Some(&resource_version), |n| {
                    if let Some(t) = taints {
                        n.taints = t;
                    }
                });
                if outcome == Outcome::Ok {
                    let notes = self.annotations.entry(node.clone()).or_default();
                    for (k, v) in annotations {
                        match v {
                            Some(v) => notes.insert(k.to_string(), v),
                            None => notes.remove(k),
                        };
                    }
                }
                self.answer(id, outcome, inputs);
            }
            Action::MarkPodNotReady { id, pod, .. } => {
                let outcome = if self.faults.fail_pod_status_of.contains(&*pod.name) {
                    failed("fake error")
                } else if self.faults.fail_pod_status > 0 {
                    self.faults.fail_pod_status -= 1;
                    failed("fake error")
                } else {
                    self.write_pod(&pod, |p| p.ready = Some(ConditionStatus::False))
                };
                self.answer(id, outcome, inputs);
            }
            Action::SetPodStatusNodeLost { id, pod, .. } => {
                // `status.reason` is not in the `Pod` model: nothing for a watch to show.
                let outcome = if self.pods.contains_key(&pod) {
                    self.pod_reasons.insert(pod, String::from(NODE_LOST_REASON));
                    Outcome::Ok
                } else {
                    Outcome::NotFound
                };
                inputs.push_back(Input::Result { id, outcome });
            }
            Action::DeletePod { id, pod, .. } => {
                // Graceful: the pod stays, terminating, until its kubelet confirms.
                let outcome = self.write_pod(&pod, |p| p.deleting = true);
                self.answer(id, outcome, inputs);
            }
            Action::EvictPod {
                id, pod, attempt, ..
            } if self.eviction_answer.is_some() => {
                let answer = self.eviction_answer.as_mut().and_then(|f| f(&pod, attempt));
                if let Some(result) = answer {
                    inputs.push_back(Input::EvictionResult { id, result });
                }
            }
            Action::EvictPod { id, pod, uid, .. } => {
                let result = if !self.pods.contains_key(&pod) {
                    EvictionResult::NotFound
                } else if self.pods.get(&pod).is_some_and(|p| p.uid != uid) {
                    // The eviction's UID precondition: the pod was replaced.
                    EvictionResult::Conflict
                } else if self.evictions_remove {
                    self.pods.remove(&pod);
                    self.evicted.push((self.now, pod.clone()));
                    self.pending_echo = Some(Input::PodDeleted(pod));
                    EvictionResult::Deleted
                } else {
                    self.evicted.push((self.now, pod.clone()));
                    self.write_pod(&pod, |p| p.deleting = true);
                    EvictionResult::Deleted
                };
                self.deliver(Input::EvictionResult { id, result }, inputs);
            }
            Action::RecordEvent(_) => {}
            Action::ReadLease { id, node } => {
                let outcome = if self.faults.lease_reads_fail {
                    LeaseReadOutcome::Failed(String::from("connection refused"))
                } else if let Some(l) = &self.faults.lease_read_override {
                    LeaseReadOutcome::Found(l.clone())
                } else {
                    self.lease_read(&node)
                };
                inputs.push_back(Input::LeaseRead { id, outcome });
            }
            Action::ReadFenceTarget { id, node } => {
                let outcome = self.read_target(&node);
                inputs.push_back(Input::FenceTargetRead { id, outcome });
            }
            Action::RunFenceCommand { id, command } => {
                self.running.push((id, command.node));
            }
        }
    }

    /// A write of a node: `Conflict` when `rv` is given and stale, after which the node as it
    /// now is goes first (the executor's re-read). The written node waits in `pending_echo`
    /// for `answer`.
    fn write_node(
        &mut self,
        name: &Name,
        rv: Option<&Name>,
        change: impl FnOnce(&mut Node),
    ) -> Outcome {
        let Some(mut node) = self.nodes.get(name).cloned() else {
            return Outcome::NotFound;
        };
        if rv.is_some_and(|rv| *rv != node.resource_version) {
            self.pending_echo = Some(Input::NodeUpsert(node));
            return Outcome::Conflict;
        }
        change(&mut node);
        node.resource_version = self.next_rv();
        self.nodes.insert(name.clone(), node.clone());
        self.pending_echo = Some(Input::NodeUpsert(node));
        Outcome::Ok
    }

    fn write_pod(&mut self, key: &PodKey, change: impl FnOnce(&mut Pod)) -> Outcome {
        let Some(mut pod) = self.pods.get(key).cloned() else {
            return Outcome::NotFound;
        };
        change(&mut pod);
        pod.resource_version = self.next_rv();
        self.pods.insert(key.clone(), pod.clone());
        self.pending_echo = Some(Input::PodUpsert(pod));
        Outcome::Ok
    }

    fn answer(&mut self, id: ActionId, outcome: Outcome, inputs: &mut VecDeque<Input>) {
        if outcome == Outcome::Conflict {
            self.conflicts += 1;
            // The re-read goes first whatever the order: the controller decides again on it.
            if let Some(fresh) = self.pending_echo.take() {
                inputs.push_back(fresh);
            }
        }
        self.deliver(Input::Result { id, outcome }, inputs);
    }

    /// Queues a write's answer and its echo (if any) in the configured order.
    fn deliver(&mut self, answer: Input, inputs: &mut VecDeque<Input>) {
        let echo = self.pending_echo.take();
        match (self.echo, echo) {
            (_, None) => inputs.push_back(answer),
            (EchoOrder::EchoFirst, Some(echo)) => {
                inputs.push_back(echo);
                inputs.push_back(answer);
            }
            (EchoOrder::AnswerFirst, Some(echo)) => {
                inputs.push_back(answer);
                inputs.push_back(echo);
            }
            (EchoOrder::AnswerOnly, Some(echo)) => {
                inputs.push_back(answer);
                self.late.push(echo);
            }
        }
    }
}
