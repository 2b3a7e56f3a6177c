//! The seeded fault plan of a soak: which fault happens when, decided up front from the seed
//! alone (the same seed and duration give the same plan), so a run that found something can be
//! replayed with the same sequence of faults (the daemon's own timing still varies).
//!
//! Faults come as episodes a short random gap apart (mean about 2 s: a 30-minute soak sees
//! several hundred). A kubelet episode (stop then resume, reboot, flap) takes a node that no
//! other episode is using; zone and whole-cluster outages take every node they name.
//! Correlated zone failures: most of a zone's free nodes (past the unhealthy threshold, not all)
//! silent at the same instant, or within one Lease renew interval; a
//! quarter of the zone episodes kill the leader while their nodes are dead and tainted (and
//! every plan opens with such an episode, so even a one-minute soak meets one); and kubelet
//! stops with a connection reset planned about when one of the node's pods falls due.

use std::time::Duration;

use crate::testing::Rng;

mod fencing;
mod shadow;
mod sites;

/// One thing the soak does to the cluster or the daemons.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fault {
    KubeletStop(String),
    KubeletResume(String),
    /// Silent for the duration, then alive again on its own.
    KubeletReboot(String, Duration),
    /// Every open watch connection closed mid-stream.
    DropWatches,
    /// Watches send nothing (not even bookmarks) for the duration.
    StallWatches(Duration),
    /// The next watch requests are answered 410 Gone (the client must relist).
    ExpireWatches(u32),
    /// One line of garbage on every open watch.
    CorruptLines,
    /// The API server closes every connection and refuses new ones for the duration.
    ApiRestart(Duration),
    /// The next `count` requests matching the target get `code` (409 on node writes, 429 with
    /// Retry-After or 500 on anything).
    ErrorBurst {
        code: u16,
        count: u32,
        target: BurstTarget,
    },
    /// Every response delayed by the first duration, for the second.
    SlowResponses(Duration, Duration),
    /// SIGKILL of the daemon holding the leader Lease; it is started again after the duration.
    KillLeader(Duration),
    /// SIGHUP to both daemons after rewriting their config: valid (a changed log level) or not.
    Reload {
        valid: bool,
    },
    /// The fleet pause of fencing written on the leader Lease (the annotation
    /// `node-lifecycled pause fencing` writes), ending by itself after the duration.
    PauseFencing(Duration),
    /// The pause annotation taken off (`node-lifecycled resume`).
    ResumeFencing,
    /// SIGTERM of the daemon holding the leader Lease (`leader`) or of the other one, started
    /// again after the duration (`--shadow`: a restart that saves the shadow history).
    RestartDaemon {
        leader: bool,
        after: Duration,
    },
}

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum BurstTarget {
    Any,
    /// PUT / PATCH of nodes and nodes/status: where a 409 means a lost race.
    NodeWrites,
    /// Lease reads and writes (the live Lease read, leader election).
    Leases,
}

/// A fault at its time, with the episode it belongs to (`kind`, what the report counts).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Step {
    /// Since the start of the soak.
    pub at: Duration,
    pub fault: Fault,
    /// The episode's kind for the report: `kubelet-stop`, `zone-outage`, `watch-410`, …; the
    /// follow-up steps of an episode (a resume) carry `""`.
    pub kind: &'static str,
}

/// What the plan needs to know about the cluster.
#[derive(Clone, Debug)]
pub struct PlanShape {
    /// Node names by zone.
    pub zones: Vec<Vec<String>>,
    pub duration: Duration,
    /// No fault before this (the daemons start and sync).
    pub warmup: Duration,
    /// No new episode in the last stretch, so liveness can be judged at the end.
    pub cooldown: Duration,
    /// At most this many nodes silent at once from single-node episodes.
    pub max_single_down: usize,
    /// The daemons' grace period (a leader killed during an outage is killed after it).
    pub grace: Duration,
    /// Per node (in the order of `zones`, flattened): its pods' NoExecute tolerations (a
    /// connection reset is planned about when one runs out); empty: 0, 3, 6 or 10 s.
    pub tolerations: Vec<Vec<Duration>>,
    /// Disruption domains (`--partitions`): node indices (in the order of `zones`, flattened)
    /// and each one's `hold_max`. Empty: no site episodes.
    pub sites: Vec<Site>,
    /// Nodes the daemons may fence (`--fencing`), by index, and the fencing `after`. Empty:
    /// no fence episodes.
    pub fence_nodes: Vec<usize>,
    pub fence_after: Duration,
    /// `--shadow`: the daemons write nothing (an incumbent does), so `burst-409` (on node
    /// writes) is not drawn and `daemon-restart` is.
    pub shadow: bool,
}

