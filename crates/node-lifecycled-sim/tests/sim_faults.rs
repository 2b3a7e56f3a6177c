//! Every fault the simulator can inject, seen from a client.

use std::net::TcpStream;
use std::time::{Duration, Instant};

use node_lifecycled_sim::client::{Api, RawWatch, WatchItem, event_type, name_of};
use node_lifecycled_sim::{RequestMatch, Resource, SimConfig, SimServer, Verb, fixtures};
use serde_json::json;

const WAIT: Duration = Duration::from_secs(5);

fn watch_nodes(sim: &node_lifecycled_sim::SimHandle) -> RawWatch {
    let rv = sim.cluster().resource_version();
    RawWatch::open(
        sim.addr(),
        &format!("/api/v1/nodes?watch=true&resourceVersion={rv}"),
    )
}

fn add_node(sim: &node_lifecycled_sim::SimHandle, name: &str) {
    let cluster = sim.cluster();
    cluster
        .create(
            Resource::Nodes,
            fixtures::ready_node(name, None, cluster.now()),
        )
        .unwrap();
}

#[test]
fn dropped_watches_break_without_an_end_chunk() {
    let sim = SimServer::start(SimConfig::default()).unwrap();
    let mut first = watch_nodes(&sim);
    let mut second = watch_nodes(&sim);
    add_node(&sim, "n1");
    assert_eq!(event_type(&first.event(WAIT)), "ADDED");
    sim.faults().drop_watches();
    assert_eq!(first.next(WAIT), WatchItem::Broken);
    // The second watch may or may not have sent its event before the drop (as on a real network).
    let mut item = second.next(WAIT);
    if matches!(&item, WatchItem::Line(l) if l.contains("ADDED")) {
        item = second.next(WAIT);
    }
    assert_eq!(item, WatchItem::Broken);
    // New watches work again.
    let mut third = watch_nodes(&sim);
    add_node(&sim, "n2");
    assert_eq!(name_of(&third.event(WAIT)), "n2");
}

#[test]
fn stalled_watches_send_nothing_until_the_stall_ends_then_catch_up() {
    let sim = SimServer::start(SimConfig {
        bookmark_interval: Duration::from_millis(100),
        ..SimConfig::default()
    })
    .unwrap();
    let rv = sim.cluster().resource_version();
    let mut watch = RawWatch::open(
        sim.addr(),
        &format!("/api/v1/nodes?watch=true&resourceVersion={rv}&allowWatchBookmarks=true"),
    );
    sim.faults().stall_watches(None);
    add_node(&sim, "n1");
    assert_eq!(
        watch.next(Duration::from_millis(500)),
        WatchItem::Quiet,
        "no event, no bookmark"
    );
    sim.faults().clear_stall();
    assert_eq!(name_of(&watch.event(WAIT)), "n1");

    sim.faults().stall_watches(Some(Duration::from_millis(400)));
    let stalled_at = Instant::now();
    add_node(&sim, "n2");
    let event = loop {
        let e = watch.event(WAIT);
        if event_type(&e) != "BOOKMARK" {
            break e;
        }
    };
    assert_eq!(name_of(&event), "n2");
    assert!(
        stalled_at.elapsed() >= Duration::from_millis(350),
        "{:?}",
        stalled_at.elapsed()
    );
}

#[test]
fn stalled_watch_that_falls_out_of_the_history_gets_410() {
    let sim = SimServer::start(SimConfig {
        history_size: 3,
        ..SimConfig::default()
    })
    .unwrap();
    let mut watch = watch_nodes(&sim);
    sim.faults().stall_watches(None);
    for i in 0..5 {
        add_node(&sim, &format!("n{i}"));
    }
    sim.faults().clear_stall();
    let error = watch.event(WAIT);
    assert_eq!(
        (event_type(&error), error["object"]["code"].as_i64()),
        ("ERROR", Some(410))
    );
    assert_eq!(watch.next(WAIT), WatchItem::End);
}

#[test]
fn injected_statuses_answer_the_next_matching_requests_then_stop() {
    let sim = SimServer::start(SimConfig::default()).unwrap();
    add_node(&sim, "n1");
    let api = Api::with_token(sim.url(), "daemon");
    let faults = sim.faults();

    faults.fail_next(RequestMatch::on(Verb::Get, "nodes"), 2, 500);
    for _ in 0..2 {
        let r = api.get("/api/v1/nodes/n1");
        assert_eq!(
            (r.code, r.body["reason"].as_str()),
            (500, Some("InternalError"))
        );
    }
    assert_eq!(api.get("/api/v1/nodes/n1").code, 200);

    faults.throttle_next(RequestMatch::verb(Verb::List), 1, 7);
    let throttled = api.get("/api/v1/nodes");
    assert_eq!(
        (throttled.code, throttled.retry_after.as_deref()),
        (429, Some("7"))
    );
    assert_eq!(throttled.body["details"]["retryAfterSeconds"], 7);
    assert_eq!(api.get("/api/v1/nodes").code, 200);

    faults.fail_next(RequestMatch::on(Verb::Update, "nodes/status"), 1, 409);
    let node = api.get("/api/v1/nodes/n1").body;
    assert_eq!(
        api.strategic(
            "/api/v1/nodes/n1",
            &json!({"metadata": {"labels": {"a": "b"}}})
        )
        .code,
        200,
        "other targets unaffected"
    );
    let conflict = api.put("/api/v1/nodes/n1/status", &node);
    assert_eq!(
        (conflict.code, conflict.body["reason"].as_str()),
        (409, Some("Conflict"))
    );
    let injected = sim.writes().into_iter().find(|w| w.code == 409).unwrap();
    assert!(
        injected.summary.starts_with("injected"),
        "{}",
        injected.summary
    );

    faults.fail_next(RequestMatch::verb(Verb::List), 1, 410);
    assert_eq!(api.get("/api/v1/nodes?limit=1").code, 410);

    faults.fail_next(RequestMatch::on(Verb::Watch, "nodes"), 1, 410);
    let mut watch = watch_nodes(&sim);
    assert_eq!(watch.status, 200);
    let error = watch.event(WAIT);
    assert_eq!(
        (event_type(&error), error["object"]["code"].as_i64()),
        ("ERROR", Some(410))
    );
    assert_eq!(watch.next(WAIT), WatchItem::End);

    faults.fail_next(RequestMatch::on(Verb::Watch, "pods"), 1, 500);
    let watch = RawWatch::open(sim.addr(), "/api/v1/pods?watch=true");
    assert_eq!(
        watch.status, 500,
        "errors before streaming come as plain responses"
    );
}

