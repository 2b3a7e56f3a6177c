//! Informers against a misbehaving API server (the simulator's fault injector), end to end over
//! real sockets on the real event loop: a stalled watch is caught by the idle timeout and
//! resumed, a dropped one resumes from its resourceVersion without a relist, a corrupt line is
//! skipped without losing later events, a throttled LIST waits on a timer, an expired continue
//! token restarts the list, bearer tokens reach the watch, and watch-list is used against 1.32.

use std::time::{Duration, Instant};

use crate::informer_support::{
    Harness, Id, Tracked, assert_same, decode_all, list_watch, plain_connection, unthrottled,
};
use node_lifecycled::kube::decode::DecodeContext;
use node_lifecycled::kube::reflector::PROBE_TIMEOUT_SECONDS;
use node_lifecycled::kube::reflector::ReflectorConfig;
use node_lifecycled::kube::{ClientSettings, Credentials};
use node_lifecycled::model::{Lease, Node, Pod};
use node_lifecycled::runtime::informer::{InformerConfig, PROBATION, probe_watch_list};
use node_lifecycled::runtime::{Clock, EventLoop};
use node_lifecycled::time::Rate;
use node_lifecycled::time::Time;
use node_lifecycled_sim::{
    RequestMatch, Resource, SimConfig, SimHandle, SimServer, Verb, fixtures,
};
use node_lifecycled_testkit::runqueue_wait;

const LIMIT: Duration = Duration::from_secs(20);

fn add_nodes(sim: &SimHandle, n: usize) {
    let cluster = sim.cluster();
    for i in 0..n {
        let name = format!("node-{i}");
        cluster
            .create(
                Resource::Nodes,
                fixtures::ready_node(&name, None, cluster.now()),
            )
            .unwrap();
        cluster
            .create(Resource::Leases, fixtures::node_lease(&name, cluster.now()))
            .unwrap();
    }
}

fn add_pods(sim: &SimHandle, n: usize) {
    let cluster = sim.cluster();
    for i in 0..n {
        let node = format!("node-{}", i % 10);
        cluster
            .create(
                Resource::Pods,
                fixtures::running_pod("default", &format!("pod-{i:05}"), Some(&node)),
            )
            .unwrap();
    }
}

fn setup(sim: &SimHandle, settings: ClientSettings) -> (EventLoop<Id, Id>, Harness) {
    let clock = Clock::start();
    let lp = EventLoop::new(clock.clone()).unwrap();
    let h = Harness::new(
        plain_connection(sim.url(), Credentials::None),
        &clock,
        settings,
    );
    (lp, h)
}

fn renew_time(h: &Harness, node: &str) -> Option<Time> {
    h.leases().store.get(node).and_then(|l| l.renew_time)
}

/// A renewal the informer has certainly not seen yet: later than any earlier one.
fn later(sim: &SimHandle, seconds: u64) -> Time {
    sim.cluster().now() + Duration::from_secs(seconds)
}

/// Waits until a lease renewal arrives through the watch: the server side of the watch is up,
/// so an injected fault (which reaches only open watches) hits it.
fn watch_is_live(sim: &SimHandle, lp: &mut EventLoop<Id, Id>, h: &mut Harness) {
    let renewed = later(sim, 1);
    sim.cluster().renew_lease("node-0", renewed).unwrap();
    h.run_until(lp, LIMIT, "a renewal through the watch", |h| {
        renew_time(h, "node-0") == Some(renewed)
    });
}

