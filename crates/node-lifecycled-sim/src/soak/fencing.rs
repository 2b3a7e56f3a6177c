//! Fencing in the soak (`--fencing`): the daemons may fence a quarter of the nodes (label
//! `node-lifecycled.io/fencing=soak`) through a fence agent in two steps that never succeeds:
//! step 1 runs into its 5 s timeout (zones z1 and z3) or fails after 0.5 s (the others),
//! step 2 (run at once after it, the
//! escalation) fails. So every fence of a long silence escalates, then retries after the
//! backoff. (A successful power-off would add the out-of-service taint, whose pod release
//! rides on Kubernetes' non-graceful node shutdown, which the simulator does not run; that path
//! is proven by the `fencing` scenarios and the real-API-server tier.)
//!
//! The plan pauses fencing fleet-wide (the pause annotation on the leader Lease) around a
//! fence's first step (`fence-escalation-pause`). The checker judges each fence attempt the
//! daemons record on the node (`node-lifecycled.io/fence-attempt`, written before each step's
//! command runs) and each run the agent logs:
//! - `fence-while-paused`: no step starts while a pause of fencing holds, once the daemons
//!   could have read it (the leader reads its Lease every retry period);
//! - `fence-while-renewing`: no step for a node whose kubelet heartbeat within the grace period
//!   (the daemon reads the Lease live first);
//! - `fence-in-disrupted-zone`: no step while the node's zone is partially or fully disrupted
//!   (in the store, or in every batched view, as for new NoExecute taints).

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::invariants::{Checker, FaultClass};
use node_lifecycled::time::Time;

pub const FENCE_LABEL: &str = "node-lifecycled.io/fencing";
/// Ready=Unknown this long before the first step.
pub const AFTER: Duration = Duration::from_secs(2);
/// The leader Lease the pause is written on (the soak's daemons use the default).
pub const LEADER_LEASE: (&str, &str) = ("kube-system", "node-lifecycled");
pub const PAUSE_ANNOTATION: &str = "node-lifecycled.io/pause";
/// Where the agent logs each run: `<unix ms> <node> <step>`.
pub const RUNS_FILE: &str = "fence-runs";

/// The nodes the daemons may fence, by index: one in four.
pub fn fence_nodes(count: usize) -> Vec<usize> {
    (0..count).filter(|i| i % 4 == 2).collect()
}

/// Writes the fence agent into `dir`; its absolute path.
pub fn write_agent(dir: &Path) -> Result<PathBuf, String> {
    let dir = fs::canonicalize(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let agent = dir.join("fence-agent.sh");
    let runs = dir.join(RUNS_FILE);
    // Step 1 hangs into its timeout on the nodes of zones z1 and z3 and fails after 0.5 s on
    // the others; step 2 fails. `exec sleep`: the timeout kills the agent's own process. The
    // timeout is longer than the pause allowance, so a pause that lands early in step 1 must
    // be seen before step 2.
    let text = format!(
        "#!/bin/sh\n\
         echo \"$(date +%s%3N) $NODE_NAME $FENCE_STEP\" >> '{}'\n\
         if [ \"$FENCE_STEP\" = 1 ]; then\n\
         \x20 case \"$NODE_NAME\" in z1-*|z3-*) exec sleep 30 ;; esac\n\
         \x20 sleep 0.5\n\
         fi\n\
         exit 1\n",
        runs.display()
    );
    fs::write(&agent, text).map_err(|e| format!("cannot write {}: {e}", agent.display()))?;
    fs::set_permissions(&agent, fs::Permissions::from_mode(0o755))
        .map_err(|e| format!("cannot make {} executable: {e}", agent.display()))?;
    Ok(agent)
}

/// The daemons' `[fencing]` table.
pub fn config_table(agent: &Path) -> String {
    let agent = agent.display();
    format!(
        "\n[fencing]\n\
         enabled = true\n\
         after = \"{}s\"\n\
         max_concurrent = 2\n\
         retry_backoff = \"3s\"\n\
         retry_backoff_max = \"12s\"\n\
         match_labels = {{ \"{FENCE_LABEL}\" = \"soak\" }}\n\
         [[fencing.step]]\n\
         command = [\"{agent}\"]\n\
         timeout = \"5s\"\n\
         [[fencing.step]]\n\
         command = [\"{agent}\"]\n\
         timeout = \"1s\"\n",
        AFTER.as_secs()
    )
}

/// The annotation value of a pause of fencing until `until` (what `node-lifecycled pause`
/// writes).
pub fn pause_value(until: Time) -> String {
    serde_json::json!({
        "what": "fencing",
        "until": until.to_rfc3339(),
        "reason": "soak: fence-escalation-pause",
        "by": "soak",
    })
    .to_string()
}

/// How far the wall clock is ahead of the simulator's, in milliseconds (negative: behind). The
/// simulator's clock is the wall clock at its start plus monotonic time since, as the daemon's
/// is; a step of the wall clock, or a host suspended and resumed, moves the wall clock alone.
/// What is read on the wall clock (`date` in the fence agent, the pause's `until` as
/// `node-lifecycled pause` writes it and a daemon started since compares it) is mapped to the
/// simulator's clock with it, so the checker compares times on one clock.
pub fn wall_ahead_ms(sim_now: Time) -> i64 {
    let wall = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64);
    wall - sim_now.as_unix_millis() as i64
}

