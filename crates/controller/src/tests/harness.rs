//! A virtual clock, builders, and the node lifecycle suites' view of the one fake API
//! (`controller::testing::FakeApi`: it executes the controllers' actions on its own objects
//! and feeds the results back), so each upstream scenario reads as a short story.

use std::rc::Rc;
use std::time::Duration;

use crate::model::{
    ConditionStatus, ConditionText, Lease, Name, Node, NodeCondition, NodeConditionType, Pod,
    PodKey, Taint, TaintEffect, labels,
};
pub use crate::testing::FakeApi;
use crate::time::Rate;
use crate::time::Time;
use crate::{Controllers, Settings};

pub fn n(s: &str) -> Name {
    Rc::from(s)
}

pub fn date(y: u32, mo: u32, d: u32, h: u32, mi: u32, s: u32) -> Time {
    Time::parse_rfc3339(&format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}Z")).unwrap()
}

pub fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

/// Upstream's test constants: grace 50 s, startup 60 s, period 5 s, QPS 100000 (never the
/// bottleneck), large cluster threshold 20, unhealthy threshold 0.55.
pub fn test_settings() -> Settings {
    Settings {
        node_monitor_period: secs(5),
        node_monitor_grace_period: secs(50),
        node_startup_grace_period: secs(60),
        node_eviction_rate: Rate::per_second(100_000),
        secondary_node_eviction_rate: Rate::per_second(100_000),
        large_cluster_size_threshold: 20,
        unhealthy_zone_threshold: 0.55,
        taint_based_eviction: true,
        pod_eviction_timeout: secs(300),
        ..Settings::default()
    }
}

pub struct NodeBuilder(Node);

pub fn node(name: &str) -> NodeBuilder {
    NodeBuilder(Node {
        name: n(name),
        uid: n(&format!("uid-{name}")),
        resource_version: n("1"),
        creation_timestamp: date(2012, 1, 1, 0, 0, 0),
        labels: Default::default(),
        taints: Vec::new(),
        unschedulable: false,
        conditions: Vec::new(),
        other_conditions: Vec::new(),
        autonomy: Default::default(),
        maintenance: Default::default(),
        writers: Default::default(),
    })
}

pub fn cond(kind: NodeConditionType, status: ConditionStatus, hb: Time, tr: Time) -> NodeCondition {
    NodeCondition {
        kind,
        status,
        last_heartbeat_time: Some(hb),
        last_transition_time: Some(tr),
        text: ConditionText::new(None, None),
    }
}

impl NodeBuilder {
    pub fn created(mut self, t: Time) -> Self {
        self.0.creation_timestamp = t;
        self
    }
    pub fn uid(mut self, uid: &str) -> Self {
        self.0.uid = n(uid);
        self
    }
    pub fn label(mut self, k: &str, v: &str) -> Self {
        self.0.labels.push((n(k), n(v)));
        self
    }
    /// Both the beta and the GA region/zone labels, as upstream's fixtures.
    pub fn zone(self, region: &str, zone: &str) -> Self {
        self.label(labels::REGION, region)
            .label(labels::ZONE, zone)
            .label(labels::REGION_BETA, region)
            .label(labels::ZONE_BETA, zone)
    }
    pub fn ready(self, status: ConditionStatus, hb: Time, tr: Time) -> Self {
        self.condition(NodeConditionType::Ready, status, hb, tr)
    }
    pub fn condition(
        mut self,
        kind: NodeConditionType,
        s: ConditionStatus,
        hb: Time,
        tr: Time,
    ) -> Self {
        self.0.conditions.push(cond(kind, s, hb, tr));
        self
    }
    pub fn taint(mut self, key: &str, effect: TaintEffect) -> Self {
        self.0.taints.push(Taint {
            key: n(key),
            value: n(""),
            effect,
            time_added: None,
        });
        self
    }
    pub fn build(self) -> Node {
        self.0
    }
}

pub fn pod(name: &str, node: &str) -> Pod {
    Pod {
        key: PodKey {
            namespace: n("default"),
            name: n(name),
        },
        uid: n(&format!("uid-{name}")),
        resource_version: n("1"),
        node_name: Some(n(node)),
        ready: Some(ConditionStatus::True),
        tolerations: Rc::from(Vec::new()),
        deleting: false,
        daemonset_owned: false,
        disruption_target: false,
        creation_timestamp: None,
    }
}

pub fn lease(node: &str, renew: Time) -> Lease {
    Lease {
        name: node.into(),
        renew_time: Some(renew),
        duration_seconds: None,
        resource_version: "1".into(),
    }
}

/// The node lifecycle suites' fake API: the one [`FakeApi`].
pub type Harness = FakeApi;

/// The node lifecycle suites run over `Controllers` without taint eviction
/// (`Controllers::without_taint_eviction`). Why alone: they port upstream's
/// `node_lifecycle_controller_test.go`, which runs the node lifecycle controller with no taint
/// eviction controller, and assert on pods the NoExecute taints would otherwise delete (marked
/// NotReady, legacy deletions); the composed machine is tested in `lifecycle_with_eviction/`.
impl FakeApi {
    pub fn lifecycle_alone(settings: Settings, now: Time) -> FakeApi {
        FakeApi::over(Controllers::without_taint_eviction(settings, now), now)
    }

    /// The node lifecycle alone, having listed `nodes`, `pods` and `leases` and finished its
    /// initial sync at `now` (upstream: stores synced, first `monitorNodeHealth`).
    pub fn lifecycle_alone_started(
        settings: Settings,
        now: Time,
        nodes: Vec<Node>,
        pods: Vec<Pod>,
        leases: Vec<Lease>,
    ) -> FakeApi {
        let mut h = FakeApi::lifecycle_alone(settings, now);
        h.start(nodes, pods, leases);
        h
    }
}
