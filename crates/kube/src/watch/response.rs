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
    if body.starts_with(crate::decode::proto::MAGIC) {
        return match crate::decode::proto::decode_status(body) {
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
#[path = "response_tests.rs"]
mod tests;
