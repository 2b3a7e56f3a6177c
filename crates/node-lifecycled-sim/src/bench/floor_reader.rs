//! The floor of the steady state's CPU per Lease event, measured where the daemon's is: a bare
//! reader of the same Lease watch, on the same simulator, in a window beside the steady one,
//! while the same kubelets renew and the daemon runs.
//!
//! Floor 2 (`examples/lease_event_floor.rs`) times the bytes of a renewal read from memory. Here
//! the costs around them are in the figure too, as they are in the daemon's: the kernel's
//! receive of one TCP segment per event (the server flushes every watch event), the wake-ups
//! of reading on a grid, and caches swept by the simulator and the kernel between two reads.
//! The reader does only what any reader of this stream must: the response's head, its chunks,
//! each frame found by its length, the Lease's name and renewTime read by their field paths,
//! and one integer stored in a slot found by a hash of the name. It reads the way the daemon
//! reads this watch, with the daemon's own `CoalescePeriod` (`runtime/informer/watch_pause.rs`):
//! on readiness events until a read finds a trickle (1 to 63 events), then with the socket
//! deregistered, on a grid of 45 ms widened (doubled, up to 180 ms) while reads find fewer than
//! 12 events on average and narrowed while they find more than 30; a read that finds nothing or
//! a burst goes back to readiness events.
//! So it wakes up about as often as the daemon's Lease watch does, and what the daemon spends
//! per event above this reader is the daemon's own work: decode, store, controllers, timers.
//!
//! Against the real API server (`node-lifecycled-sim floor-reader --kubeconfig`, which
//! `scripts/bench-real-apiserver.py --floor` runs beside the daemon's steady window) it reads
//! over TLS with the daemon's own TLS settings (rustls, the kubeconfig's CA and client
//! certificate), and both the Lease and the Node watch, whose events the daemon's figure counts:
//! a Node's frame is found and its name read, nothing else. Several watches are read at every
//! wake-up, as the daemon's quieter watch borrows the wake-ups of its busiest.

use std::collections::HashMap;
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use mio::net::TcpStream;
use mio::{Events, Interest, Poll, Token};
use node_lifecycled::kube::{Connection, Credentials, Scheme};
use node_lifecycled::runtime::WATCH_COALESCE;
use node_lifecycled::runtime::informer::{COALESCE_MAX_EVENTS, CoalescePeriod};

mod watch_stream;
pub use watch_stream::name_and_renewal;
use watch_stream::{Response, node_name};

/// The daemon's default `watch_coalesce`: the reader's grid unless told otherwise.
pub const GRID: Duration = WATCH_COALESCE;

/// What the reader did in its measured window.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FloorFigures {
    /// As measured, from the first reading of the reader's CPU to the last.
    pub window: Duration,
    /// Watch frames read (renewals, node status updates, the rare bookmark).
    pub events: u64,
    /// Frames whose object was read (a Lease's name and renewTime, a Node's name): a slot
    /// written.
    pub objects: u64,
    pub reads: u64,
    pub wakeups: u64,
    /// The reader thread's time on a CPU (`/proc/thread-self/schedstat`).
    pub cpu: Duration,
}

impl FloorFigures {
    pub fn us_per_event(&self) -> Option<f64> {
        (self.events > 0).then(|| self.cpu.as_secs_f64() * 1e6 / self.events as f64)
    }

    pub fn events_per_s(&self) -> f64 {
        self.events as f64 / self.window.as_secs_f64().max(1e-9)
    }

    pub fn wakeups_per_s(&self) -> f64 {
        self.wakeups as f64 / self.window.as_secs_f64().max(1e-9)
    }

    pub fn events_per_read(&self) -> f64 {
        self.events as f64 / (self.reads.max(1)) as f64
    }
}

/// A watched kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FloorWatch {
    Leases,
    Nodes,
}

impl FloorWatch {
    fn path(self) -> &'static str {
        match self {
            FloorWatch::Leases => {
                "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases?watch=true"
            }
            FloorWatch::Nodes => "/api/v1/nodes?watch=true",
        }
    }
}

/// Where the watches are read from, and how the reader proves who it is.
pub struct FloorEndpoint {
    addr: SocketAddr,
    host: String,
    base_path: String,
    tls: Option<Arc<rustls::ClientConfig>>,
    token: Option<String>,
}

