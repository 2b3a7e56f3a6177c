//! The soak's invariant checkers on synthetic write logs: each rule fires on a history that
//! breaks it, and stays quiet on the same history played correctly (a checker that cannot fail
//! would prove nothing).

use std::time::Duration;

use serde_json::json;

use super::invariants::{Checker, FaultClass, KUBELET, Limits, Violation};
use crate::resource::{Resource, Verb};
use crate::write_log::{Identity, WriteRecord};
use node_lifecycled::time::Time;

pub(super) const A: &str = "token-a";
const B: &str = "token-b";
const T0: u64 = 1_700_000_000_000;

pub(super) fn at(seconds: f64) -> Time {
    Time::from_unix_millis(T0 + (seconds * 1000.0) as u64)
}

fn nodes() -> Vec<String> {
    (1..=3)
        .flat_map(|z| (1..=8).map(move |n| format!("z{z}-n{n:03}")))
        .collect()
}

fn limits() -> Limits {
    Limits::for_soak(Duration::from_secs(5), 1.0, Duration::from_millis(400))
}

/// A log under construction: records numbered in order.
pub(super) struct Log {
    pub(super) checker: Checker,
    seq: u64,
}

impl Log {
    pub(super) fn new() -> Log {
        let mut checker = Checker::new(
            limits(),
            &[(A, "daemon-a"), (B, "daemon-b")],
            &nodes(),
            at(0.0),
        );
        checker.add_pod("default/web-0", "z1-n001", Some(Duration::ZERO), at(0.0));
        checker.add_pod(
            "default/web-1",
            "z1-n001",
            Some(Duration::from_secs(6)),
            at(0.0),
        );
        checker.add_pod("kube-system/node-agent-z1-n001", "z1-n001", None, at(0.0));
        Log { checker, seq: 0 }
    }

    #[allow(clippy::too_many_arguments)]
    fn write(
        &mut self,
        t: f64,
        identity: Identity,
        verb: Verb,
        resource: Resource,
        subresource: Option<&str>,
        namespace: Option<&str>,
        name: &str,
        summary: String,
    ) {
        self.seq += 1;
        let record = WriteRecord {
            seq: self.seq,
            elapsed: Duration::from_secs_f64(t),
            wall: at(t),
            identity,
            verb,
            resource,
            subresource: subresource.map(str::to_string),
            namespace: namespace.map(str::to_string),
            name: name.to_string(),
            code: 200,
            resource_version: Some(self.seq),
            summary,
        };
        self.checker.on_writes(&[record]);
    }

    fn daemon(token: &str) -> Identity {
        Identity {
            token: Some(token.to_string()),
            user_agent: Some("node-lifecycled".into()),
            client_cn: None,
        }
    }

    /// The kubelet of `node` renews its Lease every second over `[from, to]`.
    fn renewals(&mut self, node: &str, from: f64, to: f64) {
        let mut t = from;
        while t <= to {
            self.write(
                t,
                Identity::direct(KUBELET),
                Verb::Update,
                Resource::Leases,
                None,
                Some("kube-node-lease"),
                node,
                "spec.renewTime: \"…\" -> \"…\"".into(),
            );
            t += 1.0;
        }
    }

    pub(super) fn unknown(&mut self, t: f64, token: &str, node: &str) {
        self.write(
            t,
            Log::daemon(token),
            Verb::Update,
            Resource::Nodes,
            Some("status"),
            None,
            node,
            "status.conditions[Ready].status: \"True\" -> \"Unknown\"; \
             status.conditions[Ready].reason: \"KubeletReady\" -> \"NodeStatusUnknown\""
                .into(),
        );
    }

    pub(super) fn taints(&mut self, t: f64, token: &str, node: &str, keys: &[&str]) {
        let list: Vec<_> = keys
            .iter()
            .map(|k| json!({"key": format!("node.kubernetes.io/{k}"), "effect": "NoExecute"}))
            .collect();
        let body = json!({"spec": {"taints": list}});
        self.write(
            t,
            Log::daemon(token),
            Verb::Patch,
            Resource::Nodes,
            None,
            None,
            node,
            format!("strategic {body}"),
        );
    }

