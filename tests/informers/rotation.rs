//! A quiet watch is rotated (the server ends it at `timeoutSeconds`, well inside the idle timeout,
//! so a healthy watch speaks before its idle deadline) at the cost of one
//! wake-up: the one that reads the end, which sends the next watch on the same keep-alive
//! connection. The new watch's response head, a millisecond later, is read at the loop's next
//! wake-up, whatever causes it (the controller's pass; here a periodic probe timer), at the
//! latest `rotated_watch_read_within` later: it used to be a wake-up of its own (two per
//! rotation), and a new connection a third (connect) and, over TLS, a handshake. Events that
//! arrive on the deferred watch are delivered at that read, never lost. Counted as loop
//! wake-ups against the simulated API server over real HTTP.

use std::time::{Duration, Instant};

use crate::informer_support::{Harness, Id, list_watch, synced_leases};
use node_lifecycled::kube::reflector::EndTarget;
use node_lifecycled::runtime::EventLoop;
use node_lifecycled::runtime::informer::InformerConfig;
use node_lifecycled::time::Time;
use node_lifecycled_sim::{Cluster, SimConfig, SimHandle, SimServer};

const ROTATIONS: u64 = 5;
const LIMIT: Duration = Duration::from_secs(30);

/// An informer whose rotated watches are read lazily, within `read_within`.
fn lazy_rotation(idle_timeout: Duration, read_within: Duration) -> InformerConfig {
    InformerConfig {
        rotated_watch_read_within: read_within,
        ..list_watch(idle_timeout)
    }
}

/// A simulator with three Leases and a harness whose Lease informer is synced and watching.
fn synced(sim: &SimHandle, config: InformerConfig) -> (EventLoop<Id, Id>, Harness) {
    synced_leases(sim, 3, config, LIMIT)
}

fn rotations(h: &Harness) -> u64 {
    h.leases().stats().reflector.reconnects
}

fn wakeups(lp: &mut EventLoop<Id, Id>) -> u64 {
    lp.control().stats().wakeups
}

fn probes(h: &Harness) -> u64 {
    h.probe.as_ref().map_or(0, |p| p.lateness.len() as u64)
}

/// Stops the loop right after the handler that sent the next watch.
fn run_until_a_rotation(h: &mut Harness, lp: &mut EventLoop<Id, Id>) {
    let before = rotations(h);
    h.run_quietly_until(lp, LIMIT, "a rotation", |h| rotations(h) > before);
}

#[test]
fn quiet_watches_rotate_on_their_kept_connection_in_one_wakeup_each_beside_a_periodic_pass() {
    // timeoutSeconds 1.4–1.8 s; the probe stands for the 5 s pass of a 30 s idle timeout.
    let pass = Duration::from_millis(400);
    let sim = SimServer::start(SimConfig::default()).unwrap();
    let (mut lp, mut h) = synced(
        &sim,
        lazy_rotation(Duration::from_secs(2), pass + Duration::from_millis(200)),
    );
    h.start_probe(lp.control(), pass);
    // The first watch's head, and one rotation so the count starts between two.
    run_until_a_rotation(&mut h, &mut lp);

    let (wakeups_before, probes_before) = (wakeups(&mut lp), probes(&h));
    let rotations_before = rotations(&h);
    h.run_quietly_until(&mut lp, LIMIT, "rotations", |h| {
        rotations(h) >= rotations_before + ROTATIONS
    });
    let rotated = rotations(&h) - rotations_before;
    let pass_wakeups = probes(&h) - probes_before;
    let own = (wakeups(&mut lp) - wakeups_before).saturating_sub(pass_wakeups);
    let stats = h.leases().stats();
    println!(
        "{rotated} rotations: {own} wake-ups of their own beside {pass_wakeups} of the pass, \
         {} watches on a kept connection",
        stats.kept_connections
    );
    assert_eq!(
        stats.kept_connections, stats.reflector.reconnects,
        "every watch after the first was sent on the connection its predecessor left"
    );
    assert_eq!((stats.broken_watches, stats.idle_timeouts), (0, 0));
    // One per rotation: the end, which sends the next watch; its head rides the next pass.
    // Reading the head on its own readiness event made it 2 per rotation (10 here). One more
    // is allowed for a head so late (a loaded machine) that the pass found nothing to read.
    assert!(
        own <= rotated + 1,
        "{rotated} rotations took {own} wake-ups of their own"
    );

    let cluster = sim.cluster();
    let renewed = cluster.now() + Duration::from_secs(5);
    cluster.renew_lease("node-1", renewed).unwrap();
    h.run_until(&mut lp, LIMIT, "a renewal after the rotations", |h| {
        h.leases().store.get("node-1").and_then(|l| l.renew_time) == Some(renewed)
    });
    assert_eq!(h.leases().stats().reflector.relists, 0);
}

