//! Clients for the simulator tests (this crate's and the product's): a ureq agent for unary calls
//! (statuses as values, bodies as JSON) and a raw-socket watch reader that sees exactly what the
//! server sends (chunks, the end chunk, an abrupt close).

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use serde_json::Value;

pub struct Api {
    pub base: String,
    agent: ureq::Agent,
    token: Option<String>,
}

pub struct Reply {
    pub code: u16,
    pub body: Value,
    pub retry_after: Option<String>,
}

impl Api {
    pub fn new(base: &str) -> Api {
        let config = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_secs(20)))
            .build();
        Api {
            base: base.to_string(),
            agent: ureq::Agent::new_with_config(config),
            token: None,
        }
    }

    pub fn with_token(base: &str, token: &str) -> Api {
        let mut api = Api::new(base);
        api.token = Some(token.to_string());
        api
    }

    pub fn call(
        &self,
        method: &str,
        path: &str,
        content_type: &str,
        body: Option<&Value>,
    ) -> Reply {
        let mut request = ureq::http::Request::builder()
            .method(method)
            .uri(format!("{}{path}", self.base))
            .header("User-Agent", "sim-test");
        if let Some(token) = &self.token {
            request = request.header("Authorization", format!("Bearer {token}"));
        }
        let result = match body {
            Some(b) => self.agent.run(
                request
                    .header("Content-Type", content_type)
                    .body(b.to_string())
                    .unwrap(),
            ),
            None => self.agent.run(request.body(()).unwrap()),
        };
        let mut response = result.unwrap_or_else(|e| panic!("{method} {path}: {e}"));
        let retry_after = response
            .headers()
            .get("retry-after")
            .map(|v| v.to_str().unwrap_or("").to_string());
        let text = response
            .body_mut()
            .with_config()
            .limit(200 * 1024 * 1024)
            .read_to_string()
            .unwrap();
        Reply {
            code: response.status().as_u16(),
            body: serde_json::from_str(&text).unwrap_or(Value::String(text)),
            retry_after,
        }
    }

    pub fn get(&self, path: &str) -> Reply {
        self.call("GET", path, "", None)
    }
    pub fn post(&self, path: &str, body: &Value) -> Reply {
        self.call("POST", path, "application/json", Some(body))
    }
    pub fn put(&self, path: &str, body: &Value) -> Reply {
        self.call("PUT", path, "application/json", Some(body))
    }
    pub fn strategic(&self, path: &str, body: &Value) -> Reply {
        self.call(
            "PATCH",
            path,
            "application/strategic-merge-patch+json",
            Some(body),
        )
    }
    pub fn merge(&self, path: &str, body: &Value) -> Reply {
        self.call("PATCH", path, "application/merge-patch+json", Some(body))
    }
    pub fn json_patch(&self, path: &str, body: &Value) -> Reply {
        self.call("PATCH", path, "application/json-patch+json", Some(body))
    }
    pub fn delete(&self, path: &str, options: Option<&Value>) -> Reply {
        self.call("DELETE", path, "application/json", options)
    }
}

/// One watch connection read at the byte level.
pub struct RawWatch {
    reader: BufReader<TcpStream>,
    pending: Vec<u8>,
    pub status: u16,
    ended: bool,
}

#[derive(Debug, PartialEq)]
pub enum WatchItem {
    Line(String),
    /// The end chunk: the server closed the watch properly.
    End,
    /// The connection closed (or broke) without an end chunk.
    Broken,
    /// Nothing arrived within the timeout.
    Quiet,
}

impl RawWatch {
    pub fn open(addr: SocketAddr, path: &str) -> RawWatch {
        let stream = TcpStream::connect(addr).unwrap();
        RawWatch::start(stream, path)
    }

    pub fn start(mut stream: TcpStream, path: &str) -> RawWatch {
        write!(
            stream,
            "GET {path} HTTP/1.1\r\nHost: sim\r\nUser-Agent: sim-test\r\n\r\n"
        )
        .unwrap();
        let mut reader = BufReader::new(stream);
        let mut status_line = String::new();
        reader.read_line(&mut status_line).unwrap();
        let status: u16 = status_line
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        loop {
            let mut header = String::new();
            reader.read_line(&mut header).unwrap();
            if header == "\r\n" || header.is_empty() {
                break;
            }
        }
        RawWatch {
            reader,
            pending: Vec::new(),
            status,
            ended: false,
        }
    }

    /// The connection, to send another request after a clean end.
    pub fn into_stream(self) -> TcpStream {
        self.reader.into_inner()
    }

    pub fn next(&mut self, timeout: Duration) -> WatchItem {
        loop {
            if let Some(pos) = self.pending.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = self.pending.drain(..=pos).collect();
                return WatchItem::Line(
                    String::from_utf8_lossy(&line[..line.len() - 1]).into_owned(),
                );
            }
            if self.ended {
                return WatchItem::End;
            }
            self.reader
                .get_ref()
                .set_read_timeout(Some(timeout))
                .unwrap();
            match self.read_chunk() {
                Ok(Some(data)) => self.pending.extend_from_slice(&data),
                Ok(None) => self.ended = true,
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                    ) =>
                {
                    return WatchItem::Quiet;
                }
                Err(_) => return WatchItem::Broken,
            }
        }
    }

    /// The next JSON event, skipping nothing; panics on anything else.
    pub fn event(&mut self, timeout: Duration) -> Value {
        match self.next(timeout) {
            WatchItem::Line(l) => serde_json::from_str(&l).unwrap_or_else(|e| panic!("{e}: {l}")),
            other => panic!("expected an event, got {other:?}"),
        }
    }

    fn read_chunk(&mut self) -> io::Result<Option<Vec<u8>>> {
        let mut size_line = String::new();
        if self.reader.read_line(&mut size_line)? == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        let size = usize::from_str_radix(size_line.trim(), 16)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, size_line.clone()))?;
        let mut data = vec![0; size + 2];
        self.reader.read_exact(&mut data)?;
        data.truncate(size);
        Ok((size > 0).then_some(data))
    }
}

pub fn event_type(event: &Value) -> &str {
    event["type"].as_str().unwrap_or("")
}

pub fn name_of(event: &Value) -> &str {
    event["object"]["metadata"]["name"].as_str().unwrap_or("")
}

pub fn rv_of(object: &Value) -> u64 {
    object["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap()
}
