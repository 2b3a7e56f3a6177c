//! The cost curve over several sizes: what grows with the cluster, fitted as a straight line
//! (least squares) through every size measured, and the figures as CSV for
//! `scripts/plot-bench-curve.py`.

use std::fmt::Write as _;

use super::SizeReport;

/// The sizes of `--sizes curve`: from a small site to three times Kubernetes' envelope.
pub const CURVE_NODES: [usize; 5] = [500, 2000, 5000, 15_000, 30_000];

/// Steady CPU per Lease watch event: the steady window's CPU over its renewals (each renewal
/// is one Lease MODIFIED event on the daemon's watch).
pub fn steady_us_per_event(r: &SizeReport) -> Option<f64> {
    (r.steady_renewals_per_s > 0.0)
        .then(|| r.steady_cpu_percent / 100.0 * 1e6 / r.steady_renewals_per_s)
}

/// The marginal CPU of a Lease watch event: the steady window's CPU less the idle windows'
/// (every kubelet silent, the same periodic passes, timers and start-up event POSTs), over the
/// steady renewals. What the fixed costs of a wake-up-free daemon leave out of
/// [`steady_us_per_event`]; `None` without both windows.
pub fn marginal_us_per_event(r: &SizeReport) -> Option<f64> {
    (r.steady_renewals_per_s > 0.0 && r.idle.window > std::time::Duration::ZERO).then(|| {
        (r.steady_cpu_percent - r.idle.cpu_percent).max(0.0) / 100.0 * 1e6 / r.steady_renewals_per_s
    })
}

/// Slope and intercept of the least-squares line through the points (`None` with fewer than
/// two distinct x).
pub fn fit(points: &[(f64, f64)]) -> Option<(f64, f64)> {
    let n = points.len() as f64;
    if points.len() < 2 {
        return None;
    }
    let mean_x = points.iter().map(|p| p.0).sum::<f64>() / n;
    let mean_y = points.iter().map(|p| p.1).sum::<f64>() / n;
    let sxx: f64 = points.iter().map(|p| (p.0 - mean_x).powi(2)).sum();
    if sxx <= 0.0 {
        return None;
    }
    let sxy: f64 = points.iter().map(|p| (p.0 - mean_x) * (p.1 - mean_y)).sum();
    let slope = sxy / sxx;
    Some((slope, mean_y - slope * mean_x))
}

/// One fitted line: the slope in `unit` (times `scale`), and what is there at zero in
/// `base` (its unit, and the factor from the y values).
fn growth_line(
    out: &mut String,
    what: &str,
    points: Vec<(f64, f64)>,
    (unit, scale): (&str, f64),
    base: (&str, f64),
) {
    match fit(&points) {
        Some((slope, intercept)) => {
            let _ = writeln!(
                out,
                "- {what}: {:.2} {unit} (at zero: {:.2} {}; {} sizes)",
                slope * scale,
                intercept * base.1,
                base.0,
                points.len()
            );
        }
        None => {
            let _ = writeln!(out, "- {what}: needs two sizes or more");
        }
    }
}

/// The fitted growth, one line per figure, for the report after the table.
pub fn growth(reports: &[SizeReport]) -> String {
    let mut out = String::new();
    let pods = |r: &SizeReport| r.pods as f64;
    growth_line(
        &mut out,
        "steady RSS per pod",
        reports
            .iter()
            .map(|r| (pods(r), r.steady_rss_kib as f64 * 1024.0))
            .collect(),
        ("bytes per pod", 1.0),
        ("MiB", 1.0 / 1_048_576.0),
    );
    growth_line(
        &mut out,
        "cluster store per pod (the daemon's count)",
        reports
            .iter()
            .map(|r| {
                let store =
                    r.store_bytes_per_pod * r.pods as u64 + r.store_bytes_per_node * r.nodes as u64;
                (pods(r), store as f64)
            })
            .collect(),
        ("bytes per pod", 1.0),
        ("KiB", 1.0 / 1024.0),
    );
    growth_line(
        &mut out,
        "initial sync",
        reports
            .iter()
            .map(|r| (pods(r), r.sync.as_secs_f64()))
            .collect(),
        ("s per 10,000 pods", 10_000.0),
        ("s", 1.0),
    );
    growth_line(
        &mut out,
        "steady CPU against the Lease event rate",
        reports
            .iter()
            .map(|r| (r.steady_renewals_per_s, r.steady_cpu_percent / 100.0 * 1e6))
            .collect(),
        ("µs per event", 1.0),
        ("% of a core", 1e-4),
    );
    out
}

