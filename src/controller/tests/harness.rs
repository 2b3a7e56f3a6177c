//! A virtual clock, builders, and a fake API server that executes the controller's actions on
//! its own objects and feeds the results back (the resulting objects as watch upserts, then
//! the action result), so each upstream scenario reads as a short story.

use std::collections::{BTreeMap, VecDeque};
use std::rc::Rc;
use std::time::Duration;

use crate::controller::events::{Event, EventObject};
use crate::controller::{
    Action, Input, LeaseReadOutcome, NodeLifecycle, Outcome, Settings, StateDump, ZoneState,
};
use crate::model::{
    ConditionStatus, Lease, Name, Node, NodeCondition, NodeConditionType, Pod, PodKey, Taint,
    TaintEffect, labels,
};
use crate::time::Rate;
use crate::time::Time;

pub fn n(s: &str) -> Name {
    Rc::from(s)
}

pub fn date(y: u32, mo: u32, d: u32, h: u32, mi: u32, s: u32) -> Time {
    Time::parse_rfc3339(&format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}Z")).unwrap()
}

pub fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

/// Upstream's test constants: grace 50 s, startup 60 s, period 5 s, QPS 100000 (never the
/// bottleneck), large cluster threshold 20, unhealthy threshold 0.55.
pub fn test_settings() -> Settings {
    Settings {
        node_monitor_period: secs(5),
        node_monitor_grace_period: secs(50),
        node_startup_grace_period: secs(60),
        node_eviction_rate: Rate::per_second(100_000),
        secondary_node_eviction_rate: Rate::per_second(100_000),
        large_cluster_size_threshold: 20,
        unhealthy_zone_threshold: 0.55,
        taint_based_eviction: true,
        pod_eviction_timeout: secs(300),
        ..Settings::default()
    }
}

pub struct NodeBuilder(Node);

pub fn node(name: &str) -> NodeBuilder {
    NodeBuilder(Node {
        name: n(name),
        uid: n(&format!("uid-{name}")),
        resource_version: n("1"),
        creation_timestamp: date(2012, 1, 1, 0, 0, 0),
        labels: Vec::new(),
        taints: Vec::new(),
        unschedulable: false,
        conditions: Vec::new(),
        other_conditions: Vec::new(),
        autonomy: Default::default(),
        maintenance: Default::default(),
    })
}

pub fn cond(kind: NodeConditionType, status: ConditionStatus, hb: Time, tr: Time) -> NodeCondition {
    NodeCondition {
        kind,
        status,
        last_heartbeat_time: Some(hb),
        last_transition_time: Some(tr),
        reason: None,
        message: None,
    }
}

impl NodeBuilder {
    pub fn created(mut self, t: Time) -> Self {
        self.0.creation_timestamp = t;
        self
    }
    pub fn uid(mut self, uid: &str) -> Self {
        self.0.uid = n(uid);
        self
    }
    pub fn label(mut self, k: &str, v: &str) -> Self {
        self.0.labels.push((n(k), n(v)));
        self
    }
    /// Both the beta and the GA region/zone labels, as upstream's fixtures.
    pub fn zone(self, region: &str, zone: &str) -> Self {
        self.label(labels::REGION, region)
            .label(labels::ZONE, zone)
            .label(labels::REGION_BETA, region)
            .label(labels::ZONE_BETA, zone)
    }
    pub fn ready(self, status: ConditionStatus, hb: Time, tr: Time) -> Self {
        self.condition(NodeConditionType::Ready, status, hb, tr)
    }
    pub fn condition(
        mut self,
        kind: NodeConditionType,
        s: ConditionStatus,
        hb: Time,
        tr: Time,
    ) -> Self {
        self.0.conditions.push(cond(kind, s, hb, tr));
        self
    }
    pub fn taint(mut self, key: &str, effect: TaintEffect) -> Self {
        self.0.taints.push(Taint {
            key: n(key),
            value: n(""),
            effect,
            time_added: None,
        });
        self
    }
    pub fn build(self) -> Node {
        self.0
    }
}

