//! The benchmark's machinery at a tiny size and with short timings (`node-lifecycled-sim bench`
//! measures 500 and 5,000 nodes in release builds; this only proves that every figure is
//! produced and sane). Not a timing test: no figure is compared with a target here.

use std::path::PathBuf;
use std::time::Duration;

use node_lifecycled_sim::bench::{self, BenchOptions, BenchSize};

fn tiny_options(dir: PathBuf) -> BenchOptions {
    BenchOptions {
        sizes: vec![BenchSize {
            nodes: 20,
            pods_per_node: 3,
            zones: 2,
        }],
        victims: 4,
        burst_events: 500,
        renew_interval: Duration::from_secs(1),
        grace: Duration::from_secs(6),
        monitor_period: Duration::from_secs(1),
        eviction_rate: 10.0,
        qps: Some(200.0),
        burst: Some(200),
        settle: Duration::from_secs(1),
        steady_window: Duration::from_secs(2),
        idle_window: Duration::from_millis(1500),
        idle_rounds: 1,
        sync_timeout: Duration::from_secs(60),
        detection_timeout: Duration::from_secs(60),
        work_dir: Some(dir),
        ..BenchOptions::standard(PathBuf::from(env!("CARGO_BIN_EXE_node-lifecycled")))
    }
}

#[test]
fn bench_at_a_tiny_size_produces_every_figure() {
    let dir = std::env::temp_dir().join(format!("sim-bench-smoke-{}", std::process::id()));
    let options = tiny_options(dir.clone());
    let mut out = Vec::new();
    let reports = bench::run(&options, &mut out)
        .unwrap_or_else(|e| panic!("{e}\n{}", String::from_utf8_lossy(&out)));
    let text = String::from_utf8_lossy(&out).to_string();
    assert_eq!(reports.len(), 1, "{text}");
    let r = &reports[0];

    // 20 nodes × (2 web + 1 DaemonSet) + one pod per victim that tolerates nothing.
    assert_eq!((r.nodes, r.pods, r.zones), (20, 64, 2), "{text}");
    assert!(
        r.sync > Duration::ZERO && r.sync < options.sync_timeout,
        "{text}"
    );
    assert!(r.peak_rss_sync_kib > 1024, "{text}");
    assert!(r.steady_rss_kib > 1024, "{text}");
    assert!(r.hwm_end_kib >= r.steady_rss_kib, "{text}");
    // 21 kubelets (the sink included) renewing every second, with 4 % jitter.
    assert!((12.0..=30.0).contains(&r.steady_renewals_per_s), "{text}");
    assert!(
        r.steady_cpu_percent >= 0.0 && r.steady_cpu_percent < 200.0,
        "{text}"
    );
    assert!(r.steady_wakeups_per_s > 0.0, "{text}");
    // The floor reader read the same renewals, on a grid (fewer reads than events), and spent
    // some CPU on them.
    // The window as measured: its ends are wake-ups, late by scheduling at most (generous).
    let second = std::time::Duration::from_secs(1);
    assert!(
        r.floor.window > options.steady_window - second
            && r.floor.window < options.steady_window + second,
        "{text}"
    );
    assert!(r.floor.wakeups >= r.floor.reads, "{text}");
    assert!((10.0..=30.0).contains(&r.floor.events_per_s()), "{text}");
    assert!(r.floor.objects * 10 >= r.floor.events * 9, "{text}");
    assert!(r.floor.reads < r.floor.events, "{text}");
    assert!(r.floor.us_per_event().is_some_and(|us| us > 0.0), "{text}");
    assert!(
        text.contains("floor (2s): a bare reader of the same Lease watch"),
        "{text}"
    );

    // The STATUS= refresh alone wakes the loop every second; nothing may be judged Unknown
    // while the kubelets are silent for less than grace.
    assert!(r.idle.wakeups_per_s > 0.0, "{text}");
    assert_eq!(r.idle.unknown_writes, 0, "{text}");
    assert!((r.idle.periodic_pass_per_s - 1.0).abs() < 1e-9, "{text}");

    assert_eq!(r.absorb.events, 500, "{text}");
    assert!(
        r.absorb.events_per_s > 0.0 && r.absorb.sim_events_per_s > 0.0,
        "{text}"
    );
    assert!(["daemon", "simulator"].contains(&r.absorb.limit), "{text}");
    assert_eq!(r.absorb.pod_relists, 0, "{text}");

    // Every victim judged, tainted and its intolerant pod deleted; never before grace ran out.
    assert_eq!((r.detection.samples, r.detection.missing), (4, 0), "{text}");
    assert!(r.detection.p50_ms.unwrap() >= 0, "{text}");
    assert!(r.detection.max_ms.unwrap() < 6_000, "{text}");
    assert_eq!(r.verdict_to_taint.samples, 4, "{text}");
    assert_eq!(r.taint_to_delete.samples, 4, "{text}");
    assert!(r.taint_to_delete.p50_ms.unwrap() >= 0, "{text}");
    assert!(r.detection_writes > 0, "{text}");

    for figure in [
        "initial sync",
        "peak RSS during sync",
        "steady RSS",
        "steady CPU",
        "idle wake-ups/s",
        "detection:",
        "taint → first pod DELETE",
        "watch events/s absorbed",
    ] {
        assert!(text.contains(figure), "{figure} missing from:\n{text}");
    }
    let size_dir = dir.join("20-nodes");
    for file in [
        "config.toml",
        "node-lifecycled.log",
        "writes.log",
        "detection.tsv",
    ] {
        assert!(size_dir.join(file).is_file(), "{file} not written");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