/// One CSV line per size (with a header), for the plot script.
pub fn csv(reports: &[SizeReport]) -> String {
    let mut out = String::from(
        "nodes,pods,sync_s,peak_rss_mib,steady_rss_mib,store_bytes_per_node,\
         store_bytes_per_pod,steady_cpu_percent,steady_events_per_s,steady_us_per_event,\
         absorb_us_per_event,steady_wakeups_per_s,detection_p50_ms,detection_p99_ms,\
         marginal_us_per_event,floor_us_per_event,floor_wakeups_per_s\n",
    );
    let opt = |v: Option<i64>| v.map_or(String::new(), |v| v.to_string());
    for r in reports {
        let _ = writeln!(
            out,
            "{},{},{:.3},{:.1},{:.1},{},{},{:.3},{:.1},{},{:.2},{:.2},{},{},{},{},{}",
            r.nodes,
            r.pods,
            r.sync.as_secs_f64(),
            r.peak_rss_sync_kib as f64 / 1024.0,
            r.steady_rss_kib as f64 / 1024.0,
            r.store_bytes_per_node,
            r.store_bytes_per_pod,
            r.steady_cpu_percent,
            r.steady_renewals_per_s,
            steady_us_per_event(r).map_or(String::new(), |v| format!("{v:.2}")),
            r.absorb.cpu_us_per_event,
            r.steady_wakeups_per_s,
            opt(r.detection.p50_ms),
            opt(r.detection.p99_ms),
            marginal_us_per_event(r).map_or(String::new(), |v| format!("{v:.2}")),
            r.floor
                .us_per_event()
                .map_or(String::new(), |v| format!("{v:.2}")),
            match r.floor.window.is_zero() {
                true => String::new(),
                false => format!("{:.2}", r.floor.wakeups_per_s()),
            },
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn size(nodes: usize, rss_mib: u64, sync_ms: u64, cpu: f64, renewals: f64) -> SizeReport {
        SizeReport {
            nodes,
            pods: nodes * 30,
            steady_rss_kib: rss_mib * 1024,
            sync: Duration::from_millis(sync_ms),
            steady_cpu_percent: cpu,
            steady_renewals_per_s: renewals,
            store_bytes_per_node: 400,
            store_bytes_per_pod: 120,
            ..SizeReport::default()
        }
    }

    #[test]
    fn a_straight_line_is_fitted_exactly_and_one_point_is_no_line() {
        let (slope, intercept) = fit(&[(1.0, 3.0), (2.0, 5.0), (4.0, 9.0)]).unwrap();
        assert!((slope - 2.0).abs() < 1e-9 && (intercept - 1.0).abs() < 1e-9);
        assert_eq!(fit(&[(1.0, 3.0)]), None);
        assert_eq!(fit(&[(1.0, 3.0), (1.0, 4.0)]), None);
    }

    #[test]
    fn growth_names_bytes_per_pod_sync_per_10000_pods_and_us_per_event() {
        // 1 MiB more per 1,000 nodes (30,000 pods); 0.1 s more sync per 1,000 nodes; 1 % of a
        // core more per 100 renewals/s: 100 µs per event.
        let reports = [
            size(1000, 10, 200, 1.0, 100.0),
            size(2000, 11, 300, 2.0, 200.0),
            size(5000, 14, 600, 5.0, 500.0),
        ];
        let text = growth(&reports);
        assert!(
            text.contains("steady RSS per pod: 34.95 bytes per pod"),
            "{text}"
        );
        assert!(
            text.contains("cluster store per pod (the daemon's count): 133.33 bytes per pod"),
            "{text}"
        );
        assert!(
            text.contains("initial sync: 0.03 s per 10,000 pods"),
            "{text}"
        );
        assert!(
            text.contains("against the Lease event rate: 100.00 µs per event"),
            "{text}"
        );
        assert_eq!(steady_us_per_event(&reports[0]), Some(100.0));
        let csv = csv(&reports);
        assert_eq!(csv.lines().count(), 4);
        assert!(
            csv.lines().nth(1).unwrap().starts_with("1000,30000,0.200,"),
            "{csv}"
        );
    }

    #[test]
    fn the_marginal_cost_of_an_event_leaves_out_what_the_idle_windows_spend() {
        // 1 % of a core with 100 renewals/s is 100 µs per renewal; 0.4 % of it spent with every
        // kubelet silent leaves 60 µs.
        let mut r = size(1000, 20, 200, 1.0, 100.0);
        assert_eq!(marginal_us_per_event(&r), None, "no idle window yet");
        r.idle.window = Duration::from_secs(40);
        r.idle.cpu_percent = 0.4;
        let marginal = marginal_us_per_event(&r).unwrap();
        assert!((marginal - 60.0).abs() < 1e-9, "{marginal}");
        let text = csv(&[r]);
        let column = |name: &str| {
            let header: Vec<&str> = text.lines().next().unwrap().split(',').collect();
            let i = header.iter().position(|h| *h == name).unwrap();
            text.lines()
                .nth(1)
                .unwrap()
                .split(',')
                .nth(i)
                .unwrap()
                .to_string()
        };
        assert_eq!(column("marginal_us_per_event"), "60.00", "{text}");
        // No floor window: its figure is empty, not a zero.
        assert_eq!(column("floor_us_per_event"), "", "{text}");
        assert_eq!(column("floor_wakeups_per_s"), "", "{text}");
    }
}
