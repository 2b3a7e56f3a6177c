//! Escalation and power-cycle with the virtual clock: every step, timeouts, a restart at each step,
//! recovery in the middle.

use super::*;
use crate::Decision;
use crate::model::PodKey;
use crate::tests::harness::pod;

fn stepped(steps: usize) -> FencingPolicy {
    FencingPolicy { steps, ..policy() }
}

fn cycling() -> FencingPolicy {
    FencingPolicy {
        power_cycle: true,
        recover_timeout: secs(300),
        ..policy()
    }
}

fn lines(api: &mut Api) -> Vec<String> {
    api.ctl
        .take_decisions()
        .into_iter()
        .filter_map(|d| match d {
            Decision::Fencing { detail, .. } => Some(detail),
            _ => None,
        })
        .collect()
}

fn steps_of(api: &Api, name: &str) -> Vec<FenceStep> {
    api.ran()
        .iter()
        .filter(|(_, n, _)| &**n == name)
        .map(|(_, _, s)| *s)
        .collect()
}

fn kill_n1(api: &mut Api) -> Time {
    api.alive.remove(&n("n1"));
    api.run_until(t0() + secs(120));
    api.unknown_since("n1")
}

/// A new process, same cluster (nodes, Leases, annotations), nothing in memory.
fn restart(api: &mut Api, p: FencingPolicy, at: Time) {
    let mut settings = test_settings();
    settings.fencing = Some(p);
    api.ctl = Controllers::new(settings, at);
    api.now = at;
    api.running.clear();
    for name in ["n1", "n2", "n3"] {
        let renew = if api.alive.contains(&n(name)) {
            at
        } else {
            t0()
        };
        api.put_lease(lease(name, renew));
        let node = api.nodes[&n(name)].clone();
        api.feed(Input::NodeUpsert(node));
    }
    api.feed(Input::InitialSyncDone);
}

fn state(api: &Api) -> Option<String> {
    api.annotations
        .get(&n("n1"))
        .and_then(|a| a.get(STATE_ANNOTATION))
        .cloned()
}

#[test]
fn a_failed_or_timed_out_step_escalates_to_the_next_at_once() {
    let mut api = Api::fencing(stepped(3), t0(), &["n1", "n2", "n3"]);
    let since = kill_n1(&mut api);
    api.run_until(since + secs(301));
    assert_eq!(steps_of(&api, "n1"), [FenceStep::Off(0)]);
    api.exit("n1", FenceOutcome::Exited(1));
    // Recorded before it runs, then run: no backoff between steps.
    assert_eq!(steps_of(&api, "n1"), [FenceStep::Off(0), FenceStep::Off(1)]);
    let record = &api.annotations[&n("n1")][ATTEMPT_ANNOTATION];
    assert!(record.ends_with(",step=1"), "{record}");
    api.exit("n1", FenceOutcome::TimedOut);
    assert_eq!(api.ran().last().unwrap().2, FenceStep::Off(2));
    assert_eq!(api.ran().last().unwrap().0, api.now, "escalation waited");
    api.exit("n1", FenceOutcome::Exited(0));
    assert!(api.out_of_service("n1"));
    assert_eq!(
        api.reasons(),
        [
            "FencingNode",
            "FencingEscalated",
            "FencingNode",
            "FencingEscalated",
            "FencingNode",
            "NodeFenced"
        ]
    );
    let log = lines(&mut api);
    assert!(
        log.iter().any(|l| l.contains("decision=escalate node=n1")
            && l.contains("failed_step=2/3 result=timeout next_step=3/3")),
        "{log:?}"
    );
}

#[test]
fn when_every_step_fails_the_attempt_backs_off_and_starts_again_at_the_first() {
    let mut api = Api::fencing(stepped(2), t0(), &["n1", "n2", "n3"]);
    let since = kill_n1(&mut api);
    api.run_until(since + secs(301));
    api.exit("n1", FenceOutcome::Exited(1));
    api.exit("n1", FenceOutcome::SpawnFailed("gone".into()));
    assert!(!api.out_of_service("n1"));
    let failed_at = api.now;
    api.run_until(failed_at + secs(59));
    assert_eq!(api.ran().len(), 2, "retried before the backoff");
    api.run_until(failed_at + secs(70));
    assert_eq!(
        steps_of(&api, "n1"),
        [FenceStep::Off(0), FenceStep::Off(1), FenceStep::Off(0)]
    );
}