/// The end itself: the pass may run up to `early` before its tick on a wake-up the loop makes
/// anyway, and each watch's `timeoutSeconds` (still 70–90 % of the idle
/// timeout, whole seconds) is chosen so that the server's end lands in that window. The end's
/// wake-up then runs the pass too, and the new watch's head rides the next pass: a quiet
/// watch's rotation costs no wake-up of its own. Here a 4 s pass 1.6 s early (the daemon's
/// two fifths), a 15 s idle timeout (timeoutSeconds 10–13 s: every phase of the 4 s grid).
#[test]
fn quiet_watches_ending_in_the_window_before_the_pass_cost_no_wakeup_of_their_own() {
    let (period, early) = (Duration::from_secs(4), Duration::from_millis(1_600));
    let sim = SimServer::start(SimConfig::default()).unwrap();
    let (mut lp, mut h) = synced(
        &sim,
        lazy_rotation(Duration::from_secs(15), period + Duration::from_secs(1)),
    );
    h.start_lazy_probe(lp.control(), period, early);
    let grid = h.probe.as_ref().unwrap().due;
    h.leases
        .as_mut()
        .unwrap()
        .informer
        .set_end_target(Some(EndTarget {
            grid,
            period,
            lead_min: early / 8,
            lead_max: early * 7 / 8,
            taken: [None, None],
        }));
    // The first watch was sent before the target: its end falls anywhere.
    run_until_a_rotation(&mut h, &mut lp);

    let (wakeups_before, probes_before) = (wakeups(&mut lp), probes(&h));
    let rotations_before = rotations(&h);
    // Counted in whole passes (the loop stops after a pass's handler, the turn complete):
    // 14 passes, 56 s, hold 4 or 5 rotations.
    h.run_quietly_until(&mut lp, Duration::from_secs(120), "passes", |h| {
        probes(h) >= probes_before + 14
    });
    let rotated = rotations(&h) - rotations_before;
    let pass_wakeups = probes(&h) - probes_before;
    let own = (wakeups(&mut lp) - wakeups_before).saturating_sub(pass_wakeups);
    let lateness = &h.probe.as_ref().unwrap().lateness;
    println!(
        "{rotated} rotations: {own} wake-ups of their own beside {pass_wakeups} of the pass \
         (lateness {lateness:?})"
    );
    let stats = h.leases().stats();
    assert_eq!((stats.broken_watches, stats.idle_timeouts), (0, 0));
    assert_eq!(stats.kept_connections, stats.reflector.reconnects);
    // Aimed at random, an end lands in a window 40 % of the time and costs a wake-up
    // otherwise (3 rotations took 2 in a run with the target off). One is allowed for an end
    // so late (a loaded machine) that it missed its window.
    assert!(
        own <= 1,
        "{rotated} rotations took {own} wake-ups of their own beside {pass_wakeups} passes"
    );
    assert!(rotated >= 4, "{rotated} rotations in 56 s");
}

