//! The unary client over real sockets (plain HTTP on loopback; TLS is `kube_client_tls`):
//! typed Status errors, throttling and Retry-After on a virtual clock, pagination, patch
//! content types, delete preconditions, hard timeouts, keep-alive.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::kube_client_support::*;
use node_lifecycled::kube::{
    ApiClient, ApiError, ClientSettings, Connection, ExplicitSettings, PatchType, Preconditions,
};
use node_lifecycled::time::Rate;
use serde::Deserialize;
use serde_json::json;

fn connect(server: &TestServer, settings: ClientSettings, clock: &VirtualClock) -> ApiClient {
    let connection = Connection::explicit(
        &ExplicitSettings {
            origin: "test.toml".into(),
            section: "kube".into(),
            server: server.http_url(),
            ..ExplicitSettings::default()
        },
        false,
    )
    .unwrap();
    ApiClient::new(&connection, &settings, clock.boxed()).unwrap()
}

fn unthrottled() -> ClientSettings {
    ClientSettings {
        qps: None,
        ..ClientSettings::default()
    }
}

fn serve(handler: impl Fn(&SeenRequest) -> Reply + Send + Sync + 'static) -> TestServer {
    TestServer::start(None, Arc::new(handler))
}

#[test]
fn status_bodies_type_the_errors_and_keep_the_server_message() {
    let server = serve(|req| match req.path.as_str() {
        "/401" => Reply::status(401, "Unauthorized", "Unauthorized"),
        "/403" => Reply::status(
            403,
            "Forbidden",
            "nodes is forbidden: User \"x\" cannot list",
        ),
        "/404" => Reply::status(404, "NotFound", "nodes \"n9\" not found"),
        "/409" => Reply::status(409, "Conflict", "the object has been modified"),
        "/410" => Reply::status(410, "Expired", "too old resource version"),
        "/422" => Reply::status(422, "Invalid", "spec.taints: Invalid value"),
        "/500" => Reply::status(500, "InternalError", "etcd is down"),
        "/503" => Reply::status(503, "ServiceUnavailable", "not ready"),
        _ => Reply::json(200, json!({})),
    });
    let clock = VirtualClock::new();
    let mut client = connect(&server, unthrottled(), &clock);
    let mut kinds = Vec::new();
    for code in ["401", "403", "404", "409", "410", "422", "500", "503"] {
        let err = client.get_bytes(&format!("/{code}")).unwrap_err();
        assert_eq!(err.code().map(|c| c.to_string()).as_deref(), Some(code));
        kinds.push(match &err {
            ApiError::Unauthorized(_) => "Unauthorized",
            ApiError::Forbidden(_) => "Forbidden",
            ApiError::NotFound(_) => "NotFound",
            ApiError::Conflict(_) => "Conflict",
            ApiError::Gone(_) => "Gone",
            ApiError::Invalid(_) => "Invalid",
            ApiError::Server(_) => "Server",
            other => panic!("unexpected {other:?}"),
        });
    }
    assert_eq!(
        kinds,
        [
            "Unauthorized",
            "Forbidden",
            "NotFound",
            "Conflict",
            "Gone",
            "Invalid",
            "Server",
            "Server"
        ]
    );
    let err = client.get_bytes("/404").unwrap_err();
    assert_eq!(
        err.to_string(),
        "GET /404: 404 NotFound: nodes \"n9\" not found"
    );
}

#[test]
fn two_hundred_calls_at_qps_20_burst_30_take_8_5_seconds_of_virtual_time() {
    let server = serve(|_| Reply::json(200, json!({})));
    let clock = VirtualClock::new();
    let start = clock.now();
    let mut client = connect(&server, ClientSettings::default(), &clock);
    let mut sent = 0;
    while sent < 200 {
        match client.get_bytes("/api/v1/nodes/n1") {
            Ok(_) => sent += 1,
            // The executor would schedule the call at `until`; the test jumps there.
            Err(ApiError::Throttled { until }) => {
                assert!(until > clock.now());
                assert_eq!(client.next_admission(), until);
                clock.set(until);
            }
            Err(other) => panic!("{other}"),
        }
    }
    assert_eq!(clock.now() - start, Duration::from_millis(8_500));
    assert_eq!(
        server.requests().len(),
        200,
        "throttled calls never reached the server"
    );
}