/// `wall`, a time read on the wall clock, on the simulator's clock.
pub fn wall_to_sim(wall: Time, wall_ahead_ms: i64) -> Time {
    Time::from_unix_millis((wall.as_unix_millis() as i64 - wall_ahead_ms).max(0) as u64)
}

/// The runs logged in `path` past byte `offset`: (time, node, step), and the new offset (a
/// line not yet ended is left for the next read).
pub fn read_runs(path: &Path, offset: usize) -> (Vec<(Time, String, usize)>, usize) {
    let Ok(text) = fs::read_to_string(path) else {
        return (Vec::new(), offset);
    };
    let Some(new) = text.get(offset..) else {
        return (Vec::new(), offset);
    };
    let complete = new.rfind('\n').map_or(0, |i| i + 1);
    let runs = new[..complete]
        .lines()
        .filter_map(|line| {
            let mut parts = line.split_whitespace();
            let ms = parts.next()?.parse::<u64>().ok()?;
            let node = parts.next()?.to_string();
            let step = parts.next()?.parse::<usize>().ok()?;
            Some((Time::from_unix_millis(ms), node, step))
        })
        .collect();
    (runs, offset + complete)
}

/// What the checker knows of fencing.
#[derive(Debug, Default)]
pub(super) struct FenceTruth {
    /// Pauses of fencing: (landed, ended: its `until`, or when it was resumed).
    pauses: Vec<(Time, Time)>,
    /// Attempts recorded and runs logged, by step.
    pub(super) attempts: BTreeMap<usize, u64>,
    pub(super) runs: BTreeMap<usize, u64>,
}

impl FenceTruth {
    pub(super) fn pauses(&self) -> u64 {
        self.pauses.len() as u64
    }
}

/// A step's command starts this long after its record landed, at most.
const SPAWN_ALLOWANCE: Duration = Duration::from_millis(500);

impl Checker {
    /// A pause of fencing landed on the leader Lease at `at`, holding until `until`.
    pub fn pause_fencing(&mut self, at: Time, until: Time) {
        self.fence.pauses.push((at, until));
    }

    /// The pause annotation was taken off at `at`.
    pub fn resume_fencing(&mut self, at: Time) {
        if let Some(last) = self.fence.pauses.last_mut() {
            last.1 = last.1.min(at);
        }
    }