#[test]
fn stalled_watch_is_caught_by_the_idle_timeout_and_resumed_without_a_relist() {
    let sim = SimServer::start(SimConfig::default()).unwrap();
    add_nodes(&sim, 3);
    let (mut lp, mut h) = setup(&sim, unthrottled());
    let idle = Duration::from_secs(2);
    h.leases = Some(Tracked::new(list_watch(idle), Id::Leases));
    h.start(lp.control());
    h.run_until(&mut lp, LIMIT, "sync", |h| h.leases().informer.is_synced());
    watch_is_live(&sim, &mut lp, &mut h);

    // The server stops sending; the connection stays open.
    sim.faults().stall_watches(None);
    let stalled_at = Instant::now();
    let renewed = later(&sim, 5);
    sim.cluster().renew_lease("node-1", renewed).unwrap();
    let detected = h.run_until(&mut lp, LIMIT, "idle timeout", |h| {
        h.leases().stats().idle_timeouts >= 1
    });
    assert!(
        detected <= idle + Duration::from_millis(500),
        "a stall must be noticed within the idle timeout ({idle:?}) of the last byte: took {detected:?} after the stall began"
    );
    assert_eq!(renew_time(&h, "node-1").map(|t| t < renewed), Some(true));

    sim.faults().clear_stall();
    h.run_until(&mut lp, LIMIT, "the renewal after the stall", |h| {
        renew_time(h, "node-1") == Some(renewed)
    });
    let stats = h.leases().stats();
    println!(
        "stall noticed after {detected:?}, renewal seen {:?} after the stall began; {stats:?}",
        stalled_at.elapsed()
    );
    assert_eq!(stats.reflector.relists, 0, "resumed, not relisted");
    assert!(stats.reflector.reconnects >= 1);
    assert_eq!(stats.broken_watches, 0);
}

#[test]
fn dropped_watch_resumes_from_its_resource_version_without_a_relist() {
    let sim = SimServer::start(SimConfig::default()).unwrap();
    add_nodes(&sim, 3);
    let (mut lp, mut h) = setup(&sim, unthrottled());
    h.leases = Some(Tracked::new(
        list_watch(Duration::from_secs(30)),
        Id::Leases,
    ));
    h.start(lp.control());
    h.run_until(&mut lp, LIMIT, "sync", |h| h.leases().informer.is_synced());
    watch_is_live(&sim, &mut lp, &mut h);

    sim.faults().drop_watches();
    // Written while the watch is down: only a resume from the old resourceVersion sees it
    // without listing again.
    let renewed = later(&sim, 5);
    sim.cluster().renew_lease("node-2", renewed).unwrap();
    h.run_until(&mut lp, LIMIT, "the renewal after the drop", |h| {
        renew_time(h, "node-2") == Some(renewed)
    });
    let stats = h.leases().stats();
    assert_eq!(stats.broken_watches, 1, "{stats:?}");
    assert_eq!(stats.reflector.relists, 0, "resumed, not relisted");
    assert_eq!(stats.list_pages, 1, "no LIST after the first");
    assert!(stats.reflector.reconnects >= 1);
    assert_eq!(h.leases().upserts, 5, "3 listed, 2 renewals");
}

#[test]
fn corrupt_line_is_logged_and_skipped_without_losing_later_events() {
    let sim = SimServer::start(SimConfig::default()).unwrap();
    add_nodes(&sim, 2);
    let (mut lp, mut h) = setup(&sim, unthrottled());
    h.nodes = Some(Tracked::new(list_watch(Duration::from_secs(30)), Id::Nodes));
    h.start(lp.control());
    h.run_until(&mut lp, LIMIT, "sync", |h| h.nodes().informer.is_synced());
    // A change seen through the watch proves the server side of the watch is up before the
    // corruption is injected (it reaches only open watches).
    let cluster = sim.cluster();
    cluster
        .set_node_condition("node-0", "MemoryPressure", "True", cluster.now())
        .unwrap();
    h.run_until(&mut lp, LIMIT, "the first change", |h| {
        h.nodes().stats().watch_events == 1
    });

    sim.faults().corrupt_watches();
    cluster
        .set_node_condition("node-1", "DiskPressure", "True", cluster.now())
        .unwrap();
    let version =
        cluster.get(Resource::Nodes, None, "node-1").unwrap()["metadata"]["resourceVersion"]
            .as_str()
            .unwrap()
            .to_string();
    h.run_until(&mut lp, LIMIT, "the change after the corrupt line", |h| {
        h.nodes()
            .store
            .get("node-1")
            .is_some_and(|n| *n.resource_version == *version)
    });
    let stats = h.nodes().stats();
    assert_eq!(stats.reflector.skipped_events, 1, "{stats:?}");
    assert!(
        stats
            .reflector
            .last_error
            .as_deref()
            .is_some_and(|e| e.contains("cannot decode watch event")),
        "{stats:?}"
    );
    assert_eq!(stats.reflector.relists, 0);
    assert_eq!(stats.reflector.reconnects, 0, "the stream went on");
    let mut ctx = DecodeContext::new();
    assert_same(
        "nodes",
        &h.nodes().store,
        &decode_all::<Node>(&cluster.list(Resource::Nodes, None), &mut ctx),
    );
}

