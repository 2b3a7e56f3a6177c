//! Tests of one watch response's decoder: protobuf frames, clean and broken ends, refusals, and
//! the properties over streams split at random and random garbage.

use super::*;
use crate::time::Rng;
use crate::watch::chunked::encode_chunks;

const HEAD: &[u8] =
    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n";

/// kube-apiserver v1.20.2's answer to a protobuf watch from a compacted version: one
/// frame, an ERROR event with a 410 Status.
const EXPIRED_FRAME: &[u8] = include_bytes!("../decode/fixtures/proto_watch_expired.bin");

#[test]
fn a_protobuf_watch_body_is_cut_into_frames_as_the_content_type_says() {
    let head = b"HTTP/1.1 200 OK\r\nContent-Type: application/vnd.kubernetes.protobuf;stream=watch\r\nTransfer-Encoding: chunked\r\n\r\n";
    let mut body = EXPIRED_FRAME.to_vec();
    body.extend_from_slice(EXPIRED_FRAME);
    let mut wire = head.to_vec();
    encode_chunks(&body, 7, &mut wire);
    wire.extend_from_slice(b"0\r\n\r\n");
    let mut d = ResponseDecoder::new(1 << 20);
    let mut out = Vec::new();
    for piece in wire.chunks(5) {
        d.feed(piece, &mut out);
    }
    let frames: Vec<&[u8]> = out
        .iter()
        .filter_map(|item| match item {
            WatchItem::Frame(span) => d.frame(span),
            _ => None,
        })
        .collect();
    assert_eq!(frames, vec![&EXPIRED_FRAME[4..], &EXPIRED_FRAME[4..]]);
    assert_eq!(out.len(), 3, "{out:?}");
    assert_eq!(out[2], WatchItem::Ended(StreamEnd::Clean));
    // Read after the stream's end, as the informer does; refused once released.
    let WatchItem::Frame(first) = &out[0] else {
        panic!("{out:?}")
    };
    d.release_frames();
    assert_eq!(d.frame(first), None);
}

#[test]
fn a_protobuf_watch_body_ending_inside_a_frame_is_broken() {
    let head = b"HTTP/1.1 200 OK\r\nContent-Type: application/vnd.kubernetes.protobuf;stream=watch\r\nTransfer-Encoding: chunked\r\n\r\n";
    let mut wire = head.to_vec();
    encode_chunks(&EXPIRED_FRAME[..20], 7, &mut wire);
    wire.extend_from_slice(b"0\r\n\r\n");
    let mut d = ResponseDecoder::new(1 << 20);
    let mut out = Vec::new();
    d.feed(&wire, &mut out);
    assert!(
        matches!(&out[..], [WatchItem::Ended(StreamEnd::Broken(_))]),
        "{out:?}"
    );
}

#[test]
fn a_refusal_in_protobuf_gives_the_status_message() {
    // The Status envelope inside the frame (after its type and RawExtension headers).
    let status = &EXPIRED_FRAME[15..];
    let wire = format!(
        "HTTP/1.1 410 Gone\r\nContent-Type: application/vnd.kubernetes.protobuf\r\nContent-Length: {}\r\n\r\n",
        status.len()
    );
    let mut wire = wire.into_bytes();
    wire.extend_from_slice(status);
    let mut d = ResponseDecoder::new(1 << 20);
    let mut out = Vec::new();
    d.feed(&wire, &mut out);
    let [WatchItem::Ended(StreamEnd::Rejected { status, message })] = &out[..] else {
        panic!("{out:?}");
    };
    assert_eq!(*status, 410);
    assert!(message.starts_with("too old resource version"), "{message}");
}

fn event(i: usize) -> String {
    format!(
        "{{\"type\":\"MODIFIED\",\"object\":{{\"metadata\":{{\"name\":\"n{i}\",\"resourceVersion\":\"{i}\"}}}}}}"
    )
}

/// A watch body as the API server writes it: one chunk per event line.
fn watch_response(events: &[String], end: bool) -> Vec<u8> {
    let mut out = HEAD.to_vec();
    for e in events {
        encode_chunks(format!("{e}\n").as_bytes(), usize::MAX, &mut out);
    }
    if end {
        out.extend_from_slice(b"0\r\n\r\n");
    }
    out
}

fn run(stream: &[u8], steps: &mut dyn FnMut() -> usize) -> Vec<WatchItem> {
    let mut d = ResponseDecoder::new(1 << 20);
    let mut out = Vec::new();
    let mut pos = 0;
    while pos < stream.len() {
        let end = (pos + steps()).min(stream.len());
        d.feed(&stream[pos..end], &mut out);
        pos = end;
    }
    d.eof(&mut out);
    out
}

#[test]
fn clean_end_at_timeout_seconds() {
    let events: Vec<String> = (0..3).map(event).collect();
    let out = run(&watch_response(&events, true), &mut || 7);
    let mut expected: Vec<WatchItem> = events
        .iter()
        .map(|e| WatchItem::Event(e.clone().into_bytes()))
        .collect();
    expected.push(WatchItem::Ended(StreamEnd::Clean));
    assert_eq!(out, expected);
}

