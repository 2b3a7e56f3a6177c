//! A watch request on a non-blocking socket, driven by the mio loop.
//!
//! mio is edge-triggered: every readiness event is answered by reading (and, with TLS, draining
//! rustls' plaintext) until `WouldBlock`, or a large event could sit in a buffer until the next
//! byte arrives. TLS is rustls driven by hand (`read_tls` → `process_new_packets` → `reader`,
//! `write_tls` for handshake and request), as in rustls' `tlsclient-mio` example, offering only
//! `http/1.1` in ALPN (offered `h2`, the API server answers in HTTP/2).
//!
//! Liveness: an idle deadline, pushed back by every byte received, and TCP keepalive. The
//! reflector asks the server to end each watch well inside the idle timeout, so a deadline that
//! passes means the connection is dead, not quiet.
//!
//! Rotation: a watch the server ended at its `timeoutSeconds` leaves an idle keep-alive
//! connection, and the next watch is sent on it in the same turn ([`WatchStream::rewatch`]):
//! no TCP connect, no TLS handshake, and one wake-up (the response head) besides the one that
//! read the end (a new connection cost 3–4 wake-ups and a handshake per rotation).

use std::io::{self, Write};
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::Arc;
use std::time::Duration;

use mio::net::TcpStream;
use mio::{Interest, Registry, Token};

use super::frames::FrameSpan;
use super::keepalive;
use super::lines::DEFAULT_MAX_LINE;
use super::response::{ResponseDecoder, StreamEnd, WatchItem};
use crate::connection::{Connection, Scheme};
use crate::time::Time;

mod socket;

const READ_CHUNK: usize = 64 * 1024;

/// Whether [`WatchStream::on_ready`] read everything available.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Drain {
    /// The socket would block (or the stream ended): wait for the next readiness event.
    Done,
    /// The read budget ran out with bytes still available: call `on_ready` again.
    MoreToRead,
}

/// Could not even start a watch (the reflector treats it like a broken stream).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OpenError(pub(crate) String);

impl std::fmt::Display for OpenError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "cannot open watch: {}", self.0)
    }
}

impl std::error::Error for OpenError {}

#[derive(Clone, Debug)]
pub struct WatchOptions {
    pub idle_timeout: Duration,
    pub max_line: usize,
    /// TCP keepalive idle time (then probes every 5 s, 3 probes).
    pub keepalive: Option<Duration>,
    /// Decoded bytes per `on_ready` call before yielding to the loop.
    pub read_budget: usize,
    /// The Accept header (the response's Content-Type decides how it is read).
    pub accept: &'static str,
}

impl Default for WatchOptions {
    fn default() -> Self {
        WatchOptions {
            idle_timeout: Duration::from_secs(30),
            max_line: DEFAULT_MAX_LINE,
            keepalive: Some(Duration::from_secs(15)),
            read_budget: 256 * 1024,
            accept: "application/json",
        }
    }
}

pub struct WatchStream {
    socket: TcpStream,
    token: Token,
    tls: Option<rustls::ClientConnection>,
    connected: bool,
    /// Plain HTTP only: the request bytes not yet written (TLS buffers them in rustls).
    pending: Vec<u8>,
    decoder: ResponseDecoder,
    idle_timeout: Duration,
    last_activity: Time,
    ended: bool,
    bytes_received: u64,
    read_budget: usize,
    /// What a socket read fills. Over TLS, ciphertext not yet handed to rustls is
    /// `buf[wire_at..wire_end]`: rustls reads at most 4 KiB per `read_tls` from a socket, so
    /// the socket is read here in large reads and rustls fed from memory (a copy, not a
    /// syscall); the plaintext is decoded where rustls holds it.
    buf: Vec<u8>,
    wire_at: usize,
    wire_end: usize,
    /// `read` calls on the socket, `WouldBlock` answers included (the mechanism tests count
    /// them).
    socket_reads: u64,
    /// Readiness events are off ([`WatchStream::pause`]).
    paused: bool,
    /// This watch was sent on the previous watch's connection, and no byte of its answer has
    /// arrived yet: the server may have closed that connection as we sent it.
    awaiting_reused: bool,
}

