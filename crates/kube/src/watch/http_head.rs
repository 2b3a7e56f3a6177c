//! The HTTP/1.1 response head of a watch request, parsed incrementally as bytes arrive.
//!
//! Bytes are buffered until the blank line that ends the head (bounded by [`MAX_HEAD_BYTES`]),
//! then parsed with httparse. What follows the head in the same buffer is the start of the body
//! and is handed back to the caller.

use std::fmt;

/// A watch response head is a few hundred bytes; anything near this is not an API server.
pub const MAX_HEAD_BYTES: usize = 64 * 1024;
const MAX_HEADERS: usize = 64;

/// How the body that follows the head is delimited.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BodyFraming {
    /// `Transfer-Encoding: chunked`: every successful watch.
    Chunked,
    /// `Content-Length: n`: errors before streaming (403, 500) come this way.
    Length(u64),
    /// Neither: the body ends when the server closes the connection.
    UntilClose,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResponseHead {
    pub(crate) status: u16,
    pub framing: BodyFraming,
    /// HTTP/1.1 without `Connection: close`: the connection may carry the next request once
    /// this body has ended (the next watch reuses it instead of a new TCP and TLS handshake).
    pub(crate) keep_alive: bool,
    /// `Content-Type: application/vnd.kubernetes.protobuf…`: length-prefixed frames, not lines.
    pub(crate) protobuf: bool,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HeadError {
    TooLarge,
    Malformed(String),
    /// Content-Length that is not a number, or two that disagree.
    BadContentLength,
    /// A transfer coding other than chunked (we never ask for compression).
    UnsupportedTransferEncoding(String),
}

impl fmt::Display for HeadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HeadError::TooLarge => write!(f, "response head larger than {MAX_HEAD_BYTES} bytes"),
            HeadError::Malformed(e) => write!(f, "malformed response head: {e}"),
            HeadError::BadContentLength => write!(f, "invalid Content-Length header"),
            HeadError::UnsupportedTransferEncoding(te) => {
                write!(f, "unsupported Transfer-Encoding {te:?}")
            }
        }
    }
}

/// Accumulates bytes until the head is complete.
#[derive(Default, Debug)]
pub struct HeadParser {
    buf: Vec<u8>,
}

impl HeadParser {
    pub fn new() -> HeadParser {
        HeadParser::default()
    }

    /// Feeds bytes; returns the head and the bytes after it once the head is complete.
    /// `Ok(None)` means more bytes are needed.
    pub fn feed(&mut self, bytes: &[u8]) -> Result<Option<(ResponseHead, Vec<u8>)>, HeadError> {
        // Only rescan the tail that could hold a new "\r\n\r\n".
        let scan_from = self.buf.len().saturating_sub(3);
        self.buf.extend_from_slice(bytes);
        let Some(end) = find_head_end(&self.buf, scan_from) else {
            if self.buf.len() > MAX_HEAD_BYTES {
                return Err(HeadError::TooLarge);
            }
            return Ok(None);
        };
        if end > MAX_HEAD_BYTES {
            return Err(HeadError::TooLarge);
        }
        let head = parse_head(&self.buf[..end])?;
        let rest = self.buf.split_off(end);
        self.buf = Vec::new();
        Ok(Some((head, rest)))
    }
}

/// Index just past the first "\r\n\r\n" at or after `from`.
fn find_head_end(buf: &[u8], from: usize) -> Option<usize> {
    buf.get(from..)?
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|p| from + p + 4)
}

