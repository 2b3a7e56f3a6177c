//! The soak's invariants, checked as the run goes: a sans-IO checker fed the simulator's write
//! log (every write, in order, naming its writer: the daemons by bearer token, the kubelets and
//! the soak driver by their in-process identity), the kubelets' ground truth (which are alive)
//! and the time. Unit tests drive it with synthetic write logs.
//!
//! Safety (judged at each daemon write):
//! - `unknown-while-renewing`: Ready=Unknown for a node whose kubelet renewed its Lease or posted
//!   status within the grace period. The daemon reads the Lease live before that verdict; a
//!   renewal that lands between that read and the write cannot be seen, so renewals in the
//!   last `evidence_allowance` before the write are excused (see [`Limits::for_soak`]).
//! - `taint-forbidden-by-zone`: a new NoExecute taint while every zone is fully disrupted
//!   (master disruption mode) or while the node's zone is partially disrupted and small (rate
//!   0), judged on the Ready conditions in the store, held for `zone_allowance`; and, stricter,
//!   as upstream's batched pass would judge the zones (`zone_rules`): every node whose kubelet
//!   is silent and whose grace ends within one monitor period counts as not ready too, and by
//!   default (beyond upstream, [`Limits::early_suspects`]) every kubelet silent for more than
//!   twice its Lease renew interval.
//! - `untaint-while-dead`: a daemon write that takes the NoExecute taint off a node whose
//!   kubelet has been silent beyond the grace period, unless every zone may be fully disrupted
//!   (master disruption mode).
//! - `eviction-before-toleration`: a pod deleted before its toleration ran out, counted from the
//!   first NoExecute taint of an unbroken run, or the pod's creation if later (the daemon
//!   counts from the taint's `timeAdded`, or the pod's creation if later at a start or a
//!   takeover, a pod bound later from its arrival); or deleted
//!   with no NoExecute taint on its node (beyond a running eviction's retry window); or a pod
//!   that tolerates forever deleted.
//! - `two-writers`: writes by two daemons less than `handover_gap` apart.
//!
//! Liveness (judged by [`Checker::check_liveness`], each obligation once when it falls due):
//! - `dead-node-not-tainted`: a node silent for grace + its place in the zone's rate queue
//!   (+ allowance) carries `node.kubernetes.io/unreachable:NoExecute`, unless the zone rules
//!   forbid it;
//! - `pod-not-evicted`: a pod whose toleration ran out (+ allowance) is deleted;
//! - `decision-late` (`decisions`): the same, tighter, when the only daemon-side faults around
//!   were connection resets: deleted by the time it was due + the reconnect + a scheduling
//!   slack;
//! - `recovered-node-tainted`: a node alive again for the kubelet's status interval (+ allowance)
//!   is neither Unknown nor NoExecute-tainted;
//! - `rss`: each daemon's resident memory stays under a limit and does not keep growing.
//!
//! Faults that stop every daemon from acting (leader killed, API down, watches stalled) push
//! liveness deadlines back with [`Checker::quiet_until`].

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::time::Duration;

use super::limits::Limits;
use crate::population::zone_of;
use crate::resource::{Resource, Verb};
use crate::timeline::{FactKind, FactReader, ready_from_diff};
use crate::write_log::WriteRecord;
use node_lifecycled::time::Time;

pub const UNREACHABLE: &str = "node.kubernetes.io/unreachable:NoExecute";
pub const NOT_READY: &str = "node.kubernetes.io/not-ready:NoExecute";
/// Writes of this identity are the kubelets' (ground truth of heartbeats).
pub const KUBELET: &str = "kubelet";
/// Writes of this identity are the soak driver's (pods created).
pub const DRIVER: &str = "soak";
/// Writes of this identity are the simulator's incumbent's (`--shadow`).
pub const INCUMBENT: &str = "kube-controller-manager";

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    pub at: Time,
    pub rule: &'static str,
    pub detail: String,
}