impl WatchStream {
    /// Starts connecting (non-blocking) and queues the GET. `path_and_query` is appended to
    /// the connection's base path; `authorization` is a full header value (`Bearer …`).
    /// Resolving a DNS host name is the one blocking step (IP literals do not block).
    pub fn open(
        conn: &Connection,
        path_and_query: &str,
        authorization: Option<&str>,
        registry: &Registry,
        token: Token,
        now: Time,
        options: &WatchOptions,
    ) -> Result<WatchStream, OpenError> {
        let addr = resolve(&conn.host, conn.port)?;
        let mut socket =
            TcpStream::connect(addr).map_err(|e| OpenError(format!("connect {addr}: {e}")))?;
        socket
            .set_nodelay(true)
            .map_err(|e| OpenError(format!("TCP_NODELAY: {e}")))?;
        if let Some(idle) = options.keepalive {
            if let Err(e) = keepalive::enable(&socket, idle) {
                log::debug!("TCP keepalive not enabled on the watch to {addr}: {e}");
            }
        }
        let request = request_bytes(conn, path_and_query, authorization, options.accept);
        let (tls, pending) = match conn.scheme {
            Scheme::Http => (None, request),
            Scheme::Https => {
                let config = conn
                    .tls
                    .clone()
                    .ok_or_else(|| OpenError("https without a TLS configuration".into()))?;
                let server_name = rustls::pki_types::ServerName::try_from(conn.host.clone())
                    .map_err(|e| OpenError(format!("server name {:?}: {e}", conn.host)))?;
                let mut tls = rustls::ClientConnection::new(http1_only(config), server_name)
                    .map_err(|e| OpenError(format!("TLS: {e}")))?;
                tls.writer()
                    .write_all(&request)
                    .map_err(|e| OpenError(format!("TLS: {e}")))?;
                (Some(tls), Vec::new())
            }
        };
        registry
            .register(&mut socket, token, Interest::READABLE | Interest::WRITABLE)
            .map_err(|e| OpenError(format!("register with the poll: {e}")))?;
        Ok(WatchStream {
            socket,
            token,
            tls,
            connected: false,
            pending,
            decoder: ResponseDecoder::new(options.max_line),
            idle_timeout: options.idle_timeout,
            last_activity: now,
            ended: false,
            bytes_received: 0,
            read_budget: options.read_budget.max(1),
            buf: vec![0; READ_CHUNK],
            wire_at: 0,
            wire_end: 0,
            socket_reads: 0,
            paused: false,
            awaiting_reused: false,
        })
    }

    /// The last response ended where its framing said, with nothing after it, on a keep-alive
    /// connection: [`WatchStream::rewatch`] may send the next watch on it.
    pub fn is_reusable(&self) -> bool {
        self.ended && self.decoder.connection_reusable()
    }

    /// Sends the next watch on this stream's connection, which the last response left idle
    /// (see [`WatchStream::is_reusable`]); the token stays the same and readiness events are
    /// on again. `Err` leaves the stream unusable: close it and [`WatchStream::open`] anew.
    pub fn rewatch(
        &mut self,
        conn: &Connection,
        path_and_query: &str,
        authorization: Option<&str>,
        registry: &Registry,
        now: Time,
        options: &WatchOptions,
    ) -> Result<(), OpenError> {
        if !self.is_reusable() {
            return Err(OpenError("the connection is not idle".into()));
        }
        let request = request_bytes(conn, path_and_query, authorization, options.accept);
        match &mut self.tls {
            Some(tls) => tls
                .writer()
                .write_all(&request)
                .map_err(|e| OpenError(format!("TLS: {e}")))?,
            None => self.pending = request,
        }
        self.decoder.reset();
        self.ended = false;
        self.awaiting_reused = true;
        self.idle_timeout = options.idle_timeout;
        self.last_activity = now;
        // The socket is writable (it was idle): send now rather than wait for an event that
        // edge-triggered readiness will not repeat.
        self.flush()
            .map_err(|e| OpenError(format!("write on the kept connection: {e}")))?;
        if self.paused {
            self.resume(registry)
                .map_err(|e| OpenError(format!("register with the poll: {e}")))?;
        }
        Ok(())
    }

    /// A watch sent on a kept connection ended before any byte of its answer: the server
    /// closed the idle connection as the request went out (a race every keep-alive client
    /// meets). Nothing was missed; open a new connection at once rather than back off.
    pub fn lost_kept_connection(&self) -> bool {
        self.ended && self.awaiting_reused
    }

