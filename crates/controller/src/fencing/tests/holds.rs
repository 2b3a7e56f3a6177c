//! Maintenance that pauses fencing: a node's maintenance annotation, its cordon and the fleet pause
//! (with its expiry and across a failover), with the virtual clock.

use super::*;
use crate::Decision;
use crate::fleet_pause::{FleetPause, PauseScope};
use crate::model::{Maintenance, TaintEffect};

fn before(t: Time, s: u64) -> Time {
    Time::from_unix_millis(t.as_unix_millis() - s * 1000)
}

fn lines(api: &mut Api) -> Vec<String> {
    api.ctl
        .take_decisions()
        .into_iter()
        .filter_map(|d| match d {
            Decision::Fencing { detail, .. } | Decision::Pause { detail } => Some(detail),
            _ => None,
        })
        .collect()
}

fn annotate(api: &mut Api, name: &str, m: Maintenance) {
    let mut node = api.nodes[&n(name)].clone();
    node.maintenance = m;
    api.put_node(node);
}

fn pause(what: PauseScope, until: Time) -> Input {
    Input::FleetPause(Some(FleetPause {
        what,
        until,
        reason: "switch upgrade".into(),
        by: "alice@bastion".into(),
    }))
}

/// n1 dies at ~t0+50 s; returns when it went Unknown for sure.
fn kill_n1(api: &mut Api) -> Time {
    api.alive.remove(&n("n1"));
    api.run_until(t0() + secs(120));
    api.unknown_since("n1")
}

#[test]
fn a_node_in_maintenance_is_not_fenced_until_its_window_ends() {
    let mut api = Api::fencing(policy(), t0(), &["n1", "n2", "n3"]);
    let since = kill_n1(&mut api);
    let window_end = since + secs(900);
    annotate(&mut api, "n1", Maintenance::Until(window_end));
    api.run_until(before(window_end, 1));
    assert!(api.commands().is_empty(), "fenced during maintenance");
    let log = lines(&mut api);
    assert!(
        log.iter().any(|l| l.contains("decision=wait node=n1")
            && l.contains("maintenance: node-lifecycled.io/maintenance until")),
        "{log:?}"
    );
    // Still dead when the window is over: fenced at the next check.
    api.run_until(window_end + secs(6));
    assert_eq!(api.commands_for("n1").len(), 1);
}

#[test]
fn an_empty_or_unreadable_maintenance_value_holds_until_the_annotation_goes() {
    for m in [Maintenance::Indefinite, Maintenance::parse("next tuesday")] {
        let mut api = Api::fencing(policy(), t0(), &["n1", "n2", "n3"]);
        let since = kill_n1(&mut api);
        annotate(&mut api, "n1", m.clone());
        api.run_until(since + secs(7200));
        assert!(api.commands().is_empty(), "{m:?}: fenced on a guess");
        annotate(&mut api, "n1", Maintenance::None);
        api.run_until(since + secs(7210));
        assert_eq!(api.commands_for("n1").len(), 1, "{m:?}");
    }
}

/// The live read is the evidence: an annotation the cache has not shown yet still stops it.
#[test]
fn maintenance_seen_only_by_the_live_read_stops_the_fence() {
    let mut api = Api::fencing(policy(), t0(), &["n1", "n2", "n3"]);
    let since = kill_n1(&mut api);
    api.run_until(since + secs(290));
    // Written on the server only: the watch has not delivered it.
    api.nodes.get_mut(&n("n1")).unwrap().maintenance = Maintenance::Indefinite;
    api.run_until(since + secs(900));
    assert!(api.commands().is_empty(), "{:?}", api.commands());
}

/// Sets (or, `None`, removes) KEP-5683's `MaintenanceInProgress` condition on a node.
fn maintenance_condition(node: &mut crate::model::Node, status: Option<ConditionStatus>) {
    node.other_conditions
        .retain(|(k, _)| &**k != "MaintenanceInProgress");
    if let Some(s) = status {
        node.other_conditions.push((n("MaintenanceInProgress"), s));
    }
}