#[test]
fn throttled_list_pages_wait_on_a_timer_while_the_loop_keeps_turning() {
    let sim = SimServer::start(SimConfig::default()).unwrap();
    add_pods(&sim, 400);
    // 2 qps: a page after the first waits 500 ms for its token, longer than a busy machine
    // takes to read a page of 100 pods (a page read slower than the token refills is not
    // throttled, and the count below would be short).
    let settings = ClientSettings {
        qps: Some(Rate::per_second(2)),
        burst: 1,
        ..unthrottled()
    };
    let (mut lp, mut h) = setup(&sim, settings);
    // Small pages: a page is fetched and decoded inline, and its cost is not what this
    // test measures (see the scale test for 500-pod pages).
    let mut config = list_watch(Duration::from_secs(30));
    config.reflector.page_size = 100;
    h.pods = Some(Tracked::new(config, Id::Pods));
    h.start(lp.control());
    h.start_probe(lp.control(), Duration::from_millis(10));
    let waited_before = runqueue_wait();
    let took = h.run_until(&mut lp, LIMIT, "sync", |h| h.pods().informer.is_synced());
    // The loop thread's time waiting for a CPU on a busy machine is not the loop's doing.
    let runnable = took.saturating_sub(runqueue_wait().saturating_sub(waited_before));
    let stats = h.pods().stats();
    let probe = h.probe.as_ref().unwrap();
    let max = probe.lateness.iter().max().copied().unwrap_or_default();
    println!(
        "4 pages at 2 qps in {took:?}: {} postponed, {} probe firings, lateness max {max:?}, longest informer call {:?} of CPU",
        stats.throttled_lists,
        probe.lateness.len(),
        h.max_call_cpu
    );
    assert_eq!(stats.list_pages, 4, "400 pods in pages of 100");
    assert!(stats.throttled_lists >= 3, "{stats:?}");
    assert!(
        took >= Duration::from_millis(1_400),
        "3 pages waited 500 ms each: {took:?}"
    );
    // A 10 ms probe fires about every 10 ms the loop can run; a loop that slept through the
    // three 200 ms waits would fire a handful of times at most.
    let expected = runnable.as_millis() / 10;
    assert!(
        probe.lateness.len() as u128 * 10 >= expected * 6,
        "the loop kept turning while the list waited: {} probe firings in {runnable:?} runnable",
        probe.lateness.len()
    );
    // Never a sleep: no informer call held the loop thread longer than one small page takes.
    h.assert_calls_within(Duration::from_millis(25), Duration::from_millis(60));
    assert_eq!(h.pods().store.len(), 400);
}

#[test]
fn expired_continue_token_restarts_the_list_from_the_first_page() {
    let sim = SimServer::start(SimConfig::default()).unwrap();
    add_pods(&sim, 1_200);
    let (mut lp, mut h) = setup(&sim, unthrottled());
    h.pods = Some(Tracked::new(list_watch(Duration::from_secs(30)), Id::Pods));
    h.start(lp.control());
    let faults = sim.faults();
    let mut injected = false;
    h.run_until(&mut lp, LIMIT, "sync", |h| {
        if !injected && h.pods().stats().list_pages == 1 {
            // The next page's continue token "expired" (the real server's 410 Expired).
            faults.fail_next(RequestMatch::on(Verb::List, "pods"), 1, 410);
            injected = true;
        }
        h.pods().informer.is_synced()
    });
    let stats = h.pods().stats();
    assert!(injected);
    assert_eq!(
        stats.list_pages,
        1 + 3,
        "one page, the 410, then all three again"
    );
    assert_eq!(stats.reflector.relists, 0, "one full state");
    assert_eq!(h.pods().syncs, 1);
    assert!(
        stats
            .reflector
            .last_error
            .as_deref()
            .is_some_and(|e| e.contains("410")),
        "{stats:?}"
    );
    let mut ctx = DecodeContext::new();
    assert_same(
        "pods",
        &h.pods().store,
        &decode_all::<Pod>(&sim.cluster().list(Resource::Pods, None), &mut ctx),
    );
}

