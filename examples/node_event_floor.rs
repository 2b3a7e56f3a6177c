//! One node status watch event of a real-size Node, from the watch response's bytes to the
//! store: what a kubelet's status heartbeat costs the daemon (the Lease's is
//! `lease_event_floor.rs`).
//!
//! The Node is `crates/kube/src/decode/fixtures/proto_node_worker.pb`: kube-apiserver v1.20.2's own
//! protobuf of a node made by `scripts/real-apiserver/load.py`'s `node_obj` (~5 KB: 11
//! labels, 4 annotations, 4 conditions, addresses, capacity, nodeInfo, 8 images, one
//! managedFields entry). Node `i` is that object with its name (and the hostname label and
//! address, the same text) replaced by `node-{i:05}`; each event then changes only what the
//! kubelet's status patch changes (`heartbeat` in load.py: every condition's
//! lastHeartbeatTime), and what the server changes with it (the resourceVersion, the
//! managedFields entry's time). The frames are made by rewriting the fixture's protobuf along
//! those fields' paths, so every other byte is the server's.
//!
//! Stages, each timed alone over the same plaintext response (chunked HTTP, a
//! length-prefixed `WatchEvent` per chunk, as the API server streams a protobuf watch):
//!
//! 1. framing: the daemon's response decoder (HTTP head, chunks, frames);
//! 2. decode: also the protobuf decode into the compact `Node` (a warm `DecodeContext`, as
//!    after the initial sync);
//! 3. handle: also `Controllers::handle(NodeUpsert)` on a store of `--nodes` synced nodes
//!    with their Leases.
//!
//! ```sh
//! cargo run --release --example node_event_floor                  # 2,000 nodes, 4 rounds
//! # one stage's instructions per event (divide by the events it prints):
//! valgrind --tool=callgrind --toggle-collect='node_event_floor::events_through*' \
//!   target/release/examples/node_event_floor --nodes 2000 --beats 2 --rounds 1 --stage 3
//! ```
//!
//! Wall figures are the fastest of the rounds, in ns per event on one thread; allocations per
//! event are counted by a counting allocator (they do not depend on the load).

use std::hint::black_box;
use std::io::Write;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use node_lifecycled::controller::{Controllers, Input, Settings};
use node_lifecycled::kube::decode::proto;
use node_lifecycled::kube::decode::{DecodeContext, WatchEvent, decode_object};
use node_lifecycled::kube::watch::{ResponseDecoder, WatchItem};
use node_lifecycled::model::{Kind, Lease, Node};
use node_lifecycled::time::Time;
use node_lifecycled_sim::testing::{CountingAlloc, allocations_made};

#[path = "support/flags.rs"]
mod flags;
#[path = "support/proto_frames.rs"]
mod proto_frames;

/// Every allocation of the process, counted (frees are not: the figure is allocations made).
#[global_allocator]
static GLOBAL: CountingAlloc = CountingAlloc::new();

const NODE_PB: &[u8] = include_bytes!("../crates/kube/src/decode/fixtures/proto_node_worker.pb");
/// The fixture's node name, replaced by each node's (the same length).
const FIXTURE_NAME: &[u8] = b"node-00000";
/// The kubelets' status period here: often enough that the heartbeats alone keep every node
/// healthy (the Leases are not renewed in this example).
const BEAT: Duration = Duration::from_secs(10);

struct Args {
    nodes: usize,
    beats: usize,
    rounds: usize,
    stage: Option<usize>,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        nodes: 2000,
        beats: 5,
        rounds: 4,
        stage: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || flags::number(&flag, it.next());
        match flag.as_str() {
            "--nodes" => args.nodes = value()?,
            "--beats" => args.beats = value()?,
            "--rounds" => args.rounds = value()?,
            "--stage" => args.stage = flags::stage(it.next(), 3)?,
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    if args.nodes == 0 || args.nodes > 100_000 || args.beats == 0 || args.rounds == 0 {
        return Err("--nodes (at most 100000), --beats and --rounds must be positive".into());
    }
    Ok(args)
}

// ---- protobuf rewriting ----------------------------------------------------------------------

fn varint(b: &[u8], at: &mut usize) -> u64 {
    let mut v = 0u64;
    for i in 0..10 {
        let byte = b[*at];
        *at += 1;
        v |= u64::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            break;
        }
    }
    v
}

