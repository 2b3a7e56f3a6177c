//! Fencing with the virtual clock: the composed controllers against the one fake API, whose
//! kubelets heartbeat while time runs and whose fence commands each test ends by hand (exit
//! status, timeout, dry-run).

use super::*;
use crate::model::ConditionStatus;
use crate::testing::FakeApi;
use crate::tests::harness::{date, lease, n, node, secs, test_settings};
use crate::{Action, ActionId, Controllers, Input, Settings};

fn policy() -> FencingPolicy {
    FencingPolicy {
        after: secs(300),
        max_concurrent: 1,
        match_labels: Vec::new(),
        retry_backoff: secs(60),
        retry_backoff_max: secs(600),
        remove_out_of_service_on_recovery: true,
        skip_cordoned: true,
        steps: 1,
        power_cycle: false,
        recover_timeout: secs(600),
    }
}

/// Fencing's view of the one fake API (`controller::testing::FakeApi`): its kubelets
/// (`alive`) renew their Leases and post status every 10 s while time runs, it answers the
/// live reads from its own objects (annotations included) and records fence commands, which
/// each test ends by hand (`exit`).
type Api = FakeApi;

impl FakeApi {
    fn fencing(policy: FencingPolicy, t0: Time, names: &[&str]) -> Api {
        Api::fencing_with(test_settings(), policy, t0, names)
    }

    fn fencing_with(
        mut settings: Settings,
        policy: FencingPolicy,
        t0: Time,
        names: &[&str],
    ) -> Api {
        settings.fencing = Some(policy);
        let mut api = FakeApi::new(settings, t0);
        // A fenced node's kubelet is down: its pods stay until a test deletes them.
        api.evictions_remove = false;
        for name in names {
            api.alive.insert(n(name));
            api.put_lease(lease(name, t0));
            let built = node(name)
                .zone("r", "z")
                .label("rack", "a")
                .ready(ConditionStatus::True, t0, t0)
                .build();
            api.put_node(built);
        }
        api.feed(Input::InitialSyncDone);
        api
    }

    /// The fence command running for `name` ends (it took 3 s).
    fn exit(&mut self, name: &str, outcome: FenceOutcome) {
        assert!(
            self.running.iter().any(|(_, node)| &**node == name),
            "a command runs for the node"
        );
        self.exit_fence(name, outcome, secs(3));
    }

    /// (time, id, node) of every fence command started.
    fn commands(&self) -> Vec<(Time, ActionId, Name)> {
        self.log
            .iter()
            .filter_map(|(t, a)| match a {
                Action::RunFenceCommand { id, command } => Some((*t, *id, command.node.clone())),
                _ => None,
            })
            .collect()
    }

    /// (time, node, step) of every command started.
    fn ran(&self) -> Vec<(Time, Name, FenceStep)> {
        self.log
            .iter()
            .filter_map(|(t, a)| match a {
                Action::RunFenceCommand { command, .. } => {
                    Some((*t, command.node.clone(), command.step))
                }
                _ => None,
            })
            .collect()
    }

    /// (reason, message) of every event recorded.
    fn reasons_and_messages(&self) -> Vec<(&'static str, String)> {
        self.events()
            .into_iter()
            .map(|e| (e.reason, e.message))
            .collect()
    }

    fn commands_for(&self, name: &str) -> Vec<Time> {
        self.commands()
            .iter()
            .filter(|(_, _, node)| &**node == name)
            .map(|(t, _, _)| *t)
            .collect()
    }

    fn out_of_service(&self, name: &str) -> bool {
        self.nodes[&n(name)].taints.iter().any(is_out_of_service)
    }

    fn reasons(&self) -> Vec<&'static str> {
        self.events()
            .iter()
            .map(|e| e.reason)
            .filter(|r| r.contains("Fenc"))
            .collect()
    }

    /// When the node went Ready=Unknown for sure: the stored transition is kept to the
    /// second (as the API keeps it), so the latest instant it can stand for, the second after.
    fn unknown_since(&self, name: &str) -> Time {
        let ready = self.nodes[&n(name)].ready().cloned().unwrap();
        assert_eq!(
            ready.status,
            ConditionStatus::Unknown,
            "{name} is not Unknown"
        );
        let t = ready.last_transition_time.unwrap().as_unix_millis();
        Time::from_unix_millis(t / 1000 * 1000 + 1000)
    }
}

