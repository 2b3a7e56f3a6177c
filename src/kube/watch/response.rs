//! One watch response, from its first byte to its end: head → body framing → lines.
//!
//! Pure (no I/O): [`ResponseDecoder::feed`] takes whatever bytes a read produced and emits
//! [`WatchItem`]s; [`ResponseDecoder::eof`] says the connection closed. The property tests feed
//! it valid streams split at random boundaries and random garbage.

use std::fmt;

use super::chunked::{ChunkedDecoder, ChunkedError};
use super::frames::{FrameArena, FrameSpan, FrameSplitter};
use super::http_head::{BodyFraming, HeadError, HeadParser, ResponseHead};
use super::lines::{LineError, LineSplitter};

/// How much of an error body (a metav1.Status) is kept for the message.
const MAX_ERROR_BODY: usize = 64 * 1024;

/// What a watch stream produces.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WatchItem {
    /// One JSON watch event line (`{"type":"ADDED","object":{...}}`), undecoded.
    Event(Vec<u8>),
    /// One protobuf watch event (a `metav1.WatchEvent`, its length prefix removed), undecoded:
    /// where its bytes are in the decoder's frames of this read ([`ResponseDecoder::frame`]).
    Frame(FrameSpan),
    /// A line that could not be delivered (too long); later events are unaffected.
    Skipped(String),
    /// The stream is over; nothing follows.
    Ended(StreamEnd),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StreamEnd {
    /// The server ended the body (its `timeoutSeconds` expired): resume from the last
    /// resourceVersion at once.
    Clean,
    /// A non-200 answer before streaming; `message` from its Status body when there is one.
    Rejected { status: u16, message: String },
    /// Connection reset or closed mid-body, TLS failure, protocol violation: resume after backoff.
    Broken(String),
    /// No byte arrived within the idle timeout: the connection is presumed dead.
    IdleTimeout,
}

impl fmt::Display for StreamEnd {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StreamEnd::Clean => write!(f, "ended by the server"),
            StreamEnd::Rejected { status, message } => write!(f, "HTTP {status}: {message}"),
            StreamEnd::Broken(reason) => write!(f, "broken: {reason}"),
            StreamEnd::IdleTimeout => write!(f, "no data within the idle timeout"),
        }
    }
}

#[derive(Debug)]
enum Body {
    Chunked(ChunkedDecoder),
    Length { remaining: u64 },
    UntilClose,
}

/// How a 200 response's body is cut into events, per its Content-Type.
#[derive(Debug)]
enum Events {
    Lines(LineSplitter),
    Frames(FrameSplitter),
}

#[derive(Debug)]
enum State {
    Head(HeadParser),
    Body {
        head: ResponseHead,
        body: Body,
        /// Events of a 200 response, or the collected error body otherwise.
        lines: Events,
        error_body: Vec<u8>,
    },
    Ended,
}

#[derive(Debug)]
pub struct ResponseDecoder {
    state: State,
    max_line: usize,
    scratch: Vec<u8>,
    /// The events one `deliver` split off, reused (one allocation per chunk otherwise).
    split: Vec<Result<Vec<u8>, LineError>>,
    split_frames: Vec<Result<FrameSpan, LineError>>,
    /// The frames fed since the last `release_frames`, back to back (`frames.rs`). Outside
    /// `state`: the frames before a stream's end are read after it.
    arena: FrameArena,
    /// The body ended where its framing said, nothing followed it, and the head allowed
    /// keep-alive: the connection can carry the next request.
    reusable: bool,
}

impl ResponseDecoder {
    pub fn new(max_line: usize) -> ResponseDecoder {
        ResponseDecoder {
            state: State::Head(HeadParser::new()),
            max_line,
            scratch: Vec::new(),
            split: Vec::new(),
            split_frames: Vec::new(),
            arena: FrameArena::default(),
            reusable: false,
        }
    }

    /// A frame's bytes; `None` for a frame of a read before the last `release_frames`.
    pub fn frame(&self, span: &FrameSpan) -> Option<&[u8]> {
        self.arena.get(span)
    }

    /// Every frame fed so far has been read: the next ones reuse their buffer.
    pub fn release_frames(&mut self) {
        self.arena.clear();
    }

    pub fn is_ended(&self) -> bool {
        matches!(self.state, State::Ended)
    }

    /// The response is over and the connection may carry the next request (see `reusable`).
    pub(crate) fn connection_reusable(&self) -> bool {
        self.is_ended() && self.reusable
    }

    /// Ready for the next response on the same connection (its buffers kept).
    pub(crate) fn reset(&mut self) {
        self.state = State::Head(HeadParser::new());
        self.reusable = false;
    }

    /// The status line has been read (for logs).
    pub(crate) fn status(&self) -> Option<u16> {
        match &self.state {
            State::Body { head, .. } => Some(head.status),
            _ => None,
        }
    }

    pub fn feed(&mut self, bytes: &[u8], out: &mut Vec<WatchItem>) {
        let State::Head(parser) = &mut self.state else {
            return self.feed_body(bytes, out);
        };
        match parser.feed(bytes) {
            Ok(None) => {}
            Ok(Some((head, rest))) => {
                let body = match head.framing {
                    BodyFraming::Chunked => Body::Chunked(ChunkedDecoder::new()),
                    BodyFraming::Length(n) => Body::Length { remaining: n },
                    BodyFraming::UntilClose => Body::UntilClose,
                };
                let lines = if head.protobuf {
                    Events::Frames(FrameSplitter::new(self.max_line))
                } else {
                    Events::Lines(LineSplitter::new(self.max_line))
                };
                self.state = State::Body {
                    head,
                    body,
                    lines,
                    error_body: Vec::new(),
                };
                // Even with no byte after the head: a Content-Length of 0 ends the response.
                self.feed_body(&rest, out);
            }
            Err(e) => self.end(out, StreamEnd::Broken(head_error(e))),
        }
    }

