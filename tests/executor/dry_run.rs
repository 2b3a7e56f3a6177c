//! Dry-run ("everything runs, every write is logged as 'would …' and counted, nothing is sent";
//! both eviction modes, taint-based and legacy, respect it). The controllers must keep deciding as
//! they would for real, without re-issuing a write every pass although the cluster never
//! changes: proved over 10 virtual minutes of a dead node, against the simulator.

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

use crate::executor_support::{Harness, key, mark, n, node_event};
use node_lifecycled::controller::taint_eviction::EvictionResult;
use node_lifecycled::controller::{
    Action, ActionId, Controllers, Input, LeaseReadOutcome, Outcome, Settings,
};
use node_lifecycled::model::{ConditionStatus, Lease, Node, Pod, Taint, TaintEffect};
use node_lifecycled::runtime::executor::WriteKind;
use node_lifecycled::time::Time;
use node_lifecycled_sim::{Resource, fixtures};

fn unreachable_taint(at: Time) -> Taint {
    Taint {
        key: n("node.kubernetes.io/unreachable"),
        value: n(""),
        effect: TaintEffect::NoExecute,
        time_added: Some(at),
    }
}

#[test]
fn dry_run_sends_no_write_and_answers_each_action_as_its_write_would_have() {
    let mut h = Harness::dry();
    let node = h.add_node("n1");
    let pod = h.add_pod("ns", "p", "n1");
    let evicted = h.add_pod("ns", "q", "n1");
    h.sim
        .cluster()
        .create(Resource::Leases, fixtures::node_lease("n1", h.now()))
        .unwrap();
    let now = h.now();
    let taints = vec![unreachable_taint(now)];
    h.submit([
        node_event(
            &node,
            "NodeNotReady",
            "Node n1 status is now: NodeNotReady".into(),
        ),
        Action::PatchNodeTaints {
            id: ActionId(1),
            node: node.name.clone(),
            uid: node.uid.clone(),
            resource_version: node.resource_version.clone(),
            taints: taints.clone(),
        },
        Action::PatchNodeLabels {
            id: ActionId(2),
            node: node.name.clone(),
            uid: node.uid.clone(),
            labels: vec![(n("beta.kubernetes.io/arch"), n("arm64"))],
        },
        mark(3, &pod),
        Action::SetPodStatusNodeLost {
            id: ActionId(4),
            pod: pod.key.clone(),
            uid: pod.uid.clone(),
            message: "Node n1 which was running pod p is unresponsive".into(),
        },
        Action::DeletePod {
            id: ActionId(5),
            pod: pod.key.clone(),
            uid: pod.uid.clone(),
        },
        Action::EvictPod {
            id: ActionId(6),
            pod: evicted.key.clone(),
            uid: evicted.uid.clone(),
            attempt: 1,
            condition_present: false,
        },
        Action::ReadLease {
            id: ActionId(7),
            node: n("n1"),
        },
    ]);
    let inputs = h.run_until_idle();
    assert!(h.sim.writes().is_empty(), "{}", h.sim.write_log_text());

    let mut it = inputs.into_iter();
    let mut next = || it.next().expect("more inputs");
    // The live Lease read is a verdict's first step: it overtakes the writes queued before it.
    assert!(
        matches!(
            next(),
            Input::LeaseRead {
                id: ActionId(7),
                outcome: LeaseReadOutcome::Found(_)
            }
        ),
        "reads happen in dry-run"
    );
    // Each object as the write would have left it comes before the write's result, as a real
    // write's answer does.
    let Input::NodeUpsert(tainted) = next() else {
        panic!("the node as the taint write would have left it")
    };
    assert_eq!(tainted.taints, taints);
    assert_eq!(tainted.resource_version, node.resource_version);
    assert!(matches!(
        next(),
        Input::Result {
            id: ActionId(1),
            outcome: Outcome::Ok
        }
    ));
    let Input::NodeUpsert(labelled) = next() else {
        panic!()
    };
    assert_eq!(
        labelled.label("beta.kubernetes.io/arch").map(|v| &**v),
        Some("arm64")
    );
    assert!(matches!(
        next(),
        Input::Result {
            id: ActionId(2),
            outcome: Outcome::Ok
        }
    ));
    // Pod deletions come before pod status writes (see the executor's queue classes).
    assert!(matches!(next(), Input::PodUpsert(p) if p.deleting && p.key == pod.key));
    assert!(matches!(
        next(),
        Input::Result {
            id: ActionId(5),
            outcome: Outcome::Ok
        }
    ));
    assert!(matches!(next(), Input::PodUpsert(p) if p.deleting && p.key == evicted.key));
    assert!(matches!(
        next(),
        Input::EvictionResult {
            id: ActionId(6),
            result: EvictionResult::Deleted
        }
    ));
    let Input::PodUpsert(not_ready) = next() else {
        panic!()
    };
    assert_eq!(not_ready.ready, Some(ConditionStatus::False));
    assert!(matches!(
        next(),
        Input::Result {
            id: ActionId(3),
            outcome: Outcome::Ok
        }
    ));
    assert!(matches!(
        next(),
        Input::Result {
            id: ActionId(4),
            outcome: Outcome::Ok
        }
    ));

    let log = h.exec.dry_run_log();
    let lines: Vec<&str> = log.recent().collect();
    assert_eq!(
        lines,
        vec![
            "would taint node n1 node.kubernetes.io/unreachable:NoExecute",
            "would label node n1 beta.kubernetes.io/arch=arm64",
            "would delete pod ns/p",
            "would evict pod ns/q (condition DisruptionTarget, then delete)",
            "would mark pod ns/p NotReady",
            "would set pod ns/p status reason NodeLost: Node n1 which was running pod p is unresponsive",
            "would record event Normal NodeNotReady on node n1 from node-controller: Node n1 status is now: NodeNotReady",
        ]
    );
    for kind in [
        WriteKind::Taints,
        WriteKind::Labels,
        WriteKind::PodNotReady,
        WriteKind::PodNodeLost,
        WriteKind::PodDelete,
        WriteKind::PodEviction,
        WriteKind::Event,
    ] {
        assert_eq!(log.count(kind), 1, "{kind:?}");
    }
    assert_eq!(log.count(WriteKind::NodeStatus), 0);
    let stats = h.exec.stats();
    assert_eq!(stats.requests_total(), stats.requests_with("get", 200));
    assert_eq!(stats.dry_run_writes["pod_eviction"], 1);
    assert_eq!(stats.dry_run_writes["node_status"], 0);
}