fn t0() -> Time {
    date(2026, 3, 1, 8, 0, 0)
}

/// The story of the issue: a node dies, the command runs once after `after`, the out-of-service
/// taint appears with our record; the node is powered back on and the taint goes.
#[test]
fn a_dead_node_is_fenced_once_after_after_then_released_when_it_comes_back() {
    let mut api = Api::fencing(policy(), t0(), &["n1", "n2", "n3"]);
    api.alive.remove(&n("n1"));
    api.run_until(t0() + secs(120));
    let since = api.unknown_since("n1");
    assert!(api.commands().is_empty(), "fenced before `after`");
    api.run_until(since + secs(299));
    assert!(api.commands().is_empty(), "fenced before `after`");
    api.run_until(since + secs(301));
    assert_eq!(api.commands_for("n1"), vec![since + secs(300)]);
    let stored = Time::from_unix_millis(since.as_unix_millis() - 1000);
    let record = api.annotations[&n("n1")][ATTEMPT_ANNOTATION].clone();
    assert!(
        record.starts_with(&format!("outage={}", stored.to_rfc3339())),
        "{record}"
    );
    assert!(
        !api.out_of_service("n1"),
        "tainted before the command ended"
    );

    api.exit("n1", FenceOutcome::Exited(0));
    assert!(api.out_of_service("n1"));
    assert_eq!(
        api.annotations[&n("n1")][TAINT_ADDED_ANNOTATION],
        stored.to_rfc3339()
    );
    assert_eq!(api.reasons(), ["FencingNode", "NodeFenced"]);
    api.run_until(since + secs(3600));
    assert_eq!(api.commands().len(), 1, "fenced twice in one outage");

    // Powered back on: the kubelet reports Ready, our taint and records go.
    api.alive.insert(n("n1"));
    api.run_until(since + secs(3620));
    assert!(!api.out_of_service("n1"));
    assert!(
        api.annotations[&n("n1")].is_empty(),
        "{:?}",
        api.annotations
    );
    assert_eq!(api.commands().len(), 1);
    assert_eq!(
        api.reasons(),
        ["FencingNode", "NodeFenced", "FencedNodeRecovered"]
    );
}

/// A node the node-readiness-controller still gates (`readiness.k8s.io/*` taints) dies and is
/// fenced, then comes back: the out-of-service taint is added beside the readiness taints and
/// removed without them; neither write drops or changes them.
#[test]
fn fencing_a_node_still_bootstrapping_keeps_its_readiness_taints() {
    let mut api = Api::fencing(policy(), t0(), &["n1", "n2", "n3"]);
    let readiness = vec![
        Taint {
            key: n("readiness.k8s.io/NetworkReady"),
            value: n("pending"),
            effect: TaintEffect::NoSchedule,
            time_added: None,
        },
        Taint {
            key: n("readiness.k8s.io/acme.com/storage"),
            value: n("pending"),
            effect: TaintEffect::PreferNoSchedule,
            time_added: None,
        },
    ];
    let mut gated = api.nodes[&n("n1")].clone();
    gated.taints.extend(readiness.iter().cloned());
    api.put_node(gated);
    api.alive.remove(&n("n1"));
    api.run_until(t0() + secs(120));
    let since = api.unknown_since("n1");
    api.run_until(since + secs(301));
    api.exit("n1", FenceOutcome::Exited(0));
    assert!(api.out_of_service("n1"));
    let kept = |api: &Api| -> Vec<Taint> {
        api.nodes[&n("n1")]
            .taints
            .iter()
            .filter(|t| t.key.starts_with("readiness.k8s.io/"))
            .cloned()
            .collect()
    };
    assert_eq!(kept(&api), readiness);
    api.alive.insert(n("n1"));
    api.run_until(since + secs(400));
    assert!(!api.out_of_service("n1"));
    assert_eq!(kept(&api), readiness);
    let lists: Vec<&Vec<Taint>> = api
        .log
        .iter()
        .filter_map(|(_, a)| match a {
            Action::PatchNodeFencing {
                taints: Some(t), ..
            } => Some(t),
            _ => None,
        })
        .collect();
    assert!(lists.len() >= 2, "{lists:#?}");
    for list in lists {
        let theirs: Vec<&Taint> = list
            .iter()
            .filter(|t| t.key.starts_with("readiness.k8s.io/"))
            .collect();
        assert_eq!(theirs, readiness.iter().collect::<Vec<_>>());
    }
}

