//! The metrics endpoint: a deliberately tiny HTTP/1.1 server driven by the daemon's event loop
//! (no thread of its own), serving `/metrics`, `/healthz` and `/readyz` on a loopback address.
//!
//! It shares the loop with the watches that keep nodes alive, so it must never hold the loop up
//! or let a client hold resources: every read and write is non-blocking, the request head is
//! capped ([`Limits::max_head`]), a connection carries one request and is closed
//! (`Connection: close`), a connection that has not finished by [`Limits::deadline`] is dropped
//! (slowloris), and connections beyond [`Limits::max_connections`] are accepted and closed at
//! once rather than left queued in the kernel.
//!
//! The daemon routes to it with little code: register it once, pass it every event of its
//! source kind, call [`MetricsServer::on_timer`] when [`MetricsServer::next_deadline`] is due.
//! What it serves comes from an [`Endpoints`] the daemon implements; to lend `&self` while the
//! server is a field of the same struct, take the server out (`Option::take`) for the call.

use std::collections::HashMap;
use std::hash::Hash;
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr};
use std::time::Duration;

use log::{debug, warn};
use mio::net::{TcpListener, TcpStream};
use mio::{Interest, Token};

use super::LoopControl;
use crate::observe::metrics::CONTENT_TYPE;
use crate::observe::{LeaderSnapshot, LoopSnapshot};
use crate::time::Time;
use crate::time::TimerHeap;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Longest request head (request line and headers); longer gets 431.
    pub max_head: usize,
    /// From accept to the last byte of the response: a slower client is dropped.
    pub deadline: Duration,
    /// Open connections; one more first closes an answered connection still waiting for the
    /// client's close, and without one is accepted and closed at once.
    pub max_connections: usize,
    /// After the response, how long to wait for the client to close before dropping the
    /// socket (closing with unread input would reset the connection and could lose the answer).
    pub linger: Duration,
    /// How often the server's heartbeat timer runs; it proves the loop turns.
    pub heartbeat: Duration,
    /// `/healthz` fails when the heartbeat last ran longer ago than this.
    pub liveness_window: Duration,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_head: 8 * 1024,
            deadline: Duration::from_secs(5),
            max_connections: 16,
            linger: Duration::from_secs(1),
            heartbeat: Duration::from_secs(1),
            liveness_window: Duration::from_secs(10),
        }
    }
}

/// Whether the daemon is ready to act, for `/readyz`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Readiness {
    /// The initial list of nodes, leases and pods is not complete.
    NotSynced,
    /// Synced and acting (holds the lease, or runs without leader election).
    Leader,
    /// Synced, standing by while another instance holds the lease.
    Follower { holder: Option<String> },
}

impl Readiness {
    /// Not ready before the initial sync; then leader or follower as the lease says.
    pub(crate) fn of(synced: bool, leadership: &LeaderSnapshot) -> Readiness {
        if !synced {
            Readiness::NotSynced
        } else if leadership.is_leader {
            Readiness::Leader
        } else {
            Readiness::Follower {
                holder: leadership.holder.clone(),
            }
        }
    }
}

/// What the daemon serves.
pub trait Endpoints {
    /// The `/metrics` body (Prometheus text format). The loop's own figures come with the
    /// call: the loop is lent to the server while it serves.
    fn metrics(&self, now: Time, event_loop: LoopSnapshot) -> String;
    fn readiness(&self) -> Readiness;
}

/// Counters for the state dump and tests.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ServerStats {
    pub accepted: u64,
    /// Closed at once because [`Limits::max_connections`] were open.
    pub refused: u64,
    /// Closed at the deadline before the response was out.
    pub timed_out: u64,
    /// Responses sent, by any status.
    pub responses: u64,
}

pub struct MetricsServer {
    listener: TcpListener,
    listener_token: Option<Token>,
    local_addr: SocketAddr,
    conns: HashMap<Token, Conn>,
    deadlines: TimerHeap<Token>,
    limits: Limits,
    last_heartbeat: Time,
    next_heartbeat: Time,
    stats: ServerStats,
}

