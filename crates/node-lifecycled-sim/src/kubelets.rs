//! Simulated kubelets: every node's heartbeat, acting inside the simulator process on its store
//! (no HTTP), so thousands of nodes cost one thread and a few hundred store writes a second.
//!
//! What a kubelet does that the node lifecycle controller can see:
//! - renews its Lease in `kube-node-lease` every `renew_interval` (kubelet: 10 s, a quarter of
//!   the 40 s lease, with 4 % jitter), the Lease saying four times that as its
//!   `leaseDurationSeconds` (the daemon's early suspects read the renew interval from it);
//! - computes its node status every `status_update_interval` (kubelet's
//!   nodeStatusUpdateFrequency, 10 s) and posts it when a condition differs from what the server
//!   holds (after the controller set it Unknown, say) or when the last post is
//!   `status_report_interval` old (nodeStatusReportFrequency, 5 min);
//! - finishes the graceful deletion of its pods (removes pods with a deletionTimestamp). Pods
//!   terminating on a silent node stay, as they do in a real cluster.
//!
//! [`Fleet`] is the sans-IO part (per-node state and a timer heap; time passed in), so tests drive
//! it with a virtual clock; [`Kubelets`] runs a fleet on one thread against the real clock.

use std::collections::HashMap;
use std::fmt;
use std::time::Duration;

use serde_json::{Map, Value, json};

use super::cluster::{Cluster, kubelet_reason};
use super::resource::Resource;
use crate::testing::Rng;
use node_lifecycled::time::Time;
use node_lifecycled::time::TimerHeap;

mod threaded;
pub use threaded::Kubelets;

/// The conditions a kubelet owns and posts, with their healthy status.
const KUBELET_CONDITIONS: [(&str, &str); 4] = [
    ("MemoryPressure", "False"),
    ("DiskPressure", "False"),
    ("PIDPressure", "False"),
    ("Ready", "True"),
];

/// How long until its next tick a kubelet picked at a random moment waits, in a fleet that has
/// run a long time: the `q` quantile (0 ≤ q < 1) of the renewal process's equilibrium residual
/// time, each wait being `interval * (1 + jitter * u)`, u uniform.
///
/// Not simply uniform over `interval`: a fleet whose first ticks are spread that way ticks again
/// after `interval` to `interval * (1 + jitter)`, so its rate dips to nothing at `interval` and
/// climbs back over `interval * jitter` (at 5,000 nodes from none to 500 renewals a second over
/// 400 ms, and a watch that quiet is read on a widened grid, which shows in the bench's detection
/// tails). Drawn from
/// the equilibrium, the fleet's rate is even from the first tick on. Its density is
/// P(wait > x) / mean wait: flat up to `interval`, then falling linearly to zero.
pub fn steady_phase(interval: Duration, jitter: f64, q: f64) -> Duration {
    let t = interval.as_secs_f64();
    let j = if jitter.is_finite() {
        jitter.max(0.0)
    } else {
        0.0
    };
    let q = if q.is_finite() {
        q.clamp(0.0, 1.0)
    } else {
        0.0
    };
    let x = q * t * (1.0 + j / 2.0);
    if x <= t || j == 0.0 {
        return Duration::from_secs_f64(x);
    }
    // Past `interval`: solve x' - (x' - t)^2 / (2 j t) = x for x' in [t, t (1 + j)].
    let jt = j * t;
    let root = (1.0 - 2.0 * (x - t) / jt).max(0.0).sqrt();
    Duration::from_secs_f64(t + jt * (1.0 - root))
}

#[derive(Clone, Debug, PartialEq)]
pub struct KubeletConfig {
    pub renew_interval: Duration,
    pub status_update_interval: Duration,
    pub status_report_interval: Duration,
    /// Each wait is `interval * (1 + jitter * u)`, u uniform in [0, 1) (kubelet: 0.04).
    pub jitter: f64,
    /// How often graceful pod deletions on live nodes are finished.
    pub finalize_interval: Duration,
    pub seed: u64,
}

impl Default for KubeletConfig {
    fn default() -> KubeletConfig {
        KubeletConfig {
            renew_interval: Duration::from_secs(10),
            status_update_interval: Duration::from_secs(10),
            status_report_interval: Duration::from_secs(300),
            jitter: 0.04,
            finalize_interval: Duration::from_secs(1),
            seed: 1,
        }
    }
}

