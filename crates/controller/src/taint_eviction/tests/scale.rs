//! 5,000 nodes x 30 pods (upstream's scalability envelope: 150,000 pods), one zone losing
//! 10 nodes. Exact to the millisecond of virtual time, and counting the work per event.

use std::collections::{BTreeMap, HashSet};
use std::rc::Rc;
use std::time::Duration;

use super::harness::*;
use crate::model::{Name, Node, Taint, Toleration, TolerationOperator, labels, taint_keys};
use crate::time::Time;

const NODES: usize = 5_000;
const ZONES: usize = 10;
const PODS_PER_NODE: usize = 30;
const LOST: usize = 10;
/// The core taints one node per 10 s in a healthy zone (node_eviction_rate 0.1/s).
const TAINT_INTERVAL: Duration = Duration::from_secs(10);
/// The last lost node comes back this long after it was tainted.
const RECOVERS_AFTER: Duration = Duration::from_secs(250);

/// Pods on each node, by index: 0..10 carry the apiserver's default 300 s tolerations,
/// 10..15 tolerate 200 s, 15..20 tolerate 0 s, 20..25 tolerate everything forever
/// (DaemonSet-like), 25..30 only tolerate another taint.
fn class_of(j: usize) -> usize {
    match j {
        0..10 => 0,
        10..15 => 1,
        15..20 => 2,
        20..25 => 3,
        _ => 4,
    }
}

/// When pod `j` is due after its node's taint (`None`: never), by its class.
fn delay_for(j: usize) -> Option<Duration> {
    let secs = [Some(300), Some(200), Some(0), None, Some(0)][class_of(j)];
    secs.map(Duration::from_secs)
}

fn toleration_classes() -> Vec<Rc<[Toleration]>> {
    let everything = Toleration {
        key: n(""),
        operator: TolerationOperator::Exists,
        value: n(""),
        effect: None,
        toleration_seconds: None,
    };
    let dedicated = Toleration {
        key: n("dedicated"),
        operator: TolerationOperator::Equal,
        value: n("gpu"),
        effect: None,
        toleration_seconds: None,
    };
    vec![
        default_tolerations(Some(300)).into(),
        default_tolerations(Some(200)).into(),
        default_tolerations(Some(0)).into(),
        vec![everything].into(),
        vec![dedicated].into(),
    ]
}

fn zone_node(i: usize, taints: Vec<Taint>) -> Node {
    let mut node = node(&format!("node-{i}"), taints);
    node.labels
        .push((n(labels::ZONE), n(&format!("zone-{}", i % ZONES))));
    node
}

#[test]
fn five_thousand_nodes_one_zone_loses_ten_nodes() {
    let mut h = Harness::new();
    let classes = toleration_classes();
    for i in 0..NODES {
        h.node(&zone_node(i, vec![]));
    }
    let mut names: Vec<Vec<Name>> = Vec::with_capacity(NODES);
    for i in 0..NODES {
        let node_name = n(&format!("node-{i}"));
        let mut on_node = Vec::with_capacity(PODS_PER_NODE);
        for j in 0..PODS_PER_NODE {
            let mut p = pod(&format!("pod-{i}-{j}"), "");
            p.node_name = Some(node_name.clone());
            p.tolerations = classes[class_of(j)].clone();
            on_node.push(p.key.name.clone());
            h.pod(&p);
        }
        names.push(on_node);
    }
    assert_eq!(h.store().pod_count(), NODES * PODS_PER_NODE);
    assert_eq!(
        h.te().pods_examined(),
        0,
        "nothing to judge on untainted nodes"
    );

    // A status-only update of every node (e.g. heartbeats) costs nothing.
    for i in 0..NODES {
        let mut node = zone_node(i, vec![]);
        node.resource_version = n("2");
        h.node(&node);
    }
    assert_eq!(h.te().pods_examined(), 0);

    // Zone 3 loses 10 nodes; the core taints them one per 10 s; the last one recovers.
    let lost: Vec<usize> = (0..NODES).filter(|i| i % ZONES == 3).take(LOST).collect();
    let t0 = h.now + Duration::from_secs(60);
    let mut inputs: BTreeMap<Time, Vec<(usize, bool)>> = BTreeMap::new();
    for (k, &i) in lost.iter().enumerate() {
        let tainted_at = t0 + TAINT_INTERVAL * k as u32;
        inputs.entry(tainted_at).or_default().push((i, true));
    }
    let last = *lost.last().expect("ten nodes");
    let last_tainted = t0 + TAINT_INTERVAL * (LOST as u32 - 1);
    inputs
        .entry(last_tainted + RECOVERS_AFTER)
        .or_default()
        .push((last, false));

    let mut work_per_event = Vec::new();
    let mut expected: Vec<(Time, String)> = Vec::new();
    for (&at, changes) in &inputs {
        h.advance(at - h.now);
        for &(i, tainted) in changes {
            let taints = if tainted {
                vec![Taint {
                    time_added: Some(at),
                    ..no_execute(taint_keys::UNREACHABLE)
                }]
            } else {
                vec![]
            };
            let before = h.te().pods_examined();
            h.node(&zone_node(i, taints));
            work_per_event.push(h.te().pods_examined() - before);
            if tainted {
                for (j, name) in names[i].iter().enumerate() {
                    let Some(delay) = delay_for(j) else { continue };
                    let cancelled = i == last && delay > RECOVERS_AFTER;
                    if !cancelled {
                        expected.push((at + delay, name.to_string()));
                    }
                }
            }
        }
    }
    h.advance(Duration::from_secs(3600));

    // Taint added: its 30 pods judged. Taint removed: the same 30 looked at (upstream cancels
    // every pod's work on the node), never the other 149,970.
    assert_eq!(work_per_event, vec![PODS_PER_NODE as u64; LOST + 1]);

    let mut got = h.evicted();
    let distinct: HashSet<&String> = got.iter().map(|(_, p)| p).collect();
    assert_eq!(distinct.len(), got.len(), "no pod evicted twice");
    got.sort();
    expected.sort();
    assert_eq!(got.len(), expected.len());
    assert_eq!(
        got, expected,
        "exactly the non-tolerating pods, each at its deadline"
    );
    // 9 nodes x 25 + the recovered node's 15 that were due before it came back.
    assert_eq!(got.len(), 9 * 25 + 15);
    assert_eq!(h.te().metrics.pod_deletions_total, got.len() as u64);
    assert_eq!(h.te().pending_len(), 0);
    assert_eq!(h.te().next_deadline(), None);
}

/// The cost of a node taint change does not grow with the cluster: the same node, with the
/// same 30 pods, costs the same in a 1-node and in a 5,000-node cluster.
#[test]
fn node_taint_change_costs_pods_on_that_node_only() {
    let classes = toleration_classes();
    let mut costs = Vec::new();
    for cluster in [1, NODES] {
        let mut h = Harness::new();
        for i in 0..cluster {
            h.node(&zone_node(i, vec![]));
            for j in 0..PODS_PER_NODE {
                let mut p = pod(&format!("pod-{i}-{j}"), "");
                p.node_name = Some(n(&format!("node-{i}")));
                p.tolerations = classes[class_of(j)].clone();
                h.pod(&p);
            }
        }
        let before = h.te().pods_examined();
        h.node(&zone_node(0, vec![no_execute(taint_keys::NOT_READY)]));
        h.node(&zone_node(0, vec![no_execute(taint_keys::UNREACHABLE)]));
        h.node(&zone_node(0, vec![]));
        costs.push(h.te().pods_examined() - before);
    }
    assert_eq!(costs, vec![3 * PODS_PER_NODE as u64; 2]);
}
