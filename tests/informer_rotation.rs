//! Issue #14: a quiet watch is rotated (the server ends it at `timeoutSeconds`, well inside the
//! idle timeout, so a healthy watch speaks before its idle deadline) at the cost of two
//! wake-ups: the one that reads the end, which sends the next watch on the same keep-alive
//! connection, and the one that reads the new response head. A new connection cost a third
//! (connect) and, over TLS, a handshake. Counted as informer calls against the simulated API
//! server over real HTTP; the watch still follows the server afterwards.

mod informer_support;

use std::time::Duration;

use informer_support::{Harness, Id, Tracked, list_watch, plain_connection, unthrottled};
use node_lifecycled::kube::Credentials;
use node_lifecycled::runtime::{Clock, EventLoop};
use node_lifecycled_sim::{Resource, SimConfig, SimServer, fixtures};

/// The reflector asks `timeoutSeconds` = 1 s at this idle timeout: a rotation a second.
const IDLE_TIMEOUT: Duration = Duration::from_secs(2);
const ROTATIONS: u64 = 4;
const LIMIT: Duration = Duration::from_secs(30);

#[test]
fn a_quiet_watch_rotates_on_its_kept_connection_in_two_wakeups_without_a_reconnect() {
    let sim = SimServer::start(SimConfig::default()).unwrap();
    let cluster = sim.cluster();
    for i in 0..3 {
        cluster
            .create(
                Resource::Leases,
                fixtures::node_lease(&format!("node-{i}"), cluster.now()),
            )
            .unwrap();
    }
    let clock = Clock::start();
    let mut lp: EventLoop<Id, Id> = EventLoop::new(clock.clone()).unwrap();
    let mut h = Harness::new(
        plain_connection(sim.url(), Credentials::None),
        &clock,
        unthrottled(),
    );
    h.leases = Some(Tracked::new(list_watch(IDLE_TIMEOUT), Id::Leases));
    h.start(lp.control());
    h.run_until(&mut lp, LIMIT, "sync", |h| {
        h.leases().informer.is_synced() && h.leases().stats().watching
    });
    // The first watch connects and reads its response head.
    settle(&mut h, &mut lp);

    let calls_before = h.call_cpu.len();
    let opened_before = h.leases().stats().reflector.reconnects;
    h.run_until(&mut lp, LIMIT, "rotations", |h| {
        h.leases().stats().reflector.reconnects >= opened_before + ROTATIONS
    });
    // The last rotation's response head.
    settle(&mut h, &mut lp);
    let stats = h.leases().stats();
    let rotations = stats.reflector.reconnects - opened_before;
    let calls = (h.call_cpu.len() - calls_before) as u64;
    println!(
        "{rotations} rotations in {calls} informer calls, {} on a kept connection",
        stats.kept_connections
    );
    assert!(rotations >= ROTATIONS);
    assert_eq!(
        stats.kept_connections, stats.reflector.reconnects,
        "every watch after the first was sent on the connection its predecessor left"
    );
    assert_eq!((stats.broken_watches, stats.idle_timeouts), (0, 0));
    // Per rotation: the end (which sends the next watch) and the new head. A reconnect would
    // add the connect's own readiness event: 3 per rotation.
    assert!(
        calls <= rotations * 2,
        "{rotations} rotations took {calls} informer calls"
    );

    let renewed = cluster.now() + Duration::from_secs(5);
    cluster.renew_lease("node-1", renewed).unwrap();
    h.run_until(&mut lp, LIMIT, "a renewal after the rotations", |h| {
        h.leases().store.get("node-1").and_then(|l| l.renew_time) == Some(renewed)
    });
    assert_eq!(h.leases().stats().reflector.relists, 0);
}

/// Turns the loop for 300 ms (well inside a rotation), answering whatever arrives.
fn settle(h: &mut Harness, lp: &mut EventLoop<Id, Id>) {
    let started = std::time::Instant::now();
    h.run_until(lp, LIMIT, "300 ms", |_| {
        started.elapsed() >= Duration::from_millis(300)
    });
}
