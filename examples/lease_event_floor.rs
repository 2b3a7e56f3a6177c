//! The busiest path of the daemon, against its floor: one Lease renewal, from the TLS bytes on
//! the socket to the store and the node's grace deadline. Every kubelet sends one every 10 s,
//! so at 15,000 nodes this path runs 1,500 times a second.
//!
//! The bytes are what kube-apiserver writes for a protobuf watch: a chunked HTTP response, a
//! length-prefixed `WatchEvent` frame per chunk, each Lease enveloped as the server encodes it
//! (the simulator's encoder, checked against kube-apiserver in the real-apiserver tests), under
//! TLS 1.3 with AES-128-GCM (rustls and ring, as the daemon uses them). The stream is encrypted
//! once, in memory, and then read several ways, each timed alone:
//!
//! 1. TLS: decrypt the records and copy the plaintext out. Nothing can read the event for less:
//!    this is the floor of the transport.
//! 2. floor: TLS, then a scan of each frame for the two fields a renewal needs (the Lease's name
//!    and its renewTime) and one store of an integer into a slot found by a hash of the name.
//!    What any program must do with these bytes, and nothing else.
//! 3. daemon, framing: TLS, then the daemon's response decoder (HTTP head, chunks, frames).
//! 4. daemon, decode: also the protobuf decode into the compact `Lease` (interned name).
//! 5. daemon, whole: also `Controllers::handle(LeaseUpsert)`: the store, the probe time and the
//!    deadline lanes, as the event loop calls it.
//!
//! ```sh
//! cargo run --release --example lease_event_floor                  # 5,000 nodes, 4 rounds
//! cargo run --release --example lease_event_floor -- --nodes 15000 --renewals 20
//! # one stage's instructions per event (divide by the renewals × nodes it prints):
//! valgrind --tool=callgrind --toggle-collect='lease_event_floor::decrypt*' \
//!   target/release/examples/lease_event_floor --nodes 5000 --renewals 2 --rounds 1 --stage 5
//! ```
//!
//! Each figure is the fastest of its rounds (the machine is shared: the minimum is the figure
//! others disturbed least), in nanoseconds of wall time per event on one thread. Stages 3-5
//! also print the allocations they made per event (a counting allocator: no load moves it).

use std::collections::HashMap;
use std::hint::black_box;
use std::io::{Read, Write};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use node_lifecycled::controller::{Controllers, Input, Settings};
use node_lifecycled::kube::decode::proto;
use node_lifecycled::kube::decode::{DecodeContext, decode_object};
use node_lifecycled::kube::watch::{ResponseDecoder, WatchItem};
use node_lifecycled::model::{Kind, Lease, Node};
use node_lifecycled::time::Time;
use node_lifecycled_sim::Resource;
// The floor's reading of a frame: the one the bench's floor reader uses on the live stream.
use node_lifecycled_sim::bench::floor_reader::name_and_renewal;
use node_lifecycled_sim::protobuf_message as encode_object;
use node_lifecycled_sim::testing::{CountingAlloc, allocations_made as allocations};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName};
use serde_json::json;

#[path = "support/flags.rs"]
mod flags;
#[path = "support/proto_frames.rs"]
mod proto_frames;

/// Allocations made (not live: every `alloc` and `realloc`), so that each stage can say how
/// many a renewal costs: each is a call into malloc and, at the end of the object's life, into
/// free (callgrind counts both in the stage's instructions).
#[global_allocator]
static GLOBAL: CountingAlloc = CountingAlloc::new();