#[test]
fn bearer_token_authorizes_the_list_and_the_watch() {
    let sim = SimServer::start(SimConfig {
        tokens: Some(vec!["s3cret".into()]),
        ..SimConfig::default()
    })
    .unwrap();
    add_nodes(&sim, 2);
    let clock = Clock::start();
    let mut lp: EventLoop<Id, Id> = EventLoop::new(clock.clone()).unwrap();
    let mut h = Harness::new(
        plain_connection(sim.url(), Credentials::Token("s3cret".into())),
        &clock,
        unthrottled(),
    );
    h.leases = Some(Tracked::new(
        list_watch(Duration::from_secs(30)),
        Id::Leases,
    ));
    h.start(lp.control());
    h.run_until(&mut lp, LIMIT, "sync", |h| h.leases().informer.is_synced());
    let renewed = later(&sim, 5);
    sim.cluster().renew_lease("node-0", renewed).unwrap();
    h.run_until(&mut lp, LIMIT, "the renewal through the watch", |h| {
        renew_time(h, "node-0") == Some(renewed)
    });
    let stats = h.leases().stats();
    assert_eq!(stats.broken_watches, 0, "{stats:?}");
    assert_eq!(stats.reflector.consecutive_failures, 0, "{stats:?}");
}

#[test]
fn watch_list_against_a_1_32_server_syncs_from_the_stream_without_a_list() {
    let sim = SimServer::start(SimConfig::default()).unwrap();
    add_nodes(&sim, 5);
    add_pods(&sim, 1_200);
    let (mut lp, mut h) = setup(&sim, unthrottled());
    assert_eq!(
        probe_watch_list(&mut h.client),
        Some(true),
        "the sim says 1.32"
    );
    let config = InformerConfig {
        reflector: ReflectorConfig {
            watch_list: true,
            ..ReflectorConfig::default()
        },
        ..InformerConfig::default()
    };
    h.pods = Some(Tracked::new(config.clone(), Id::Pods));
    h.leases = Some(Tracked::new(config, Id::Leases));
    h.start(lp.control());
    h.run_until(&mut lp, LIMIT, "sync", |h| {
        h.pods().informer.is_synced() && h.leases().informer.is_synced()
    });
    let renewed = later(&sim, 5);
    sim.cluster().renew_lease("node-3", renewed).unwrap();
    h.run_until(&mut lp, LIMIT, "a renewal on the same stream", |h| {
        renew_time(h, "node-3") == Some(renewed)
    });
    for stats in [h.pods().stats(), h.leases().stats()] {
        assert!(stats.reflector.watch_list, "{stats:?}");
        assert_eq!(stats.list_pages, 0, "{stats:?}");
        assert_eq!(stats.reflector.reconnects, 0, "{stats:?}");
    }
    let mut ctx = DecodeContext::new();
    let cluster = sim.cluster();
    assert_same(
        "pods",
        &h.pods().store,
        &decode_all::<Pod>(&cluster.list(Resource::Pods, None), &mut ctx),
    );
    assert_same(
        "leases",
        &h.leases().store,
        &decode_all::<Lease>(&cluster.list(Resource::Leases, None), &mut ctx),
    );
}

// ---- whether the cache follows the server after a failure (runtime/informer/currency.rs) --

/// Backoff of a first failure (0.5 s + 20 % jitter) and a round trip on loopback, with room
/// for a busy machine.
const RECONNECT: Duration = Duration::from_millis(600 + 400);

