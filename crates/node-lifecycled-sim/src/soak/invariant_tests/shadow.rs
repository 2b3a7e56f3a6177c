//! `--shadow`'s rules (`shadow_rules.rs`): `shadow-wrote` and `shadow-divergence-lost`.

use super::{A, Log, at};
use crate::resource::{Resource, Verb};
use crate::soak::shadow_rules::{from_file, from_report, logged};
use crate::write_log::Identity;
use serde_json::{Value, json};

fn shadow_log() -> Log {
    let mut log = Log::new();
    log.checker.use_shadow();
    log
}

#[test]
fn a_daemon_in_shadow_mode_that_writes_a_node_or_a_pod_is_caught() {
    let mut log = shadow_log();
    // The leader Lease and the incumbent's writes are fine.
    log.write(
        1.0,
        Log::daemon(A),
        Verb::Update,
        Resource::Leases,
        None,
        Some("kube-system"),
        "node-lifecycled",
        "spec.renewTime".into(),
    );
    log.write(
        2.0,
        Identity::direct("kube-controller-manager"),
        Verb::Patch,
        Resource::Nodes,
        None,
        None,
        "z1-n001",
        format!(
            "strategic {}",
            json!({"spec": {"taints": [
                {"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"}]}})
        ),
    );
    assert_eq!(log.rules(), Vec::<&str>::new(), "{:?}", log.violations());
    assert_eq!(
        log.checker
            .decisions
            .keys()
            .filter(|k| k.starts_with("incumbent: "))
            .count(),
        1,
        "{:?}",
        log.checker.decisions
    );
    // A verdict written by a daemon in shadow mode.
    log.unknown(3.0, A, "z1-n001");
    assert!(
        log.rules().contains(&"shadow-wrote"),
        "{:?}",
        log.violations()
    );

    // Without --shadow the same write is the daemon's job.
    let mut log = Log::new();
    log.unknown(3.0, A, "z1-n001");
    assert!(!log.rules().contains(&"shadow-wrote"));
}

fn ms(t: f64) -> u64 {
    at(t).as_unix_millis()
}

/// A divergence as the daemon's report and file hold it.
fn record(node: &str, theirs: f64, classed: f64) -> Value {
    json!({"class": "only_theirs", "kind": "taint_added", "node": node,
        "taint": "node.kubernetes.io/unreachable:NoExecute",
        "theirs": {"at_ms": ms(theirs), "evidence": "wrote node.kubernetes.io/unreachable:NoExecute"},
        "rule": "hold", "classed_ms": ms(classed)})
}

/// The daemon's line for [`record`], as its log has it.
fn line(node: &str, theirs: f64, classed: f64) -> String {
    format!(
        "{:?} INFO  shadow: only_theirs taint_added node={node} \
         taint=node.kubernetes.io/unreachable:NoExecute theirs={} (wrote \
         node.kubernetes.io/unreachable:NoExecute timeAdded={}) rule=\"hold\"\n",
        at(classed),
        at(theirs).to_rfc3339(),
        at(theirs).to_rfc3339()
    )
}

fn file(records: &[Value], same: usize) -> String {
    let mut entries: Vec<Value> = records
        .iter()
        .map(|r| json!({"at_ms": r["classed_ms"], "class": r["class"], "kind": r["kind"]}))
        .collect();
    entries.extend((0..same).map(|_| json!({"at_ms": 0, "class": "same", "kind": "node_unknown"})));
    json!({"version": 1, "since_ms": 0, "totals": {}, "entries": entries,
        "divergences": records, "rotated": 0})
    .to_string()
}

fn report(records: &[Value], same: u64) -> String {
    json!({"counts": {"same": {"node_unknown": same},
        "only_theirs": {"taint_added": records.len()}},
        "divergences": records, "rotated": 0, "pending": 0})
    .to_string()
}

#[test]
fn the_daemons_lines_reports_and_file_are_read_alike() {
    let r = record("z1-n001", 10.0, 40.0);
    let log = format!(
        "{:?} INFO  shadow: nothing to compare\n{}",
        at(1.0),
        line("z1-n001", 10.0, 40.0)
    );
    let lines = logged(&log);
    assert_eq!(lines.len(), 1);
    assert_eq!(lines[0].0, at(40.0));
    let from_file = from_file(&file(std::slice::from_ref(&r), 2)).unwrap();
    let from_report = from_report(&report(std::slice::from_ref(&r), 2)).unwrap();
    assert_eq!(from_file.divergences, vec![lines[0].1.clone()]);
    assert_eq!(from_report.divergences, from_file.divergences);
    assert_eq!(from_file.counts.get("same/node_unknown"), Some(&2));
    assert_eq!(from_report.counts.get("same/node_unknown"), Some(&2));
    assert_eq!(from_report.oldest_divergence, Some(at(40.0)));
}

