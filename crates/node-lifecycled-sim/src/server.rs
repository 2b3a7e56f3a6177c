//! The listening side: an accept thread, one thread per connection (blocking std::net, keep-alive),
//! and `SimHandle`, the test's grip on a running simulator.

use std::io;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::api::{self, Reply};
use super::cluster::Cluster;
use super::faults::Faults;
use super::http::{ReadError, RequestReader, Response, Transport};
use super::shared::{Settings, Shared, lock};
use super::tls::{self, SimTls};
use super::watch::{self, WatchEnd};
use super::write_log::{Identity, WriteRecord};

/// A keep-alive connection idle this long is closed (the client reconnects).
const IDLE_TIMEOUT: Duration = Duration::from_secs(600);
/// A client that does not take what we write for this long is dropped.
const WRITE_TIMEOUT: Duration = Duration::from_secs(30);

#[derive(Clone, Debug)]
pub struct SimConfig {
    /// Port 0 picks a free port; the address is fixed from then on (a restart reuses it).
    pub listen: SocketAddr,
    /// Serve HTTPS with this material instead of plain HTTP.
    pub tls: Option<SimTls>,
    /// Changes kept per resource for resuming watches and continuing lists; older versions get
    /// 410 Expired.
    pub history_size: usize,
    /// Period of BOOKMARK events on watches that ask for them (real server: about 60 s).
    pub bookmark_interval: Duration,
    /// Remove pods at once on DELETE instead of setting a deletionTimestamp for the grace period.
    pub finalize_pod_deletes: bool,
    /// When set, only these bearer tokens are accepted (others get 401).
    pub tokens: Option<Vec<String>>,
    /// Record writes made in-process through `Cluster` in the write log too.
    pub log_direct_writes: bool,
    /// Largest request body accepted (413 beyond).
    pub max_body_bytes: usize,
    /// The minor version `GET /version` reports (major 1). From 32 on the daemon uses
    /// watch-list; below, a `resourceVersion=0` LIST (the bench measures both).
    pub minor_version: u32,
    /// Answer nodes, pods and leases in protobuf when a client asks for it first in `Accept`,
    /// as the real server does (default); `false` answers JSON to every client.
    pub protobuf: bool,
}

impl Default for SimConfig {
    fn default() -> SimConfig {
        SimConfig {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            tls: None,
            history_size: 10_000,
            bookmark_interval: Duration::from_secs(60),
            finalize_pod_deletes: false,
            tokens: None,
            log_direct_writes: false,
            max_body_bytes: 8 * 1024 * 1024,
            minor_version: 32,
            protobuf: true,
        }
    }
}

pub struct SimServer;

impl SimServer {
    /// Binds, starts serving on background threads, and returns at once.
    pub fn start(config: SimConfig) -> io::Result<SimHandle> {
        let tls_config = config.tls.as_ref().map(tls::server_config).transpose()?;
        let listener = TcpListener::bind(config.listen)?;
        let addr = listener.local_addr()?;
        let settings = Settings {
            history_size: config.history_size.max(1),
            finalize_pod_deletes: config.finalize_pod_deletes,
            log_direct_writes: config.log_direct_writes,
            bookmark_interval: config.bookmark_interval.max(Duration::from_millis(10)),
            tokens: config.tokens.clone(),
            max_body_bytes: config.max_body_bytes,
            minor_version: config.minor_version,
            protobuf: config.protobuf,
        };
        let shared = Arc::new(Shared::new(settings, addr));
        let scheme = if tls_config.is_some() {
            "https"
        } else {
            "http"
        };
        let url = match addr {
            SocketAddr::V6(a) => format!("{scheme}://[{}]:{}", a.ip(), a.port()),
            SocketAddr::V4(a) => format!("{scheme}://{}:{}", a.ip(), a.port()),
        };
        let acceptor = {
            let shared = shared.clone();
            std::thread::Builder::new()
                .name("sim-accept".into())
                .spawn(move || accept_loop(shared, listener, tls_config))?
        };
        log::info!("simulated API server listening on {url}");
        Ok(SimHandle {
            shared,
            acceptor: Some(acceptor),
            url,
        })
    }
}