pub fn pod(name: &str, node: &str) -> Pod {
    Pod {
        key: PodKey {
            namespace: n("default"),
            name: n(name),
        },
        uid: n(&format!("uid-{name}")),
        resource_version: n("1"),
        node_name: Some(n(node)),
        ready: Some(ConditionStatus::True),
        tolerations: Rc::from(Vec::new()),
        deleting: false,
        daemonset_owned: false,
        disruption_target: false,
        creation_timestamp: None,
    }
}

pub fn lease(node: &str, renew: Time) -> Lease {
    Lease {
        name: n(node),
        renew_time: Some(renew),
        duration_seconds: None,
        resource_version: n("1"),
    }
}

/// Injected API behaviour.
#[derive(Default)]
pub struct Faults {
    /// Fail this many upcoming pod status writes (MarkPodNotReady) with an error.
    pub fail_pod_status: usize,
    /// Fail every pod status write of these pods (by name) while they are listed.
    pub fail_pod_status_of: std::collections::BTreeSet<String>,
    /// Answer this many upcoming taint writes 409 (another writer changed the node first).
    pub conflict_taint_writes: usize,
    /// Fail this many upcoming taint writes with an error (a 500).
    pub fail_taint_writes: usize,
    /// Fail this many upcoming node status writes (UpdateNodeConditions) with an error (a 500).
    pub fail_node_status: usize,
    /// Fail live Lease reads while true.
    pub lease_reads_fail: bool,
    /// Answer live Lease reads with this Lease instead of the API's (a watch that lags).
    pub lease_read_override: Option<Lease>,
}

pub struct Harness {
    pub ctl: NodeLifecycle,
    pub now: Time,
    pub nodes: BTreeMap<Name, Node>,
    pub leases: BTreeMap<Name, Lease>,
    pub pods: BTreeMap<PodKey, Pod>,
    /// Pod `status.reason` as written (legacy NodeLost).
    pub pod_reasons: BTreeMap<PodKey, String>,
    /// Every action the controller returned, with the time it was returned.
    pub log: Vec<(Time, Action)>,
    pub faults: Faults,
    rv: u64,
}

impl Harness {
    pub fn new(settings: Settings, now: Time) -> Harness {
        Harness {
            ctl: NodeLifecycle::new(settings, now),
            now,
            nodes: BTreeMap::new(),
            leases: BTreeMap::new(),
            pods: BTreeMap::new(),
            pod_reasons: BTreeMap::new(),
            log: Vec::new(),
            faults: Faults::default(),
            rv: 1,
        }
    }

    /// A controller that has listed `nodes`, `pods` and `leases` and finished its initial sync
    /// at `now` (upstream: stores synced, first `monitorNodeHealth`).
    pub fn started(
        settings: Settings,
        now: Time,
        nodes: Vec<Node>,
        pods: Vec<Pod>,
        leases: Vec<Lease>,
    ) -> Harness {
        let mut h = Harness::new(settings, now);
        for l in leases {
            h.leases.insert(l.name.clone(), l.clone());
            h.feed(Input::LeaseUpsert(l));
        }
        for p in pods {
            h.pods.insert(p.key.clone(), p.clone());
            h.feed(Input::PodUpsert(p));
        }
        for node in nodes {
            h.put_node(node);
        }
        h.feed(Input::InitialSyncDone);
        h
    }

    fn next_rv(&mut self) -> Name {
        self.rv += 1;
        n(&self.rv.to_string())
    }

    /// Creates or replaces a node in the API (the watch delivers it).
    pub fn put_node(&mut self, mut node: Node) {
        node.resource_version = self.next_rv();
        self.nodes.insert(node.name.clone(), node.clone());
        self.feed(Input::NodeUpsert(node));
    }

    /// Replaces a node's status conditions (the kubelet posting status).
    pub fn set_conditions(&mut self, name: &str, conditions: Vec<NodeCondition>) {
        let mut node = self.nodes[name].clone();
        node.conditions = conditions;
        self.put_node(node);
    }

    pub fn delete_node(&mut self, name: &str) {
        self.nodes.remove(name);
        self.feed(Input::NodeDeleted(n(name)));
    }

    pub fn put_lease(&mut self, l: Lease) {
        self.leases.insert(l.name.clone(), l.clone());
        self.feed(Input::LeaseUpsert(l));
    }

