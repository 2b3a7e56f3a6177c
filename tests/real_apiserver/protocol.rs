//! What the daemon asks a real server, read from the server's own audit log rather than from
//! the daemon's word:
//!
//! - the initial list: by watch-list (`sendInitialEvents=true`, one watch per resource, no
//!   list) on servers that stream it (1.32 and later), by list then watch on older ones;
//! - the live read of a node's Lease before the node is marked Unknown (upstream 1.37,
//!   KEP-5647; ours on every version).
//!
//! 409s from a real server are in `client.rs`. A 429 cannot be had from a real server for a
//! client that sends one request at a time: a priority level of no seats still serves one
//! request at once, and the long-running requests are outside API Priority and Fairness. The
//! client's handling of 429 and Retry-After is tested against the simulator
//! (`tests/api_client/client.rs`).

use std::path::Path;
use std::time::Duration;

use crate::e2e_support::{Daemon, TempDir, Timing, config_text, wait_until};
use crate::real_apiserver_support::audit::{self, REQUESTS_POLICY, Request};
use crate::real_apiserver_support::fleet::{
    FleetSpec, admin_client, create_fleet, node_json, ready_of,
};
use crate::real_apiserver_support::versions::{Kube, versions};
use crate::real_apiserver_support::{RealApiserver, ServerOptions};

fn daemon_requests(server: &RealApiserver) -> Vec<Request> {
    audit::read(server.audit_log())
        .into_iter()
        .filter(|r| r.user == "node-lifecycled")
        .collect()
}

fn timing() -> Timing {
    Timing {
        grace: "4s",
        startup_grace: "8s",
        leader: Some("protocol".to_string()),
        ..Timing::default()
    }
}

/// The initial list as the server saw it, then a node's death: a live read of its Lease, then
/// the status write.
fn the_initial_list_and_the_live_lease_read_as_the_server_saw_them(kube: Kube) {
    let options = ServerOptions {
        audit: Some(REQUESTS_POLICY.to_string()),
        ..ServerOptions::default()
    };
    let Some(server) = RealApiserver::start_with(kube, &options) else {
        return;
    };
    let kubelets = create_fleet(&server, &FleetSpec::zones(1, 2));
    let dir = TempDir::new("protocol");
    let text = config_text(Path::new(server.var("DAEMON_KUBECONFIG")), &timing());
    let mut d = Daemon::start("protocol", &dir, &text, &[]);
    d.wait_log("acting as leader", Duration::from_secs(30));

    let initial = |resource: &str| -> Vec<Request> {
        daemon_requests(&server)
            .into_iter()
            .filter(|r| r.resource == resource && (r.verb == "list" || r.verb == "watch"))
            .collect()
    };
    for resource in ["nodes", "leases", "pods"] {
        let requests = initial(resource);
        let first = requests
            .first()
            .unwrap_or_else(|| panic!("no list or watch of {resource}\n{}", d.log()));
        if kube.has_watch_list() {
            assert_eq!(first.verb, "watch", "{resource}: {first:?}");
            assert!(
                first.uri.contains("sendInitialEvents=true")
                    && first.uri.contains("resourceVersionMatch=NotOlderThan")
                    && first.uri.contains("allowWatchBookmarks=true"),
                "{} streams the initial list of {resource}: {}",
                kube.release(),
                first.uri
            );
            assert!(
                !requests.iter().any(|r| r.verb == "list"),
                "{resource} was listed as well: {requests:?}"
            );
        } else {
            assert_eq!(first.verb, "list", "{resource}: {first:?}");
            assert!(!first.uri.contains("sendInitialEvents"), "{}", first.uri);
        }
    }

    kubelets.set_alive("z1-n1", false);
    let mut admin = admin_client(&server);
    wait_until(
        "z1-n1 Ready=Unknown",
        Duration::from_secs(20),
        || ready_of(&node_json(&mut admin, "z1-n1")).0 == "Unknown",
        || d.log(),
    );
    let is_status_write = |r: &Request| {
        r.resource == "nodes"
            && r.subresource == "status"
            && r.name == "z1-n1"
            && (r.verb == "update" || r.verb == "patch")
    };
    // The server logs a request's ResponseComplete stage after it has answered, so the write
    // can be seen on the node a moment before it is in the audit log.
    wait_until(
        "z1-n1's status write in the audit log",
        Duration::from_secs(10),
        || daemon_requests(&server).iter().any(is_status_write),
        || format!("{:#?}", daemon_requests(&server)),
    );
    let requests = daemon_requests(&server);
    let status_write = requests
        .iter()
        .position(is_status_write)
        .expect("seen by the wait above");
    let lease_read = requests[..status_write]
        .iter()
        .rev()
        .find(|r| r.resource == "leases" && r.verb == "get" && r.name == "z1-n1")
        .unwrap_or_else(|| {
            panic!(
                "no live read of z1-n1's Lease before its status write: {:#?}",
                &requests[..status_write]
            )
        });
    assert_eq!(lease_read.namespace, "kube-node-lease");
    assert_eq!(lease_read.code, 200);
    assert!(
        requests[status_write].received.since(lease_read.received) < Duration::from_secs(2),
        "the Lease read must be fresh evidence: {lease_read:?} then {:?}",
        requests[status_write]
    );
}

versions! {
    v1_37 => [the_initial_list_and_the_live_lease_read_as_the_server_saw_them],
    v1_35 => [the_initial_list_and_the_live_lease_read_as_the_server_saw_them],
    v1_20 => [the_initial_list_and_the_live_lease_read_as_the_server_saw_them],
}
