//! `node-lifecycled shadow report`: over a period, the counts by class and kind, the time
//! differences of the pairs both controllers made (median, p99, worst), and every divergence
//! with its node, pod, times and rule; as text, JSON or Markdown. And the journal's line for
//! one divergence (`DECISION=shadow`).

use std::fmt::Write as _;

use log::Level;
use serde_json::json;

use crate::observe::ShadowFigures;
use crate::observe::decision_log::LogLine;
use crate::observe::exposition::Exposition;
use crate::time::Time;

use super::history::ShadowHistory;
use super::{Class, Record, ShadowKind};

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Format {
    Text,
    Json,
    Markdown,
}

impl Format {
    pub fn parse(s: &str) -> Option<Format> {
        match s {
            "text" => Some(Format::Text),
            "json" => Some(Format::Json),
            "markdown" => Some(Format::Markdown),
            _ => None,
        }
    }
}

/// Median, p99 and worst of the time differences (ours minus theirs, ms), by magnitude.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) struct Spread {
    pub(crate) pairs: usize,
    pub(crate) median_ms: i64,
    pub(crate) p99_ms: i64,
    pub(crate) worst_ms: i64,
}

pub(crate) fn spread(mut diffs: Vec<i64>) -> Option<Spread> {
    if diffs.is_empty() {
        return None;
    }
    diffs.sort_by_key(|d| d.unsigned_abs());
    let at = |q: f64| diffs[((diffs.len() - 1) as f64 * q).round() as usize];
    Some(Spread {
        pairs: diffs.len(),
        median_ms: at(0.5),
        p99_ms: at(0.99),
        worst_ms: diffs[diffs.len() - 1],
    })
}

fn secs(ms: i64) -> String {
    format!("{:+.1}s", ms as f64 / 1000.0)
}

fn at(ms: u64) -> String {
    Time::from_unix_millis(ms).to_rfc3339()
}

/// One divergence in a line of words.
fn divergence_text(r: &Record) -> String {
    let mut s = format!(
        "{} {} node={}",
        r.class.as_str(),
        r.subject.kind.as_str(),
        r.subject.node
    );
    if let Some(p) = &r.subject.pod {
        let _ = write!(s, " pod={p}");
    }
    if let Some(t) = &r.subject.taint {
        let _ = write!(s, " taint={t}");
    }
    if let Some(o) = &r.ours {
        let _ = write!(s, " ours={} ({})", at(o.at_ms), o.evidence);
    }
    if let Some(t) = &r.theirs {
        let _ = write!(s, " theirs={} ({})", at(t.at_ms), t.evidence);
    }
    if let Some(d) = r.diff_ms {
        let _ = write!(s, " diff={}", secs(d));
    }
    match &r.rule {
        Some(rule) => {
            let _ = write!(s, " rule={rule:?}");
        }
        None => s.push_str(" rule=none (a finding)"),
    }
    s
}

/// The journal's line for a classed pair that diverged: a finding or ours acting first is a
/// warning, one a rule explains is info.
pub(crate) fn line(r: &Record) -> LogLine {
    let level = if r.class.alerts() || r.rule.is_none() {
        Level::Warn
    } else {
        Level::Info
    };
    LogLine {
        level,
        message: format!("shadow: {}", divergence_text(r)),
        node: Some(r.subject.node.clone()),
        pod: r.subject.pod.clone(),
        zone: None,
        decision: "shadow",
    }
}

