//! LIST pagination and WATCH semantics of the simulated API server, as a reflector sees them.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use node_lifecycled_sim::client::{Api, RawWatch, WatchItem, event_type, name_of, rv_of};
use node_lifecycled_sim::{Resource, SimConfig, SimServer, fixtures};
use serde_json::json;

const WAIT: Duration = Duration::from_secs(5);

#[test]
fn list_of_10000_pods_pages_by_500_with_one_consistent_resource_version() {
    let sim = SimServer::start(SimConfig::default()).unwrap();
    let cluster = sim.cluster();
    for i in 0..10_000 {
        let ns = format!("ns-{}", i % 7);
        let node = (i % 3 != 0).then(|| format!("node-{}", i % 50));
        cluster
            .create(
                Resource::Pods,
                fixtures::running_pod(&ns, &format!("pod-{i:05}"), node.as_deref()),
            )
            .unwrap();
    }
    let api = Api::new(sim.url());
    let mut seen = BTreeSet::new();
    let mut continue_token = String::new();
    let mut list_rv = None;
    let mut pages = 0;
    let started = Instant::now();
    loop {
        let reply = api.get(&format!("/api/v1/pods?limit=500&continue={continue_token}"));
        assert_eq!(reply.code, 200);
        let body = reply.body;
        assert_eq!(body["kind"], "PodList");
        let rv = body["metadata"]["resourceVersion"]
            .as_str()
            .unwrap()
            .to_string();
        assert_eq!(
            list_rv.get_or_insert(rv.clone()),
            &rv,
            "every page carries the first page's RV"
        );
        let items = body["items"].as_array().unwrap();
        pages += 1;
        for item in items {
            let key = format!(
                "{}/{}",
                item["metadata"]["namespace"].as_str().unwrap(),
                item["metadata"]["name"].as_str().unwrap()
            );
            assert!(seen.insert(key), "no object twice");
        }
        match body["metadata"]["continue"].as_str() {
            Some(token) => {
                assert_eq!(items.len(), 500);
                assert!(body["metadata"]["remainingItemCount"].as_u64().unwrap() > 0);
                continue_token = token.to_string();
            }
            None => break,
        }
    }
    println!(
        "listed 10,000 pods in {pages} pages in {:?}",
        started.elapsed()
    );
    assert_eq!((seen.len(), pages), (10_000, 20));

    // The daemon's pod list: bound pods only, paginated; the last page may be short.
    let mut bound = 0;
    let mut token = String::new();
    loop {
        let body = api
            .get(&format!(
                "/api/v1/pods?limit=500&fieldSelector=spec.nodeName%21%3D&continue={token}"
            ))
            .body;
        bound += body["items"].as_array().unwrap().len();
        match body["metadata"]["continue"].as_str() {
            Some(t) => token = t.to_string(),
            None => break,
        }
    }
    assert_eq!(bound, 10_000 - 3334);
    let on_node = api
        .get("/api/v1/pods?fieldSelector=spec.nodeName%3Dnode-7")
        .body;
    assert!(
        on_node["items"]
            .as_array()
            .unwrap()
            .iter()
            .all(|p| p["spec"]["nodeName"] == "node-7")
    );
    assert_eq!(on_node["items"].as_array().unwrap().len(), 133);
}

#[test]
fn resource_version_zero_lists_ignore_limit_like_the_watch_cache() {
    let sim = SimServer::start(SimConfig::default()).unwrap();
    for i in 0..30 {
        sim.cluster()
            .create(
                Resource::Nodes,
                fixtures::ready_node(&format!("n{i}"), None, sim.cluster().now()),
            )
            .unwrap();
    }
    let api = Api::new(sim.url());
    let body = api.get("/api/v1/nodes?limit=10&resourceVersion=0").body;
    assert_eq!(body["items"].as_array().unwrap().len(), 30);
    assert!(body["metadata"]["continue"].is_null());
    let body = api.get("/api/v1/nodes?limit=10").body;
    assert_eq!(body["items"].as_array().unwrap().len(), 10);
}