    fn delete_pod(&mut self, t: f64, key: &str) {
        let (ns, name) = key.split_once('/').unwrap();
        self.write(
            t,
            Log::daemon(A),
            Verb::Delete,
            Resource::Pods,
            None,
            Some(ns),
            name,
            "graceful deletion, grace period 30s".into(),
        );
    }

    pub(super) fn rules(&self) -> Vec<&'static str> {
        self.checker.violations.iter().map(|v| v.rule).collect()
    }

    pub(super) fn violations(&self) -> &[Violation] {
        &self.checker.violations
    }
}

#[test]
fn ready_unknown_while_the_kubelet_renews_is_a_safety_violation() {
    let mut log = Log::new();
    log.renewals("z1-n001", 0.5, 10.5);
    log.unknown(11.0, A, "z1-n001");
    assert_eq!(
        log.rules(),
        ["unknown-while-renewing"],
        "{:?}",
        log.violations()
    );
    assert!(log.violations()[0].detail.contains("z1-n001"));
}

#[test]
fn ready_unknown_after_the_grace_period_of_silence_is_fine() {
    let mut log = Log::new();
    log.renewals("z1-n001", 0.5, 3.5);
    log.unknown(8.6, A, "z1-n001");
    assert_eq!(log.rules(), Vec::<&str>::new());
}

#[test]
fn a_renewal_just_before_the_unknown_write_is_excused_as_after_the_live_read() {
    // Silent from 0.5 to 9.0, a renewal 1 s before the write: the daemon's live read may have
    // come before it (evidence allowance 2 s).
    let mut log = Log::new();
    log.renewals("z1-n001", 0.5, 0.5);
    log.renewals("z1-n001", 9.0, 9.0);
    log.unknown(10.0, A, "z1-n001");
    assert_eq!(log.rules(), Vec::<&str>::new());
}

#[test]
fn a_renewal_stamped_a_loop_iteration_early_is_excused_a_second_early_is_not() {
    let mut log = Log::new();
    log.renewals("z1-n001", 5.0, 5.0);
    log.unknown(9.9, A, "z1-n001"); // 4.9 s: within the 250 ms stamp slack
    assert_eq!(log.rules(), Vec::<&str>::new());
    log.renewals("z1-n002", 5.0, 5.0);
    log.unknown(9.0, A, "z1-n002"); // 4.0 s
    assert_eq!(log.rules(), ["unknown-while-renewing"]);
}

#[test]
fn a_renewal_while_the_daemon_waited_for_a_cpu_is_excused() {
    // A renewal 3 s before the write: a violation for a daemon that ran when it wanted to,
    // excused for one that waited 2 s on the run queue meanwhile (its write landed that late).
    let mut log = Log::new();
    log.renewals("z1-n001", 7.0, 7.0);
    log.checker
        .cpu_wait("daemon-a", at(9.0), Duration::from_secs(2));
    log.unknown(10.0, A, "z1-n001");
    assert_eq!(log.rules(), Vec::<&str>::new());
    let mut log = Log::new();
    log.renewals("z1-n002", 7.0, 7.0);
    log.checker
        .cpu_wait("daemon-b", at(9.0), Duration::from_secs(2));
    log.unknown(10.0, A, "z1-n002");
    assert_eq!(log.rules(), ["unknown-while-renewing"]);
}

#[test]
fn a_new_noexecute_taint_in_a_partially_disrupted_small_zone_is_a_violation() {
    let mut log = Log::new();
    // 5 of zone z1's 8 nodes Unknown: 62 % >= 55 %, 8 <= 50 nodes: rate 0.
    for n in 1..=5 {
        log.unknown(10.0, A, &format!("z1-n00{n}"));
    }
    log.taints(10.5, A, "z1-n001", &["unreachable"]);
    assert_eq!(log.rules(), Vec::<&str>::new(), "within the zone allowance");
    log.taints(20.0, A, "z1-n002", &["unreachable"]);
    assert_eq!(log.rules(), ["taint-forbidden-by-zone"]);
    assert!(log.violations()[0].detail.contains("partially disrupted"));
    // Zone z2 is healthy: a taint there is fine.
    log.unknown(21.0, A, "z2-n001");
    log.taints(22.0, A, "z2-n001", &["unreachable"]);
    assert_eq!(log.rules().len(), 1);
}

