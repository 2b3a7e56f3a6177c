//! Tests of the fleet checks: zones against the threshold, nodes in maintenance or gated, Lease
//! durations, OpenYurt autonomy, long lists cut.

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
    let gate = r#"{"key":"readiness.k8s.io/NetworkReady","value":"pending","effect":"NoSchedule"}"#;
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
