//! Responsive informers at scale, end to end over real sockets against the simulated API server:
//! 10,000 bound pods listed in pages, then watched through a burst of 5,000 mixed events, then a
//! forced 410 relist with deletions in between. After each phase the store built from the
//! informer's deltas equals the server's objects decoded through the same path.

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::informer_support::{
    Harness, Id, Tracked, assert_same, decode_all, list_watch, plain_connection, unthrottled,
};
use node_lifecycled::kube::Credentials;
use node_lifecycled::kube::decode::DecodeContext;
use node_lifecycled::model::{Pod, PodKey};
use node_lifecycled::runtime::{Clock, EventLoop};
use node_lifecycled_sim::{Cluster, Resource, SimConfig, SimServer, fixtures};
use serde_json::{Value, json};

const BOUND: usize = 10_000;
const UNBOUND: usize = 1_000;
const BURST: usize = 5_000;
const HISTORY: usize = 6_000;

fn pod_name(i: usize) -> String {
    format!("pod-{i:05}")
}

fn namespace(i: usize) -> String {
    format!("ns-{}", i % 7)
}

/// Bound pods as the server has them, decoded like the informer's.
fn server_pods(
    cluster: &Cluster,
    ctx: &mut DecodeContext,
) -> std::collections::HashMap<PodKey, Pod> {
    let bound: Vec<Value> = cluster
        .list(Resource::Pods, None)
        .into_iter()
        .filter(|p| {
            p["spec"]["nodeName"]
                .as_str()
                .is_some_and(|n| !n.is_empty())
        })
        .collect();
    decode_all::<Pod>(&bound, ctx)
}

fn flip_ready(cluster: &Cluster, i: usize, ready: bool) -> Value {
    cluster
        .update(Resource::Pods, Some(&namespace(i)), &pod_name(i), |v| {
            v["status"]["conditions"] = json!([
                {"type": "PodScheduled", "status": "True"},
                {"type": "Ready", "status": if ready { "True" } else { "False" }}
            ]);
        })
        .unwrap()
}

/// 5,000 changes, each exactly one event on the bound-pod watch: new bound pods, Ready flips,
/// removals, bindings of pending pods (they enter the watch as ADDED) and added tolerations.
/// Returns the resourceVersion of the last change.
fn mixed_burst(cluster: &Cluster) -> u64 {
    let mut last = Value::Null;
    for i in 0..BURST {
        let k = i / 5; // 0..1000
        last = match i % 5 {
            0 => cluster
                .create(
                    Resource::Pods,
                    fixtures::running_pod("burst", &format!("new-{k:04}"), Some("node-1")),
                )
                .unwrap(),
            1 => flip_ready(cluster, k, false),
            2 => cluster
                .remove(Resource::Pods, Some(&namespace(1000 + k)), &pod_name(1000 + k))
                .unwrap(),
            3 => {
                let i = BOUND + k;
                cluster
                    .update(Resource::Pods, Some(&namespace(i)), &pod_name(i), |v| {
                        v["spec"]["nodeName"] = json!(format!("node-{}", k % 50));
                    })
                    .unwrap()
            }
            _ => cluster
                .update(
                    Resource::Pods,
                    Some(&namespace(2000 + k)),
                    &pod_name(2000 + k),
                    |v| {
                        v["spec"]["tolerations"]
                            .as_array_mut()
                            .unwrap()
                            .push(json!({"key": "dedicated", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 60}))
                    },
                )
                .unwrap(),
        };
    }
    last["metadata"]["resourceVersion"]
        .as_str()
        .and_then(|rv| rv.parse().ok())
        .expect("a resourceVersion")
}

fn rv_reached(pods: &Tracked<Pod>, rv: u64) -> bool {
    pods.stats()
        .reflector
        .resource_version
        .and_then(|v| v.parse::<u64>().ok())
        .is_some_and(|v| v >= rv)
}