#[test]
fn a_new_noexecute_taint_while_every_zone_is_down_is_a_violation() {
    let mut log = Log::new();
    for node in nodes() {
        log.unknown(10.0, A, &node);
    }
    log.taints(15.0, A, "z2-n003", &["unreachable"]);
    assert_eq!(log.rules(), ["taint-forbidden-by-zone"]);
    assert!(log.violations()[0].detail.contains("every zone"));
}

#[test]
fn a_fully_disrupted_single_zone_is_tainted_at_the_normal_rate_without_violation() {
    let mut log = Log::new();
    for n in 1..=8 {
        log.unknown(10.0, A, &format!("z3-n00{n}"));
    }
    log.taints(15.0, A, "z3-n001", &["unreachable"]);
    assert_eq!(log.rules(), Vec::<&str>::new());
}

#[test]
fn a_pod_deleted_before_its_toleration_ran_out_is_a_violation() {
    let mut log = Log::new();
    log.unknown(10.0, A, "z1-n001");
    log.taints(10.0, A, "z1-n001", &["unreachable"]);
    log.delete_pod(10.2, "default/web-0"); // tolerates 0 s: fine
    log.delete_pod(13.0, "default/web-1"); // tolerates 6 s: 3 s early
    assert_eq!(log.rules(), ["eviction-before-toleration"]);
    assert!(log.violations()[0].detail.contains("web-1"));
}

#[test]
fn a_pod_deleted_when_its_toleration_ran_out_is_fine_and_a_swap_does_not_restart_the_count() {
    let mut log = Log::new();
    log.taints(10.0, A, "z1-n001", &["unreachable"]);
    log.taints(12.0, A, "z1-n001", &["not-ready"]);
    log.delete_pod(16.1, "default/web-1");
    assert_eq!(log.rules(), Vec::<&str>::new());
}

#[test]
fn a_deletion_within_the_landing_slack_is_excused_one_beyond_it_is_not() {
    // Slack: 400 ms of injected delay + 100 ms, + 1 s for `timeAdded`'s whole seconds; the
    // taint landed at 10 s, web-1 tolerates 6 s.
    let mut log = Log::new();
    log.taints(10.0, A, "z1-n001", &["unreachable"]);
    log.delete_pod(14.6, "default/web-1");
    assert_eq!(log.rules(), Vec::<&str>::new());
    let mut log = Log::new();
    log.taints(10.0, A, "z1-n001", &["unreachable"]);
    log.delete_pod(14.4, "default/web-1");
    assert_eq!(log.rules(), ["eviction-before-toleration"]);
}

#[test]
fn deleting_a_pod_that_tolerates_forever_or_one_on_an_untainted_node_is_a_violation() {
    let mut log = Log::new();
    log.delete_pod(5.0, "default/web-0");
    log.taints(10.0, A, "z1-n001", &["unreachable"]);
    log.delete_pod(30.0, "kube-system/node-agent-z1-n001");
    assert_eq!(
        log.rules(),
        ["eviction-before-toleration", "eviction-before-toleration"]
    );
    assert!(log.violations()[0].detail.contains("no NoExecute taint"));
    assert!(log.violations()[1].detail.contains("forever"));
}

#[test]
fn two_daemons_writing_in_the_same_instant_is_a_violation_a_handover_is_not() {
    let mut log = Log::new();
    log.unknown(10.0, A, "z1-n001");
    log.unknown(11.5, B, "z1-n002"); // a handover 1.5 s later: fine
    assert_eq!(log.rules(), Vec::<&str>::new());
    log.unknown(11.6, A, "z1-n003"); // back to A 100 ms later: both acting
    assert_eq!(log.rules(), ["two-writers"]);
}