fn parse_head(bytes: &[u8]) -> Result<ResponseHead, HeadError> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut response = httparse::Response::new(&mut headers);
    match response.parse(bytes) {
        Ok(httparse::Status::Complete(_)) => {}
        Ok(httparse::Status::Partial) => {
            return Err(HeadError::Malformed("incomplete head".into()));
        }
        Err(e) => return Err(HeadError::Malformed(e.to_string())),
    }
    let status = response
        .code
        .ok_or_else(|| HeadError::Malformed("no status code".into()))?;
    let mut chunked = false;
    let mut protobuf = false;
    let mut length: Option<u64> = None;
    let mut keep_alive = response.version == Some(1);
    for h in response.headers.iter() {
        if h.name.eq_ignore_ascii_case("connection") {
            let value = String::from_utf8_lossy(h.value);
            if value
                .split(',')
                .any(|option| option.trim().eq_ignore_ascii_case("close"))
            {
                keep_alive = false;
            }
        } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
            let value = String::from_utf8_lossy(h.value);
            for coding in value.split(',').map(str::trim).filter(|c| !c.is_empty()) {
                if coding.eq_ignore_ascii_case("chunked") {
                    chunked = true;
                } else if !coding.eq_ignore_ascii_case("identity") {
                    return Err(HeadError::UnsupportedTransferEncoding(coding.to_string()));
                }
            }
        } else if h.name.eq_ignore_ascii_case("content-type") {
            protobuf = std::str::from_utf8(h.value).is_ok_and(crate::decode::proto::is_protobuf);
        } else if h.name.eq_ignore_ascii_case("content-length") {
            let n = std::str::from_utf8(h.value)
                .ok()
                .map(str::trim)
                .filter(|s| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
                .and_then(|s| s.parse::<u64>().ok())
                .ok_or(HeadError::BadContentLength)?;
            if length.is_some_and(|l| l != n) {
                return Err(HeadError::BadContentLength);
            }
            length = Some(n);
        }
    }
    // RFC 9112 6.3: chunked wins over Content-Length; 1xx/204/304 have no body.
    let framing = if matches!(status, 100..=199 | 204 | 304) {
        BodyFraming::Length(0)
    } else if chunked {
        BodyFraming::Chunked
    } else if let Some(n) = length {
        BodyFraming::Length(n)
    } else {
        BodyFraming::UntilClose
    };
    Ok(ResponseHead {
        status,
        framing,
        keep_alive,
        protobuf,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const WATCH_HEAD: &[u8] = b"HTTP/1.1 200 OK\r\nCache-Control: no-cache, private\r\n\
Content-Type: application/json\r\nDate: Mon, 01 Jan 2024 00:00:00 GMT\r\n\
Transfer-Encoding: chunked\r\n\r\n";

    #[test]
    fn watch_head_split_at_every_byte_is_chunked_and_keeps_the_body_start() {
        let mut stream = WATCH_HEAD.to_vec();
        stream.extend_from_slice(b"5\r\nhello");
        for split in 0..stream.len() {
            let mut p = HeadParser::new();
            let first = p.feed(&stream[..split]).unwrap();
            let (head, rest) = match first {
                Some((head, mut rest)) => {
                    rest.extend_from_slice(&stream[split..]);
                    (head, rest)
                }
                None => p.feed(&stream[split..]).unwrap().expect("complete"),
            };
            assert_eq!(head.status, 200);
            assert_eq!(head.framing, BodyFraming::Chunked);
            assert!(head.keep_alive);
            assert_eq!(rest, b"5\r\nhello", "split at {split}");
        }
    }

    #[test]
    fn error_before_streaming_comes_with_content_length() {
        let mut p = HeadParser::new();
        let (head, rest) = p
            .feed(b"HTTP/1.1 403 Forbidden\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}")
            .unwrap()
            .unwrap();
        assert_eq!(head.status, 403);
        assert_eq!(head.framing, BodyFraming::Length(2));
        assert_eq!(rest, b"{}");
    }

    #[test]
    fn conflicting_or_garbage_lengths_and_codings_are_errors() {
        for bad in [
            &b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n"[..],
            b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
            b"garbage\r\n\r\n",
        ] {
            assert!(
                HeadParser::new().feed(bad).is_err(),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    #[test]
    fn endless_head_is_refused_at_the_limit() {
        let mut p = HeadParser::new();
        let line = b"X-Filler: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n";
        let mut result = p.feed(b"HTTP/1.1 200 OK\r\n");
        for _ in 0..2000 {
            if result.is_err() {
                break;
            }
            result = p.feed(line);
        }
        assert_eq!(result, Err(HeadError::TooLarge));
    }

    #[test]
    fn a_connection_is_kept_for_the_next_watch_only_in_http_1_1_without_connection_close() {
        let keep = |head: &[u8]| HeadParser::new().feed(head).unwrap().unwrap().0.keep_alive;
        assert!(keep(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
        ));
        assert!(!keep(
            b"HTTP/1.1 200 OK\r\nConnection: keep-alive, Close\r\nTransfer-Encoding: chunked\r\n\r\n"
        ));
        assert!(!keep(b"HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n"));
    }

    #[test]
    fn no_framing_headers_reads_until_close() {
        let (head, _) = HeadParser::new()
            .feed(b"HTTP/1.1 500 Internal Server Error\r\n\r\n")
            .unwrap()
            .unwrap();
        assert_eq!(head.framing, BodyFraming::UntilClose);
    }
}