/// A running simulator. Dropping it shuts it down.
pub struct SimHandle {
    shared: Arc<Shared>,
    acceptor: Option<JoinHandle<()>>,
    url: String,
}

impl SimHandle {
    /// `http://127.0.0.1:PORT` or `https://...`.
    pub fn url(&self) -> &str {
        &self.url
    }

    pub fn addr(&self) -> SocketAddr {
        lock(&self.shared.listen).addr
    }

    /// Direct access to the objects (writes recorded as "sim" when direct writes are logged).
    pub fn cluster(&self) -> Cluster {
        Cluster {
            shared: self.shared.clone(),
            identity: Arc::new(Identity::direct("sim")),
        }
    }

    pub fn faults(&self) -> Faults {
        Faults {
            shared: self.shared.clone(),
        }
    }

    /// A snapshot of the write log, oldest first.
    pub fn writes(&self) -> Vec<WriteRecord> {
        lock(&self.shared.log).snapshot()
    }

    /// The records after `seq` (0: all), oldest first: a reader that follows the log as it grows
    /// copies only what is new.
    pub fn writes_after(&self, seq: u64) -> Vec<WriteRecord> {
        lock(&self.shared.log).after(seq)
    }

    pub fn clear_writes(&self) {
        lock(&self.shared.log).clear();
    }

    /// The write log, one line per write.
    pub fn write_log_text(&self) -> String {
        self.writes().iter().map(|w| format!("{w}\n")).collect()
    }

    /// Open TCP connections (watches and keep-alive).
    pub fn open_connections(&self) -> usize {
        self.shared.open_connections()
    }

    /// TCP connections accepted since the start: what a client's reconnects cost is counted here.
    pub fn accepted_connections(&self) -> u64 {
        self.shared.accepted_connections()
    }

    pub fn shutdown(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        if self.shared.shutting_down.swap(true, Ordering::SeqCst) {
            return;
        }
        self.shared.with_state(|s| s.shutdown = true);
        self.shared.changed.notify_all();
        self.shared.wake_acceptor();
        if let Some(acceptor) = self.acceptor.take() {
            let _ = acceptor.join();
        }
        self.shared.close_all_connections();
    }
}

impl Drop for SimHandle {
    fn drop(&mut self) {
        self.stop();
    }
}

fn accept_loop(shared: Arc<Shared>, listener: TcpListener, tls: Option<Arc<rustls::ServerConfig>>) {
    let mut listener = Some(listener);
    loop {
        if shared.is_shutting_down() {
            return;
        }
        let refuse_until = lock(&shared.listen).refuse_until;
        if let Some(until) = refuse_until {
            drop(listener.take());
            lock(&shared.listen).listening = false;
            if !refuse_until_elapsed(&shared, until) {
                return;
            }
            match rebind(&shared) {
                Some(l) => {
                    listener = Some(l);
                    lock(&shared.listen).listening = true;
                }
                None => return,
            }
            continue;
        }
        let Some(active) = &listener else { return };
        match active.accept() {
            Ok((stream, _peer)) => {
                if shared.is_shutting_down() {
                    return;
                }
                if lock(&shared.listen).refuse_until.is_some() {
                    continue;
                }
                let shared = shared.clone();
                let tls = tls.clone();
                let spawned = std::thread::Builder::new()
                    .name("sim-conn".into())
                    .spawn(move || serve_connection(&shared, stream, tls));
                if let Err(e) = spawned {
                    log::warn!("simulator: cannot start a connection thread: {e}");
                }
            }
            Err(e) => {
                log::warn!("simulator: accept failed: {e}");
                std::thread::sleep(Duration::from_millis(10));
            }
        }
    }
}