#[test]
fn a_node_dead_long_enough_but_never_tainted_is_a_liveness_violation() {
    let mut log = Log::new();
    log.checker.kubelet("z1-n001", false, at(1.0));
    log.checker.kubelet("z2-n001", false, at(1.0));
    log.unknown(6.5, A, "z1-n001");
    log.unknown(6.5, A, "z2-n001");
    log.taints(7.0, A, "z2-n001", &["unreachable"]);
    log.checker.check_liveness(at(10.0));
    assert_eq!(log.rules(), Vec::<&str>::new(), "not due yet");
    // Due at 1 + 5 (grace) + 1 (rate interval) + 10 (allowance) = 17 s.
    log.checker.check_liveness(at(16.0));
    assert_eq!(log.rules(), Vec::<&str>::new(), "not due yet");
    log.checker.check_liveness(at(18.0));
    assert_eq!(log.rules(), ["dead-node-not-tainted"]);
    assert!(log.violations()[0].detail.contains("z1-n001"));
    assert_eq!(log.checker.obligations.dead_nodes_tainted, 1);
    log.checker.check_liveness(at(60.0));
    assert_eq!(log.rules().len(), 1, "each obligation judged once");
}

#[test]
fn a_dead_node_in_a_partially_disrupted_zone_owes_no_taint() {
    let mut log = Log::new();
    for n in 1..=5 {
        log.checker.kubelet(&format!("z1-n00{n}"), false, at(1.0));
        log.unknown(6.5, A, &format!("z1-n00{n}"));
    }
    log.checker.check_liveness(at(120.0));
    assert_eq!(log.rules(), Vec::<&str>::new());
}

#[test]
fn a_pod_left_running_after_its_toleration_is_a_liveness_violation() {
    let mut log = Log::new();
    log.checker.kubelet("z1-n001", false, at(1.0));
    log.unknown(6.5, A, "z1-n001");
    log.taints(7.0, A, "z1-n001", &["unreachable"]);
    log.delete_pod(7.2, "default/web-0");
    // web-1 tolerates 6 s: due at 7 + 6 + 10 = 23 s (the dead node's taint at 17 s is met).
    // (decision-late, judged from 14.7 s on, is the tighter rule: never less safe than upstream.)
    log.checker.check_liveness(at(22.0));
    assert_eq!(log.rules(), ["decision-late"]);
    log.checker.check_liveness(at(24.0));
    assert_eq!(log.rules(), ["decision-late", "pod-not-evicted"]);
    assert!(log.violations()[1].detail.contains("web-1"));
    assert_eq!(log.checker.obligations.pods_evicted, 1);
}

#[test]
fn a_recovered_node_still_unknown_or_tainted_is_a_liveness_violation() {
    let mut log = Log::new();
    log.checker.kubelet("z1-n001", false, at(1.0));
    log.checker.kubelet("z1-n002", false, at(1.0));
    for node in ["z1-n001", "z1-n002"] {
        log.unknown(6.5, A, node);
        log.taints(7.0, A, node, &["unreachable"]);
    }
    log.delete_pod(7.2, "default/web-0");
    log.checker.kubelet("z1-n001", true, at(10.0));
    log.checker.kubelet("z1-n002", true, at(10.0));
    // z1-n002's kubelet posts Ready=True and the daemon removes the taint; z1-n001 stays.
    log.write(
        10.5,
        Identity::direct(KUBELET),
        Verb::Update,
        Resource::Nodes,
        None,
        None,
        "z1-n002",
        "status.conditions[Ready].status: \"Unknown\" -> \"True\"".into(),
    );
    log.taints(11.0, A, "z1-n002", &[]);
    // Due at 10 + 1 (status interval) + 10 = 21 s. (web-1, 6 s, on the still tainted
    // z1-n001 is late from 14.7 s on: decision-late.)
    log.checker.check_liveness(at(20.0));
    assert_eq!(log.rules(), ["decision-late"]);
    log.checker.check_liveness(at(22.0));
    assert_eq!(log.rules(), ["decision-late", "recovered-node-tainted"]);
    assert!(log.violations()[1].detail.contains("z1-n001"));
    assert_eq!(log.checker.obligations.recovered_untainted, 1);
}

#[test]
fn quiet_periods_push_liveness_deadlines_back() {
    let mut log = Log::new();
    log.checker.kubelet("z1-n001", false, at(1.0));
    log.checker.quiet_until(at(30.0));
    // Due at 30 + 1 (rate interval) + 10 = 41 s.
    log.checker.check_liveness(at(40.0));
    assert_eq!(log.rules(), Vec::<&str>::new());
    log.checker.check_liveness(at(42.0));
    assert_eq!(log.rules(), ["dead-node-not-tainted"]);
}