fn set_condition(api: &mut Api, name: &str, status: Option<ConditionStatus>) {
    let mut node = api.nodes[&n(name)].clone();
    maintenance_condition(&mut node, status);
    api.put_node(node);
}

/// A node under planned work reported with Node Lifecycle Conditions (KEP-5683,
/// `MaintenanceInProgress=True`) is powered off by the admin: no fence however long it stays
/// down, with the reason in the decision line; once the condition is cleared and the node is
/// still down, it is fenced at the next check. With `lifecycle_conditions = false` the
/// condition means nothing here and the node is fenced at `after`.
#[test]
fn a_node_in_planned_maintenance_by_its_lifecycle_condition_is_not_fenced() {
    let mut api = Api::fencing(policy(), t0(), &["n1", "n2", "n3"]);
    set_condition(&mut api, "n1", Some(ConditionStatus::True));
    let since = kill_n1(&mut api);
    api.run_until(since + secs(3600));
    assert!(
        api.commands().is_empty(),
        "fenced during planned maintenance"
    );
    let log = lines(&mut api);
    assert!(
        log.iter().any(
            |l| l.contains("decision=wait node=n1") && l.contains("MaintenanceInProgress=True")
        ),
        "{log:?}"
    );
    set_condition(&mut api, "n1", Some(ConditionStatus::False));
    api.run_until(since + secs(3610));
    assert_eq!(api.commands_for("n1").len(), 1);

    let settings = Settings {
        lifecycle_conditions: false,
        ..test_settings()
    };
    let mut upstream = Api::fencing_with(settings, policy(), t0(), &["n1", "n2", "n3"]);
    set_condition(&mut upstream, "n1", Some(ConditionStatus::True));
    let since = kill_n1(&mut upstream);
    upstream.run_until(since + secs(301));
    assert_eq!(upstream.commands_for("n1"), vec![since + secs(300)]);
}

/// The condition written on the server just before the fence, not yet delivered by the watch:
/// the live read sees it and stops the fence.
#[test]
fn planned_maintenance_seen_only_by_the_live_read_stops_the_fence() {
    let mut api = Api::fencing(policy(), t0(), &["n1", "n2", "n3"]);
    let since = kill_n1(&mut api);
    api.run_until(since + secs(290));
    maintenance_condition(
        api.nodes.get_mut(&n("n1")).unwrap(),
        Some(ConditionStatus::True),
    );
    api.run_until(since + secs(900));
    assert!(api.commands().is_empty(), "{:?}", api.commands());
}

#[test]
fn a_cordoned_node_is_not_fenced_unless_skip_cordoned_is_off() {
    for skip in [true, false] {
        let mut p = policy();
        p.skip_cordoned = skip;
        let mut api = Api::fencing(p, t0(), &["n1", "n2", "n3"]);
        let mut node = api.nodes[&n("n1")].clone();
        node.unschedulable = true;
        api.put_node(node);
        let since = kill_n1(&mut api);
        api.run_until(since + secs(900));
        assert_eq!(api.commands().is_empty(), skip, "skip_cordoned = {skip}");
        if skip {
            let log = lines(&mut api);
            assert!(log.iter().any(|l| l.contains("cordoned")), "{log:?}");
        }
    }
}

#[test]
fn a_fleet_pause_of_fencing_holds_every_fence_and_ends_by_itself() {
    let mut api = Api::fencing(policy(), t0(), &["n1", "n2", "n3"]);
    let until = t0() + secs(1200);
    api.feed(pause(PauseScope::Fencing, until));
    let since = kill_n1(&mut api);
    api.run_until(before(until, 1));
    assert!(api.commands().is_empty(), "fenced during a pause");
    assert!(since + secs(301) < until, "the outage is long past `after`");
    // Expired: it ends at its `until`, not at some later recheck, and fencing goes on.
    api.run_until(until + secs(1));
    assert_eq!(api.commands_for("n1"), vec![until]);
    let log = lines(&mut api);
    let start = log
        .iter()
        .position(|l| l.starts_with("pause: decision=start what=fencing"));
    let end = log.iter().position(|l| {
        l.starts_with("pause: decision=end what=fencing") && l.ends_with("ended=expired")
    });
    assert!(start.is_some() && end.is_some() && start < end, "{log:?}");
    assert_eq!(
        log.iter().filter(|l| l.starts_with("pause:")).count(),
        2,
        "one line at the start, one at the end: {log:?}"
    );
    assert!(
        log.iter()
            .any(|l| l.contains("fleet pause of fencing: what=fencing")
                && l.contains("reason=\"switch upgrade\"")),
        "{log:?}"
    );
}

