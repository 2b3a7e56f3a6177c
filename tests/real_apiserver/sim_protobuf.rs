//! The simulator's protobuf against a real kube-apiserver (1.20.2 and the newest release):
//! the objects the simulator's cluster is made of (its kubelets' node and Lease, a bound pod
//! with the default tolerations, a DaemonSet pod) are created on the real server and fetched
//! back both in JSON and in protobuf. The simulator's encoding must give the same bytes as
//! the server's for every field the simulator's object carries with the same JSON value, and
//! the daemon must read the simulator's encoding of the server's JSON as it reads the server's
//! own protobuf.
//!
//! If the server cannot be started the test fails, unless NODE_LIFECYCLED_SKIP_REAL_APISERVER=1.

use std::collections::BTreeMap;
use std::process::Command;

use crate::real_apiserver_support::RealApiserver;
use crate::real_apiserver_support::versions::{Kube, versions};
use node_lifecycled::kube::decode::DecodeContext;
use node_lifecycled::kube::decode::proto::{ProtoWire, Reader, decode_item};
use node_lifecycled::model::{Lease, Node, Pod};
use node_lifecycled_sim::{
    Resource, fixtures, protobuf_field_numbers, protobuf_fields, protobuf_message,
};
use serde_json::Value;

/// The fields of one protobuf message by number (see `message_fields`).
fn fields(b: &[u8]) -> BTreeMap<u32, Vec<Vec<u8>>> {
    protobuf_fields(b).expect("a well-formed protobuf message")
}

/// The occurrences of the field at `numbers` (one level of nesting at most under the top).
fn at(message: &[u8], numbers: &[u32]) -> Option<Vec<Vec<u8>>> {
    let top = fields(message);
    match numbers {
        [n] => top.get(n).cloned(),
        [n, m] => fields(&top.get(n)?[0]).get(m).cloned(),
        _ => panic!("{numbers:?}"),
    }
}