#[test]
fn resident_memory_over_the_limit_or_growing_is_a_violation() {
    let mut log = Log::new();
    let mib = 1024;
    log.checker.rss("daemon-a", 10, 12 * mib, at(0.0));
    log.checker.rss("daemon-a", 10, 13 * mib, at(60.0));
    log.checker.rss("daemon-b", 11, 12 * mib, at(0.0));
    log.checker.rss("daemon-b", 11, 12 * mib, at(60.0));
    log.checker.rss("daemon-b", 11, 13 * mib, at(600.0));
    assert_eq!(log.rules(), Vec::<&str>::new());
    log.checker.rss("daemon-a", 10, 60 * mib, at(600.0));
    log.checker.finish(at(600.0));
    assert_eq!(log.rules(), ["rss"]);
    assert!(log.violations()[0].detail.contains("daemon-a"));
    log.checker.rss("daemon-b", 11, 200 * mib, at(601.0));
    assert_eq!(log.rules(), ["rss", "rss"]);
}

#[test]
fn records_the_log_dropped_before_they_were_read_are_reported() {
    let mut log = Log::new();
    log.renewals("z1-n001", 1.0, 1.0);
    log.seq += 5;
    log.renewals("z1-n001", 2.0, 2.0);
    log.checker.finish(at(3.0));
    assert_eq!(log.rules(), ["write-log"]);
}

// The zone rules as upstream's batched pass would judge them, taints taken off dead nodes, and
// decisions later than a reconnect allows.

/// The kubelets of `nodes` renew every second until `last` (their last heartbeat) and are
/// silent from `last + 0.5` on (ground truth).
fn die(log: &mut Log, nodes: &[String], last: f64) {
    for node in nodes {
        log.renewals(node, last, last);
        log.checker.kubelet(node, false, at(last + 0.5));
    }
}

/// `node`'s kubelet posts Ready=True.
pub(super) fn ready_post(log: &mut Log, t: f64, node: &str) {
    log.write(
        t,
        Identity::direct(KUBELET),
        Verb::Update,
        Resource::Nodes,
        None,
        None,
        node,
        "status.conditions[Ready].status: \"Unknown\" -> \"True\"".into(),
    );
}

fn zone(z: u32, range: std::ops::RangeInclusive<u32>) -> Vec<String> {
    range.map(|n| format!("z{z}-n{n:03}")).collect()
}

#[test]
fn the_first_taint_of_a_zone_whose_nodes_die_together_is_a_violation_in_the_batched_view() {
    // Six of z1's eight kubelets go silent at 10 s; z1-n001 beat last at 9.0, the other five
    // at 9.5. The daemon declares z1-n001 Unknown at its deadline (14.0) and taints it at
    // once: the store shows one node of eight not ready (a Normal zone), but the other five
    // have been silent for 4.6 s (more than 2 s: early suspects, + 1 s of allowance).
    let mut log = Log::new();
    die(&mut log, &zone(1, 1..=1), 9.0);
    die(&mut log, &zone(1, 2..=6), 9.5);
    log.unknown(14.0, A, "z1-n001");
    log.taints(14.1, A, "z1-n001", &["unreachable"]);
    assert_eq!(
        log.rules(),
        ["taint-forbidden-by-zone"],
        "{:?}",
        log.violations()
    );
    let detail = &log.violations()[0].detail;
    assert!(detail.contains("partially disrupted"), "{detail}");
    assert!(detail.contains("6 of 8 nodes not ready"), "{detail}");
    assert!(
        detail.contains("5 of them only by their kubelet's silence"),
        "{detail}"
    );
}

#[test]
fn the_first_taint_of_a_single_dead_node_or_of_a_zone_dying_slowly_is_fine() {
    // Only z1-n001 silent.
    let mut log = Log::new();
    die(&mut log, &zone(1, 1..=1), 9.0);
    log.unknown(14.0, A, "z1-n001");
    log.taints(14.1, A, "z1-n001", &["unreachable"]);
    assert_eq!(log.rules(), Vec::<&str>::new());
    // The five others went silent 2.6 s before the taint: past the early rule's 2 s but
    // within its allowance, so the daemon may not have counted them yet.
    let mut log = Log::new();
    die(&mut log, &zone(1, 1..=1), 9.0);
    die(&mut log, &zone(1, 2..=6), 11.5);
    log.unknown(14.0, A, "z1-n001");
    log.taints(14.1, A, "z1-n001", &["unreachable"]);
    assert_eq!(log.rules(), Vec::<&str>::new(), "{:?}", log.violations());
}

