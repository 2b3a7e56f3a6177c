//! The control socket, served by the real event loop, against clients that behave and clients that
//! do not: the socket is mode 0600; a bad or oversized request gets an error
//! line; a client that connects and says nothing is dropped at its deadline while others are
//! answered meanwhile; beyond the client limit a newcomer is told it is busy; a stale socket
//! file is replaced and a live one is left alone.

use std::io::{Read, Write};
use std::os::unix::fs::PermissionsExt as _;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use mio::Token;
use mio::event::Event;
use node_lifecycled::runtime::control_socket::{
    ControlEndpoints, ControlLimits, ControlServer, ControlStats, ask,
};
use node_lifecycled::runtime::{Clock, EventLoop, Handler, LoopControl};
use node_lifecycled::time::Time;

#[derive(Clone, Debug, PartialEq)]
struct Control;

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Timer {
    Clients,
    Check,
}

struct Answers;

impl ControlEndpoints for Answers {
    fn answer(&self, request: &str, _now: Time) -> String {
        match request {
            "status" => "role: leader\n".repeat(20_000), // 260 KB: more than a socket buffer
            r if r.starts_with("explain ") => format!("node {}: Ready True", &r[8..]),
            _ => format!("error: unknown request {request:?}"),
        }
    }
}

struct Served {
    server: ControlServer,
    done: Arc<AtomicBool>,
}

impl Served {
    fn rearm(&mut self, lp: &mut LoopControl<Control, Timer>) {
        if let Some(at) = self.server.next_deadline() {
            lp.schedule(Timer::Clients, at);
        }
    }
}

impl Handler<Control, Timer> for Served {
    fn on_event(
        &mut self,
        lp: &mut LoopControl<Control, Timer>,
        token: Token,
        _: Control,
        _: &Event,
    ) {
        self.server.on_event(lp, token, Control, &Answers);
        self.rearm(lp);
    }

    fn on_timer(&mut self, lp: &mut LoopControl<Control, Timer>, timer: Timer, now: Time) {
        match timer {
            Timer::Clients => self.server.on_timer(lp, now),
            Timer::Check if self.done.load(Ordering::SeqCst) => lp.stop(),
            Timer::Check => lp.schedule_in(Timer::Check, Duration::from_millis(20)),
        }
        self.rearm(lp);
    }
}

fn temp_socket(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("nl-control-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir.join("control.sock")
}

/// Runs the loop on this thread while `clients` runs on another; returns the server's figures.
fn serve_while<F: FnOnce(&Path) + Send + 'static>(
    path: &Path,
    limits: ControlLimits,
    clients: F,
) -> ControlStats {
    let mut lp: EventLoop<Control, Timer> = EventLoop::new(Clock::start()).unwrap();
    let mut server = ControlServer::bind(path, limits).unwrap();
    server.register(lp.control(), Control).unwrap();
    let done = Arc::new(AtomicBool::new(false));
    let mut served = Served {
        server,
        done: done.clone(),
    };
    lp.control()
        .schedule_in(Timer::Check, Duration::from_millis(20));
    let client_path = path.to_path_buf();
    let thread = std::thread::spawn(move || {
        let result =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| clients(&client_path)));
        done.store(true, Ordering::SeqCst);
        result
    });
    lp.run(&mut served).unwrap();
    let stats = served.server.stats();
    served.server.close_all(lp.control());
    if let Err(panic) = thread.join().unwrap() {
        std::panic::resume_unwind(panic);
    }
    stats
}

fn raw(path: &Path, request: &[u8]) -> String {
    let mut s = UnixStream::connect(path).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    // A server that refuses a newcomer ("busy") answers and closes without reading: the write
    // may then meet the closed socket, while the answer already waits to be read.
    if let Err(e) = s.write_all(request) {
        assert!(
            matches!(
                e.kind(),
                std::io::ErrorKind::BrokenPipe | std::io::ErrorKind::ConnectionReset
            ),
            "{e}"
        );
    }
    let mut answer = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => answer.extend_from_slice(&buf[..n]),
            Err(e) if !answer.is_empty() => {
                assert_eq!(e.kind(), std::io::ErrorKind::ConnectionReset);
                break;
            }
            Err(e) => panic!("{e}"),
        }
    }
    String::from_utf8(answer).unwrap()
}