/// A synced Lease informer (`idle` timeout) whose watch is known to be up.
fn live_leases(sim: &SimHandle, idle: Duration) -> (EventLoop<Id, Id>, Harness) {
    add_nodes(sim, 3);
    let (mut lp, mut h) = setup(sim, unthrottled());
    h.leases = Some(Tracked::new(list_watch(idle), Id::Leases));
    h.start(lp.control());
    h.run_until(&mut lp, LIMIT, "sync", |h| h.leases().informer.is_synced());
    watch_is_live(sim, &mut lp, &mut h);
    assert!(h.leases().informer.is_streaming());
    (lp, h)
}

/// Bytes received on the Lease watches so far (a response head counts).
fn watch_bytes(h: &Harness) -> u64 {
    h.leases().stats().watch_bytes
}

/// A broken connection (the server drops every watch; a load balancer or an API server restart does
/// the same) says nothing against the server. On a quiet resource its successor sends no line for
/// most of its life, yet the cache is current again at its
/// response head (our version resumed, the backlog right behind it): the hold lasts the
/// reconnect, not until the first line. The successor is a probe the server ends a second
/// later (proof that it streams), and the next watch rotates on the same connection.
#[test]
fn a_dropped_watch_streams_again_at_its_successors_head_and_its_probe_ends_in_a_second() {
    let sim = SimServer::start(SimConfig::default()).unwrap();
    let (mut lp, mut h) = live_leases(&sim, Duration::from_secs(30));
    let events = h.leases().stats().watch_events;
    let kept = h.leases().stats().kept_connections;

    sim.faults().drop_watches();
    h.run_until(&mut lp, LIMIT, "the drop noticed", |h| {
        !h.leases().informer.is_streaming()
    });
    let back = h.run_until(&mut lp, LIMIT, "streaming again", |h| {
        h.leases().informer.is_streaming()
    });
    let stats = h.leases().stats();
    assert_eq!(stats.broken_watches, 1, "{stats:?}");
    assert_eq!(
        stats.watch_events, events,
        "no line arrived: the successor's head made the cache current"
    );
    assert!(
        back <= RECONNECT,
        "current again {back:?} after the drop was noticed: more than the reconnect"
    );
    assert!(
        h.leases().informer.currency().deadline().is_some(),
        "on probation"
    );

    // The probe's end (a kept connection's next watch) within a second or so; current all along.
    let mut always = true;
    let ended = h.run_until(&mut lp, Duration::from_secs(5), "the probe's end", |h| {
        always &= h.leases().informer.is_streaming();
        h.leases().stats().kept_connections > kept
    });
    println!("current again {back:?} after the drop; the probe ended {ended:?} later");
    assert!(always, "the cache stayed current through the probe");
    assert!(
        ended <= Duration::from_millis(1_500),
        "the probe ends after {PROBE_TIMEOUT_SECONDS} s: {ended:?}"
    );
    assert_eq!(h.leases().informer.currency().deadline(), None);
    assert_eq!(h.leases().stats().reflector.relists, 0);

    // An API server restart (every connection closed, new ones refused for a moment): the
    // same, after the refused reconnects' backoff.
    sim.faults().restart(Duration::from_millis(300));
    h.run_until(&mut lp, LIMIT, "the restart noticed", |h| {
        !h.leases().informer.is_streaming()
    });
    let events = h.leases().stats().watch_events;
    h.run_until(&mut lp, LIMIT, "streaming again after the restart", |h| {
        h.leases().informer.is_streaming()
    });
    assert_eq!(h.leases().stats().watch_events, events, "at the head");
}