    /// The connection closed (cleanly at the TCP/TLS level) after the bytes fed so far.
    pub fn eof(&mut self, out: &mut Vec<WatchItem>) {
        match &mut self.state {
            State::Ended => {}
            State::Head(_) => self.end(
                out,
                StreamEnd::Broken("connection closed before the response head".into()),
            ),
            State::Body {
                body: Body::UntilClose,
                ..
            } => self.finish_body(out),
            State::Body { .. } => self.end(
                out,
                StreamEnd::Broken("connection closed in the middle of the watch body".into()),
            ),
        }
    }

    fn feed_body(&mut self, bytes: &[u8], out: &mut Vec<WatchItem>) {
        let State::Body { body, .. } = &mut self.state else {
            return;
        };
        let mut data = std::mem::take(&mut self.scratch);
        data.clear();
        let mut trailing = false;
        let finished = match body {
            Body::Chunked(decoder) => match decoder.feed(bytes, &mut data) {
                Ok(consumed) => {
                    trailing = consumed < bytes.len();
                    decoder.is_done()
                }
                Err(e) => {
                    // Lines completed before the bad byte count, as they would had they
                    // arrived in an earlier read.
                    self.deliver(&data, out);
                    self.scratch = data;
                    return self.end(out, StreamEnd::Broken(chunked_error(e)));
                }
            },
            Body::Length { remaining } => {
                let take = usize::try_from(*remaining)
                    .unwrap_or(usize::MAX)
                    .min(bytes.len());
                data.extend_from_slice(&bytes[..take]);
                trailing = take < bytes.len();
                *remaining -= take as u64;
                *remaining == 0
            }
            Body::UntilClose => {
                data.extend_from_slice(bytes);
                false
            }
        };
        self.deliver(&data, out);
        self.scratch = data;
        if finished {
            // Bytes after the end were not asked for: the connection is not in a known state.
            let keep_alive = matches!(&self.state, State::Body { head, .. } if head.keep_alive);
            self.finish_body(out);
            self.reusable = keep_alive && !trailing;
        }
    }

    fn deliver(&mut self, data: &[u8], out: &mut Vec<WatchItem>) {
        let State::Body {
            head,
            lines,
            error_body,
            ..
        } = &mut self.state
        else {
            return;
        };
        if data.is_empty() {
            return;
        }
        if head.status == 200 {
            let split = &mut self.split;
            match lines {
                Events::Lines(lines) => {
                    lines.push(data, split);
                    out.extend(split.drain(..).map(line_item));
                }
                Events::Frames(frames) => {
                    let split = &mut self.split_frames;
                    frames.push(data, &mut self.arena, split);
                    out.extend(split.drain(..).map(frame_item));
                }
            }
        } else {
            let room = MAX_ERROR_BODY.saturating_sub(error_body.len());
            error_body.extend_from_slice(&data[..data.len().min(room)]);
        }
    }

    fn finish_body(&mut self, out: &mut Vec<WatchItem>) {
        let State::Body {
            head,
            lines,
            error_body,
            ..
        } = &mut self.state
        else {
            return;
        };
        let end = if head.status == 200 {
            match lines {
                Events::Lines(lines) => {
                    if let Some(last) = lines.finish() {
                        out.push(WatchItem::Event(last));
                    }
                    StreamEnd::Clean
                }
                Events::Frames(frames) => {
                    if frames.finish() {
                        StreamEnd::Broken("the watch body ended inside an event".into())
                    } else {
                        StreamEnd::Clean
                    }
                }
            }
        } else {
            StreamEnd::Rejected {
                status: head.status,
                message: status_message(error_body),
            }
        };
        self.end(out, end);
    }

    fn end(&mut self, out: &mut Vec<WatchItem>, end: StreamEnd) {
        self.state = State::Ended;
        out.push(WatchItem::Ended(end));
    }
}

fn frame_item(frame: Result<FrameSpan, LineError>) -> WatchItem {
    match frame {
        Ok(f) => WatchItem::Frame(f),
        Err(e) => WatchItem::Skipped(e.to_string()),
    }
}

fn line_item(line: Result<Vec<u8>, LineError>) -> WatchItem {
    match line {
        Ok(l) => WatchItem::Event(l),
        Err(e) => WatchItem::Skipped(e.to_string()),
    }
}

fn head_error(e: HeadError) -> String {
    e.to_string()
}

fn chunked_error(e: ChunkedError) -> String {
    e.to_string()
}

/// The `message` of a metav1.Status body, else the start of the body as text.
fn status_message(body: &[u8]) -> String {
    if body.starts_with(crate::kube::decode::proto::MAGIC) {
        return match crate::kube::decode::proto::decode_status(body) {
            Ok(s) if !s.message.is_empty() => s.message,
            Ok(_) => "(a Status without a message)".into(),
            Err(e) => e.to_string(),
        };
    }
    #[derive(serde::Deserialize)]
    struct Status {
        #[serde(default)]
        message: String,
    }
    match serde_json::from_slice::<Status>(body) {
        Ok(s) if !s.message.is_empty() => s.message,
        _ => {
            let text = String::from_utf8_lossy(body);
            let text = text.trim();
            let cut: String = text.chars().take(200).collect();
            if cut.is_empty() {
                "(empty body)".into()
            } else {
                cut
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kube::watch::chunked::encode_chunks;
    use crate::time::Rng;

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
}
