//! What every thread of the simulator shares: the object store (one mutex, one condvar that wakes
//! watches), the write log, the settings and clock, and the connection bookkeeping the fault
//! injector needs to close sockets and the listener.

use std::collections::HashMap;
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use super::cluster::State;
use super::write_log::{WriteLog, WriteRecord};
use node_lifecycled::time::Time;

#[derive(Clone, Debug)]
pub(crate) struct Settings {
    pub history_size: usize,
    pub finalize_pod_deletes: bool,
    pub log_direct_writes: bool,
    pub bookmark_interval: Duration,
    pub tokens: Option<Vec<String>>,
    pub max_body_bytes: usize,
    pub minor_version: u32,
    pub protobuf: bool,
}

/// The server's clock: wall time at start plus monotonic time since, so timestamps it writes
/// never go backwards.
#[derive(Copy, Clone, Debug)]
pub struct SimClock {
    start: Instant,
    start_wall: Time,
}

impl SimClock {
    pub fn start() -> SimClock {
        let wall = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0);
        SimClock {
            start: Instant::now(),
            start_wall: Time::from_unix_millis(wall),
        }
    }

    pub fn now(&self) -> Time {
        self.start_wall + self.start.elapsed()
    }

    pub fn elapsed(&self) -> Duration {
        self.start.elapsed()
    }
}

#[derive(Debug, Default)]
pub(crate) struct Connections {
    next_id: u64,
    open: HashMap<u64, TcpStream>,
}

#[derive(Debug)]
pub(crate) struct ListenControl {
    pub addr: SocketAddr,
    pub refuse_until: Option<Instant>,
    /// False while the listening socket is closed (a refusal window).
    pub listening: bool,
}

pub(crate) struct Shared {
    pub state: Mutex<State>,
    /// Signalled after every change of `state` (objects or faults): watches wait on it.
    pub changed: Condvar,
    pub log: Mutex<WriteLog>,
    pub settings: Settings,
    pub clock: SimClock,
    pub connections: Mutex<Connections>,
    pub listen: Mutex<ListenControl>,
    pub shutting_down: AtomicBool,
}

/// A poisoned lock only means another simulator thread panicked; the data is still usable and the
/// simulator must keep serving the test that is running.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Shared {
    pub fn new(settings: Settings, addr: SocketAddr) -> Shared {
        let log_capacity = 2_000_000;
        Shared {
            state: Mutex::new(State::new()),
            changed: Condvar::new(),
            log: Mutex::new(WriteLog::new(log_capacity)),
            settings,
            clock: SimClock::start(),
            connections: Mutex::new(Connections::default()),
            listen: Mutex::new(ListenControl {
                addr,
                refuse_until: None,
                listening: true,
            }),
            shutting_down: AtomicBool::new(false),
        }
    }

    pub fn lock(&self) -> MutexGuard<'_, State> {
        lock(&self.state)
    }

    pub fn with_state<R>(&self, f: impl FnOnce(&mut State) -> R) -> R {
        f(&mut self.lock())
    }

    pub fn record(&self, record: WriteRecord) {
        lock(&self.log).push(record);
    }

    pub fn is_shutting_down(&self) -> bool {
        self.shutting_down.load(Ordering::SeqCst)
    }

    /// Keeps a handle on an accepted socket so a restart or shutdown can close it; `None` when the
    /// server is shutting down (the caller drops the connection).
    pub fn register_connection(&self, stream: &TcpStream) -> Option<u64> {
        let clone = stream.try_clone().ok()?;
        let mut conns = lock(&self.connections);
        if self.is_shutting_down() {
            return None;
        }
        conns.next_id += 1;
        let id = conns.next_id;
        conns.open.insert(id, clone);
        Some(id)
    }

    pub fn deregister_connection(&self, id: u64) {
        lock(&self.connections).open.remove(&id);
    }

    pub fn close_all_connections(&self) {
        let open: Vec<TcpStream> = lock(&self.connections)
            .open
            .drain()
            .map(|(_, s)| s)
            .collect();
        for stream in open {
            let _ = stream.shutdown(Shutdown::Both);
        }
        self.changed.notify_all();
    }

    pub fn refuse_connections(&self, duration: Duration, close_open: bool) {
        lock(&self.listen).refuse_until = Some(Instant::now() + duration);
        self.wake_acceptor();
        // Return only once the port really refuses, so callers can rely on it.
        let give_up = Instant::now() + Duration::from_secs(2);
        while lock(&self.listen).listening && Instant::now() < give_up {
            std::thread::sleep(Duration::from_millis(1));
        }
        if close_open {
            self.with_state(|s| s.faults.watch_drop_generation += 1);
            self.close_all_connections();
        }
    }

    /// The accept loop blocks in `accept`; a connection of our own makes it look at its flags.
    pub fn wake_acceptor(&self) {
        let mut addr = lock(&self.listen).addr;
        if addr.ip().is_unspecified() {
            addr.set_ip(match addr {
                SocketAddr::V4(_) => std::net::Ipv4Addr::LOCALHOST.into(),
                SocketAddr::V6(_) => std::net::Ipv6Addr::LOCALHOST.into(),
            });
        }
        let _ = TcpStream::connect_timeout(&addr, Duration::from_secs(1));
    }
}

impl Shared {
    pub fn open_connections(&self) -> usize {
        lock(&self.connections).open.len()
    }

    pub fn accepted_connections(&self) -> u64 {
        lock(&self.connections).next_id
    }
}