/// The report over `since` (or the whole history) at `now`; `pending`: decisions still
/// waiting for the other side's.
pub fn render(
    h: &ShadowHistory,
    pending: usize,
    since: Option<Time>,
    now: Time,
    format: Format,
) -> String {
    let from = since.map_or(h.since_ms, |s| s.as_unix_millis().max(h.since_ms));
    let entries: Vec<_> = h.entries.iter().filter(|e| e.at_ms >= from).collect();
    let divergences: Vec<&Record> = h
        .divergences
        .iter()
        .filter(|r| r.classed_ms >= from)
        .collect();
    let count = |c: Class, k: ShadowKind| {
        entries
            .iter()
            .filter(|e| e.class == c && e.kind == k)
            .count()
    };
    let diffs = spread(entries.iter().filter_map(|e| e.diff_ms).collect());
    let findings = divergences.iter().filter(|r| r.is_finding()).count();
    let alerting = divergences.iter().filter(|r| r.class.alerts()).count();
    let verdict = if entries.is_empty() {
        "nothing compared in this period".to_string()
    } else if findings == 0 && alerting == 0 {
        "clean: every divergence is explained by a rule, none acts before the incumbent".to_string()
    } else {
        format!(
            "{findings} divergence(s) without a rule, {alerting} only ours or earlier: read them before switching over"
        )
    };
    match format {
        Format::Json => {
            let mut counts = serde_json::Map::new();
            for c in Class::ALL {
                let mut kinds = serde_json::Map::new();
                for k in ShadowKind::ALL {
                    kinds.insert(k.as_str().to_string(), json!(count(c, k)));
                }
                counts.insert(c.as_str().to_string(), kinds.into());
            }
            let v = json!({
                "from": at(from),
                "to": at(now.as_unix_millis()),
                "pairs": entries.len(),
                "pending": pending,
                "counts": counts,
                "time_differences_ms": diffs.map(|d| json!({
                    "pairs": d.pairs, "median": d.median_ms, "p99": d.p99_ms, "worst": d.worst_ms,
                })),
                "divergences": divergences,
                "findings": findings,
                "rotated": h.rotated,
                "verdict": verdict,
            });
            format!("{v:#}\n")
        }
        Format::Text | Format::Markdown => {
            let md = format == Format::Markdown;
            let mut out = String::new();
            let period = format!("{} to {}", at(from), at(now.as_unix_millis()));
            if md {
                let _ = writeln!(
                    out,
                    "## Shadow report, {period}\n\n{} pairs classed, {pending} waiting for their other half.\n",
                    entries.len()
                );
                out.push_str("| class | node_unknown | taint_added | taint_removed | pod_not_ready | pod_deletion |\n");
                out.push_str("|---|---|---|---|---|---|\n");
            } else {
                let _ = writeln!(
                    out,
                    "shadow report: {period}, {} pairs classed",
                    entries.len()
                );
                let _ = writeln!(
                    out,
                    "{:<12} {:>12} {:>12} {:>13} {:>13} {:>12}",
                    "class",
                    "node_unknown",
                    "taint_added",
                    "taint_removed",
                    "pod_not_ready",
                    "pod_deletion"
                );
            }
            for c in Class::ALL {
                let n: Vec<usize> = ShadowKind::ALL.iter().map(|k| count(c, *k)).collect();
                if md {
                    let _ = writeln!(
                        out,
                        "| {} | {} | {} | {} | {} | {} |",
                        c.as_str(),
                        n[0],
                        n[1],
                        n[2],
                        n[3],
                        n[4]
                    );
                } else {
                    let _ = writeln!(
                        out,
                        "{:<12} {:>12} {:>12} {:>13} {:>13} {:>12}",
                        c.as_str(),
                        n[0],
                        n[1],
                        n[2],
                        n[3],
                        n[4]
                    );
                }
            }
            if md {
                out.push('\n');
            }
            match diffs {
                Some(d) => {
                    let _ = writeln!(
                        out,
                        "time differences (ours minus theirs, {} pairs): median {}, p99 {}, worst {}",
                        d.pairs,
                        secs(d.median_ms),
                        secs(d.p99_ms),
                        secs(d.worst_ms)
                    );
                }
                None => out.push_str("time differences: no pair made by both\n"),
            }
            if md {
                out.push('\n');
            }
            let _ = writeln!(out, "divergences: {}", divergences.len());
            if md && !divergences.is_empty() {
                out.push('\n');
            }
            for r in &divergences {
                let _ = writeln!(
                    out,
                    "{}{}",
                    if md { "- " } else { "  " },
                    divergence_text(r)
                );
            }
            if h.rotated > 0 {
                let _ = writeln!(out, "({} older entries rotated out)", h.rotated);
            }
            if md {
                out.push('\n');
            }
            let _ = writeln!(out, "verdict: {verdict}");
            out
        }
    }
}

/// `shadow report [--since D] [--format text|json|markdown]`; `history` is `None` when shadow
/// mode is off.
pub fn answer(request: &str, history: Option<(&ShadowHistory, usize)>, now: Time) -> String {
    let mut words = request.split_whitespace();
    if (words.next(), words.next()) != (Some("shadow"), Some("report")) {
        return "error: ask \"shadow report [--since D] [--format text|json|markdown]\"".into();
    }
    let mut since = None;
    let mut format = Format::Text;
    while let Some(w) = words.next() {
        match (w, words.next()) {
            ("--since", Some(d)) => match crate::time::parse_duration(d) {
                Ok(d) => {
                    since = Some(Time::from_unix_millis(
                        now.as_unix_millis().saturating_sub(d.as_millis() as u64),
                    ))
                }
                Err(e) => return format!("error: --since {d:?}: {e}"),
            },
            ("--format", Some(f)) => match Format::parse(f) {
                Some(f) => format = f,
                None => return format!("error: --format: text, json or markdown, not {f:?}"),
            },
            (w, _) => return format!("error: shadow report: unknown argument {w:?}"),
        }
    }
    match history {
        Some((h, pending)) => render(h, pending, since, now, format),
        None => "error: shadow mode is off (shadow = false in the configuration)".to_string(),
    }
}

/// `/metrics` in shadow mode: every class and kind, zero included.
pub(in crate::observe) fn metrics(e: &mut Exposition, s: &ShadowFigures) {
    const TOTAL: &str = "node_lifecycled_shadow_decisions_total";
    e.family(
        TOTAL,
        "counter",
        "Shadow mode: decisions paired with the incumbent's writes, by class (same, earlier, later, only_ours, only_theirs) and kind.",
    );
    for c in Class::ALL {
        for k in ShadowKind::ALL {
            let n = s
                .totals
                .get(&format!("{}/{}", c.as_str(), k.as_str()))
                .copied()
                .unwrap_or(0);
            e.sample(TOTAL, &[("class", c.as_str()), ("kind", k.as_str())], n);
        }
    }
    e.family(
        "node_lifecycled_shadow_pending",
        "gauge",
        "Shadow mode: decisions waiting for the other controller's.",
    );
    e.sample("node_lifecycled_shadow_pending", &[], s.pending);
    e.family(
        "node_lifecycled_shadow_marked_objects",
        "gauge",
        "Shadow mode: nodes and pods the incumbent marked that it keeps a note of.",
    );
    e.sample("node_lifecycled_shadow_marked_objects", &[], s.marked);
    e.family(
        "node_lifecycled_shadow_bytes",
        "gauge",
        "Shadow mode: heap bytes of those notes.",
    );
    e.sample("node_lifecycled_shadow_bytes", &[], s.bytes);
}