#[test]
fn delayed_responses_arrive_late() {
    let sim = SimServer::start(SimConfig::default()).unwrap();
    add_node(&sim, "n1");
    let api = Api::new(sim.url());
    // Long enough that an undelayed local request on a busy machine stays well under it.
    let delay = Duration::from_secs(2);
    sim.faults()
        .delay_responses(RequestMatch::on(Verb::Get, "nodes"), delay);
    let started = Instant::now();
    assert_eq!(api.get("/api/v1/nodes/n1").code, 200);
    assert!(started.elapsed() >= delay);
    let started = Instant::now();
    assert_eq!(api.get("/api/v1/nodes").code, 200);
    assert!(started.elapsed() < delay, "lists are not delayed");
    sim.faults().clear_delays();
    let started = Instant::now();
    api.get("/api/v1/nodes/n1");
    assert!(started.elapsed() < delay);
}

#[test]
fn corrupt_line_arrives_on_open_watches_and_the_stream_continues() {
    let sim = SimServer::start(SimConfig::default()).unwrap();
    let mut watch = watch_nodes(&sim);
    sim.faults().corrupt_watches();
    match watch.next(WAIT) {
        WatchItem::Line(line) => assert!(
            serde_json::from_str::<serde_json::Value>(&line).is_err(),
            "{line}"
        ),
        other => panic!("expected a corrupt line, got {other:?}"),
    }
    add_node(&sim, "n1");
    assert_eq!(name_of(&watch.event(WAIT)), "n1");
}

#[test]
fn refused_connections_come_back_on_the_same_port() {
    let sim = SimServer::start(SimConfig::default()).unwrap();
    let addr = sim.addr();
    let api = Api::new(sim.url());
    let mut watch = watch_nodes(&sim);
    sim.faults().refuse_connections(Duration::from_millis(500));
    let refused = TcpStream::connect(addr);
    assert!(
        refused.is_err(),
        "connection refused while the listener is closed"
    );
    add_node(&sim, "n1");
    assert_eq!(
        name_of(&watch.event(WAIT)),
        "n1",
        "open connections live on"
    );
    let deadline = Instant::now() + WAIT;
    while TcpStream::connect(addr).is_err() {
        assert!(Instant::now() < deadline, "the server never came back");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(api.get("/api/v1/nodes/n1").code, 200);
    assert_eq!(sim.addr(), addr);
}

#[test]
fn restart_closes_every_connection_then_serves_the_same_data_on_the_same_port() {
    let sim = SimServer::start(SimConfig::default()).unwrap();
    add_node(&sim, "n1");
    let addr = sim.addr();
    let mut watch = watch_nodes(&sim);
    let mut idle = TcpStream::connect(addr).unwrap();
    // Make sure the idle connection is being served before the restart.
    std::io::Write::write_all(&mut idle, b"GET /healthz HTTP/1.1\r\nHost: sim\r\n\r\n").unwrap();
    let mut buf = [0u8; 256];
    assert!(std::io::Read::read(&mut idle, &mut buf).unwrap() > 0);

    sim.faults().restart(Duration::from_millis(300));
    assert_eq!(watch.next(WAIT), WatchItem::Broken);
    idle.set_read_timeout(Some(WAIT)).unwrap();
    assert_eq!(
        std::io::Read::read(&mut idle, &mut buf).unwrap_or(0),
        0,
        "keep-alive connection closed"
    );
    assert!(TcpStream::connect(addr).is_err());
    let deadline = Instant::now() + WAIT;
    while TcpStream::connect(addr).is_err() {
        assert!(Instant::now() < deadline, "the server never came back");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(Api::new(sim.url()).get("/api/v1/nodes/n1").code, 200);
}

#[test]
fn shutdown_breaks_open_watches_and_frees_the_port() {
    let sim = SimServer::start(SimConfig::default()).unwrap();
    let addr = sim.addr();
    let mut watch = watch_nodes(&sim);
    sim.shutdown();
    assert_eq!(watch.next(WAIT), WatchItem::Broken);
    assert!(TcpStream::connect(addr).is_err());
    let again = SimServer::start(SimConfig {
        listen: addr,
        ..SimConfig::default()
    })
    .unwrap();
    assert_eq!(again.addr(), addr, "the port can be reused at once");
}