/// Waits out a refusal window (which `refuse_connections` may extend); false on shutdown.
fn refuse_until_elapsed(shared: &Shared, mut until: Instant) -> bool {
    loop {
        if shared.is_shutting_down() {
            return false;
        }
        let now = Instant::now();
        if now >= until {
            let mut listen = lock(&shared.listen);
            match listen.refuse_until {
                Some(later) if later > until => until = later,
                _ => {
                    listen.refuse_until = None;
                    return true;
                }
            }
        }
        std::thread::sleep((until.saturating_duration_since(now)).min(Duration::from_millis(10)));
    }
}

/// Listens again on the same address (SO_REUSEADDR is set by std on Unix, so connections left in
/// TIME_WAIT do not block it); retries while something else holds the port.
fn rebind(shared: &Shared) -> Option<TcpListener> {
    let addr = lock(&shared.listen).addr;
    let mut warned = false;
    loop {
        if shared.is_shutting_down() {
            return None;
        }
        match TcpListener::bind(addr) {
            Ok(l) => return Some(l),
            Err(e) => {
                if !warned {
                    log::warn!("simulator: cannot listen again on {addr}: {e}; retrying");
                    warned = true;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }
}

fn serve_connection(shared: &Shared, stream: TcpStream, tls: Option<Arc<rustls::ServerConfig>>) {
    let Some(id) = shared.register_connection(&stream) else {
        return;
    };
    let _ = stream.set_nodelay(true);
    let _ = stream.set_read_timeout(Some(IDLE_TIMEOUT));
    let _ = stream.set_write_timeout(Some(WRITE_TIMEOUT));
    let transport = match tls {
        None => Some(Transport::Plain(stream)),
        Some(config) => match rustls::ServerConnection::new(config) {
            Ok(conn) => Some(Transport::Tls(Box::new(rustls::StreamOwned::new(
                conn, stream,
            )))),
            Err(e) => {
                log::warn!("simulator: TLS session setup failed: {e}");
                None
            }
        },
    };
    if let Some(mut transport) = transport {
        serve_requests(shared, &mut transport);
        if let Transport::Tls(tls) = &mut transport {
            // A graceful end (Connection: close, idle timeout) says so; after an abrupt close
            // this write simply fails.
            tls.conn.send_close_notify();
            let _ = std::io::Write::flush(tls.as_mut());
        }
    }
    shared.deregister_connection(id);
}

fn serve_requests(shared: &Shared, transport: &mut Transport) {
    let mut reader = RequestReader::default();
    let mut client_cn: Option<Option<String>> = None;
    loop {
        let request = match reader.read(transport, shared.settings.max_body_bytes) {
            Ok(Some(r)) => r,
            Ok(None) => return,
            Err(ReadError::Io(e)) => {
                log::debug!("simulator: connection ends: {e}");
                return;
            }
            Err(ReadError::Refuse(error)) => {
                let _ = Response::error(&error).write_to(transport, true);
                return;
            }
        };
        if shared.is_shutting_down() {
            return;
        }
        let client_cn = client_cn
            .get_or_insert_with(|| transport.client_cn())
            .clone();
        let identity = Identity {
            token: request
                .header("authorization")
                .and_then(|a| a.strip_prefix("Bearer "))
                .map(|t| t.trim().to_string()),
            user_agent: request.header("user-agent").map(str::to_string),
            client_cn,
        };
        let close = request.wants_close();
        match api::handle(shared, &request, &identity) {
            Reply::Unary(response) => {
                if response.write_to(transport, close).is_err() {
                    return;
                }
            }
            Reply::List(body) => {
                if body.write_to(transport, close).is_err() {
                    return;
                }
            }
            Reply::Watch(watch_request) => match watch::serve(shared, transport, *watch_request) {
                Ok(WatchEnd::Clean) => {}
                Ok(WatchEnd::Closed) | Err(_) => return,
            },
        }
        if close {
            return;
        }
    }
}