/// Counters since start.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KubeletStats {
    pub nodes: usize,
    /// Nodes whose kubelet is heartbeating now.
    pub alive: usize,
    pub lease_renewals: u64,
    pub status_posts: u64,
    pub pods_finalized: u64,
    /// Store writes that failed (node or lease deleted under the kubelet, say).
    pub write_errors: u64,
    /// The latest a renewal ran after its due time (how far the driver fell behind).
    pub max_renew_lag: Duration,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnknownNode(pub String);

impl fmt::Display for UnknownNode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "no simulated kubelet runs node {:?}", self.0)
    }
}

impl std::error::Error for UnknownNode {}

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Heartbeat {
    Alive,
    /// Silent until resumed (a dead machine, a cut network).
    Stopped,
    /// Silent until the reboot ends, then alive again.
    Rebooting,
}

#[derive(Debug)]
struct Agent {
    name: String,
    heartbeat: Heartbeat,
    /// Conditions the kubelet reports differently from healthy (type -> status).
    reported: Vec<(String, String)>,
    last_report: Option<Time>,
}

impl Agent {
    fn desired(&self) -> Vec<(String, String)> {
        let mut conditions: Vec<(String, String)> = KUBELET_CONDITIONS
            .iter()
            .map(|(t, s)| (t.to_string(), s.to_string()))
            .collect();
        for (t, s) in &self.reported {
            match conditions.iter_mut().find(|(ct, _)| ct == t) {
                Some(c) => c.1 = s.clone(),
                None => conditions.push((t.clone(), s.clone())),
            }
        }
        conditions
    }
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
enum Chore {
    RenewLease(usize),
    SyncStatus(usize),
    RebootDone(usize),
    FinalizePods,
}

/// The kubelets of many nodes, sans-IO: call [`Fleet::run_due`] with the time, sleep until
/// [`Fleet::next_deadline`].
#[derive(Debug)]
pub struct Fleet {
    config: KubeletConfig,
    agents: Vec<Agent>,
    index: HashMap<String, usize>,
    timers: TimerHeap<Chore>,
    rng: Rng,
    stats: KubeletStats,
}

impl Fleet {
    pub fn new(config: KubeletConfig) -> Fleet {
        let rng = Rng::new(config.seed);
        Fleet {
            config,
            agents: Vec::new(),
            index: HashMap::new(),
            timers: TimerHeap::new(),
            rng,
            stats: KubeletStats::default(),
        }
    }

    /// Starts the kubelet of `node` (already in the store). First renewal and status check fall
    /// where they would in a fleet that has run a long time ([`steady_phase`]), so a fleet
    /// started at once neither beats in step nor dips a renew interval later.
    pub fn add_node(&mut self, node: &str, now: Time) {
        if self.index.contains_key(node) {
            return;
        }
        let i = self.agents.len();
        self.agents.push(Agent {
            name: node.to_string(),
            heartbeat: Heartbeat::Alive,
            reported: Vec::new(),
            last_report: Some(now),
        });
        self.index.insert(node.to_string(), i);
        let renew = self.steady_phase_of(self.config.renew_interval);
        let status = self.steady_phase_of(self.config.status_update_interval);
        self.timers.schedule(Chore::RenewLease(i), now + renew);
        self.timers.schedule(Chore::SyncStatus(i), now + status);
        if !self.timers.contains(&Chore::FinalizePods) {
            self.timers
                .schedule(Chore::FinalizePods, now + self.config.finalize_interval);
        }
    }

    pub fn contains(&self, node: &str) -> bool {
        self.index.contains_key(node)
    }

    pub fn is_alive(&self, node: &str) -> bool {
        self.index
            .get(node)
            .is_some_and(|&i| self.agents[i].heartbeat == Heartbeat::Alive)
    }

    /// The kubelet goes silent: no Lease renewal, no status post, until `resume_heartbeat`.
    pub fn stop_heartbeat(&mut self, node: &str) -> Result<(), UnknownNode> {
        let i = self.agent(node)?;
        self.agents[i].heartbeat = Heartbeat::Stopped;
        self.silence(i);
        Ok(())
    }

