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
mod tests {
    use super::*;
    use crate::doctor::Level;
    use crate::kube::decode::decode_object;
    use std::path::Path;
    use std::rc::Rc;

    fn node(name: &str, zone: Option<&str>, extra_labels: &str, ready: &str, taints: &str) -> Node {
        let zone = zone
            .map(|z| format!(r#""topology.kubernetes.io/zone":"{z}","#))
            .unwrap_or_default();
        let json = format!(
            r#"{{"metadata":{{"name":"{name}","uid":"u-{name}","resourceVersion":"1",
            "creationTimestamp":"2024-01-01T00:00:00Z","labels":{{{zone}{extra_labels}"x":"y"}}}},
            "spec":{{"taints":[{taints}]}},
            "status":{{"conditions":[{{"type":"Ready","status":"{ready}"}}]}}}}"#
        );
        decode_object::<Node>(json.as_bytes(), &mut DecodeContext::new()).unwrap()
    }

    fn lease(name: &str, seconds: i64) -> KubeletLease {
        KubeletLease {
            metadata: LeaseMeta { name: name.into() },
            spec: Some(KubeletLeaseSpec {
                lease_duration_seconds: Some(seconds),
            }),
        }
    }

    fn config(text: &str) -> Config {
        Config::from_str(text, Path::new("t.toml")).unwrap()
    }

    fn find<'a>(checks: &'a [Check], name: &str) -> &'a Check {
        checks
            .iter()
            .find(|c| c.name == name)
            .unwrap_or_else(|| panic!("{name}: {checks:#?}"))
    }

    #[test]
    fn zones_are_sized_against_the_threshold_and_problems_named() {
        let unreachable = r#"{"key":"node.kubernetes.io/unreachable","effect":"NoExecute"}"#;
        let nodes = vec![
            node("a1", Some("a"), "", "True", ""),
            node("a2", Some("a"), "", "True", ""),
            node(
                "a3",
                Some("a"),
                r#""node.kubernetes.io/exclude-disruption":"","#,
                "True",
                "",
            ),
            node("b1", Some("b"), "", "Unknown", unreachable),
            node("c1", None, "", "True", ""),
        ];
        let leases = [
            lease("a1", 40),
            lease("a2", 40),
            lease("a3", 40),
            lease("b1", 40),
            lease("c1", 40),
        ];
        let checks = analyse(
            &nodes,
            Some(&leases),
            &config("large_cluster_size_threshold = 2\nnode_monitor_grace_period = \"40s\"\n"),
        );
        assert_eq!(find(&checks, "nodes").message, "5 nodes in 3 zones");
        assert!(
            find(&checks, "zone a")
                .message
                .starts_with("3 nodes, large")
        );
        assert!(
            find(&checks, "zone b")
                .message
                .starts_with("1 nodes, small")
        );
        assert!(
            find(&checks, "zone (no zone labels)")
                .message
                .starts_with("1 nodes, small")
        );
        assert!(
            find(&checks, "excluded from disruption")
                .message
                .ends_with(": a3")
        );
        let unknown = find(&checks, "unknown nodes");
        assert_eq!(
            (unknown.level, unknown.message.as_str()),
            (Level::Warn, "1 nodes already Ready=Unknown: b1")
        );
        assert_eq!(find(&checks, "tainted nodes").level, Level::Warn);
        let leases = find(&checks, "kubelet leases");
        assert_eq!(leases.level, Level::Ok, "{}", leases.message);
        assert!(
            leases
                .message
                .contains("durations 40s <= node_monitor_grace_period 40s"),
            "{}",
            leases.message
        );
    }

    /// A rack under planned work (KEP-5683's condition) and a node still gated by the
    /// node-readiness-controller are named, with what they mean; a fleet with neither has no
    /// such line.
    #[test]
    fn nodes_in_planned_maintenance_or_gated_by_readiness_taints_are_named() {
        let gate =
            r#"{"key":"readiness.k8s.io/NetworkReady","value":"pending","effect":"NoSchedule"}"#;
        let mut m1 = node("m1", Some("a"), "", "Unknown", "");
        m1.other_conditions
            .push((Rc::from("MaintenanceInProgress"), ConditionStatus::True));
        let nodes = vec![
            m1,
            node("g1", Some("a"), "", "True", gate),
            node("w1", Some("a"), "", "True", ""),
        ];
        let checks = analyse(&nodes, None, &config(""));
        let planned = find(&checks, "planned maintenance");
        assert!(
            planned
                .message
                .starts_with("1 nodes with MaintenanceInProgress=True")
                && planned.message.contains("never fenced")
                && planned.message.ends_with(": m1"),
            "{}",
            planned.message
        );
        assert!(find(&checks, "readiness gates").message.ends_with(": g1"));
        let upstream = analyse(&nodes, None, &config("lifecycle_conditions = false\n"));
        assert!(
            find(&upstream, "planned maintenance")
                .message
                .contains("as upstream")
        );
        let plain = analyse(&nodes[2..], None, &config(""));
        assert!(
            plain
                .iter()
                .all(|c| c.name != "planned maintenance" && c.name != "readiness gates")
        );
    }

    #[test]
    fn leases_longer_than_the_grace_period_or_missing_are_warnings() {
        let nodes = vec![
            node("n1", None, "", "True", ""),
            node("n2", None, "", "True", ""),
        ];
        let cfg = config("node_monitor_grace_period = \"40s\"\n");
        let long = analyse(&nodes, Some(&[lease("n1", 60), lease("n2", 40)]), &cfg);
        let c = find(&long, "kubelet leases");
        assert_eq!(c.level, Level::Warn);
        assert!(
            c.message.contains("1 leases last longer") && c.message.ends_with(": n1"),
            "{}",
            c.message
        );
        let missing = analyse(&nodes, Some(&[lease("n1", 40)]), &cfg);
        assert!(
            find(&missing, "kubelet leases")
                .message
                .ends_with("no Lease in kube-node-lease: n2")
        );
        assert_eq!(
            find(&analyse(&[], Some(&[]), &cfg), "nodes").level,
            Level::Warn
        );
    }

    fn annotated(name: &str, annotations: &str) -> Node {
        let json = format!(
            r#"{{"metadata":{{"name":"{name}","uid":"u-{name}","resourceVersion":"1",
            "creationTimestamp":"2024-01-01T00:00:00Z","annotations":{{{annotations}}}}},
            "status":{{"conditions":[{{"type":"Ready","status":"True"}}]}}}}"#
        );
        decode_object::<Node>(json.as_bytes(), &mut DecodeContext::new()).unwrap()
    }

    /// Annotations left from an old OpenYurt install keep pods Ready and bound through an outage
    /// while `autonomy = true`: a warning naming the nodes, what will happen
    /// and how to remove them; with `autonomy = false` they are only named.
    #[test]
    fn nodes_with_openyurt_autonomy_annotations_are_named_with_what_happens_to_their_pods() {
        let nodes = vec![
            annotated("edge-1", r#""node.openyurt.io/autonomy-duration":"1h""#),
            annotated("edge-2", r#""node.beta.openyurt.io/autonomy":"true""#),
            annotated("edge-3", r#""apps.openyurt.io/binding":"true""#),
            // Says nothing the daemon acts on.
            annotated("plain", r#""apps.openyurt.io/binding":"false""#),
        ];
        let checks = analyse(&nodes, None, &config(""));
        let c = find(&checks, "autonomy annotations");
        assert_eq!(c.level, Level::Warn);
        assert!(
            c.message.starts_with(
                "3 nodes carry OpenYurt autonomy annotations: edge-1 (1h), edge-2 (forever), \
                 edge-3 (forever); with autonomy = true, when one of them drops off its pods are \
                 not marked NotReady"
            ),
            "{}",
            c.message
        );
        assert!(c.message.contains("do not evict them"), "{}", c.message);
        assert_eq!(
            c.action,
            "if they are left from an old OpenYurt install, remove them (kubectl annotate node \
             NAME node.openyurt.io/autonomy-duration- node.beta.openyurt.io/autonomy- \
             apps.openyurt.io/binding-), or set autonomy = false to ignore them on every node"
        );
        let off = analyse(&nodes, None, &config("autonomy = false\n"));
        let c = find(&off, "autonomy annotations");
        assert_eq!(c.level, Level::Ok);
        assert!(
            c.message.contains("ignored (autonomy = false): edge-1"),
            "{}",
            c.message
        );
        let none = analyse(&nodes[3..], None, &config(""));
        assert_eq!(find(&none, "autonomy annotations").level, Level::Ok);
    }

    #[test]
    fn long_lists_are_cut_to_ten_names() {
        let many: Vec<String> = (0..13).map(|i| format!("n{i}")).collect();
        assert_eq!(
            names(many.iter().map(String::as_str)),
            "n0, n1, n2, n3, n4, n5, n6, n7, n8, n9 and 3 more"
        );
        assert_eq!(zone_name("r:\x00:z"), "r/z");
        assert_eq!(zone_name(":\x00:z"), "z");
    }
}
