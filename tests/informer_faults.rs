//! Informers against a misbehaving API server (the simulator's fault injector), end to end over
//! real sockets on the real event loop: a stalled watch is caught by the idle timeout and
//! resumed, a dropped one resumes from its resourceVersion without a relist, a corrupt line is
//! skipped without losing later events, a throttled LIST waits on a timer, an expired continue
//! token restarts the list, bearer tokens reach the watch, and watch-list is used against 1.32.

mod informer_support;
mod load_support;

use std::time::{Duration, Instant};

use informer_support::{
    Harness, Id, Tracked, assert_same, decode_all, list_watch, plain_connection, unthrottled,
};
use load_support::runqueue_wait;
use node_lifecycled::kube::decode::DecodeContext;
use node_lifecycled::kube::reflector::ReflectorConfig;
use node_lifecycled::kube::{ClientSettings, Credentials};
use node_lifecycled::model::{Lease, Node, Pod};
use node_lifecycled::runtime::informer::{InformerConfig, probe_watch_list};
use node_lifecycled::runtime::{Clock, EventLoop};
use node_lifecycled::time::Rate;
use node_lifecycled::time::Time;
use node_lifecycled_sim::{
    RequestMatch, Resource, SimConfig, SimHandle, SimServer, Verb, fixtures,
};

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
    let settings = ClientSettings {
        qps: Some(Rate::per_second(5)),
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
        "4 pages at 5 qps in {took:?}: {} postponed, {} probe firings, lateness max {max:?}, longest informer call {:?} of CPU",
        stats.throttled_lists,
        probe.lateness.len(),
        h.max_call_cpu
    );
    assert_eq!(stats.list_pages, 4, "400 pods in pages of 100");
    assert!(stats.throttled_lists >= 3, "{stats:?}");
    assert!(
        took >= Duration::from_millis(550),
        "3 pages waited 200 ms each: {took:?}"
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