struct Args {
    nodes: usize,
    renewals: usize,
    rounds: usize,
    /// Only this stage (1-5), e.g. under callgrind: `--toggle-collect` on `decrypt` then counts
    /// that stage's instructions alone.
    stage: Option<usize>,
    /// Run cold: after every this many events, sweep a buffer larger than the caches (its time
    /// is not counted), as the daemon's caches are after a 50 ms sleep beside other processes.
    cold: Option<usize>,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        nodes: 5000,
        renewals: 10,
        rounds: 4,
        stage: None,
        cold: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || flags::number(&flag, it.next());
        match flag.as_str() {
            "--nodes" => args.nodes = value()?,
            "--renewals" => args.renewals = value()?,
            "--rounds" => args.rounds = value()?,
            "--stage" => args.stage = flags::stage(it.next(), 5)?,
            "--cold" => args.cold = Some(value()?).filter(|n| *n > 0),
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    if args.nodes == 0 || args.renewals == 0 || args.rounds == 0 {
        return Err("--nodes, --renewals and --rounds must be positive".into());
    }
    Ok(args)
}

const RENEW: Duration = Duration::from_secs(10);

/// What `--cold` does between wake-ups: the caches are emptied of the daemon's lines by a sweep
/// over a buffer larger than the last-level cache, a write per cache line (what the simulator,
/// the kernel and anything else on the host do to them while the daemon sleeps). The sweep's
/// own time is kept apart and taken out of the figure.
struct Evictor {
    every: usize,
    events: usize,
    buffer: Vec<u8>,
    spent: Duration,
}

impl Evictor {
    /// 64 MiB: several times the last-level cache of the machines we measure on.
    const BYTES: usize = 64 << 20;

    fn new(every: Option<usize>) -> Evictor {
        Evictor {
            every: every.unwrap_or(0),
            events: 0,
            buffer: if every.is_some() {
                vec![1u8; Evictor::BYTES]
            } else {
                Vec::new()
            },
            spent: Duration::ZERO,
        }
    }

    /// One event done; every `every` events, the caches go cold.
    fn event(&mut self) {
        self.events += 1;
        if self.every == 0 || self.events % self.every != 0 {
            return;
        }
        let start = Instant::now();
        for line in self.buffer.chunks_mut(64) {
            line[0] = line[0].wrapping_add(1);
        }
        black_box(&self.buffer);
        self.spent += start.elapsed();
    }
}

fn node_name(i: usize) -> String {
    format!("node-{i:05}")
}

/// The renewal `k` of node `i`: renewTime at t0 + k renew intervals + the node's phase.
fn renew_time(t0: Time, nodes: usize, i: usize, k: usize) -> Time {
    t0 + RENEW * k as u32 + RENEW.mul_f64(i as f64 / nodes as f64)
}

fn lease_object(i: usize, rv: u64, renew: Time) -> serde_json::Value {
    let name = node_name(i);
    json!({
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {
            "name": name,
            "namespace": "kube-node-lease",
            "uid": format!("lease-uid-{i}"),
            "resourceVersion": rv.to_string(),
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": name,
                                 "uid": format!("node-uid-{i}")}]
        },
        "spec": {
            "holderIdentity": name,
            "leaseDurationSeconds": 40,
            "renewTime": renew.to_rfc3339_micros()
        }
    })
}

/// A Lease as kube-apiserver writes it in protobuf.
fn envelope(message: &[u8]) -> Vec<u8> {
    proto_frames::envelope(b"coordination.k8s.io/v1", b"Lease", message)
}

/// A watch frame as kube-apiserver streams it: a 4-byte big-endian length, then
/// `WatchEvent {type: "MODIFIED", object: RawExtension {raw: the enveloped Lease}}`.
fn watch_frame(enveloped: &[u8]) -> Vec<u8> {
    let event = proto_frames::watch_event(b"MODIFIED", enveloped);
    let mut frame = (event.len() as u32).to_be_bytes().to_vec();
    frame.extend_from_slice(&event);
    frame
}

/// The plaintext of the watch response: its head, then one chunk per event.
fn response(frames: &[Vec<u8>]) -> Vec<u8> {
    let mut out = b"HTTP/1.1 200 OK\r\nContent-Type: application/vnd.kubernetes.protobuf;stream=watch\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
    for frame in frames {
        let _ = write!(out, "{:x}\r\n", frame.len());
        out.extend_from_slice(frame);
        out.extend_from_slice(b"\r\n");
    }
    out
}

