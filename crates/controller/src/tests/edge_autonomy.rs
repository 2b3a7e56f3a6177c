//! Edge autonomy: an autonomous node goes Unknown and is tainted as upstream's would, but its
//! pods keep Ready and outlive their own tolerationSeconds. The first two tests run the node
//! lifecycle alone (`harness.rs` says why); the last composes it with taint eviction.

use std::collections::BTreeMap;

use super::harness::*;
use super::policies::{keep_posting, ms, t0, verdict_times};
use crate::model::ConditionStatus::True;
use crate::model::TaintEffect::{NoExecute, NoSchedule};
use crate::model::{Autonomy, Name, NodeConditionType, taint_keys};
use crate::time::Time;
use crate::{Action, Settings};

fn edge_cluster(settings: Settings) -> Harness {
    let mut edge = node("edge").zone("r", "a").ready(True, t0(), t0()).build();
    edge.autonomy = Autonomy::For(secs(3600));
    let other = node("other").zone("r", "a").ready(True, t0(), t0()).build();
    let pods = vec![pod("on-edge", "edge"), pod("on-other", "other")];
    Harness::lifecycle_alone_started(settings, t0(), vec![edge, other], pods, vec![])
}

#[test]
fn autonomous_node_goes_unknown_and_is_tainted_as_upstream_but_its_pods_keep_ready() {
    let mut h = edge_cluster(test_settings());
    keep_posting(&mut h, &["other"], t0() + secs(60));
    // The node itself: Unknown at the same millisecond as any node, tainted, NodeNotReady.
    assert_eq!(verdict_times(&h, "edge"), vec![t0() + secs(50) + ms(1)]);
    assert!(h.has_taint("edge", taint_keys::UNREACHABLE, NoExecute));
    assert!(h.has_taint("edge", taint_keys::UNREACHABLE, NoSchedule));
    assert!(
        h.node_events()
            .iter()
            .any(|(n, reason, _)| n == "edge" && *reason == "NodeNotReady")
    );
    // Its pods: never marked NotReady (their endpoints stay), even on later passes.
    assert!(h.pod_marks("on-edge").is_empty());
    assert_eq!(h.pod_status_updates(), 0);
}

#[test]
fn with_autonomy_switched_off_the_annotations_are_ignored() {
    let settings = Settings {
        autonomy: false,
        ..test_settings()
    };
    let mut h = edge_cluster(settings);
    keep_posting(&mut h, &["other"], t0() + secs(60));
    assert_eq!(h.pod_marks("on-edge"), vec![t0() + secs(50) + ms(1)]);
}

/// The node lifecycle and taint eviction together, against the one fake API: when each pod
/// was marked NotReady and evicted.
struct Fleet {
    nodes: BTreeMap<Name, crate::model::Node>,
    marked: Vec<(Time, String)>,
    evicted: Vec<(Time, String)>,
}

impl Fleet {
    /// `nodes` and `pods` listed at t0; virtual time runs to `until`, `alive` posting status
    /// every 10 s.
    fn run(
        settings: Settings,
        nodes: Vec<crate::model::Node>,
        pods: Vec<crate::model::Pod>,
        alive: &str,
        until: Time,
    ) -> Fleet {
        let mut api = FakeApi::new(settings, t0());
        api.start(nodes, pods, vec![]);
        let mut next_post = api.now + secs(10);
        while api.now < until {
            let next = api
                .ctl
                .next_deadline()
                .unwrap_or(until)
                .min(next_post)
                .min(until);
            api.now = api.now.max(next);
            if api.now == next_post {
                let conditions = vec![cond(NodeConditionType::Ready, True, api.now, t0())];
                api.set_conditions(alive, conditions);
                next_post += secs(10);
            }
            api.feed(crate::Input::Tick);
        }
        let marked = api
            .log
            .iter()
            .filter_map(|(t, a)| match a {
                Action::MarkPodNotReady { pod, .. } => Some((*t, pod.name.to_string())),
                _ => None,
            })
            .collect();
        let evicted = api
            .evicted
            .iter()
            .map(|(t, pod)| (*t, pod.name.to_string()))
            .collect();
        Fleet {
            nodes: api.nodes,
            marked,
            evicted,
        }
    }
}

/// What the API server's DefaultTolerationSeconds admission adds: 300 s.
fn web_pod(name: &str, node: &str) -> crate::model::Pod {
    use crate::model::{Toleration, TolerationOperator};
    let mut p = pod(name, node);
    p.tolerations = [taint_keys::NOT_READY, taint_keys::UNREACHABLE]
        .into_iter()
        .map(|k| Toleration {
            key: n(k),
            operator: TolerationOperator::Exists,
            value: n(""),
            effect: Some(NoExecute),
            toleration_seconds: Some(300),
        })
        .collect::<Vec<_>>()
        .into();
    p
}

#[test]
fn an_autonomous_nodes_pods_keep_ready_and_outlive_their_own_toleration_seconds() {
    let fleet = |autonomy: Autonomy| {
        let mut edge = node("edge").zone("r", "a").ready(True, t0(), t0()).build();
        edge.autonomy = autonomy;
        let nodes = vec![
            edge,
            node("alive").zone("r", "a").ready(True, t0(), t0()).build(),
        ];
        let pods = vec![web_pod("web", "edge")];
        Fleet::run(test_settings(), nodes, pods, "alive", t0() + secs(1000))
    };
    // Upstream: Unknown at t0 + 50 s, pod marked NotReady then, tainted at once (the test
    // rate), evicted 300 s later.
    let plain = fleet(Autonomy::None);
    let unknown = t0() + secs(50) + ms(1);
    assert_eq!(plain.marked, vec![(unknown, "web".to_string())]);
    let taint_added = plain.nodes["edge"]
        .taints
        .iter()
        .find(|t| &*t.key == taint_keys::UNREACHABLE && t.effect == NoExecute)
        .and_then(|t| t.time_added)
        .expect("tainted");
    assert_eq!(
        plain.evicted,
        vec![(unknown + secs(300), "web".to_string())]
    );
    // Ten minutes of autonomy: the same taint, never marked, evicted at timeAdded + 600 s.
    let edge = fleet(Autonomy::For(secs(600)));
    assert!(edge.marked.is_empty());
    assert!(edge.nodes["edge"].has_taint(taint_keys::UNREACHABLE, &NoExecute));
    // `timeAdded` (whole seconds) rounded up to the next second, never later than the taint
    // was seen: the write's instant, never before `timeAdded + 600 s`.
    assert_eq!(edge.evicted, vec![(unknown + secs(600), "web".to_string())]);
    assert!(edge.evicted[0].0 >= taint_added + secs(600));
    // Forever: never.
    let forever = fleet(Autonomy::Forever);
    assert!(forever.marked.is_empty() && forever.evicted.is_empty());
}
