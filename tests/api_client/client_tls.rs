//! Connection settings end to end over TLS: kubeconfigs as kubeadm and k3s write them, the
//! in-cluster service account, IP-SAN verification, wrong CAs and mismatched keys.

use std::sync::Arc;
use std::time::Duration;

use crate::kube_client_support::*;
use node_lifecycled::kube::{ApiClient, ApiError, ClientSettings, Connection};
use serde_json::json;

fn ok_handler() -> Handler {
    Arc::new(|_req: &SeenRequest| {
        Reply::json(200, json!({"kind": "Node", "metadata": {"name": "n1"}}))
    })
}

fn tls_server(ca: &TestCa, sans: &[&str], require_client_cert: bool) -> TestServer {
    let server = ca.server(sans);
    TestServer::start(
        Some(ServerTls {
            cert_pem: server.cert_pem,
            key_pem: server.key_pem,
            client_ca: require_client_cert.then(|| ca.cert_der()),
        }),
        ok_handler(),
    )
}

fn client(connection: &Connection) -> ApiClient {
    ApiClient::new(
        connection,
        &ClientSettings::default(),
        VirtualClock::new().boxed(),
    )
    .unwrap()
}

/// kubeadm's admin.conf: everything embedded, the key as PKCS#1 `RSA PRIVATE KEY`.
fn kubeadm_kubeconfig(server: &str, ca_pem: &str, client: &Issued) -> String {
    format!(
        "apiVersion: v1
clusters:
- cluster:
    certificate-authority-data: {}
    server: {server}
  name: kubernetes
contexts:
- context:
    cluster: kubernetes
    user: kubernetes-admin
  name: kubernetes-admin@kubernetes
current-context: kubernetes-admin@kubernetes
kind: Config
preferences: {{}}
users:
- name: kubernetes-admin
  user:
    client-certificate-data: {}
    client-key-data: {}
",
        b64(ca_pem),
        b64(&client.cert_pem),
        b64(&client.key_pem)
    )
}

#[test]
fn kubeadm_kubeconfig_with_embedded_client_certificate_connects_over_tls() {
    let ca = TestCa::new("kubernetes");
    let server = tls_server(&ca, &["127.0.0.1"], true);
    let admin = ca.client("kubernetes-admin", RSA_PKCS8, RSA_PKCS1);
    assert!(admin.key_pem.starts_with("-----BEGIN RSA PRIVATE KEY-----"));
    let dir = TempDir::new("kubeadm");
    let path = dir.write(
        "admin.conf",
        kubeadm_kubeconfig(&server.https_url(), &ca.cert_pem, &admin),
    );

    let connection = Connection::from_kubeconfig(&path, None, false).unwrap();
    // No ALPN: offering h2 makes the API server answer in HTTP/2.
    assert!(connection.tls.as_ref().unwrap().alpn_protocols.is_empty());
    let mut client = client(&connection);
    let node: serde_json::Value = client.get_json("/api/v1/nodes/n1").unwrap();
    assert_eq!(node["metadata"]["name"], "n1");

    let seen = server.requests();
    assert_eq!(seen.len(), 1);
    assert!(
        seen[0].client_certificate,
        "the client certificate was presented"
    );
    assert_eq!(seen[0].header("authorization"), None);
    assert_eq!(
        seen[0].header("user-agent"),
        Some(concat!("node-lifecycled/", env!("CARGO_PKG_VERSION")))
    );
    assert_eq!(seen[0].header("accept"), Some("application/json"));
}

#[test]
fn k3s_kubeconfig_with_an_ec_sec1_client_key_connects() {
    let ca = TestCa::new("k3s-server-ca");
    let server = tls_server(&ca, &["127.0.0.1"], true);
    let admin = ca.client("system:admin", EC_PKCS8, EC_SEC1);
    assert!(admin.key_pem.starts_with("-----BEGIN EC PARAMETERS-----"));
    let dir = TempDir::new("k3s");
    let yaml = format!(
        "apiVersion: v1
clusters:
- cluster:
    certificate-authority-data: {}
    server: {}
  name: default
contexts:
- context:
    cluster: default
    user: default
  name: default
current-context: default
kind: Config
preferences: {{}}
users:
- name: default
  user:
    client-certificate-data: {}
    client-key-data: {}
",
        b64(&ca.cert_pem),
        server.https_url(),
        b64(&admin.cert_pem),
        b64(&admin.key_pem)
    );
    let path = dir.write("k3s.yaml", yaml);
    let connection = Connection::from_kubeconfig(&path, Some("default"), false).unwrap();
    client(&connection).get_bytes("/version").unwrap();
    assert!(server.requests()[0].client_certificate);
}