/// A TLS 1.3 connection set up in memory, the server's side already written: the client's
/// connection and the ciphertext of `plaintext` it has yet to read.
fn encrypted(plaintext: &[u8]) -> (rustls::ClientConnection, Vec<u8>) {
    let cert = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).expect("cert");
    let cert_der = CertificateDer::from(cert.cert.der().to_vec());
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(cert.signing_key.serialize_der()));
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let server_config = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .expect("protocols")
        .with_no_client_auth()
        .with_single_cert(vec![cert_der.clone()], key)
        .expect("server config");
    let mut roots = rustls::RootCertStore::empty();
    roots.add(cert_der).expect("root");
    let client_config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("protocols")
        .with_root_certificates(roots)
        .with_no_client_auth();
    let name = ServerName::try_from("localhost").expect("name");
    let mut client = rustls::ClientConnection::new(Arc::new(client_config), name).expect("client");
    let mut server = rustls::ServerConnection::new(Arc::new(server_config)).expect("server");
    // The handshake, byte for byte between the two in memory.
    while client.is_handshaking() || server.is_handshaking() {
        let mut wire = Vec::new();
        client.write_tls(&mut wire).expect("client writes");
        server.read_tls(&mut wire.as_slice()).expect("server reads");
        server.process_new_packets().expect("server processes");
        let mut wire = Vec::new();
        server.write_tls(&mut wire).expect("server writes");
        client.read_tls(&mut wire.as_slice()).expect("client reads");
        client.process_new_packets().expect("client processes");
    }
    let mut ciphertext = Vec::new();
    for chunk in plaintext.chunks(16 * 1024) {
        server.writer().write_all(chunk).expect("server encrypts");
        while server.wants_write() {
            server.write_tls(&mut ciphertext).expect("server writes");
        }
    }
    (client, ciphertext)
}

/// Reads all of `ciphertext` through `client` in socket-sized reads, handing each piece of
/// plaintext to `sink`, as the daemon's watch stream does (64 KiB reads). Never inlined, so
/// callgrind can count it alone (`--toggle-collect`).
#[inline(never)]
fn decrypt(
    client: &mut rustls::ClientConnection,
    ciphertext: &[u8],
    plain: &mut [u8],
    mut sink: impl FnMut(&[u8]),
) {
    for piece in ciphertext.chunks(64 * 1024) {
        let mut piece = piece;
        while !piece.is_empty() {
            client.read_tls(&mut piece).expect("client reads");
            client.process_new_packets().expect("records decrypt");
            loop {
                match client.reader().read(plain) {
                    Ok(0) => break,
                    Ok(n) => sink(&plain[..n]),
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                    Err(e) => panic!("plaintext: {e}"),
                }
            }
        }
    }
}