impl FloorEndpoint {
    /// Plain HTTP with a bearer token (the bench's simulator).
    pub fn plain(addr: SocketAddr, token: &str) -> FloorEndpoint {
        FloorEndpoint {
            addr,
            host: addr.to_string(),
            base_path: String::new(),
            tls: None,
            token: Some(token.to_string()),
        }
    }

    /// The server, TLS settings and credentials of a kubeconfig's current context, read by the
    /// daemon's own code.
    pub fn from_kubeconfig(path: &Path) -> Result<FloorEndpoint, String> {
        let c = Connection::from_kubeconfig(path, None, false).map_err(|e| e.to_string())?;
        let token = match &c.credentials {
            Credentials::None => None,
            Credentials::Token(t) => Some(t.clone()),
            Credentials::TokenFile(file) => Some(
                std::fs::read_to_string(file)
                    .map_err(|e| format!("{}: cannot read the token: {e}", file.display()))?
                    .trim()
                    .to_string(),
            ),
        };
        let addr = (c.host.as_str(), c.port)
            .to_socket_addrs()
            .map_err(|e| format!("{}: cannot resolve: {e}", c.host))?
            .next()
            .ok_or_else(|| format!("{}: no address", c.host))?;
        Ok(FloorEndpoint {
            addr,
            host: c.host.clone(),
            base_path: c.base_path.clone(),
            tls: match c.scheme {
                Scheme::Https => c.tls.clone(),
                Scheme::Http => None,
            },
            token,
        })
    }
}

/// Watches every Lease in `kube-node-lease` at `addr` (bearer `token`) on this thread, reads
/// for `warmup` (the current state's ADDED events, the grid settling), then measures `window`.
pub fn read_lease_watch(
    addr: SocketAddr,
    token: &str,
    warmup: Duration,
    window: Duration,
) -> Result<FloorFigures, String> {
    read_watches(
        &FloorEndpoint::plain(addr, token),
        &[FloorWatch::Leases],
        GRID,
        warmup,
        window,
    )
    .map_err(|e| format!("floor reader: {e}"))
}

/// One watch's connection and the response read from it so far.
struct WatchConnection {
    watch: FloorWatch,
    socket: TcpStream,
    tls: Option<rustls::ClientConnection>,
    response: Response,
    slots: HashMap<Vec<u8>, u64>,
}

impl WatchConnection {
    fn open(endpoint: &FloorEndpoint, watch: FloorWatch) -> Result<WatchConnection, String> {
        let addr = endpoint.addr;
        let mut socket = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(5))
            .map_err(|e| format!("cannot connect to {addr}: {e}"))?;
        socket
            .set_nodelay(true)
            .and_then(|()| socket.set_read_timeout(Some(Duration::from_secs(10))))
            .map_err(|e| format!("socket options: {e}"))?;
        let auth = match &endpoint.token {
            Some(t) => format!("Authorization: Bearer {t}\r\n"),
            None => String::new(),
        };
        let request = format!(
            "GET {}{} HTTP/1.1\r\nHost: {}\r\n{auth}\
             Accept: application/vnd.kubernetes.protobuf;stream=watch\r\n\r\n",
            endpoint.base_path,
            watch.path(),
            endpoint.host,
        );
        // The handshake and the request, blocking; then the stream is read without blocking.
        let tls = match &endpoint.tls {
            Some(config) => {
                let name = rustls::pki_types::ServerName::try_from(endpoint.host.clone())
                    .map_err(|e| format!("{}: not a server name: {e}", endpoint.host))?;
                let mut conn = rustls::ClientConnection::new(config.clone(), name)
                    .map_err(|e| format!("TLS: {e}"))?;
                let mut stream = rustls::Stream::new(&mut conn, &mut socket);
                stream
                    .write_all(request.as_bytes())
                    .and_then(|()| stream.flush())
                    .map_err(|e| format!("TLS handshake or request: {e}"))?;
                Some(conn)
            }
            None => {
                socket
                    .write_all(request.as_bytes())
                    .map_err(|e| format!("cannot send the request: {e}"))?;
                None
            }
        };
        socket
            .set_nonblocking(true)
            .map_err(|e| format!("socket options: {e}"))?;
        Ok(WatchConnection {
            watch,
            socket: TcpStream::from_std(socket),
            tls,
            response: Response::default(),
            slots: HashMap::new(),
        })
    }

    /// Reads until the socket has nothing more; each complete frame's object into its slot.
    /// Returns the frames read and the objects among them.
    fn read_available(&mut self, buf: &mut [u8]) -> Result<(u64, u64), String> {
        let (watch, slots) = (self.watch, &mut self.slots);
        let mut found = (0, 0);
        let mut frame = |f: &[u8]| {
            found.0 += 1;
            let object = match watch {
                FloorWatch::Leases => name_and_renewal(f),
                FloorWatch::Nodes => node_name(f).map(|name| (name, f.len() as u64)),
            };
            if let Some((name, value)) = object {
                found.1 += 1;
                match slots.get_mut(name) {
                    Some(slot) => *slot = value,
                    None => {
                        slots.insert(name.to_vec(), value);
                    }
                }
            }
        };
        let closed = match &mut self.tls {
            None => read_plain(&mut self.socket, buf, &mut self.response, &mut frame)?,
            Some(conn) => read_tls(conn, &mut self.socket, buf, &mut self.response, &mut frame)?,
        };
        if closed {
            return Err(format!("the server ended the {:?} watch", self.watch));
        }
        Ok(found)
    }
}

