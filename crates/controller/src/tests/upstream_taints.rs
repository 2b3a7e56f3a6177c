//! Ports of upstream's taint and label tests: `TestApplyNoExecuteTaints`,
//! `TestApplyNoExecuteTaintsToUnreachableNode`, `TestApplyNoExecuteTaintsToNodesEnqueueTwice`,
//! `TestSwapUnreachableNotReadyTaints`, `TestTaintsNodeByCondition`, `TestReconcileNodeLabels`.
//! The node lifecycle alone, as upstream's tests run it (`harness.rs`).

use super::harness::*;
use crate::model::ConditionStatus::{False, True, Unknown};
use crate::model::TaintEffect::{NoExecute, NoSchedule};
use crate::model::{NodeConditionType, labels, taint_keys};
use crate::time::Time;

fn fake_now() -> Time {
    date(2017, 1, 1, 12, 0, 0)
}

fn t2015() -> Time {
    date(2015, 1, 1, 12, 0, 0)
}

fn z1(name: &str) -> NodeBuilder {
    node(name).zone("region1", "zone1")
}

#[test]
fn test_apply_no_execute_taints() {
    let nodes = vec![
        z1("node0").ready(Unknown, t2015(), t2015()).build(),
        // A healthy node, so that the zone is not fully disrupted.
        z1("node1").ready(True, fake_now(), fake_now()).build(),
        z1("node2").ready(False, t2015(), t2015()).build(),
        z1("node3")
            .ready(True, date(2016, 1, 1, 12, 0, 0), date(2016, 1, 1, 12, 0, 0))
            .build(),
    ];
    let mut h = Harness::lifecycle_alone_started(
        test_settings(),
        fake_now(),
        nodes,
        vec![pod("pod0", "node0")],
        vec![],
    );
    h.tainting_pass();
    assert!(h.has_taint("node0", taint_keys::UNREACHABLE, NoExecute));
    assert!(h.has_taint("node2", taint_keys::NOT_READY, NoExecute));

    // node2 healthy again: every taint goes.
    let hb = date(2017, 1, 1, 12, 10, 0);
    h.set_conditions(
        "node2",
        vec![cond(NodeConditionType::Ready, True, hb, fake_now())],
    );
    h.tick();
    h.tainting_pass();
    assert!(h.taints("node2").is_empty(), "{:?}", h.taints("node2"));

    // node3 goes not Ready, and its Ready condition is replaced soon after. Upstream queues it
    // in its 5 s health pass and its 100 ms tainting pass finds the Ready condition gone, so it
    // is not tainted. Here the NoExecute taint follows the kubelet's report in the same instant
    // as the NoSchedule one (never later than upstream), so that window does not exist: the node
    // is tainted at the report, and a Ready condition that then disappears removes nothing
    // (upstream too removes the NoExecute taints only when the node is Ready again).
    h.set_conditions(
        "node3",
        vec![cond(NodeConditionType::Ready, False, hb, fake_now())],
    );
    assert!(h.has_taint("node3", taint_keys::NOT_READY, NoExecute));
    h.tick();
    h.set_conditions(
        "node3",
        vec![cond(
            NodeConditionType::MemoryPressure,
            Unknown,
            hb,
            fake_now(),
        )],
    );
    h.tainting_pass();
    assert!(h.has_taint("node3", taint_keys::NOT_READY, NoExecute));
}

