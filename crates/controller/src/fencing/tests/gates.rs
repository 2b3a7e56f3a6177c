//! Every fence step passes the gates of the first: an escalation step after a failed
//! or timed-out one, the power-cycle's power-on and a step resumed after a restart are held by
//! a fleet pause, maintenance, a cordon, the zone gate and the brake, and need a live read that
//! finds the Lease stale. A pause of tainting holds the out-of-service taint. A new leader
//! waits `after` from when it started acting. Power-cycle does not wait for pods that tolerate
//! the out-of-service taint forever (DaemonSets). All with the virtual clock.

use super::*;
use crate::Decision;
use crate::fleet_pause::{FleetPause, PauseScope};
use crate::model::{Maintenance, PodKey, Toleration, TolerationOperator};
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

fn before(t: Time, s: u64) -> Time {
    Time::from_unix_millis(t.as_unix_millis() - s * 1000)
}

fn pause(what: PauseScope, until: Time) -> Input {
    Input::FleetPause(Some(FleetPause {
        what,
        until,
        reason: "switch upgrade".into(),
        by: "alice@bastion".into(),
    }))
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

fn kill(api: &mut Api, names: &[&str]) {
    for name in names {
        api.alive.remove(&n(name));
    }
}

/// n1 dies at ~t0+50 s; returns when it went Unknown for sure.
fn kill_n1(api: &mut Api) -> Time {
    kill(api, &["n1"]);
    api.run_until(t0() + secs(120));
    api.unknown_since("n1")
}

/// n1 dead, step 1 of 2 running (started at `since + 300`).
fn step_one_running(api: &mut Api) -> Time {
    let since = kill_n1(api);
    api.run_until(since + secs(301));
    assert_eq!(steps_of(api, "n1"), [FenceStep::Off(0)]);
    since
}

/// The story: an operator pauses fencing while step 1 runs; step 1 times out. Step 2
/// does not power the node off during the pause; it runs when the pause ends (still no backoff:
/// an escalation, not a retry).
#[test]
fn a_pause_of_fencing_during_step_one_holds_step_two_until_it_ends() {
    let mut api = Api::fencing(stepped(2), t0(), &["n1", "n2", "n3"]);
    step_one_running(&mut api);
    let until = api.now + secs(900);
    api.feed(pause(PauseScope::Fencing, until));
    api.exit("n1", FenceOutcome::TimedOut);
    api.run_until(before(until, 1));
    assert_eq!(
        steps_of(&api, "n1"),
        [FenceStep::Off(0)],
        "step 2 ran during the pause"
    );
    let log = lines(&mut api);
    assert!(
        log.iter().any(|l| l.contains("decision=escalate node=n1")),
        "{log:?}"
    );
    assert!(
        log.iter()
            .any(|l| l.contains("decision=wait node=n1") && l.contains("fleet pause of fencing")),
        "{log:?}"
    );
    api.run_until(until + secs(1));
    assert_eq!(steps_of(&api, "n1"), [FenceStep::Off(0), FenceStep::Off(1)]);
    let record = &api.annotations[&n("n1")][ATTEMPT_ANNOTATION];
    assert!(record.ends_with(",step=1"), "{record}");
}

/// A pause of fencing ends while another node's command runs, and that command's exit is the
/// first input after the end (no tick came between): the node the pause held is judged at that
/// input, and the live read it starts is sent with the exit's own actions, not lost (a read
/// never sent would leave the node waiting for an answer that never comes).
#[test]
fn a_fence_answer_that_is_the_first_input_after_a_pause_keeps_the_resumed_work() {
    let mut policy = policy();
    policy.max_concurrent = 2;
    let mut api = Api::fencing(policy, t0(), &["n1", "n2", "n3", "n4", "n5"]);
    kill(&mut api, &["n2"]);
    api.run_until(t0() + secs(120));
    let since = api.unknown_since("n2");
    api.run_until(since + secs(301));
    assert_eq!(steps_of(&api, "n2"), [FenceStep::Off(0)]);
    let until = api.now + secs(900);
    api.feed(pause(PauseScope::Fencing, until));
    kill(&mut api, &["n1"]);
    api.run_until(before(until, 1));
    assert!(
        steps_of(&api, "n1").is_empty(),
        "n1 fenced during the pause"
    );
    // Past the pause's end with no tick on the way: n2's exit is the first input.
    api.now = until + secs(1);
    api.exit("n2", FenceOutcome::Exited(0));
    api.run_until(until + secs(120));
    assert_eq!(
        steps_of(&api, "n1"),
        [FenceStep::Off(0)],
        "the read the pause's end started was lost: {:?}",
        lines(&mut api)
    );
}

/// Planned work that starts while step 1 runs (a maintenance annotation, a cordon) holds step 2
/// until it is over.
#[test]
fn maintenance_or_a_cordon_set_during_step_one_holds_step_two() {
    for cordon in [false, true] {
        let mut api = Api::fencing(stepped(2), t0(), &["n1", "n2", "n3"]);
        step_one_running(&mut api);
        let mut node = api.nodes[&n("n1")].clone();
        if cordon {
            node.unschedulable = true;
        } else {
            node.maintenance = Maintenance::Indefinite;
        }
        api.put_node(node);
        api.exit("n1", FenceOutcome::Exited(1));
        api.run_until(api.now + secs(3600));
        assert_eq!(
            steps_of(&api, "n1"),
            [FenceStep::Off(0)],
            "cordon={cordon}: step 2 ran during planned work"
        );
        let mut node = api.nodes[&n("n1")].clone();
        node.unschedulable = false;
        node.maintenance = Maintenance::None;
        api.put_node(node);
        api.run_until(api.now + secs(10));
        assert_eq!(
            steps_of(&api, "n1"),
            [FenceStep::Off(0), FenceStep::Off(1)],
            "cordon={cordon}"
        );
    }
}

/// Two more nodes of the zone die while step 1 runs: the zone is partially disrupted, and step
/// 2 waits until it is Normal again, as step 1 would have.
#[test]
fn a_zone_disrupted_during_step_one_holds_step_two() {
    let mut api = Api::fencing(stepped(2), t0(), &["n1", "n2", "n3", "n4", "n5"]);
    step_one_running(&mut api);
    kill(&mut api, &["n2", "n3"]);
    api.run_until(api.now + secs(120));
    api.exit("n1", FenceOutcome::TimedOut);
    api.run_until(api.now + secs(600));
    assert_eq!(steps_of(&api, "n1"), [FenceStep::Off(0)], "{:?}", api.ran());
    let log = lines(&mut api);
    assert!(
        log.iter()
            .any(|l| l.contains("decision=wait node=n1") && l.contains("zone state is")),
        "{log:?}"
    );
    api.alive.insert(n("n2"));
    api.alive.insert(n("n3"));
    api.run_until(api.now + secs(60));
    assert_eq!(steps_of(&api, "n1"), [FenceStep::Off(0), FenceStep::Off(1)]);
}

/// The brake engages while step 1 runs (a second node dies, `max_unhealthy = 1`): no step 2
/// while it is engaged.
#[test]
fn a_brake_engaged_during_step_one_holds_step_two() {
    let settings = Settings {
        max_unhealthy: Some(crate::brake::MaxUnhealthy::Count(1)),
        ..test_settings()
    };
    let names = ["n1", "n2", "n3", "n4", "n5", "n6"];
    let mut api = Api::fencing_with(settings, stepped(2), t0(), &names);
    step_one_running(&mut api);
    kill(&mut api, &["n2"]);
    api.run_until(api.now + secs(120));
    api.exit("n1", FenceOutcome::Exited(1));
    api.run_until(api.now + secs(1800));
    assert_eq!(steps_of(&api, "n1"), [FenceStep::Off(0)], "{:?}", api.ran());
    let log = lines(&mut api);
    assert!(
        log.iter()
            .any(|l| l.contains("decision=wait node=n1") && l.contains("the brake is engaged")),
        "{log:?}"
    );
}

/// The node's Lease is renewed while step 1 runs (only the live read sees it yet): step 2 is
/// not run on a node that is alive.
#[test]
fn a_lease_renewed_during_step_one_stops_step_two() {
    let mut api = Api::fencing(stepped(2), t0(), &["n1", "n2", "n3"]);
    step_one_running(&mut api);
    // On the server only: the watch has not delivered it.
    api.leases.insert(n("n1"), lease("n1", api.now));
    api.exit("n1", FenceOutcome::Exited(1));
    assert_eq!(steps_of(&api, "n1"), [FenceStep::Off(0)]);
    let log = lines(&mut api);
    assert!(
        log.iter()
            .any(|l| l.contains("decision=wait node=n1") && l.contains("the node is alive")),
        "{log:?}"
    );
}

/// Power-cycle: the node is off, tainted, its pods gone; a pause of fencing started meanwhile
/// holds the power-on too (a command like any other), until it ends.
#[test]
fn a_pause_of_fencing_holds_the_power_on() {
    let mut api = Api::fencing(cycling(), t0(), &["n1", "n2", "n3"]);
    api.put_pod(pod("db-0", "n1"));
    let since = kill_n1(&mut api);
    api.run_until(since + secs(301));
    api.exit("n1", FenceOutcome::Exited(0));
    assert!(api.out_of_service("n1"));
    let until = api.now + secs(900);
    api.feed(pause(PauseScope::Fencing, until));
    api.delete_pod(&PodKey {
        namespace: n("default"),
        name: n("db-0"),
    });
    api.run_until(before(until, 1));
    assert_eq!(
        steps_of(&api, "n1"),
        [FenceStep::Off(0)],
        "powered on during the pause"
    );
    api.run_until(until + secs(1));
    assert_eq!(steps_of(&api, "n1"), [FenceStep::Off(0), FenceStep::On]);
}

/// Power-cycle: maintenance set on the (off) node, or its Lease renewed where only the live
/// read sees it: no power-on.
#[test]
fn the_power_on_needs_no_maintenance_and_a_stale_lease_read_live() {
    for lease_renewed in [false, true] {
        let mut api = Api::fencing(cycling(), t0(), &["n1", "n2", "n3"]);
        api.put_pod(pod("db-0", "n1"));
        let since = kill_n1(&mut api);
        api.run_until(since + secs(301));
        api.exit("n1", FenceOutcome::Exited(0));
        if lease_renewed {
            api.leases.insert(n("n1"), lease("n1", api.now));
        } else {
            // On the server only: the live read sees it first.
            api.nodes.get_mut(&n("n1")).unwrap().maintenance = Maintenance::Indefinite;
        }
        api.delete_pod(&PodKey {
            namespace: n("default"),
            name: n("db-0"),
        });
        api.run_until(api.now + secs(30));
        assert_eq!(
            steps_of(&api, "n1"),
            [FenceStep::Off(0)],
            "lease_renewed={lease_renewed}: powered on"
        );
    }
}

/// A restart while the node waits for its power-on, during a pause of fencing: the resumed
/// power-on waits for the pause too.
#[test]
fn a_power_on_resumed_after_a_restart_waits_for_the_pause() {
    let mut api = Api::fencing(cycling(), t0(), &["n1", "n2", "n3"]);
    api.put_pod(pod("db-0", "n1"));
    let since = kill_n1(&mut api);
    api.run_until(since + secs(301));
    api.exit("n1", FenceOutcome::Exited(0));
    let at = since + secs(330);
    let until = at + secs(1800);
    let mut settings = test_settings();
    settings.fencing = Some(cycling());
    api.ctl = Controllers::new(settings, at);
    api.now = at;
    api.feed(pause(PauseScope::Fencing, until));
    for name in ["n1", "n2", "n3"] {
        let renew = if name == "n1" { t0() } else { at };
        api.put_lease(lease(name, renew));
        let node = api.nodes[&n(name)].clone();
        api.feed(Input::NodeUpsert(node));
    }
    api.feed(Input::InitialSyncDone);
    api.delete_pod(&PodKey {
        namespace: n("default"),
        name: n("db-0"),
    });
    api.run_until(before(until, 1));
    assert_eq!(
        steps_of(&api, "n1"),
        [FenceStep::Off(0)],
        "powered on during the pause"
    );
    api.run_until(until + secs(1));
    assert_eq!(steps_of(&api, "n1"), [FenceStep::Off(0), FenceStep::On]);
}

/// `pause tainting` holds new NoExecute taints: fencing's out-of-service taint too. The power-off
/// that succeeded is kept; the taint goes on when the pause ends.
#[test]
fn a_pause_of_tainting_holds_the_out_of_service_taint_until_it_ends() {
    for what in [PauseScope::Tainting, PauseScope::All] {
        let mut api = Api::fencing(policy(), t0(), &["n1", "n2", "n3"]);
        let since = kill_n1(&mut api);
        api.run_until(since + secs(301));
        assert_eq!(api.commands().len(), 1);
        let until = api.now + secs(900);
        api.feed(pause(what, until));
        api.exit("n1", FenceOutcome::Exited(0));
        api.run_until(before(until, 1));
        assert!(
            !api.out_of_service("n1"),
            "{what:?}: the out-of-service taint during the pause"
        );
        api.run_until(until + secs(1));
        assert!(
            api.out_of_service("n1"),
            "{what:?}: the held taint was dropped"
        );
        assert_eq!(api.commands().len(), 1, "{what:?}: powered off again");
    }
}

/// A failover while a node is dead but not yet fenced: the new leader has not watched it fail
/// and waits `after` from when it started acting, however old the outage.
#[test]
fn a_new_leader_waits_after_since_it_started_acting_before_fencing() {
    let mut api = Api::fencing(policy(), t0(), &["n1", "n2", "n3"]);
    let since = kill_n1(&mut api);
    api.run_until(since + secs(200));
    assert!(api.commands().is_empty());
    let takeover = since + secs(250);
    let mut settings = test_settings();
    settings.fencing = Some(policy());
    api.ctl = Controllers::new(settings, takeover);
    api.now = takeover;
    for name in ["n1", "n2", "n3"] {
        let renew = if name == "n1" { t0() } else { takeover };
        api.put_lease(lease(name, renew));
        let node = api.nodes[&n(name)].clone();
        api.feed(Input::NodeUpsert(node));
    }
    api.feed(Input::InitialSyncDone);
    api.run_until(before(takeover + secs(300), 1));
    assert!(
        api.commands().is_empty(),
        "fenced {:?} after the takeover at {takeover:?}",
        api.commands()
    );
    let log = lines(&mut api);
    assert!(
        log.iter().any(|l| l.contains("decision=wait node=n1")
            && l.contains("this instance started acting at")),
        "{log:?}"
    );
    api.run_until(takeover + secs(301));
    assert_eq!(api.commands_for("n1"), vec![takeover + secs(300)]);
}

/// Power-cycle on a node running DaemonSet pods that tolerate every taint (kube-proxy, CNI):
/// nothing evicts them, so they stay bound while the node is off; they do not block the
/// power-on. A pod that tolerates the taint for a while (it is evicted then) and a Terminating
/// one (force-deleted) are waited for.
#[test]
fn power_cycle_powers_on_while_daemonset_pods_that_tolerate_everything_stay_bound() {
    let everything = Toleration {
        key: n(""),
        operator: TolerationOperator::Exists,
        value: n(""),
        effect: None,
        toleration_seconds: None,
    };
    let mut api = Api::fencing(cycling(), t0(), &["n1", "n2", "n3"]);
    let mut proxy = pod("kube-proxy-x1", "n1");
    proxy.tolerations = std::rc::Rc::from(vec![everything.clone()]);
    proxy.daemonset_owned = true;
    api.put_pod(proxy);
    let mut briefly = pod("cache-0", "n1");
    briefly.tolerations = std::rc::Rc::from(vec![Toleration {
        key: n(OUT_OF_SERVICE_KEY),
        toleration_seconds: Some(60),
        ..everything.clone()
    }]);
    api.put_pod(briefly);
    api.put_pod(pod("db-0", "n1"));
    let since = kill_n1(&mut api);
    api.run_until(since + secs(301));
    api.exit("n1", FenceOutcome::Exited(0));
    assert!(api.out_of_service("n1"));
    api.delete_pod(&PodKey {
        namespace: n("default"),
        name: n("db-0"),
    });
    api.run_until(api.now + secs(30));
    assert_eq!(
        steps_of(&api, "n1"),
        [FenceStep::Off(0)],
        "powered on before a pod that tolerates the taint for 60 s was gone"
    );
    api.delete_pod(&PodKey {
        namespace: n("default"),
        name: n("cache-0"),
    });
    api.run_until(api.now + secs(10));
    assert_eq!(
        steps_of(&api, "n1"),
        [FenceStep::Off(0), FenceStep::On],
        "the DaemonSet pod blocked the power-on"
    );
    assert!(
        api.pods.keys().any(|k| &*k.name == "kube-proxy-x1"),
        "the DaemonSet pod is still bound"
    );
}