#[test]
fn an_out_of_service_taint_we_did_not_add_is_never_removed() {
    let mut api = Api::fencing(policy(), t0(), &["n1", "n2", "n3"]);
    let mut tainted = api.nodes[&n("n1")].clone();
    tainted.taints.push(out_of_service_taint(t0()));
    api.put_node(tainted);
    api.run_until(t0() + secs(600));
    assert!(api.out_of_service("n1"), "a person's taint was removed");
    assert!(api.commands().is_empty());
}

/// A kubelet that posts Ready=False is alive: that node is never powered off.
#[test]
fn a_node_reporting_not_ready_is_alive_and_never_fenced() {
    let mut api = Api::fencing(policy(), t0(), &["n1", "n2", "n3"]);
    api.reporting_not_ready.insert(n("n1"));
    api.run_until(t0() + secs(3600));
    assert!(api.commands().is_empty());
}

/// Done when: a control-plane partition (every node silent) fences nobody.
#[test]
fn a_partitioned_control_plane_with_every_node_silent_fences_nobody() {
    let mut api = Api::fencing(policy(), t0(), &["n1", "n2", "n3"]);
    api.alive.clear();
    api.run_until(t0() + secs(3600));
    assert_eq!(
        api.nodes[&n("n1")].ready().map(|c| c.status),
        Some(ConditionStatus::Unknown)
    );
    assert!(api.commands().is_empty(), "{:?}", api.commands());
}

#[test]
fn a_partially_disrupted_zone_is_not_fenced() {
    let mut api = Api::fencing(policy(), t0(), &["n1", "n2", "n3", "n4", "n5"]);
    for name in ["n1", "n2", "n3"] {
        api.alive.remove(&n(name));
    }
    api.run_until(t0() + secs(3600));
    assert!(api.commands().is_empty(), "{:?}", api.commands());
}

/// A live read that finds the Lease renewed (the watch lagged) stops the fence.
#[test]
fn a_lease_renewed_in_the_live_read_stops_the_fence() {
    let mut api = Api::fencing(policy(), t0(), &["n1", "n2", "n3"]);
    api.alive.remove(&n("n1"));
    api.run_until(t0() + secs(120));
    let since = api.unknown_since("n1");
    // The Lease is renewed where only the live read sees it (our cache says stale).
    let now = since + secs(300);
    let before = Time::from_unix_millis(now.as_unix_millis() - 1000);
    api.run_until(before);
    api.put_lease(lease("n1", before));
    // The node lifecycle would take it back; fencing must not wait for that.
    api.run_until(now + secs(1));
    assert!(api.commands().is_empty(), "{:?}", api.commands());
}

#[test]
fn a_failed_live_read_fences_nothing_and_tries_again() {
    let mut api = Api::fencing(policy(), t0(), &["n1", "n2", "n3"]);
    api.alive.remove(&n("n1"));
    api.run_until(t0() + secs(120));
    let since = api.unknown_since("n1");
    api.faults.fence_reads_fail = true;
    api.run_until(since + secs(400));
    assert!(api.commands().is_empty());
    api.faults.fence_reads_fail = false;
    api.run_until(since + secs(410));
    assert_eq!(api.commands().len(), 1);
}

#[test]
fn nodes_outside_match_labels_are_not_fenced() {
    let mut p = policy();
    p.match_labels = vec![("rack".into(), "b".into())];
    let mut api = Api::fencing(p, t0(), &["n1", "n2", "n3"]);
    api.alive.remove(&n("n1"));
    api.run_until(t0() + secs(3600));
    assert!(api.commands().is_empty());

    let mut p = policy();
    p.match_labels = vec![("rack".into(), "a".into())];
    let mut api = Api::fencing(p, t0(), &["n1", "n2", "n3"]);
    api.alive.remove(&n("n1"));
    api.run_until(t0() + secs(3600));
    assert_eq!(api.commands().len(), 1);
}