#[test]
fn dry_run_checks_a_writes_preconditions_as_the_server_would() {
    let mut h = Harness::dry();
    let node = h.add_node("n1");
    h.sim
        .cluster()
        .set_node_condition("n1", "Ready", "False", h.now())
        .unwrap();
    let old = h.add_pod("ns", "p", "n1");
    h.sim
        .cluster()
        .remove(Resource::Pods, Some("ns"), "p")
        .unwrap();
    h.add_pod("ns", "p", "n1");
    h.submit([
        Action::UpdateNodeConditions {
            id: ActionId(1),
            node: node.name.clone(),
            uid: node.uid.clone(),
            resource_version: node.resource_version.clone(),
            conditions: node.conditions.clone(),
        },
        Action::EvictPod {
            id: ActionId(2),
            pod: old.key.clone(),
            uid: old.uid.clone(),
            attempt: 1,
            condition_present: false,
        },
        mark(3, &executor_support_pod(&old, "gone")),
    ]);
    let inputs = h.run_until_idle();
    assert!(
        matches!(&inputs[0], Input::NodeUpsert(fresh) if fresh.resource_version != node.resource_version
            && fresh.ready().unwrap().status == ConditionStatus::False),
        "a stale decision gets the fresh node, as after a real 409: {inputs:?}"
    );
    assert!(matches!(
        inputs[1],
        Input::Result {
            id: ActionId(1),
            outcome: Outcome::Conflict
        }
    ));
    assert!(matches!(
        inputs[2],
        Input::EvictionResult {
            result: EvictionResult::Conflict,
            ..
        }
    ));
    assert!(matches!(
        inputs[3],
        Input::Result {
            id: ActionId(3),
            outcome: Outcome::NotFound
        }
    ));
    assert_eq!(inputs.len(), 4);
    assert_eq!(
        h.exec.dry_run_log().total(),
        0,
        "no write would have happened"
    );
    assert!(h.writes().is_empty());
}

fn executor_support_pod(template: &Pod, name: &str) -> Pod {
    Pod {
        key: key(&template.key.namespace, name),
        ..template.clone()
    }
}

/// The daemon's loop in miniature: the controllers, the executor, the virtual clock, and a
/// healthy kubelet renewing n2's lease every 10 s (fed as the lease watch would). n1 is dead:
/// its node and lease never change, and dry-run changes nothing, so no watch event ever comes
/// for it; all the controllers learn is what the executor feeds back. Every minute the
/// informers relist (a resumed watch after a 410 does the same): every object again, at the
/// version the server holds, passed through the executor's dry-run overlay as the daemon does.
struct Scenario {
    h: Harness,
    ctl: Controllers,
    inputs: VecDeque<Input>,
    next_renew: Time,
    next_relist: Time,
}

