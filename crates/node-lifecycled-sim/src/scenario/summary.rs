//! The per-zone summary after a run: what the daemon did to each zone's nodes and pods.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use crate::population::{PodPlan, zone_of};
use crate::timeline::{Fact, FactKind};

#[derive(Default)]
struct ZoneCounts {
    nodes: usize,
    unknown: BTreeSet<String>,
    not_ready: BTreeSet<String>,
    tainted: BTreeSet<String>,
    untainted: BTreeSet<String>,
    pods_not_ready: BTreeSet<String>,
    pods_deleted: BTreeSet<String>,
}

/// A table, one row per zone: nodes, nodes set Unknown / False, nodes given / cleared of a
/// NoExecute taint, pods marked NotReady, pods deleted; then the totals of other writes.
pub fn zone_summary(facts: &[Fact], nodes: &[String], pods: &[PodPlan]) -> String {
    let pod_node: HashMap<String, &str> = pods.iter().map(|p| (p.key(), p.node.as_str())).collect();
    let mut zones: BTreeMap<String, ZoneCounts> = BTreeMap::new();
    for n in nodes {
        zones.entry(zone_of(n).to_string()).or_default().nodes += 1;
    }
    let (mut failed, mut events) = (0, 0);
    for fact in facts {
        match &fact.kind {
            FactKind::NodeReady { node, status, .. } if status == "Unknown" => {
                zone(&mut zones, node).unknown.insert(node.clone());
            }
            FactKind::NodeReady { node, status, .. } if status == "False" => {
                zone(&mut zones, node).not_ready.insert(node.clone());
            }
            FactKind::TaintAdded { node, taint } if taint.ends_with(":NoExecute") => {
                zone(&mut zones, node).tainted.insert(node.clone());
            }
            FactKind::TaintRemoved { node, taint } if taint.ends_with(":NoExecute") => {
                zone(&mut zones, node).untainted.insert(node.clone());
            }
            FactKind::PodNotReady { pod } => {
                let node = pod_node.get(pod).copied().unwrap_or("");
                zone(&mut zones, node).pods_not_ready.insert(pod.clone());
            }
            FactKind::PodDeleted { pod, .. } => {
                let node = pod_node.get(pod).copied().unwrap_or("");
                zone(&mut zones, node).pods_deleted.insert(pod.clone());
            }
            FactKind::Event { .. } => events += 1,
            FactKind::Failed { .. } => failed += 1,
            _ => {}
        }
    }
    let mut out = String::new();
    out.push_str(
        "zone   nodes  Unknown  NotReady  NoExecute+  NoExecute-  pods NotReady  pods deleted\n",
    );
    for (name, z) in &zones {
        out.push_str(&format!(
            "{name:<6} {:>5}  {:>7}  {:>8}  {:>10}  {:>10}  {:>13}  {:>12}\n",
            z.nodes,
            z.unknown.len(),
            z.not_ready.len(),
            z.tainted.len(),
            z.untainted.len(),
            z.pods_not_ready.len(),
            z.pods_deleted.len()
        ));
    }
    out.push_str(&format!(
        "(nodes: distinct nodes the daemon changed; NoExecute+/-: nodes given / cleared of a NoExecute taint; \
         {events} events recorded, {failed} writes refused by the API server)\n"
    ));
    out
}

fn zone<'a>(zones: &'a mut BTreeMap<String, ZoneCounts>, node: &str) -> &'a mut ZoneCounts {
    let name = if node.is_empty() { "?" } else { zone_of(node) };
    zones.entry(name.to_string()).or_default()
}
