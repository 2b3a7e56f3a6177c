//! The unary client against real kube-apiservers (the releases at the end of this file): the
//! kubeconfigs it writes connect over TLS with client certificates, a bearer token file works,
//! errors come typed from real Status bodies, LIST paginates, and a strategic-merge taint patch
//! with a stale resourceVersion gets 409 while a fresh one succeeds.
//!
//! One test starts the server once and runs the scenarios in order. If the server cannot be
//! started the test fails, unless NODE_LIFECYCLED_SKIP_REAL_APISERVER=1 (then it says why).

use std::path::Path;
use std::time::Duration;

use crate::kube_client_support::{TempDir, TestCa, VirtualClock, b64};
use crate::real_apiserver_support::RealApiserver;
use crate::real_apiserver_support::versions::{Kube, versions};
use node_lifecycled::kube::{
    ApiClient, ApiError, ClientSettings, Connection, ExplicitSettings, PatchType, Preconditions,
};
use serde::Deserialize;
use serde_json::json;

fn client(connection: &Connection) -> ApiClient {
    let settings = ClientSettings {
        qps: None,
        ..ClientSettings::default()
    };
    ApiClient::new(connection, &settings, VirtualClock::new().boxed()).unwrap()
}

#[derive(Deserialize, Debug)]
struct Node {
    metadata: Meta,
    #[serde(default)]
    spec: NodeSpec,
}

#[derive(Deserialize, Debug)]
struct Meta {
    name: String,
    uid: String,
    #[serde(rename = "resourceVersion")]
    resource_version: String,
}

#[derive(Deserialize, Debug, Default)]
struct NodeSpec {
    #[serde(default)]
    taints: Vec<serde_json::Value>,
}

fn node_json(name: &str) -> Vec<u8> {
    json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {"test": "client"}}})
        .to_string()
        .into_bytes()
}

fn taint_patch(resource_version: &str, key: &str) -> Vec<u8> {
    json!({
        "metadata": {"resourceVersion": resource_version},
        "spec": {"taints": [{"key": key, "effect": "NoExecute", "timeAdded": "2024-01-01T00:00:00Z"}]}
    })
    .to_string()
    .into_bytes()
}