#[test]
fn without_early_suspects_only_nodes_whose_grace_ends_within_a_period_count() {
    let mut log = Log::new();
    log.checker.limits.early_suspects = None;
    // Silent 4.6 s at the taint: upstream's batch (grace 5 s, period 1 s) would not have seen
    // them Unknown yet with the 1 s allowance.
    die(&mut log, &zone(1, 1..=1), 9.0);
    die(&mut log, &zone(1, 2..=6), 9.5);
    log.unknown(14.0, A, "z1-n001");
    log.taints(14.1, A, "z1-n001", &["unreachable"]);
    assert_eq!(log.rules(), Vec::<&str>::new(), "{:?}", log.violations());
    // Silent 6.1 s and still Ready in the store (the daemon has not declared them): the
    // batch that saw z1-n001 Unknown saw them too.
    let mut log = Log::new();
    log.checker.limits.early_suspects = None;
    die(&mut log, &zone(1, 2..=6), 8.0);
    die(&mut log, &zone(1, 1..=1), 9.0);
    log.unknown(14.0, A, "z1-n001");
    log.taints(14.1, A, "z1-n001", &["unreachable"]);
    assert_eq!(
        log.rules(),
        ["taint-forbidden-by-zone"],
        "{:?}",
        log.violations()
    );
    assert!(
        log.violations()[0]
            .detail
            .contains("upstream's batched view")
    );
}

#[test]
fn the_first_taint_while_every_kubelet_is_silent_is_a_violation_unless_one_zone_is_up() {
    let mut log = Log::new();
    let mut all = nodes();
    all.retain(|n| n != "z2-n001");
    die(&mut log, &zone(2, 1..=1), 9.0);
    die(&mut log, &all, 9.5);
    log.unknown(14.0, A, "z2-n001");
    log.taints(14.1, A, "z2-n001", &["unreachable"]);
    assert_eq!(
        log.rules(),
        ["taint-forbidden-by-zone"],
        "{:?}",
        log.violations()
    );
    assert!(log.violations()[0].detail.contains("every zone"));
    // z3-n008 alive: z2 is fully disrupted alone (normal rate), z3 partially.
    let mut log = Log::new();
    all.retain(|n| n != "z3-n008");
    die(&mut log, &zone(2, 1..=1), 9.0);
    die(&mut log, &all, 9.5);
    log.renewals("z3-n008", 10.0, 14.0);
    log.unknown(14.0, A, "z2-n001");
    log.taints(14.1, A, "z2-n001", &["unreachable"]);
    assert_eq!(log.rules(), Vec::<&str>::new(), "{:?}", log.violations());
}

#[test]
fn a_whole_zone_dying_is_tainted_even_when_a_silence_is_too_short_to_tell() {
    // z3 all silent; z3-n008 only since 11.2 (2.9 s at the taint: counted either way). Seen
    // not ready it makes z3 fully disrupted (tainted at the normal rate), seen Ready
    // partially: one view allows the taint.
    let mut log = Log::new();
    die(&mut log, &zone(3, 1..=1), 9.0);
    die(&mut log, &zone(3, 2..=7), 9.5);
    die(&mut log, &zone(3, 8..=8), 11.2);
    log.unknown(14.0, A, "z3-n001");
    log.taints(14.1, A, "z3-n001", &["unreachable"]);
    assert_eq!(log.rules(), Vec::<&str>::new(), "{:?}", log.violations());
}

#[test]
fn taking_the_taint_off_a_node_whose_kubelet_is_dead_is_a_violation() {
    let mut log = Log::new();
    die(&mut log, &zone(1, 1..=1), 0.5);
    log.unknown(6.5, A, "z1-n001");
    log.taints(7.0, A, "z1-n001", &["unreachable"]);
    // A new leader registers the node and takes its taint off (upstream's
    // markNodeAsReachable), to put it back half a second later.
    log.taints(20.0, B, "z1-n001", &[]);
    log.taints(20.5, B, "z1-n001", &["unreachable"]);
    assert_eq!(
        log.rules(),
        ["untaint-while-dead"],
        "{:?}",
        log.violations()
    );
    let detail = &log.violations()[0].detail;
    assert!(
        detail.contains("z1-n001") && detail.contains("daemon-b"),
        "{detail}"
    );
}