#[derive(Debug)]
pub(super) struct NodeTruth {
    pub(super) zone: String,
    /// Kubelet heartbeats (Lease renewals, status posts), the last minute or so.
    pub(super) evidence: VecDeque<Time>,
    pub(super) ready: String,
    /// When `ready` last changed in the store.
    pub(super) ready_since: Time,
    pub(super) alive: bool,
    /// When the kubelet last changed between alive and silent.
    pub(super) kubelet_since: Time,
    /// The episode (kubelet_since) whose liveness obligation was judged.
    pub(super) judged: Option<Time>,
    /// Controller taints after the last daemon write.
    pub(super) taints: Vec<String>,
    /// Start of the current unbroken run of NoExecute controller taints.
    pub(super) noexec_since: Option<Time>,
    pub(super) noexec_ended: Option<Time>,
    /// The last run of NoExecute controller taints that ended: (start, end).
    pub(super) last_run: Option<(Time, Time)>,
}

impl NodeTruth {
    pub(super) fn noexec(&self) -> bool {
        self.taints
            .iter()
            .any(|t| t == UNREACHABLE || t == NOT_READY)
    }
}

#[derive(Debug)]
pub(super) struct PodTruth {
    pub(super) node: String,
    /// `None`: tolerates the node taints forever.
    pub(super) toleration: Option<Duration>,
    pub(super) created: Time,
    pub(super) deleted: Option<Time>,
    /// (created, taint run start) of the obligation already judged.
    pub(super) judged: Option<(Time, Time)>,
    /// The same for `decision-late` (the last few).
    pub(super) decisions_judged: VecDeque<(Time, Time)>,
}

#[derive(Debug, Default)]
pub(super) struct RssTrack {
    pub(super) started: Option<Time>,
    pub(super) baseline_kib: Option<u64>,
    pub(super) last_kib: u64,
    pub(super) peak_kib: u64,
    pub(super) reported: bool,
}

/// Counts of liveness obligations judged (and met).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Obligations {
    pub dead_nodes_tainted: u64,
    pub pods_evicted: u64,
    pub recovered_untainted: u64,
    pub unknown_verdicts_checked: u64,
    pub taints_checked: u64,
    pub deletions_checked: u64,
    pub untaints_checked: u64,
    /// `decision-late`: judged and met; not judged because a fault stopped the daemons.
    pub decisions_on_time: u64,
    pub decisions_excused: u64,
    /// The latest of the deletions judged on time, after their due time.
    pub worst_decision_lateness: Duration,
    /// `--fencing`: attempts recorded and agent runs (by step, from 1), pauses of fencing.
    pub fence_attempts: BTreeMap<usize, u64>,
    pub fence_runs: BTreeMap<usize, u64>,
    pub fence_pauses: u64,
    /// `--partitions`: pods marked in domains that keep them Ready (checked), holds past
    /// `hold_max` judged (and met) or excused (every domain down).
    pub pod_marks_checked: u64,
    pub holds_judged: u64,
    pub holds_excused: u64,
    /// `--shadow` (`shadow_rules.rs`).
    pub shadow: super::shadow_rules::ShadowCounts,
}

/// What a daemon-side fault does to the daemons' decisions (`decision-late`).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum FaultClass {
    /// A connection-level fault on a healthy server (watch drop, 410, corrupt line, a short
    /// API restart): the daemon only has to reconnect.
    Reset,
    /// A fault that stops or slows a daemon (stall, freeze, leader kill, 500/429 bursts, slow
    /// responses, an API outage long enough to lose the leader Lease).
    Blocking,
}