    /// The kubelet is back: it renews its Lease and checks its status at once.
    pub fn resume_heartbeat(&mut self, node: &str, now: Time) -> Result<(), UnknownNode> {
        let i = self.agent(node)?;
        self.wake(i, now);
        Ok(())
    }

    /// Silent for `down`, then alive again (as after a reboot).
    pub fn reboot(&mut self, node: &str, down: Duration, now: Time) -> Result<(), UnknownNode> {
        let i = self.agent(node)?;
        self.agents[i].heartbeat = Heartbeat::Rebooting;
        self.silence(i);
        self.timers.schedule(Chore::RebootDone(i), now + down);
        Ok(())
    }

    /// From now on the kubelet reports `condition` with `status` ("Ready" "False", "DiskPressure"
    /// "True", …); reporting the healthy status again ends the override. Posted at once if alive.
    pub fn set_condition(
        &mut self,
        node: &str,
        condition: &str,
        status: &str,
        now: Time,
    ) -> Result<(), UnknownNode> {
        let i = self.agent(node)?;
        let agent = &mut self.agents[i];
        agent.reported.retain(|(t, _)| t != condition);
        let healthy = KUBELET_CONDITIONS
            .iter()
            .any(|(t, s)| *t == condition && *s == status);
        if !healthy {
            agent
                .reported
                .push((condition.to_string(), status.to_string()));
        }
        if agent.heartbeat == Heartbeat::Alive {
            self.timers.schedule(Chore::SyncStatus(i), now);
        }
        Ok(())
    }

    pub fn stats(&self) -> KubeletStats {
        KubeletStats {
            nodes: self.agents.len(),
            alive: self
                .agents
                .iter()
                .filter(|a| a.heartbeat == Heartbeat::Alive)
                .count(),
            ..self.stats.clone()
        }
    }

    pub fn next_deadline(&self) -> Option<Time> {
        self.timers.next_deadline()
    }

    /// Does every chore due at `now`; returns how many ran.
    pub fn run_due(&mut self, cluster: &Cluster, now: Time) -> usize {
        let mut ran = 0;
        while let Some((chore, due)) = self.timers.pop_due(now) {
            ran += 1;
            match chore {
                Chore::RenewLease(i) => self.renew(cluster, i, due, now),
                Chore::SyncStatus(i) => self.sync_status(cluster, i, now),
                Chore::RebootDone(i) => self.wake(i, now),
                Chore::FinalizePods => self.finalize_pods(cluster, now),
            }
        }
        ran
    }

    fn agent(&self, node: &str) -> Result<usize, UnknownNode> {
        self.index
            .get(node)
            .copied()
            .ok_or_else(|| UnknownNode(node.to_string()))
    }

    fn silence(&mut self, i: usize) {
        self.timers.cancel(&Chore::RenewLease(i));
        self.timers.cancel(&Chore::SyncStatus(i));
        self.timers.cancel(&Chore::RebootDone(i));
    }

    fn wake(&mut self, i: usize, now: Time) {
        self.agents[i].heartbeat = Heartbeat::Alive;
        self.timers.cancel(&Chore::RebootDone(i));
        self.timers.schedule(Chore::RenewLease(i), now);
        self.timers.schedule(Chore::SyncStatus(i), now);
    }

    /// `interval` stretched by the jitter (kubelet's wait.JitterUntil).
    fn jittered(&mut self, interval: Duration) -> Duration {
        let u = (self.rng.below(1_000_000) as f64) / 1_000_000.0;
        interval.mul_f64(1.0 + self.config.jitter.max(0.0) * u)
    }

    /// The `q` quantile of this fleet's time to a kubelet's next Lease renewal once it has run
    /// a long time ([`steady_phase`] of its renew interval and jitter): where to resume kubelet
    /// `i` of `n`, with `q = i / n`, so the fleet renews at the rate it had.
    pub fn renewal_phase(&self, q: f64) -> Duration {
        steady_phase(self.config.renew_interval, self.config.jitter, q)
    }

    /// A first wait drawn as in a fleet that has run a long time ([`steady_phase`]).
    fn steady_phase_of(&mut self, interval: Duration) -> Duration {
        let u = (self.rng.below(1_000_000) as f64) / 1_000_000.0;
        steady_phase(interval, self.config.jitter, u)
    }