#[test]
fn taking_the_taint_off_a_recovered_node_a_swap_or_in_master_disruption_mode_is_fine() {
    // Recovered: the kubelet beats again and posts Ready=True.
    let mut log = Log::new();
    die(&mut log, &zone(1, 1..=1), 0.5);
    log.unknown(6.5, A, "z1-n001");
    log.taints(7.0, A, "z1-n001", &["unreachable"]);
    log.checker.kubelet("z1-n001", true, at(19.0));
    log.renewals("z1-n001", 19.0, 19.0);
    log.taints(19.5, A, "z1-n001", &[]);
    // A swap keeps a NoExecute taint on.
    die(&mut log, &zone(1, 2..=2), 0.5);
    log.unknown(6.5, A, "z1-n002");
    log.taints(7.0, A, "z1-n002", &["unreachable"]);
    log.taints(21.0, A, "z1-n002", &["not-ready"]);
    // Silent, but only for 3 s (a flap after a recovery the daemon saw).
    die(&mut log, &zone(2, 1..=1), 0.5);
    log.unknown(6.5, A, "z2-n001");
    log.taints(7.0, A, "z2-n001", &["unreachable"]);
    log.renewals("z2-n001", 18.0, 18.0);
    log.taints(21.0, A, "z2-n001", &[]);
    assert_eq!(log.rules(), Vec::<&str>::new(), "{:?}", log.violations());
    // Master disruption mode: every node Unknown, every taint comes off.
    let mut log = Log::new();
    die(&mut log, &zone(1, 1..=1), 0.5);
    log.unknown(6.5, A, "z1-n001");
    log.taints(7.0, A, "z1-n001", &["unreachable"]);
    let others: Vec<String> = nodes().into_iter().skip(1).collect();
    die(&mut log, &others, 10.0);
    for node in &others {
        log.unknown(15.0, A, node);
    }
    log.taints(15.5, A, "z1-n001", &[]);
    assert_eq!(log.rules(), Vec::<&str>::new(), "{:?}", log.violations());
}

#[test]
fn a_pod_deleted_later_than_a_reconnect_allows_is_a_decision_late_violation() {
    // web-0 tolerates 0 s: due when the taint lands (7.0); allowed 1.2 s of reconnect (1 s of
    // watch backoff + a round trip) + 0.5 s of slack.
    let mut log = Log::new();
    die(&mut log, &zone(1, 1..=1), 0.5);
    log.unknown(6.5, A, "z1-n001");
    log.taints(7.0, A, "z1-n001", &["unreachable"]);
    log.delete_pod(8.6, "default/web-0");
    assert_eq!(log.rules(), Vec::<&str>::new());
    assert_eq!(log.checker.obligations.decisions_on_time, 1);
    let mut log = Log::new();
    die(&mut log, &zone(1, 1..=1), 0.5);
    log.unknown(6.5, A, "z1-n001");
    log.taints(7.0, A, "z1-n001", &["unreachable"]);
    log.delete_pod(8.8, "default/web-0");
    assert_eq!(log.rules(), ["decision-late"], "{:?}", log.violations());
    assert!(log.violations()[0].detail.contains("web-0"));
}