struct Conn {
    stream: TcpStream,
    phase: Phase,
    head: Vec<u8>,
    out: Vec<u8>,
    written: usize,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Phase {
    ReadingHead,
    /// The response waits for the socket to accept more (registered WRITABLE).
    Writing,
    /// Response sent and our side shut: read and discard until the client closes.
    Lingering,
}

/// What a connection needs after a turn.
enum Next {
    Keep,
    Close,
}

impl MetricsServer {
    /// Binds `addr`, which must be a loopback address: the endpoint has no authentication.
    pub fn bind(addr: SocketAddr, limits: Limits, now: Time) -> io::Result<MetricsServer> {
        if !addr.ip().is_loopback() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("metrics address {addr} is not a loopback address"),
            ));
        }
        let listener = TcpListener::bind(addr)
            .map_err(|e| io::Error::new(e.kind(), format!("metrics address {addr}: {e}")))?;
        let local_addr = listener.local_addr()?;
        Ok(MetricsServer {
            listener,
            listener_token: None,
            local_addr,
            conns: HashMap::new(),
            deadlines: TimerHeap::new(),
            limits,
            last_heartbeat: now,
            next_heartbeat: now + limits.heartbeat,
            stats: ServerStats::default(),
        })
    }

    /// Registers the listener as `kind`; its connections get the same kind.
    pub fn register<S: Clone, T: Eq + Hash + Clone>(
        &mut self,
        lp: &mut LoopControl<S, T>,
        kind: S,
    ) -> io::Result<()> {
        let token = lp.register(&mut self.listener, Interest::READABLE, kind)?;
        self.listener_token = Some(token);
        Ok(())
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    pub fn stats(&self) -> ServerStats {
        self.stats
    }

    /// When [`MetricsServer::on_timer`] must run next (heartbeat or a connection deadline).
    pub fn next_deadline(&self) -> Option<Time> {
        Some(match self.deadlines.next_deadline() {
            Some(at) => at.min(self.next_heartbeat),
            None => self.next_heartbeat,
        })
    }

    /// A source of this server is ready: the listener (accept) or a connection (read/write).
    /// `kind` is what new connections are registered as.
    pub fn on_event<S: Clone, T: Eq + Hash + Clone>(
        &mut self,
        lp: &mut LoopControl<S, T>,
        token: Token,
        kind: S,
        endpoints: &dyn Endpoints,
    ) {
        if Some(token) == self.listener_token {
            self.accept(lp, kind, endpoints);
            return;
        }
        self.serve(lp, token, endpoints);
    }

    /// One turn of a connection: read the head and answer, continue writing, or linger.
    fn serve<S: Clone, T: Eq + Hash + Clone>(
        &mut self,
        lp: &mut LoopControl<S, T>,
        token: Token,
        endpoints: &dyn Endpoints,
    ) {
        let now = lp.now();
        let health = self.health(now);
        let Some(conn) = self.conns.get_mut(&token) else {
            return;
        };
        let at = Moment {
            now,
            health,
            event_loop: lp.snapshot(),
        };
        let before = conn.phase;
        let next = match conn.phase {
            Phase::ReadingHead => conn.read_head(&self.limits, &at, endpoints),
            Phase::Writing => conn.write_out(),
            Phase::Lingering => conn.discard_input(),
        };
        let after = conn.phase;
        if before != Phase::Lingering && after == Phase::Lingering {
            self.stats.responses += 1;
            let linger_until = now + self.limits.linger;
            let deadline = self.deadlines.deadline(&token).unwrap_or(linger_until);
            self.deadlines.schedule(token, deadline.min(linger_until));
        }
        if let Next::Close = next {
            self.close(lp, token);
            return;
        }
        // Interest follows the phase: WRITABLE while the response waits for room, READABLE
        // otherwise (the head, then the client's close).
        let interest = match (before, after) {
            (Phase::Writing, Phase::Writing) | (_, Phase::ReadingHead) => return,
            (_, Phase::Writing) => Interest::WRITABLE,
            (Phase::Writing, Phase::Lingering) => Interest::READABLE,
            (_, Phase::Lingering) => return,
        };
        if let Err(e) = lp.reregister(&mut conn.stream, token, interest) {
            debug!("metrics: reregister: {e}");
            self.close(lp, token);
        }
    }

    /// Runs the heartbeat and drops connections past their deadline.
    pub fn on_timer<S: Clone, T: Eq + Hash + Clone>(
        &mut self,
        lp: &mut LoopControl<S, T>,
        now: Time,
    ) {
        if now >= self.next_heartbeat {
            self.last_heartbeat = now;
            self.next_heartbeat = now + self.limits.heartbeat;
        }
        while let Some((token, _)) = self.deadlines.pop_due(now) {
            if let Some(conn) = self.conns.get(&token) {
                if conn.phase != Phase::Lingering {
                    self.stats.timed_out += 1;
                    debug!("metrics: connection closed at its deadline");
                }
                self.close(lp, token);
            }
        }
    }

    /// Deregisters everything (shutdown).
    pub fn close_all<S: Clone, T: Eq + Hash + Clone>(&mut self, lp: &mut LoopControl<S, T>) {
        let tokens: Vec<Token> = self.conns.keys().copied().collect();
        for token in tokens {
            self.close(lp, token);
        }
        if let Some(token) = self.listener_token.take() {
            lp.deregister(&mut self.listener, token);
        }
    }

    /// `/healthz`: did the loop run the heartbeat recently? Events are dispatched before timers,
    /// so after the loop was stuck in a handler the first request sees the old heartbeat.
    fn health(&self, now: Time) -> Health {
        let since = now - self.last_heartbeat;
        if since <= self.limits.liveness_window {
            Health::Alive
        } else {
            Health::Stalled(since)
        }
    }

    fn accept<S: Clone, T: Eq + Hash + Clone>(
        &mut self,
        lp: &mut LoopControl<S, T>,
        kind: S,
        endpoints: &dyn Endpoints,
    ) {
        // Edge-triggered: accept until the backlog is empty or the next event would never come.
        loop {
            let mut stream = match self.listener.accept() {
                Ok((stream, _)) => stream,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::ConnectionAborted => continue,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    // Out of descriptors and the like: what is queued waits for the next client.
                    warn!("metrics: accept failed: {e}");
                    return;
                }
            };
            self.stats.accepted += 1;
            if self.conns.len() >= self.limits.max_connections {
                // An answered connection only waits for the client's close: it makes room.
                let answered = self
                    .conns
                    .iter()
                    .find(|(_, c)| c.phase == Phase::Lingering)
                    .map(|(t, _)| *t);
                if let Some(answered) = answered {
                    self.close(lp, answered);
                }
            }
            if self.conns.len() >= self.limits.max_connections {
                self.stats.refused += 1;
                debug!(
                    "metrics: {} connections open, closing a new one",
                    self.conns.len()
                );
                drop(stream);
                continue;
            }
            let token = match lp.register(&mut stream, Interest::READABLE, kind.clone()) {
                Ok(token) => token,
                Err(e) => {
                    warn!("metrics: cannot register a connection: {e}");
                    continue;
                }
            };
            self.deadlines
                .schedule(token, lp.now() + self.limits.deadline);
            self.conns.insert(
                token,
                Conn {
                    stream,
                    phase: Phase::ReadingHead,
                    head: Vec::new(),
                    out: Vec::new(),
                    written: 0,
                },
            );
            // The request is often there already; its readiness was reported before the
            // registration and will not be again. Serving now also keeps the `/healthz` verdict
            // about the turn the client arrived in, not a later one.
            self.serve(lp, token, endpoints);
        }
    }

    fn close<S: Clone, T: Eq + Hash + Clone>(&mut self, lp: &mut LoopControl<S, T>, token: Token) {
        self.deadlines.cancel(&token);
        if let Some(mut conn) = self.conns.remove(&token) {
            lp.deregister(&mut conn.stream, token);
        }
    }
}