/// A disruption domain of the plan.
#[derive(Clone, Debug)]
pub struct Site {
    pub nodes: Vec<usize>,
    pub hold_max: Option<Duration>,
}

/// The episode kinds and their weights.
const EPISODES: [(&str, u64); 21] = [
    ("kubelet-stop", 18),
    ("kubelet-reboot", 10),
    ("kubelet-flap", 8),
    ("kubelet-stop-reset", 3),
    ("zone-outage", 2),
    ("zone-partial-sync", 2),
    ("zone-partial-spread", 2),
    ("all-zones-down", 1),
    ("watch-drop", 6),
    ("watch-stall", 5),
    ("watch-freeze", 2),
    ("watch-410", 4),
    ("corrupt-line", 4),
    ("api-restart", 3),
    ("burst-409", 3),
    ("burst-429", 3),
    ("burst-500", 4),
    ("slow-responses", 5),
    ("kill-leader", 2),
    ("reload-good", 3),
    ("reload-bad", 2),
];

/// Episodes planned only when the cluster has what they need (`PlanShape::sites`,
/// `::fence_nodes`), so the plans of soaks without them stay as they were.
const SITE_EPISODES: [(&str, u64); 2] = [("site-dark-failover", 2), ("hold-across-takeover", 2)];
const FENCE_EPISODES: [(&str, u64); 1] = [("fence-escalation-pause", 6)];
const SHADOW_EPISODES: [(&str, u64); 1] = [("daemon-restart", 3)];
/// Not drawn under `--shadow`: the next node writes answered 409, and the daemons make none.
const NOT_IN_SHADOW: [&str; 1] = ["burst-409"];

struct Planner {
    rng: Rng,
    steps: Vec<Step>,
    /// Per node (zone-major order): busy with an episode until.
    busy_until: Vec<Duration>,
    names: Vec<String>,
    zone_of: Vec<usize>,
    zone_count: usize,
    grace: Duration,
    tolerations: Vec<Vec<Duration>>,
    /// The next zone episode kills the leader while its nodes are dead (the opening one).
    force_kill: bool,
    sites: Vec<Site>,
    fence_nodes: Vec<usize>,
    fence_after: Duration,
    /// No new fleet pause before this (one at a time).
    pause_busy_until: Duration,
    /// Windows in which no fault that stops or slows the daemons starts (around a hold's end
    /// after a takeover, around a pause of fencing), so their rules judge the daemons' own
    /// timing rather than being excused by a fault. Empty unless sites or fencing are planned.
    quiet: Vec<(Duration, Duration)>,
}

/// The episode kinds that stop or slow the daemons (the checker excuses what they delay).
const BLOCKING: [&str; 8] = [
    "watch-stall",
    "watch-freeze",
    "api-restart",
    "burst-429",
    "burst-500",
    "slow-responses",
    "kill-leader",
    "daemon-restart",
];

/// A zone's share of silent nodes that makes it partially disrupted (docs/upstream.md, "Zones"; the
/// soak's daemons run upstream's 0.55).
const UNHEALTHY_ZONE_THRESHOLD: f64 = 0.55;
/// How many zone episodes in a hundred also kill the leader while their nodes are dead.
const KILL_IN_OUTAGE_PERCENT: u64 = 25;

impl Planner {
    fn millis(&mut self, from: u64, to: u64) -> Duration {
        Duration::from_millis(from + self.rng.below(to - from + 1))
    }

    fn push(&mut self, at: Duration, fault: Fault, kind: &'static str) {
        self.steps.push(Step { at, fault, kind });
    }

