//! A TCP proxy on 127.0.0.1 between the daemon and the real API server that resets every
//! connection it carries on command, as a load balancer or a restarting API server does, and
//! keeps accepting new ones at once. Bytes pass through untouched (TLS end to end: the
//! server's certificate is valid for 127.0.0.1, whatever the port). Threads: one accepting,
//! two per connection.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// One proxied connection: the client's socket and the server's.
struct Pair {
    client: TcpStream,
    server: TcpStream,
    /// Reset on command: the copiers leave without a graceful shutdown, so the last close of
    /// the client socket (SO_LINGER 0) sends a RST, not a FIN.
    reset: AtomicBool,
    /// Copy directions still running (2, 1, 0).
    running: AtomicU64,
}

pub struct ResetProxy {
    addr: SocketAddr,
    pairs: Arc<Mutex<Vec<Arc<Pair>>>>,
    accepted: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl ResetProxy {
    /// Listens on a free port of 127.0.0.1 and forwards every connection to `upstream`.
    pub fn start(upstream: SocketAddr) -> ResetProxy {
        let listener = TcpListener::bind("127.0.0.1:0").expect("proxy listener");
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        let pairs: Arc<Mutex<Vec<Arc<Pair>>>> = Arc::default();
        let accepted = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (pairs, accepted, stop) = (pairs.clone(), accepted.clone(), stop.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    match listener.accept() {
                        Ok((client, _)) => {
                            let Ok(server) = TcpStream::connect(upstream) else {
                                continue; // the client sees its connection closed
                            };
                            client.set_nonblocking(false).unwrap();
                            let _ = client.set_nodelay(true);
                            let _ = server.set_nodelay(true);
                            let pair = Arc::new(Pair {
                                client,
                                server,
                                reset: AtomicBool::new(false),
                                running: AtomicU64::new(2),
                            });
                            accepted.fetch_add(1, Ordering::Relaxed);
                            let mut all = pairs.lock().unwrap();
                            all.retain(|p| p.running.load(Ordering::Relaxed) > 0);
                            all.push(pair.clone());
                            drop(all);
                            let up = pair.clone();
                            std::thread::spawn(move || copy(&up, true));
                            std::thread::spawn(move || copy(&pair, false));
                        }
                        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                            std::thread::sleep(Duration::from_millis(2));
                        }
                        Err(_) => std::thread::sleep(Duration::from_millis(2)),
                    }
                }
            })
        };
        ResetProxy {
            addr,
            pairs,
            accepted,
            stop,
            thread: Some(thread),
        }
    }

    /// Connections accepted so far.
    pub fn accepted(&self) -> u64 {
        self.accepted.load(Ordering::Relaxed)
    }

    /// Resets every open connection: the client gets a TCP RST, the server a FIN. New
    /// connections are accepted as before. Returns how many were open.
    pub fn reset_all(&self) -> usize {
        let pairs: Vec<Arc<Pair>> = std::mem::take(&mut *self.pairs.lock().unwrap());
        let mut open = 0;
        for pair in pairs {
            if pair.running.load(Ordering::Relaxed) == 0 {
                continue;
            }
            open += 1;
            pair.reset.store(true, Ordering::Relaxed);
            linger_zero(&pair.client);
            // Wakes the copier reading the client (recv returns 0) without sending anything;
            // the copier reading the server wakes on the server side's shutdown.
            let _ = pair.client.shutdown(Shutdown::Read);
            let _ = pair.server.shutdown(Shutdown::Both);
        }
        open
    }

    /// A copy of `kubeconfig` whose server is this proxy (same CA, same credentials), in `dir`.
    pub fn kubeconfig_copy(&self, kubeconfig: &Path, dir: &Path) -> PathBuf {
        let text = std::fs::read_to_string(kubeconfig).unwrap();
        let mut replaced = false;
        let out: Vec<String> = text
            .lines()
            .map(|line| match line.trim_start().strip_prefix("server:") {
                Some(_) => {
                    replaced = true;
                    let indent = &line[..line.len() - line.trim_start().len()];
                    format!("{indent}server: https://{}", self.addr)
                }
                None => line.to_string(),
            })
            .collect();
        assert!(replaced, "no server line in {}", kubeconfig.display());
        let path = dir.join("via-proxy.kubeconfig");
        std::fs::write(&path, out.join("\n") + "\n").unwrap();
        path
    }
}

/// The address a kubeconfig's `server: https://HOST:PORT` names.
pub fn kubeconfig_server(kubeconfig: &Path) -> SocketAddr {
    let text = std::fs::read_to_string(kubeconfig).unwrap();
    let server = text
        .lines()
        .find_map(|l| l.trim_start().strip_prefix("server:"))
        .expect("a server line")
        .trim();
    let hostport = server.strip_prefix("https://").expect("https");
    hostport.parse().expect("an IP:port server")
}

impl Drop for ResetProxy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        self.reset_all();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Copies one direction until its end: client → server (`upstream`) or back.
fn copy(pair: &Pair, upstream: bool) {
    let (mut from, mut to) = if upstream {
        (&pair.client, &pair.server)
    } else {
        (&pair.server, &pair.client)
    };
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match from.read(&mut buf) {
            Ok(0) => {
                if !pair.reset.load(Ordering::Relaxed) {
                    let _ = to.shutdown(Shutdown::Write);
                }
                break;
            }
            Ok(n) => {
                if to.write_all(&buf[..n]).is_err() {
                    if !pair.reset.load(Ordering::Relaxed) {
                        let _ = from.shutdown(Shutdown::Both);
                    }
                    break;
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => {
                if !pair.reset.load(Ordering::Relaxed) {
                    let _ = to.shutdown(Shutdown::Both);
                }
                break;
            }
        }
    }
    pair.running.fetch_sub(1, Ordering::Relaxed);
}

/// SO_LINGER {on, 0 s}: closing the socket sends a RST and drops unsent data.
fn linger_zero(socket: &TcpStream) {
    #[repr(C)]
    struct Linger {
        l_onoff: i32,
        l_linger: i32,
    }
    unsafe extern "C" {
        fn setsockopt(fd: i32, level: i32, name: i32, value: *const Linger, len: u32) -> i32;
    }
    const SOL_SOCKET: i32 = 1;
    const SO_LINGER: i32 = 13;
    let value = Linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: a live socket's descriptor and a linger struct of the size passed.
    let rc = unsafe {
        setsockopt(
            socket.as_raw_fd(),
            SOL_SOCKET,
            SO_LINGER,
            &value,
            std::mem::size_of::<Linger>() as u32,
        )
    };
    assert_eq!(rc, 0, "setsockopt(SO_LINGER)");
}
