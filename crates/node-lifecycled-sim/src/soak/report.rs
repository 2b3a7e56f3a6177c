//! The end of a soak: faults injected by kind, the daemons' decisions (writes by kind), the
//! liveness obligations judged, memory, violations, and the command that replays the run.

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use super::invariants::{Obligations, Violation};

#[derive(Clone, Debug)]
pub struct SoakReport {
    pub seed: u64,
    pub duration: Duration,
    pub nodes: usize,
    pub zones: usize,
    pub pods: usize,
    pub faults: BTreeMap<String, u64>,
    pub decisions: BTreeMap<String, u64>,
    pub obligations: Obligations,
    pub violations: Vec<Violation>,
    /// (daemon, pid, peak KiB, last KiB).
    pub rss: Vec<(String, u32, u64, u64)>,
    /// Daemon exits the soak did not cause (each one is also a failure).
    pub daemon_exits: Vec<String>,
    pub pods_recreated: u64,
    pub daemon_starts: Vec<(String, u32)>,
    /// Daemons that stopped within the grace after SIGTERM at the end.
    pub clean_stops: usize,
    pub dir: PathBuf,
    /// `--brake N`, `--pools` and `--partitions` as run, for the replay command.
    pub policy_args: String,
}

impl SoakReport {
    pub fn passed(&self) -> bool {
        self.violations.is_empty() && self.daemon_exits.is_empty()
    }

    pub fn fault_count(&self) -> u64 {
        self.faults.values().sum()
    }

    /// The command that replays this run.
    pub fn replay(&self) -> String {
        format!(
            "node-lifecycled-sim soak --duration {}s --seed {}{}{}",
            self.duration.as_secs(),
            self.seed,
            if (self.nodes, self.zones) == (24, 3) {
                String::new()
            } else {
                format!(" --nodes {} --zones {}", self.nodes, self.zones)
            },
            self.policy_args
        )
    }
}

impl fmt::Display for SoakReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "soak seed {}, {}s: {} nodes in {} zones, {} pods",
            self.seed,
            self.duration.as_secs(),
            self.nodes,
            self.zones,
            self.pods
        )?;
        writeln!(f, "faults injected: {} episodes", self.fault_count())?;
        for (kind, n) in &self.faults {
            writeln!(f, "  {kind:<22} {n:>6}")?;
        }
        writeln!(
            f,
            "decisions (daemon writes by kind): {}",
            self.decisions.values().sum::<u64>()
        )?;
        for (kind, n) in &self.decisions {
            writeln!(f, "  {kind:<52} {n:>6}")?;
        }
        let o = &self.obligations;
        writeln!(
            f,
            "checked: {} Unknown verdicts, {} new NoExecute taints, {} NoExecute removals, {} pod \
             deletions (safety); {} dead nodes tainted, {} pods evicted when due, {} recovered \
             nodes untainted (liveness); {} pods re-created",
            o.unknown_verdicts_checked,
            o.taints_checked,
            o.untaints_checked,
            o.deletions_checked,
            o.dead_nodes_tainted,
            o.pods_evicted,
            o.recovered_untainted,
            self.pods_recreated
        )?;
        writeln!(
            f,
            "decisions on time (decision-late): {} judged and met (latest {:.1}s after due), {} \
             excused by a fault that stopped the daemons",
            o.decisions_on_time,
            o.worst_decision_lateness.as_secs_f64(),
            o.decisions_excused
        )?;
        let steps = |m: &BTreeMap<usize, u64>| {
            m.iter()
                .map(|(step, n)| format!("{n} of step {step}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        if o.fence_pauses > 0 || !o.fence_attempts.is_empty() {
            writeln!(
                f,
                "fencing: attempts recorded {}; agent runs {}; {} pauses of fencing",
                steps(&o.fence_attempts),
                steps(&o.fence_runs),
                o.fence_pauses
            )?;
        }
        if o.pod_marks_checked > 0 || o.holds_judged + o.holds_excused > 0 {
            writeln!(
                f,
                "partitions: {} pod marks in domains that keep pods Ready checked; {} holds past \
                 hold_max judged and met, {} excused (every domain down)",
                o.pod_marks_checked, o.holds_judged, o.holds_excused
            )?;
        }
        let s = &o.shadow;
        if !s.finals.is_empty() {
            writeln!(
                f,
                "shadow: {} divergence lines logged, {} in the final histories, {} lost with a \
                 SIGKILL (within the kill window), {} rotated out; {} reports checked, {} \
                 excused (a SIGKILL soon after), {} asks unanswered",
                s.logged,
                s.kept,
                s.lost_to_kill,
                s.rotated_out,
                s.reports_checked,
                s.reports_excused,
                s.asks_failed
            )?;
            for (daemon, summary) in &s.finals {
                writeln!(f, "  {daemon} history at the end: {summary}")?;
            }
        }
        for (daemon, starts) in &self.daemon_starts {
            writeln!(f, "daemon {daemon}: started {starts} times")?;
        }
        for (daemon, pid, peak, last) in &self.rss {
            writeln!(
                f,
                "  rss {daemon} pid {pid}: peak {:.1} MiB, last {:.1} MiB",
                *peak as f64 / 1024.0,
                *last as f64 / 1024.0
            )?;
        }
        writeln!(f, "clean stops at the end: {}/2", self.clean_stops)?;
        for exit in &self.daemon_exits {
            writeln!(f, "DAEMON EXIT: {exit}")?;
        }
        writeln!(f, "violations: {}", self.violations.len())?;
        let mut by_rule: BTreeMap<&str, usize> = BTreeMap::new();
        for v in &self.violations {
            *by_rule.entry(v.rule).or_default() += 1;
        }
        for (rule, n) in &by_rule {
            writeln!(f, "  {rule:<28} {n:>6}")?;
        }
        for v in self.violations.iter().take(50) {
            writeln!(f, "  {} {}: {}", v.at, v.rule, v.detail)?;
        }
        if self.violations.len() > 50 {
            writeln!(f, "  … {} more", self.violations.len() - 50)?;
        }
        writeln!(f, "logs and configs: {}", self.dir.display())?;
        write!(f, "replay: {}", self.replay())
    }
}