    pub fn put_pod(&mut self, p: Pod) {
        self.pods.insert(p.key.clone(), p.clone());
        self.feed(Input::PodUpsert(p));
    }

    /// Moves the clock without firing timers (upstream tests jump `now` between passes).
    pub fn jump(&mut self, d: Duration) {
        self.now += d;
    }

    /// Fires every timer due at `now`, in deadline order, all at `now`.
    pub fn tick(&mut self) {
        while self.ctl.next_deadline().is_some_and(|t| t <= self.now) {
            self.feed(Input::Tick);
        }
    }

    /// Lets virtual time run to `until`, firing each timer at its own deadline.
    pub fn run_until(&mut self, until: Time) {
        while let Some(t) = self.ctl.next_deadline() {
            if t > until {
                break;
            }
            self.now = self.now.max(t);
            self.feed(Input::Tick);
        }
        self.now = until;
    }

    pub fn run_for(&mut self, d: Duration) {
        let until = self.now + d;
        self.run_until(until);
    }

    /// Upstream `doNoExecuteTaintingPass` right after a pass: our tainting pass runs 100 ms later.
    /// (Our buckets give at most one token per millisecond: upstream's "unlimited" 100000 QPS
    /// takes a few virtual milliseconds to drain a queue.)
    pub fn tainting_pass(&mut self) {
        self.run_for(Duration::from_millis(100));
    }

    /// A config reload at `now`: its actions are executed like any others.
    pub fn apply_settings(&mut self, settings: Settings) {
        let mut inputs = VecDeque::new();
        for a in self.ctl.apply_settings(settings, self.now) {
            self.log.push((self.now, a.clone()));
            self.execute(a, &mut inputs);
        }
        while let Some(input) = inputs.pop_front() {
            self.feed(input);
        }
    }

    /// Feeds one input, executes the returned actions against the fake API and feeds their
    /// results back until nothing is left.
    pub fn feed(&mut self, input: Input) {
        let mut inputs = VecDeque::from([input]);
        while let Some(input) = inputs.pop_front() {
            let actions = self.ctl.handle(input, self.now);
            for a in actions {
                self.log.push((self.now, a.clone()));
                self.execute(a, &mut inputs);
            }
        }
    }