/// `message` with every length-delimited field at `path` (field numbers, outermost first)
/// replaced by `edit` of its bytes; everything else copied as it was.
fn rewrite(message: &[u8], path: &[u64], edit: &mut dyn FnMut(&[u8]) -> Vec<u8>) -> Vec<u8> {
    let mut out = Vec::with_capacity(message.len() + 16);
    let mut at = 0;
    while at < message.len() {
        let start = at;
        let key = varint(message, &mut at);
        match key & 7 {
            0 => {
                varint(message, &mut at);
            }
            1 => at += 8,
            5 => at += 4,
            2 => {
                let len = varint(message, &mut at) as usize;
                let content = &message[at..at + len];
                at += len;
                if key >> 3 == path[0] {
                    let new = if path.len() == 1 {
                        edit(content)
                    } else {
                        rewrite(content, &path[1..], edit)
                    };
                    proto_frames::put_varint(key, &mut out);
                    proto_frames::put_varint(new.len() as u64, &mut out);
                    out.extend_from_slice(&new);
                    continue;
                }
            }
            other => panic!("wire type {other} in the fixture"),
        }
        out.extend_from_slice(&message[start..at]);
    }
    out
}

/// A `metav1.Time` message of `seconds`, as kube-apiserver writes it: the seconds, then the
/// nanos even when 0 (`10 00`, as in the fixture's own times).
fn time_message(seconds: u64) -> Vec<u8> {
    let mut out = vec![0x08];
    proto_frames::put_varint(seconds, &mut out);
    out.extend_from_slice(&[0x10, 0x00]);
    out
}

/// Node `i`'s object at resourceVersion `rv`, its conditions' heartbeats (and the
/// managedFields entry's time, which the server stamps on the kubelet's patch) at `beat`.
fn node_message(node: &[u8], rv: u64, beat: u64) -> Vec<u8> {
    // ObjectMeta: resourceVersion 6, managedFields 17 → ManagedFieldsEntry.time 4.
    let m = rewrite(node, &[1, 6], &mut |_| rv.to_string().into_bytes());
    let m = rewrite(&m, &[1, 17, 4], &mut |_| time_message(beat));
    // NodeStatus.conditions 4 → NodeCondition.lastHeartbeatTime 3.
    rewrite(&m, &[3, 4, 3], &mut |_| time_message(beat))
}

/// The fixture's Node message (inside `k8s\0` + `runtime.Unknown`, field 2), renamed.
fn fixture_node(i: usize) -> Vec<u8> {
    let mut unknown = NODE_PB[4..].to_vec();
    let name = format!("node-{i:05}");
    for at in 0..unknown.len().saturating_sub(FIXTURE_NAME.len() - 1) {
        if unknown[at..].starts_with(FIXTURE_NAME) {
            unknown[at..at + FIXTURE_NAME.len()].copy_from_slice(name.as_bytes());
        }
    }
    let mut node = None;
    rewrite(&unknown, &[2], &mut |raw| {
        node = Some(raw.to_vec());
        raw.to_vec()
    });
    node.expect("the fixture holds a Node")
}