    fn free_node(&mut self, at: Duration, max_down: usize) -> Option<usize> {
        let down = self.busy_until.iter().filter(|&&b| b > at).count();
        if down >= max_down {
            return None;
        }
        let free: Vec<usize> = (0..self.names.len())
            .filter(|&i| self.busy_until[i] <= at)
            .collect();
        if free.is_empty() {
            return None;
        }
        Some(free[self.rng.below(free.len() as u64) as usize])
    }

    /// Stops each node at `at` (+ up to `spread_ms`) and resumes it `down` (+ up to 2 s) later.
    fn outage(
        &mut self,
        nodes: &[usize],
        at: Duration,
        spread_ms: u64,
        down: Duration,
        kind: &'static str,
    ) {
        let mut first = true;
        for &i in nodes {
            let stop = at + self.millis(0, spread_ms);
            let resume = stop + down + self.millis(0, 2000);
            let name = self.names[i].clone();
            self.push(
                stop,
                Fault::KubeletStop(name.clone()),
                if first { kind } else { "" },
            );
            self.push(resume, Fault::KubeletResume(name), "");
            self.busy_until[i] = resume + Duration::from_secs(1);
            first = false;
        }
    }

    /// Sometimes kills the leader while the nodes of an outage starting at `at` and lasting
    /// at least `down` are dead past the grace period (and some tainted): its successor must
    /// not take their taints off.
    fn maybe_kill_in_outage(&mut self, nodes: &[usize], at: Duration, down: Duration) {
        let forced = std::mem::take(&mut self.force_kill);
        if nodes.is_empty() || !(forced || self.rng.chance(KILL_IN_OUTAGE_PERCENT)) {
            return;
        }
        let earliest = self.grace + Duration::from_millis(1_500);
        let latest = if forced {
            // The opening: soon after the first verdicts, within its quiet stretch.
            earliest + Duration::from_secs(1)
        } else {
            down.saturating_sub(Duration::from_millis(500))
        }
        .max(earliest);
        let when = at + self.millis(millis_of(earliest), millis_of(latest));
        let restart = self.millis(500, 3_000);
        self.push(when, Fault::KillLeader(restart), "kill-leader-in-outage");
    }

