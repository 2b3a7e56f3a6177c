//! The rules of `--shadow` (the daemons in shadow mode beside the simulator's incumbent):
//!
//! - `shadow-wrote`, judged at each write: a daemon wrote (or tried to write) a node or a pod.
//!   Shadow mode writes nothing but its leader Lease.
//! - `shadow-divergence-lost`, judged at the end, per daemon: each instance keeps its own
//!   history (its `shadow_file`), and only the instance that acts compares, so what one
//!   classed is in its own history and nowhere else. Every divergence it logged (a `shadow:`
//!   line of its log, across all its processes) must be in that history as the file holds it
//!   once the daemon stopped at the end; every report asked of it over its control socket
//!   (every 10 s, just before each SIGTERM, and at the end) must not count more pairs of any
//!   class and kind, nor hold a divergence, that the final history does not. Excused: what was
//!   classed within [`KILL_WINDOW`] (+ the daemon's CPU wait) before a SIGKILL of that process
//!   (the file is written every 10 s and at exit, so a kill may lose the last 10 s); and, once
//!   the history has rotated (2,000 divergences, 20,000 pairs), divergences older than the
//!   oldest it keeps and every count.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use serde_json::Value;

use super::invariants::Checker;
use crate::resource::Resource;
use crate::write_log::WriteRecord;
use node_lifecycled::time::Time;

/// What a SIGKILL may take with it: the daemon writes its file at most every 10 s
/// (`runtime/daemon/shadow.rs`, `SAVE_EVERY`), at its 1 s monitor tick, + 2 s of scheduling
/// (the soak's zone allowance).
pub const KILL_WINDOW: Duration = Duration::from_secs(13);
/// The CPU wait counted against a kill: the run-queue wait of the daemon in this long before.
const CPU_WAIT_LOOKBACK: Duration = Duration::from_secs(30);
/// Violations told in full per daemon and rule; the rest are counted in one more.
const TOLD: usize = 20;

use crate::scenario::shadow::{SHADOW_CLASSES as CLASSES, SHADOW_KINDS as KINDS};

/// A shadow history as a report or the file shows it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ShadowState {
    /// Pairs by `class/kind`.
    pub counts: BTreeMap<String, u64>,
    /// Every divergence, by [`record_key`].
    pub divergences: Vec<String>,
    /// When the oldest divergence kept was classed.
    pub oldest_divergence: Option<Time>,
    /// Entries and divergences rotated out.
    pub rotated: u64,
    /// Divergences no rule explains.
    pub findings: u64,
}

impl ShadowState {
    fn pairs(&self) -> u64 {
        self.counts.values().sum()
    }

    fn summary(&self) -> String {
        let by_class: Vec<String> = CLASSES
            .iter()
            .map(|c| {
                let n: u64 = KINDS
                    .iter()
                    .filter_map(|k| self.counts.get(&format!("{c}/{k}")))
                    .sum();
                format!("{c} {n}")
            })
            .collect();
        format!(
            "{} pairs ({}), {} divergences, {} without a rule, {} rotated",
            self.pairs(),
            by_class.join(", "),
            self.divergences.len(),
            self.findings,
            self.rotated
        )
    }
}

/// A divergence as one line: class, kind, subject, and each side's time (whole seconds, as the
/// daemon's line prints them).
fn key(
    class: &str,
    kind: &str,
    node: &str,
    pod: Option<&str>,
    taint: Option<&str>,
    ours: Option<&str>,
    theirs: Option<&str>,
) -> String {
    let mut s = format!("{class} {kind} node={node}");
    if let Some(p) = pod {
        s.push_str(&format!(" pod={p}"));
    }
    if let Some(t) = taint {
        s.push_str(&format!(" taint={t}"));
    }
    s.push_str(&format!(
        " ours={} theirs={}",
        ours.unwrap_or("-"),
        theirs.unwrap_or("-")
    ));
    s
}

/// The key of a divergence of the report's or the file's JSON.
fn record_key(r: &Value) -> Option<String> {
    let side = |name: &str| {
        r.get(name)
            .and_then(|s| s["at_ms"].as_u64())
            .map(|ms| Time::from_unix_millis(ms).to_rfc3339())
    };
    Some(key(
        r["class"].as_str()?,
        r["kind"].as_str()?,
        r["node"].as_str()?,
        r["pod"].as_str(),
        r["taint"].as_str(),
        side("ours").as_deref(),
        side("theirs").as_deref(),
    ))
}

