//! `status` and `explain` rendered from real controllers (the cluster of the dump tests: zone r1/a
//! with a not-Ready node carrying 30 pods that tolerate its taint for
//! 100..130 s, zone r1/b in an outage), through the same request parser the socket uses.

use crate::observe_support::{cluster, snapshot};
use node_lifecycled::config::DumpFormat;
use node_lifecycled::observe::ask::answer;
use node_lifecycled::observe::decision_log::DecisionLog;
use node_lifecycled::observe::explain::Acting;

fn ask(request: &str, acting: Acting) -> String {
    let c = cluster(true, 5);
    let mut log = DecisionLog::new();
    let mut controllers = c.controllers;
    let decisions = controllers.take_decisions();
    log.record(c.now, decisions, false);
    let c = crate::observe_support::Cluster {
        controllers,
        now: c.now,
    };
    answer(request, &c.controllers, &log, acting, c.now, || {
        snapshot(&c, DumpFormat::Text)
    })
}

#[test]
fn status_tells_role_sync_zones_queues_evictions_and_api_use() {
    let text = ask("status", Acting::Yes);
    let lines: Vec<&str> = text.lines().collect();
    assert!(
        lines[0].starts_with("node-lifecycled 0.1.0 (pid "),
        "{text}"
    );
    assert!(text.contains("\nrole: "), "{text}");
    assert!(text.contains("\nsync: complete\n"), "{text}");
    assert!(text.contains("\n  watch nodes "), "{text}");
    assert!(text.contains("\nzones: 2\n"), "{text}");
    assert!(
        text.contains("  r1/a (Normal, 4 nodes, 1 not ready, rate 0.1/s); "),
        "{text}"
    );
    assert!(
        text.contains("  r1/b (FullDisruption, 5 nodes, 5 not ready, "),
        "{text}"
    );
    assert!(text.contains("\nqueued taints: "), "{text}");
    assert!(text.contains("\npending evictions: 30 ("), "{text}");
    assert!(text.contains("\n  default/web-00 at "), "{text}");
    assert!(text.contains("\nAPI: "), "{text}");
    assert!(text.contains("\ndecision log: "), "{text}");
}

#[test]
fn explain_answers_for_a_node_and_a_pod_and_refuses_the_rest() {
    let node = ask("explain a-sick", Acting::Yes);
    assert!(node.starts_with("node a-sick: Ready False, "), "{node}");
    assert!(
        node.contains("\ntaints: node.kubernetes.io/not-ready:NoExecute\n"),
        "{node}"
    );
    assert!(
        node.contains("\npods: 30 (30 with an eviction pending or running)\n"),
        "{node}"
    );
    let healthy = ask("explain a-0", Acting::Yes);
    assert!(
        healthy.contains("\nnext: healthy; judged Unknown at "),
        "{healthy}"
    );
    let pod = ask("explain default/web-05", Acting::Yes);
    assert!(
        pod.starts_with("pod default/web-05: Ready True, on node a-sick (Ready False)"),
        "{pod}"
    );
    assert!(
        pod.contains(" unless the taint goes: tolerationSeconds 105 from "),
        "{pod}"
    );
    let follower = ask("explain default/web-05", Acting::Follower);
    assert!(follower.contains("\nnext: this daemon is a follower: the leader decides\n"));
    assert_eq!(
        ask("explain nobody", Acting::Yes),
        "error: no node \"nobody\" is known"
    );
    assert_eq!(
        ask("explain default/nobody", Acting::Yes),
        "error: no pod default/nobody bound to a node is known"
    );
    assert_eq!(
        ask("explain /x", Acting::Yes),
        "error: \"/x\" is neither a node nor NAMESPACE/POD"
    );
    assert!(ask("reboot now", Acting::Yes).starts_with("error: ask \"status\""));
    assert!(ask("", Acting::Yes).starts_with("error: ask \"status\""));
    assert!(ask("explain a b", Acting::Yes).starts_with("error: ask \"status\""));
}