/// Non-zero exit (and a timeout) → FencingFailed, tried again after 1 m, then 2 m (doubling).
#[test]
fn a_failed_fence_is_retried_with_a_doubling_backoff() {
    let mut api = Api::fencing(policy(), t0(), &["n1", "n2", "n3"]);
    api.alive.remove(&n("n1"));
    api.run_until(t0() + secs(120));
    let since = api.unknown_since("n1");
    let first = since + secs(300);
    api.run_until(first);
    assert_eq!(api.commands_for("n1"), [first]);
    api.exit("n1", FenceOutcome::Exited(1));
    assert!(!api.out_of_service("n1"));
    api.run_until(first + secs(59));
    assert_eq!(api.commands().len(), 1, "retried before the backoff");
    api.run_until(first + secs(61));
    assert_eq!(api.commands_for("n1"), [first, first + secs(60)]);
    api.exit("n1", FenceOutcome::TimedOut);
    api.run_until(first + secs(60 + 119));
    assert_eq!(api.commands().len(), 2, "the second wait is 2 m");
    api.run_until(first + secs(60 + 121));
    assert_eq!(api.commands().len(), 3);
    api.exit("n1", FenceOutcome::Exited(0));
    assert!(api.out_of_service("n1"));
    assert_eq!(
        api.reasons(),
        [
            "FencingNode",
            "FencingFailed",
            "FencingNode",
            "FencingFailed",
            "FencingNode",
            "NodeFenced"
        ]
    );
    let events = api.reasons_and_messages();
    let failed = &events
        .iter()
        .find(|(r, _)| *r == "FencingFailed")
        .unwrap()
        .1;
    assert!(failed.contains("exit status 1"), "{failed}");
}

#[test]
fn max_concurrent_bounds_the_fence_commands_running_at_once() {
    let mut api = Api::fencing(policy(), t0(), &["n1", "n2", "n3", "n4", "n5", "n6"]);
    api.alive.remove(&n("n1"));
    api.alive.remove(&n("n2"));
    api.run_until(t0() + secs(120));
    let since = api.unknown_since("n1").max(api.unknown_since("n2"));
    api.run_until(since + secs(400));
    assert_eq!(
        api.commands().len(),
        1,
        "two at once with max_concurrent = 1"
    );
    let first = api.commands()[0].2.clone();
    api.exit(&first, FenceOutcome::Exited(0));
    assert_eq!(api.commands().len(), 2, "the next waits only for the slot");
    assert_ne!(api.commands()[1].2, first);

    let mut p = policy();
    p.max_concurrent = 2;
    let mut api = Api::fencing(p, t0(), &["n1", "n2", "n3", "n4", "n5", "n6"]);
    api.alive.remove(&n("n1"));
    api.alive.remove(&n("n2"));
    api.run_until(t0() + secs(500));
    assert_eq!(api.commands().len(), 2);
}

/// A restart while the command runs: the new process finds the attempt record for the same
/// outage, waits one more full `after`, checks again, then runs once.
#[test]
fn a_restart_mid_fence_waits_a_full_after_for_a_fresh_verdict() {
    let mut api = Api::fencing(policy(), t0(), &["n1", "n2", "n3"]);
    api.alive.remove(&n("n1"));
    api.run_until(t0() + secs(120));
    let since = api.unknown_since("n1");
    api.run_until(since + secs(310));
    assert_eq!(api.commands().len(), 1);

    // Restart: a new process, same cluster (nodes, Leases, annotations), nothing in memory.
    let restart = since + secs(320);
    let mut settings = test_settings();
    settings.fencing = Some(policy());
    api.ctl = Controllers::new(settings, restart);
    api.now = restart;
    api.running.clear();
    for name in ["n1", "n2", "n3"] {
        let renew = if name == "n1" { t0() } else { restart };
        api.put_lease(lease(name, renew));
        let node = api.nodes[&n(name)].clone();
        api.feed(Input::NodeUpsert(node));
    }
    api.feed(Input::InitialSyncDone);
    api.run_until(restart + secs(299));
    assert_eq!(
        api.commands().len(),
        1,
        "ran again without a fresh verdict: {:?} restart {restart:?}",
        api.commands()
    );
    api.run_until(restart + secs(320));
    assert_eq!(api.commands().len(), 2);
    api.exit("n1", FenceOutcome::Exited(0));
    assert!(api.out_of_service("n1"));
}

