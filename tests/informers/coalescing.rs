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

/// Nodes `node-0` to `node-{STATUS_NODES - 1}` whose status the tests post.
const STATUS_NODES: usize = 20;

/// [`synced_lease_informer`], plus `STATUS_NODES` Ready nodes and a node informer on them, synced,
/// coalescing by the same period.
fn synced_lease_and_node_informers(coalesce: Duration) -> (SimHandle, EventLoop<Id, Id>, Harness) {
    use crate::informer_support::Tracked;
    use node_lifecycled_sim::{Resource, fixtures};

    let (sim, mut lp, mut h) = synced_lease_informer(coalesce);
    let cluster = sim.cluster();
    for i in 0..STATUS_NODES {
        let node = fixtures::ready_node(&format!("node-{i}"), None, cluster.now());
        cluster.create(Resource::Nodes, node).unwrap();
    }
    let mut config = list_watch(Duration::from_secs(60));
    config.watch_coalesce = coalesce;
    h.nodes = Some(Tracked::new(config, Id::Nodes));
    h.nodes.as_mut().unwrap().informer.start(lp.control());
    h.run_until(&mut lp, LIMIT, "the node informer's sync", |h| {
        h.nodes().informer.is_synced() && h.nodes().stats().watching
    });
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

/// The node watch's trickle of status heartbeats beside a busy Lease watch, as at 5,000 nodes
/// (500 renewals a second, read every 45 ms; a few status posts per read, which alone would
/// widen the node watch's grid to four periods): the node watch is read in the Lease watch's
/// wake-ups, so a heartbeat is seen within about one period, not four, and it adds no wake-up
/// of its own, even when a read there finds nothing (the watch stays paused instead of waking
/// the loop for its next event).
#[test]
fn a_node_status_trickle_is_read_in_the_busier_lease_watchs_wakeups() {
    use node_lifecycled::time::Time;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{Arc, Mutex};
    use std::time::Instant;

    use crate::informer_support::Id;

    let base = Duration::from_millis(50);
    let (sim, mut lp, mut h) = synced_lease_and_node_informers(base);
    let cluster = sim.cluster();

    let stop = Arc::new(AtomicBool::new(false));
    let written: Arc<Mutex<Vec<Instant>>> = Arc::default();
    // Seen: when the node informer's count of watch events reached each write.
    let mut seen: Vec<Instant> = Vec::new();
    let node_events_before = h.nodes().stats().watch_events;
    let measure = |h: &mut crate::informer_support::Harness,
                   lp: &mut node_lifecycled::runtime::EventLoop<Id, Id>,
                   seen: &mut Vec<Instant>,
                   every: Duration,
                   writes: usize| {
        let target = seen.len() + writes;
        let wakeups_before = lp.control().stats().wakeups;
        let started = Instant::now();
        std::thread::scope(|s| {
            let (renewer, stop_renewing) = (cluster.clone(), stop.clone());
            s.spawn(move || {
                let mut i = 0usize;
                // Bounded: a failed wait below must not leave this thread running.
                while !stop_renewing.load(Ordering::Relaxed) && started.elapsed() < LIMIT {
                    let at = renewer.now() + Duration::from_secs(10);
                    renewer
                        .renew_lease(&format!("node-{}", i % NODES), at)
                        .unwrap();
                    i += 1;
                    // ~400 a second: ~20 a read, so the Lease watch stays on the configured grid.
                    std::thread::sleep(Duration::from_millis(2));
                }
            });
            let (poster, log) = (cluster.clone(), written.clone());
            let first = seen.len();
            s.spawn(move || {
                for i in first..first + writes {
                    std::thread::sleep(every);
                    let node = format!("node-{}", i % STATUS_NODES);
                    // A heartbeat of its own (timestamps are whole seconds): every post changes
                    // the node, so every post is a watch event.
                    let heartbeat = Time::from_unix_millis(2_000_000_000_000 + i as u64 * 1000);
                    let mut log = log.lock().unwrap();
                    poster
                        .set_node_condition(&node, "Ready", "True", heartbeat)
                        .unwrap();
                    log.push(Instant::now());
                }
            });
            h.run_quietly_until(lp, LIMIT, "every status post", |h| {
                let events = (h.nodes().stats().watch_events - node_events_before) as usize;
                while seen.len() < events {
                    seen.push(Instant::now());
                }
                events >= target
            });
            stop.store(true, Ordering::Relaxed);
        });
        stop.store(false, Ordering::Relaxed);
        println!("{} Lease events so far", h.leases().stats().watch_events);
        (
            lp.control().stats().wakeups - wakeups_before,
            started.elapsed(),
        )
    };

    // A dense trickle (a post every 15 ms): alone, its reads find ~3 events and its grid would
    // widen to 200 ms (a post seen 100 ms late on average).
    measure(&mut h, &mut lp, &mut seen, Duration::from_millis(15), 120);
    let written_at = written.lock().unwrap().clone();
    let mut late: Vec<Duration> = seen
        .iter()
        .zip(&written_at)
        .map(|(seen, written)| seen.saturating_duration_since(*written))
        .collect();
    late.sort();
    let median = late[late.len() / 2];
    println!(
        "status posts seen late by: median {median:?}, max {:?}",
        late[late.len() - 1]
    );
    assert!(
        median <= base + Duration::from_millis(10),
        "a status post is seen {median:?} late at the median (the Lease watch is read every {base:?})"
    );

    // A sparse one (a post every 60 ms): about half the node watch's reads find nothing. Those
    // keep it paused, so the loop wakes about once per Lease read, not again per status post.
    let (wakeups, took) = measure(&mut h, &mut lp, &mut seen, Duration::from_millis(60), 50);
    let grid_points = took.as_millis() as u64 / base.as_millis() as u64;
    println!("{wakeups} wake-ups in {took:?} ({grid_points} points of the Lease watch's grid)");
    assert!(
        wakeups <= grid_points * 6 / 5 + 4,
        "{wakeups} wake-ups in {took:?}: the Lease watch's grid has {grid_points} points; the \
         status posts woke the loop of their own"
    );
    assert_eq!(h.nodes().stats().reflector.relists, 0);
    assert_eq!(h.leases().stats().reflector.relists, 0);
}

/// A busy watch whose read on its own grid finds nothing (a pause in the renewals, or a
/// rotated watch read before the server's first events) is not held on a coarser grid of a
/// quieter watch: at 5,000 nodes the Lease watch, read every 45 ms, was kept paused until the
/// node watch's widened 180 ms grid after such a read, and the renewals that came next were
/// seen up to 180 ms late (the bench's detection tail of 132 ms). A watch stays paused while
/// idle only to borrow a grid at least as fine as its own; otherwise its readiness events
/// resume and its next event is read as it arrives.
#[test]
fn a_busy_watch_that_reads_nothing_is_not_held_on_a_quieter_watchs_coarser_grid() {
    use node_lifecycled::time::Time;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Instant;

    const TRIALS: usize = 10;
    let base = Duration::from_millis(50);
    let (sim, mut lp, mut h) = synced_lease_and_node_informers(base);
    let cluster = sim.cluster();

    let done = AtomicBool::new(false);
    let renewing = AtomicBool::new(false);
    let started = Instant::now();
    let mut late = Vec::new();
    std::thread::scope(|s| {
        // The node watch's trickle for the whole test (a post every 15 ms: its reads find a
        // few, never none, so it stays on its grid, widened to four periods).
        let (poster, done_ref) = (cluster.clone(), &done);
        s.spawn(move || {
            let mut i = 0u64;
            while !done_ref.load(Ordering::Relaxed) && started.elapsed() < LIMIT {
                std::thread::sleep(Duration::from_millis(15));
                let node = format!("node-{}", i as usize % STATUS_NODES);
                let heartbeat = Time::from_unix_millis(2_000_000_000_000 + i * 1000);
                poster
                    .set_node_condition(&node, "Ready", "True", heartbeat)
                    .unwrap();
                i += 1;
            }
        });
        // The Lease watch's busy spells: ~400 renewals a second while `renewing`.
        let (renewer, done_ref, renewing_ref) = (cluster.clone(), &done, &renewing);
        s.spawn(move || {
            let mut i = 1usize;
            while !done_ref.load(Ordering::Relaxed) && started.elapsed() < LIMIT {
                if renewing_ref.load(Ordering::Relaxed) {
                    let at = renewer.now() + Duration::from_secs(10);
                    renewer
                        .renew_lease(&format!("node-{}", 1 + i % (NODES - 1)), at)
                        .unwrap();
                    i += 1;
                }
                std::thread::sleep(Duration::from_millis(2));
            }
        });
        for trial in 0..TRIALS {
            // A busy spell puts the Lease watch on the configured grid...
            renewing.store(true, Ordering::Relaxed);
            let spell = Instant::now();
            h.run_quietly_until(&mut lp, LIMIT, "a busy spell", |_| {
                spell.elapsed() >= Duration::from_millis(400)
            });
            // ... then a silence of three of its grid points, so a read there finds nothing ...
            renewing.store(false, Ordering::Relaxed);
            let quiet = Instant::now();
            h.run_quietly_until(&mut lp, LIMIT, "a silence", |_| quiet.elapsed() >= base * 3);
            // ... and the next renewal is timed.
            let renewed = Time::from_unix_millis(2_100_000_000_000 + trial as u64 * 1000);
            cluster.renew_lease("node-0", renewed).unwrap();
            let written = Instant::now();
            h.run_quietly_until(&mut lp, LIMIT, "the timed renewal", |h| {
                h.leases().store.get("node-0").and_then(|l| l.renew_time) == Some(renewed)
            });
            late.push(written.elapsed());
        }
        done.store(true, Ordering::Relaxed);
    });
    println!("renewals after a silence seen late by: {late:?}");
    let worst = late.iter().max().copied().unwrap_or_default();
    // Read on arrival (a few milliseconds), or in a wake-up on a grid as fine as its own
    // (within 50 ms). Held to the node watch's 200 ms grid, it was up to 200 ms late.
    assert!(
        worst <= base * 2 + Duration::from_millis(20),
        "a renewal after a silence was seen {worst:?} late (all: {late:?}); the Lease watch's \
         own grid is {base:?}"
    );
    assert_eq!(h.leases().stats().reflector.relists, 0);
}