#[test]
fn test_apply_no_execute_taints_to_unreachable_node() {
    let t1 = fake_now();
    let nodes = vec![
        z1("node0").ready(True, t1, t1).build(),
        z1("node1").ready(True, t1, t1).build(),
    ];
    let mut h = Harness::lifecycle_alone_started(
        test_settings(),
        t1,
        nodes,
        vec![pod("pod0", "node0")],
        vec![],
    );
    h.tainting_pass();
    assert!(h.taints("node0").is_empty() && h.taints("node1").is_empty());

    // Grace + 1 s later only node1 has posted a heartbeat.
    let t2 = t1 + secs(51);
    h.jump(t2 - h.now);
    h.set_conditions("node1", vec![cond(NodeConditionType::Ready, True, t2, t1)]);
    h.tick();
    h.tainting_pass();
    assert!(h.has_taint("node0", taint_keys::UNREACHABLE, NoExecute));
    assert!(h.taints("node1").is_empty());

    // node0 heartbeats again: its taints go.
    h.set_conditions("node0", vec![cond(NodeConditionType::Ready, True, t2, t2)]);
    h.tick();
    h.tainting_pass();
    assert!(h.taints("node0").is_empty(), "{:?}", h.taints("node0"));
}

#[test]
fn test_apply_no_execute_taints_to_nodes_enqueue_twice() {
    let nodes = vec![
        z1("node0").ready(Unknown, t2015(), t2015()).build(),
        z1("node1").ready(True, fake_now(), fake_now()).build(),
        z1("node2").ready(False, t2015(), t2015()).build(),
    ];
    let mut h = Harness::lifecycle_alone_started(
        test_settings(),
        fake_now(),
        nodes,
        vec![pod("pod0", "node0")],
        vec![],
    );
    // Two passes queue the untainted nodes (no-op the second time).
    h.jump(secs(5));
    h.tick();
    // node0 healthy again; more nodes join.
    h.set_conditions(
        "node0",
        vec![cond(
            NodeConditionType::Ready,
            True,
            date(2017, 1, 1, 12, 10, 0),
            fake_now(),
        )],
    );
    h.put_node(z1("node3").ready(Unknown, t2015(), t2015()).build());
    h.put_node(z1("node4").ready(True, fake_now(), fake_now()).build());
    h.put_node(z1("node5").ready(False, t2015(), t2015()).build());
    h.jump(secs(5));
    h.tick();
    h.tainting_pass();
    assert!(h.has_taint("node3", taint_keys::UNREACHABLE, NoExecute));
    assert!(h.has_taint("node5", taint_keys::NOT_READY, NoExecute));
}

#[test]
fn test_swap_unreachable_not_ready_taints() {
    let nodes = vec![
        z1("node0").ready(Unknown, t2015(), t2015()).build(),
        z1("node1").ready(True, fake_now(), fake_now()).build(),
    ];
    let mut h = Harness::lifecycle_alone_started(
        test_settings(),
        fake_now(),
        nodes,
        vec![pod("pod0", "node0")],
        vec![],
    );
    h.tainting_pass();
    assert!(h.has_taint("node0", taint_keys::UNREACHABLE, NoExecute));
    let writes_before = h.log.len();

    h.set_conditions(
        "node0",
        vec![cond(
            NodeConditionType::Ready,
            False,
            date(2017, 1, 1, 12, 9, 0),
            fake_now(),
        )],
    );
    h.set_conditions(
        "node1",
        vec![cond(
            NodeConditionType::Ready,
            True,
            date(2017, 1, 1, 12, 10, 0),
            fake_now(),
        )],
    );
    h.tick();
    // The swap is immediate: no tainting pass needed.
    assert!(h.has_taint("node0", taint_keys::NOT_READY, NoExecute));
    assert!(!h.has_taint("node0", taint_keys::UNREACHABLE, NoExecute));
    assert!(h.log.len() > writes_before);
}

