//! Watch events that arrive close together are read in one wake-up. 200 Lease renewals written 2 ms
//! apart reach the store complete in a handful of informer calls instead
//! of one per renewal; once the watch is quiet again it costs no timer (the first event after
//! a quiet spell is read on its own readiness event).

use std::time::Duration;

use crate::informer_support::{Harness, Id, list_watch, synced_leases};
use node_lifecycled::runtime::EventLoop;
use node_lifecycled_sim::{SimConfig, SimHandle, SimServer};

const NODES: usize = 200;
const COALESCE: Duration = Duration::from_millis(100);
const LIMIT: Duration = Duration::from_secs(30);

/// A simulated cluster of `NODES` Leases and a Lease informer on it, synced, coalescing its
/// reads by `coalesce`.
fn synced_lease_informer(coalesce: Duration) -> (SimHandle, EventLoop<Id, Id>, Harness) {
    let sim = SimServer::start(SimConfig::default()).unwrap();
    let mut config = list_watch(Duration::from_secs(60));
    config.watch_coalesce = coalesce;
    let (lp, h) = synced_leases(&sim, NODES, config, LIMIT);
    (sim, lp, h)
}

#[test]
fn lease_renewals_arriving_together_are_read_in_a_few_wakeups_and_a_quiet_watch_costs_no_timer() {
    let (sim, mut lp, mut h) = synced_lease_informer(COALESCE);
    let cluster = sim.cluster();
    let renewed = cluster.now() + Duration::from_secs(1);
    cluster.renew_lease("node-0", renewed).unwrap();
    h.run_until(&mut lp, LIMIT, "a first renewal", |h| {
        h.leases().store.get("node-0").and_then(|l| l.renew_time) == Some(renewed)
    });
    // The read that found it paused the stream; the next, empty, resumes it.
    std::thread::sleep(COALESCE * 2);
    h.run_until(&mut lp, LIMIT, "quiet", |h| h.leases().stats().watching);

    let calls_before = h.call_cpu.len();
    let events_before = h.leases().stats().watch_events;
    let later = renewed + Duration::from_secs(10);
    std::thread::scope(|s| {
        let writer = cluster.clone();
        s.spawn(move || {
            for i in 0..NODES {
                writer.renew_lease(&format!("node-{i}"), later).unwrap();
                std::thread::sleep(Duration::from_millis(2));
            }
        });
        h.run_until(&mut lp, LIMIT, "every renewal", |h| {
            (0..NODES).all(|i| {
                h.leases()
                    .store
                    .get(format!("node-{i}").as_str())
                    .and_then(|l| l.renew_time)
                    == Some(later)
            })
        });
    });
    let calls = h.call_cpu.len() - calls_before;
    let events = h.leases().stats().watch_events - events_before;
    println!("{events} renewals in {calls} informer calls");
    assert_eq!(events, NODES as u64);
    // 200 writes 2 ms apart take at least 400 ms: about one read per 100 ms, plus the first
    // event's own readiness. One call per renewal would be 200.
    assert!(
        calls <= NODES / 5,
        "{events} renewals took {calls} informer calls"
    );

    // Quiet again: one empty read resumes the readiness events, then nothing wakes it.
    std::thread::sleep(COALESCE * 2);
    h.run_until(&mut lp, LIMIT, "a turn", |_| true);
    let quiet_from = h.call_cpu.len();
    let started = std::time::Instant::now();
    h.run_until(&mut lp, LIMIT, "a quiet second", |_| {
        started.elapsed() >= Duration::from_secs(1)
    });
    assert!(
        h.call_cpu.len() - quiet_from <= 1,
        "a quiet watch is not polled: {} calls in 1 s",
        h.call_cpu.len() - quiet_from
    );
    let renewed_again = later + Duration::from_secs(10);
    cluster.renew_lease("node-7", renewed_again).unwrap();
    h.run_until(&mut lp, LIMIT, "the next renewal", |h| {
        h.leases().store.get("node-7").and_then(|l| l.renew_time) == Some(renewed_again)
    });
    assert_eq!(h.leases().stats().reflector.relists, 0);
}

/// A steady trickle (100 renewals a second, as 1,000 kubelets make) is read on a grid that widens
/// while reads find few events: from the configured 50 ms (5 renewals a
/// read, 20 wake-ups a second) to 200 ms (20 a read, 5 a second). 300 renewals 10 ms apart
/// take about 3 s: 60 reads on a fixed 50 ms grid, about 20 here.
#[test]
fn a_steady_trickle_of_renewals_is_read_on_a_wider_grid_in_fewer_wakeups() {
    let base = Duration::from_millis(50);
    let (sim, mut lp, mut h) = synced_lease_informer(base);
    let cluster = sim.cluster();

    let calls_before = h.call_cpu.len();
    let events_before = h.leases().stats().watch_events;
    let renewals = 300;
    let later = cluster.now() + Duration::from_secs(10);
    std::thread::scope(|s| {
        let writer = cluster.clone();
        s.spawn(move || {
            for i in 0..renewals {
                writer
                    .renew_lease(
                        &format!("node-{}", i % NODES),
                        later + Duration::from_millis(i as u64),
                    )
                    .unwrap();
                std::thread::sleep(Duration::from_millis(10));
            }
        });
        h.run_until(&mut lp, LIMIT, "every renewal", |h| {
            h.leases().stats().watch_events - events_before >= renewals as u64
        });
    });
    let calls = h.call_cpu.len() - calls_before;
    println!("{renewals} renewals in {calls} informer calls");
    assert!(
        calls <= 36,
        "{renewals} renewals 10 ms apart took {calls} informer calls (a fixed 50 ms grid: about 60)"
    );
    assert_eq!(h.leases().stats().reflector.relists, 0);
}