impl Scenario {
    fn new(settings: Settings) -> Scenario {
        let mut h = Harness::dry();
        let now = h.now();
        h.add_node("n1");
        h.add_node("n2");
        let cluster = h.sim.cluster();
        for node in ["n1", "n2"] {
            cluster
                .create(Resource::Leases, fixtures::node_lease(node, now))
                .unwrap();
        }
        for i in 0..3 {
            h.add_pod("ns", &format!("dead-{i}"), "n1");
        }
        h.add_pod("ns", "alive", "n2");
        let mut s = Scenario {
            ctl: Controllers::new(settings, now),
            inputs: VecDeque::new(),
            next_renew: now + Duration::from_secs(10),
            next_relist: now + Duration::from_secs(60),
            h,
        };
        s.list_everything();
        s.inputs.push_back(Input::InitialSyncDone);
        s
    }

    fn list_everything(&mut self) {
        let cluster = self.h.sim.cluster();
        for v in cluster.list(Resource::Nodes, None) {
            let node: Node = self.h.decode_value(v);
            let input = self.h.exec.overlay(Input::NodeUpsert(node));
            self.inputs.push_back(input);
        }
        for v in cluster.list(Resource::Leases, None) {
            let lease: Lease = self.h.decode_value(v);
            self.inputs.push_back(Input::LeaseUpsert(lease));
        }
        for v in cluster.list(Resource::Pods, None) {
            let pod: Pod = self.h.decode_value(v);
            let input = self.h.exec.overlay(Input::PodUpsert(pod));
            self.inputs.push_back(input);
        }
    }

    fn run_for(&mut self, span: Duration) {
        let end = self.h.now() + span;
        for _ in 0..1_000_000 {
            let now = self.h.now();
            while let Some(input) = self.inputs.pop_front() {
                let actions = self.ctl.handle(input, now);
                self.h.exec.submit(actions, now);
            }
            let fed = self.h.run(usize::MAX);
            if !fed.is_empty() {
                self.inputs.extend(fed);
                continue;
            }
            let next = [
                self.ctl.next_deadline(),
                self.h.exec.next_wakeup(),
                Some(self.next_renew),
                Some(self.next_relist),
            ]
            .into_iter()
            .flatten()
            .min()
            .unwrap();
            if next > end {
                self.h.set_now(end);
                return;
            }
            if next > now {
                self.h.set_now(next);
            }
            let now = self.h.now();
            if now >= self.next_renew {
                self.h.sim.cluster().renew_lease("n2", now).unwrap();
                let v = self
                    .h
                    .sim
                    .cluster()
                    .get(Resource::Leases, Some("kube-node-lease"), "n2")
                    .unwrap();
                let lease: Lease = self.h.decode_value(v);
                self.inputs.push_back(Input::LeaseUpsert(lease));
                self.next_renew = now + Duration::from_secs(10);
            }
            if now >= self.next_relist {
                self.list_everything();
                self.next_relist = now + Duration::from_secs(60);
            }
            if self.ctl.next_deadline().is_some_and(|d| d <= now) {
                self.inputs.push_back(Input::Tick);
            }
        }
        panic!("the scenario did not reach its end");
    }

    /// Each distinct "would" line and how often it was logged.
    fn lines(&self) -> BTreeMap<String, usize> {
        let mut lines = BTreeMap::new();
        for line in self.h.exec.dry_run_log().recent() {
            *lines.entry(line.to_string()).or_default() += 1;
        }
        lines
    }
}