    fn episode(&mut self, kind: &'static str, at: Duration, max_down: usize) {
        match kind {
            "kubelet-stop" => {
                if let Some(i) = self.free_node(at, max_down) {
                    // Some short (under the grace period), most long enough to be tainted and
                    // have pods evicted.
                    let down = self.millis(2_000, 45_000);
                    self.outage(&[i], at, 1000, down, kind);
                }
            }
            "kubelet-stop-reset" => {
                if let Some(i) = self.free_node(at, max_down) {
                    // A connection reset about when one of the node's pods falls due: its
                    // NoExecute taint lands about grace − 0.5 s after the stop (the last
                    // heartbeat is up to a renew interval before it), its pods are due their
                    // toleration later.
                    let down = self.millis(15_000, 40_000);
                    self.outage(&[i], at, 0, down, kind);
                    let mut choices: Vec<Duration> = self
                        .tolerations
                        .get(i)
                        .map(|t| t.iter().copied().filter(|&d| d < down).collect())
                        .unwrap_or_default();
                    if choices.is_empty() {
                        choices = [0, 3, 6, 10].map(Duration::from_secs).to_vec();
                    }
                    let toleration = choices[self.rng.below(choices.len() as u64) as usize];
                    let landing = self.grace.saturating_sub(Duration::from_millis(500));
                    let reset = at + landing + toleration - Duration::from_millis(800)
                        + self.millis(0, 1_000);
                    let fault = if self.rng.chance(30) {
                        Fault::ApiRestart(self.millis(200, 1_200))
                    } else {
                        Fault::DropWatches
                    };
                    self.push(reset, fault, "");
                }
            }
            "kubelet-reboot" => {
                if let Some(i) = self.free_node(at, max_down) {
                    let down = self.millis(1_000, 15_000);
                    let name = self.names[i].clone();
                    self.push(at, Fault::KubeletReboot(name, down), kind);
                    self.busy_until[i] = at + down + Duration::from_secs(1);
                }
            }
            "kubelet-flap" => {
                if let Some(i) = self.free_node(at, max_down) {
                    let name = self.names[i].clone();
                    let mut t = at;
                    let cycles = 3 + self.rng.below(4);
                    for c in 0..cycles {
                        let kind = if c == 0 { kind } else { "" };
                        self.push(t, Fault::KubeletStop(name.clone()), kind);
                        // Around the grace period: sometimes declared Unknown, sometimes not.
                        t += self.millis(500, 8_000);
                        self.push(t, Fault::KubeletResume(name.clone()), "");
                        t += self.millis(300, 3_000);
                    }
                    self.busy_until[i] = t + Duration::from_secs(1);
                }
            }
            "zone-outage" => {
                let zone = self.rng.below(self.zone_count as u64) as usize;
                let nodes: Vec<usize> = (0..self.names.len())
                    .filter(|&i| self.zone_of[i] == zone && self.busy_until[i] <= at)
                    .collect();
                let down = self.millis(8_000, 25_000);
                self.outage(&nodes, at, 1000, down, kind);
                self.maybe_kill_in_outage(&nodes, at, down);
            }
            "zone-partial-sync" | "zone-partial-spread" => {
                let zone = self.rng.below(self.zone_count as u64) as usize;
                let size = self.zone_of.iter().filter(|&&z| z == zone).count();
                let mut free: Vec<usize> = (0..self.names.len())
                    .filter(|&i| self.zone_of[i] == zone && self.busy_until[i] <= at)
                    .collect();
                // Past the threshold by one node, never the whole zone: 6 of 8.
                let want = ((size as f64 * UNHEALTHY_ZONE_THRESHOLD).ceil() as usize + 1)
                    .min(size.saturating_sub(1));
                let mut nodes = Vec::new();
                while nodes.len() < want && !free.is_empty() {
                    let pick = self.rng.below(free.len() as u64) as usize;
                    nodes.push(free.swap_remove(pick));
                }
                // At one instant, or over one Lease renew interval of the soak's kubelets.
                let spread = if kind == "zone-partial-sync" { 0 } else { 1000 };
                let down = self.millis(8_000, 25_000);
                self.outage(&nodes, at, spread, down, kind);
                self.maybe_kill_in_outage(&nodes, at, down);
            }
            "all-zones-down" => {
                let nodes: Vec<usize> = (0..self.names.len())
                    .filter(|&i| self.busy_until[i] <= at)
                    .collect();
                let down = self.millis(8_000, 20_000);
                self.outage(&nodes, at, 1000, down, kind);
                self.maybe_kill_in_outage(&nodes, at, down);
            }
            "watch-drop" => self.push(at, Fault::DropWatches, kind),
            "watch-stall" => {
                let d = self.millis(300, 3_000);
                self.push(at, Fault::StallWatches(d), kind)
            }
            "watch-freeze" => {
                // Longer than the grace period: the daemon sees no heartbeat through its
                // watches, only through live Lease reads (upstream's stale-cache failure).
                let d = self.millis(6_000, 12_000);
                self.push(at, Fault::StallWatches(d), kind)
            }
            "watch-410" => {
                let n = 1 + self.rng.below(3) as u32;
                self.push(at, Fault::ExpireWatches(n), kind)
            }
            "corrupt-line" => self.push(at, Fault::CorruptLines, kind),
            "api-restart" => {
                let d = self.millis(200, 3_000);
                self.push(at, Fault::ApiRestart(d), kind)
            }
            "burst-409" | "burst-429" | "burst-500" => {
                let (code, target) = match kind {
                    "burst-409" => (409, BurstTarget::NodeWrites),
                    "burst-429" => (429, BurstTarget::Any),
                    _ if self.rng.chance(30) => (500, BurstTarget::Leases),
                    _ => (500, BurstTarget::Any),
                };
                let count = 1 + self.rng.below(6) as u32;
                self.push(
                    at,
                    Fault::ErrorBurst {
                        code,
                        count,
                        target,
                    },
                    kind,
                )
            }
            "slow-responses" => {
                let delay = self.millis(20, MAX_INJECTED_DELAY_MS);
                let length = self.millis(500, 5_000);
                self.push(at, Fault::SlowResponses(delay, length), kind)
            }
            "kill-leader" => {
                let restart = self.millis(500, 3_000);
                self.push(at, Fault::KillLeader(restart), kind)
            }
            "reload-good" => self.push(at, Fault::Reload { valid: true }, kind),
            "site-dark-failover" | "hold-across-takeover" => self.site_episode(kind, at),
            "fence-escalation-pause" => self.fence_episode(at, max_down),
            "daemon-restart" => self.restart_episode(at),
            _ => self.push(at, Fault::Reload { valid: false }, "reload-bad"),
        }
    }
}

