//! CPU per decoded watch event, on real kube-apiserver 1.20 watch lines (a Lease renewal and a
//! Node status heartbeat, `crates/kube/src/decode/fixtures/watch_*.json`): the daemon's decoder, and
//! beside it serde_json merely crossing the same line (`IgnoredAny`: no field kept, nothing
//! allocated), the floor of any decoder built on serde_json.
//!
//! ```sh
//! cargo run --release --example decode_floor            # 5 rounds of 200,000 events per kind
//! cargo run --release --example decode_floor -- 50000
//! ```

use std::hint::black_box;
use std::time::Instant;

use serde::de::IgnoredAny;

use node_lifecycled::kube::decode::{Decode, DecodeContext, WatchEvent, decode_watch_event};
use node_lifecycled::model::{Lease, Node};

const NODE_EVENT: &str =
    include_str!("../crates/kube/src/decode/fixtures/watch_node_status_heartbeat.json");
const LEASE_EVENT: &str =
    include_str!("../crates/kube/src/decode/fixtures/watch_lease_renewal.json");

fn ns_per_event(n: u32, mut decode: impl FnMut()) -> f64 {
    for _ in 0..n / 10 {
        decode(); // warm caches and the interner
    }
    let start = Instant::now();
    for _ in 0..n {
        decode();
    }
    start.elapsed().as_nanos() as f64 / f64::from(n)
}

/// The fastest of five alternating rounds of each (the machine is shared: the minimum is the
/// figure least disturbed by others).
fn measure<T: Decode>(kind: &str, line: &str, n: u32) {
    let mut ctx = DecodeContext::new();
    let bytes = line.trim_end().as_bytes();
    let (mut decoded, mut crossed) = (f64::MAX, f64::MAX);
    for _ in 0..5 {
        decoded = decoded.min(ns_per_event(n, || {
            let event = decode_watch_event::<T>(black_box(bytes), &mut ctx).expect("decodes");
            assert!(matches!(event, WatchEvent::Modified(_)));
            black_box(event);
        }));
        crossed = crossed.min(ns_per_event(n, || {
            let _: IgnoredAny = serde_json::from_slice(black_box(bytes)).expect("valid JSON");
        }));
    }
    println!(
        "{kind:<5} event ({:>5} bytes): decoded in {decoded:>6.0} ns; serde_json crossing the line: {crossed:>6.0} ns ({:.0} % of the decode)",
        bytes.len(),
        100.0 * crossed / decoded
    );
}

fn main() {
    let n = std::env::args()
        .nth(1)
        .map(|a| a.parse().expect("the number of events per round"))
        .unwrap_or(200_000);
    measure::<Lease>("Lease", LEASE_EVENT, n);
    measure::<Node>("Node", NODE_EVENT, n);
}
