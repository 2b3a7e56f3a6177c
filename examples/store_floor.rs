//! What the cluster store spends per pod, against the bytes a pod's record must keep.
//!
//! The pods are shaped as a cluster's are: generated names of a Deployment's pods
//! (`web-5d8f7c9b6d-x7k2p`), ten namespaces, a node each, the two not-ready/unreachable
//! tolerations admission adds (shared: every such pod points at one set), a DaemonSet pod per
//! node. The heap is measured by a counting allocator (live bytes after the pods are in, less
//! before), so it includes the interner, the index and every vector's spare capacity; the
//! store's own estimate (`ClusterStore::heap_bytes`, what the state dump prints) is shown
//! beside it.
//!
//! The floor is what the controllers read of a pod, each field at its smallest: the name's
//! bytes (the namespace is one of a few, kept once), a 16-byte uid (deletions carry it as a
//! precondition), the node, the tolerations and the namespace as 4-byte references, one byte of
//! flags (Ready, being deleted, owned by a DaemonSet), the creation second (4 bytes: taint
//! eviction's countdowns at a takeover), and an index entry to find it by name (an 8-byte hash
//! and a 4-byte slot) and one by node (4 bytes).
//!
//! ```sh
//! cargo run --release --example store_floor -- --nodes 5000
//! ```

use std::process::ExitCode;

use node_lifecycled::kube::decode::{DecodeContext, decode_object};
use node_lifecycled::model::{ClusterStore, Pod};
use node_lifecycled::time::Rng;

use node_lifecycled_sim::testing::{CountingAlloc, live_blocks, live_bytes};

#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc::new();

const PODS_PER_NODE: usize = 30;

/// The bytes the floor keeps per pod besides its name.
const FLOOR_FIXED: usize = 16 + 4 + 4 + 4 + 1 + 4 + 8 + 4 + 4;

fn suffix(rng: &mut Rng, len: usize) -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    (0..len)
        .map(|_| ALPHABET[rng.below(ALPHABET.len() as u64) as usize] as char)
        .collect()
}

fn pod_json(rng: &mut Rng, node: usize, k: usize) -> (String, usize) {
    let node_name = format!("node-{node:05}");
    let (name, owner) = if k == 0 {
        (format!("node-exporter-{}", suffix(rng, 5)), "DaemonSet")
    } else {
        let app = ["web", "api", "worker", "cache", "ingest"][k % 5];
        (
            format!("{app}-{}-{}", suffix(rng, 10), suffix(rng, 5)),
            "ReplicaSet",
        )
    };
    let hex = |rng: &mut Rng, digits: usize| {
        (0..digits)
            .map(|_| char::from_digit(rng.below(16) as u32, 16).unwrap_or('0'))
            .collect::<String>()
    };
    let uid = format!(
        "{}-{}-4{}-a{}-{}",
        hex(rng, 8),
        hex(rng, 4),
        hex(rng, 3),
        hex(rng, 3),
        hex(rng, 12)
    );
    let text = format!(
        r#"{{"metadata":{{"name":"{name}","namespace":"team-{}","uid":"{uid}","resourceVersion":"{}","creationTimestamp":"2026-11-26T09:14:{:02}Z","ownerReferences":[{{"apiVersion":"apps/v1","kind":"{owner}","name":"x","uid":"o","controller":true}}]}},"spec":{{"nodeName":"{node_name}","tolerations":[{{"key":"node.kubernetes.io/not-ready","operator":"Exists","effect":"NoExecute","tolerationSeconds":300}},{{"key":"node.kubernetes.io/unreachable","operator":"Exists","effect":"NoExecute","tolerationSeconds":300}}]}},"status":{{"conditions":[{{"type":"Ready","status":"True"}}]}}}}"#,
        k % 10,
        node * PODS_PER_NODE + k + 1,
        k * 2,
    );
    (text, name.len())
}

fn main() -> ExitCode {
    let mut nodes = 5000usize;
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        match (flag.as_str(), args.next().and_then(|v| v.parse().ok())) {
            ("--nodes", Some(n)) if n > 0 => nodes = n,
            _ => {
                eprintln!("usage: store_floor [--nodes N]");
                return ExitCode::from(2);
            }
        }
    }
    let mut rng = Rng::new(7);
    // Decoded first, so the measured heap is the store's, not the JSON's.
    let mut ctx = DecodeContext::new();
    let mut pods = Vec::with_capacity(nodes * PODS_PER_NODE);
    let mut name_bytes = 0usize;
    for node in 0..nodes {
        for k in 0..PODS_PER_NODE {
            let (text, name_len) = pod_json(&mut rng, node, k);
            name_bytes += name_len;
            pods.push(text);
        }
    }
    let count = pods.len();
    let before = live_bytes();
    let blocks_before = live_blocks();
    let mut store = ClusterStore::new();
    for text in &pods {
        let pod: Pod = decode_object(text.as_bytes(), &mut ctx).expect("pod decodes");
        store.upsert_pod(pod);
    }
    let measured = live_bytes() - before;
    let blocks = live_blocks() - blocks_before;
    let estimate = store.heap_bytes().pods;
    let floor = name_bytes + count * FLOOR_FIXED;
    let per = |b: usize| b as f64 / count as f64;
    println!(
        "{count} pods on {nodes} nodes (names {:.1} bytes on average)",
        per(name_bytes)
    );
    println!(
        "measured heap (store + interner, allocator count): {:>7.1} B/pod",
        per(measured.max(0) as usize)
    );
    println!(
        "live allocations (store + interner):               {:>7.3} per pod",
        blocks as f64 / count as f64
    );
    println!(
        "the store's own estimate (state dump):             {:>7.1} B/pod",
        per(estimate)
    );
    println!(
        "floor (name, uid, 3 refs, flags, created, indexes):{:>7.1} B/pod",
        per(floor)
    );
    println!(
        "gap to the floor: {:.1} B/pod ({:.2}x the floor)",
        per(measured.max(0) as usize) - per(floor),
        measured as f64 / floor as f64
    );
    drop(store);
    ExitCode::SUCCESS
}