#[test]
fn a_node_that_recovers_while_its_command_runs_is_not_tainted() {
    let mut api = Api::fencing(policy(), t0(), &["n1", "n2", "n3"]);
    api.alive.remove(&n("n1"));
    api.run_until(t0() + secs(120));
    let since = api.unknown_since("n1");
    api.run_until(since + secs(301));
    assert_eq!(api.commands().len(), 1);
    api.alive.insert(n("n1"));
    api.run_until(since + secs(320));
    assert_eq!(
        api.nodes[&n("n1")].ready().map(|c| c.status),
        Some(ConditionStatus::True)
    );
    api.exit("n1", FenceOutcome::Exited(0));
    assert!(!api.out_of_service("n1"));
    api.run_until(since + secs(3600));
    assert_eq!(api.commands().len(), 1);
}

/// Dry-run: the shell runs nothing and answers `DryRun`; no taint, no retry in this outage.
#[test]
fn dry_run_adds_no_taint_and_does_not_retry() {
    let mut api = Api::fencing(policy(), t0(), &["n1", "n2", "n3"]);
    api.alive.remove(&n("n1"));
    api.run_until(t0() + secs(120));
    let since = api.unknown_since("n1");
    api.run_until(since + secs(301));
    api.exit("n1", FenceOutcome::DryRun);
    api.run_until(since + secs(3600));
    assert!(!api.out_of_service("n1"));
    assert_eq!(api.commands().len(), 1);
}

#[test]
fn nothing_is_fenced_without_fencing_settings_or_before_the_initial_sync() {
    let t = t0();
    let mut ctl = Controllers::new(test_settings(), t);
    let dead = node("n1").ready(ConditionStatus::Unknown, t, t).build();
    let mut settings = test_settings();
    settings.fencing = Some(policy());
    let mut unsynced = Controllers::new(settings, t);
    for c in [&mut ctl, &mut unsynced] {
        let actions = c.handle(Input::NodeUpsert(dead.clone()), t + secs(3600));
        assert!(actions.is_empty(), "{actions:?}");
    }
    assert!(ctl.fencing().is_none());
}

#[test]
fn backoff_doubles_up_to_its_maximum() {
    let p = policy();
    assert_eq!(p.backoff(1), secs(60));
    assert_eq!(p.backoff(2), secs(120));
    assert_eq!(p.backoff(4), secs(480));
    assert_eq!(p.backoff(5), secs(600));
    assert_eq!(p.backoff(u32::MAX), secs(600));
    assert_eq!(
        attempt_outage(&attempt_record(t0(), t0() + secs(5))),
        Some(t0())
    );
    assert_eq!(attempt_outage("garbage"), None);
}

/// Row "brake vs fencing": two of six nodes dead is more than `max_unhealthy = 1`: nobody is
/// fenced while the brake is engaged, however long; when one comes back the brake releases and
/// the other, dead for longer than `after`, is fenced then.
#[test]
fn brake_vs_fencing_no_fence_while_engaged_then_fenced_after_release() {
    let settings = Settings {
        max_unhealthy: Some(crate::brake::MaxUnhealthy::Count(1)),
        ..test_settings()
    };
    let names = ["n1", "n2", "n3", "n4", "n5", "n6"];
    let mut api = Api::fencing_with(settings, policy(), t0(), &names);
    api.alive.remove(&n("n1"));
    api.alive.remove(&n("n2"));
    api.run_until(t0() + secs(3600));
    assert!(api.commands().is_empty(), "{:?}", api.commands());
    api.alive.insert(n("n2"));
    api.run_until(t0() + secs(3700));
    let fenced = api.commands_for("n1");
    assert_eq!(fenced.len(), 1, "{:?}", api.commands());
    assert!(fenced[0] > t0() + secs(3600), "{fenced:?}");
    assert!(api.commands_for("n2").is_empty());
}
mod cycle;
mod gates;
mod holds;
