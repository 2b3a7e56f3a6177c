//! Responsive informers against real kube-apiservers (the releases at the end of this file):
//! informers for nodes, `kube-node-lease` Leases and bound pods, on the real event loop over TLS
//! with the admin kubeconfig's client certificate, see objects created, changed and deleted with
//! kubectl.
//!
//! One test starts the server once and runs the scenario in order. If the server cannot be
//! started the test fails, unless NODE_LIFECYCLED_SKIP_REAL_APISERVER=1 (then it says why).

use std::path::Path;
use std::time::Duration;

use crate::informer_support::{Harness, Id, Tracked, assert_same, decode_all, list_watch};
use crate::real_apiserver_support::RealApiserver;
use crate::real_apiserver_support::versions::{Kube, versions};
use node_lifecycled::kube::decode::DecodeContext;
use node_lifecycled::kube::{ClientSettings, Connection};
use node_lifecycled::model::{ConditionStatus, Lease, Node, NodeConditionType, Pod, PodKey};
use node_lifecycled::runtime::informer::probe_watch_list;
use node_lifecycled::runtime::{Clock, EventLoop};
use node_lifecycled::time::Time;
use serde_json::Value;

/// Generous: the server is real, the machine is shared.
/// How long a kubectl change may take to reach our store. Generous: on a busy machine a server
/// started seconds earlier has let a freshly opened watch wait more than 10 s for its first
/// byte (CI run of the one-store change: the Lease watch's idle timeout, then nothing for 10 s);
/// each idle timeout reopens the watch from the last resourceVersion, so nothing is lost, only
/// late.
const SEEN_WITHIN: Duration = Duration::from_secs(30);

fn pod_key(namespace: &str, name: &str) -> PodKey {
    PodKey {
        namespace: namespace.into(),
        name: name.into(),
    }
}

fn ready(node: &Node) -> Option<ConditionStatus> {
    node.conditions
        .iter()
        .find(|c| c.kind == NodeConditionType::Ready)
        .map(|c| c.status)
}