/// Controllers with `nodes` healthy nodes and their Leases, synced, leading; `ctx` holds
/// their names afterwards, as the daemon's does after its initial sync.
fn controllers(nodes: usize, t0: Time, ctx: &mut DecodeContext) -> Controllers {
    let mut ctl = Controllers::new(Settings::default(), t0);
    for kind in [Kind::Nodes, Kind::Leases, Kind::Pods] {
        ctl.handle(Input::FullStateBegin(kind), t0);
        for i in 0..nodes {
            let name = node_name(i);
            match kind {
                Kind::Nodes => {
                    let since = t0.to_rfc3339();
                    let text = json!({
                        "metadata": {"name": name, "uid": format!("node-uid-{i}"),
                                     "resourceVersion": "1", "creationTimestamp": since,
                                     "labels": {"topology.kubernetes.io/zone": format!("z{}", i % 3),
                                                "topology.kubernetes.io/region": "r"}},
                        "status": {"conditions": [{"type": "Ready", "status": "True",
                                   "lastHeartbeatTime": since, "lastTransitionTime": since}]}
                    })
                    .to_string();
                    let node: Node = decode_object(text.as_bytes(), ctx).expect("node");
                    ctl.handle(Input::NodeUpsert(node), t0);
                }
                Kind::Leases => {
                    let text = lease_object(i, 1, t0).to_string();
                    let lease: Lease = decode_object(text.as_bytes(), ctx).expect("lease");
                    ctl.handle(Input::LeaseUpsert(lease), t0);
                }
                _ => {}
            }
        }
        ctl.handle(Input::FullStateEnd(kind), t0);
    }
    ctl.handle(Input::InformersWatching(Some(Duration::ZERO)), t0);
    ctl.handle(Input::InitialSyncDone, t0);
    ctl.take_decisions();
    ctl
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!(
                "lease_event_floor: {e}\nusage: lease_event_floor [--nodes N] [--renewals K] [--rounds R] [--stage 1-5] [--cold EVENTS]"
            );
            return ExitCode::from(2);
        }
    };
    let t0 = Time::from_unix_millis(1_800_000_000_000);
    let mut frames = Vec::with_capacity(args.nodes * args.renewals);
    let mut rv = 10u64;
    // Renewals in the order the kubelets send them: every node once per interval, by phase.
    for k in 1..=args.renewals {
        for i in 0..args.nodes {
            rv += 1;
            let object = lease_object(i, rv, renew_time(t0, args.nodes, i, k));
            let message = encode_object(Resource::Leases, &object).expect("lease encodes");
            let enveloped = envelope(&message);
            frames.push(watch_frame(&enveloped));
        }
    }
    let events = frames.len();
    let plaintext = response(&frames);
    println!(
        "{} renewals of {} Leases: {:.1} MB of plaintext, {} bytes per event on average",
        events,
        args.nodes,
        plaintext.len() as f64 / 1e6,
        plaintext.len() / events
    );
    drop(frames);

    let mut plain = vec![0u8; 64 * 1024];
    let per_event = |d: Duration| d.as_nanos() as f64 / events as f64;
    let mut best = [f64::MAX; 5];
    // Allocations per event in each stage's timed part (the same in every round).
    let mut allocs = [f64::NAN; 5];
    let run = |stage: usize| args.stage.is_none_or(|s| s == stage);
    for round in 0..args.rounds {
        // 1. TLS only.
        if run(1) {
            let (mut client, ciphertext) = encrypted(&plaintext);
            let mut bytes = 0usize;
            let start = Instant::now();
            decrypt(&mut client, &ciphertext, &mut plain, |p| bytes += p.len());
            best[0] = best[0].min(per_event(start.elapsed()));
            assert_eq!(bytes, plaintext.len());
        }

        // 2. The floor: TLS, the frames found by their lengths, two fields read, one slot set.
        if run(2) {
            let (mut client, ciphertext) = encrypted(&plaintext);
            let mut slots: HashMap<Vec<u8>, u64> = (0..args.nodes)
                .map(|i| (node_name(i).into_bytes(), 0))
                .collect();
            let mut carry: Vec<u8> = Vec::new();
            let (mut seen, mut in_body) = (0usize, false);
            let mut cold = Evictor::new(args.cold);
            let start = Instant::now();
            decrypt(&mut client, &ciphertext, &mut plain, |p| {
                carry.extend_from_slice(p);
                let mut at = 0;
                if !in_body {
                    let Some(head) = carry.windows(4).position(|w| w == b"\r\n\r\n") else {
                        return;
                    };
                    (at, in_body) = (head + 4, true);
                }
                // Chunks: a hex size line, the frame, CRLF.
                loop {
                    let rest = &carry[at..];
                    let Some(line_end) = rest.iter().position(|&b| b == b'\n') else {
                        break;
                    };
                    let hex = &rest[..line_end.saturating_sub(1)];
                    let size = hex.iter().try_fold(0usize, |n, &c| {
                        Some(n * 16 + (c as char).to_digit(16)? as usize)
                    });
                    let Some(size) = size else { break };
                    let start = line_end + 1;
                    if rest.len() < start + size + 2 {
                        break;
                    }
                    let event = &rest[start + 4..start + size];
                    if let Some((name, seconds)) = name_and_renewal(event)
                        && let Some(slot) = slots.get_mut(name)
                    {
                        *slot = seconds;
                    }
                    seen += 1;
                    cold.event();
                    at += start + size + 2;
                }
                carry.drain(..at);
            });
            best[1] = best[1].min(per_event(start.elapsed() - cold.spent));
            assert_eq!(seen, events, "the floor read every event");
            black_box(&slots);
        }

        // 3-5. The daemon's path, a stage more each time.
        for (stage, best) in best.iter_mut().enumerate().skip(2) {
            if !run(stage + 1) {
                continue;
            }
            let (mut client, ciphertext) = encrypted(&plaintext);
            // The decoder's context holds the names from the initial sync (the daemon's
            // interns a renewal's name by a lookup, not an insertion), whichever the stage.
            let mut ctx = DecodeContext::new();
            let ctl = controllers(args.nodes, t0, &mut ctx);
            let mut ctl = (stage == 4).then_some(ctl);
            let mut decoder = ResponseDecoder::new(1 << 20);
            let mut items = Vec::new();
            let mut seen = 0usize;
            let mut now = t0;
            let mut cold = Evictor::new(args.cold);
            let made = allocations();
            let start = Instant::now();
            decrypt(&mut client, &ciphertext, &mut plain, |p| {
                // As the stream does at each read: the last read's frames have been read.
                decoder.release_frames();
                decoder.feed(p, &mut items);
                for item in items.drain(..) {
                    let WatchItem::Frame(span) = item else {
                        panic!("not a frame: {item:?}");
                    };
                    let frame = decoder.frame(&span).expect("a frame of this read");
                    seen += 1;
                    cold.event();
                    if stage == 2 {
                        black_box(frame);
                        continue;
                    }
                    let event =
                        proto::decode_watch_event::<Lease>(frame, &mut ctx).expect("decodes");
                    let Some(ctl) = ctl.as_mut() else {
                        black_box(event);
                        continue;
                    };
                    if let node_lifecycled::kube::decode::WatchEvent::Modified(lease) = event {
                        now = now.max(lease.renew_time.unwrap_or(now));
                        let actions = ctl.handle(Input::LeaseUpsert(lease), now);
                        black_box(actions);
                    }
                }
            });
            *best = best.min(per_event(start.elapsed() - cold.spent));
            allocs[stage] = (allocations() - made) as f64 / events as f64;
            assert_eq!(seen, events, "stage {stage} read every event");
        }
        eprintln!("round {} of {} done", round + 1, args.rounds);
    }
    let labels = [
        "1. TLS: decrypt and copy out",
        "2. floor: TLS + two fields + one slot",
        "3. daemon: TLS + HTTP chunks + frames",
        "4. daemon: + protobuf decode (interned)",
        "5. daemon: + store and deadline lanes",
    ];
    for ((label, ns), allocs) in labels.iter().zip(best).zip(allocs) {
        if ns == f64::MAX {
            continue;
        }
        if allocs.is_nan() {
            println!("{label:<44} {ns:>8.0} ns/event");
        } else {
            println!("{label:<44} {ns:>8.0} ns/event {allocs:>6.3} allocations/event");
        }
    }
    if args.stage.is_some() {
        return ExitCode::SUCCESS;
    }
    println!(
        "gap to the floor: {:.0} ns/event ({:.1}x the floor; TLS alone is {:.0} % of the floor)",
        best[4] - best[1],
        best[4] / best[1],
        100.0 * best[0] / best[1]
    );
    ExitCode::SUCCESS
}