#[test]
fn watch_sees_added_modified_deleted_in_order_then_bookmarks() {
    let sim = SimServer::start(SimConfig {
        bookmark_interval: Duration::from_millis(200),
        ..SimConfig::default()
    })
    .unwrap();
    let cluster = sim.cluster();
    cluster
        .create(
            Resource::Nodes,
            fixtures::ready_node("before", None, cluster.now()),
        )
        .unwrap();
    let api = Api::new(sim.url());
    let list = api.get("/api/v1/nodes").body;
    let list_rv = list["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    let mut watch = RawWatch::open(
        sim.addr(),
        &format!("/api/v1/nodes?watch=true&resourceVersion={list_rv}&allowWatchBookmarks=true"),
    );
    assert_eq!(watch.status, 200);

    let created = api.post(
        "/api/v1/nodes",
        &fixtures::ready_node("n1", None, cluster.now()),
    );
    assert_eq!(created.code, 201);
    let patched = api.strategic(
        "/api/v1/nodes/n1",
        &json!({"metadata": {"labels": {"x": "y"}}}),
    );
    assert_eq!(patched.code, 200);
    let deleted = api.delete("/api/v1/nodes/n1", None);
    assert_eq!(deleted.code, 200);

    let mut versions = Vec::new();
    for expected in ["ADDED", "MODIFIED", "DELETED"] {
        let event = watch.event(WAIT);
        assert_eq!((event_type(&event), name_of(&event)), (expected, "n1"));
        assert_eq!(event["object"]["kind"], "Node");
        versions.push(rv_of(&event["object"]));
    }
    assert!(
        versions.windows(2).all(|w| w[0] < w[1]),
        "versions increase: {versions:?}"
    );
    assert_eq!(versions[0], rv_of(&created.body));
    assert_eq!(versions[1], rv_of(&patched.body));

    let bookmark = watch.event(WAIT);
    assert_eq!(event_type(&bookmark), "BOOKMARK");
    assert_eq!(bookmark["object"]["kind"], "Node");
    assert!(rv_of(&bookmark["object"]) >= versions[2]);
}

#[test]
fn watch_from_an_expired_version_gets_one_410_error_event_then_the_end() {
    let sim = SimServer::start(SimConfig {
        history_size: 5,
        ..SimConfig::default()
    })
    .unwrap();
    let cluster = sim.cluster();
    cluster
        .create(
            Resource::Nodes,
            fixtures::ready_node("n1", None, cluster.now()),
        )
        .unwrap();
    let old_rv = cluster.resource_version();
    for i in 0..10 {
        cluster
            .set_node_condition(
                "n1",
                "Ready",
                "True",
                cluster.now() + Duration::from_secs(i + 1),
            )
            .unwrap();
    }
    let mut watch = RawWatch::open(
        sim.addr(),
        &format!("/api/v1/nodes?watch=1&resourceVersion={old_rv}"),
    );
    assert_eq!(
        watch.status, 200,
        "the real server answers 200 and reports the error in-stream"
    );
    let error = watch.event(WAIT);
    assert_eq!(event_type(&error), "ERROR");
    assert_eq!(error["object"]["code"], 410);
    assert_eq!(error["object"]["reason"], "Expired");
    assert!(
        error["object"]["message"]
            .as_str()
            .unwrap()
            .starts_with(&format!("too old resource version: {old_rv} ("))
    );
    assert_eq!(watch.next(WAIT), WatchItem::End);

    // Resuming from a recent version works.
    let recent = cluster.resource_version();
    let mut watch = RawWatch::open(
        sim.addr(),
        &format!("/api/v1/nodes?watch=1&resourceVersion={recent}"),
    );
    cluster
        .set_node_condition(
            "n1",
            "Ready",
            "False",
            cluster.now() + Duration::from_secs(60),
        )
        .unwrap();
    assert_eq!(event_type(&watch.event(WAIT)), "MODIFIED");
}

#[test]
fn continue_token_older_than_the_history_gets_410_expired() {
    let sim = SimServer::start(SimConfig {
        history_size: 5,
        ..SimConfig::default()
    })
    .unwrap();
    let cluster = sim.cluster();
    for i in 0..4 {
        cluster
            .create(
                Resource::Nodes,
                fixtures::ready_node(&format!("n{i}"), None, cluster.now()),
            )
            .unwrap();
    }
    let api = Api::new(sim.url());
    let first = api.get("/api/v1/nodes?limit=2").body;
    let token = first["metadata"]["continue"].as_str().unwrap().to_string();
    assert_eq!(
        api.get(&format!("/api/v1/nodes?limit=2&continue={token}"))
            .code,
        200
    );
    for i in 0..6 {
        cluster
            .set_node_condition(
                "n0",
                "Ready",
                "True",
                cluster.now() + Duration::from_secs(i + 1),
            )
            .unwrap();
    }
    let expired = api.get(&format!("/api/v1/nodes?limit=2&continue={token}"));
    assert_eq!(expired.code, 410);
    assert_eq!(expired.body["reason"], "Expired");
    assert_eq!(expired.body["kind"], "Status");
    assert_eq!(api.get("/api/v1/nodes?limit=2&continue=garbage").code, 400);
}