fn watch_frame(kind: &[u8], node: &[u8]) -> Vec<u8> {
    let enveloped = proto_frames::envelope(b"v1", b"Node", node);
    let event = proto_frames::watch_event(kind, &enveloped);
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

/// Controllers with `frames`' nodes (their first version) and a fresh Lease each, synced and
/// leading at `t0`; `ctx` holds their names and texts afterwards, as the daemon's does.
fn controllers(first: &[Vec<u8>], t0: Time, ctx: &mut DecodeContext) -> Controllers {
    let mut ctl = Controllers::new(Settings::default(), t0);
    ctl.handle(Input::FullStateBegin(Kind::Nodes), t0);
    for frame in first {
        match proto::decode_watch_event::<Node>(&frame[4..], ctx).expect("node decodes") {
            WatchEvent::Added(node) => {
                ctl.handle(Input::NodeUpsert(node), t0);
            }
            _ => panic!("not an ADDED event"),
        }
    }
    ctl.handle(Input::FullStateEnd(Kind::Nodes), t0);
    ctl.handle(Input::FullStateBegin(Kind::Leases), t0);
    for i in 0..first.len() {
        let text = serde_json::json!({
            "metadata": {"name": format!("node-{i:05}"), "namespace": "kube-node-lease",
                         "resourceVersion": "1"},
            "spec": {"holderIdentity": format!("node-{i:05}"), "leaseDurationSeconds": 40,
                     "renewTime": t0.to_rfc3339_micros()}
        })
        .to_string();
        let lease: Lease = decode_object(text.as_bytes(), ctx).expect("lease");
        ctl.handle(Input::LeaseUpsert(lease), t0);
    }
    ctl.handle(Input::FullStateEnd(Kind::Leases), t0);
    ctl.handle(Input::FullStateBegin(Kind::Pods), t0);
    ctl.handle(Input::FullStateEnd(Kind::Pods), t0);
    ctl.handle(Input::InformersWatching(Some(Duration::ZERO)), t0);
    ctl.handle(Input::InitialSyncDone, t0);
    ctl.take_decisions();
    ctl
}

/// What one stage did: events read, actions decided, allocations made.
#[derive(Default)]
struct Outcome {
    events: usize,
    actions: usize,
    allocations: u64,
}

/// The daemon's path through `stage` over the whole response, in 64 KiB reads as the watch
/// stream reads the socket. Never inlined, so callgrind can count it alone.
#[inline(never)]
fn events_through(
    stage: usize,
    plaintext: &[u8],
    ctx: &mut DecodeContext,
    mut ctl: Option<&mut Controllers>,
) -> Outcome {
    let mut decoder = ResponseDecoder::new(1 << 20);
    let mut items = Vec::new();
    let mut out = Outcome::default();
    let allocations = allocations_made();
    for piece in plaintext.chunks(64 * 1024) {
        // As the stream does at each read: the last read's frames have been read.
        decoder.release_frames();
        decoder.feed(piece, &mut items);
        for item in items.drain(..) {
            let WatchItem::Frame(span) = item else {
                panic!("not a frame: {item:?}");
            };
            let frame = decoder.frame(&span).expect("a frame of this read");
            out.events += 1;
            if stage == 1 {
                black_box(frame);
                continue;
            }
            let event = proto::decode_watch_event::<Node>(frame, ctx).expect("decodes");
            let Some(ctl) = ctl.as_deref_mut() else {
                black_box(event);
                continue;
            };
            let WatchEvent::Modified(node) = event else {
                panic!("not a MODIFIED event");
            };
            let now = node
                .ready()
                .and_then(|c| c.last_heartbeat_time)
                .expect("a heartbeat");
            out.actions += black_box(ctl.handle(Input::NodeUpsert(node), now)).len();
        }
    }
    out.allocations = allocations_made() - allocations;
    out
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!(
                "node_event_floor: {e}\nusage: node_event_floor [--nodes N] [--beats K] [--rounds R] [--stage 1-3]"
            );
            return ExitCode::from(2);
        }
    };
    let nodes: Vec<Vec<u8>> = (0..args.nodes).map(fixture_node).collect();
    // The fixture's own heartbeat second: the kubelets beat from there on.
    let t0 = Time::parse_rfc3339("2026-11-23T18:11:24Z").expect("t0");
    let t0_seconds = t0.as_unix_millis() / 1000;
    let phase = |i: usize| (i * BEAT.as_secs() as usize / args.nodes) as u64;
    let mut rv = 1_000_000u64;
    let first: Vec<Vec<u8>> = nodes
        .iter()
        .map(|n| watch_frame(b"ADDED", &node_message(n, rv, t0_seconds)))
        .collect();
    let mut frames = Vec::with_capacity(args.nodes * args.beats);
    for k in 1..=args.beats as u64 {
        for (i, node) in nodes.iter().enumerate() {
            rv += 1;
            let beat = t0_seconds + k * BEAT.as_secs() + phase(i);
            frames.push(watch_frame(b"MODIFIED", &node_message(node, rv, beat)));
        }
    }
    let events = frames.len();
    let plaintext = response(&frames);
    println!(
        "{events} status heartbeats of {} Nodes: {:.1} MB of plaintext, {} bytes per event on average",
        args.nodes,
        plaintext.len() as f64 / 1e6,
        plaintext.len() / events
    );
    drop(frames);

    let mut best = [f64::MAX; 3];
    let mut allocations = [0f64; 3];
    let mut actions = 0;
    for round in 0..args.rounds {
        for stage in 1..=3 {
            if args.stage.is_some_and(|s| s != stage) {
                continue;
            }
            let mut ctx = DecodeContext::new();
            let mut ctl = controllers(&first, t0, &mut ctx);
            let start = Instant::now();
            let done = events_through(
                stage,
                &plaintext,
                &mut ctx,
                (stage == 3).then_some(&mut ctl),
            );
            let ns = start.elapsed().as_nanos() as f64 / events as f64;
            assert_eq!(done.events, events, "stage {stage} read every event");
            best[stage - 1] = best[stage - 1].min(ns);
            allocations[stage - 1] = done.allocations as f64 / events as f64;
            actions = actions.max(done.actions);
        }
        eprintln!("round {} of {} done", round + 1, args.rounds);
    }
    let labels = [
        "1. framing: HTTP chunks + frames",
        "2. + protobuf decode into the Node",
        "3. + Controllers::handle(NodeUpsert)",
    ];
    for (stage, label) in labels.iter().enumerate() {
        if best[stage] == f64::MAX {
            continue;
        }
        println!(
            "{label:<40} {:>8.0} ns/event {:>6.2} allocations/event",
            best[stage], allocations[stage]
        );
    }
    println!("actions decided over the events: {actions}");
    ExitCode::SUCCESS
}
