//! TLS serving with a test CA: the client verifies the server against the CA, and a client
//! certificate's CN identifies the writer in the write log.

use std::io::{BufRead, BufReader};
use std::time::Duration;

use node_lifecycled_sim::{Resource, SimConfig, SimServer, SimTls, Verb, fixtures};
use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair};

struct Pki {
    ca_pem: String,
    server_cert_pem: String,
    server_key_pem: String,
    client_cert_pem: String,
    client_key_pem: String,
}

fn ca(name: &str) -> CertifiedIssuer<'static, KeyPair> {
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.distinguished_name.push(DnType::CommonName, name);
    CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap()
}

fn pki() -> Pki {
    let ca = ca("sim test CA");
    let server_key = KeyPair::generate().unwrap();
    let mut server =
        CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()]).unwrap();
    server
        .distinguished_name
        .push(DnType::CommonName, "kube-apiserver");
    let server_cert = server.signed_by(&server_key, &ca).unwrap();
    let client_key = KeyPair::generate().unwrap();
    let mut client = CertificateParams::new(Vec::<String>::new()).unwrap();
    client
        .distinguished_name
        .push(DnType::CommonName, "system:node-lifecycled-a");
    client
        .distinguished_name
        .push(DnType::OrganizationName, "system:masters");
    let client_cert = client.signed_by(&client_key, &ca).unwrap();
    Pki {
        ca_pem: ca.pem(),
        server_cert_pem: server_cert.pem(),
        server_key_pem: server_key.serialize_pem(),
        client_cert_pem: client_cert.pem(),
        client_key_pem: client_key.serialize_pem(),
    }
}

fn agent(ca_pem: &str, client: Option<(&str, &str)>) -> ureq::Agent {
    use ureq::tls::{Certificate, ClientCert, PrivateKey, RootCerts, TlsConfig};
    let root = Certificate::from_pem(ca_pem.as_bytes()).unwrap();
    let client_cert = client.map(|(cert, key)| {
        ClientCert::new_with_certs(
            &[Certificate::from_pem(cert.as_bytes()).unwrap()],
            PrivateKey::from_pem(key.as_bytes()).unwrap(),
        )
    });
    let tls = TlsConfig::builder()
        .root_certs(RootCerts::new_with_certs(&[root]))
        .client_cert(client_cert)
        .build();
    let config = ureq::Agent::config_builder()
        .tls_config(tls)
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(10)))
        .build();
    ureq::Agent::new_with_config(config)
}

#[test]
fn tls_with_a_test_ca_serves_verified_clients_and_logs_the_client_certificate_cn() {
    let pki = pki();
    let sim = SimServer::start(SimConfig {
        tls: Some(SimTls {
            cert_chain_pem: pki.server_cert_pem.clone(),
            private_key_pem: pki.server_key_pem.clone(),
            client_ca_pem: Some(pki.ca_pem.clone()),
        }),
        bookmark_interval: Duration::from_millis(1500),
        ..SimConfig::default()
    })
    .unwrap();
    assert!(sim.url().starts_with("https://127.0.0.1:"));
    let client = agent(
        &pki.ca_pem,
        Some((&pki.client_cert_pem, &pki.client_key_pem)),
    );
    let rv = sim.cluster().resource_version();

    let watch = client
        .get(format!(
            "{}/api/v1/nodes?watch=true&resourceVersion={rv}&allowWatchBookmarks=true",
            sim.url()
        ))
        .call()
        .unwrap();
    assert_eq!(watch.status(), 200);
    let mut lines = BufReader::new(watch.into_body().into_reader());

    let node = fixtures::ready_node("n1", None, sim.cluster().now());
    let created = client
        .post(format!("{}/api/v1/nodes", sim.url()))
        .header("Content-Type", "application/json")
        .send(node.to_string())
        .unwrap();
    assert_eq!(created.status(), 201);

    let mut line = String::new();
    lines.read_line(&mut line).unwrap();
    let event: serde_json::Value = serde_json::from_str(&line).unwrap();
    assert_eq!(
        (
            event["type"].as_str(),
            event["object"]["metadata"]["name"].as_str()
        ),
        (Some("ADDED"), Some("n1"))
    );

    // The quiet TLS watch outlives the server's once-a-second liveness checks.
    line.clear();
    lines.read_line(&mut line).unwrap();
    assert!(line.contains("\"BOOKMARK\""), "{line}");

    let write = sim
        .writes()
        .into_iter()
        .find(|w| w.is(Verb::Create, "nodes"))
        .unwrap();
    assert_eq!(
        write.identity.client_cn.as_deref(),
        Some("system:node-lifecycled-a")
    );
    assert!(write.by("system:node-lifecycled-a"));

    // Without a client certificate: still served (authentication by token is separate).
    let anonymous = agent(&pki.ca_pem, None);
    let mut listed = anonymous
        .get(format!("{}/api/v1/nodes", sim.url()))
        .call()
        .unwrap();
    assert_eq!(listed.status(), 200);
    assert!(
        listed
            .body_mut()
            .read_to_string()
            .unwrap()
            .contains("\"n1\"")
    );
    assert_eq!(sim.cluster().count(Resource::Nodes), 1);
}

#[test]
fn a_client_that_does_not_trust_the_ca_fails_the_handshake() {
    let pki = pki();
    let sim = SimServer::start(SimConfig {
        tls: Some(SimTls {
            cert_chain_pem: pki.server_cert_pem,
            private_key_pem: pki.server_key_pem,
            client_ca_pem: None,
        }),
        ..SimConfig::default()
    })
    .unwrap();
    let stranger = agent(&ca("another CA").pem(), None);
    let result = stranger.get(format!("{}/healthz", sim.url())).call();
    assert!(
        result.is_err(),
        "the server certificate must not verify against another CA"
    );
    let trusting = agent(&pki.ca_pem, None);
    assert_eq!(
        trusting
            .get(format!("{}/healthz", sim.url()))
            .call()
            .unwrap()
            .status(),
        200
    );
}

#[test]
fn bad_pem_is_an_error_not_a_panic() {
    let err = SimServer::start(SimConfig {
        tls: Some(SimTls {
            cert_chain_pem: "not a certificate".into(),
            private_key_pem: String::new(),
            client_ca_pem: None,
        }),
        ..SimConfig::default()
    })
    .err()
    .unwrap();
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
    assert!(err.to_string().starts_with("simulator TLS: "), "{err}");
}
