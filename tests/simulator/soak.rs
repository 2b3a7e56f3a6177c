//! The randomized fault soak, short. Two real daemons with leader election against the simulator
//! for a minute while seed 7's plan stops, reboots and flaps kubelets, drops,
//! stalls, expires and corrupts watches, restarts the API server, injects error bursts and slow
//! responses, kills the leader and reloads configs: no safety or liveness invariant is broken,
//! and the faults were really injected and the daemons really acted (Unknown, taints,
//! evictions). Liveness deadlines (grace + 10 s) fall due only for the longer outages of a
//! minute: the checkers are proven by the unit tests in crates/node-lifecycled-sim/src/soak/invariant_tests/, the
//! 30-minute runs (SOAK.md) count the obligations they judged.
//!
//! Every plan opens with a correlated zone failure (6 of a zone's 8 kubelets silent at once or
//! within a second) during which the leader is killed, so this minute judges the
//! batched zone view of `taint-forbidden-by-zone` and `untaint-while-dead`. A daemon that judges
//! each node alone (the first node of the zone tainted before the others' verdicts) or takes the
//! taints off at a takeover breaks both here (SOAK.md, "What it has caught").

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use node_lifecycled_sim::soak::{self, SoakOptions};

#[test]
fn a_one_minute_soak_with_faults_of_every_family_breaks_no_invariant() {
    let dir =
        std::env::temp_dir().join(format!("node-lifecycled-soak-test-{}", std::process::id()));
    let mut options = SoakOptions::new(
        Duration::from_secs(60),
        7,
        PathBuf::from(env!("CARGO_BIN_EXE_node-lifecycled")),
    );
    options.dir = Some(dir.clone());
    let mut out = Vec::new();
    let report = soak::run(&options, &mut out).expect("the soak runs");
    let text = format!("{}\n{report}", String::from_utf8_lossy(&out));
    assert!(report.passed(), "{text}");
    let kinds = report.faults.len();
    assert!(kinds >= 6, "only {kinds} fault kinds injected:\n{text}");
    for kind in ["zone-partial-", "kill-leader-in-outage"] {
        assert!(
            report.faults.keys().any(|k| k.starts_with(kind)),
            "no {kind} episode:\n{text}"
        );
    }
    assert!(report.fault_count() >= 10, "{text}");
    for decision in [
        "node Ready=Unknown",
        "taint +node.kubernetes.io/unreachable:NoExecute",
        "pod deleted",
    ] {
        assert!(
            report.decisions.get(decision).copied().unwrap_or(0) > 0,
            "no {decision:?}:\n{text}"
        );
    }
    assert!(report.obligations.unknown_verdicts_checked > 0, "{text}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Partitions (`--partitions`): the daemons group nodes into sites by label (zones z1 and z2 make
/// one site), keep pods Ready while a site is disrupted, hold a dark site until `hold_max` (a pool
/// of its own for one site). A minute of seed 26's faults breaks no
/// invariant judged per domain, `taint-in-held-domain` included, and the daemons still act.
#[test]
fn a_one_minute_soak_with_domains_pools_and_holds_breaks_no_invariant() {
    let dir = std::env::temp_dir().join(format!(
        "node-lifecycled-soak-partitions-{}",
        std::process::id()
    ));
    let mut options = SoakOptions::new(
        Duration::from_secs(60),
        26,
        PathBuf::from(env!("CARGO_BIN_EXE_node-lifecycled")),
    );
    options.partitions = true;
    options.dir = Some(dir.clone());
    let mut out = Vec::new();
    let report = soak::run(&options, &mut out).expect("the soak runs");
    let text = format!("{}\n{report}", String::from_utf8_lossy(&out));
    assert!(report.passed(), "{text}");
    assert!(report.fault_count() >= 5, "{text}");
    assert!(report.replay().ends_with("--partitions"), "{text}");
    for decision in [
        "node Ready=Unknown",
        "taint +node.kubernetes.io/unreachable:NoExecute",
    ] {
        assert!(
            report.decisions.get(decision).copied().unwrap_or(0) > 0,
            "no {decision:?}:\n{text}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A soak stopped early (the `soak` command sets the flag on SIGINT/SIGTERM) ends with an error
/// and leaves neither of its daemons running.
#[test]
fn a_soak_stopped_by_a_signal_leaves_no_daemon_running() {
    let dir =
        std::env::temp_dir().join(format!("node-lifecycled-soak-stop-{}", std::process::id()));
    let mut options = SoakOptions::new(
        Duration::from_secs(60),
        8,
        PathBuf::from(env!("CARGO_BIN_EXE_node-lifecycled")),
    );
    options.dir = Some(dir.clone());
    let stop = Arc::new(AtomicBool::new(false));
    options.stop = Some(stop.clone());
    let watcher = {
        let dir = dir.clone();
        std::thread::spawn(move || {
            // Stop once both daemons run (generous: the machine may be busy).
            let started = std::time::Instant::now();
            while daemons_running(&dir) < 2 && started.elapsed() < Duration::from_secs(30) {
                std::thread::sleep(Duration::from_millis(100));
            }
            let seen = daemons_running(&dir);
            stop.store(true, Ordering::Relaxed);
            seen
        })
    };
    let mut out = Vec::new();
    let result = soak::run(&options, &mut out);
    let seen = watcher.join().expect("the watcher thread");
    assert_eq!(seen, 2, "both daemons ran before the stop");
    let Err(error) = result else {
        panic!("a stopped soak is an error");
    };
    assert!(error.contains("stopped by a signal"), "{error}");
    assert_eq!(daemons_running(&dir), 0, "a daemon outlived its soak");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Processes whose command line names a config file in `dir` (the soak's daemons).
fn daemons_running(dir: &Path) -> usize {
    let needle = dir.to_string_lossy().into_owned();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return 0;
    };
    entries
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .bytes()
                .all(|b| b.is_ascii_digit())
        })
        .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
        .filter(|cmdline| {
            let text = String::from_utf8_lossy(cmdline);
            text.starts_with(env!("CARGO_BIN_EXE_node-lifecycled")) && text.contains(&needle)
        })
        .count()
}
