//! Just enough HTTP/1.1 for an API server: requests parsed with httparse (bounded head and body,
//! Content-Length bodies), keep-alive, unary responses with Content-Length, and chunked bodies
//! for watch streams. Plain TCP or rustls on the same code path.

use std::io::{self, Read, Write};
use std::net::TcpStream;

use super::status::ApiError;

/// Request heads larger than this are refused (431).
const MAX_HEAD_BYTES: usize = 64 * 1024;
const MAX_HEADERS: usize = 64;

pub(crate) enum Transport {
    Plain(TcpStream),
    Tls(Box<rustls::StreamOwned<rustls::ServerConnection, TcpStream>>),
}

impl Transport {
    pub fn tcp(&self) -> &TcpStream {
        match self {
            Transport::Plain(s) => s,
            Transport::Tls(s) => &s.sock,
        }
    }

    /// The common name of the client certificate, if one was presented.
    pub fn client_cn(&self) -> Option<String> {
        match self {
            Transport::Plain(_) => None,
            Transport::Tls(s) => s
                .conn
                .peer_certificates()
                .and_then(|certs| certs.first())
                .and_then(|cert| super::tls::subject_common_name(cert.as_ref())),
        }
    }
}

impl Read for Transport {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Transport::Plain(s) => s.read(buf),
            Transport::Tls(s) => s.read(buf),
        }
    }
}

impl Write for Transport {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Transport::Plain(s) => s.write(buf),
            Transport::Tls(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Transport::Plain(s) => s.flush(),
            Transport::Tls(s) => s.flush(),
        }
    }
}

#[derive(Debug)]
pub(crate) struct Request {
    pub method: String,
    pub path: String,
    pub query: Vec<(String, String)>,
    /// Header names lower-cased.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Request {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    pub fn param(&self, name: &str) -> Option<&str> {
        self.query
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    pub fn flag(&self, name: &str) -> bool {
        matches!(self.param(name), Some("true" | "1"))
    }

    pub fn wants_close(&self) -> bool {
        self.header("connection")
            .is_some_and(|c| c.eq_ignore_ascii_case("close"))
    }
}

/// Why a request could not be read. `Refuse` carries the answer to send before closing.
#[derive(Debug)]
pub(crate) enum ReadError {
    Io(io::Error),
    Refuse(ApiError),
}

/// Reads requests from one connection, keeping bytes that arrived early (pipelining).
#[derive(Default)]
pub(crate) struct RequestReader {
    buf: Vec<u8>,
}

impl RequestReader {
    /// The next request; `Ok(None)` when the client closed the connection between requests.
    pub fn read(
        &mut self,
        input: &mut impl Read,
        max_body: usize,
    ) -> Result<Option<Request>, ReadError> {
        let mut chunk = [0u8; 16 * 1024];
        loop {
            if !self.buf.is_empty() {
                if let Some(request) = self.try_parse(input, max_body)? {
                    return Ok(Some(request));
                }
                if self.buf.len() > MAX_HEAD_BYTES {
                    return Err(ReadError::Refuse(header_too_large()));
                }
            }
            let n = input.read(&mut chunk).map_err(ReadError::Io)?;
            if n == 0 {
                return if self.buf.is_empty() {
                    Ok(None)
                } else {
                    Err(ReadError::Io(io::ErrorKind::UnexpectedEof.into()))
                };
            }
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }

    fn try_parse(
        &mut self,
        input: &mut impl Read,
        max_body: usize,
    ) -> Result<Option<Request>, ReadError> {
        let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let mut parsed = httparse::Request::new(&mut headers);
        let head_len = match parsed.parse(&self.buf) {
            Ok(httparse::Status::Complete(n)) => n,
            Ok(httparse::Status::Partial) => return Ok(None),
            Err(httparse::Error::TooManyHeaders) => {
                return Err(ReadError::Refuse(header_too_large()));
            }
            Err(e) => {
                return Err(ReadError::Refuse(ApiError::bad_request(format!(
                    "malformed HTTP request: {e}"
                ))));
            }
        };
        let method = parsed.method.unwrap_or("").to_string();
        let target = parsed.path.unwrap_or("/");
        let (path, query) = match target.split_once('?') {
            Some((p, q)) => (percent_decode(p), parse_query(q)),
            None => (percent_decode(target), Vec::new()),
        };
        let headers: Vec<(String, String)> = parsed
            .headers
            .iter()
            .map(|h| {
                (
                    h.name.to_ascii_lowercase(),
                    String::from_utf8_lossy(h.value).trim().to_string(),
                )
            })
            .collect();
        let header = |name: &str| {
            headers
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.as_str())
        };
        if header("transfer-encoding").is_some_and(|te| !te.eq_ignore_ascii_case("identity")) {
            return Err(ReadError::Refuse(ApiError::bad_request(
                "chunked request bodies are not supported by the simulator: send Content-Length",
            )));
        }
        let body_len = match header("content-length") {
            None => 0,
            Some(v) => v.parse::<usize>().map_err(|_| {
                ReadError::Refuse(ApiError::bad_request(format!(
                    "invalid Content-Length {v:?}"
                )))
            })?,
        };
        if body_len > max_body {
            return Err(ReadError::Refuse(ApiError::request_too_large(max_body)));
        }
        let mut chunk = [0u8; 16 * 1024];
        while self.buf.len() < head_len + body_len {
            let n = input.read(&mut chunk).map_err(ReadError::Io)?;
            if n == 0 {
                return Err(ReadError::Io(io::ErrorKind::UnexpectedEof.into()));
            }
            self.buf.extend_from_slice(&chunk[..n]);
        }
        let body = self.buf[head_len..head_len + body_len].to_vec();
        self.buf.drain(..head_len + body_len);
        Ok(Some(Request {
            method,
            path,
            query,
            headers,
            body,
        }))
    }
}