#[test]
fn ten_thousand_pods_listed_in_pages_then_watched_stay_equal_to_the_server_through_a_burst_and_a_410_relist()
 {
    let sim = SimServer::start(SimConfig {
        history_size: HISTORY,
        ..SimConfig::default()
    })
    .unwrap();
    let cluster = sim.cluster();
    let started = Instant::now();
    for i in 0..BOUND + UNBOUND {
        let node = (i < BOUND).then(|| format!("node-{}", i % 50));
        cluster
            .create(
                Resource::Pods,
                fixtures::running_pod(&namespace(i), &pod_name(i), node.as_deref()),
            )
            .unwrap();
    }
    println!(
        "created {} pods in {:?}",
        BOUND + UNBOUND,
        started.elapsed()
    );

    let clock = Clock::start();
    let mut lp: EventLoop<Id, Id> = EventLoop::new(clock.clone()).unwrap();
    let mut h = Harness::new(
        plain_connection(sim.url(), Credentials::None),
        &clock,
        unthrottled(),
    );
    h.pods = Some(Tracked::new(list_watch(Duration::from_secs(60)), Id::Pods));
    h.start(lp.control());
    let took = h.run_until(&mut lp, Duration::from_secs(60), "initial list", |h| {
        h.pods().informer.is_synced()
    });
    let stats = h.pods().stats();
    println!(
        "listed {} bound pods in {} pages ({} bytes) in {took:?}",
        h.pods().store.len(),
        stats.list_pages,
        stats.list_bytes
    );
    // A filtered list may end with an empty page (unbound pods sort after the last bound one),
    // as the real server's does.
    assert!(
        (20..=21).contains(&stats.list_pages),
        "10,000 pods in pages of 500: {} pages",
        stats.list_pages
    );
    assert_eq!(h.pods().store.len(), BOUND);
    let mut ctx = DecodeContext::new();
    assert_same(
        "after the list",
        &h.pods().store,
        &server_pods(&cluster, &mut ctx),
    );

    // Phase 1: the burst, written by another thread while the loop consumes the watch.
    let events_before = stats.watch_events;
    let last_rv = AtomicU64::new(u64::MAX);
    let took = std::thread::scope(|s| {
        let writer = cluster.clone();
        let last_rv = &last_rv;
        s.spawn(move || last_rv.store(mixed_burst(&writer), Ordering::SeqCst));
        h.run_until(&mut lp, Duration::from_secs(60), "the burst", |h| {
            rv_reached(h.pods(), last_rv.load(Ordering::SeqCst))
        })
    });
    let stats = h.pods().stats();
    println!(
        "{BURST} mixed events watched in {took:?} ({} event lines)",
        stats.watch_events - events_before
    );
    assert_eq!(stats.reflector.relists, 0);
    assert_eq!(stats.reflector.skipped_events, 0);
    assert_same(
        "after the burst",
        &h.pods().store,
        &server_pods(&cluster, &mut ctx),
    );
    assert_eq!(h.pods().store.len(), BOUND + BURST / 5);
    assert_eq!(stats.watch_events - events_before, BURST as u64);

    // Phase 2: the watch stalls; meanwhile pods are removed and enough changes are made to
    // fall out of the server's history. Resuming gets 410, the relist must emit the deletions.
    sim.faults().stall_watches(None);
    let removed: HashSet<PodKey> = (6_000..6_500)
        .map(|i| {
            cluster
                .remove(Resource::Pods, Some(&namespace(i)), &pod_name(i))
                .unwrap();
            PodKey {
                namespace: namespace(i).into(),
                name: pod_name(i).into(),
            }
        })
        .collect();
    for round in 0..2 {
        for i in 7_000..10_000 {
            flip_ready(&cluster, i, round == 1);
        }
    }
    let deleted_before = h.pods().deleted.len();
    sim.faults().clear_stall();
    let took = h.run_until(&mut lp, Duration::from_secs(60), "the 410 relist", |h| {
        h.pods().stats().reflector.relists == 1 && h.pods().syncs == 2
    });
    let stats = h.pods().stats();
    println!(
        "410 relist done in {took:?}: {} pages in all; last error {:?}",
        stats.list_pages, stats.reflector.last_error
    );
    assert!(
        stats
            .reflector
            .last_error
            .as_deref()
            .is_some_and(|e| e.contains("410")),
        "{stats:?}"
    );
    let deleted: HashSet<PodKey> = h.pods().deleted[deleted_before..].iter().cloned().collect();
    assert_eq!(
        deleted, removed,
        "the relist deleted exactly the removed pods"
    );
    assert_same(
        "after the relist",
        &h.pods().store,
        &server_pods(&cluster, &mut ctx),
    );
}