/// The soak's `watch-freeze`: the server answers new watches and then sends nothing. A watch
/// that failed by silence (the idle timeout) is not current at its successor's head; nor after
/// a reset during the freeze (the silence is sticky); only a line, a clean end or a full state
/// clears it.
#[test]
fn after_an_idle_timeout_the_successors_head_alone_is_not_enough() {
    let sim = SimServer::start(SimConfig::default()).unwrap();
    let idle = Duration::from_secs(2);
    let (mut lp, mut h) = live_leases(&sim, idle);

    sim.faults().stall_watches(None);
    let renewed = later(&sim, 5);
    sim.cluster().renew_lease("node-1", renewed).unwrap();
    h.run_until(&mut lp, LIMIT, "idle timeout", |h| {
        h.leases().stats().idle_timeouts >= 1
    });
    assert!(!h.leases().informer.is_streaming());
    assert!(h.leases().informer.currency().is_silent());
    // The successor is answered (its head arrives), then nothing.
    let bytes = watch_bytes(&h);
    h.run_until(&mut lp, LIMIT, "the successor's head", |h| {
        watch_bytes(h) > bytes
    });
    let mut current = false;
    h.observe_for(&mut lp, idle - Duration::from_millis(300), |h| {
        current |= h.leases().informer.is_streaming();
    });
    assert!(!current, "a head after silence counted as current");

    // A reset during the freeze: its successor's head does not count either.
    let broken = h.leases().stats().broken_watches;
    sim.faults().drop_watches();
    h.run_until(&mut lp, LIMIT, "the drop noticed", |h| {
        h.leases().stats().broken_watches > broken || h.leases().stats().idle_timeouts > 1
    });
    let bytes = watch_bytes(&h);
    h.run_until(&mut lp, LIMIT, "the next successor's head", |h| {
        watch_bytes(h) > bytes
    });
    let mut current = false;
    h.observe_for(&mut lp, Duration::from_millis(1_500), |h| {
        current |= h.leases().informer.is_streaming();
    });
    assert!(
        !current,
        "a head after a reset during a freeze counted as current"
    );

    // The freeze ends: the renewal written during it arrives, and with it the cache is current.
    sim.faults().clear_stall();
    h.run_until(&mut lp, LIMIT, "current after the freeze", |h| {
        h.leases().informer.is_streaming()
    });
    h.run_until(
        &mut lp,
        LIMIT,
        "the renewal written during the freeze",
        |h| renew_time(h, "node-1") == Some(renewed),
    );
    assert!(!h.leases().informer.currency().is_silent());
}

/// A reset during a freeze the idle timeout has not caught yet looks like a plain reset: the
/// successor's head counts. Its probe does not end (the server sends nothing), so within
/// `PROBATION` of the head the cache is not current again, and the failure counts as silent
/// from then on.
#[test]
fn a_reset_during_a_freeze_not_yet_caught_is_found_out_by_its_probe() {
    let sim = SimServer::start(SimConfig::default()).unwrap();
    let (mut lp, mut h) = live_leases(&sim, Duration::from_secs(30));

    sim.faults().stall_watches(None);
    sim.faults().drop_watches();
    h.run_until(&mut lp, LIMIT, "the drop noticed", |h| {
        !h.leases().informer.is_streaming()
    });
    h.run_until(&mut lp, LIMIT, "current at the head", |h| {
        h.leases().informer.is_streaming()
    });
    let found_out = h.run_until(&mut lp, LIMIT, "the probe's end missed", |h| {
        !h.leases().informer.is_streaming()
    });
    println!("current at the successor's head, then not again {found_out:?} later");
    assert!(
        found_out >= PROBATION - Duration::from_millis(100)
            && found_out <= PROBATION + Duration::from_millis(500),
        "{found_out:?}, probation {PROBATION:?}"
    );
    assert!(h.leases().informer.currency().is_silent());
    assert_eq!(h.leases().stats().idle_timeouts, 0, "not the idle timeout");

    // Another reset: still waiting for a line.
    let broken = h.leases().stats().broken_watches;
    sim.faults().drop_watches();
    h.run_until(&mut lp, LIMIT, "the second drop noticed", |h| {
        h.leases().stats().broken_watches > broken
    });
    let bytes = watch_bytes(&h);
    h.run_until(&mut lp, LIMIT, "the next successor's head", |h| {
        watch_bytes(h) > bytes
    });
    let mut current = false;
    h.observe_for(&mut lp, Duration::from_millis(1_500), |h| {
        current |= h.leases().informer.is_streaming();
    });
    assert!(!current);

    // The freeze ends and a renewal follows: the line makes the cache current.
    sim.faults().clear_stall();
    sim.cluster().renew_lease("node-2", later(&sim, 5)).unwrap();
    h.run_until(&mut lp, LIMIT, "current after the freeze", |h| {
        h.leases().informer.is_streaming()
    });
}