fn divergences_of(v: &Value, state: &mut ShadowState) {
    for r in v["divergences"].as_array().into_iter().flatten() {
        if let Some(k) = record_key(r) {
            state.divergences.push(k);
        }
        if r.get("rule").is_none_or(Value::is_null) {
            state.findings += 1;
        }
        if let Some(ms) = r["classed_ms"].as_u64() {
            let at = Time::from_unix_millis(ms);
            state.oldest_divergence = Some(state.oldest_divergence.map_or(at, |o| o.min(at)));
        }
    }
    state.rotated = v["rotated"].as_u64().unwrap_or(0);
}

/// `shadow report --format json` as the daemon answers it; `None`: not such a report.
pub fn from_report(text: &str) -> Option<ShadowState> {
    let v: Value = serde_json::from_str(text).ok()?;
    let counts = v["counts"].as_object()?;
    let mut state = ShadowState::default();
    for (class, kinds) in counts {
        for (kind, n) in kinds.as_object().into_iter().flatten() {
            state
                .counts
                .insert(format!("{class}/{kind}"), n.as_u64().unwrap_or(0));
        }
    }
    divergences_of(&v, &mut state);
    Some(state)
}

/// The daemon's `shadow_file` (its history: an entry per pair, every divergence).
pub fn from_file(text: &str) -> Option<ShadowState> {
    let v: Value = serde_json::from_str(text).ok()?;
    let mut state = ShadowState::default();
    for e in v["entries"].as_array()? {
        let (Some(class), Some(kind)) = (e["class"].as_str(), e["kind"].as_str()) else {
            continue;
        };
        *state.counts.entry(format!("{class}/{kind}")).or_default() += 1;
    }
    divergences_of(&v, &mut state);
    Some(state)
}

/// The divergences a daemon's log tells (`… shadow: CLASS KIND node=… ours=… theirs=…`), with
/// the line's time.
pub fn logged(log: &str) -> Vec<(Time, String)> {
    log.lines().filter_map(line_key).collect()
}

fn line_key(line: &str) -> Option<(Time, String)> {
    let at = Time::parse_rfc3339(line.split_whitespace().next()?)?;
    let message = &line[line.find(" shadow: ")? + " shadow: ".len()..];
    let mut words = message.split_whitespace();
    let class = words.next().filter(|c| CLASSES.contains(c))?;
    let kind = words.next().filter(|k| KINDS.contains(k))?;
    let (mut node, mut pod, mut taint) = (None, None, None);
    for w in words {
        if let Some(v) = w.strip_prefix("node=") {
            node = Some(v);
        } else if let Some(v) = w.strip_prefix("pod=") {
            pod = Some(v);
        } else if let Some(v) = w.strip_prefix("taint=") {
            taint = Some(v);
        } else {
            break;
        }
    }
    let side = |name: &str| {
        let from = message.find(&format!(" {name}="))? + name.len() + 2;
        message[from..].split_whitespace().next()
    };
    Some((
        at,
        key(class, kind, node?, pod, taint, side("ours"), side("theirs")),
    ))
}

/// How a daemon process ended: when, SIGTERM and stopped in time (`clean`) or killed, and its
/// CPU wait just before.
#[derive(Clone, Debug)]
struct End {
    at: Time,
    clean: bool,
    waited: Duration,
}

#[derive(Clone, Debug, Default)]
pub struct ShadowTruth {
    ends: HashMap<String, Vec<End>>,
    /// Per daemon: (asked at, the report).
    reports: HashMap<String, Vec<(Time, ShadowState)>>,
    /// Reports that could not be had (the daemon busy or starting).
    pub asks_failed: u64,
}

/// What `--shadow` checked, for the report.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ShadowCounts {
    pub reports_checked: u64,
    pub reports_excused: u64,
    pub asks_failed: u64,
    pub logged: u64,
    pub kept: u64,
    /// Logged within the kill window before a SIGKILL, and not kept.
    pub lost_to_kill: u64,
    pub rotated_out: u64,
    /// Per daemon: its final history in words.
    pub finals: Vec<(String, String)>,
}

impl Checker {
    /// `--shadow`: the daemons write nothing, an incumbent does; liveness is not judged (the
    /// daemons owe no write), the rules above are.
    pub fn use_shadow(&mut self) {
        self.shadow = Some(ShadowTruth::default());
    }

    pub(super) fn check_shadow_write(&mut self, daemon: &str, r: &WriteRecord) {
        if self.shadow.is_none() || !matches!(r.resource, Resource::Nodes | Resource::Pods) {
            return;
        }
        let detail = format!(
            "{daemon} in shadow mode: {} {}{} {} (code {})",
            r.verb.as_str(),
            r.resource,
            r.subresource
                .as_deref()
                .map_or(String::new(), |s| format!("/{s}")),
            r.name,
            r.code
        );
        self.violation(r.wall, "shadow-wrote", detail);
    }