#[test]
fn test_taints_node_by_condition() {
    let t = t2015();
    let mut h = Harness::lifecycle_alone_started(
        test_settings(),
        fake_now(),
        vec![z1("node0").ready(True, t, t).build()],
        vec![pod("pod0", "node0")],
        vec![],
    );
    let cases = [
        (
            "NetworkUnavailable is true",
            vec![
                cond(NodeConditionType::Ready, True, t, t),
                cond(NodeConditionType::NetworkUnavailable, True, t, t),
            ],
            vec![taint_keys::NETWORK_UNAVAILABLE],
        ),
        (
            "NetworkUnavailable is true (again)",
            vec![
                cond(NodeConditionType::Ready, True, t, t),
                cond(NodeConditionType::NetworkUnavailable, True, t, t),
            ],
            vec![taint_keys::NETWORK_UNAVAILABLE],
        ),
        (
            "Ready is false",
            vec![cond(NodeConditionType::Ready, False, t, t)],
            vec![taint_keys::NOT_READY],
        ),
        (
            "Ready is unknown",
            vec![cond(NodeConditionType::Ready, Unknown, t, t)],
            vec![taint_keys::UNREACHABLE],
        ),
    ];
    for (name, conditions, expected) in cases {
        h.set_conditions("node0", conditions);
        let no_schedule: Vec<String> = h
            .taints("node0")
            .into_iter()
            .filter(|(_, e)| *e == NoSchedule)
            .map(|(k, _)| k)
            .collect();
        assert_eq!(no_schedule, expected, "{name}");
    }
    // Unschedulable, memory/disk/PID pressure; a foreign NoSchedule taint is left alone.
    let mut n0 = h.nodes["node0"].clone();
    n0.unschedulable = true;
    n0.conditions = vec![
        cond(NodeConditionType::Ready, True, t, t),
        cond(NodeConditionType::MemoryPressure, True, t, t),
        cond(NodeConditionType::DiskPressure, True, t, t),
        cond(NodeConditionType::PIDPressure, True, t, t),
    ];
    n0.taints.push(crate::model::Taint {
        key: n("example.com/dedicated"),
        value: n("gpu"),
        effect: NoSchedule,
        time_added: None,
    });
    h.put_node(n0);
    let mut keys: Vec<String> = h.taints("node0").into_iter().map(|(k, _)| k).collect();
    keys.sort();
    assert_eq!(
        keys,
        [
            "example.com/dedicated",
            taint_keys::DISK_PRESSURE,
            taint_keys::MEMORY_PRESSURE,
            taint_keys::PID_PRESSURE,
            taint_keys::UNSCHEDULABLE,
        ]
    );
}

#[test]
fn test_reconcile_node_labels() {
    let t = t2015();
    let mut h = Harness::lifecycle_alone_started(
        test_settings(),
        fake_now(),
        vec![z1("node0").ready(True, t, t).build()],
        vec![],
        vec![],
    );
    type Labels = Vec<(&'static str, &'static str)>;
    let cases: Vec<(&str, Labels, Labels)> = vec![
        ("No-op if node has no labels", vec![], vec![]),
        (
            "No-op if no target labels present",
            vec![(labels::REGION, "region1")],
            vec![(labels::REGION, "region1")],
        ),
        (
            "Create OS/arch beta labels when they don't exist",
            vec![(labels::OS, "linux"), (labels::ARCH, "amd64")],
            vec![
                (labels::OS, "linux"),
                (labels::ARCH, "amd64"),
                (labels::OS_BETA, "linux"),
                (labels::ARCH_BETA, "amd64"),
            ],
        ),
        (
            "Reconcile OS/arch beta labels to match stable labels",
            vec![
                (labels::OS_BETA, "windows"),
                (labels::ARCH_BETA, "arm"),
                (labels::OS, "linux"),
                (labels::ARCH, "amd64"),
            ],
            vec![
                (labels::OS_BETA, "linux"),
                (labels::ARCH_BETA, "amd64"),
                (labels::OS, "linux"),
                (labels::ARCH, "amd64"),
            ],
        ),
    ];
    for (name, given, expected) in cases {
        let mut n0 = h.nodes["node0"].clone();
        n0.labels = given.iter().map(|(k, v)| (n(k), n(v))).collect();
        h.put_node(n0);
        let mut got: Vec<(String, String)> = h.nodes["node0"]
            .labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        got.sort();
        let mut want: Vec<(String, String)> = expected
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        want.sort();
        assert_eq!(got, want, "{name}");
    }
}