#[test]
fn a_change_on_a_just_rotated_watch_is_delivered_at_the_next_wakeup_or_at_the_hard_deadline() {
    // timeoutSeconds 2.8–3.6 s: a rotated watch is read 2 s after the rotation at the latest,
    // before the server ends it.
    let read_within = Duration::from_secs(2);
    let sim = SimServer::start(SimConfig::default()).unwrap();
    let cluster = sim.cluster();
    let (mut lp, mut h) = synced(&sim, lazy_rotation(Duration::from_secs(4), read_within));
    let mut renewed = cluster.now();

    // An unrelated timer wakes the loop first: the change is delivered in that wake-up.
    run_until_a_rotation(&mut h, &mut lp);
    assert!(
        lp.control().soft_deadline(&Id::Leases).is_some(),
        "the rotated watch's read is a lazy deadline"
    );
    renewed = renew(&cluster, "node-1", renewed);
    let unrelated = Duration::from_millis(500);
    h.start_probe(lp.control(), unrelated);
    let before = wakeups(&mut lp);
    let took = h.run_quietly_until(&mut lp, LIMIT, "the change, at the probe", |h| {
        renewed_at(h, "node-1") == Some(renewed)
    });
    assert_eq!(
        wakeups(&mut lp) - before,
        1,
        "delivered at the probe's wake-up, none of its own (after {took:?})"
    );
    assert_eq!(probes(&h), 0, "the read came first in that wake-up");
    lp.control().cancel(&Id::Probe);
    h.probe = None;

    // Nothing else wakes the loop: the change is delivered at the read's hard deadline. (A
    // watch sent within `read_within` of the last change is read as events are, without
    // coalescing: on arrival; the one after that is lazy again.)
    for _ in 0..3 {
        run_until_a_rotation(&mut h, &mut lp);
        if lp.control().soft_deadline(&Id::Leases).is_some() {
            break;
        }
    }
    assert!(lp.control().soft_deadline(&Id::Leases).is_some());
    let rotated_at = Instant::now();
    renewed = renew(&cluster, "node-2", renewed);
    let before = wakeups(&mut lp);
    h.run_quietly_until(&mut lp, LIMIT, "the change, at the hard deadline", |h| {
        renewed_at(h, "node-2") == Some(renewed)
    });
    let took = rotated_at.elapsed();
    assert_eq!(wakeups(&mut lp) - before, 1, "one wake-up, at {took:?}");
    assert!(
        took >= read_within - Duration::from_millis(100),
        "read before its hard deadline ({took:?}) with nothing else waking the loop"
    );
    let stats = h.leases().stats();
    assert_eq!((stats.broken_watches, stats.idle_timeouts), (0, 0));
    assert_eq!(stats.reflector.relists, 0);
    assert!(h.leases().informer.is_streaming());
}

/// Renews `name` a second after `last`; returns the new renew time.
fn renew(cluster: &Cluster, name: &str, last: Time) -> Time {
    let at = last + Duration::from_secs(1);
    cluster.renew_lease(name, at).unwrap();
    at
}

fn renewed_at(h: &Harness, name: &str) -> Option<Time> {
    h.leases().store.get(name).and_then(|l| l.renew_time)
}

/// The lazy read is for quiet watches: a watch rotated within `read_within` of its last event
/// is read on the coalescing grid at the latest, as its events are anyway, not at the next
/// pass (a busy watch's own reads are what wakes the loop).
#[test]
fn a_rotated_watch_with_recent_events_is_read_on_the_coalescing_grid_not_at_the_pass() {
    let coalesce = Duration::from_millis(100);
    // Rotations 2.8–3.6 s apart: a change just after one is recent at the next, not after.
    let read_within = Duration::from_millis(3_900);
    let sim = SimServer::start(SimConfig::default()).unwrap();
    let cluster = sim.cluster();
    let config = InformerConfig {
        watch_coalesce: coalesce,
        ..lazy_rotation(Duration::from_secs(4), read_within)
    };
    let (mut lp, mut h) = synced(&sim, config);
    // A first rotation; a change just after it is recent at the next one.
    run_until_a_rotation(&mut h, &mut lp);
    let renewed = renew(&cluster, "node-0", cluster.now());
    h.run_until(&mut lp, LIMIT, "the renewal", |h| {
        renewed_at(h, "node-0") == Some(renewed)
    });
    run_until_a_rotation(&mut h, &mut lp);
    let now = lp.control().now();
    let read_by = lp.control().timers().deadline(&Id::Leases).unwrap();
    assert!(
        lp.control().soft_deadline(&Id::Leases).is_some() || read_by <= now + coalesce,
        "a lazy read, or a plain one on the grid"
    );
    assert!(
        read_by <= now + coalesce,
        "read within the coalescing period: {:?} away",
        read_by.since(now)
    );
    // No event for longer than `read_within`: the next watch waits for a wake-up.
    run_until_a_rotation(&mut h, &mut lp);
    let now = lp.control().now();
    let read_by = lp.control().timers().deadline(&Id::Leases).unwrap();
    assert!(lp.control().soft_deadline(&Id::Leases).is_some());
    assert!(
        read_by >= now + (read_within - Duration::from_millis(10)),
        "a quiet watch's read waits: {:?} away",
        read_by.since(now)
    );
}
