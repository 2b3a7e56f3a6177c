//! CPU per unary API call (the start-up `RegisteredNode` event POSTs cost ≈ 0.3 ms of CPU each
//! against the real API server). POSTs events, then GETs a Lease, through the
//! daemon's own `ApiClient` to the simulated API server over TLS (as a real API server speaks),
//! one call at a time as the executor makes them, and prints the calling thread's CPU time per
//! call and the TCP connections the server accepted.
//!
//! `cargo run --release --example unary_call_cost -- [CALLS] [PAUSE_MS]`
//! (defaults 2000 calls, 0 ms between them; the executor posts 5/s: try 200 ms too).

use std::time::{Duration, Instant};

use node_lifecycled::kube::{ApiClient, ClientSettings, Connection, ExplicitSettings};
use node_lifecycled::runtime::Clock;
use node_lifecycled_sim::{Resource, SimConfig, SimServer, SimTls, fixtures};
use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair};
use serde::de::IgnoredAny;

fn main() -> Result<(), String> {
    let mut args = std::env::args().skip(1);
    let calls: u64 = args
        .next()
        .map_or(Ok(2000), |a| a.parse())
        .map_err(|e| format!("CALLS: {e}"))?;
    let pause = Duration::from_millis(
        args.next()
            .map_or(Ok(0), |a| a.parse())
            .map_err(|e| format!("PAUSE_MS: {e}"))?,
    );

    let (ca_pem, cert_pem, key_pem) = pki();
    let sim = SimServer::start(SimConfig {
        tls: Some(SimTls {
            cert_chain_pem: cert_pem,
            private_key_pem: key_pem,
            client_ca_pem: None,
        }),
        ..SimConfig::default()
    })
    .map_err(|e| format!("simulator: {e}"))?;
    let cluster = sim.cluster();
    cluster
        .create(
            Resource::Leases,
            fixtures::node_lease("node-0", cluster.now()),
        )
        .map_err(|e| format!("lease: {}", e.message))?;
    let dir = std::env::temp_dir().join(format!("unary-call-cost-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let ca_path = dir.join("ca.pem");
    std::fs::write(&ca_path, ca_pem).map_err(|e| e.to_string())?;
    let connection = Connection::explicit(
        &ExplicitSettings {
            origin: dir.join("config.toml"),
            section: "kube".into(),
            server: sim.url().to_string(),
            certificate_authority: Some(ca_path),
            ..ExplicitSettings::default()
        },
        false,
    )
    .map_err(|e| e.to_string())?;
    let clock = Clock::start();
    let settings = ClientSettings {
        qps: None,
        ..ClientSettings::default()
    };
    let mut client = ApiClient::new(&connection, &settings, Box::new(move || clock.now()))
        .map_err(|e| e.to_string())?;

    let accepted_before = sim.accepted_connections();
    let (cpu, wall) = measure(calls, pause, |i| {
        let body = event_body(i);
        client
            .post::<IgnoredAny>("/api/v1/namespaces/default/events", body.as_bytes())
            .map(|_| ())
            .map_err(|e| e.to_string())
    })?;
    report(
        "POST event",
        calls,
        cpu,
        wall,
        sim.accepted_connections() - accepted_before,
    );

    let accepted_before = sim.accepted_connections();
    let (cpu, wall) = measure(calls, pause, |_| {
        client
            .get_bytes("/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/node-0")
            .map(|_| ())
            .map_err(|e| e.to_string())
    })?;
    report(
        "GET Lease",
        calls,
        cpu,
        wall,
        sim.accepted_connections() - accepted_before,
    );
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

fn measure(
    calls: u64,
    pause: Duration,
    mut call: impl FnMut(u64) -> Result<(), String>,
) -> Result<(Duration, Duration), String> {
    let mut cpu = Duration::ZERO;
    let started = Instant::now();
    for i in 0..calls {
        let before = thread_cpu_time();
        call(i)?;
        cpu += thread_cpu_time() - before;
        if !pause.is_zero() {
            std::thread::sleep(pause);
        }
    }
    Ok((cpu, started.elapsed()))
}

fn report(what: &str, calls: u64, cpu: Duration, wall: Duration, accepted: u64) {
    println!(
        "{what}: {calls} calls, {:.1} µs of client CPU per call, {accepted} TCP connections \
         accepted, {:.1} s",
        cpu.as_secs_f64() * 1e6 / calls.max(1) as f64,
        wall.as_secs_f64()
    );
}

/// An event as the daemon posts one at start-up (`RegisteredNode`, about 600 bytes).
fn event_body(i: u64) -> String {
    format!(
        r#"{{"apiVersion":"v1","kind":"Event","metadata":{{"name":"node-{i}.1800000000000000{i}","namespace":"default"}},"involvedObject":{{"kind":"Node","apiVersion":"v1","name":"node-{i}","uid":"6f1c9a4e-0000-4000-8000-{i:012}"}},"reason":"RegisteredNode","message":"Node node-{i} event: Registered Node node-{i} in Controller","source":{{"component":"node-controller"}},"firstTimestamp":"2026-01-01T00:00:00Z","lastTimestamp":"2026-01-01T00:00:00Z","count":1,"type":"Normal","reportingComponent":"node-controller","reportingInstance":""}}"#
    )
}

fn pki() -> (String, String, String) {
    let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params
        .distinguished_name
        .push(DnType::CommonName, "cost CA");
    let ca = CertifiedIssuer::self_signed(params, KeyPair::generate().expect("CA key"))
        .expect("CA certificate");
    let key = KeyPair::generate().expect("server key");
    let server = CertificateParams::new(vec!["127.0.0.1".to_string()]).expect("server params");
    let cert = server.signed_by(&key, &ca).expect("server certificate");
    (ca.pem(), cert.pem(), key.serialize_pem())
}

/// CPU time of the calling thread (the simulator's threads are not counted).
fn thread_cpu_time() -> Duration {
    #[repr(C)]
    struct Timespec {
        tv_sec: i64,
        tv_nsec: i64,
    }
    unsafe extern "C" {
        fn clock_gettime(clock: i32, tp: *mut Timespec) -> i32;
    }
    const CLOCK_THREAD_CPUTIME_ID: i32 = 3;
    let mut ts = Timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a live timespec the call fills in; the clock id is a Linux constant.
    let rc = unsafe { clock_gettime(CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return Duration::ZERO;
    }
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}