    /// The pause `daemon` must have seen by `at`, if one holds then: (landed, ends).
    fn pause_in_force(&self, daemon: &str, at: Time, extra: Duration) -> Option<(Time, Time)> {
        let &(landed, ends) = self
            .fence
            .pauses
            .iter()
            .rev()
            .find(|&&(landed, ends)| landed <= at && at < ends)?;
        // The leader reads its Lease each retry period; a fault that slows or stops its
        // requests delays that read until it is over.
        let mut seen_by = landed;
        for &(class, from, to, _) in &self.fault_windows {
            if class == FaultClass::Blocking && from <= at && to + Duration::from_secs(1) >= landed
            {
                seen_by = seen_by.max(to);
            }
        }
        let waited = self.waited(daemon, landed.since(Time::ZERO), at);
        let by = seen_by + self.limits.pause_allowance + waited + extra;
        (at > by).then_some((landed, ends))
    }

    /// `daemon` recorded a fence attempt of `step` on `node` at `at`.
    pub(super) fn check_fence_attempt(&mut self, daemon: &str, node: &str, step: usize, at: Time) {
        *self.fence.attempts.entry(step).or_default() += 1;
        if let Some((landed, ends)) = self.pause_in_force(daemon, at, Duration::ZERO) {
            self.violation(
                at,
                "fence-while-paused",
                format!(
                    "{daemon} recorded step {step} of a fence of {node} {:.1}s after a pause of \
                     fencing landed (it holds {:.1}s more)",
                    at.since(landed).as_secs_f64(),
                    ends.since(at).as_secs_f64()
                ),
            );
        }
        if let Some(heartbeat) = self.fresh_heartbeat(daemon, node, at) {
            self.violation(
                at,
                "fence-while-renewing",
                format!(
                    "{daemon} recorded step {step} of a fence of {node} although its kubelet \
                     heartbeat {:.3}s before (grace {:.1}s)",
                    at.since(heartbeat).as_secs_f64(),
                    self.limits.grace.as_secs_f64()
                ),
            );
        }
        if let Some(why) = self.zone_disrupted(daemon, node, at) {
            self.violation(
                at,
                "fence-in-disrupted-zone",
                format!("{daemon} recorded step {step} of a fence of {node} although {why}"),
            );
        }
    }

    /// The agent logged a run of `step` for `node` at `at`.
    pub fn fence_run(&mut self, node: &str, step: usize, at: Time) {
        *self.fence.runs.entry(step).or_default() += 1;
        // The leader at `at` is not known here; the longer of the two daemons' CPU waits.
        let daemons: Vec<String> = self.daemons.values().cloned().collect();
        let paused = daemons
            .iter()
            .map(|d| self.pause_in_force(d, at, SPAWN_ALLOWANCE))
            .reduce(|a, b| a.and(b))
            .flatten();
        if let Some((landed, _)) = paused {
            self.violation(
                at,
                "fence-while-paused",
                format!(
                    "the fence agent ran step {step} for {node} {:.1}s after a pause of fencing \
                     landed",
                    at.since(landed).as_secs_f64()
                ),
            );
        }
    }

    /// Why `node`'s zone surely forbids a fence by a write of `daemon` landing at `at`.
    fn zone_disrupted(&self, daemon: &str, node: &str, at: Time) -> Option<String> {
        let zone = self.nodes.get(node)?.zone.clone();
        if let Some((surely, total)) = self.surely_disrupted(&zone, at) {
            return Some(format!(
                "its zone {zone} is disrupted ({surely} of {total} nodes Unknown in the store and \
                 silent)"
            ));
        }
        let allowance = self.suspect_allowance(daemon, at);
        let zones = self.batched_view(at, allowance, Some(node));
        let z = zones.get(&zone)?;
        let total = z.ready + z.not_ready + z.either;
        // Disrupted in every view: even counting every node that may be Ready as Ready.
        let partial = z.not_ready > 2
            && z.not_ready as f64 / total as f64 >= self.limits.unhealthy_zone_threshold;
        let full = z.ready + z.either == 0 && z.not_ready > 0;
        (partial || full).then(|| {
            format!(
                "its zone {zone} is disrupted in every batched view ({} of {total} not ready, \
                 {} either way)",
                z.not_ready, z.either
            )
        })
    }
}