    fn execute(&mut self, action: Action, inputs: &mut VecDeque<Input>) {
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
                    Outcome::Failed(String::from("500 Internal Server Error"))
                } else {
                    self.write_node(&node, &resource_version, inputs, |n| {
                        n.conditions = conditions
                    })
                };
                inputs.push_back(Input::Result { id, outcome });
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
                    Outcome::Failed(String::from("500 Internal Server Error"))
                } else if self.faults.conflict_taint_writes > 0 {
                    self.faults.conflict_taint_writes -= 1;
                    // Another writer changed the node first: our write is stale; the shell
                    // re-reads the node and feeds it before the result.
                    match self.nodes.get(&node).cloned() {
                        Some(mut current) => {
                            current.resource_version = self.next_rv();
                            self.nodes.insert(node.clone(), current.clone());
                            inputs.push_back(Input::NodeUpsert(current));
                            Outcome::Conflict
                        }
                        None => Outcome::NotFound,
                    }
                } else {
                    self.write_node(&node, &resource_version, inputs, |n| n.taints = taints)
                };
                inputs.push_back(Input::Result { id, outcome });
            }
            Action::PatchNodeLabels {
                id, node, labels, ..
            } => {
                let rv = self.nodes.get(&node).map(|n| n.resource_version.clone());
                let outcome = match rv {
                    None => Outcome::NotFound,
                    Some(rv) => self.write_node(&node, &rv, inputs, |n| {
                        for (k, v) in labels {
                            match n.labels.iter_mut().find(|(key, _)| *key == k) {
                                Some(slot) => slot.1 = v,
                                None => n.labels.push((k, v)),
                            }
                        }
                    }),
                };
                inputs.push_back(Input::Result { id, outcome });
            }
            Action::MarkPodNotReady { id, pod, .. } => {
                let outcome = if self.faults.fail_pod_status_of.contains(&*pod.name) {
                    Outcome::Failed(String::from("fake error"))
                } else if self.faults.fail_pod_status > 0 {
                    self.faults.fail_pod_status -= 1;
                    Outcome::Failed(String::from("fake error"))
                } else if let Some(p) = self.pods.get_mut(&pod) {
                    p.ready = Some(ConditionStatus::False);
                    inputs.push_back(Input::PodUpsert(p.clone()));
                    Outcome::Ok
                } else {
                    Outcome::NotFound
                };
                inputs.push_back(Input::Result { id, outcome });
            }
            Action::SetPodStatusNodeLost { id, pod, .. } => {
                let outcome = if self.pods.contains_key(&pod) {
                    self.pod_reasons
                        .insert(pod, String::from(crate::controller::NODE_LOST_REASON));
                    Outcome::Ok
                } else {
                    Outcome::NotFound
                };
                inputs.push_back(Input::Result { id, outcome });
            }
            Action::DeletePod { id, pod, .. } => {
                let outcome = match self.pods.get_mut(&pod) {
                    Some(p) => {
                        p.deleting = true;
                        inputs.push_back(Input::PodUpsert(p.clone()));
                        Outcome::Ok
                    }
                    None => Outcome::NotFound,
                };
                inputs.push_back(Input::Result { id, outcome });
            }
            Action::RecordEvent(_) => {}
            // Fencing is off in these tests.
            Action::ReadFenceTarget { .. }
            | Action::PatchNodeFencing { .. }
            | Action::RunFenceCommand { .. } => {}
            Action::EvictPod { .. } => unreachable!("NodeLifecycle never evicts by taint"),
            Action::ReadLease { id, node } => {
                let outcome = if self.faults.lease_reads_fail {
                    LeaseReadOutcome::Failed(String::from("connection refused"))
                } else if let Some(l) = &self.faults.lease_read_override {
                    LeaseReadOutcome::Found(l.clone())
                } else {
                    match self.leases.get(&node) {
                        Some(l) => LeaseReadOutcome::Found(l.clone()),
                        None => LeaseReadOutcome::NotFound,
                    }
                };
                inputs.push_back(Input::LeaseRead { id, outcome });
            }
        }
    }

    /// An optimistic write: a stale resourceVersion is a 409, after which the shell re-reads
    /// the node and feeds it before the result.
    fn write_node(
        &mut self,
        name: &Name,
        rv: &Name,
        inputs: &mut VecDeque<Input>,
        change: impl FnOnce(&mut Node),
    ) -> Outcome {
        let Some(current) = self.nodes.get(name).cloned() else {
            return Outcome::NotFound;
        };
        if &current.resource_version != rv {
            inputs.push_back(Input::NodeUpsert(current));
            return Outcome::Conflict;
        }
        let mut updated = current;
        change(&mut updated);
        updated.resource_version = self.next_rv();
        self.nodes.insert(name.clone(), updated.clone());
        inputs.push_back(Input::NodeUpsert(updated));
        Outcome::Ok
    }

    // ---- assertions helpers --------------------------------------------------------------

    pub fn dump(&self) -> StateDump {
        self.ctl.dump(self.now)
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

    /// The times of taint writes of `node` whose list holds `key` with `effect`.
    pub fn taint_writes_with(&self, node: &str, key: &str, effect: TaintEffect) -> Vec<Time> {
        self.log
            .iter()
            .filter_map(|(t, a)| match a {
                Action::PatchNodeTaints {
                    node: n, taints, ..
                } if &**n == node
                    && taints.iter().any(|x| &*x.key == key && x.effect == effect) =>
                {
                    Some(*t)
                }
                _ => None,
            })
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

    pub fn events(&self) -> Vec<Event> {
        self.log
            .iter()
            .filter_map(|(_, a)| match a {
                Action::RecordEvent(e) => Some(e.clone()),
                _ => None,
            })
            .collect()
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

    pub fn taints(&self, node: &str) -> Vec<(String, TaintEffect)> {
        self.nodes[node]
            .taints
            .iter()
            .map(|t| (t.key.to_string(), t.effect.clone()))
            .collect()
    }

    pub fn has_taint(&self, node: &str, key: &str, effect: TaintEffect) -> bool {
        self.nodes[node].has_taint(key, &effect)
    }

    pub fn ready_of(&self, node: &str) -> Option<ConditionStatus> {
        self.nodes[node].ready().map(|c| c.status)
    }
}