/// What a request is answered with, besides the daemon's state.
struct Moment {
    now: Time,
    health: Health,
    event_loop: LoopSnapshot,
}

#[derive(Clone, Copy)]
enum Health {
    Alive,
    Stalled(Duration),
}

impl Conn {
    fn read_head(&mut self, limits: &Limits, at: &Moment, endpoints: &dyn Endpoints) -> Next {
        let mut buf = [0u8; 2048];
        loop {
            // One byte past the limit is enough to know it was exceeded; never buffer more.
            let room = (limits.max_head + 1 - self.head.len()).min(buf.len());
            match self.stream.read(&mut buf[..room]) {
                Ok(0) => return Next::Close,
                Ok(n) => self.head.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Next::Keep,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => return Next::Close,
            }
            let mut headers = [httparse::EMPTY_HEADER; 64];
            let mut request = httparse::Request::new(&mut headers);
            let response = match request.parse(&self.head) {
                Ok(httparse::Status::Complete(len)) if len > limits.max_head => {
                    Response::text(431, "request head too large\n")
                }
                Ok(httparse::Status::Complete(_)) => {
                    route(request.method, request.path, at, endpoints)
                }
                Ok(httparse::Status::Partial) if self.head.len() > limits.max_head => {
                    Response::text(431, "request head too large\n")
                }
                Ok(httparse::Status::Partial) => continue,
                Err(httparse::Error::TooManyHeaders) => {
                    Response::text(431, "too many header fields\n")
                }
                Err(e) => Response::text(400, &format!("bad request: {e}\n")),
            };
            self.out = response.into_bytes();
            self.head = Vec::new();
            return self.write_out();
        }
    }