fn client_scenarios(kube: Kube) {
    let Some(server) = RealApiserver::start(kube) else {
        return;
    };

    // The admin kubeconfig up.sh writes: file paths, PKCS#8 RSA keys, https://127.0.0.1:PORT
    // verified against the IP SAN.
    let admin_connection =
        Connection::from_kubeconfig(Path::new(server.var("ADMIN_KUBECONFIG")), None, false)
            .unwrap();
    let mut admin = client(&admin_connection);
    let version: serde_json::Value = admin.get_json("/version").unwrap();
    assert_eq!(version["gitVersion"], kube.git_version().as_str());

    // The daemon's kubeconfig authenticates by its client certificate as "node-lifecycled",
    // which no RBAC binding grants anything yet: a typed 403 carrying the server's message.
    let daemon_connection =
        Connection::from_kubeconfig(Path::new(server.var("DAEMON_KUBECONFIG")), None, false)
            .unwrap();
    let err = client(&daemon_connection)
        .list_page::<Node>("/api/v1/nodes", 500, None, None)
        .unwrap_err();
    match &err {
        ApiError::Forbidden(status) => assert!(
            status
                .message
                .contains("User \"node-lifecycled\" cannot list resource \"nodes\""),
            "{status}"
        ),
        other => panic!("expected Forbidden, got {other:?}"),
    }

    // A bearer token file (explicit settings) authenticates too.
    let token_connection = Connection::explicit(
        &ExplicitSettings {
            origin: "test.toml".into(),
            section: "kube".into(),
            server: server.var("APISERVER_URL").to_string(),
            certificate_authority: Some(server.var("CA_FILE").into()),
            token_file: Some(server.var("ADMIN_TOKEN_FILE").into()),
            ..ExplicitSettings::default()
        },
        false,
    )
    .unwrap();
    client(&token_connection)
        .get_bytes("/api/v1/nodes")
        .unwrap();

    // POST five nodes, then LIST them two at a time.
    for i in 0..5 {
        let created: Node = admin
            .post("/api/v1/nodes", &node_json(&format!("client-node-{i}")))
            .unwrap();
        assert_eq!(created.metadata.name, format!("client-node-{i}"));
    }
    let err = admin
        .post::<Node>("/api/v1/nodes", &node_json("client-node-0"))
        .unwrap_err();
    assert!(
        matches!(&err, ApiError::Conflict(s) if s.reason == "AlreadyExists"),
        "{err:?}"
    );
    let mut names = Vec::new();
    let mut token: Option<String> = None;
    let mut pages = 0;
    loop {
        let page = admin
            .list_page::<Node>(
                "/api/v1/nodes?labelSelector=test%3Dclient",
                2,
                token.as_deref(),
                None,
            )
            .unwrap();
        pages += 1;
        assert!(!page.resource_version.is_empty());
        names.extend(page.items.into_iter().map(|n| n.metadata.name));
        match page.continue_token {
            Some(next) => token = Some(next),
            None => break,
        }
    }
    assert_eq!(pages, 3);
    assert_eq!(
        names,
        (0..5)
            .map(|i| format!("client-node-{i}"))
            .collect::<Vec<_>>()
    );

    // GET: typed NotFound for a missing node.
    let err = admin
        .get_json::<Node>("/api/v1/nodes/no-such-node")
        .unwrap_err();
    assert!(matches!(err, ApiError::NotFound(_)), "{err:?}");

    // The taint patch: read, let someone else write (a label), then patch with the stale
    // resourceVersion -> 409; with the fresh one -> applied.
    let path = "/api/v1/nodes/client-node-0";
    let stale: Node = admin.get_json(path).unwrap();
    let relabelled: Node = admin
        .patch(
            path,
            PatchType::StrategicMerge,
            br#"{"metadata":{"labels":{"other":"writer"}}}"#,
        )
        .unwrap();
    assert_ne!(
        relabelled.metadata.resource_version,
        stale.metadata.resource_version
    );
    let err = admin
        .patch::<Node>(
            path,
            PatchType::StrategicMerge,
            &taint_patch(
                &stale.metadata.resource_version,
                "node.kubernetes.io/unreachable",
            ),
        )
        .unwrap_err();
    match &err {
        ApiError::Conflict(status) => {
            assert_eq!(status.code, 409);
            assert!(
                status.message.contains("the object has been modified"),
                "{status}"
            );
        }
        other => panic!("expected Conflict, got {other:?}"),
    }
    let tainted: Node = admin
        .patch(
            path,
            PatchType::StrategicMerge,
            &taint_patch(
                &relabelled.metadata.resource_version,
                "node.kubernetes.io/unreachable",
            ),
        )
        .unwrap();
    assert_eq!(tainted.spec.taints.len(), 1);
    assert_eq!(
        tainted.spec.taints[0]["key"],
        "node.kubernetes.io/unreachable"
    );

    // An invalid taint effect is a typed 422.
    let err = admin
        .patch::<Node>(
            path,
            PatchType::Merge,
            br#"{"spec":{"taints":[{"key":"k","effect":"Bogus"}]}}"#,
        )
        .unwrap_err();
    assert!(matches!(err, ApiError::Invalid(_)), "{err:?}");

    // JSON patch works as well.
    let _: Node = admin
        .patch(
            path,
            PatchType::Json,
            br#"[{"op":"remove","path":"/spec/taints"}]"#,
        )
        .unwrap();

    // DELETE with a UID precondition: a wrong UID is a 409, the right one deletes.
    let victim: Node = admin.get_json("/api/v1/nodes/client-node-4").unwrap();
    let wrong = Preconditions {
        uid: Some("00000000-0000-0000-0000-000000000000".into()),
        resource_version: None,
    };
    let err = admin
        .delete("/api/v1/nodes/client-node-4", &wrong, Some(0))
        .unwrap_err();
    assert!(matches!(err, ApiError::Conflict(_)), "{err:?}");
    let right = Preconditions {
        uid: Some(victim.metadata.uid.clone()),
        resource_version: None,
    };
    admin
        .delete("/api/v1/nodes/client-node-4", &right, Some(0))
        .unwrap();
    let err = admin
        .get_json::<Node>("/api/v1/nodes/client-node-4")
        .unwrap_err();
    assert!(matches!(err, ApiError::NotFound(_)), "{err:?}");

    // A kubeconfig with the wrong CA fails the handshake with a clear error.
    let other_ca = TestCa::new("not-the-cluster-ca");
    let dir = TempDir::new("real-wrong-ca");
    let wrong_ca = dir.write(
        "kubeconfig",
        format!(
            "clusters: [{{name: c, cluster: {{server: '{}', certificate-authority-data: {}}}}}]
contexts: [{{name: x, context: {{cluster: c}}}}]
current-context: x
",
            server.var("APISERVER_URL"),
            b64(&other_ca.cert_pem)
        ),
    );
    let connection = Connection::from_kubeconfig(&wrong_ca, None, false).unwrap();
    let err = client(&connection).get_bytes("/version").unwrap_err();
    assert!(
        matches!(&err, ApiError::Transport(m) if m.contains("invalid peer certificate: UnknownIssuer")),
        "{err:?}"
    );
    eprintln!("wrong CA: {err}");

    // The hard timeout holds against the real server too (a watch that would hang for 30 s).
    let settings = ClientSettings {
        timeout: Duration::from_millis(500),
        qps: None,
        ..ClientSettings::default()
    };
    let mut short =
        ApiClient::new(&admin_connection, &settings, VirtualClock::new().boxed()).unwrap();
    let err = short
        .get_bytes("/api/v1/nodes?watch=true&timeoutSeconds=30")
        .unwrap_err();
    assert!(matches!(err, ApiError::Timeout(_)), "{err:?}");
}

// The releases each scenario runs on: the whole tier on the newest; on 1.35 and the 1.20.2 floor
// the protocol and a representative few of each kind (README, Supported Kubernetes versions).
versions! {
    v1_37 => [client_scenarios],
    v1_35 => [client_scenarios],
    v1_20 => [client_scenarios],
}