/// Reads `watches` at `endpoint` on this thread, on a grid of `grid` (widened and narrowed by
/// the daemon's rule), for `warmup` (the current state's ADDED events, the grid settling), then
/// measures `window`.
pub fn read_watches(
    endpoint: &FloorEndpoint,
    watches: &[FloorWatch],
    grid: Duration,
    warmup: Duration,
    window: Duration,
) -> Result<FloorFigures, String> {
    let mut conns = watches
        .iter()
        .map(|w| WatchConnection::open(endpoint, *w))
        .collect::<Result<Vec<_>, _>>()?;
    let mut poll = Poll::new().map_err(|e| format!("epoll: {e}"))?;
    let mut events = Events::with_capacity(8);
    let set_readiness = |poll: &Poll, conns: &mut [WatchConnection], on: bool| {
        conns
            .iter_mut()
            .enumerate()
            .try_for_each(|(i, c)| match on {
                true => poll
                    .registry()
                    .register(&mut c.socket, Token(i), Interest::READABLE),
                false => poll.registry().deregister(&mut c.socket),
            })
    };
    set_readiness(&poll, &mut conns, true).map_err(|e| format!("register: {e}"))?;

    let mut grid = Grid::new(grid);
    let mut buf = vec![0u8; 64 * 1024];
    let started = Instant::now();
    let measure_from = started + warmup;
    let end = measure_from + window;
    let mut measuring: Option<(FloorFigures, u64, Instant)> = None;
    let mut counts = FloorFigures::default();
    loop {
        let now = Instant::now();
        if measuring.is_none() && now >= measure_from {
            measuring = Some((counts.clone(), thread_cpu_ns()?, now));
        }
        if now >= end {
            break;
        }
        let wake_at = grid.next_read.unwrap_or(end).min(end);
        let wait = match measuring {
            None => wake_at.min(measure_from),
            Some(_) => wake_at,
        }
        .saturating_duration_since(now);
        poll.poll(&mut events, Some(wait))
            .map_err(|e| format!("epoll_wait: {e}"))?;
        counts.wakeups += 1;
        let on_grid = grid.next_read.is_some_and(|at| Instant::now() >= at);
        if !on_grid && events.is_empty() {
            continue;
        }
        let mut found = 0;
        for conn in &mut conns {
            let (frames, objects) = conn.read_available(&mut buf)?;
            found += frames;
            counts.objects += objects;
        }
        counts.events += found;
        counts.reads += 1;
        match grid.after_read(found as usize, Instant::now()) {
            Readiness::Deregister => set_readiness(&poll, &mut conns, false),
            Readiness::Register => set_readiness(&poll, &mut conns, true),
            Readiness::Keep => Ok(()),
        }
        .map_err(|e| format!("(de)register: {e}"))?;
    }
    let Some((at_start, cpu_start, window_start)) = measuring else {
        return Err("the window never started".into());
    };
    Ok(FloorFigures {
        window: window_start.elapsed(),
        events: counts.events - at_start.events,
        objects: counts.objects - at_start.objects,
        reads: counts.reads - at_start.reads,
        wakeups: counts.wakeups - at_start.wakeups,
        cpu: Duration::from_nanos(thread_cpu_ns()?.saturating_sub(cpu_start)),
    })
}