/// GET `path` with `accept`, as the admin (curl: the kubeconfig's token and CA).
fn fetch(server: &RealApiserver, path: &str, accept: &str) -> Vec<u8> {
    let token = std::fs::read_to_string(server.var("ADMIN_TOKEN_FILE")).unwrap();
    let out = Command::new("curl")
        .args(["-sS", "--fail", "--cacert", server.var("CA_FILE")])
        .arg("-H")
        .arg(format!("Authorization: Bearer {}", token.trim()))
        .arg("-H")
        .arg(format!("Accept: {accept}"))
        .arg(format!("{}{path}", server.var("APISERVER_URL")))
        .output()
        .expect("curl");
    assert!(
        out.status.success(),
        "GET {path}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// The object's message inside the server's `k8s\0` + runtime.Unknown envelope.
fn unwrap_envelope(body: &[u8]) -> Vec<u8> {
    assert_eq!(
        &body[..4],
        b"k8s\0",
        "not protobuf: {}",
        String::from_utf8_lossy(body)
    );
    fields(&body[4..])[&2][0].clone()
}

/// Creates `sim_object` on the server, fetches it both ways, compares; returns the paths
/// compared byte for byte.
fn same_as_the_server<T: ProtoWire + PartialEq + std::fmt::Debug>(
    server: &RealApiserver,
    resource: Resource,
    path: &str,
    sim_object: &Value,
) -> Vec<String> {
    // As the simulator stores it: kind and apiVersion filled in.
    let mut manifest = sim_object.clone();
    manifest["kind"] = Value::from(resource.kind());
    manifest["apiVersion"] = Value::from(resource.api_version());
    // kubectl's client-side schema check wants every NodeSystemInfo field; the server does not.
    server.kubectl(
        &["create", "--validate=false", "-f", "-"],
        Some(&manifest.to_string()),
    );
    let server_json: Value =
        serde_json::from_slice(&fetch(server, path, "application/json")).unwrap();
    let server_pb = unwrap_envelope(&fetch(server, path, "application/vnd.kubernetes.protobuf"));
    // Nothing wrote in between: the same version both ways.
    assert_eq!(
        server_json["metadata"]["resourceVersion"],
        Value::from(String::from_utf8(at(&server_pb, &[1, 6]).unwrap()[0].clone()).unwrap())
    );

    // The daemon reads our encoding of the server's object as it reads the server's.
    let ours_of_server = protobuf_message(resource, &server_json).unwrap();
    let read = |bytes: &[u8]| -> T {
        decode_item(Reader::new(bytes, "object"), &mut DecodeContext::new()).unwrap()
    };
    assert_eq!(read(&ours_of_server), read(&server_pb), "{path}");

    // What the simulator serves for its own object: the same bytes for each field it carries
    // with the value the server kept.
    let ours = protobuf_message(resource, sim_object).unwrap();
    let mut compared = Vec::new();
    for part in ["metadata", "spec", "status"] {
        let Some(members) = sim_object.get(part).and_then(Value::as_object) else {
            continue;
        };
        for (name, value) in members {
            let field = format!("{part}.{name}");
            if server_json[part][name] != *value {
                continue;
            }
            let numbers = protobuf_field_numbers(resource, &field).unwrap_or_else(|| {
                panic!("{field}: the simulator carries it but does not encode it")
            });
            assert_eq!(
                at(&ours, &numbers),
                at(&server_pb, &numbers),
                "{path}: {field}"
            );
            compared.push(field);
        }
    }
    eprintln!("{path}: the same bytes for {compared:?}");
    compared
}

fn has(compared: &[String], expected: &[&str]) {
    for e in expected {
        assert!(
            compared.iter().any(|c| c == e),
            "{e} not compared: {compared:?}"
        );
    }
}

fn the_simulators_protobuf_is_what_kube_apiserver_writes_for_the_simulators_objects(kube: Kube) {
    let Some(server) = RealApiserver::start(kube) else {
        return;
    };
    server.apply("apiVersion: v1\nkind: Namespace\nmetadata: {name: kube-node-lease}\n");
    let now = node_lifecycled::time::Time::from_unix_millis(1_795_461_888_250);

    let node = fixtures::ready_node("sim-node-0", Some("z1"), now);
    let compared =
        same_as_the_server::<Node>(&server, Resource::Nodes, "/api/v1/nodes/sim-node-0", &node);
    has(
        &compared,
        &[
            "metadata.name",
            "metadata.labels",
            "status.conditions",
            "status.addresses",
        ],
    );

    let lease = fixtures::node_lease("sim-node-0", now);
    let compared = same_as_the_server::<Lease>(
        &server,
        Resource::Leases,
        "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/sim-node-0",
        &lease,
    );
    has(
        &compared,
        &[
            "metadata.name",
            "metadata.namespace",
            "spec.holderIdentity",
            "spec.leaseDurationSeconds",
            "spec.renewTime",
        ],
    );

    let web = node_lifecycled_sim::population::PodPlan {
        namespace: "default".into(),
        name: "web-0".into(),
        node: "sim-node-0".into(),
        kind: node_lifecycled_sim::population::PodKind::Web,
        toleration: node_lifecycled_sim::population::Toleration::Seconds(300),
    };
    // From 1.35 the server copies the node's topology labels onto a pod bound to it
    // (PodTopologyLabelsAdmission, KEP-4742, on by default): the pod as the server keeps it.
    let bound = |mut pod: Value| {
        if kube.minor() >= 35 {
            pod["metadata"]["labels"]["topology.kubernetes.io/region"] = "sim".into();
            pod["metadata"]["labels"]["topology.kubernetes.io/zone"] = "z1".into();
        }
        pod
    };
    let compared = same_as_the_server::<Pod>(
        &server,
        Resource::Pods,
        "/api/v1/namespaces/default/pods/web-0",
        &bound(web.object()),
    );
    has(
        &compared,
        &[
            "metadata.name",
            "metadata.namespace",
            "metadata.labels",
            "spec.nodeName",
            "spec.tolerations",
            "spec.terminationGracePeriodSeconds",
        ],
    );

    let agent = node_lifecycled_sim::population::PodPlan {
        name: "agent-0".into(),
        kind: node_lifecycled_sim::population::PodKind::DaemonSet,
        toleration: node_lifecycled_sim::population::Toleration::Forever,
        ..web
    };
    let compared = same_as_the_server::<Pod>(
        &server,
        Resource::Pods,
        "/api/v1/namespaces/default/pods/agent-0",
        &bound(agent.object()),
    );
    has(
        &compared,
        &[
            "metadata.ownerReferences",
            "spec.tolerations",
            "spec.nodeName",
        ],
    );
}

// The releases each scenario runs on: the whole tier on the newest; on 1.35 and the 1.20.2 floor
// the protocol and a representative few of each kind (README, Supported Kubernetes versions).
versions! {
    v1_37 => [the_simulators_protobuf_is_what_kube_apiserver_writes_for_the_simulators_objects],
    v1_20 => [the_simulators_protobuf_is_what_kube_apiserver_writes_for_the_simulators_objects],
}