pub struct Checker {
    pub(super) limits: Limits,
    pub(super) reader: FactReader,
    /// Bearer token -> daemon name.
    pub(super) daemons: HashMap<String, String>,
    pub(super) nodes: BTreeMap<String, NodeTruth>,
    pub(super) pods: BTreeMap<String, PodTruth>,
    /// Per zone: since when the zone rules forbid new NoExecute taints (None: allowed).
    pub(super) forbidden_since: BTreeMap<String, Option<Time>>,
    /// Per zone: since when taints have been allowed without a break.
    pub(super) allowed_since: BTreeMap<String, Time>,
    pub(super) all_full_since: Option<Time>,
    /// Disruption domains (`domains.rs`): held domains' `hold_max`, since when each domain has been
    /// fully disrupted in the store, and the domains the daemons may be holding now.
    pub(super) holds: BTreeMap<String, Option<Duration>>,
    pub(super) full_since: BTreeMap<String, Time>,
    pub(super) held: std::collections::BTreeSet<String>,
    /// Leaving master disruption mode restarts every node's grace period.
    pub(super) all_full_exit: Time,
    pub(super) last_write: HashMap<String, Time>,
    pub(super) quiet_until: Time,
    /// Daemon-side faults (class, from, to, kind), the last two minutes.
    pub(super) fault_windows: VecDeque<(FaultClass, Time, Time, &'static str)>,
    pub(super) rss: BTreeMap<(String, u32), RssTrack>,
    /// Per daemon: (end of a sampling period, run-queue wait in it), the last two minutes.
    pub(super) cpu_waits: HashMap<String, VecDeque<(Time, Duration)>>,
    pub decisions: BTreeMap<String, u64>,
    pub obligations: Obligations,
    pub violations: Vec<Violation>,
    pub(super) last_seq: u64,
    /// Records the log dropped before they were read (must stay 0).
    pub missed_records: u64,
    pub(super) brake: super::brake_rule::BrakeTruth,
    pub(super) fence: super::fencing::FenceTruth,
    pub(super) partitions: super::domains::DomainTruth,
    /// `--shadow`: the daemons' processes and reports (`shadow_rules.rs`).
    pub(super) shadow: Option<super::shadow_rules::ShadowTruth>,
}

impl Checker {
    /// `nodes`: every node, Ready and alive at `start`; zones from their names (`z2-n007`).
    pub fn new(limits: Limits, daemons: &[(&str, &str)], nodes: &[String], start: Time) -> Self {
        let mut checker = Checker {
            limits,
            reader: FactReader::new(None, Duration::ZERO),
            daemons: daemons
                .iter()
                .map(|(token, name)| (token.to_string(), name.to_string()))
                .collect(),
            nodes: BTreeMap::new(),
            pods: BTreeMap::new(),
            forbidden_since: BTreeMap::new(),
            allowed_since: BTreeMap::new(),
            all_full_since: None,
            holds: BTreeMap::new(),
            full_since: BTreeMap::new(),
            held: Default::default(),
            all_full_exit: Time::ZERO,
            last_write: HashMap::new(),
            quiet_until: start,
            fault_windows: VecDeque::new(),
            rss: BTreeMap::new(),
            cpu_waits: HashMap::new(),
            decisions: BTreeMap::new(),
            obligations: Obligations::default(),
            violations: Vec::new(),
            last_seq: 0,
            missed_records: 0,
            brake: Default::default(),
            fence: Default::default(),
            partitions: Default::default(),
            shadow: None,
        };
        for node in nodes {
            let zone = zone_of(node).to_string();
            checker.allowed_since.insert(zone.clone(), start);
            checker.forbidden_since.insert(zone.clone(), None);
            checker.nodes.insert(
                node.clone(),
                NodeTruth {
                    zone,
                    evidence: VecDeque::from([start]),
                    ready: "True".into(),
                    ready_since: start,
                    alive: true,
                    kubelet_since: start,
                    judged: Some(start),
                    taints: Vec::new(),
                    noexec_since: None,
                    noexec_ended: None,
                    last_run: None,
                },
            );
        }
        checker
    }

    /// `daemon` waited `delta` for a CPU (ready to run, every core taken) in the sampling
    /// period ending at `at` (from /proc/PID/schedstat).
    pub fn cpu_wait(&mut self, daemon: &str, at: Time, delta: Duration) {
        if delta.is_zero() {
            return;
        }
        let series = self.cpu_waits.entry(daemon.to_string()).or_default();
        series.push_back((at, delta));
        while series
            .front()
            .is_some_and(|&(t, _)| at.since(t) > Duration::from_secs(120))
        {
            series.pop_front();
        }
    }

    /// How long `daemon` waited for a CPU in the periods ending in `(from, to]` (`from` as a
    /// time since the epoch).
    pub(super) fn waited(&self, daemon: &str, from: Duration, to: Time) -> Duration {
        self.cpu_waits
            .get(daemon)
            .map(|series| {
                series
                    .iter()
                    .filter(|&&(t, _)| t.since(Time::ZERO) > from && t <= to)
                    .map(|&(_, d)| d)
                    .sum()
            })
            .unwrap_or_default()
    }

    /// A pod the soak runs (`namespace/name`), with its NoExecute toleration (`None`: forever).
    pub fn add_pod(&mut self, key: &str, node: &str, toleration: Option<Duration>, at: Time) {
        self.pods.insert(
            key.to_string(),
            PodTruth {
                node: node.to_string(),
                toleration,
                created: at,
                deleted: None,
                judged: None,
                decisions_judged: VecDeque::new(),
            },
        );
    }

