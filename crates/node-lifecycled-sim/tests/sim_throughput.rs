//! How much the simulator takes: sustained writes with a watch open, and LIST pages out of a
//! benchmark-sized pod population. Numbers are printed (`--nocapture`); the assertions only
//! guard against a collapse, since this runs in debug builds on shared machines.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use node_lifecycled_sim::client::{Api, RawWatch, WatchItem};
use node_lifecycled_sim::{Resource, SimConfig, SimServer, fixtures};
use serde_json::json;

#[test]
fn sustained_writes_per_second_with_a_watch_open() {
    let sim = SimServer::start(SimConfig::default()).unwrap();
    let cluster = sim.cluster();
    for i in 0..200 {
        cluster
            .create(
                Resource::Nodes,
                fixtures::ready_node(&format!("n{i}"), Some("z1"), cluster.now()),
            )
            .unwrap();
    }
    let rv = cluster.resource_version();
    let mut watch = RawWatch::open(
        sim.addr(),
        &format!("/api/v1/nodes?watch=true&resourceVersion={rv}"),
    );
    let writes = Arc::new(AtomicU64::new(0));
    let run_for = Duration::from_secs(2);
    let writers: Vec<_> = (0..4)
        .map(|w| {
            let url = sim.url().to_string();
            let writes = writes.clone();
            std::thread::spawn(move || {
                let api = Api::with_token(&url, &format!("writer-{w}"));
                let started = Instant::now();
                let mut i = 0u64;
                while started.elapsed() < run_for {
                    let node = (i * 4 + w) % 200;
                    let r = api.strategic(
                        &format!("/api/v1/nodes/n{node}"),
                        &json!({"metadata": {"labels": {"seq": i.to_string()}}}),
                    );
                    assert_eq!(r.code, 200);
                    writes.fetch_add(1, Ordering::Relaxed);
                    i += 1;
                }
            })
        })
        .collect();
    let started = Instant::now();
    let mut events = 0u64;
    loop {
        match watch.next(Duration::from_millis(500)) {
            WatchItem::Line(_) => events += 1,
            WatchItem::Quiet if started.elapsed() > run_for => break,
            WatchItem::Quiet => {}
            other => panic!("watch ended: {other:?}"),
        }
    }
    for w in writers {
        w.join().unwrap();
    }
    let total = writes.load(Ordering::Relaxed);
    let rate = total as f64 / run_for.as_secs_f64();
    println!(
        "sustained {rate:.0} writes/s over HTTP (4 keep-alive clients, 1 watch open); watch delivered {events} events"
    );
    assert_eq!(events, total, "the watch saw every write");
    assert!(rate > 100.0, "{rate:.0} writes/s");
    assert_eq!(sim.writes().len() as u64, total);
}

/// The benchmark population: 150,000 pods on 5,000 nodes. Slow to build in a debug build, so
/// run it on purpose: `cargo test --test sim_throughput -- --ignored --nocapture`.
#[test]
#[ignore]
fn list_pages_of_500_out_of_150000_pods() {
    let sim = SimServer::start(SimConfig::default()).unwrap();
    let cluster = sim.cluster();
    let started = Instant::now();
    for i in 0..150_000 {
        let node = format!("node-{:04}", i % 5000);
        cluster
            .create(
                Resource::Pods,
                fixtures::running_pod(
                    &format!("ns-{}", i % 20),
                    &format!("pod-{i:06}"),
                    Some(&node),
                ),
            )
            .unwrap();
    }
    println!("created 150,000 pods in {:?}", started.elapsed());
    let api = Api::new(sim.url());
    let mut token = String::new();
    let mut slowest = Duration::ZERO;
    let mut total = 0;
    let started = Instant::now();
    loop {
        let page_started = Instant::now();
        let body = api
            .get(&format!(
                "/api/v1/pods?limit=500&fieldSelector=spec.nodeName%21%3D&continue={token}"
            ))
            .body;
        slowest = slowest.max(page_started.elapsed());
        total += body["items"].as_array().unwrap().len();
        match body["metadata"]["continue"].as_str() {
            Some(t) => token = t.to_string(),
            None => break,
        }
    }
    println!(
        "listed {total} pods in {:?}, slowest page of 500 {slowest:?}",
        started.elapsed()
    );
    assert_eq!(total, 150_000);
    assert!(slowest < Duration::from_secs(1), "{slowest:?}");
}