/// A restart while step 2 ran: a fresh verdict (one more `after`), then step 2 again, not 1.
#[test]
fn a_restart_during_a_later_step_picks_up_at_that_step() {
    let mut api = Api::fencing(stepped(3), t0(), &["n1", "n2", "n3"]);
    let since = kill_n1(&mut api);
    api.run_until(since + secs(301));
    api.exit("n1", FenceOutcome::Exited(1));
    assert_eq!(api.ran().len(), 2);
    let at = since + secs(320);
    restart(&mut api, stepped(3), at);
    api.run_until(at + secs(299));
    assert_eq!(api.ran().len(), 2, "ran without a fresh verdict");
    api.run_until(at + secs(320));
    assert_eq!(api.ran().last().unwrap().2, FenceStep::Off(1));
}

/// The whole cycle: off, taint, pods gone, on (recorded before and after), Ready, taint off.
#[test]
fn power_cycle_goes_off_taint_pods_gone_on_ready_untaint() {
    let mut api = Api::fencing(cycling(), t0(), &["n1", "n2", "n3"]);
    api.put_pod(pod("db-0", "n1"));
    let since = kill_n1(&mut api);
    api.run_until(since + secs(301));
    api.exit("n1", FenceOutcome::Exited(0));
    assert!(api.out_of_service("n1"));
    // The pod is still bound: no power-on.
    api.run_until(since + secs(400));
    assert_eq!(steps_of(&api, "n1"), [FenceStep::Off(0)]);
    api.delete_pod(&PodKey {
        namespace: n("default"),
        name: n("db-0"),
    });
    api.run_until(since + secs(406));
    assert_eq!(steps_of(&api, "n1"), [FenceStep::Off(0), FenceStep::On]);
    let started = state(&api).expect("no state record before the power-on");
    assert!(started.contains(",on=started,"), "{started}");
    api.exit("n1", FenceOutcome::Exited(0));
    assert!(state(&api).unwrap().contains(",on=done,"));
    // It boots: Ready again, the taint and every record go.
    api.alive.insert(n("n1"));
    api.run_until(since + secs(460));
    assert!(!api.out_of_service("n1"));
    assert!(
        api.annotations[&n("n1")].is_empty(),
        "{:?}",
        api.annotations
    );
    assert_eq!(
        api.reasons(),
        ["FencingNode", "NodeFenced", "FencedNodeRecovered"]
    );
    assert!(
        api.reasons_and_messages()
            .iter()
            .any(|(r, _)| *r == "PoweringOnNode")
    );
    let log = lines(&mut api);
    assert!(
        log.iter().any(|l| l.contains("decision=power-on node=n1")),
        "{log:?}"
    );
    assert_eq!(api.ran().len(), 2);
}

#[test]
fn a_node_not_ready_within_recover_timeout_keeps_its_taint_and_is_reported() {
    let mut api = Api::fencing(cycling(), t0(), &["n1", "n2", "n3"]);
    let since = kill_n1(&mut api);
    api.run_until(since + secs(301));
    api.exit("n1", FenceOutcome::Exited(0));
    api.run_until(since + secs(310));
    assert_eq!(steps_of(&api, "n1"), [FenceStep::Off(0), FenceStep::On]);
    let on = api.now;
    api.exit("n1", FenceOutcome::Exited(0));
    api.run_until(on + secs(299));
    assert!(
        !api.reasons_and_messages()
            .iter()
            .any(|(r, _)| *r == "FencedNodeNotRecovered")
    );
    api.run_until(on + secs(301));
    assert!(
        api.reasons_and_messages()
            .iter()
            .any(|(r, _)| *r == "FencedNodeNotRecovered")
    );
    assert!(api.out_of_service("n1"));
    api.run_until(on + secs(7200));
    assert_eq!(api.ran().len(), 2, "powered on or off again");
}