#[test]
fn a_429_with_retry_after_3_holds_every_call_back_3_seconds() {
    let server = serve(|req| {
        if req.path == "/busy" {
            Reply::status(
                429,
                "TooManyRequests",
                "Too many requests, please try again later.",
            )
            .with_header("Retry-After", "3")
        } else {
            Reply::json(200, json!({}))
        }
    });
    let clock = VirtualClock::new();
    let t0 = clock.now();
    let mut client = connect(&server, ClientSettings::default(), &clock);
    let err = client.get_bytes("/busy").unwrap_err();
    assert!(
        matches!(&err, ApiError::TooManyRequests { retry_after: Some(d), .. } if *d == Duration::from_secs(3)),
        "{err:?}"
    );
    // Another path, still held back: Retry-After is for the whole client.
    clock.advance(Duration::from_millis(2_999));
    let err = client.get_bytes("/other").unwrap_err();
    assert_eq!(
        err,
        ApiError::Throttled {
            until: t0 + Duration::from_secs(3)
        }
    );
    assert_eq!(server.requests().len(), 1);
    clock.set(t0 + Duration::from_secs(3));
    client.get_bytes("/other").unwrap();
    assert_eq!(server.requests().len(), 2);
}

#[derive(Deserialize, Debug, PartialEq)]
struct NodeName {
    metadata: Meta,
}

#[derive(Deserialize, Debug, PartialEq)]
struct Meta {
    name: String,
}

#[test]
fn a_paginated_list_follows_continue_tokens_to_the_last_page() {
    // Continue tokens are base64 (`+`, `/`, `=`): they must survive the query string.
    const TOKEN_1: &str = "eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6MTB9+/=";
    const TOKEN_2: &str = "second+token/==";
    let server = serve(|req| {
        let page = |names: &[&str], cont: &str| {
            let items: Vec<_> = names
                .iter()
                .map(|n| json!({"metadata": {"name": n}}))
                .collect();
            Reply::json(
                200,
                json!({"kind": "NodeList", "metadata": {"resourceVersion": "42", "continue": cont}, "items": items}),
            )
        };
        match req.query("continue").as_deref() {
            None => page(&["a", "b"], TOKEN_1),
            Some(TOKEN_1) => page(&["c", "d"], TOKEN_2),
            Some(TOKEN_2) => page(&["e"], ""),
            Some(other) => Reply::status(410, "Expired", &format!("bad token {other}")),
        }
    });
    let clock = VirtualClock::new();
    let mut client = connect(&server, unthrottled(), &clock);
    let mut names = Vec::new();
    let mut token: Option<String> = None;
    let mut pages = 0;
    loop {
        let page = client
            .list_page::<NodeName>("/api/v1/nodes", 500, token.as_deref(), Some("0"))
            .unwrap();
        pages += 1;
        assert_eq!(page.resource_version, "42");
        names.extend(page.items.into_iter().map(|n| n.metadata.name));
        match page.continue_token {
            Some(next) => token = Some(next),
            None => break,
        }
    }
    assert_eq!(pages, 3);
    assert_eq!(names, ["a", "b", "c", "d", "e"]);
    let seen = server.requests();
    assert!(
        seen.iter()
            .all(|r| r.query("limit").as_deref() == Some("500"))
    );
    assert_eq!(seen[0].query("resourceVersion").as_deref(), Some("0"));
    assert!(
        seen[1..]
            .iter()
            .all(|r| r.query("resourceVersion").is_none()),
        "the server refuses resourceVersion together with continue"
    );
}

#[test]
fn a_list_page_larger_than_ureqs_10_mb_default_is_stream_decoded() {
    let items: Vec<_> = (0..12_000)
        .map(|i| json!({"metadata": {"name": format!("pod-{i}"), "annotations": {"pad": "x".repeat(1000)}}}))
        .collect();
    let body = json!({"kind": "PodList", "metadata": {"resourceVersion": "7"}, "items": items});
    let size = body.to_string().len();
    assert!(size > 12 << 20, "{size}");
    let server = serve(move |_| Reply::json(200, body.clone()));
    let clock = VirtualClock::new();
    // 12 MB decoded by a debug build on a busy machine can take longer than the 5 s default.
    let settings = ClientSettings {
        timeout: Duration::from_secs(60),
        ..unthrottled()
    };
    let mut client = connect(&server, settings, &clock);
    let page = client
        .list_page::<NodeName>("/api/v1/pods", 0, None, None)
        .unwrap();
    assert_eq!(page.items.len(), 12_000);
    assert_eq!(page.items[11_999].metadata.name, "pod-11999");
    assert_eq!(page.continue_token, None);
    assert_eq!(server.requests()[0].query("limit"), None);
}

