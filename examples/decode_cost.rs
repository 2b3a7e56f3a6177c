//! What decoding costs: nanoseconds per watch event, JSON line vs protobuf frame, for the objects
//! the kubelets send all day (a Node status heartbeat and a Lease renewal, as kube-apiserver
//! v1.20.2 serves them: the fixtures of `crates/kube/src/decode/fixtures/`); and,
//! against a running server, a whole `resourceVersion=0` LIST through our streamed decoder
//! asked as JSON and as protobuf (wall time, process CPU, bytes, items).
//!
//! ```sh
//! cargo run --release --example decode_cost
//! cargo run --release --example decode_cost -- list "$ADMIN_KUBECONFIG" '/api/v1/pods?resourceVersion=0'
//! ```

use std::hint::black_box;
use std::path::Path;
use std::time::{Duration, Instant};

use node_lifecycled::kube::decode::list_stream::ListStream;
use node_lifecycled::kube::decode::proto::{self, ContentType};
use node_lifecycled::kube::decode::{DecodeContext, decode_watch_event};
use node_lifecycled::kube::{ApiClient, ClientSettings, Connection};
use node_lifecycled::model::{Lease, Node, Pod};
use node_lifecycled::time::Time;

#[allow(
    dead_code,
    reason = "this example is given its objects enveloped; the pod and Lease examples envelope theirs"
)]
#[path = "support/proto_frames.rs"]
mod proto_frames;

const NODE_JSON: &[u8] =
    include_bytes!("../crates/kube/src/decode/fixtures/proto_node_worker.json");
const NODE_PB: &[u8] = include_bytes!("../crates/kube/src/decode/fixtures/proto_node_worker.pb");
const LEASE_JSON: &[u8] = include_bytes!("../crates/kube/src/decode/fixtures/proto_lease.json");
const LEASE_PB: &[u8] = include_bytes!("../crates/kube/src/decode/fixtures/proto_lease.pb");

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        None => {
            events::<Node>("Node status heartbeat", NODE_JSON, NODE_PB);
            events::<Lease>("Lease renewal", LEASE_JSON, LEASE_PB);
        }
        Some("list") if args.len() == 3 => list(Path::new(&args[1]), &args[2]),
        _ => {
            eprintln!("usage: decode_cost [list KUBECONFIG PATH]");
            std::process::exit(64);
        }
    }
}

/// A watch event as the API server writes it: a compact JSON line, or a protobuf frame's
/// WatchEvent {type=1, object=2 {raw=1: the enveloped object}}.
fn json_line(object: &[u8]) -> Vec<u8> {
    let object: serde_json::Value = serde_json::from_slice(object).unwrap();
    serde_json::to_vec(&serde_json::json!({"type": "MODIFIED", "object": object})).unwrap()
}

fn proto_frame(enveloped: &[u8]) -> Vec<u8> {
    proto_frames::watch_event(b"MODIFIED", enveloped)
}

fn per_event(mut decode: impl FnMut()) -> f64 {
    for _ in 0..2_000 {
        decode();
    }
    let n = 50_000;
    let start = Instant::now();
    for _ in 0..n {
        decode();
    }
    start.elapsed().as_nanos() as f64 / f64::from(n)
}

fn events<T: proto::ProtoWire>(what: &str, json: &[u8], pb: &[u8]) {
    let line = json_line(json);
    let frame = proto_frame(pb);
    let mut ctx = DecodeContext::new();
    let json_ns = per_event(|| {
        black_box(decode_watch_event::<T>(black_box(&line), &mut ctx).unwrap());
    });
    let proto_ns = per_event(|| {
        black_box(proto::decode_watch_event::<T>(black_box(&frame), &mut ctx).unwrap());
    });
    println!(
        "{what:<22} JSON {:>6} B {json_ns:>7.0} ns/event   protobuf {:>6} B {proto_ns:>7.0} ns/event   ({:.1}x)",
        line.len(),
        frame.len(),
        json_ns / proto_ns
    );
}

/// This process's user + system CPU time so far (Linux: /proc/self/stat, in clock ticks).
fn cpu_time() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let after_name = stat.rsplit(')').next().unwrap_or("");
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
    };
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after the name.
    Duration::from_millis((ticks(11) + ticks(12)) * 10)
}

fn list(kubeconfig: &Path, path: &str) {
    let connection = Connection::from_kubeconfig(kubeconfig, None, false)
        .unwrap_or_else(|e| panic!("{}: {e}", kubeconfig.display()));
    let clock = Instant::now();
    let settings = ClientSettings {
        qps: None,
        ..ClientSettings::default()
    };
    let mut client = ApiClient::new(
        &connection,
        &settings,
        Box::new(move || Time::from_unix_millis(clock.elapsed().as_millis() as u64)),
    )
    .unwrap();
    for content_type in [
        ContentType::Json,
        ContentType::Protobuf,
        ContentType::Json,
        ContentType::Protobuf,
    ] {
        let (wall, cpu) = (Instant::now(), cpu_time());
        let (answered, body) = client
            .get_streamed(path, Duration::from_secs(120), content_type.accept())
            .unwrap_or_else(|e| panic!("GET {path}: {e}"));
        let mut stream = if proto::is_protobuf(&answered) {
            ListStream::protobuf(body)
        } else {
            ListStream::new(body)
        };
        let mut ctx = DecodeContext::new();
        let mut items = 0;
        loop {
            let page = stream
                .next_batch::<Pod>(500, &mut ctx)
                .unwrap_or_else(|e| panic!("{e}"));
            items += page.items.len();
            assert!(page.skipped.is_empty(), "{:?}", page.skipped.first());
            if page.continue_token.is_none() {
                break;
            }
        }
        println!(
            "{:<8} answered {answered:<40} {items:>7} items {:>6} MiB  wall {:>6.2} s  our CPU {:>5.2} s",
            content_type.as_str(),
            stream.bytes() >> 20,
            wall.elapsed().as_secs_f64(),
            (cpu_time() - cpu).as_secs_f64()
        );
    }
}