    /// Liveness deadlines start no earlier than `until` (a fault stopped every daemon).
    pub fn quiet_until(&mut self, until: Time) {
        self.quiet_until = self.quiet_until.max(until);
    }

    /// A daemon-side fault `kind` of `class` acting from `from` to `to` (`decision-late`).
    pub fn fault(&mut self, class: FaultClass, kind: &'static str, from: Time, to: Time) {
        self.fault_windows.push_back((class, from, to, kind));
        while self
            .fault_windows
            .front()
            .is_some_and(|&(_, _, end, _)| from.since(end) > Duration::from_secs(120))
        {
            self.fault_windows.pop_front();
        }
    }

    /// The kubelets' ground truth: `node`'s kubelet became alive (or silent) at `at`.
    pub fn kubelet(&mut self, node: &str, alive: bool, at: Time) {
        if let Some(n) = self.nodes.get_mut(node) {
            if n.alive != alive {
                n.alive = alive;
                n.kubelet_since = at;
            }
        }
        self.update_brake(at);
    }

    /// The last write log record read.
    pub fn last_seq(&self) -> u64 {
        self.last_seq
    }

    /// Feeds write records in log order (records already read are skipped).
    pub fn on_writes(&mut self, records: &[WriteRecord]) {
        for record in records {
            if record.seq <= self.last_seq {
                continue;
            }
            if record.seq > self.last_seq + 1 && self.last_seq > 0 {
                self.missed_records += record.seq - self.last_seq - 1;
            }
            self.last_seq = record.seq;
            self.on_write(record);
        }
    }

    fn on_write(&mut self, r: &WriteRecord) {
        let label = r.identity.label().to_string();
        if label == KUBELET {
            return self.on_kubelet_write(r);
        }
        if label == DRIVER {
            if r.resource == Resource::Pods && r.verb == Verb::Create && r.succeeded() {
                let key = format!("{}/{}", r.namespace.as_deref().unwrap_or(""), r.name);
                if let Some(pod) = self.pods.get_mut(&key) {
                    pod.created = r.wall;
                    pod.deleted = None;
                }
            }
            return;
        }
        let Some(daemon) = r.identity.token.as_ref().and_then(|t| self.daemons.get(t)) else {
            if self.shadow.is_some() && label == INCUMBENT {
                // The writer of record: counted by request, not judged.
                let key = format!("incumbent: {} {}", r.verb, r.target());
                *self.decisions.entry(key).or_default() += 1;
            }
            return;
        };
        let daemon = daemon.clone();
        self.check_shadow_write(&daemon, r);
        let leader_lease =
            r.resource == Resource::Leases && r.namespace.as_deref() != Some("kube-node-lease");
        if !leader_lease {
            self.check_writer(&daemon, r.wall);
        } else if r.succeeded() && self.partitions.awaiting_leader {
            // The first write of the leader Lease after a kill: a leader acts (a restarted
            // daemon of the same identity renews its own Lease, without a new acquireTime).
            self.partitions.awaiting_leader = false;
            self.partitions.leader_acquired.push(r.wall);
        }
        let facts = self.reader.read(std::slice::from_ref(r));
        let kinds: Vec<FactKind> = facts.into_iter().map(|f| f.kind).collect();
        for kind in &kinds {
            self.count(kind);
            match kind {
                FactKind::NodeReady { node, status, .. } => {
                    if status == "Unknown" {
                        self.check_unknown(&daemon, node, r.wall);
                    }
                    self.set_ready(node, status, r.wall);
                }
                FactKind::FenceAttempt { node, step } => {
                    self.check_fence_attempt(&daemon, node, *step, r.wall);
                }
                FactKind::PodNotReady { pod } => self.check_pod_marked(&daemon, pod, r.wall),
                FactKind::PodDeleted { pod, .. } => {
                    if self.pods.get(pod).is_some_and(|p| p.deleted.is_none()) {
                        self.check_brake(format!("{pod} deleted"), r.wall);
                    }
                    self.check_deletion(&daemon, pod, r.wall);
                    self.check_decision_at_deletion(pod, r.wall);
                }
                _ => {}
            }
        }
        // Taints last: a swap (one key for the other in one write) is not a new taint.
        let added: Vec<&String> = kinds
            .iter()
            .filter_map(|k| match k {
                FactKind::TaintAdded { node, taint } => Some((node, taint)),
                _ => None,
            })
            .filter(|(_, t)| *t == UNREACHABLE || *t == NOT_READY)
            .map(|(n, _)| n)
            .collect();
        for node in added {
            let had = self.nodes.get(node).is_some_and(NodeTruth::noexec);
            if !had {
                self.check_brake(format!("{node} tainted NoExecute"), r.wall);
                self.check_taint(&daemon, node, r.wall);
            }
        }
        let touched: Vec<String> = kinds
            .iter()
            .filter_map(|k| match k {
                FactKind::TaintAdded { node, .. } | FactKind::TaintRemoved { node, .. } => {
                    Some(node.clone())
                }
                _ => None,
            })
            .collect();
        for node in touched {
            let taints = self
                .reader
                .controller_taints()
                .get(&node)
                .cloned()
                .unwrap_or_default();
            let mut removed = false;
            if let Some(n) = self.nodes.get_mut(&node) {
                let before = n.noexec();
                n.taints = taints;
                match (before, n.noexec()) {
                    (false, true) => n.noexec_since = Some(r.wall),
                    (true, false) => {
                        n.last_run = n.noexec_since.map(|start| (start, r.wall));
                        n.noexec_since = None;
                        n.noexec_ended = Some(r.wall);
                        removed = true;
                    }
                    _ => {}
                }
            }
            if removed {
                self.check_untaint(&daemon, &node, r.wall);
            }
        }
    }