/// Reads a plain socket until it has nothing more. `true` when the server closed it.
fn read_plain(
    socket: &mut TcpStream,
    buf: &mut [u8],
    response: &mut Response,
    frame: &mut dyn FnMut(&[u8]),
) -> Result<bool, String> {
    loop {
        match socket.read(buf) {
            Ok(0) => return Ok(true),
            Ok(n) => response.feed(&buf[..n], frame)?,
            Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(false),
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(format!("read: {e}")),
        }
    }
}

/// Reads the TLS records a socket holds until it has nothing more, and their plaintext.
fn read_tls(
    conn: &mut rustls::ClientConnection,
    socket: &mut TcpStream,
    buf: &mut [u8],
    response: &mut Response,
    frame: &mut dyn FnMut(&[u8]),
) -> Result<bool, String> {
    loop {
        let closed = match conn.read_tls(socket) {
            Ok(0) => true,
            Ok(_) => false,
            Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(false),
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => return Err(format!("read: {e}")),
        };
        conn.process_new_packets()
            .map_err(|e| format!("TLS: {e}"))?;
        loop {
            match conn.reader().read(buf) {
                Ok(0) => return Ok(true),
                Ok(n) => response.feed(&buf[..n], frame)?,
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) => return Err(format!("TLS read: {e}")),
            }
        }
        if closed {
            return Ok(true);
        }
    }
}

/// `/proc/thread-self/schedstat`'s first field: this thread's time on a CPU, in ns.
fn thread_cpu_ns() -> Result<u64, String> {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .ok_or_else(|| "/proc/thread-self/schedstat is unreadable".to_string())
}

/// What a read means for the socket's readiness events.
enum Readiness {
    /// A trickle: read on the grid from now on.
    Deregister,
    /// A burst or nothing: read on arrival again.
    Register,
    Keep,
}

/// The daemon's rule for reading a watch on a grid (`coalesce_after_read` for one watch, with
/// the daemon's own `CoalescePeriod`).
struct Grid {
    base: Duration,
    next_read: Option<Instant>,
    period: CoalescePeriod,
    origin: Option<Instant>,
}

impl Grid {
    fn new(base: Duration) -> Grid {
        Grid {
            base,
            next_read: None,
            period: CoalescePeriod::default(),
            origin: None,
        }
    }