    fn write_out(&mut self) -> Next {
        while self.written < self.out.len() {
            match self.stream.write(&self.out[self.written..]) {
                Ok(0) => return Next::Close,
                Ok(n) => self.written += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    self.phase = Phase::Writing;
                    return Next::Keep;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return Next::Close,
            }
        }
        if self.stream.shutdown(Shutdown::Write).is_err() {
            return Next::Close;
        }
        self.phase = Phase::Lingering;
        // Input may already be waiting (an oversized head, a pipelined request): drain it now,
        // edge-triggered readiness would not announce it again.
        self.discard_input()
    }

    fn discard_input(&mut self) -> Next {
        let mut buf = [0u8; 4096];
        loop {
            match self.stream.read(&mut buf) {
                Ok(0) => return Next::Close,
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Next::Keep,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return Next::Close,
            }
        }
    }
}

fn route(
    method: Option<&str>,
    path: Option<&str>,
    at: &Moment,
    endpoints: &dyn Endpoints,
) -> Response {
    if method != Some("GET") {
        let mut r = Response::text(405, "only GET is served\n");
        r.extra_header = Some("Allow: GET");
        return r;
    }
    let path = path.unwrap_or("/");
    let path = path.split_once('?').map_or(path, |(p, _)| p);
    match path {
        "/metrics" => Response {
            status: 200,
            content_type: CONTENT_TYPE,
            extra_header: None,
            body: endpoints.metrics(at.now, at.event_loop),
        },
        "/healthz" => match at.health {
            Health::Alive => Response::text(200, "ok\n"),
            Health::Stalled(since) => Response::text(
                503,
                &format!(
                    "event loop stalled: last turn {:.1}s ago\n",
                    since.as_secs_f64()
                ),
            ),
        },
        "/readyz" => match endpoints.readiness() {
            Readiness::NotSynced => Response::text(503, "not ready: caches not synced\n"),
            Readiness::Leader => Response::text(200, "ready: leader\n"),
            Readiness::Follower { holder: Some(h) } => {
                Response::text(200, &format!("ready: follower (leader {h})\n"))
            }
            Readiness::Follower { holder: None } => Response::text(200, "ready: follower\n"),
        },
        _ => Response::text(404, "not found: /metrics, /healthz, /readyz\n"),
    }
}

struct Response {
    status: u16,
    content_type: &'static str,
    extra_header: Option<&'static str>,
    body: String,
}

impl Response {
    fn text(status: u16, body: &str) -> Response {
        Response {
            status,
            content_type: "text/plain; charset=utf-8",
            extra_header: None,
            body: body.to_string(),
        }
    }

    fn into_bytes(self) -> Vec<u8> {
        let reason = match self.status {
            200 => "OK",
            400 => "Bad Request",
            404 => "Not Found",
            405 => "Method Not Allowed",
            431 => "Request Header Fields Too Large",
            503 => "Service Unavailable",
            _ => "",
        };
        let mut head = format!(
            "HTTP/1.1 {} {reason}\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\n",
            self.status,
            self.content_type,
            self.body.len()
        );
        if let Some(h) = self.extra_header {
            head.push_str(h);
            head.push_str("\r\n");
        }
        head.push_str("\r\n");
        let mut bytes = head.into_bytes();
        bytes.extend_from_slice(self.body.as_bytes());
        bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readiness_is_not_synced_then_leader_or_follower_with_the_holder() {
        let mut l = LeaderSnapshot {
            enabled: true,
            identity: "me".to_string(),
            holder: Some("other".to_string()),
            is_leader: false,
            renew_age: None,
        };
        assert_eq!(Readiness::of(false, &l), Readiness::NotSynced);
        assert_eq!(
            Readiness::of(true, &l),
            Readiness::Follower {
                holder: Some("other".to_string())
            }
        );
        l.is_leader = true;
        assert_eq!(Readiness::of(true, &l), Readiness::Leader);
        assert_eq!(
            Readiness::of(true, &LeaderSnapshot::disabled("me".to_string())),
            Readiness::Leader
        );
    }
}