#[test]
fn a_resume_lets_fencing_go_on_at_once() {
    let mut api = Api::fencing(policy(), t0(), &["n1", "n2", "n3"]);
    api.feed(pause(PauseScope::All, t0() + secs(7200)));
    let since = kill_n1(&mut api);
    api.run_until(since + secs(600));
    assert!(api.commands().is_empty());
    api.feed(Input::FleetPause(None));
    assert_eq!(api.commands_for("n1"), vec![since + secs(600)]);
    let log = lines(&mut api);
    assert!(log.iter().any(|l| l.ends_with("ended=resumed")), "{log:?}");
}

/// `tainting` holds no fence, `fencing` holds no taint.
#[test]
fn a_pause_holds_only_what_it_names() {
    let unreachable = |api: &Api| {
        api.nodes[&n("n1")].taints.iter().any(|t| {
            &*t.key == "node.kubernetes.io/unreachable" && t.effect == TaintEffect::NoExecute
        })
    };
    let mut api = Api::fencing(policy(), t0(), &["n1", "n2", "n3"]);
    api.feed(pause(PauseScope::Tainting, t0() + secs(7200)));
    let since = kill_n1(&mut api);
    api.run_until(since + secs(301));
    assert_eq!(api.commands_for("n1").len(), 1, "tainting held a fence");
    assert!(
        !unreachable(&api),
        "a NoExecute taint during a pause of tainting"
    );

    let mut api = Api::fencing(policy(), t0(), &["n1", "n2", "n3"]);
    api.feed(pause(PauseScope::Fencing, t0() + secs(7200)));
    let since = kill_n1(&mut api);
    api.run_until(since + secs(301));
    assert!(api.commands().is_empty());
    assert!(unreachable(&api), "fencing held a NoExecute taint");
}

/// Tainting held, not dropped: the taint goes on when the pause ends.
#[test]
fn a_pause_of_tainting_holds_new_noexecute_taints_until_it_ends() {
    let mut p = policy();
    p.after = secs(36_000);
    let mut api = Api::fencing(p, t0(), &["n1", "n2", "n3"]);
    let until = t0() + secs(900);
    api.feed(pause(PauseScope::Tainting, until));
    kill_n1(&mut api);
    api.run_until(before(until, 1));
    let noexecute = |api: &Api| {
        api.nodes[&n("n1")]
            .taints
            .iter()
            .any(|t| t.effect == TaintEffect::NoExecute)
    };
    assert!(!noexecute(&api), "tainted during the pause");
    api.run_until(until + secs(1));
    assert!(noexecute(&api), "the held taint was dropped");
}

/// A failover during a pause: the new leader reads the pause from the Lease on takeover (the
/// shell feeds it before the initial sync) and honours it.
#[test]
fn a_new_leader_honours_the_pause_it_reads_on_takeover() {
    let mut api = Api::fencing(policy(), t0(), &["n1", "n2", "n3"]);
    let until = t0() + secs(3600);
    api.feed(pause(PauseScope::Fencing, until));
    let since = kill_n1(&mut api);
    api.run_until(since + secs(200));
    // The leader dies; another instance takes over, knowing nothing in memory.
    let takeover = since + secs(250);
    let mut settings = test_settings();
    settings.fencing = Some(policy());
    api.ctl = Controllers::new(settings, takeover);
    api.now = takeover;
    api.feed(pause(PauseScope::Fencing, until));
    for name in ["n1", "n2", "n3"] {
        let renew = if name == "n1" { t0() } else { takeover };
        api.put_lease(lease(name, renew));
        let node = api.nodes[&n(name)].clone();
        api.feed(Input::NodeUpsert(node));
    }
    api.feed(Input::InitialSyncDone);
    api.run_until(before(until, 1));
    assert!(
        api.commands().is_empty(),
        "the new leader fenced during the pause"
    );
    api.run_until(until + secs(1));
    assert_eq!(api.commands_for("n1").len(), 1);
}