    fn on_kubelet_write(&mut self, r: &WriteRecord) {
        let node = match (r.resource, r.namespace.as_deref()) {
            (Resource::Leases, Some("kube-node-lease")) => &r.name,
            (Resource::Nodes, _) => &r.name,
            _ => return,
        };
        let Some(n) = self.nodes.get_mut(node) else {
            return;
        };
        n.evidence.push_back(r.wall);
        let keep = self.limits.grace * 4;
        while n.evidence.len() > 2 && n.evidence.front().is_some_and(|&t| r.wall - t > keep) {
            n.evidence.pop_front();
        }
        if r.resource == Resource::Nodes {
            // A kubelet posts every condition at once; the soak's kubelets always report
            // Ready=True, so a post without a readable Ready change (the summary is cut at
            // 1200 characters, Ready comes last) is Ready=True.
            let status = ready_from_diff(&r.summary).map_or_else(|| "True".to_string(), |s| s.0);
            let node = node.clone();
            self.set_ready(&node, &status, r.wall);
        }
    }

    /// The obligations judged so far, the fencing and partition rules' counts included.
    pub fn obligations(&self) -> Obligations {
        Obligations {
            fence_attempts: self.fence.attempts.clone(),
            fence_runs: self.fence.runs.clone(),
            fence_pauses: self.fence.pauses(),
            pod_marks_checked: self.partitions.pod_marks_checked,
            holds_judged: self.partitions.holds_judged,
            holds_excused: self.partitions.holds_excused,
            ..self.obligations.clone()
        }
    }

    pub(super) fn violation(&mut self, at: Time, rule: &'static str, detail: String) {
        self.violations.push(Violation { at, rule, detail });
    }

    fn count(&mut self, kind: &FactKind) {
        let key = match kind {
            FactKind::NodeReady { status, .. } => format!("node Ready={status}"),
            FactKind::TaintAdded { taint, .. } => format!("taint +{taint}"),
            FactKind::TaintRemoved { taint, .. } => format!("taint -{taint}"),
            FactKind::PodNotReady { .. } => "pod Ready=False".into(),
            FactKind::PodDisruptionTarget { .. } => "pod DisruptionTarget".into(),
            FactKind::PodDeleted { .. } => "pod deleted".into(),
            FactKind::Event { reason, .. } => format!("event {reason}"),
            FactKind::LeaderLease { .. } => "leader lease taken or released".into(),
            FactKind::Failed { code, .. } => format!("write refused {code}"),
            FactKind::NodeLabels { .. } => "node labels".into(),
            FactKind::PodNodeLost { .. } => "pod NodeLost".into(),
            FactKind::FenceRun { .. } => "fence command run".into(),
            FactKind::FenceAttempt { step, .. } => format!("fence attempt step={step}"),
            FactKind::Other { what } => format!(
                "other {}",
                what.split(' ').take(2).collect::<Vec<_>>().join(" ")
            ),
            FactKind::Step(_) => return,
        };
        *self.decisions.entry(key).or_default() += 1;
    }
}