    pub fn token(&self) -> Token {
        self.token
    }

    pub fn is_ended(&self) -> bool {
        self.ended
    }

    /// The status of the current response once its head has been read; `None` before it
    /// and once the response has ended.
    pub fn response_status(&self) -> Option<u16> {
        if self.ended {
            return None;
        }
        self.decoder.status()
    }

    pub fn bytes_received(&self) -> u64 {
        self.bytes_received
    }

    /// The bytes of a frame the last `on_ready` delivered (`None` for an earlier call's: each
    /// call's frames reuse the buffer of the call before).
    pub fn frame(&self, span: &FrameSpan) -> Option<&[u8]> {
        self.decoder.frame(span)
    }

    /// The frames delivered so far have been read (the next `on_ready` does it too): their
    /// buffer is emptied now, and freed if a large read grew it.
    pub fn release_frames(&mut self) {
        self.decoder.release_frames();
    }

    /// `read` calls made on the socket so far, those answered `WouldBlock` included.
    pub fn socket_reads(&self) -> u64 {
        self.socket_reads
    }

    /// When the stream is presumed dead if no byte arrives before.
    pub fn idle_deadline(&self) -> Time {
        self.last_activity + self.idle_timeout
    }

    /// Ends the stream with `IdleTimeout` if its deadline has passed.
    pub fn check_idle(&mut self, now: Time, out: &mut Vec<WatchItem>) {
        if !self.ended && now >= self.idle_deadline() {
            self.end(out, StreamEnd::IdleTimeout);
        }
    }

    /// Answers a readiness event for this stream's token: connects, writes what is pending,
    /// reads and decodes until the socket would block — or until `read_budget` bytes were
    /// decoded, so one fast stream cannot starve the loop's timers. On `MoreToRead` the caller
    /// must call again soon (after its due timers) without waiting for a new event: with
    /// edge-triggered readiness, none will come for bytes already there. The frames it
    /// delivers (`WatchItem::Frame`) are read with [`WatchStream::frame`] before the next call.
    pub fn on_ready(&mut self, now: Time, out: &mut Vec<WatchItem>) -> Drain {
        // The frames the last call delivered have been read (its caller reads them before it
        // calls again): this call's reuse their buffer.
        self.decoder.release_frames();
        if self.ended {
            return Drain::Done;
        }
        if !self.connected {
            match self.check_connected() {
                Ok(true) => self.connected = true,
                Ok(false) => return Drain::Done,
                Err(e) => {
                    self.end(out, StreamEnd::Broken(format!("connect: {e}")));
                    return Drain::Done;
                }
            }
        }
        if let Err(e) = self.flush() {
            self.end(out, StreamEnd::Broken(format!("write: {e}")));
            return Drain::Done;
        }
        let result = if self.tls.is_some() {
            self.read_tls(now, out)
        } else {
            self.read_plain(now, out)
        };
        if self.decoder.is_ended() {
            self.ended = true;
        }
        match result {
            Ok(drain) if !self.ended => drain,
            Ok(_) => Drain::Done,
            Err(end) => {
                self.end(out, end);
                Drain::Done
            }
        }
    }

    /// Stops readiness events for this stream (see [`WatchStream::resume`]): the owner reads it
    /// on a timer instead, so events that arrive close together are read in one wake-up.
    pub fn pause(&mut self, registry: &Registry) -> io::Result<()> {
        registry.deregister(&mut self.socket)?;
        self.paused = true;
        Ok(())
    }

    /// Readiness events again, with the stream's token; bytes already waiting are reported at
    /// once by the next poll.
    pub fn resume(&mut self, registry: &Registry) -> io::Result<()> {
        let interest = self.interest();
        registry.register(&mut self.socket, self.token, interest)?;
        self.paused = false;
        Ok(())
    }

    /// What to be woken for. Registering reports the current readiness at once, and a
    /// connected socket with nothing to send is writable: asking for writability then would
    /// cost a wake-up that reads nothing.
    fn interest(&self) -> Interest {
        let unsent = !self.connected
            || !self.pending.is_empty()
            || self.tls.as_ref().is_some_and(|t| t.wants_write());
        if unsent {
            Interest::READABLE | Interest::WRITABLE
        } else {
            Interest::READABLE
        }
    }

