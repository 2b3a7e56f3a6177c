//! The fleet as the daemon would see it: zones and their sizes against
//! `large_cluster_size_threshold`, nodes excluded from disruption, nodes whose OpenYurt
//! autonomy annotations the daemon would honour, nodes already Unknown or tainted not-ready /
//! unreachable, kubelet Lease durations against `node_monitor_grace_period`. Nodes are decoded
//! with the daemon's own decoder, so zones, exclusions and autonomy are what it computes.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Deserialize;

use super::{Check, Report};
use crate::config::{Config, format_duration};
use crate::kube::ApiClient;
use crate::kube::decode::{DecodeContext, decode_list};
use crate::model::autonomy_annotations::{BINDING, DURATION, LEGACY};
use crate::model::{Autonomy, ConditionStatus, Node, taint_keys};

const GROUP: &str = "fleet";
const PAGE: u32 = 500;
/// Names listed in one line before "and N more".
const SHOWN: usize = 10;

/// What doctor reads of a kubelet's Lease.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
pub(crate) struct KubeletLease {
    #[serde(default)]
    pub(crate) metadata: LeaseMeta,
    #[serde(default)]
    pub(crate) spec: Option<KubeletLeaseSpec>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
pub(crate) struct LeaseMeta {
    #[serde(default)]
    pub(crate) name: String,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct KubeletLeaseSpec {
    #[serde(default)]
    pub(crate) lease_duration_seconds: Option<i64>,
}

pub(crate) fn check(client: &mut ApiClient, config: &Config, report: &mut Report) {
    let nodes = match list_nodes(client) {
        Ok(n) => n,
        Err(e) => {
            report.push(
                Check::fail(GROUP, "nodes", format!("cannot list: {e}"))
                    .action("see the permissions above"),
            );
            return;
        }
    };
    let leases = match list_leases(client) {
        Ok(l) => Some(l),
        Err(e) => {
            report.push(
                Check::fail(GROUP, "kubelet leases", format!("cannot list: {e}"))
                    .action("see the permissions above"),
            );
            None
        }
    };
    for c in analyse(&nodes, leases.as_deref(), config) {
        report.push(c);
    }
}

fn list_nodes(client: &mut ApiClient) -> Result<Vec<Node>, String> {
    let mut ctx = DecodeContext::new();
    let mut nodes = Vec::new();
    let mut token: Option<String> = None;
    loop {
        let mut path = format!("/api/v1/nodes?limit={PAGE}");
        if let Some(t) = &token {
            path.push_str("&continue=");
            path.push_str(&percent_encode(t));
        }
        let bytes = client.get_bytes(&path).map_err(|e| e.to_string())?;
        let page = decode_list::<Node>(&bytes, &mut ctx).map_err(|e| e.to_string())?;
        nodes.extend(page.items);
        match page.continue_token {
            Some(t) => token = Some(t),
            None => return Ok(nodes),
        }
    }
}

fn list_leases(client: &mut ApiClient) -> Result<Vec<KubeletLease>, String> {
    let path = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases";
    let mut leases = Vec::new();
    let mut token: Option<String> = None;
    loop {
        let page = client
            .list_page::<KubeletLease>(path, PAGE, token.as_deref(), None)
            .map_err(|e| e.to_string())?;
        leases.extend(page.items);
        match page.continue_token {
            Some(t) => token = Some(t),
            None => return Ok(leases),
        }
    }
}

fn percent_encode(value: &str) -> String {
    value
        .bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
                char::from(b).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// `a, b, c and 7 more`.
fn names<'a>(list: impl IntoIterator<Item = &'a str>) -> String {
    let all: Vec<&str> = list.into_iter().collect();
    let mut text = all
        .iter()
        .take(SHOWN)
        .copied()
        .collect::<Vec<_>>()
        .join(", ");
    if all.len() > SHOWN {
        text.push_str(&format!(" and {} more", all.len() - SHOWN));
    }
    text
}

/// A zone key as people write it: `region/zone`, or the zone alone.
fn zone_name(key: &str) -> String {
    match key.split_once(":\x00:") {
        None if key.is_empty() => "(no zone labels)".to_string(),
        Some(("", zone)) => zone.to_string(),
        Some((region, zone)) => format!("{region}/{zone}"),
        None => key.to_string(),
    }
}

/// Every fleet check from what was listed; `leases` `None` when they could not be read.
pub(crate) fn analyse(
    nodes: &[Node],
    leases: Option<&[KubeletLease]>,
    config: &Config,
) -> Vec<Check> {
    let mut out = Vec::new();
    let threshold = config.controller.large_cluster_size_threshold;
    let mut zones: BTreeMap<String, usize> = BTreeMap::new();
    for node in nodes {
        *zones.entry(node.zone_key()).or_default() += 1;
    }
    if nodes.is_empty() {
        out.push(Check::warn(GROUP, "nodes", "no nodes registered").action(
            "nothing to watch yet: register nodes, or check that this is the right cluster",
        ));
    } else {
        out.push(Check::ok(
            GROUP,
            "nodes",
            format!("{} nodes in {} zones", nodes.len(), zones.len()),
        ));
    }
    for (key, size) in &zones {
        let kind = if *size as u64 > u64::from(threshold) {
            format!(
                "large (> large_cluster_size_threshold {threshold}): in a partial disruption evictions slow to secondary_node_eviction_rate"
            )
        } else {
            format!(
                "small (<= large_cluster_size_threshold {threshold}): in a partial disruption evictions stop"
            )
        };
        out.push(Check::ok(
            GROUP,
            format!("zone {}", zone_name(key)),
            format!("{size} nodes, {kind}"),
        ));
    }
    let excluded: Vec<&str> = nodes
        .iter()
        .filter(|n| n.excluded_from_disruption())
        .map(|n| &*n.name)
        .collect();
    out.push(Check::ok(
        GROUP,
        "excluded from disruption",
        if excluded.is_empty() {
            "none (label node.kubernetes.io/exclude-disruption)".to_string()
        } else {
            format!(
                "{} nodes not counted in zone health: {}",
                excluded.len(),
                names(excluded.iter().copied())
            )
        },
    ));
    out.extend(others_check(nodes, config.controller.lifecycle_conditions));
    out.push(autonomy_check(nodes, config.controller.autonomy));
    let unknown: Vec<&str> = nodes
        .iter()
        .filter(|n| {
            n.ready()
                .is_some_and(|c| c.status == ConditionStatus::Unknown)
        })
        .map(|n| &*n.name)
        .collect();
    out.push(if unknown.is_empty() {
        Check::ok(GROUP, "unknown nodes", "no node is Ready=Unknown")
    } else {
        Check::warn(
            GROUP,
            "unknown nodes",
            format!("{} nodes already Ready=Unknown: {}", unknown.len(), names(unknown.iter().copied())),
        )
        .action("their kubelets are silent: on start the daemon marks their pods NotReady and taints them; look at them first")
    });
    let tainted: Vec<&str> = nodes
        .iter()
        .filter(|n| {
            n.taints
                .iter()
                .any(|t| &*t.key == taint_keys::NOT_READY || &*t.key == taint_keys::UNREACHABLE)
        })
        .map(|n| &*n.name)
        .collect();
    out.push(if tainted.is_empty() {
        Check::ok(GROUP, "tainted nodes", "no node tainted not-ready or unreachable")
    } else {
        Check::warn(
            GROUP,
            "tainted nodes",
            format!(
                "{} nodes tainted node.kubernetes.io/not-ready or unreachable: {}",
                tainted.len(),
                names(tainted.iter().copied())
            ),
        )
        .action("pods without tolerations on them are being evicted; the daemon takes these taints over")
    });
    if let Some(leases) = leases {
        out.push(lease_check(
            nodes,
            leases,
            config.controller.node_monitor_grace_period,
        ));
    }
    out
}

/// OpenYurt's autonomy annotations are opt-in per node, but one left behind by an old OpenYurt
/// install opts in silently: with `autonomy = true` (the default) that node's pods stay Ready
/// and bound through an outage. Only annotations the daemon would act on are named (a
/// `binding: "false"` or a duration it cannot read changes nothing; the daemon logs the latter).
/// Lines only where they apply: nodes in planned maintenance by their KEP-5683 condition, and
/// nodes the node-readiness-controller still gates with `readiness.k8s.io/` taints.
fn others_check(nodes: &[Node], lifecycle_conditions: bool) -> Vec<Check> {
    let mut out = Vec::new();
    let planned: Vec<&str> = nodes
        .iter()
        .filter(|n| n.in_planned_maintenance())
        .map(|n| &*n.name)
        .collect();
    if !planned.is_empty() {
        let meaning = if lifecycle_conditions {
            "planned maintenance, no failure: not counted in zone health or max_unhealthy, \
             never fenced (lifecycle_conditions = true)"
        } else {
            "counted as any node, as upstream (lifecycle_conditions = false)"
        };
        out.push(Check::ok(
            GROUP,
            "planned maintenance",
            format!(
                "{} nodes with MaintenanceInProgress=True (KEP-5683): {meaning}: {}",
                planned.len(),
                names(planned.iter().copied())
            ),
        ));
    }
    let gated: Vec<&str> = nodes
        .iter()
        .filter(|n| {
            n.taints
                .iter()
                .any(|t| t.key.starts_with("readiness.k8s.io/"))
        })
        .map(|n| &*n.name)
        .collect();
    if !gated.is_empty() {
        out.push(Check::ok(
            GROUP,
            "readiness gates",
            format!(
                "{} nodes with readiness.k8s.io/ taints (node-readiness-controller): left as they \
                 are, no node failure; pods not tolerating a NoExecute one are evicted, as \
                 upstream: {}",
                gated.len(),
                names(gated.iter().copied())
            ),
        ));
    }
    out
}

fn autonomy_check(nodes: &[Node], honoured: bool) -> Check {
    const NAME: &str = "autonomy annotations";
    let annotated: Vec<String> = nodes
        .iter()
        .filter_map(|n| match n.autonomy {
            Autonomy::None => None,
            Autonomy::Forever => Some(format!("{} (forever)", n.name)),
            Autonomy::For(d) => Some(format!("{} ({})", n.name, format_duration(d))),
        })
        .collect();
    if annotated.is_empty() {
        return Check::ok(
            GROUP,
            NAME,
            format!(
                "no node carries OpenYurt autonomy annotations ({DURATION}, {LEGACY}, {BINDING})"
            ),
        );
    }
    let listed = names(annotated.iter().map(String::as_str));
    if !honoured {
        return Check::ok(
            GROUP,
            NAME,
            format!(
                "{} nodes carry OpenYurt autonomy annotations, ignored (autonomy = false): {listed}",
                annotated.len()
            ),
        );
    }
    Check::warn(
        GROUP,
        NAME,
        format!(
            "{} nodes carry OpenYurt autonomy annotations: {listed}; with autonomy = true, when one \
             of them drops off its pods are not marked NotReady (Services keep sending them \
             traffic) and the not-ready/unreachable taints do not evict them until that duration \
             has passed, or ever",
            annotated.len()
        ),
    )
    .action(format!(
        "if they are left from an old OpenYurt install, remove them (kubectl annotate node NAME \
         {DURATION}- {LEGACY}- {BINDING}-), or set autonomy = false to ignore them on every node"
    ))
}

fn lease_check(nodes: &[Node], leases: &[KubeletLease], grace: Duration) -> Check {
    let grace_s = grace.as_secs();
    let duration = |l: &KubeletLease| {
        l.spec
            .as_ref()
            .and_then(|s| s.lease_duration_seconds)
            .unwrap_or(0)
    };
    let too_long: Vec<&str> = leases
        .iter()
        .filter(|l| u64::try_from(duration(l)).unwrap_or(0) > grace_s)
        .map(|l| l.metadata.name.as_str())
        .collect();
    let without: Vec<&str> = nodes
        .iter()
        .filter(|n| !leases.iter().any(|l| l.metadata.name == *n.name))
        .map(|n| &*n.name)
        .collect();
    let grace_text = format_duration(grace);
    if !too_long.is_empty() {
        return Check::warn(
            GROUP,
            "kubelet leases",
            format!(
                "{} leases last longer than node_monitor_grace_period {grace_text}: {}",
                too_long.len(),
                names(too_long.iter().copied())
            ),
        )
        .action("raise node_monitor_grace_period above the kubelets' nodeLeaseDurationSeconds, or lower that");
    }
    if !without.is_empty() {
        return Check::warn(
            GROUP,
            "kubelet leases",
            format!(
                "{} nodes have no Lease in kube-node-lease: {}",
                without.len(),
                names(without.iter().copied())
            ),
        )
        .action("their health rests on node status updates alone; check those kubelets");
    }
    let (min, max) = leases
        .iter()
        .map(duration)
        .fold((i64::MAX, i64::MIN), |(lo, hi), d| (lo.min(d), hi.max(d)));
    let range = if leases.is_empty() {
        "none".to_string()
    } else if min == max {
        format!("{min}s")
    } else {
        format!("{min}s..{max}s")
    };
    Check::ok(
        GROUP,
        "kubelet leases",
        format!(
            "{} leases, durations {range} <= node_monitor_grace_period {grace_text}",
            leases.len()
        ),
    )
}

#[cfg(test)]
#[path = "fleet_tests.rs"]
mod tests;
