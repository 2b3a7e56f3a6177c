//! What the daemon spends per node, against the bytes a node's record must keep.
//!
//! The nodes are shaped as a kubelet registers them (the label set of
//! `crates/kube/src/decode/fixtures/watch_node_status_heartbeat.json`): hostname, arch and os in GA
//! and beta forms, instance type, zone and region in GA and beta forms (3 zones, 1 region), a
//! node-role label, four annotations, five conditions with the kubelet's and Calico's reasons and
//! messages, addresses, capacity, nodeInfo and eight images (dropped at decode time), and a Lease
//! each. The heap is measured by a counting allocator (live bytes and allocations after the
//! objects are in, less before), so it includes the interner, the indexes and every vector's
//! spare capacity:
//! 1. the store alone (`ClusterStore` fed by the decoder, as a full state), with the store's own estimate
//!    (`ClusterStore::heap_bytes`, what the state dump prints) beside it;
//! 2. `Controllers` synced and leading (the store, `NodeLifecycle`'s entries, deadline lanes and
//!    zone maps, taint eviction's per-node state), less the store: the controllers' own share.
//!
//! The floor is what the decisions and writes read of a node, each field at its smallest: the
//! name's bytes (shared by the Lease and the pods: kept once), a 16-byte uid, an 8-byte
//! resourceVersion, the creation second (4 bytes), a 4-byte reference to the node's label set
//! (nodes of one zone, arch and os share it), a flags byte (unschedulable, maintenance,
//! autonomy), per condition a status byte and two 4-byte seconds (heartbeat, transition; reason
//! and message as a 4-byte reference to a shared pair), a 4-byte reference to the taint list,
//! the Lease's renewal (8 bytes, microseconds), duration (4) and resourceVersion (8), and an index
//! entry to find the node by name (an 8-byte hash and a 4-byte slot).
//!
//! ```sh
//! cargo run --release --example node_floor -- --nodes 5000
//! ```

use std::process::ExitCode;
use std::time::Duration;

use node_lifecycled::controller::{
    Controllers, Input, Settings, node_entry_sizes as node_lifecycle_entry_sizes,
};
use node_lifecycled::kube::decode::{DecodeContext, decode_object};
use node_lifecycled::model::{ClusterStore, Kind, Lease, Name, Node, NodeCondition, Taint};
use node_lifecycled::time::Time;

use node_lifecycled_sim::testing::{CountingAlloc, live_blocks, live_bytes};

#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc::new();

/// The bytes the floor keeps per node besides its name (see the module comment).
const FLOOR_FIXED: usize = 16 + 8 + 4 + 4 + 1 + 5 * (1 + 4 + 4 + 4) + 4 + (8 + 4 + 8) + (8 + 4);

fn node_name(i: usize) -> String {
    format!("node-{i:05}")
}