#[test]
fn a_failed_power_on_is_retried_after_the_backoff() {
    let mut api = Api::fencing(cycling(), t0(), &["n1", "n2", "n3"]);
    let since = kill_n1(&mut api);
    api.run_until(since + secs(301));
    api.exit("n1", FenceOutcome::Exited(0));
    api.run_until(since + secs(310));
    let first = api.now;
    api.exit("n1", FenceOutcome::TimedOut);
    api.run_until(first + secs(55));
    assert_eq!(api.ran().len(), 2);
    api.run_until(first + secs(70));
    assert_eq!(
        steps_of(&api, "n1"),
        [FenceStep::Off(0), FenceStep::On, FenceStep::On]
    );
    assert!(
        api.reasons_and_messages()
            .iter()
            .any(|(r, _)| *r == "PowerOnFailed")
    );
}

/// Someone powered it on while its pods drained: released at once, never powered on by us.
#[test]
fn a_node_back_in_the_middle_of_the_cycle_is_released_without_a_power_on() {
    let mut api = Api::fencing(cycling(), t0(), &["n1", "n2", "n3"]);
    api.put_pod(pod("db-0", "n1"));
    let since = kill_n1(&mut api);
    api.run_until(since + secs(301));
    api.exit("n1", FenceOutcome::Exited(0));
    api.alive.insert(n("n1"));
    api.run_until(since + secs(360));
    assert!(!api.out_of_service("n1"));
    assert_eq!(steps_of(&api, "n1"), [FenceStep::Off(0)]);
    let log = lines(&mut api);
    assert!(
        log.iter().any(|l| l.contains("decision=recovered node=n1")),
        "{log:?}"
    );
}

/// Restarts after the power-off succeeded: the power-off is never repeated; the power-on runs
/// (waiting for pods, or after `on=started`), or Ready is awaited (after `on=done`).
#[test]
fn a_restart_at_each_power_cycle_step_goes_on_from_the_recorded_step() {
    // After the taint, before the power-on.
    let mut api = Api::fencing(cycling(), t0(), &["n1", "n2", "n3"]);
    api.put_pod(pod("db-0", "n1"));
    let since = kill_n1(&mut api);
    api.run_until(since + secs(301));
    api.exit("n1", FenceOutcome::Exited(0));
    let at = since + secs(330);
    restart(&mut api, cycling(), at);
    api.put_pod(pod("db-0", "n1"));
    api.run_until(at + secs(30));
    assert_eq!(
        steps_of(&api, "n1"),
        [FenceStep::Off(0)],
        "powered off twice"
    );
    api.delete_pod(&PodKey {
        namespace: n("default"),
        name: n("db-0"),
    });
    api.run_until(at + secs(40));
    assert_eq!(steps_of(&api, "n1"), [FenceStep::Off(0), FenceStep::On]);
    let log = lines(&mut api);
    assert!(
        log.iter()
            .any(|l| l.contains("decision=resume node=n1") && l.contains("at_step=wait-pods")),
        "{log:?}"
    );

    // While the power-on ran (on=started): it runs again, the power-off does not.
    let at = api.now + secs(5);
    restart(&mut api, cycling(), at);
    api.run_until(at + secs(10));
    assert_eq!(
        steps_of(&api, "n1"),
        [FenceStep::Off(0), FenceStep::On, FenceStep::On]
    );

    // After the power-on (on=done): Ready is awaited until on + recover_timeout.
    api.exit("n1", FenceOutcome::Exited(0));
    let on_done = api.now;
    let at = on_done + secs(100);
    restart(&mut api, cycling(), at);
    api.run_until(at + secs(10));
    assert_eq!(api.ran().len(), 3, "a command after on=done");
    api.run_until(on_done + secs(301));
    assert!(
        api.reasons_and_messages()
            .iter()
            .any(|(r, _)| *r == "FencedNodeNotRecovered")
    );
    assert_eq!(api.ran().len(), 3);
}

/// An out-of-service taint a person added (no record of ours): never powered on.
#[test]
fn a_node_powered_off_by_someone_else_is_never_powered_on() {
    let mut api = Api::fencing(cycling(), t0(), &["n1", "n2", "n3"]);
    let mut tainted = api.nodes[&n("n1")].clone();
    tainted.taints.push(out_of_service_taint(t0()));
    api.put_node(tainted);
    kill_n1(&mut api);
    api.run_until(t0() + secs(3600));
    assert!(api.ran().is_empty(), "{:?}", api.ran());
    let log = lines(&mut api);
    assert!(
        log.iter().any(|l| l.contains("decision=keep node=n1")),
        "{log:?}"
    );
}