fn informers_see_kubectl_changes(kube: Kube) {
    let Some(server) = RealApiserver::start(kube) else {
        return;
    };
    let connection =
        Connection::from_kubeconfig(Path::new(server.var("ADMIN_KUBECONFIG")), None, false)
            .unwrap();
    let clock = Clock::start();
    let mut lp: EventLoop<Id, Id> = EventLoop::new(clock.clone()).unwrap();
    let mut h = Harness::new(connection, &clock, ClientSettings::default());
    assert_eq!(
        probe_watch_list(&mut h.client),
        Some(kube.has_watch_list()),
        "watch-list streaming from 1.32 on, list+watch before"
    );
    // Watches end (server-side timeoutSeconds) every 5–8 s, so the scenario also proves that
    // a real server's clean end is resumed without a relist. The idle timeout leaves a stream
    // 10 s for its response head: a server started seconds earlier, on a busy machine, took
    // over 6 s (two idle timeouts in one run, one in 1 of 3 others).
    let config = list_watch(Duration::from_secs(10));
    h.nodes = Some(Tracked::new(config.clone(), Id::Nodes));
    h.leases = Some(Tracked::new(config.clone(), Id::Leases));
    h.pods = Some(Tracked::new(config, Id::Pods));

    server.apply("apiVersion: v1\nkind: Namespace\nmetadata: {name: kube-node-lease}\n");
    server.apply("apiVersion: v1\nkind: Namespace\nmetadata: {name: informer-test}\n");
    // A fresh server's watch caches fill after it reports ready; a watch from a
    // resourceVersion is served by them and waits until they are (one without goes to etcd).
    // One short watch from resourceVersion 0 of each resource first, so that what is measured
    // below is our streams, not the server's start-up.
    for path in [
        "/api/v1/nodes",
        "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases",
        "/api/v1/pods",
    ] {
        server.kubectl(
            &[
                "get",
                "--raw",
                &format!("{path}?watch=true&resourceVersion=0&timeoutSeconds=1"),
            ],
            None,
        );
    }
    h.start(lp.control());
    h.run_until(&mut lp, SEEN_WITHIN, "initial sync", |h| {
        h.nodes().informer.is_synced()
            && h.leases().informer.is_synced()
            && h.pods().informer.is_synced()
    });

    // Node: created, then tainted, then its status posted (as a kubelet would).
    server.apply(
        "apiVersion: v1\nkind: Node\nmetadata:\n  name: kubectl-node\n  labels: {kubernetes.io/os: linux}\n",
    );
    h.run_until(&mut lp, SEEN_WITHIN, "node created", |h| {
        h.nodes().store.contains_key("kubectl-node")
    });
    server.kubectl(
        &[
            "taint",
            "node",
            "kubectl-node",
            "example.com/maintenance=yes:NoExecute",
        ],
        None,
    );
    h.run_until(&mut lp, SEEN_WITHIN, "node tainted", |h| {
        h.nodes().store.get("kubectl-node").is_some_and(|n| {
            n.taints
                .iter()
                .any(|t| &*t.key == "example.com/maintenance" && &*t.value == "yes")
        })
    });
    let stamp = Time::from_unix_millis(1_710_000_000_000).to_rfc3339();
    let status = format!(
        r#"{{"status":{{"conditions":[{{"type":"Ready","status":"True","reason":"KubeletReady","message":"kubelet is posting ready status","lastHeartbeatTime":"{stamp}","lastTransitionTime":"{stamp}"}}]}}}}"#
    );
    server.kubectl(
        &[
            "patch",
            "node",
            "kubectl-node",
            "--subresource=status",
            "--type=merge",
            "-p",
            &status,
        ],
        None,
    );
    h.run_until(&mut lp, SEEN_WITHIN, "node status posted", |h| {
        h.nodes().store.get("kubectl-node").and_then(ready) == Some(ConditionStatus::True)
    });

    // Lease in kube-node-lease: created, then renewed.
    let lease = |renew: &str| {
        format!(
            "apiVersion: coordination.k8s.io/v1\nkind: Lease\nmetadata: {{name: kubectl-node, namespace: kube-node-lease}}\nspec: {{holderIdentity: kubectl-node, leaseDurationSeconds: 40, renewTime: \"{renew}\"}}\n"
        )
    };
    server.apply(&lease("2024-03-12T10:00:00.000000Z"));
    let first = Time::parse_rfc3339("2024-03-12T10:00:00Z");
    h.run_until(&mut lp, SEEN_WITHIN, "lease created", |h| {
        h.leases().store.get("kubectl-node").map(|l| l.renew_time) == Some(first)
    });
    server.apply(&lease("2024-03-12T10:00:10.000000Z"));
    let renewed = Time::parse_rfc3339("2024-03-12T10:00:10Z");
    h.run_until(&mut lp, SEEN_WITHIN, "lease renewed", |h| {
        h.leases().store.get("kubectl-node").map(|l| l.renew_time) == Some(renewed)
    });

    // Pods: an unbound one (never watched), then one bound to the node, then a toleration added.
    let pod = |name: &str, node: Option<&str>| {
        let node_line = node.map_or(String::new(), |n| format!("  nodeName: {n}\n"));
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}, namespace: informer-test}}\nspec:\n{node_line}  containers:\n  - {{name: app, image: registry.k8s.io/pause:3.10}}\n"
        )
    };
    server.apply(&pod("pending", None));
    server.apply(&pod("bound", Some("kubectl-node")));
    h.run_until(&mut lp, SEEN_WITHIN, "bound pod created", |h| {
        h.pods()
            .store
            .contains_key(&pod_key("informer-test", "bound"))
    });
    assert!(
        !h.pods()
            .store
            .contains_key(&pod_key("informer-test", "pending")),
        "an unbound pod, created earlier, is not watched"
    );
    let bound = &h.pods().store[&pod_key("informer-test", "bound")];
    assert_eq!(bound.node_name.as_deref(), Some("kubectl-node"));
    server.kubectl(
        &[
            "patch",
            "pod",
            "bound",
            "-n",
            "informer-test",
            "--type=json",
            "-p",
            r#"[{"op":"add","path":"/spec/tolerations/-","value":{"key":"example.com/maintenance","operator":"Exists","effect":"NoExecute","tolerationSeconds":30}}]"#,
        ],
        None,
    );
    h.run_until(&mut lp, SEEN_WITHIN, "toleration added", |h| {
        h.pods()
            .store
            .get(&pod_key("informer-test", "bound"))
            .is_some_and(|p| {
                p.tolerations.iter().any(|t| {
                    &*t.key == "example.com/maintenance" && t.toleration_seconds == Some(30)
                })
            })
    });

    // The stores equal what the server lists.
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
    let bound_pods: Vec<Value> = server
        .items(&[
            "pods",
            "--all-namespaces",
            "--field-selector",
            "spec.nodeName!=",
        ])
        .into_iter()
        .collect();
    assert_same(
        "pods",
        &h.pods().store,
        &decode_all::<Pod>(&bound_pods, &mut ctx),
    );

    // Deletions (no kubelet: the pod is force-deleted, as a kubelet would finish it).
    server.kubectl(
        &[
            "delete",
            "pod",
            "bound",
            "-n",
            "informer-test",
            "--grace-period=0",
            "--force",
        ],
        None,
    );
    server.kubectl(
        &["delete", "lease", "kubectl-node", "-n", "kube-node-lease"],
        None,
    );
    server.kubectl(&["delete", "node", "kubectl-node"], None);
    h.run_until(&mut lp, SEEN_WITHIN, "deletions", |h| {
        !h.pods()
            .store
            .contains_key(&pod_key("informer-test", "bound"))
            && !h.leases().store.contains_key("kubectl-node")
            && !h.nodes().store.contains_key("kubectl-node")
    });

    // Until every informer has resumed after a clean end by the server (timeoutSeconds).
    let reconnected = h.run_until(&mut lp, 2 * SEEN_WITHIN, "server-side watch ends", |h| {
        [h.nodes().stats(), h.leases().stats(), h.pods().stats()]
            .iter()
            .all(|s| s.reflector.reconnects > s.idle_timeouts + s.broken_watches)
    });
    println!("{}watches rotated within {reconnected:?} more", h.stats());
    for stats in [h.nodes().stats(), h.leases().stats(), h.pods().stats()] {
        assert_eq!(stats.reflector.relists, 0, "{stats:?}");
        assert_eq!(stats.list_pages, 1, "{stats:?}");
        assert_eq!(stats.broken_watches, 0, "{stats:?}");
        // Seen before the warm-up above, on a server started seconds earlier: a Lease watch
        // got not even its response head for over 6 s. The idle timeout resumed it from its
        // resourceVersion and no event was lost. Up to three are tolerated for a machine busy
        // enough to starve a fresh server (a CI run under load saw two); a stream that never
        // answered would collect one every 10 s of this test, far more.
        assert!(stats.idle_timeouts <= 3, "{stats:?}");
        assert_eq!(stats.reflector.skipped_events, 0, "{stats:?}");
    }
}

// The releases each scenario runs on: the whole tier on the newest; on 1.35 and the 1.20.2 floor
// the protocol and a representative few of each kind (README, Supported Kubernetes versions).
versions! {
    v1_37 => [informers_see_kubectl_changes],
    v1_35 => [informers_see_kubectl_changes],
    v1_20 => [informers_see_kubectl_changes],
}
