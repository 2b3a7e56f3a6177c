//! The figures of one cluster size, and the table that compares the sizes with each other and
//! with the targets.

use std::fmt::Write as _;
use std::time::Duration;

/// p50 / p99 / max of a set of latencies (milliseconds, signed: a verdict before its deadline
/// would be negative, and must show as such).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Latencies {
    pub samples: usize,
    /// Subjects for which the end event never came within the phase's time.
    pub missing: usize,
    pub p50_ms: Option<i64>,
    pub p99_ms: Option<i64>,
    pub max_ms: Option<i64>,
}

impl Latencies {
    pub fn of(mut values: Vec<i64>, missing: usize) -> Latencies {
        values.sort_unstable();
        Latencies {
            samples: values.len(),
            missing,
            p50_ms: percentile(&values, 50.0),
            p99_ms: percentile(&values, 99.0),
            max_ms: values.last().copied(),
        }
    }
}

/// Nearest-rank percentile of sorted values.
pub fn percentile(sorted: &[i64], p: f64) -> Option<i64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    Some(sorted[rank.clamp(1, sorted.len()) - 1])
}

/// Median of unsorted values.
pub fn median(mut values: Vec<u64>) -> Option<u64> {
    values.sort_unstable();
    values.get(values.len().checked_sub(1)? / 2).copied()
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct IdleFigures {
    pub window: Duration,
    pub wakeups_per_s: f64,
    pub timers_per_s: f64,
    pub io_per_s: f64,
    pub context_switches_per_s: f64,
    pub cpu_percent: f64,
    /// What the timers of a quiet daemon add up to by construction: the periodic pass
    /// (1 / node_monitor_period). (`STATUS=` rides on the pass's wake-ups.)
    pub periodic_pass_per_s: f64,
    /// Event POSTs in the window: the daemon's backlog of start-up events (RegisteredNode for
    /// every node, paced at 5/s), not a reaction to anything in the window.
    pub event_posts_per_s: f64,
    pub watch_reconnects: u64,
    /// I/O wake-ups per watch rotation (the idle windows' only I/O), when one happened.
    pub io_per_rotation: Option<f64>,
    /// Ready=Unknown writes during the quiet window (must be 0: the window is shorter than grace).
    pub unknown_writes: usize,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct AbsorbFigures {
    pub events: usize,
    /// How long the simulator took to make the burst's writes.
    pub sim_write: Duration,
    /// From the first write of the burst to the daemon's DELETE of the marker pod written after
    /// it, less `marker_baseline`.
    pub daemon_absorb: Duration,
    /// Marker pod created → its DELETE, on a quiet daemon.
    pub marker_baseline: Duration,
    pub events_per_s: f64,
    pub sim_events_per_s: f64,
    /// "daemon" or "simulator": which side set the pace.
    pub limit: &'static str,
    pub cpu_us_per_event: f64,
    /// Relists of pods during the burst (a watch that fell out of the server's history).
    pub pod_relists: u64,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct SizeReport {
    pub label: String,
    pub nodes: usize,
    pub pods: usize,
    pub zones: usize,
    pub populate: Duration,
    pub sync: Duration,
    pub peak_rss_sync_kib: u64,
    pub steady_rss_kib: u64,
    pub hwm_end_kib: u64,
    pub steady_window: Duration,
    pub steady_cpu_percent: f64,
    /// The kernel's share of the steady CPU, % (from utime/stime ticks).
    pub steady_kernel_share: Option<f64>,
    pub steady_renewals_per_s: f64,
    pub steady_wakeups_per_s: f64,
    pub steady_event_posts_per_s: f64,
    /// A bare reader of the same Lease watch, in a window beside the steady one.
    pub floor: super::floor_reader::FloorFigures,
    pub idle: IdleFigures,
    pub absorb: AbsorbFigures,
    pub victims: usize,
    pub detection: Latencies,
    pub verdict_to_taint: Latencies,
    pub taint_to_delete: Latencies,
    /// The daemon's API writes from the first verdict to the last first-DELETE, and that span.
    pub detection_writes: usize,
    pub detection_write_span: Duration,
    pub grace: Duration,
    pub qps: f64,
    pub wall: Duration,
    /// The cluster store's heap bytes per node and per pod (the daemon's dump).
    pub store_bytes_per_node: u64,
    pub store_bytes_per_pod: u64,
    pub calls_per_verdict: CallsPerVerdict,
    /// `--mass-failure`: a zone dark at once (`mass_failure.rs`).
    pub mass_failure: Option<super::mass_failure::MassFailure>,
}

/// The daemon's API calls in the detection phase, per node that died.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CallsPerVerdict {
    /// GETs: live Lease reads (and re-reads after a conflict).
    pub lease_reads: f64,
    pub status_writes: f64,
    /// Taint and label PATCHes of nodes.
    pub node_writes: f64,
    /// 409 answers to the daemon, in all.
    pub conflicts: usize,
}

impl SizeReport {
    /// Idle wake-ups/s that are neither the periodic pass nor an event POST of the start-up
    /// backlog (each POST is one executor timer). The pass counts at its nominal rate, but it
    /// rides other wake-ups when it can (a lazy timer), so this can come out below zero: it is
    /// clamped there, and `idle_besides_posts` is the figure that does not assume anything.
    pub fn idle_besides_pass(&self) -> f64 {
        (self.idle_besides_posts() - self.idle.periodic_pass_per_s).max(0.0)
    }

    /// Idle wake-ups/s besides the event POSTs, the pass's own included: at or under 0.2/s,
    /// the wake-ups besides the pass are too, whatever the pass shared.
    pub fn idle_besides_posts(&self) -> f64 {
        self.idle.wakeups_per_s - self.idle.event_posts_per_s
    }
}

fn mib(kib: u64) -> String {
    format!("{:.1} MiB", kib as f64 / 1024.0)
}

fn secs(d: Duration) -> String {
    format!("{:.2} s", d.as_secs_f64())
}

fn ms(v: Option<i64>) -> String {
    v.map_or_else(|| "—".to_string(), |v| format!("{v} ms"))
}

fn latencies(l: &Latencies, p99: bool) -> String {
    let mut text = if p99 {
        format!("{} / {} / {}", ms(l.p50_ms), ms(l.p99_ms), ms(l.max_ms))
    } else {
        format!("{} / {}", ms(l.p50_ms), ms(l.max_ms))
    };
    if l.missing > 0 {
        let _ = write!(text, " ({} missing)", l.missing);
    }
    text
}

/// `large / small` of one figure, when both are positive.
fn ratio(small: f64, large: f64) -> String {
    if small > 0.0 && large > 0.0 && small.is_finite() && large.is_finite() {
        format!("×{:.2}", large / small)
    } else {
        "—".to_string()
    }
}

struct Row {
    figure: &'static str,
    value: fn(&SizeReport) -> String,
    /// The number the ratio column compares.
    scalar: fn(&SizeReport) -> f64,
    target: &'static str,
}

fn rows() -> Vec<Row> {
    vec![
        Row {
            figure: "pods (incl. DaemonSet + bench pods)",
            value: |r| r.pods.to_string(),
            scalar: |r| r.pods as f64,
            target: "",
        },
        Row {
            figure: "initial sync (start → READY=1)",
            value: |r| secs(r.sync),
            scalar: |r| r.sync.as_secs_f64(),
            target: "≤ 15 s at 5,000",
        },
        Row {
            figure: "peak RSS during sync",
            value: |r| mib(r.peak_rss_sync_kib),
            scalar: |r| r.peak_rss_sync_kib as f64,
            target: "≤ 48 MiB at 5,000",
        },
        Row {
            figure: "steady RSS (median)",
            value: |r| mib(r.steady_rss_kib),
            scalar: |r| r.steady_rss_kib as f64,
            target: "≤ 12 MiB at 500, ≤ 40 MiB at 5,000",
        },
        Row {
            figure: "cluster store, heap bytes per node / per pod",
            value: |r| format!("{} / {} B", r.store_bytes_per_node, r.store_bytes_per_pod),
            scalar: |r| r.store_bytes_per_pod as f64,
            target: "",
        },
        Row {
            figure: "VmHWM at the end of the run",
            value: |r| mib(r.hwm_end_kib),
            scalar: |r| r.hwm_end_kib as f64,
            target: "",
        },
        Row {
            figure: "lease renewals/s during the steady window",
            value: |r| format!("{:.0}/s", r.steady_renewals_per_s),
            scalar: |r| r.steady_renewals_per_s,
            target: "500/s at 5,000",
        },
        Row {
            figure: "steady CPU, % of one core",
            value: |r| {
                format!(
                    "{:.2} % ({:.2} CPU-s/min)",
                    r.steady_cpu_percent,
                    r.steady_cpu_percent * 0.6
                )
            },
            scalar: |r| r.steady_cpu_percent,
            target: "≤ 3 %",
        },
        Row {
            figure: "steady CPU per Lease watch event",
            value: |r| {
                super::steady_us_per_event(r).map_or("—".to_string(), |us| format!("{us:.1} µs"))
            },
            scalar: |r| super::steady_us_per_event(r).unwrap_or(0.0),
            target: "≤ 5 µs",
        },
        Row {
            figure: "marginal CPU per Lease watch event (steady less idle)",
            value: |r| {
                super::marginal_us_per_event(r)
                    .map_or("—".to_string(), |us| format!("{us:.1} µs"))
            },
            scalar: |r| super::marginal_us_per_event(r).unwrap_or(0.0),
            target: "≤ 5 µs",
        },
        Row {
            figure: "floor: CPU per Lease watch event of a bare reader of the same watch",
            value: |r| match r.floor.us_per_event() {
                Some(us) => format!(
                    "{us:.1} µs ({:.1} wake-ups/s, {:.0} events per read)",
                    r.floor.wakeups_per_s(),
                    r.floor.events_per_read()
                ),
                None => "—".to_string(),
            },
            scalar: |r| r.floor.us_per_event().unwrap_or(0.0),
            target: "",
        },
        Row {
            figure: "loop wake-ups/s, steady",
            value: |r| format!("{:.1}/s", r.steady_wakeups_per_s),
            scalar: |r| r.steady_wakeups_per_s,
            target: "",
        },
        Row {
            figure: "idle wake-ups/s (total)",
            value: |r| format!("{:.2}/s", r.idle.wakeups_per_s),
            scalar: |r| r.idle.wakeups_per_s,
            target: "",
        },
        Row {
            figure: "event POSTs/s in the steady / idle window (start-up backlog)",
            value: |r| {
                format!(
                    "{:.1}/s / {:.1}/s",
                    r.steady_event_posts_per_s, r.idle.event_posts_per_s
                )
            },
            scalar: |r| r.idle.event_posts_per_s,
            target: "",
        },
        Row {
            figure: "idle wake-ups/s besides the periodic pass and event POSTs",
            value: |r| {
                format!(
                    "{:.2}/s (all but the POSTs, the pass included: {:.2}/s; timers {:.2}, I/O \
                     {:.2}; pass {:.2}; {} watch rotations in {:.0} s{})",
                    r.idle_besides_pass(),
                    r.idle_besides_posts(),
                    r.idle.timers_per_s,
                    r.idle.io_per_s,
                    r.idle.periodic_pass_per_s,
                    r.idle.watch_reconnects,
                    r.idle.window.as_secs_f64(),
                    r.idle
                        .io_per_rotation
                        .map_or(String::new(), |n| format!(", {n:.1} I/O wake-ups each"))
                )
            },
            scalar: SizeReport::idle_besides_pass,
            target: "≤ 0.2/s",
        },
        Row {
            figure: "idle context switches/s, CPU",
            value: |r| {
                format!(
                    "{:.2}/s, {:.3} %",
                    r.idle.context_switches_per_s, r.idle.cpu_percent
                )
            },
            scalar: |r| r.idle.context_switches_per_s,
            target: "",
        },
        Row {
            figure: "detection: Unknown write − (probe + grace), p50/p99/max",
            value: |r| latencies(&r.detection, true),
            scalar: |r| r.detection.p99_ms.unwrap_or(0) as f64,
            target: "p99 ≤ 100 ms",
        },
        Row {
            figure: "verdict → NoExecute taint write, p50/max",
            value: |r| latencies(&r.verdict_to_taint, false),
            scalar: |r| r.verdict_to_taint.p50_ms.unwrap_or(0) as f64,
            target: "",
        },
        Row {
            figure: "taint → first pod DELETE, p50/max",
            value: |r| latencies(&r.taint_to_delete, false),
            scalar: |r| r.taint_to_delete.p50_ms.unwrap_or(0) as f64,
            target: "",
        },
        Row {
            figure: "API calls per dead node: Lease GETs, status, taint/label writes; 409s",
            value: |r| {
                let c = &r.calls_per_verdict;
                format!(
                    "{:.2}, {:.2}, {:.2}; {} × 409",
                    c.lease_reads, c.status_writes, c.node_writes, c.conflicts
                )
            },
            scalar: |r| r.calls_per_verdict.conflicts as f64,
            target: "0 × 409",
        },
        Row {
            figure: "daemon API writes, first verdict → last first DELETE",
            value: |r| {
                let span = r.detection_write_span.as_secs_f64();
                let rate = if span > 0.0 {
                    r.detection_writes as f64 / span
                } else {
                    0.0
                };
                format!(
                    "{} in {:.1} s ({:.1}/s at qps {})",
                    r.detection_writes, span, rate, r.qps
                )
            },
            scalar: |r| r.detection_writes as f64,
            target: "",
        },
        Row {
            figure: "watch events/s absorbed (pod MODIFIED burst)",
            value: |r| {
                format!(
                    "{:.0}/s over {} events (limit: {}; sim wrote {:.0}/s)",
                    r.absorb.events_per_s,
                    r.absorb.events,
                    r.absorb.limit,
                    r.absorb.sim_events_per_s
                )
            },
            scalar: |r| r.absorb.events_per_s,
            target: "",
        },
        Row {
            figure: "daemon CPU per watch event",
            value: |r| format!("{:.1} µs", r.absorb.cpu_us_per_event),
            scalar: |r| r.absorb.cpu_us_per_event,
            target: "",
        },
    ]
}

/// A Markdown table: one column per size, a `large/small` ratio column when there are two or
/// more sizes (last over first), and the targets.
pub fn table(reports: &[SizeReport]) -> String {
    let mut out = String::new();
    let compare = reports.len() >= 2;
    let mut header = "| figure |".to_string();
    let mut rule = "|---|".to_string();
    for r in reports {
        let _ = write!(
            header,
            " {} nodes / {} pods / {} zones |",
            r.nodes, r.pods, r.zones
        );
        rule.push_str("---|");
    }
    if compare {
        header.push_str(" large / small |");
        rule.push_str("---|");
    }
    header.push_str(" target |");
    rule.push_str("---|");
    let _ = writeln!(out, "{header}\n{rule}");
    for row in rows() {
        let mut line = format!("| {} |", row.figure);
        for r in reports {
            let _ = write!(line, " {} |", (row.value)(r));
        }
        if let (true, Some(first), Some(last)) = (compare, reports.first(), reports.last()) {
            let _ = write!(
                line,
                " {} |",
                ratio((row.scalar)(first), (row.scalar)(last))
            );
        }
        let _ = writeln!(line, " {} |", row.target);
        out.push_str(&line);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_are_nearest_rank_over_100_samples() {
        let values: Vec<i64> = (1..=100).rev().collect();
        let l = Latencies::of(values, 2);
        assert_eq!(
            (l.p50_ms, l.p99_ms, l.max_ms),
            (Some(50), Some(99), Some(100))
        );
        assert_eq!((l.samples, l.missing), (100, 2));
        assert_eq!(Latencies::of(vec![], 3).p99_ms, None);
        assert_eq!(percentile(&[-5], 99.0), Some(-5));
        assert_eq!(median(vec![5, 1, 9, 3]), Some(3));
        assert_eq!(median(vec![]), None);
    }

    #[test]
    fn the_table_has_a_column_per_size_and_the_growth_ratio() {
        let small = SizeReport {
            nodes: 500,
            pods: 15_000,
            zones: 3,
            sync: Duration::from_secs(1),
            ..SizeReport::default()
        };
        let large = SizeReport {
            nodes: 5000,
            pods: 150_000,
            zones: 3,
            sync: Duration::from_secs(8),
            ..SizeReport::default()
        };
        let t = table(&[small, large]);
        assert!(t.contains("| 500 nodes / 15000 pods / 3 zones |"), "{t}");
        assert!(
            t.contains(
                "| initial sync (start → READY=1) | 1.00 s | 8.00 s | ×8.00 | ≤ 15 s at 5,000 |"
            ),
            "{t}"
        );
        assert!(t.lines().all(|l| l.starts_with('|')));
    }
}