    fn after_read(&mut self, found: usize, now: Instant) -> Readiness {
        let trickle = (1..COALESCE_MAX_EVENTS).contains(&found);
        let paused = self.next_read.is_some();
        match (trickle, paused) {
            (true, true) => self.period.after_read(found),
            (true, false) => {}
            (false, _) => self.period.reset(),
        }
        if !trickle {
            self.next_read = None;
            return if paused {
                Readiness::Register
            } else {
                Readiness::Keep
            };
        }
        // The next point of the period's grid (the daemon's grids nest from one origin).
        let origin = *self.origin.get_or_insert(now);
        let period = self.period.period(self.base);
        let since = now.duration_since(origin).as_nanos();
        let points = since / period.as_nanos() + 1;
        self.next_read = Some(origin + period * points as u32);
        if paused {
            Readiness::Keep
        } else {
            Readiness::Deregister
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Resource;
    use crate::proto::{encode_object, enveloped_object, watch_frame};
    use serde_json::json;

    fn lease_frame(name: &str, renew: &str) -> Vec<u8> {
        let lease = json!({
            "metadata": {"name": name, "namespace": "kube-node-lease", "resourceVersion": "7",
                         "uid": "u"},
            "spec": {"holderIdentity": name, "leaseDurationSeconds": 40, "renewTime": renew}
        });
        let raw = encode_object(Resource::Leases, &lease).expect("a Lease encodes");
        watch_frame("MODIFIED", &enveloped_object(Resource::Leases, &raw))
    }

    /// The body as the server writes it: a chunk per frame.
    fn chunked(frames: &[Vec<u8>]) -> Vec<u8> {
        let mut out = b"HTTP/1.1 200 OK\r\nContent-Type: application/vnd.kubernetes.protobuf;stream=watch\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
        for f in frames {
            out.extend_from_slice(format!("{:x}\r\n", f.len()).as_bytes());
            out.extend_from_slice(f);
            out.extend_from_slice(b"\r\n");
        }
        out
    }

    fn read_in_pieces(bytes: &[u8], piece: usize) -> Result<Vec<(String, u64)>, String> {
        let mut response = Response::default();
        let mut seen = Vec::new();
        for part in bytes.chunks(piece) {
            response.feed(part, &mut |f| {
                let (name, secs) = name_and_renewal(f).expect("a renewal");
                seen.push((String::from_utf8(name.to_vec()).unwrap(), secs));
            })?;
        }
        Ok(seen)
    }

    #[test]
    fn every_renewal_is_read_however_the_reads_cut_the_stream() {
        let frames = vec![
            lease_frame("node-1", "2026-11-27T12:00:00.000000Z"),
            lease_frame("node-22", "2026-11-27T12:00:01.000000Z"),
            lease_frame("node-333", "2026-11-27T12:00:02.500000Z"),
        ];
        let bytes = chunked(&frames);
        let want: Vec<(String, u64)> = vec![
            ("node-1".into(), 1_795_780_800),
            ("node-22".into(), 1_795_780_801),
            ("node-333".into(), 1_795_780_802),
        ];
        for piece in [1, 2, 3, 7, 64, bytes.len()] {
            assert_eq!(
                read_in_pieces(&bytes, piece).unwrap(),
                want,
                "pieces of {piece}"
            );
        }
    }

    #[test]
    fn a_node_frame_is_read_for_its_name_and_has_no_renewal() {
        let node = json!({"metadata": {"name": "worker-7", "resourceVersion": "9", "uid": "u"},
                          "status": {"conditions": [{"type": "Ready", "status": "True"}]}});
        let raw = encode_object(Resource::Nodes, &node).expect("a Node encodes");
        let frame = watch_frame("MODIFIED", &enveloped_object(Resource::Nodes, &raw));
        assert_eq!(node_name(&frame[4..]), Some(&b"worker-7"[..]));
        assert_eq!(
            name_and_renewal(&frame[4..]),
            None,
            "a Node has no renewTime"
        );
    }

    #[test]
    fn a_refused_watch_or_a_bad_chunk_is_an_error_naming_it() {
        let refused = b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n";
        let e = read_in_pieces(refused, 5).unwrap_err();
        assert!(e.contains("403 Forbidden"), "{e}");
        let bad = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n";
        let e = read_in_pieces(bad, 100).unwrap_err();
        assert!(e.contains("bad chunk size \"zz\""), "{e}");
    }

    #[test]
    fn the_grid_follows_the_daemons_rule_for_a_trickle_a_burst_and_silence() {
        let t0 = Instant::now();
        let mut g = Grid::new(GRID);
        // A trickle pauses the readiness events and reads on the 45 ms grid.
        assert!(matches!(g.after_read(20, t0), Readiness::Deregister));
        assert_eq!(g.next_read, Some(t0 + GRID));
        // Reads that find few events widen it (to 90 ms, then 180 ms, no further).
        for _ in 0..10 {
            assert!(matches!(g.after_read(2, t0), Readiness::Keep));
        }
        assert_eq!(g.period.period(GRID), GRID * 4, "widened twice, no further");
        assert_eq!(g.next_read, Some(t0 + GRID * 4));
        // Busy reads narrow it back.
        for _ in 0..10 {
            g.after_read(60, t0);
        }
        assert_eq!(g.period.period(GRID), GRID);
        // A burst, or a read that found nothing, goes back to readiness events.
        assert!(matches!(g.after_read(64, t0), Readiness::Register));
        assert_eq!(g.next_read, None);
        assert!(matches!(g.after_read(0, t0), Readiness::Keep));
        assert!(matches!(g.after_read(5, t0), Readiness::Deregister));
        assert!(matches!(g.after_read(0, t0), Readiness::Register));
    }
}