#[test]
fn watch_list_sends_initial_state_then_the_annotated_bookmark() {
    let sim = SimServer::start(SimConfig::default()).unwrap();
    let cluster = sim.cluster();
    for node in ["a", "b", "c"] {
        cluster.renew_lease(node, cluster.now()).unwrap();
    }
    let mut watch = RawWatch::open(
        sim.addr(),
        "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true",
    );
    let names: Vec<String> = (0..3)
        .map(|_| {
            let e = watch.event(WAIT);
            assert_eq!(event_type(&e), "ADDED");
            name_of(&e).to_string()
        })
        .collect();
    assert_eq!(names, ["a", "b", "c"]);
    let end = watch.event(WAIT);
    assert_eq!(event_type(&end), "BOOKMARK");
    assert_eq!(end["object"]["kind"], "Lease");
    assert_eq!(
        end["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"],
        "true"
    );
    assert_eq!(rv_of(&end["object"]), cluster.resource_version());
    cluster
        .renew_lease("b", cluster.now() + Duration::from_secs(10))
        .unwrap();
    let renewed = watch.event(WAIT);
    assert_eq!((event_type(&renewed), name_of(&renewed)), ("MODIFIED", "b"));
}

#[test]
fn watch_ends_cleanly_at_timeout_seconds_and_the_connection_serves_the_next_request() {
    let sim = SimServer::start(SimConfig::default()).unwrap();
    let rv = sim.cluster().resource_version();
    let started = Instant::now();
    let mut watch = RawWatch::open(
        sim.addr(),
        &format!("/api/v1/nodes?watch=true&resourceVersion={rv}&timeoutSeconds=1"),
    );
    assert_eq!(watch.next(WAIT), WatchItem::End);
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(900) && took < Duration::from_secs(3),
        "{took:?}"
    );
    // Same TCP connection, next request.
    let mut again = RawWatch::start(
        watch.into_stream(),
        &format!("/api/v1/nodes?watch=true&resourceVersion={rv}&timeoutSeconds=1"),
    );
    assert_eq!(again.status, 200);
    assert_eq!(again.next(WAIT), WatchItem::End);
}

#[test]
fn filtered_pod_watch_sees_a_pod_enter_its_selection_when_bound() {
    let sim = SimServer::start(SimConfig::default()).unwrap();
    let cluster = sim.cluster();
    cluster
        .create(Resource::Pods, fixtures::running_pod("default", "p", None))
        .unwrap();
    let rv = cluster.resource_version();
    let mut watch = RawWatch::open(
        sim.addr(),
        &format!("/api/v1/pods?watch=true&resourceVersion={rv}&fieldSelector=spec.nodeName%21%3D"),
    );
    cluster
        .create(
            Resource::Pods,
            fixtures::running_pod("default", "unbound", None),
        )
        .unwrap();
    cluster
        .update(Resource::Pods, Some("default"), "p", |p| {
            p["spec"]["nodeName"] = json!("n1")
        })
        .unwrap();
    let event = watch.event(WAIT);
    assert_eq!((event_type(&event), name_of(&event)), ("ADDED", "p"));
    assert_eq!(
        watch.next(Duration::from_millis(300)),
        WatchItem::Quiet,
        "the unbound pod is not selected"
    );
}

#[test]
fn abandoned_watch_connections_are_reclaimed() {
    let sim = SimServer::start(SimConfig::default()).unwrap();
    let watches: Vec<RawWatch> = (0..5)
        .map(|_| RawWatch::open(sim.addr(), "/api/v1/pods?watch=true"))
        .collect();
    assert_eq!(sim.open_connections(), 5);
    drop(watches);
    let deadline = Instant::now() + WAIT;
    while sim.open_connections() > 0 {
        assert!(
            Instant::now() < deadline,
            "{} connections left",
            sim.open_connections()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}
