//! The initial sync's decode, alone: pods as a watch-list delivers them (one protobuf `ADDED`
//! frame each, enveloped as kube-apiserver writes them, the simulator's encoder), decoded into
//! the compact `Pod` with one shared context, as the daemon's informer does. Nothing else is
//! timed (no TLS, no framing, no store), so instructions per pod under callgrind are the
//! decoder's own:
//!
//! ```sh
//! cargo run --release --example pod_sync_decode -- --pods 150000
//! valgrind --tool=callgrind --toggle-collect='pod_sync_decode::decode_all' \
//!   target/release/examples/pod_sync_decode --pods 30000
//! ```
//!
//! With `--store`, the decoded pods are kept and then put into an empty `ClusterStore` as the
//! informer's full state does (`begin_full_state`, an upsert per pod, `end_full_state`), each
//! stage a function of its own (`decode_into`, `store_all`) for `--toggle-collect`:
//!
//! ```sh
//! valgrind --tool=callgrind --toggle-collect='pod_sync_decode::decode_into' \
//!   --toggle-collect='pod_sync_decode::store_all' \
//!   target/release/examples/pod_sync_decode --pods 30000 --store
//! callgrind_annotate --inclusive=yes callgrind.out.<pid> | grep pod_sync_decode::
//! ```
//!
//! The pods come in the order they are made (the namespace changes from one pod to the next)
//! unless `--key-order` sorts them by namespace and name, the order in which a LIST or a
//! watch-list delivers them (etcd's and the watch cache's key order; the simulator's too).

use std::hint::black_box;
use std::process::ExitCode;
use std::time::Instant;

use node_lifecycled::kube::decode::proto;
use node_lifecycled::kube::decode::{DecodeContext, WatchEvent};
use node_lifecycled::model::Pod;
use node_lifecycled::model::{ClusterStore, Kind};
use node_lifecycled_sim::Resource;
use node_lifecycled_sim::fixtures::running_pod;
use node_lifecycled_sim::protobuf_message as encode_object;
use serde_json::json;

#[path = "support/proto_frames.rs"]
mod proto_frames;

/// `WatchEvent {type: "ADDED", object: RawExtension {raw: k8s\0 + runtime.Unknown}}`.
fn added_frame(message: &[u8]) -> Vec<u8> {
    proto_frames::watch_event(b"ADDED", &proto_frames::envelope(b"v1", b"Pod", message))
}

/// Never inlined, so callgrind can count it alone (`--toggle-collect`).
#[inline(never)]
fn decode_all(frames: &[Vec<u8>], ctx: &mut DecodeContext) -> usize {
    let mut pods = 0;
    for frame in frames {
        match proto::decode_watch_event::<Pod>(frame, ctx) {
            Ok(WatchEvent::Added(pod)) => {
                black_box(pod);
                pods += 1;
            }
            other => panic!("not a pod: {other:?}"),
        }
    }
    pods
}

/// The decode stage of `--store`: the pods kept for [`store_all`]. Never inlined (callgrind).
#[inline(never)]
fn decode_into(frames: &[Vec<u8>], ctx: &mut DecodeContext) -> Vec<Pod> {
    let mut pods = Vec::with_capacity(frames.len());
    for frame in frames {
        match proto::decode_watch_event::<Pod>(frame, ctx) {
            Ok(WatchEvent::Added(pod)) => pods.push(pod),
            other => panic!("not a pod: {other:?}"),
        }
    }
    pods
}

/// The store stage of `--store`: a full state from empty, as the informer delivers it (the
/// controllers' `World::apply` does the same calls). Never inlined (callgrind).
#[inline(never)]
fn store_all(pods: Vec<Pod>, store: &mut ClusterStore) -> usize {
    store.begin_full_state(Kind::Pods);
    for pod in pods {
        black_box(store.upsert_pod(pod));
    }
    black_box(store.end_full_state(Kind::Pods));
    store.pod_count()
}

fn main() -> ExitCode {
    let mut pods = 30_000usize;
    let mut with_store = false;
    let mut key_order = false;
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        if flag == "--store" {
            with_store = true;
            continue;
        }
        if flag == "--key-order" {
            key_order = true;
            continue;
        }
        match (flag.as_str(), args.next().map(|v| v.parse::<usize>())) {
            ("--pods", Some(Ok(n))) if n > 0 => pods = n,
            _ => {
                eprintln!("usage: pod_sync_decode [--pods N] [--store] [--key-order]");
                return ExitCode::from(2);
            }
        }
    }
    // 30 pods a node, ten namespaces, names as Deployments generate them.
    let mut order: Vec<usize> = (0..pods).collect();
    if key_order {
        // `team-{i % 10}` / `web-…-{i:05x}`: the namespace first, then the name.
        order.sort_by_key(|&i| (i % 10, format!("web-{:08x}-{:05x}", i / 3, i)));
    }
    let frames: Vec<Vec<u8>> = order
        .into_iter()
        .map(|i| {
            let node = format!("node-{:05}", i / 30);
            let name = format!("web-{:08x}-{:05x}", i / 3, i);
            let mut pod = running_pod(&format!("team-{}", i % 10), &name, Some(&node));
            pod["metadata"]["uid"] = json!(format!("6f1c2a4e-0000-4000-8000-{i:012}"));
            pod["metadata"]["resourceVersion"] = json!((1000 + i).to_string());
            pod["metadata"]["creationTimestamp"] = json!("2026-01-01T00:00:00Z");
            pod["metadata"]["ownerReferences"] = json!([{"apiVersion": "apps/v1",
                "kind": "ReplicaSet", "name": format!("web-{:08x}", i / 3),
                "uid": "5d1b0c1e-0000-4000-8000-000000000000", "controller": true}]);
            added_frame(&encode_object(Resource::Pods, &pod).expect("pod encodes"))
        })
        .collect();
    let bytes: usize = frames.iter().map(Vec::len).sum();
    let mut ctx = DecodeContext::new();
    if with_store {
        let start = Instant::now();
        let decoded = decode_into(&frames, &mut ctx);
        let decode_took = start.elapsed();
        let mut store = ClusterStore::new();
        let start = Instant::now();
        let stored = store_all(decoded, &mut store);
        let store_took = start.elapsed();
        println!(
            "{stored} pods stored: decode {:.0} ns per pod, store {:.0} ns per pod",
            decode_took.as_nanos() as f64 / pods as f64,
            store_took.as_nanos() as f64 / pods as f64
        );
        return ExitCode::SUCCESS;
    }
    let start = Instant::now();
    let decoded = decode_all(&frames, &mut ctx);
    let took = start.elapsed();
    println!(
        "{decoded} pods, {} bytes each on average: {:.0} ns per pod, {:.1} ns per byte",
        bytes / pods,
        took.as_nanos() as f64 / pods as f64,
        took.as_nanos() as f64 / bytes as f64
    );
    ExitCode::SUCCESS
}