#[test]
fn the_socket_is_private_and_answers_requests_large_and_small() {
    let path = temp_socket("answers");
    let stats = serve_while(&path, ControlLimits::default(), |path| {
        let mode = std::fs::metadata(path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "socket mode {mode:o}");
        let timeout = Duration::from_secs(10);
        assert_eq!(
            ask(path, "explain worker-3", timeout).unwrap(),
            "node worker-3: Ready True\n"
        );
        // Larger than the socket buffer: written as the client reads.
        let status = ask(path, "status", timeout).unwrap();
        assert_eq!(status.len(), 260_000);
        // A request closed without its newline is still a request.
        let mut s = UnixStream::connect(path).unwrap();
        s.write_all(b"explain n9").unwrap();
        s.shutdown(std::net::Shutdown::Write).unwrap();
        let mut answer = String::new();
        s.read_to_string(&mut answer).unwrap();
        assert_eq!(answer, "node n9: Ready True\n");
    });
    assert_eq!(stats.answered, 3);
    assert!(!path.exists(), "the socket file is removed at shutdown");
}

#[test]
fn malformed_and_oversized_requests_get_an_error_line() {
    let path = temp_socket("malformed");
    let stats = serve_while(&path, ControlLimits::default(), |path| {
        assert_eq!(
            raw(path, b"frobnicate\n"),
            "error: unknown request \"frobnicate\"\n"
        );
        assert_eq!(
            raw(path, b"\xff\xfe\n"),
            "error: the request is not UTF-8\n"
        );
        let huge = vec![b'x'; 64 * 1024];
        assert_eq!(raw(path, &huge), "error: request longer than 4096 bytes\n");
    });
    assert_eq!(stats.oversized, 1);
}

#[test]
fn a_silent_client_is_dropped_at_its_deadline_and_holds_nobody_up() {
    let path = temp_socket("silent");
    let limits = ControlLimits {
        deadline: Duration::from_millis(500),
        ..ControlLimits::default()
    };
    let stats = serve_while(&path, limits, |path| {
        let mut silent = UnixStream::connect(path).unwrap();
        silent
            .set_read_timeout(Some(Duration::from_secs(20)))
            .unwrap();
        // Others are answered while it says nothing.
        let started = Instant::now();
        for i in 0..5 {
            let answer = ask(path, &format!("explain n{i}"), Duration::from_secs(10)).unwrap();
            assert_eq!(answer, format!("node n{i}: Ready True\n"));
        }
        let mut buf = [0u8; 16];
        let n = silent.read(&mut buf).unwrap();
        assert_eq!(n, 0, "closed without an answer");
        // Generous: the deadline is 0.5 s; a busy machine may add seconds, not tens.
        assert!(started.elapsed() < Duration::from_secs(15));
    });
    assert_eq!(stats.timed_out, 1);
    assert_eq!(stats.answered, 5);
}

#[test]
fn beyond_the_client_limit_a_newcomer_is_told_busy() {
    let path = temp_socket("busy");
    let limits = ControlLimits {
        max_clients: 2,
        deadline: Duration::from_secs(3),
        ..ControlLimits::default()
    };
    let stats = serve_while(&path, limits, |path| {
        let idle: Vec<UnixStream> = (0..2).map(|_| UnixStream::connect(path).unwrap()).collect();
        // Let the loop accept them before the newcomer comes.
        std::thread::sleep(Duration::from_millis(300));
        assert_eq!(raw(path, b"status\n"), "error: busy, try again\n");
        drop(idle);
        // Once they are gone (the loop sees them close), there is room again.
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let answer = raw(path, b"explain n1\n");
            if answer == "node n1: Ready True\n" {
                break;
            }
            assert!(Instant::now() < deadline, "still busy: {answer}");
            std::thread::sleep(Duration::from_millis(100));
        }
    });
    assert!(stats.refused_busy >= 1);
}

#[test]
fn a_stale_socket_file_is_replaced_and_a_live_one_left_alone() {
    let path = temp_socket("stale");
    // A socket file nobody listens on (its listener is gone).
    drop(std::os::unix::net::UnixListener::bind(&path).unwrap());
    assert!(path.exists());
    let live = ControlServer::bind(&path, ControlLimits::default()).expect("stale file replaced");
    let err = ControlServer::bind(&path, ControlLimits::default())
        .err()
        .expect("a live socket must not be taken over");
    assert_eq!(err.kind(), std::io::ErrorKind::AddrInUse);
    assert!(
        err.to_string().contains("another process answers on it"),
        "{err}"
    );
    drop(live);
    let missing_dir = std::env::temp_dir().join("nl-control-no-such-dir/control.sock");
    let err = ControlServer::bind(&missing_dir, ControlLimits::default())
        .err()
        .unwrap();
    assert!(
        err.to_string()
            .starts_with(&missing_dir.display().to_string()),
        "{err}"
    );
}