fn millis_of(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// The longest response delay a `SlowResponses` fault injects (the invariants' allowances are
/// built from it).
pub const MAX_INJECTED_DELAY_MS: u64 = 400;

impl Planner {
    fn new(seed: u64, shape: &PlanShape) -> Planner {
        let names: Vec<String> = shape.zones.iter().flatten().cloned().collect();
        let zone_of: Vec<usize> = shape
            .zones
            .iter()
            .enumerate()
            .flat_map(|(z, nodes)| nodes.iter().map(move |_| z))
            .collect();
        Planner {
            rng: Rng::new(seed),
            steps: Vec::new(),
            busy_until: vec![Duration::ZERO; names.len()],
            names,
            zone_of,
            zone_count: shape.zones.len().max(1),
            grace: shape.grace,
            tolerations: shape.tolerations.clone(),
            force_kill: false,
            sites: shape.sites.clone(),
            fence_nodes: shape.fence_nodes.clone(),
            fence_after: shape.fence_after,
            pause_busy_until: Duration::ZERO,
            quiet: Vec::new(),
        }
    }
}

/// The plan for `seed`: steps in time order.
pub fn plan(seed: u64, shape: &PlanShape) -> Vec<Step> {
    plan_with_quiet(seed, shape).0
}

/// The plan and its quiet windows (`Planner::quiet`).
fn plan_with_quiet(seed: u64, shape: &PlanShape) -> (Vec<Step>, Vec<(Duration, Duration)>) {
    let mut planner = Planner::new(seed, shape);
    let mut episodes = EPISODES.to_vec();
    if !shape.sites.is_empty() {
        episodes.extend(SITE_EPISODES);
    }
    if !shape.fence_nodes.is_empty() {
        episodes.extend(FENCE_EPISODES);
    }
    if shape.shadow {
        episodes.retain(|(k, _)| !NOT_IN_SHADOW.contains(k));
        episodes.extend(SHADOW_EPISODES);
    }
    let total: u64 = episodes.iter().map(|(_, w)| w).sum();
    let end = shape.duration.saturating_sub(shape.cooldown);
    let mut at = shape.warmup;
    if at < end {
        // Every plan opens with a correlated zone failure that kills the leader while its
        // nodes are dead, so even a one-minute soak (the integration test's) meets the faults
        // where the daemon must be no less safe than upstream (SOAK.md); nothing else happens until
        // the kill is done (the first verdicts come grace − 1 s after the stops, the kill 1.5–2.5 s
        // after the grace period), so no other fault holds or delays what the daemon decides
        // meanwhile.
        let kind = if planner.rng.chance(50) {
            "zone-partial-sync"
        } else {
            "zone-partial-spread"
        };
        planner.force_kill = true;
        planner.episode(kind, at, shape.max_single_down);
        at += shape.grace + Duration::from_secs(3);
    }
    while at < end {
        let mut pick = planner.rng.below(total);
        let kind = episodes
            .iter()
            .find(|(_, w)| {
                if pick < *w {
                    true
                } else {
                    pick -= w;
                    false
                }
            })
            .map_or("watch-drop", |(k, _)| *k);
        let quiet = BLOCKING.contains(&kind)
            && planner
                .quiet
                .iter()
                .any(|&(from, to)| from <= at && at < to);
        if !quiet {
            planner.episode(kind, at, shape.max_single_down);
        }
        at += planner.millis(300, 3_700);
    }
    // Steps past the end are kept (a plan resumes every node it stops); the soak ignores them.
    planner.steps.sort_by_key(|s| s.at);
    (planner.steps, planner.quiet)
}

#[cfg(test)]
mod tests;