    fn renew(&mut self, cluster: &Cluster, i: usize, due: Time, now: Time) {
        let lag = now.since(due);
        self.stats.max_renew_lag = self.stats.max_renew_lag.max(lag);
        let interval = self.config.renew_interval;
        match cluster.renew_lease_every(&self.agents[i].name, now, interval) {
            Ok(()) => self.stats.lease_renewals += 1,
            Err(e) => {
                self.stats.write_errors += 1;
                log::debug!("kubelet {}: lease renewal failed: {e}", self.agents[i].name);
            }
        }
        // Sliding, as the kubelet's lease controller: the next wait starts after this renewal.
        let next = self.jittered(self.config.renew_interval);
        self.timers.schedule(Chore::RenewLease(i), now + next);
    }

    fn sync_status(&mut self, cluster: &Cluster, i: usize, now: Time) {
        let agent = &self.agents[i];
        let desired = agent.desired();
        let report_due = agent
            .last_report
            .is_none_or(|t| now.since(t) >= self.config.status_report_interval);
        let mut posted = false;
        let result = cluster.update(Resource::Nodes, None, &agent.name, |node| {
            posted = post_status(node, &desired, report_due, now);
        });
        match result {
            Ok(_) if posted => {
                self.stats.status_posts += 1;
                self.agents[i].last_report = Some(now);
            }
            Ok(_) => {}
            Err(e) => {
                self.stats.write_errors += 1;
                log::debug!("kubelet {}: status update failed: {e}", self.agents[i].name);
            }
        }
        let next = self.jittered(self.config.status_update_interval);
        self.timers.schedule(Chore::SyncStatus(i), now + next);
    }

    /// Removes the terminating pods whose node's kubelet is alive: its containers have stopped.
    fn finalize_pods(&mut self, cluster: &Cluster, now: Time) {
        for (namespace, name) in cluster.terminating_pods() {
            let Some(pod) = cluster.get(Resource::Pods, Some(&namespace), &name) else {
                continue;
            };
            let node = pod
                .pointer("/spec/nodeName")
                .and_then(Value::as_str)
                .unwrap_or("");
            if self.is_alive(node) {
                match cluster.remove(Resource::Pods, Some(&namespace), &name) {
                    Ok(_) => self.stats.pods_finalized += 1,
                    Err(_) => self.stats.write_errors += 1,
                }
            }
        }
        self.timers
            .schedule(Chore::FinalizePods, now + self.config.finalize_interval);
    }
}

/// A kubelet status update of `node` in place: posts every kubelet condition with a fresh
/// heartbeat when one differs from `desired` or `report_due`; returns whether it posted.
fn post_status(
    node: &mut Value,
    desired: &[(String, String)],
    report_due: bool,
    now: Time,
) -> bool {
    let Some(status) = node
        .as_object_mut()
        .map(|o| o.entry("status").or_insert_with(|| json!({})))
        .and_then(Value::as_object_mut)
    else {
        return false;
    };
    let conditions = status
        .entry("conditions")
        .or_insert_with(|| Value::Array(Vec::new()));
    if !conditions.is_array() {
        *conditions = Value::Array(Vec::new());
    }
    let Some(list) = conditions.as_array_mut() else {
        return false;
    };
    let stored = |t: &str| -> Option<&Value> { list.iter().find(|c| c["type"] == t) };
    let changed = desired
        .iter()
        .any(|(t, s)| stored(t).is_none_or(|c| c["status"] != s.as_str()));
    if !changed && !report_due {
        return false;
    }
    let stamp = Value::from(now.to_rfc3339());
    for (t, s) in desired {
        let (reason, message) = kubelet_reason(t, s);
        let mut entry = Map::new();
        entry.insert("type".into(), Value::from(t.as_str()));
        entry.insert("status".into(), Value::from(s.as_str()));
        entry.insert("lastHeartbeatTime".into(), stamp.clone());
        entry.insert("lastTransitionTime".into(), stamp.clone());
        entry.insert("reason".into(), Value::from(reason));
        entry.insert("message".into(), Value::from(message));
        match list.iter_mut().find(|c| c["type"] == t.as_str()) {
            Some(existing) => {
                if existing["status"] == s.as_str() {
                    entry.insert(
                        "lastTransitionTime".into(),
                        existing["lastTransitionTime"].clone(),
                    );
                }
                *existing = Value::Object(entry);
            }
            None => list.push(Value::Object(entry)),
        }
    }
    true
}