fn header_too_large() -> ApiError {
    let mut e = ApiError::bad_request("request header fields too large");
    e.code = 431;
    e.reason = "RequestHeaderFieldsTooLarge";
    e
}

pub(crate) fn parse_query(query: &str) -> Vec<(String, String)> {
    query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|pair| match pair.split_once('=') {
            Some((k, v)) => (percent_decode(k), percent_decode(v)),
            None => (percent_decode(pair), String::new()),
        })
        .collect()
}

/// `%XX` and `+` decoding; malformed escapes are kept literally.
pub(crate) fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' if i + 2 < bytes.len() => match (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                (Some(hi), Some(lo)) => {
                    out.push(hi * 16 + lo);
                    i += 3;
                    continue;
                }
                _ => out.push(b'%'),
            },
            b'+' => out.push(b' '),
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn hex(b: u8) -> Option<u8> {
    (b as char).to_digit(16).map(|d| d as u8)
}

pub(crate) struct Response {
    pub code: u16,
    pub content_type: &'static str,
    pub body: Vec<u8>,
    pub retry_after: Option<u32>,
}

impl Response {
    pub fn json(code: u16, body: Vec<u8>) -> Response {
        Response {
            code,
            content_type: "application/json",
            body,
            retry_after: None,
        }
    }

    pub fn text(code: u16, body: &str) -> Response {
        Response {
            code,
            content_type: "text/plain; charset=utf-8",
            body: body.as_bytes().to_vec(),
            retry_after: None,
        }
    }

    pub fn error(error: &ApiError) -> Response {
        Response {
            code: error.code,
            content_type: "application/json",
            body: error.to_status().to_string().into_bytes(),
            retry_after: error.retry_after,
        }
    }

    pub fn write_to(&self, out: &mut impl Write, close: bool) -> io::Result<()> {
        let mut head = format!(
            "HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nCache-Control: no-cache, private\r\n",
            self.code,
            reason_phrase(self.code),
            self.content_type,
            self.body.len()
        );
        if let Some(secs) = self.retry_after {
            head.push_str(&format!("Retry-After: {secs}\r\n"));
        }
        if close {
            head.push_str("Connection: close\r\n");
        }
        head.push_str("\r\n");
        let mut bytes = head.into_bytes();
        bytes.extend_from_slice(&self.body);
        out.write_all(&bytes)?;
        out.flush()
    }
}

pub(crate) fn write_chunked_head(out: &mut impl Write, content_type: &str) -> io::Result<()> {
    out.write_all(
        format!("HTTP/1.1 200 OK\r\nContent-Type: {content_type}\r\nCache-Control: no-cache, private\r\nTransfer-Encoding: chunked\r\n\r\n").as_bytes(),
    )?;
    out.flush()
}

/// Appends one chunk (one watch event line) to `buf`.
pub(crate) fn push_chunk(buf: &mut Vec<u8>, data: &[u8]) {
    if data.is_empty() {
        return;
    }
    buf.extend_from_slice(format!("{:x}\r\n", data.len()).as_bytes());
    buf.extend_from_slice(data);
    buf.extend_from_slice(b"\r\n");
}

pub(crate) const LAST_CHUNK: &[u8] = b"0\r\n\r\n";

pub(crate) fn reason_phrase(code: u16) -> &'static str {
    match code {
        200 => "OK",
        201 => "Created",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        409 => "Conflict",
        410 => "Gone",
        413 => "Request Entity Too Large",
        415 => "Unsupported Media Type",
        422 => "Unprocessable Entity",
        429 => "Too Many Requests",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        _ => "Status",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_values_are_percent_decoded() {
        let q = parse_query("fieldSelector=spec.nodeName%21%3D&limit=500&watch");
        assert_eq!(
            q,
            vec![
                ("fieldSelector".to_string(), "spec.nodeName!=".to_string()),
                ("limit".to_string(), "500".to_string()),
                ("watch".to_string(), String::new()),
            ]
        );
        assert_eq!(percent_decode("a%2"), "a%2");
        assert_eq!(percent_decode("%zz"), "%zz");
    }

    #[test]
    fn pipelined_requests_are_read_one_at_a_time() {
        let raw =
            b"GET /a HTTP/1.1\r\nHost: x\r\n\r\nPUT /b HTTP/1.1\r\nContent-Length: 2\r\n\r\n{}";
        let mut input = &raw[..];
        let mut reader = RequestReader::default();
        let a = reader.read(&mut input, 1024).unwrap().unwrap();
        let b = reader.read(&mut input, 1024).unwrap().unwrap();
        assert_eq!((a.method.as_str(), a.path.as_str()), ("GET", "/a"));
        assert_eq!((b.method.as_str(), b.body.as_slice()), ("PUT", &b"{}"[..]));
        assert!(reader.read(&mut input, 1024).unwrap().is_none());
    }

    #[test]
    fn oversized_and_chunked_bodies_are_refused() {
        let mut input = &b"PUT /b HTTP/1.1\r\nContent-Length: 99\r\n\r\n"[..];
        let err = RequestReader::default().read(&mut input, 10).unwrap_err();
        assert!(matches!(err, ReadError::Refuse(e) if e.code == 413));
        let mut input = &b"PUT /b HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"[..];
        let err = RequestReader::default().read(&mut input, 10).unwrap_err();
        assert!(matches!(err, ReadError::Refuse(e) if e.code == 400));
    }
}