#[test]
fn dry_run_over_ten_minutes_of_a_dead_node_issues_each_write_once() {
    let mut s = Scenario::new(Settings::default());
    s.run_for(Duration::from_secs(600));

    let lines = s.lines();
    let repeated: Vec<_> = lines.iter().filter(|(_, count)| **count > 1).collect();
    assert!(repeated.is_empty(), "repeated: {repeated:#?}");
    let log = s.h.exec.dry_run_log();
    assert_eq!(log.count(WriteKind::NodeStatus), 1, "{lines:#?}");
    assert!(lines.contains_key(
        "would set node n1 conditions MemoryPressure=Unknown (NodeStatusUnknown), DiskPressure=Unknown (NodeStatusUnknown), PIDPressure=Unknown (NodeStatusUnknown), Ready=Unknown (NodeStatusUnknown)"
    ), "{lines:#?}");
    assert!(lines.contains_key("would taint node n1 node.kubernetes.io/unreachable:NoExecute"));
    assert!(lines.contains_key("would taint node n1 node.kubernetes.io/unreachable:NoSchedule"));
    assert_eq!(log.count(WriteKind::Taints), 2);
    assert_eq!(log.count(WriteKind::PodNotReady), 3);
    assert_eq!(log.count(WriteKind::PodEviction), 3, "{lines:#?}");
    for i in 0..3 {
        assert!(lines.contains_key(&format!("would mark pod ns/dead-{i} NotReady")));
        assert!(lines.contains_key(&format!(
            "would evict pod ns/dead-{i} (condition DisruptionTarget, then delete)"
        )));
        assert!(lines.contains_key(&format!(
            "would record event Normal TaintManagerEviction on pod ns/dead-{i} from taint-eviction-controller: Marking for deletion Pod ns/dead-{i}"
        )));
    }
    let about_the_healthy_node: Vec<_> = lines
        .keys()
        .filter(|l| l.contains("n2") || l.contains("alive"))
        .collect();
    assert_eq!(
        about_the_healthy_node,
        [
            "would record event Normal RegisteredNode on node n2 from node-controller: Node n2 event: Registered Node n2 in Controller"
        ],
        "the healthy node and its pod are left alone"
    );
    assert_eq!(log.count(WriteKind::Labels), 0);
    assert!(s.h.sim.writes().is_empty(), "{}", s.h.sim.write_log_text());
    // The live lease read that confirmed n1 dead happened, and was the only read of a lease.
    assert_eq!(
        s.h.exec.stats().requests_with("get", 200),
        1 + 1 + 2 + 3 + 3,
        "lease read, status and two taint precondition reads, 3 marks, 3 evictions"
    );
}

#[test]
fn dry_run_in_legacy_mode_deletes_each_pod_of_the_dead_node_once() {
    let mut s = Scenario::new(Settings {
        taint_based_eviction: false,
        ..Settings::default()
    });
    s.run_for(Duration::from_secs(600));
    let lines = s.lines();
    // Every decision once, DeletingAllPods included: later passes over the evicted node find
    // only terminating pods and record nothing.
    let repeated: Vec<_> = lines.iter().filter(|(_, count)| **count > 1).collect();
    assert!(repeated.is_empty(), "repeated: {repeated:#?}");
    let log = s.h.exec.dry_run_log();
    assert!(log.count(WriteKind::Event) < 20, "{lines:#?}");
    assert_eq!(log.count(WriteKind::PodDelete), 3, "{lines:#?}");
    assert_eq!(log.count(WriteKind::PodNodeLost), 3, "{lines:#?}");
    assert_eq!(log.count(WriteKind::PodEviction), 0);
    for i in 0..3 {
        assert!(lines.contains_key(&format!("would delete pod ns/dead-{i}")));
    }
    assert!(
        !lines.keys().any(|l| l.contains("NoExecute")),
        "legacy mode writes no NoExecute taint: {lines:#?}"
    );
    assert!(s.h.sim.writes().is_empty());
}

#[test]
fn a_relist_at_the_same_version_keeps_dry_run_changes_and_a_real_change_drops_them() {
    let mut h = Harness::dry();
    let node = h.add_node("n1");
    let taints = vec![unreachable_taint(h.now())];
    h.submit([Action::PatchNodeTaints {
        id: ActionId(1),
        node: node.name.clone(),
        uid: node.uid.clone(),
        resource_version: node.resource_version.clone(),
        taints: taints.clone(),
    }]);
    h.run_until_idle();
    assert_eq!(h.exec.dry_run_shadows(), 1);

    let relisted = h.node_model("n1");
    assert!(relisted.taints.is_empty(), "the server never saw the write");
    let Input::NodeUpsert(seen) = h.exec.overlay(Input::NodeUpsert(relisted)) else {
        panic!()
    };
    assert_eq!(
        seen.taints, taints,
        "the controllers keep seeing what dry-run wrote"
    );

    h.sim
        .cluster()
        .set_node_condition("n1", "Ready", "False", h.now())
        .unwrap();
    let changed = h.node_model("n1");
    let Input::NodeUpsert(seen) = h.exec.overlay(Input::NodeUpsert(changed.clone())) else {
        panic!()
    };
    assert_eq!(
        seen, changed,
        "a real change wins: the controllers decide on it"
    );
    assert_eq!(h.exec.dry_run_shadows(), 0);
}