/// daemon-a logs two divergences (40 s, 70 s), is asked at 50 s and 75 s, stopped with
/// SIGTERM at 80 s and again at the end (200 s).
fn restarted(kept: &[Value], same_at_end: usize) -> Log {
    let mut log = shadow_log();
    let (r1, r2) = (record("z1-n001", 10.0, 40.0), record("z1-n002", 45.0, 70.0));
    log.checker.shadow_report(
        "daemon-a",
        at(50.0),
        Some(&report(std::slice::from_ref(&r1), 3)),
    );
    log.checker
        .shadow_report("daemon-a", at(75.0), Some(&report(&[r1, r2], 4)));
    log.checker.shadow_report("daemon-a", at(76.0), None);
    log.checker.daemon_ended("daemon-a", at(80.0), true);
    log.checker.daemon_ended("daemon-a", at(200.0), true);
    let text = format!(
        "{}{}",
        line("z1-n001", 10.0, 40.0),
        line("z1-n002", 45.0, 70.0)
    );
    log.checker
        .judge_shadow("daemon-a", &text, Some(&file(kept, same_at_end)), at(200.0));
    log
}

#[test]
fn a_divergence_kept_across_a_restart_is_fine_and_one_lost_is_caught() {
    let all = [record("z1-n001", 10.0, 40.0), record("z1-n002", 45.0, 70.0)];
    let log = restarted(&all, 4);
    assert_eq!(log.rules(), Vec::<&str>::new(), "{:?}", log.violations());
    let o = &log.checker.obligations().shadow;
    assert_eq!(
        (o.logged, o.kept, o.reports_checked, o.asks_failed),
        (2, 2, 2, 1)
    );

    // The second divergence gone after the SIGTERM at 80 s: its line and the 75 s report.
    let log = restarted(&all[..1], 4);
    let lost: Vec<_> = log.violations().iter().map(|v| (v.rule, v.at)).collect();
    assert_eq!(
        lost,
        [
            ("shadow-divergence-lost", at(70.0)),
            ("shadow-divergence-lost", at(75.0))
        ],
        "{:?}",
        log.violations()
    );
    // A count lower than a report before the restart had.
    let log = restarted(&all, 3);
    assert_eq!(
        log.rules(),
        ["shadow-divergence-lost"],
        "{:?}",
        log.violations()
    );
    assert!(
        log.violations()[0]
            .detail
            .contains("same/node_unknown 4 then, 3 at the end")
    );
}

#[test]
fn what_a_sigkill_may_take_is_excused_and_no_more() {
    let all = [record("z1-n001", 10.0, 40.0), record("z1-n002", 45.0, 70.0)];
    let judge = |killed_at: f64, kept: &[Value]| {
        let mut log = shadow_log();
        log.checker.daemon_ended("daemon-a", at(killed_at), false);
        log.checker.daemon_ended("daemon-a", at(200.0), true);
        let text = format!(
            "{}{}",
            line("z1-n001", 10.0, 40.0),
            line("z1-n002", 45.0, 70.0)
        );
        log.checker
            .judge_shadow("daemon-a", &text, Some(&file(kept, 0)), at(200.0));
        log
    };
    // Killed 5 s after the second was classed: it may not have been written yet.
    let log = judge(75.0, &all[..1]);
    assert_eq!(log.rules(), Vec::<&str>::new(), "{:?}", log.violations());
    assert_eq!(log.checker.obligations().shadow.lost_to_kill, 1);
    // Killed 20 s after: two saves were due meanwhile.
    let log = judge(90.0, &all[..1]);
    assert_eq!(
        log.rules(),
        ["shadow-divergence-lost"],
        "{:?}",
        log.violations()
    );
    // No file at all at the end.
    let mut log = shadow_log();
    log.checker.judge_shadow("daemon-a", "", None, at(200.0));
    assert_eq!(log.rules(), ["shadow-divergence-lost"]);
}

#[test]
fn once_the_history_rotated_older_divergences_and_counts_are_not_judged() {
    let mut log = shadow_log();
    let old = record("z1-n001", 10.0, 40.0);
    let new = record("z1-n002", 45.0, 70.0);
    log.checker.shadow_report(
        "daemon-a",
        at(50.0),
        Some(&report(std::slice::from_ref(&old), 9)),
    );
    log.checker.daemon_ended("daemon-a", at(200.0), true);
    let mut rotated: Value = serde_json::from_str(&file(std::slice::from_ref(&new), 1)).unwrap();
    rotated["rotated"] = json!(8);
    let text = format!(
        "{}{}",
        line("z1-n001", 10.0, 40.0),
        line("z1-n002", 45.0, 70.0)
    );
    log.checker
        .judge_shadow("daemon-a", &text, Some(&rotated.to_string()), at(200.0));
    assert_eq!(log.rules(), Vec::<&str>::new(), "{:?}", log.violations());
    assert_eq!(log.checker.obligations().shadow.rotated_out, 1);
}