fn node_json(i: usize, t0: Time) -> String {
    let name = node_name(i);
    let zone = ["a", "b", "c"][i % 3];
    let itype = ["m5.2xlarge", "m5.4xlarge"][i % 2];
    let since = t0.to_rfc3339();
    let condition = |kind: &str, status: &str, reason: &str, message: &str| {
        format!(
            r#"{{"type":"{kind}","status":"{status}","lastHeartbeatTime":"{since}","lastTransitionTime":"{since}","reason":"{reason}","message":"{message}"}}"#
        )
    };
    let conditions = [
        condition(
            "NetworkUnavailable",
            "False",
            "CalicoIsUp",
            "Calico is running on this node",
        ),
        condition(
            "MemoryPressure",
            "False",
            "KubeletHasSufficientMemory",
            "kubelet has sufficient memory available",
        ),
        condition(
            "DiskPressure",
            "False",
            "KubeletHasNoDiskPressure",
            "kubelet has no disk pressure",
        ),
        condition(
            "PIDPressure",
            "False",
            "KubeletHasSufficientPID",
            "kubelet has sufficient PID available",
        ),
        condition(
            "Ready",
            "True",
            "KubeletReady",
            "kubelet is posting ready status. AppArmor enabled",
        ),
    ]
    .join(",");
    let images = (0..8)
        .map(|k| {
            format!(
                r#"{{"names":["registry.example.com/team/app-{k}@sha256:{:064x}","registry.example.com/team/app-{k}:v1.{k}"],"sizeBytes":{}}}"#,
                k * 7919 + 13,
                1_000_000 * (k + 1)
            )
        })
        .collect::<Vec<_>>()
        .join(",");
    format!(
        r#"{{"kind":"Node","apiVersion":"v1","metadata":{{"name":"{name}","uid":"dfbeba1f-2127-4345-8cec-{i:012x}","resourceVersion":"{}","creationTimestamp":"{since}","labels":{{"beta.kubernetes.io/arch":"amd64","beta.kubernetes.io/os":"linux","failure-domain.beta.kubernetes.io/region":"eu-west-1","failure-domain.beta.kubernetes.io/zone":"eu-west-1{zone}","kubernetes.io/arch":"amd64","kubernetes.io/hostname":"{name}","kubernetes.io/os":"linux","node-role.kubernetes.io/worker":"","node.kubernetes.io/instance-type":"{itype}","topology.kubernetes.io/region":"eu-west-1","topology.kubernetes.io/zone":"eu-west-1{zone}"}},"annotations":{{"kubeadm.alpha.kubernetes.io/cri-socket":"unix:///run/containerd/containerd.sock","node.alpha.kubernetes.io/ttl":"0","projectcalico.org/IPv4Address":"10.0.{}.{}/16","volumes.kubernetes.io/controller-managed-attach-detach":"true"}}}},"spec":{{"podCIDR":"10.64.{}.0/24","providerID":"aws:///eu-west-1{zone}/i-{i:017x}"}},"status":{{"capacity":{{"cpu":"8","memory":"32408732Ki","pods":"110"}},"allocatable":{{"cpu":"7800m","memory":"31281948Ki","pods":"110"}},"conditions":[{conditions}],"addresses":[{{"type":"InternalIP","address":"10.0.{}.{}"}},{{"type":"Hostname","address":"{name}"}}],"daemonEndpoints":{{"kubeletEndpoint":{{"Port":10250}}}},"nodeInfo":{{"machineID":"{i:032x}","kernelVersion":"6.1.0-18-cloud-amd64","osImage":"Debian GNU/Linux 12 (bookworm)","containerRuntimeVersion":"containerd://1.6.28","kubeletVersion":"v1.29.2","kubeProxyVersion":"v1.29.2","operatingSystem":"linux","architecture":"amd64"}},"images":[{images}]}}}}"#,
        1000 + i,
        i / 256,
        i % 256,
        i % 256,
        i / 256,
        i % 256,
    )
}

fn lease_json(i: usize, t0: Time) -> String {
    let name = node_name(i);
    format!(
        r#"{{"metadata":{{"name":"{name}","namespace":"kube-node-lease","uid":"6a0c1f7e-93b2-4d5e-8f10-{i:012x}","resourceVersion":"{}","creationTimestamp":"2026-01-01T00:00:00Z"}},"spec":{{"holderIdentity":"{name}","leaseDurationSeconds":40,"renewTime":"{}"}}}}"#,
        100_000 + i,
        t0.to_rfc3339_micros()
    )
}

/// Live bytes and allocations since `(bytes, blocks)`.
fn since(start: (isize, isize)) -> (isize, isize) {
    (live_bytes() - start.0, live_blocks() - start.1)
}

fn now() -> (isize, isize) {
    since((0, 0))
}