/// The first full state is one `resourceVersion=0` LIST (the watch cache's answer, as
/// kube-controller-manager's informers ask), read as it arrives and handed on a page's worth of
/// items per loop turn: the store equals the server, and the loop turned between the parts.
#[test]
fn the_first_list_is_one_watch_cache_response_streamed_into_the_store_a_page_per_loop_turn() {
    first_list_streamed(Wire::Json);
}

/// The same in protobuf, as kube-apiserver answers the daemon's default `Accept`.
#[test]
fn the_first_list_in_protobuf_is_one_watch_cache_response_streamed_into_the_store_a_page_per_loop_turn()
 {
    first_list_streamed(Wire::Protobuf);
}

#[derive(Clone, Copy, PartialEq)]
enum Wire {
    Json,
    Protobuf,
}

fn first_list_streamed(wire: Wire) {
    let sim = SimServer::start(SimConfig {
        protobuf: wire == Wire::Protobuf,
        ..SimConfig::default()
    })
    .unwrap();
    let cluster = sim.cluster();
    for i in 0..BOUND + UNBOUND {
        let node = (i < BOUND).then(|| format!("node-{}", i % 50));
        cluster
            .create(
                Resource::Pods,
                fixtures::running_pod(&namespace(i), &pod_name(i), node.as_deref()),
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
    let mut config = list_watch(Duration::from_secs(60));
    config.reflector.initial_list_from_cache = true;
    h.pods = Some(Tracked::new(config, Id::Pods));
    h.start(lp.control());
    h.run_until(&mut lp, Duration::from_secs(60), "initial list", |h| {
        h.pods().informer.is_synced()
    });
    let stats = h.pods().stats();
    assert_eq!(stats.list_pages, 1, "one response, not pages");
    match wire {
        Wire::Json => {
            assert_eq!(stats.protobuf_lists, 0);
            assert!(stats.list_bytes > 5_000_000, "{} bytes", stats.list_bytes);
        }
        Wire::Protobuf => {
            assert_eq!(stats.protobuf_lists, 1);
            assert!(stats.list_bytes > 3_000_000, "{} bytes", stats.list_bytes);
        }
    }
    assert!(
        h.call_cpu.len() >= BOUND / 500,
        "the loop turned between the parts: {} informer calls",
        h.call_cpu.len()
    );
    assert_eq!(h.pods().store.len(), BOUND);
    let mut ctx = DecodeContext::new();
    assert_same(
        "after the streamed list",
        &h.pods().store,
        &server_pods(&cluster, &mut ctx),
    );
    // The watch resumes from the list's version: a change made now arrives.
    let rv = flip_ready(&cluster, 3, false)["metadata"]["resourceVersion"]
        .as_str()
        .and_then(|v| v.parse().ok())
        .unwrap();
    h.run_until(&mut lp, Duration::from_secs(30), "the change", |h| {
        rv_reached(h.pods(), rv)
    });
    assert_eq!(h.pods().stats().reflector.relists, 0);
    assert_same(
        "after a change",
        &h.pods().store,
        &server_pods(&cluster, &mut ctx),
    );
}