    /// A process of `daemon` ended at `at`: stopped in time after SIGTERM, or killed.
    pub fn daemon_ended(&mut self, daemon: &str, at: Time, clean: bool) {
        let waited = self.waited(
            daemon,
            at.since(Time::ZERO).saturating_sub(CPU_WAIT_LOOKBACK),
            at,
        );
        if let Some(truth) = self.shadow.as_mut() {
            truth
                .ends
                .entry(daemon.to_string())
                .or_default()
                .push(End { at, clean, waited });
        }
    }

    /// `daemon`'s answer to `shadow report --format json` at `at`; `None`: no answer.
    pub fn shadow_report(&mut self, daemon: &str, at: Time, answer: Option<&str>) {
        let Some(truth) = self.shadow.as_mut() else {
            return;
        };
        match answer.and_then(from_report) {
            Some(state) => truth
                .reports
                .entry(daemon.to_string())
                .or_default()
                .push((at, state)),
            None => truth.asks_failed += 1,
        }
    }

    /// The end of the run for `daemon` (stopped): its log and its history file.
    pub fn judge_shadow(&mut self, daemon: &str, log: &str, file: Option<&str>, at: Time) {
        let Some(truth) = self.shadow.as_ref() else {
            return;
        };
        let Some(last) = file.and_then(from_file) else {
            let detail = format!("{daemon}: no readable shadow history file at the end");
            return self.violation(at, "shadow-divergence-lost", detail);
        };
        let ends = truth.ends.get(daemon).cloned().unwrap_or_default();
        // Classed at `t`: may it have died with a SIGKILL of the process that classed it?
        let killed_after = |t: Time| -> Option<Time> {
            let end = ends.iter().find(|e| e.at >= t)?;
            (!end.clean && end.at.since(t) < KILL_WINDOW + end.waited).then_some(end.at)
        };
        let rotated_before = (last.rotated > 0)
            .then_some(last.oldest_divergence)
            .flatten();
        let mut counts = std::mem::take(&mut self.obligations.shadow);
        let mut found = Vec::new();
        let mut pool: HashMap<&str, usize> = HashMap::new();
        for k in &last.divergences {
            *pool.entry(k).or_default() += 1;
        }
        for (t, k) in logged(log) {
            counts.logged += 1;
            match pool.get_mut(k.as_str()).filter(|n| **n > 0) {
                Some(n) => {
                    *n -= 1;
                    counts.kept += 1;
                }
                None if killed_after(t).is_some() => counts.lost_to_kill += 1,
                None if rotated_before.is_some_and(|o| t < o) => counts.rotated_out += 1,
                None => found.push((
                    t,
                    format!("{daemon}: logged at {t}, not in its history at the end: {k}"),
                )),
            }
        }
        let reports = truth.reports.get(daemon).cloned().unwrap_or_default();
        for (t, report) in &reports {
            if killed_after(*t).is_some() {
                counts.reports_excused += 1;
                continue;
            }
            counts.reports_checked += 1;
            let mut lower: Vec<String> = Vec::new();
            if last.rotated == 0 {
                for (ck, n) in &report.counts {
                    let now = last.counts.get(ck).copied().unwrap_or(0);
                    if now < *n {
                        lower.push(format!("{ck} {n} then, {now} at the end"));
                    }
                }
            }
            let mut pool: HashMap<&str, usize> = HashMap::new();
            for k in &last.divergences {
                *pool.entry(k).or_default() += 1;
            }
            let missing: Vec<&String> = report
                .divergences
                .iter()
                .filter(|k| match pool.get_mut(k.as_str()).filter(|n| **n > 0) {
                    Some(n) => {
                        *n -= 1;
                        false
                    }
                    None => rotated_before.is_none(),
                })
                .collect();
            if !lower.is_empty() || !missing.is_empty() {
                found.push((
                    *t,
                    format!(
                        "{daemon}: the report asked at {t} is not in its history at the end: {}{} \
                         divergence(s) missing{}",
                        if lower.is_empty() {
                            String::new()
                        } else {
                            format!("counts lower ({}); ", lower.join(", "))
                        },
                        missing.len(),
                        missing
                            .first()
                            .map_or(String::new(), |k| format!(", the first: {k}"))
                    ),
                ));
            }
        }
        counts.asks_failed = truth.asks_failed;
        counts.finals.push((daemon.to_string(), last.summary()));
        self.obligations.shadow = counts;
        let total = found.len();
        for (t, detail) in found.into_iter().take(TOLD) {
            self.violation(t, "shadow-divergence-lost", detail);
        }
        if total > TOLD {
            let detail = format!("{daemon}: {} more like these", total - TOLD);
            self.violation(at, "shadow-divergence-lost", detail);
        }
    }
}