#[test]
fn a_connection_reset_pushes_the_decision_deadline_back_by_a_reconnect_only() {
    // A watch drop at 8.0: the daemon may be back by 9.2, and deletes by 8.0 + 1.7 = 9.7.
    let mut log = Log::new();
    die(&mut log, &zone(1, 1..=1), 0.5);
    log.unknown(6.5, A, "z1-n001");
    log.taints(7.0, A, "z1-n001", &["unreachable"]);
    log.checker
        .fault(FaultClass::Reset, "watch-drop", at(8.0), at(8.0));
    log.delete_pod(9.6, "default/web-0");
    assert_eq!(log.rules(), Vec::<&str>::new(), "{:?}", log.violations());
    let mut log = Log::new();
    die(&mut log, &zone(1, 1..=1), 0.5);
    log.unknown(6.5, A, "z1-n001");
    log.taints(7.0, A, "z1-n001", &["unreachable"]);
    log.checker
        .fault(FaultClass::Reset, "watch-drop", at(8.0), at(8.0));
    // 1.5 s after the reconnect: the first line of a new pod watch + a 0.5 s settle.
    log.delete_pod(10.7, "default/web-0");
    assert_eq!(log.rules(), ["decision-late"], "{:?}", log.violations());
    assert!(
        log.violations()[0]
            .detail
            .contains("watch-drop at due+1.0s"),
        "{:?}",
        log.violations()
    );
    // An API restart from 7.5 to 9.0: counted from when connections are accepted again.
    let mut log = Log::new();
    die(&mut log, &zone(1, 1..=1), 0.5);
    log.unknown(6.5, A, "z1-n001");
    log.taints(7.0, A, "z1-n001", &["unreachable"]);
    log.checker
        .fault(FaultClass::Reset, "api-restart", at(7.5), at(9.0));
    log.delete_pod(10.6, "default/web-0");
    assert_eq!(log.rules(), Vec::<&str>::new(), "{:?}", log.violations());
}

#[test]
fn a_fault_that_stops_the_daemons_excuses_the_decision_and_a_pod_left_running_is_late() {
    // A watch stall (blocking) between the taint and the deadline: not judged.
    let mut log = Log::new();
    die(&mut log, &zone(1, 1..=1), 0.5);
    log.unknown(6.5, A, "z1-n001");
    log.taints(7.0, A, "z1-n001", &["unreachable"]);
    log.checker
        .fault(FaultClass::Blocking, "watch-stall", at(7.5), at(10.0));
    log.delete_pod(12.0, "default/web-0");
    assert_eq!(log.rules(), Vec::<&str>::new(), "{:?}", log.violations());
    assert_eq!(log.checker.obligations.decisions_excused, 1);
    // web-1 (6 s, due 13.0) never deleted: late at 14.7, long before pod-not-evicted (23 s).
    let mut log = Log::new();
    die(&mut log, &zone(1, 1..=1), 0.5);
    log.unknown(6.5, A, "z1-n001");
    log.taints(7.0, A, "z1-n001", &["unreachable"]);
    log.delete_pod(7.2, "default/web-0");
    log.checker.check_liveness(at(14.5));
    assert_eq!(log.rules(), Vec::<&str>::new(), "{:?}", log.violations());
    log.checker.check_liveness(at(15.0));
    assert_eq!(log.rules(), ["decision-late"], "{:?}", log.violations());
    assert!(
        log.violations()[0]
            .detail
            .contains("web-1 on z1-n001 still there")
    );
    log.checker.check_liveness(at(17.0));
    assert_eq!(log.rules().len(), 1, "judged once");
}

#[test]
fn a_pod_whose_taint_came_off_before_it_was_due_owes_no_decision() {
    // web-1 (6 s) on z1-n001: the kubelet is back and the taint off at 10 s, before 13 s.
    let mut log = Log::new();
    die(&mut log, &zone(1, 1..=1), 0.5);
    log.unknown(6.5, A, "z1-n001");
    log.taints(7.0, A, "z1-n001", &["unreachable"]);
    log.delete_pod(7.2, "default/web-0");
    log.checker.kubelet("z1-n001", true, at(9.5));
    ready_post(&mut log, 9.5, "z1-n001");
    log.taints(10.0, A, "z1-n001", &[]);
    log.checker.check_liveness(at(30.0));
    assert_eq!(log.rules(), Vec::<&str>::new(), "{:?}", log.violations());
    // Taken off after it was due (and the zone allowance): the pod should have gone first.
    let mut log = Log::new();
    die(&mut log, &zone(1, 1..=1), 0.5);
    log.unknown(6.5, A, "z1-n001");
    log.taints(7.0, A, "z1-n001", &["unreachable"]);
    log.delete_pod(7.2, "default/web-0");
    log.checker.kubelet("z1-n001", true, at(15.5));
    ready_post(&mut log, 15.5, "z1-n001");
    log.taints(16.0, A, "z1-n001", &[]);
    log.checker.check_liveness(at(17.0));
    assert_eq!(log.rules(), ["decision-late"], "{:?}", log.violations());
}