#[test]
fn kubeconfig_with_relative_file_paths_and_a_pkcs8_key_connects() {
    let ca = TestCa::new("ca");
    let server = tls_server(&ca, &["127.0.0.1"], true);
    let user = ca.client("node-lifecycled", RSA_PKCS8, RSA_PKCS8);
    let dir = TempDir::new("relative");
    std::fs::create_dir_all(dir.path().join("pki")).unwrap();
    dir.write("pki/ca.crt", &ca.cert_pem);
    dir.write("pki/user.crt", &user.cert_pem);
    dir.write("pki/user.key", &user.key_pem);
    let yaml = format!(
        "clusters:
- name: c
  cluster: {{server: '{}', certificate-authority: pki/ca.crt}}
users:
- name: u
  user: {{client-certificate: pki/user.crt, client-key: pki/user.key}}
contexts:
- name: x
  context: {{cluster: c, user: u}}
current-context: x
",
        server.https_url()
    );
    let path = dir.write("config", yaml);
    let connection = Connection::from_kubeconfig(&path, None, false).unwrap();
    client(&connection).get_bytes("/version").unwrap();
    assert!(server.requests()[0].client_certificate);
}

#[test]
fn a_wrong_ca_fails_with_a_clear_error() {
    let real_ca = TestCa::new("real");
    let other_ca = TestCa::new("other");
    let server = tls_server(&real_ca, &["127.0.0.1"], false);
    let admin = real_ca.client("admin", RSA_PKCS8, RSA_PKCS1);
    let dir = TempDir::new("wrong-ca");
    let path = dir.write(
        "admin.conf",
        kubeadm_kubeconfig(&server.https_url(), &other_ca.cert_pem, &admin),
    );
    let connection = Connection::from_kubeconfig(&path, None, false).unwrap();
    let err = client(&connection).get_bytes("/api/v1/nodes").unwrap_err();
    let ApiError::Transport(message) = &err else {
        panic!("expected a transport error, got {err:?}");
    };
    assert!(
        message.contains("invalid peer certificate") && message.contains("UnknownIssuer"),
        "{message}"
    );
    assert!(
        message.contains(&server.https_url()),
        "names the server: {message}"
    );
    assert!(
        server.requests().is_empty(),
        "no request reached the server"
    );
}

#[test]
fn the_server_certificate_must_carry_the_ip_san_of_an_ip_server_url() {
    let ca = TestCa::new("ca");
    // Valid for "localhost" only: connecting to https://127.0.0.1 must fail on the name...
    let server = tls_server(&ca, &["localhost"], false);
    let dir = TempDir::new("ip-san");
    let yaml = |url: String| {
        format!(
            "clusters: [{{name: c, cluster: {{server: '{url}', certificate-authority-data: {}}}}}]
contexts: [{{name: x, context: {{cluster: c}}}}]
current-context: x
",
            b64(&ca.cert_pem)
        )
    };
    let by_ip = dir.write("by-ip", yaml(server.https_url()));
    let connection = Connection::from_kubeconfig(&by_ip, None, false).unwrap();
    let err = client(&connection).get_bytes("/version").unwrap_err();
    assert!(
        matches!(&err, ApiError::Transport(m) if m.contains("certificate not valid for name \"127.0.0.1\"")),
        "{err:?}"
    );
    // ...while the DNS name it does carry is accepted.
    let by_name = dir.write(
        "by-name",
        yaml(format!("https://localhost:{}", server.port)),
    );
    let connection = Connection::from_kubeconfig(&by_name, None, false).unwrap();
    client(&connection).get_bytes("/version").unwrap();
}

#[test]
fn a_client_certificate_that_does_not_match_its_key_is_a_startup_error() {
    let ca = TestCa::new("ca");
    let admin = ca.client("admin", RSA_PKCS8, RSA_PKCS1);
    let other_key = Issued {
        cert_pem: admin.cert_pem.clone(),
        key_pem: EC_SEC1.to_string(),
    };
    let dir = TempDir::new("mismatch");
    let path = dir.write(
        "admin.conf",
        kubeadm_kubeconfig("https://127.0.0.1:6443", &ca.cert_pem, &other_key),
    );
    let err = Connection::from_kubeconfig(&path, None, false).expect_err("refused");
    assert_eq!(err.field, "users[0].user.client-key-data");
    assert_eq!(
        err.to_string(),
        format!(
            "{}: users[0].user.client-key-data: does not match the client certificate (different public key)",
            path.display()
        )
    );
}

