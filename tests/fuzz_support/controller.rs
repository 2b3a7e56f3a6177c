//! The controller fed random but well-formed event sequences through its public API
//! (`Controllers::handle(Input, now)`), with a fake API server that executes its actions
//! (sometimes failing, answering late or conflicting) and invariants checked after every step.
//!
//! The input bytes are the script: each byte picks an operation (a kubelet renewing its Lease or
//! posting status, time passing with every timer fired at its deadline, pending actions answered,
//! pods added and removed, nodes deleted and re-created, live Lease reads failing), the next
//! bytes its arguments. Objects reach the controller as JSON through the decoder, as from a watch.
//!
//! Invariants:
//! - no write before the initial sync;
//! - no `Ready=Unknown` for a node heard from (first seen, Lease renewed, status posted) within
//!   the grace period (the fake API's live Lease reads tell the truth or fail);
//! - no pod evicted unless its node carries a `NoExecute` taint that the pod does not tolerate,
//!   or tolerates for `tolerationSeconds` that have run out since the taint's `timeAdded` (the
//!   first attempt: retries of a started eviction go on, as upstream's); no eviction of a pod
//!   that is gone or was replaced (new UID);
//! - no action about a node or pod that no longer exists;
//! - timers never busy-loop: after firing everything due, the next deadline is in the future.

use std::collections::BTreeMap;
use std::time::Duration;

use node_lifecycled::controller::taint_eviction::EvictionResult;
use node_lifecycled::controller::{
    Action, ActionId, Controllers, Input, LeaseReadOutcome, Outcome, Settings,
};
use node_lifecycled::kube::decode::{DecodeContext, decode_object};
use node_lifecycled::model::{Lease, Node, Pod, PodKey};
use node_lifecycled::time::Rate;
use node_lifecycled::time::Time;

const GRACE: Duration = Duration::from_secs(10);
const STARTUP_GRACE: Duration = Duration::from_secs(20);
const UNREACHABLE: &str = "node.kubernetes.io/unreachable";
const NOT_READY: &str = "node.kubernetes.io/not-ready";

fn settings() -> Settings {
    Settings {
        node_monitor_period: Duration::from_secs(5),
        node_monitor_grace_period: GRACE,
        node_startup_grace_period: STARTUP_GRACE,
        node_eviction_rate: Rate::per_second(10),
        secondary_node_eviction_rate: Rate::from_micro_per_second(100_000),
        large_cluster_size_threshold: 3,
        unhealthy_zone_threshold: 0.55,
        taint_based_eviction: true,
        pod_eviction_timeout: Duration::from_secs(300),
        ..Settings::default()
    }
}

#[derive(Clone, Debug)]
struct Condition {
    kind: String,
    status: String,
    heartbeat: Option<Time>,
    transition: Option<Time>,
    reason: Option<String>,
}

#[derive(Clone, Debug)]
struct FakeTaint {
    key: String,
    value: String,
    effect: String,
    time_added: Option<Time>,
}

#[derive(Clone, Debug)]
struct FakeNode {
    zone: String,
    rv: u64,
    created: Time,
    conditions: Vec<Condition>,
    taints: Vec<FakeTaint>,
    labels: Vec<(String, String)>,
    /// Last time the controller was given evidence the node is alive.
    heard_at: Time,
    /// Since when the node has carried some NoExecute taint without a break (the earliest
    /// `timeAdded`): upstream counts a pod's toleration from when its eviction was first
    /// scheduled, not from the `timeAdded` of a taint that replaced another.
    no_execute_since: Option<Time>,
}

#[derive(Clone, Debug)]
struct FakePod {
    node: String,
    uid: String,
    rv: u64,
    ready: bool,
    deleting: bool,
    /// NoExecute tolerations: (key, tolerationSeconds).
    tolerations: Vec<(String, Option<i64>)>,
}

/// An action waiting for its answer.
enum Pending {
    Write(Action),
    Evict {
        id: ActionId,
        pod: PodKey,
        uid: String,
    },
}

struct World {
    ctl: Controllers,
    ctx: DecodeContext,
    now: Time,
    rv: u64,
    nodes: BTreeMap<String, FakeNode>,
    leases: BTreeMap<String, (Time, u64)>,
    pods: BTreeMap<(String, String), FakePod>,
    pending: Vec<Pending>,
    synced: bool,
    lease_reads_fail: bool,
    uid_counter: u64,
    seen: Coverage,
    /// `NODE_LIFECYCLED_FUZZ_TRACE=1`: print every input and action (replaying a finding).
    trace: bool,
    /// Every action and decision with its instant, when recorded (the differential test).
    record: Option<Vec<String>>,
}

