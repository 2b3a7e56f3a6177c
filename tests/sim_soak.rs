//! Issue #13: the randomized fault soak, short. Two real daemons with leader election against
//! the simulator for a minute while seed 7's plan stops, reboots and flaps kubelets, drops,
//! stalls, expires and corrupts watches, restarts the API server, injects error bursts and slow
//! responses, kills the leader and reloads configs: no safety or liveness invariant is broken,
//! and the faults were really injected and the daemons really acted (Unknown, taints,
//! evictions). Liveness deadlines (grace + 35 s) rarely fall due within a minute: the
//! checkers are proven by the unit tests in src/sim/soak/invariant_tests.rs, the 30-minute
//! runs (SOAK.md) count the obligations they judged.

use std::path::PathBuf;
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