#[test]
fn insecure_skip_tls_verify_connects_to_an_unverified_server_only_when_allowed() {
    let ca = TestCa::new("unknown");
    let server = tls_server(&ca, &["127.0.0.1"], false);
    let dir = TempDir::new("insecure");
    let path = dir.write(
        "config",
        format!(
            "clusters: [{{name: c, cluster: {{server: '{}', insecure-skip-tls-verify: true}}}}]
contexts: [{{name: x, context: {{cluster: c}}}}]
current-context: x
",
            server.https_url()
        ),
    );
    let err = Connection::from_kubeconfig(&path, None, false).expect_err("refused");
    assert_eq!(err.field, "clusters[0].cluster.insecure-skip-tls-verify");
    let connection = Connection::from_kubeconfig(&path, None, true).unwrap();
    client(&connection).get_bytes("/version").unwrap();
}

#[test]
fn a_server_that_requires_a_client_certificate_refuses_a_client_without_one() {
    let ca = TestCa::new("ca");
    let server = tls_server(&ca, &["127.0.0.1"], true);
    let dir = TempDir::new("no-client-cert");
    let path = dir.write(
        "config",
        format!(
            "clusters: [{{name: c, cluster: {{server: '{}', certificate-authority-data: {}}}}}]
contexts: [{{name: x, context: {{cluster: c}}}}]
current-context: x
",
            server.https_url(),
            b64(&ca.cert_pem)
        ),
    );
    let connection = Connection::from_kubeconfig(&path, None, false).unwrap();
    let err = client(&connection).get_bytes("/version").unwrap_err();
    assert!(matches!(err, ApiError::Transport(_)), "{err:?}");
}

#[test]
fn in_cluster_service_account_from_a_temp_dir_and_its_rotated_token() {
    let ca = TestCa::new("cluster-ca");
    let server = tls_server(&ca, &["127.0.0.1"], false);
    let dir = TempDir::new("serviceaccount");
    dir.write("ca.crt", &ca.cert_pem);
    dir.write("token", "token-one\n");
    dir.write("namespace", "kube-system");
    let port = server.port.to_string();
    let connection =
        Connection::in_cluster_from(Some("127.0.0.1"), Some(&port), dir.path()).unwrap();

    let clock = VirtualClock::new();
    let mut client =
        ApiClient::new(&connection, &ClientSettings::default(), clock.boxed()).unwrap();
    client.get_bytes("/api/v1/nodes").unwrap();

    dir.write("token", "token-two\n");
    client.get_bytes("/api/v1/nodes").unwrap();
    clock.advance(Duration::from_secs(60));
    client.get_bytes("/api/v1/nodes").unwrap();

    let tokens: Vec<Option<String>> = server
        .requests()
        .iter()
        .map(|r| r.header("authorization").map(str::to_string))
        .collect();
    assert_eq!(
        tokens,
        [
            Some("Bearer token-one".to_string()),
            Some("Bearer token-one".to_string()),
            Some("Bearer token-two".to_string())
        ]
    );
}

#[test]
fn a_server_that_never_completes_the_tls_handshake_hits_the_hard_timeout() {
    use std::io::Read;
    let ca = TestCa::new("ca");
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    // Accepts the TCP connection, then reads (and ignores) until the client gives up.
    std::thread::spawn(move || {
        if let Ok((mut stream, _)) = listener.accept() {
            let mut sink = [0u8; 1024];
            while matches!(stream.read(&mut sink), Ok(n) if n > 0) {}
        }
    });
    let dir = TempDir::new("handshake-timeout");
    let path = dir.write(
        "config",
        format!(
            "clusters: [{{name: c, cluster: {{server: 'https://127.0.0.1:{port}', certificate-authority-data: {}}}}}]
contexts: [{{name: x, context: {{cluster: c}}}}]
current-context: x
",
            b64(&ca.cert_pem)
        ),
    );
    let connection = Connection::from_kubeconfig(&path, None, false).unwrap();
    let settings = ClientSettings {
        timeout: Duration::from_millis(300),
        ..ClientSettings::default()
    };
    let mut client = ApiClient::new(&connection, &settings, VirtualClock::new().boxed()).unwrap();
    let started = std::time::Instant::now();
    let err = client.get_bytes("/version").unwrap_err();
    let took = started.elapsed();
    assert!(matches!(err, ApiError::Timeout(_)), "{err:?}");
    assert!(took < Duration::from_secs(2), "{took:?}");
}