/// What a script made the controller do (so a test can show the invariants are not vacuous).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Coverage {
    pub unknown_verdicts: u64,
    pub no_execute_taints: u64,
    pub evictions: u64,
    pub lease_reads: u64,
}

/// Reads the script.
struct Script<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Script<'_> {
    fn next(&mut self) -> Option<u8> {
        let b = self.bytes.get(self.at).copied();
        self.at += 1;
        b
    }
    fn arg(&mut self) -> u8 {
        self.next().unwrap_or(0)
    }
}

fn rfc3339(t: Time) -> String {
    t.to_rfc3339()
}

impl World {
    fn next_rv(&mut self) -> u64 {
        self.rv += 1;
        self.rv
    }

    fn node_json(&self, name: &str, n: &FakeNode) -> String {
        let conditions: Vec<String> = n
            .conditions
            .iter()
            .map(|c| {
                let mut s = format!(r#"{{"type":"{}","status":"{}""#, c.kind, c.status);
                if let Some(t) = c.heartbeat {
                    s += &format!(r#","lastHeartbeatTime":"{}""#, rfc3339(t));
                }
                if let Some(t) = c.transition {
                    s += &format!(r#","lastTransitionTime":"{}""#, rfc3339(t));
                }
                if let Some(r) = &c.reason {
                    s += &format!(r#","reason":"{r}""#);
                }
                s + "}"
            })
            .collect();
        let taints: Vec<String> = n
            .taints
            .iter()
            .map(|t| {
                let added = t
                    .time_added
                    .map(|a| format!(r#","timeAdded":"{}""#, rfc3339(a)))
                    .unwrap_or_default();
                format!(
                    r#"{{"key":"{}","value":"{}","effect":"{}"{added}}}"#,
                    t.key, t.value, t.effect
                )
            })
            .collect();
        let mut labels = vec![
            format!(r#""topology.kubernetes.io/zone":"{}""#, n.zone),
            r#""topology.kubernetes.io/region":"r""#.to_string(),
        ];
        labels.extend(
            n.labels
                .iter()
                .filter(|(k, _)| !k.starts_with("topology.kubernetes.io/"))
                .map(|(k, v)| format!(r#""{k}":"{v}""#)),
        );
        format!(
            r#"{{"metadata":{{"name":"{name}","uid":"uid-{name}-{}","resourceVersion":"{}","creationTimestamp":"{}","labels":{{{}}}}},"spec":{{"taints":[{}]}},"status":{{"conditions":[{}]}}}}"#,
            n.created.as_unix_millis(),
            n.rv,
            rfc3339(n.created),
            labels.join(","),
            taints.join(","),
            conditions.join(",")
        )
    }

    fn decode_node(&mut self, name: &str) -> Node {
        let json = self.node_json(name, &self.nodes[name]);
        decode_object::<Node>(json.as_bytes(), &mut self.ctx)
            .unwrap_or_else(|e| panic!("fake node does not decode: {e}\n{json}"))
    }

    fn lease_obj(&mut self, name: &str) -> Lease {
        let (renew, rv) = self.leases[name];
        // renewTime is a MicroTime; condition heartbeats are whole seconds (metav1.Time).
        let json = format!(
            r#"{{"metadata":{{"name":"{name}","namespace":"kube-node-lease","resourceVersion":"{rv}"}},"spec":{{"holderIdentity":"{name}","leaseDurationSeconds":40,"renewTime":"{}"}}}}"#,
            renew.to_rfc3339_micros()
        );
        decode_object::<Lease>(json.as_bytes(), &mut self.ctx).expect("fake lease decodes")
    }

    fn pod_obj(&mut self, key: &(String, String)) -> Pod {
        let p = &self.pods[key];
        let tolerations: Vec<String> = p
            .tolerations
            .iter()
            .map(|(k, s)| {
                let secs = s
                    .map(|s| format!(r#","tolerationSeconds":{s}"#))
                    .unwrap_or_default();
                format!(r#"{{"key":"{k}","operator":"Exists","effect":"NoExecute"{secs}}}"#)
            })
            .collect();
        let deletion = if p.deleting {
            r#","deletionTimestamp":"2030-01-01T00:00:00Z""#
        } else {
            ""
        };
        let json = format!(
            r#"{{"metadata":{{"name":"{}","namespace":"{}","uid":"{}","resourceVersion":"{}"{deletion}}},"spec":{{"nodeName":"{}","tolerations":[{}]}},"status":{{"conditions":[{{"type":"Ready","status":"{}"}}]}}}}"#,
            key.1,
            key.0,
            p.uid,
            p.rv,
            p.node,
            tolerations.join(","),
            if p.ready { "True" } else { "False" }
        );
        decode_object::<Pod>(json.as_bytes(), &mut self.ctx).expect("fake pod decodes")
    }

    /// Feeds one input and checks what comes back; actions wait in `pending`.
    fn feed(&mut self, input: Input) -> Result<(), String> {
        if self.trace {
            eprintln!("{:?} <- {input:?}", self.now);
        }
        let actions = self.ctl.handle(input, self.now);
        // The shell takes the decisions (the journal's lines) after every turn; a harness that
        // never did let them pile up into one multi-megabyte Vec, which the allocation check
        // reported (fuzz-findings controller-seed3-40066 and -345618).
        let decisions = self.ctl.take_decisions();
        if let Some(record) = self.record.as_mut() {
            let now = self.now;
            record.extend(decisions.iter().map(|d| format!("{now:?} {d:?}")));
            record.extend(actions.iter().map(|a| format!("{now:?} {a:?}")));
        }
        drop(decisions);
        for action in actions {
            if self.trace {
                eprintln!("{:?} -> {action:?}", self.now);
            }
            self.check(&action)?;
            match action {
                Action::RecordEvent(_) => {}
                Action::EvictPod { id, pod, uid, .. } => self.pending.push(Pending::Evict {
                    id,
                    pod,
                    uid: uid.to_string(),
                }),
                other => self.pending.push(Pending::Write(other)),
            }
        }
        Ok(())
    }

    fn check(&mut self, action: &Action) -> Result<(), String> {
        let now = self.now;
        match action {
            Action::UpdateNodeConditions { conditions, .. }
                if conditions
                    .iter()
                    .any(|c| c.kind.as_str() == "Ready" && c.status.as_str() == "Unknown") =>
            {
                self.seen.unknown_verdicts += 1
            }
            Action::PatchNodeTaints { taints, .. }
                if taints.iter().any(|t| t.effect.as_str() == "NoExecute") =>
            {
                self.seen.no_execute_taints += 1
            }
            Action::EvictPod { .. } => self.seen.evictions += 1,
            Action::ReadLease { .. } => self.seen.lease_reads += 1,
            _ => {}
        }
        let writes = !matches!(action, Action::RecordEvent(_) | Action::ReadLease { .. });
        if writes && !self.synced {
            return Err(format!("write before the initial sync: {action:?}"));
        }
        match action {
            Action::UpdateNodeConditions {
                node, conditions, ..
            } => {
                let Some(fake) = self.nodes.get(&**node) else {
                    return Err(format!("status write for deleted node {node}"));
                };
                let was_unknown = fake
                    .conditions
                    .iter()
                    .any(|c| c.kind == "Ready" && c.status == "Unknown");
                let now_unknown = conditions
                    .iter()
                    .any(|c| c.kind.as_str() == "Ready" && c.status.as_str() == "Unknown");
                let grace = if fake.conditions.iter().any(|c| c.kind == "Ready") {
                    GRACE
                } else {
                    STARTUP_GRACE
                };
                if now_unknown && !was_unknown && now.since(fake.heard_at) < grace {
                    return Err(format!(
                        "{node} declared Unknown {:?} after it was last heard from (grace {grace:?})",
                        now.since(fake.heard_at)
                    ));
                }
            }
            Action::PatchNodeTaints { node, .. }
            | Action::PatchNodeLabels { node, .. }
            | Action::ReadLease { node, .. }
                if !self.nodes.contains_key(&**node) =>
            {
                return Err(format!("action for deleted node {node}: {action:?}"));
            }
            Action::EvictPod {
                pod, uid, attempt, ..
            } => {
                let key = (pod.namespace.to_string(), pod.name.to_string());
                let Some(fake) = self.pods.get(&key) else {
                    return Err(format!("eviction of unknown pod {pod}"));
                };
                if fake.uid != **uid {
                    return Err(format!("eviction of {pod} with a stale uid"));
                }
                // As upstream's taint manager: deleting a node does not cancel the evictions
                // already scheduled for its pods; and an eviction once started goes on through
                // its retries (upstream's worker cannot be cancelled either): the decision is
                // the first attempt's.
                let Some(node) = self.nodes.get(&fake.node) else {
                    return Ok(());
                };
                if *attempt > 1 {
                    return Ok(());
                }
                let due =
                    node.taints
                        .iter()
                        .filter(|t| t.effect == "NoExecute")
                        .any(
                            |t| match fake.tolerations.iter().find(|(k, _)| *k == t.key) {
                                None => true,
                                Some((_, None)) => false,
                                Some((_, Some(s))) => {
                                    node.no_execute_since.or(t.time_added).is_some_and(|added| {
                                        now.since(added) >= Duration::from_secs((*s).max(0) as u64)
                                    })
                                }
                            },
                        );
                if !due {
                    return Err(format!(
                        "{pod} evicted but no NoExecute taint of {} is due for it: {:?} vs {:?}",
                        fake.node, node.taints, fake.tolerations
                    ));
                }
            }
            Action::MarkPodNotReady { pod, .. } | Action::DeletePod { pod, .. } => {
                let key = (pod.namespace.to_string(), pod.name.to_string());
                if !self.pods.contains_key(&key) {
                    return Err(format!("action for unknown pod {pod}: {action:?}"));
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// Fires every timer due up to `until`, each at its own deadline.
    fn run_until(&mut self, until: Time) -> Result<(), String> {
        let mut fired = 0;
        while let Some(t) = self.ctl.next_deadline() {
            if t > until {
                break;
            }
            self.now = self.now.max(t);
            self.feed(Input::Tick)?;
            fired += 1;
            if fired > 100_000 {
                return Err(format!("timers busy-loop at {:?}", self.now));
            }
        }
        self.now = self.now.max(until);
        Ok(())
    }

    fn node_update(&mut self, name: &str) -> Result<(), String> {
        let rv = self.next_rv();
        self.nodes.get_mut(name).expect("node").rv = rv;
        let node = self.decode_node(name);
        self.feed(Input::NodeUpsert(node))
    }

    fn renew_lease(&mut self, name: &str) -> Result<(), String> {
        let rv = self.next_rv();
        self.leases.insert(name.to_string(), (self.now, rv));
        if let Some(n) = self.nodes.get_mut(name) {
            n.heard_at = self.now;
        }
        let lease = self.lease_obj(name);
        self.feed(Input::LeaseUpsert(lease))
    }

    /// The kubelet posts its status: every condition heartbeats at `now`.
    fn post_status(&mut self, name: &str, ready: bool) -> Result<(), String> {
        let now = self.now;
        let Some(n) = self.nodes.get_mut(name) else {
            return Ok(());
        };
        let status = if ready { "True" } else { "False" };
        let mut conditions = vec![Condition {
            kind: "Ready".into(),
            status: status.into(),
            heartbeat: Some(now),
            transition: None,
            reason: Some(
                if ready {
                    "KubeletReady"
                } else {
                    "KubeletNotReady"
                }
                .into(),
            ),
        }];
        for kind in ["MemoryPressure", "DiskPressure", "PIDPressure"] {
            conditions.push(Condition {
                kind: kind.into(),
                status: "False".into(),
                heartbeat: Some(now),
                transition: None,
                reason: None,
            });
        }
        for c in &mut conditions {
            let old = n.conditions.iter().find(|o| o.kind == c.kind);
            c.transition = match old {
                Some(o) if o.status == c.status => o.transition,
                _ => Some(now),
            };
        }
        // A heartbeat is news only if it reads differently: whole seconds on the wire.
        let previous = n
            .conditions
            .iter()
            .find(|c| c.kind == "Ready")
            .and_then(|c| c.heartbeat);
        if previous.map(rfc3339) != Some(rfc3339(now)) {
            n.heard_at = now;
        }
        n.conditions = conditions;
        self.node_update(name)
    }

    fn add_node(&mut self, name: &str, zone: &str, ready: bool) -> Result<(), String> {
        let now = self.now;
        self.nodes.insert(
            name.to_string(),
            FakeNode {
                zone: zone.to_string(),
                rv: 0,
                created: now,
                conditions: Vec::new(),
                taints: Vec::new(),
                labels: Vec::new(),
                heard_at: now,
                no_execute_since: None,
            },
        );
        if ready {
            self.post_status(name, true)
        } else {
            self.node_update(name)
        }
    }

    fn add_pod(&mut self, node: &str, variant: u8) -> Result<(), String> {
        self.uid_counter += 1;
        let name = format!("p{}", self.uid_counter);
        let tolerations = match variant % 5 {
            0 => vec![],
            1 => vec![
                (UNREACHABLE.to_string(), Some(3)),
                (NOT_READY.to_string(), Some(3)),
            ],
            2 => vec![(UNREACHABLE.to_string(), Some(30))],
            3 => vec![
                (UNREACHABLE.to_string(), None),
                (NOT_READY.to_string(), None),
            ],
            _ => vec![
                (UNREACHABLE.to_string(), Some(0)),
                (NOT_READY.to_string(), Some(-5)),
            ],
        };
        let key = ("default".to_string(), name.clone());
        let rv = self.next_rv();
        self.pods.insert(
            key.clone(),
            FakePod {
                node: node.to_string(),
                uid: format!("uid-{name}"),
                rv,
                ready: true,
                deleting: false,
                tolerations,
            },
        );
        let pod = self.pod_obj(&key);
        self.feed(Input::PodUpsert(pod))
    }

    /// Answers pending action `i` with an outcome picked by `choice`.
    fn answer(&mut self, i: usize, choice: u8) -> Result<(), String> {
        let pending = self.pending.remove(i);
        let fail = choice % 8 == 7;
        match pending {
            Pending::Evict { id, pod, uid } => {
                let key = (pod.namespace.to_string(), pod.name.to_string());
                let result = if fail {
                    EvictionResult::Error("fake 500".into())
                } else {
                    match self.pods.get_mut(&key) {
                        Some(p) if p.uid == uid => {
                            p.deleting = true;
                            let rv = self.rv + 1;
                            p.rv = rv;
                            self.rv = rv;
                            let pod = self.pod_obj(&key);
                            self.feed(Input::PodUpsert(pod))?;
                            EvictionResult::Deleted
                        }
                        Some(_) => EvictionResult::Conflict,
                        None => EvictionResult::NotFound,
                    }
                };
                self.feed(Input::EvictionResult { id, result })
            }
            Pending::Write(Action::ReadLease { id, node }) => {
                let outcome = if fail || self.lease_reads_fail {
                    LeaseReadOutcome::Failed("connection refused".into())
                } else if self.leases.contains_key(&*node) {
                    LeaseReadOutcome::Found(self.lease_obj(&node))
                } else {
                    LeaseReadOutcome::NotFound
                };
                self.feed(Input::LeaseRead { id, outcome })
            }
            Pending::Write(action) => {
                let id = action.id().expect("a write has an id");
                let outcome = if fail {
                    Outcome::Failed("fake 500".into())
                } else {
                    self.apply(action)?
                };
                self.feed(Input::Result { id, outcome })
            }
        }
    }

    /// Executes a write against the fake objects; on success the watch delivers the result.
    fn apply(&mut self, action: Action) -> Result<Outcome, String> {
        let now = self.now;
        match action {
            Action::UpdateNodeConditions {
                node,
                resource_version,
                conditions,
                ..
            } => self.write_node(&node, Some(&resource_version), |n| {
                n.conditions = conditions
                    .iter()
                    .map(|c| Condition {
                        kind: c.kind.as_str().to_string(),
                        status: c.status.as_str().to_string(),
                        heartbeat: c.last_heartbeat_time,
                        transition: c.last_transition_time,
                        reason: c.reason.as_deref().map(str::to_string),
                    })
                    .collect()
            }),
            Action::PatchNodeTaints {
                node,
                resource_version,
                taints,
                ..
            } => self.write_node(&node, Some(&resource_version), |n| {
                n.taints = taints
                    .iter()
                    .map(|t| FakeTaint {
                        key: t.key.to_string(),
                        value: t.value.to_string(),
                        effect: t.effect.as_str().to_string(),
                        // As the API server does for a NoExecute taint without one.
                        time_added: t.time_added.or(Some(now)),
                    })
                    .collect();
                let earliest = n
                    .taints
                    .iter()
                    .filter(|t| t.effect == "NoExecute")
                    .filter_map(|t| t.time_added)
                    .min();
                n.no_execute_since = match (n.no_execute_since, earliest) {
                    (_, None) => None,
                    (Some(since), Some(_)) => Some(since),
                    (None, Some(added)) => Some(added),
                };
            }),
            Action::PatchNodeLabels { node, labels, .. } => self.write_node(&node, None, |n| {
                for (k, v) in &labels {
                    match n.labels.iter_mut().find(|(key, _)| **key == **k) {
                        Some(slot) => slot.1 = v.to_string(),
                        None => n.labels.push((k.to_string(), v.to_string())),
                    }
                }
            }),
            Action::MarkPodNotReady { pod, .. } => {
                let key = (pod.namespace.to_string(), pod.name.to_string());
                let rv = self.next_rv();
                match self.pods.get_mut(&key) {
                    Some(p) => {
                        p.ready = false;
                        p.rv = rv;
                        let pod = self.pod_obj(&key);
                        self.feed(Input::PodUpsert(pod))?;
                        Ok(Outcome::Ok)
                    }
                    None => Ok(Outcome::NotFound),
                }
            }
            Action::DeletePod { pod, .. } | Action::SetPodStatusNodeLost { pod, .. } => {
                let key = (pod.namespace.to_string(), pod.name.to_string());
                Ok(if self.pods.contains_key(&key) {
                    Outcome::Ok
                } else {
                    Outcome::NotFound
                })
            }
            other => Err(format!("unexpected pending action {other:?}")),
        }
    }

    fn write_node(
        &mut self,
        name: &str,
        rv: Option<&str>,
        change: impl FnOnce(&mut FakeNode),
    ) -> Result<Outcome, String> {
        let Some(current) = self.nodes.get(name) else {
            return Ok(Outcome::NotFound);
        };
        if rv.is_some_and(|rv| rv != current.rv.to_string()) {
            // 409: the shell re-reads the node and feeds it before the result.
            let node = self.decode_node(name);
            self.feed(Input::NodeUpsert(node))?;
            return Ok(Outcome::Conflict);
        }
        change(self.nodes.get_mut(name).expect("node"));
        self.node_update(name)?;
        Ok(Outcome::Ok)
    }
}

const NODES: [&str; 6] = ["n0", "n1", "n2", "n3", "n4", "n5"];

/// Runs the script in `input`; `Err` is a broken invariant.
pub fn run_controller(input: &[u8]) -> Result<(), String> {
    run_controller_counting(input).map(|_| ())
}

/// [`run_controller`], returning what the controller did.
pub fn run_controller_counting(input: &[u8]) -> Result<Coverage, String> {
    run(input, false, false).map(|(coverage, _)| coverage)
}

/// [`run_controller`], returning every action and decision with its instant, in order; with
/// `full_monitor_pass`, the monitor pass evaluates every node (the reference).
pub fn run_controller_recording(
    input: &[u8],
    full_monitor_pass: bool,
) -> Result<(Coverage, Vec<String>), String> {
    run(input, full_monitor_pass, true)
}

fn run(
    input: &[u8],
    full_monitor_pass: bool,
    record: bool,
) -> Result<(Coverage, Vec<String>), String> {
    let t0 = Time::from_unix_millis(1_700_000_000_000);
    let mut ctl = Controllers::new(settings(), t0);
    ctl.use_full_monitor_pass(full_monitor_pass);
    let mut w = World {
        ctl,
        ctx: DecodeContext::new(),
        now: t0,
        rv: 1,
        nodes: BTreeMap::new(),
        leases: BTreeMap::new(),
        pods: BTreeMap::new(),
        pending: Vec::new(),
        synced: false,
        lease_reads_fail: false,
        uid_counter: 0,
        seen: Coverage::default(),
        trace: std::env::var_os("NODE_LIFECYCLED_FUZZ_TRACE").is_some(),
        record: record.then(Vec::new),
    };
    let mut s = Script {
        bytes: input,
        at: 0,
    };
    let shape = s.arg();
    let count = 2 + usize::from(shape % 5);
    for (i, name) in NODES.iter().take(count).enumerate() {
        let zone = if shape & 0x80 != 0 && i % 2 == 1 {
            "z2"
        } else {
            "z1"
        };
        w.add_node(name, zone, true)?;
        w.renew_lease(name)?;
        w.add_pod(name, i as u8)?;
    }
    let sync_late = shape & 0x40 != 0;
    if !sync_late {
        w.synced = true;
        w.feed(Input::InitialSyncDone)?;
    }
    // Kubelets that heartbeat on every time step unless stopped.
    let mut alive: Vec<bool> = vec![true; NODES.len()];
    while let Some(op) = s.next() {
        let node = NODES[usize::from(s.arg()) % count];
        let i = NODES.iter().position(|n| *n == node).expect("node");
        match op % 14 {
            0 => alive[i] = !alive[i],
            1 if w.nodes.contains_key(node) => w.renew_lease(node)?,
            2 => w.post_status(node, s.arg() % 4 != 0)?,
            3..=5 => {
                // Time passes in steps; live kubelets renew every 2 s.
                let total = Duration::from_millis(u64::from(s.arg()) * 100);
                let end = w.now + total;
                while w.now < end {
                    let step = (w.now + Duration::from_secs(2)).min(end);
                    w.run_until(step)?;
                    for (j, name) in NODES.iter().take(count).enumerate() {
                        if alive[j] && w.nodes.contains_key(*name) {
                            w.renew_lease(name)?;
                        }
                    }
                }
            }
            6 | 7 => {
                let choice = s.arg();
                while !w.pending.is_empty() {
                    w.answer(0, choice.wrapping_add(w.pending.len() as u8))?;
                }
            }
            8 => {
                if !w.pending.is_empty() {
                    let k = usize::from(s.arg()) % w.pending.len();
                    let choice = s.arg();
                    w.answer(k, choice)?;
                }
            }
            9 if w.nodes.contains_key(node) => {
                let variant = s.arg();
                w.add_pod(node, variant)?;
            }
            10 => {
                let pick = usize::from(s.arg());
                if !w.pods.is_empty() {
                    let key = w
                        .pods
                        .keys()
                        .nth(pick % w.pods.len())
                        .cloned()
                        .expect("pod");
                    w.pods.remove(&key);
                    w.feed(Input::PodDeleted(PodKey {
                        namespace: key.0.as_str().into(),
                        name: key.1.as_str().into(),
                    }))?;
                }
            }
            11 => {
                if w.nodes.remove(node).is_some() {
                    w.leases.remove(node);
                    w.feed(Input::NodeDeleted(node.into()))?;
                    w.feed(Input::LeaseDeleted(node.into()))?;
                } else {
                    let zone = if s.arg() % 2 == 0 { "z1" } else { "z2" };
                    let ready = s.arg() % 3 != 0;
                    w.add_node(node, zone, ready)?;
                    w.renew_lease(node)?;
                }
            }
            12 => w.lease_reads_fail = !w.lease_reads_fail,
            _ => {
                if !w.synced {
                    w.synced = true;
                    w.feed(Input::InitialSyncDone)?;
                }
            }
        }
        if let Some(t) = w.ctl.next_deadline() {
            if t < w.now {
                // Allowed only until the next Tick fires it; fire it now.
                w.run_until(w.now)?;
            }
        }
    }
    Ok((w.seen, w.record.unwrap_or_default()))
}

/// Seed scripts: a node dying and coming back, a zone going dark, flapping, lease reads failing.
pub fn corpus() -> Vec<Vec<u8>> {
    vec![
        // 3 nodes; n1 stops; 25 s pass with answers; n1 comes back.
        vec![
            1, 0, 1, 3, 0, 100, 6, 0, 0, 3, 0, 100, 6, 0, 0, 3, 0, 60, 6, 0, 0, 0, 1, 2, 1, 1, 3,
            0, 50, 6, 0, 0,
        ],
        // 6 nodes in two zones; all of z2 stops; lease reads fail for a while.
        vec![
            0x85, 0, 1, 0, 3, 0, 5, 12, 0, 3, 0, 200, 8, 0, 0, 6, 0, 0, 12, 0, 3, 0, 200, 6, 0, 0,
            3, 0, 250, 6, 0, 0,
        ],
        // Sync late; pods added; n0 flaps.
        vec![
            0x42, 9, 0, 1, 9, 1, 3, 0, 0, 13, 0, 0, 0, 3, 0, 80, 0, 0, 6, 0, 0, 3, 0, 120, 6, 0, 3,
        ],
        // A node deleted while tainted, then re-created not ready.
        vec![
            2, 0, 2, 3, 0, 150, 6, 0, 0, 3, 0, 50, 6, 0, 0, 11, 2, 11, 2, 1, 0, 3, 0, 250, 6, 0, 0,
        ],
    ]
}