#[test]
fn patches_carry_their_content_type() {
    let server = serve(|_| Reply::json(200, json!({"metadata": {"name": "n1"}})));
    let clock = VirtualClock::new();
    let mut client = connect(&server, unthrottled(), &clock);
    let body = json!({"metadata": {"resourceVersion": "5"}, "spec": {"taints": []}}).to_string();
    for patch_type in [PatchType::StrategicMerge, PatchType::Merge, PatchType::Json] {
        let node: NodeName = client
            .patch("/api/v1/nodes/n1", patch_type, body.as_bytes())
            .unwrap();
        assert_eq!(node.metadata.name, "n1");
    }
    let seen = server.requests();
    let content_types: Vec<_> = seen
        .iter()
        .map(|r| r.header("content-type").unwrap().to_string())
        .collect();
    assert_eq!(
        content_types,
        [
            "application/strategic-merge-patch+json",
            "application/merge-patch+json",
            "application/json-patch+json"
        ]
    );
    assert!(
        seen.iter()
            .all(|r| r.method == "PATCH" && r.body == body.as_bytes())
    );
}

#[test]
fn put_and_post_send_json_and_decode_the_answer() {
    let server = serve(|req| {
        Reply::json(
            if req.method == "POST" { 201 } else { 200 },
            json!({"metadata": {"name": "e1"}}),
        )
    });
    let clock = VirtualClock::new();
    let mut client = connect(&server, unthrottled(), &clock);
    let created: NodeName = client
        .post("/api/v1/namespaces/default/events", br#"{"kind":"Event"}"#)
        .unwrap();
    assert_eq!(created.metadata.name, "e1");
    let _: serde::de::IgnoredAny = client
        .put("/api/v1/nodes/n1/status", br#"{"kind":"Node"}"#)
        .unwrap();
    let seen = server.requests();
    assert_eq!(
        (seen[0].method.as_str(), seen[1].method.as_str()),
        ("POST", "PUT")
    );
    assert!(
        seen.iter()
            .all(|r| r.header("content-type") == Some("application/json"))
    );
    assert_eq!(seen[1].json()["kind"], "Node");
}

#[test]
fn delete_sends_preconditions_and_grace_period() {
    let server = serve(|req| {
        if req.path.ends_with("/gone") {
            Reply::status(404, "NotFound", "pods \"gone\" not found")
        } else if req.json()["preconditions"]["uid"] == "old-uid" {
            Reply::status(
                409,
                "Conflict",
                "Precondition failed: UID in precondition: old-uid",
            )
        } else {
            Reply::json(200, json!({"kind": "Pod"}))
        }
    });
    let clock = VirtualClock::new();
    let mut client = connect(&server, unthrottled(), &clock);
    let path = "/api/v1/namespaces/default/pods/p1";
    let pre = Preconditions {
        uid: Some("uid-1".into()),
        resource_version: Some("9".into()),
    };
    client.delete(path, &pre, Some(30)).unwrap();
    let stale = Preconditions {
        uid: Some("old-uid".into()),
        resource_version: None,
    };
    assert!(matches!(
        client.delete(path, &stale, None),
        Err(ApiError::Conflict(_))
    ));
    let err = client
        .delete(
            "/api/v1/namespaces/default/pods/gone",
            &Preconditions::default(),
            None,
        )
        .unwrap_err();
    assert!(matches!(err, ApiError::NotFound(_)));

    let seen = server.requests();
    assert_eq!(seen[0].method, "DELETE");
    assert_eq!(
        seen[0].json(),
        json!({"kind": "DeleteOptions", "apiVersion": "v1",
               "preconditions": {"uid": "uid-1", "resourceVersion": "9"}, "gracePeriodSeconds": 30})
    );
    assert!(seen[1].json().get("gracePeriodSeconds").is_none());
}

#[test]
fn a_server_that_does_not_answer_hits_the_hard_timeout() {
    let server = serve(|_| Reply::json(200, json!({})).with_delay(Duration::from_secs(3)));
    let clock = VirtualClock::new();
    let settings = ClientSettings {
        timeout: Duration::from_millis(300),
        ..unthrottled()
    };
    let mut client = connect(&server, settings, &clock);
    let started = Instant::now();
    let err = client.get_bytes("/api/v1/nodes").unwrap_err();
    let took = started.elapsed();
    assert!(matches!(err, ApiError::Timeout(_)), "{err:?}");
    assert!(
        took >= Duration::from_millis(250) && took < Duration::from_secs(2),
        "{took:?}"
    );
}

#[test]
fn calls_reuse_one_keep_alive_connection() {
    let server = serve(|req| match req.path.as_str() {
        "/missing" => Reply::status(404, "NotFound", "x"),
        _ => Reply::json(200, json!({"metadata": {"name": "n1"}})),
    });
    let clock = VirtualClock::new();
    let mut client = connect(&server, unthrottled(), &clock);
    for _ in 0..5 {
        let _: NodeName = client.get_json("/api/v1/nodes/n1").unwrap();
        client.get_bytes("/version").unwrap();
        client
            .patch::<NodeName>("/api/v1/nodes/n1", PatchType::Merge, b"{}")
            .unwrap();
        client
            .delete("/api/v1/nodes/n1", &Preconditions::default(), None)
            .unwrap();
        assert!(client.get_bytes("/missing").is_err());
    }
    assert_eq!(server.requests().len(), 25);
    assert_eq!(server.connections(), 1);
}

#[test]
fn a_2xx_body_that_is_not_the_expected_json_is_a_decode_error() {
    let server = serve(|_| Reply::json(200, json!({"metadata": "not an object"})));
    let clock = VirtualClock::new();
    let mut client = connect(&server, unthrottled(), &clock);
    let err = client.get_json::<NodeName>("/api/v1/nodes/n1").unwrap_err();
    assert!(
        matches!(&err, ApiError::Decode(m) if m.starts_with("GET /api/v1/nodes/n1: invalid type")),
        "{err:?}"
    );
}

/// Answers up to 64 KiB are read whole and decoded from the slice, longer ones stream through
/// the reader: both decode alike, and a bad one is a decode error either way.
#[test]
fn short_and_long_answers_decode_alike() {
    let server = serve(|req| {
        let pad = if req.path.contains("short") {
            100
        } else {
            200_000
        };
        let name = req.path.rsplit('/').next().unwrap_or_default().to_string();
        let name = if name.starts_with("bad") {
            json!(7)
        } else {
            json!(name)
        };
        Reply::json(
            200,
            json!({"metadata": {"name": name}, "pad": "x".repeat(pad)}),
        )
    });
    let clock = VirtualClock::new();
    let mut client = connect(&server, unthrottled(), &clock);
    for name in ["short", "long"] {
        let got: NodeName = client.get_json(&format!("/api/v1/nodes/{name}")).unwrap();
        assert_eq!(got.metadata.name, name);
        let _: serde::de::IgnoredAny = client
            .post(&format!("/api/v1/nodes/{name}"), b"{}")
            .unwrap();
    }
    // Every answer was read to its end: one keep-alive connection throughout.
    assert_eq!(server.connections(), 1);
    for path in ["/api/v1/nodes/short/bad", "/api/v1/nodes/long/bad"] {
        let err = client.get_json::<NodeName>(path).unwrap_err();
        assert!(
            matches!(&err, ApiError::Decode(m) if m.contains("invalid type")),
            "{path}: {err:?}"
        );
    }
}

#[test]
fn a_refused_connection_is_a_transport_error_naming_the_server() {
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let connection = Connection::explicit(
        &ExplicitSettings {
            server: format!("http://127.0.0.1:{port}"),
            ..ExplicitSettings::default()
        },
        false,
    )
    .unwrap();
    let mut client =
        ApiClient::new(&connection, &unthrottled(), VirtualClock::new().boxed()).unwrap();
    let err = client.get_bytes("/version").unwrap_err();
    assert!(
        matches!(&err, ApiError::Transport(m) if m.starts_with(&format!("GET /version to http://127.0.0.1:{port}: "))),
        "{err:?}"
    );
}

#[test]
fn bearer_tokens_go_in_the_authorization_header() {
    let server = serve(|_| Reply::json(200, json!({})));
    let dir = TempDir::new("bearer");
    dir.write("token", "s3cret");
    let connection = Connection::explicit(
        &ExplicitSettings {
            origin: dir.path().join("config.toml"),
            server: server.http_url(),
            token_file: Some("token".into()),
            ..ExplicitSettings::default()
        },
        false,
    )
    .unwrap();
    let settings = ClientSettings {
        qps: Some(Rate::per_second(5)),
        burst: 1,
        ..ClientSettings::default()
    };
    let mut client = ApiClient::new(&connection, &settings, VirtualClock::new().boxed()).unwrap();
    client.get_bytes("/version").unwrap();
    assert_eq!(
        server.requests()[0].header("authorization"),
        Some("Bearer s3cret")
    );
    assert!(matches!(
        client.get_bytes("/version"),
        Err(ApiError::Throttled { .. })
    ));
}