    /// Deregisters; the socket closes when the stream is dropped.
    pub fn close(mut self, registry: &Registry) {
        let _ = registry.deregister(&mut self.socket);
    }

    fn end(&mut self, out: &mut Vec<WatchItem>, end: StreamEnd) {
        if !self.ended {
            self.ended = true;
            out.push(WatchItem::Ended(end));
        }
    }

    fn check_connected(&mut self) -> io::Result<bool> {
        if let Some(e) = self.socket.take_error()? {
            return Err(e);
        }
        match self.socket.peer_addr() {
            Ok(_) => Ok(true),
            Err(e) if e.kind() == io::ErrorKind::NotConnected => Ok(false),
            Err(e) => Err(e),
        }
    }
}

fn resolve(host: &str, port: u16) -> Result<SocketAddr, OpenError> {
    (host, port)
        .to_socket_addrs()
        .map_err(|e| OpenError(format!("resolve {host}: {e}")))?
        .next()
        .ok_or_else(|| OpenError(format!("resolve {host}: no address")))
}

/// The watch connection speaks HTTP/1.1 only (see the module notes).
fn http1_only(config: Arc<rustls::ClientConfig>) -> Arc<rustls::ClientConfig> {
    if config.alpn_protocols.iter().all(|p| p == b"http/1.1") {
        return config;
    }
    let mut own = (*config).clone();
    own.alpn_protocols = vec![b"http/1.1".to_vec()];
    Arc::new(own)
}

fn request_bytes(
    conn: &Connection,
    path_and_query: &str,
    authorization: Option<&str>,
    accept: &str,
) -> Vec<u8> {
    let host = if conn.host.contains(':') {
        format!("[{}]", conn.host)
    } else {
        conn.host.clone()
    };
    let default_port = match conn.scheme {
        Scheme::Http => 80,
        Scheme::Https => 443,
    };
    let host_header = if conn.port == default_port {
        host
    } else {
        format!("{host}:{}", conn.port)
    };
    let mut req = format!(
        "GET {}{} HTTP/1.1\r\nHost: {}\r\nUser-Agent: node-lifecycled/{}\r\nAccept: {}\r\n",
        conn.base_path,
        path_and_query,
        host_header,
        env!("CARGO_PKG_VERSION"),
        accept.replace(['\r', '\n'], ""),
    );
    if let Some(auth) = authorization {
        // A header value may not span lines: drop anything that would.
        let auth: String = auth.chars().filter(|c| *c != '\r' && *c != '\n').collect();
        req.push_str("Authorization: ");
        req.push_str(&auth);
        req.push_str("\r\n");
    }
    req.push_str("\r\n");
    req.into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::connection::Credentials;

    fn conn(scheme: Scheme, host: &str, port: u16, base: &str) -> Connection {
        Connection {
            scheme,
            host: host.into(),
            port,
            base_path: base.into(),
            tls: None,
            credentials: Credentials::None,
        }
    }

    #[test]
    fn request_carries_host_agent_accept_and_authorization() {
        let c = conn(Scheme::Https, "10.0.0.1", 6443, "/k8s");
        let req = String::from_utf8(request_bytes(
            &c,
            "/api/v1/nodes?watch=true",
            Some("Bearer abc\r\nX: y"),
            "application/json",
        ))
        .unwrap();
        assert_eq!(
            req,
            format!(
                "GET /k8s/api/v1/nodes?watch=true HTTP/1.1\r\nHost: 10.0.0.1:6443\r\nUser-Agent: node-lifecycled/{}\r\nAccept: application/json\r\nAuthorization: Bearer abcX: y\r\n\r\n",
                env!("CARGO_PKG_VERSION")
            )
        );
        let v6 = conn(Scheme::Https, "::1", 443, "");
        let req = String::from_utf8(request_bytes(&v6, "/x", None, "application/json")).unwrap();
        assert!(req.contains("\r\nHost: [::1]\r\n"), "{req}");
    }

    #[test]
    fn h2_is_never_offered_on_a_watch_connection() {
        let roots = rustls::RootCertStore::empty();
        let mut config = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        let fixed = http1_only(Arc::new(config));
        assert_eq!(fixed.alpn_protocols, vec![b"http/1.1".to_vec()]);
    }
}