#[test]
fn a_watch_ended_at_timeout_seconds_leaves_the_connection_for_the_next_watch() {
    let mut d = ResponseDecoder::new(1 << 20);
    let mut out = Vec::new();
    d.feed(&watch_response(&[event(1)], false), &mut out);
    assert!(!d.connection_reusable(), "not before the end");
    d.feed(b"0\r\n\r\n", &mut out);
    assert!(d.connection_reusable());
    d.reset();
    out.clear();
    d.feed(&watch_response(&[event(2)], true), &mut out);
    assert_eq!(
        out,
        vec![
            WatchItem::Event(event(2).into_bytes()),
            WatchItem::Ended(StreamEnd::Clean)
        ]
    );
    assert!(d.connection_reusable());

    // Bytes after the end, or a head that says close: the connection is not reused.
    let mut d = ResponseDecoder::new(1 << 20);
    let mut extra = watch_response(&[event(1)], true);
    extra.extend_from_slice(b"HTTP/1.1");
    d.feed(&extra, &mut Vec::new());
    assert!(d.is_ended() && !d.connection_reusable());
    let mut d = ResponseDecoder::new(1 << 20);
    d.feed(
        b"HTTP/1.1 200 OK\r\nConnection: close\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        &mut Vec::new(),
    );
    assert!(d.is_ended() && !d.connection_reusable());
}

#[test]
fn server_shutdown_mid_body_is_broken_after_the_delivered_events() {
    let events: Vec<String> = (0..2).map(event).collect();
    let out = run(&watch_response(&events, false), &mut || 1000);
    assert_eq!(out.len(), 3);
    assert!(matches!(&out[2], WatchItem::Ended(StreamEnd::Broken(_))));
}

#[test]
fn forbidden_before_streaming_is_rejected_with_the_status_message() {
    let body = br#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"nodes is forbidden: User \"x\" cannot watch resource \"nodes\"","reason":"Forbidden","code":403}"#;
    let mut stream = format!(
        "HTTP/1.1 403 Forbidden\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    stream.extend_from_slice(body);
    let out = run(&stream, &mut || 5);
    assert_eq!(
        out,
        [WatchItem::Ended(StreamEnd::Rejected {
            status: 403,
            message: "nodes is forbidden: User \"x\" cannot watch resource \"nodes\"".into()
        })]
    );
}

#[test]
fn too_old_resource_version_is_an_error_event_then_a_clean_end() {
    let gone = r#"{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"too old resource version: 1 (2)","reason":"Expired","code":410}}"#;
    let out = run(&watch_response(&[gone.to_string()], true), &mut || 3);
    assert_eq!(
        out,
        [
            WatchItem::Event(gone.as_bytes().to_vec()),
            WatchItem::Ended(StreamEnd::Clean)
        ]
    );
}

#[test]
fn property_valid_streams_split_randomly_lose_no_event() {
    for seed in 0..300 {
        let mut rng = Rng::new(seed);
        let events: Vec<String> = (0..rng.below(40) as usize).map(event).collect();
        let mut body = Vec::new();
        for e in &events {
            // Events split across chunks too, as a proxy may re-chunk.
            encode_chunks(
                format!("{e}\n").as_bytes(),
                1 + rng.below(80) as usize,
                &mut body,
            );
        }
        body.extend_from_slice(b"0\r\n\r\n");
        let mut stream = HEAD.to_vec();
        stream.extend_from_slice(&body);
        let out = run(&stream, &mut || 1 + rng.below(50) as usize);
        let got: Vec<String> = out
            .iter()
            .filter_map(|i| match i {
                WatchItem::Event(l) => Some(String::from_utf8(l.clone()).unwrap()),
                _ => None,
            })
            .collect();
        assert_eq!(got, events, "seed {seed}");
        assert_eq!(
            out.last(),
            Some(&WatchItem::Ended(StreamEnd::Clean)),
            "seed {seed}"
        );
    }
}

#[test]
fn property_garbage_never_panics_and_always_ends_once() {
    for seed in 0..1000 {
        let mut rng = Rng::new(seed);
        let mut stream = if rng.chance(70) {
            HEAD.to_vec()
        } else {
            Vec::new()
        };
        let valid = watch_response(&[event(1)], rng.chance(50));
        for _ in 0..rng.below(300) {
            if rng.chance(50) {
                stream.push(rng.next_u64() as u8);
            } else {
                stream.push(valid[rng.below(valid.len() as u64) as usize]);
            }
        }
        let out = run(&stream, &mut || 1 + rng.below(30) as usize);
        let ends = out
            .iter()
            .filter(|i| matches!(i, WatchItem::Ended(_)))
            .count();
        assert_eq!(ends, 1, "seed {seed}");
        assert!(
            matches!(out.last(), Some(WatchItem::Ended(_))),
            "seed {seed}"
        );
    }
}