/// A follower made from a leader that lost its lease keeps the pause (it is the cluster's).
#[test]
fn into_follower_keeps_the_pause() {
    let api = Api::fencing(policy(), t0(), &["n1", "n2", "n3"]);
    let mut ctl = api.ctl;
    ctl.handle(pause(PauseScope::All, t0() + secs(60)), t0());
    let follower = ctl.into_follower(t0() + secs(1));
    assert!(follower.pause(t0() + secs(2)).is_some());
    assert!(follower.pause(t0() + secs(60)).is_none());
}

#[test]
fn a_pause_already_over_when_read_is_not_started() {
    let mut api = Api::fencing(policy(), t0(), &["n1", "n2", "n3"]);
    api.feed(pause(PauseScope::All, before(t0(), 1)));
    assert!(lines(&mut api).is_empty());
    assert!(api.ctl.pause(t0()).is_none());
}

/// Someone writes the pause annotation by hand and gets it wrong. Everything is held (never a
/// fence or a taint on a guess), but not for a time this instance makes up: until the next valid
/// write, the same pause whichever instance reads it and whenever (a failover does not start it
/// over), and a valid write (`resume`, or a real pause) ends it at once.
#[test]
fn an_unreadable_pause_holds_everything_until_the_next_valid_write_across_failovers() {
    // What the shell feeds for `{"what":"fencing","until":"tomorrow"}` (`leader/pause.rs`,
    // `interpret`, whose own test checks the mapping), at every read by every instance.
    let unreadable = || {
        pause_input(FleetPause::unreadable(
            "until=\"tomorrow\": not an RFC 3339 time",
        ))
    };
    let mut api = Api::fencing(policy(), t0(), &["n1", "n2", "n3"]);
    api.feed(unreadable());
    let since = kill_n1(&mut api);
    // Still held, by a pause with no end of its own (no `max_pause` from when it was read).
    api.run_until(since + secs(1200));
    assert!(api.commands().is_empty(), "fenced on an unreadable pause");
    let held = api.ctl.pause(api.now).cloned().expect("no pause in force");
    assert_eq!(held.what, PauseScope::All);
    assert!(held.until_next_write(), "{held:?}");
    assert_eq!(api.ctl.next_deadline().map(|d| d > api.now), Some(true));
    // A failover: the new leader reads the same value, gets the same pause, and holds too.
    let takeover = since + secs(1200 + 60);
    let mut settings = test_settings();
    settings.fencing = Some(policy());
    api.ctl = Controllers::new(settings, takeover);
    api.now = takeover;
    api.feed(unreadable());
    for name in ["n1", "n2", "n3"] {
        let renew = if name == "n1" { t0() } else { takeover };
        api.put_lease(lease(name, renew));
        let node = api.nodes[&n(name)].clone();
        api.feed(Input::NodeUpsert(node));
    }
    api.feed(Input::InitialSyncDone);
    assert_eq!(
        api.ctl.pause(takeover),
        Some(&held),
        "a new pause at the failover"
    );
    api.run_until(takeover + secs(1200));
    assert!(api.commands().is_empty(), "fenced on an unreadable pause");
    // The next valid write (here a resume) ends it at once.
    let resumed = api.now;
    api.feed(Input::FleetPause(None));
    assert!(api.ctl.pause(resumed).is_none());
    api.run_until(resumed + secs(1));
    assert_eq!(api.commands_for("n1"), vec![resumed]);
}

fn pause_input(p: FleetPause) -> Input {
    Input::FleetPause(Some(p))
}