fn main() -> ExitCode {
    let mut nodes = 5000usize;
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        match (flag.as_str(), args.next().and_then(|v| v.parse().ok())) {
            ("--nodes", Some(n)) if n > 0 => nodes = n,
            _ => {
                eprintln!("usage: node_floor [--nodes N]");
                return ExitCode::from(2);
            }
        }
    }
    let t0 = Time::from_unix_millis(1_790_000_000_000);
    let texts: Vec<(String, String)> = (0..nodes)
        .map(|i| (node_json(i, t0), lease_json(i, t0)))
        .collect();
    let name_bytes: usize = (0..nodes).map(|i| node_name(i).len()).sum();

    // 1. The store alone. Decoded into it one by one, as the informers do.
    let start = now();
    let mut ctx = DecodeContext::new();
    let mut store = ClusterStore::new();
    store.begin_full_state(Kind::Nodes);
    store.begin_full_state(Kind::Leases);
    for (node, lease) in &texts {
        let node: Node = decode_object(node.as_bytes(), &mut ctx).expect("node decodes");
        store.upsert_node(node);
        let lease: Lease = decode_object(lease.as_bytes(), &mut ctx).expect("lease decodes");
        store.upsert_lease(lease);
    }
    // As the informers' LISTs end (the store settles its maps then).
    store.end_full_state(Kind::Nodes);
    store.end_full_state(Kind::Leases);
    let (store_live, store_blocks) = since(start);
    let estimate = store.heap_bytes();
    drop(store);
    drop(ctx);

    // 2. The controllers, synced and leading.
    let start = now();
    let mut ctl = Controllers::new(Settings::default(), t0);
    let mut ctx = DecodeContext::new();
    for kind in [Kind::Nodes, Kind::Leases, Kind::Pods] {
        ctl.handle(Input::FullStateBegin(kind), t0);
        for (node, lease) in &texts {
            match kind {
                Kind::Nodes => {
                    let node: Node = decode_object(node.as_bytes(), &mut ctx).expect("node");
                    ctl.handle(Input::NodeUpsert(node), t0);
                }
                Kind::Leases => {
                    let lease: Lease = decode_object(lease.as_bytes(), &mut ctx).expect("lease");
                    ctl.handle(Input::LeaseUpsert(lease), t0);
                }
                Kind::Pods => {}
            }
        }
        ctl.handle(Input::FullStateEnd(kind), t0);
    }
    ctl.handle(Input::InformersWatching(Some(Duration::ZERO)), t0);
    ctl.handle(Input::InitialSyncDone, t0);
    // One monitor pass later, as in the steady state.
    ctl.handle(Input::Tick, t0 + Duration::from_secs(5));
    ctl.take_decisions();
    let (all_live, all_blocks) = since(start);
    assert_eq!(ctl.store().node_count(), nodes);

    println!(
        "record sizes: Node {} B, a condition {} B, a taint {} B, a Lease {} B, a label {} B",
        std::mem::size_of::<Node>(),
        std::mem::size_of::<NodeCondition>(),
        std::mem::size_of::<Taint>(),
        std::mem::size_of::<Lease>(),
        std::mem::size_of::<(Name, Name)>()
    );
    let parts: Vec<String> = node_lifecycle_entry_sizes()
        .iter()
        .map(|(part, size)| format!("{part} {size} B"))
        .collect();
    println!("the controller's entry: {}", parts.join(", "));
    let per = |b: isize| b as f64 / nodes as f64;
    let floor = name_bytes + nodes * FLOOR_FIXED;
    println!(
        "{nodes} nodes with their Leases (names {:.1} bytes on average)",
        name_bytes as f64 / nodes as f64
    );
    println!(
        "store, measured (nodes + Leases + interner):  {:>7.1} B/node, {:>5.2} allocations/node",
        per(store_live),
        per(store_blocks)
    );
    println!(
        "store, its own estimate (state dump):         {:>7.1} B/node (nodes {:.1}, Leases {:.1})",
        per((estimate.nodes + estimate.leases) as isize),
        per(estimate.nodes as isize),
        per(estimate.leases as isize)
    );
    println!(
        "controllers' own per-node state, measured:    {:>7.1} B/node, {:>5.2} allocations/node",
        per(all_live - store_live),
        per(all_blocks - store_blocks)
    );
    println!(
        "whole, measured:                              {:>7.1} B/node, {:>5.2} allocations/node",
        per(all_live),
        per(all_blocks)
    );
    println!(
        "floor (name, ids, label set, conditions, taints, Lease, index): {:.1} B/node",
        per(floor as isize)
    );
    println!(
        "gap to the floor: store {:.1} B/node ({:.2}x), whole {:.1} B/node ({:.2}x)",
        per(store_live) - per(floor as isize),
        store_live as f64 / floor as f64,
        per(all_live) - per(floor as isize),
        all_live as f64 / floor as f64
    );
    drop(ctl);
    ExitCode::SUCCESS
}
