//! The performance work (BENCHMARKS.md) against real kube-apiservers
//! (the releases at the end of this file): the informers take their first full state as one
//! `resourceVersion=0` LIST and then watch, both answered in protobuf (`api.content_type =
//! "protobuf"`, as kube-controller-manager asks), and see a Lease renewal and a node status change;
//! their stores equal what the server lists in JSON.
//!
//! If the server cannot be started the test fails, unless NODE_LIFECYCLED_SKIP_REAL_APISERVER=1.

use std::path::Path;
use std::time::Duration;

use crate::informer_support::{Harness, Id, Tracked, assert_same, decode_all, list_watch};
use crate::real_apiserver_support::RealApiserver;
use crate::real_apiserver_support::versions::{Kube, versions};
use node_lifecycled::kube::decode::DecodeContext;
use node_lifecycled::kube::decode::proto::ContentType;
use node_lifecycled::kube::{ClientSettings, Connection};
use node_lifecycled::model::{ConditionStatus, Lease, Node, NodeConditionType};
use node_lifecycled::runtime::{Clock, EventLoop};
use node_lifecycled::time::Time;

/// Generous: the server is real, the machine is shared (see real_apiserver_watch.rs).
const SEEN_WITHIN: Duration = Duration::from_secs(30);

fn ready_heartbeat(node: &Node) -> Option<(ConditionStatus, Option<Time>)> {
    node.conditions
        .iter()
        .find(|c| c.kind == NodeConditionType::Ready)
        .map(|c| (c.status, c.last_heartbeat_time))
}

fn real_kube_apiserver_informers_list_and_watch_in_protobuf_and_see_heartbeats(kube: Kube) {
    let Some(server) = RealApiserver::start(kube) else {
        return;
    };
    let connection =
        Connection::from_kubeconfig(Path::new(server.var("ADMIN_KUBECONFIG")), None, false)
            .unwrap();
    let clock = Clock::start();
    let mut lp: EventLoop<Id, Id> = EventLoop::new(clock.clone()).unwrap();
    let mut h = Harness::new(connection, &clock, ClientSettings::default());
    let mut config = list_watch(Duration::from_secs(10));
    config.reflector.initial_list_from_cache = true;
    config.content_type = ContentType::Protobuf;
    h.nodes = Some(Tracked::new(config.clone(), Id::Nodes));
    h.leases = Some(Tracked::new(config, Id::Leases));

    server.apply("apiVersion: v1\nkind: Namespace\nmetadata: {name: kube-node-lease}\n");
    // Objects that exist before the LIST, so the protobuf LIST carries items.
    let node = "apiVersion: v1\nkind: Node\nmetadata:\n  name: proto-node\n  labels: {kubernetes.io/os: linux}\n";
    server.apply(node);
    let lease = |renew: &str| {
        format!(
            "apiVersion: coordination.k8s.io/v1\nkind: Lease\nmetadata: {{name: proto-node, namespace: kube-node-lease}}\nspec: {{holderIdentity: proto-node, leaseDurationSeconds: 40, renewTime: \"{renew}\"}}\n"
        )
    };
    server.apply(&lease("2024-03-12T10:00:00.000000Z"));

    h.start(lp.control());
    h.run_until(&mut lp, SEEN_WITHIN, "initial sync", |h| {
        h.nodes().informer.is_synced() && h.leases().informer.is_synced()
    });
    assert!(h.nodes().store.contains_key("proto-node"));
    assert_eq!(
        h.leases().store.get("proto-node").map(|l| l.renew_time),
        Some(Time::parse_rfc3339("2024-03-12T10:00:00Z"))
    );

    // A Lease renewal, as a kubelet's.
    server.apply(&lease("2024-03-12T10:00:10.250000Z"));
    let renewed = Time::parse_rfc3339("2024-03-12T10:00:10.250Z");
    h.run_until(&mut lp, SEEN_WITHIN, "lease renewed", |h| {
        h.leases().store.get("proto-node").map(|l| l.renew_time) == Some(renewed)
    });

    // A node status change, as a kubelet's status update.
    let stamp = Time::from_unix_millis(1_710_000_000_000).to_rfc3339();
    let status = format!(
        r#"{{"status":{{"conditions":[{{"type":"Ready","status":"True","reason":"KubeletReady","message":"kubelet is posting ready status","lastHeartbeatTime":"{stamp}","lastTransitionTime":"{stamp}"}}]}}}}"#
    );
    server.kubectl(
        &[
            "patch",
            "node",
            "proto-node",
            "--subresource=status",
            "--type=merge",
            "-p",
            &status,
        ],
        None,
    );
    let posted = Some((
        ConditionStatus::True,
        Some(Time::from_unix_millis(1_710_000_000_000)),
    ));
    h.run_until(&mut lp, SEEN_WITHIN, "node status posted", |h| {
        h.nodes().store.get("proto-node").and_then(ready_heartbeat) == posted
    });

    // Both kinds were listed and watched in protobuf.
    for stats in [h.nodes().stats(), h.leases().stats()] {
        assert_eq!(stats.protobuf_lists, 1, "{stats:?}");
        assert!(stats.protobuf_watch_events >= 1, "{stats:?}");
        assert_eq!(stats.protobuf_watch_events, stats.watch_events, "{stats:?}");
        assert_eq!(stats.reflector.skipped_events, 0, "{stats:?}");
    }
    // The stores equal what the server lists as JSON, decoded by the JSON path.
    let mut ctx = DecodeContext::new();
    assert_same(
        "nodes",
        &h.nodes().store,
        &decode_all::<Node>(&server.items(&["nodes"]), &mut ctx),
    );
    assert_same(
        "leases",
        &h.leases().store,
        &decode_all::<Lease>(
            &server.items(&["leases", "-n", "kube-node-lease"]),
            &mut ctx,
        ),
    );
}

// The releases each scenario runs on: the whole tier on the newest; on 1.35 and the 1.20.2 floor
// the protocol and a representative few of each kind (README, Supported Kubernetes versions).
versions! {
    v1_37 => [real_kube_apiserver_informers_list_and_watch_in_protobuf_and_see_heartbeats],
    v1_35 => [real_kube_apiserver_informers_list_and_watch_in_protobuf_and_see_heartbeats],
    v1_20 => [real_kube_apiserver_informers_list_and_watch_in_protobuf_and_see_heartbeats],
}
