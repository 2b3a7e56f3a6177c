//! The control socket: a Unix stream socket `node-lifecycled status` and `explain` ask, served
//! by the daemon's event loop (no thread of its own).
//!
//! One request per connection: a line (`status`, `explain NODE`, `explain NAMESPACE/POD`), at
//! most [`ControlLimits::max_request`] bytes; the answer is text, then the daemon closes. An
//! answer starting `error: ` is a refusal (unknown request, unknown node). Nothing a client
//! does can hold the loop: every read and write is non-blocking, a client that has not sent its
//! line and read its answer by [`ControlLimits::deadline`] is dropped, an oversized request
//! gets an error line, and beyond [`ControlLimits::max_clients`] a new client is told `error:
//! busy` and closed.
//!
//! The socket file is created mode 0600 (root and the daemon's own user); a stale file left by
//! a crash is replaced, a live one (another daemon answers on it) is left alone.

use std::collections::HashMap;
use std::hash::Hash;
use std::io::{self, Read, Write};
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use log::{debug, warn};
use mio::net::{UnixListener, UnixStream};
use mio::{Interest, Token};

use super::LoopControl;
use crate::time::Time;
use crate::time::TimerHeap;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ControlLimits {
    pub max_request: usize,
    pub deadline: Duration,
    pub max_clients: usize,
}

impl Default for ControlLimits {
    fn default() -> ControlLimits {
        ControlLimits {
            max_request: 4096,
            deadline: Duration::from_secs(2),
            max_clients: 8,
        }
    }
}

/// What the daemon answers.
pub trait ControlEndpoints {
    /// The answer to one request line (without its newline), at `now`.
    fn answer(&self, request: &str, now: Time) -> String;
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ControlStats {
    pub(crate) accepted: u64,
    pub answered: u64,
    pub refused_busy: u64,
    pub oversized: u64,
    pub timed_out: u64,
}

struct Client {
    stream: UnixStream,
    request: Vec<u8>,
    /// The answer, once computed, and how much of it is out.
    answer: Option<Vec<u8>>,
    written: usize,
}

pub struct ControlServer {
    path: PathBuf,
    listener: UnixListener,
    listener_token: Option<Token>,
    clients: HashMap<Token, Client>,
    deadlines: TimerHeap<Token>,
    limits: ControlLimits,
    stats: ControlStats,
}

impl ControlServer {
    /// Binds `path` (mode 0600). Fails if the directory is missing or another live process
    /// answers on it.
    pub fn bind(path: &Path, limits: ControlLimits) -> io::Result<ControlServer> {
        let context = |e: io::Error| io::Error::new(e.kind(), format!("{}: {e}", path.display()));
        if path.exists() {
            if std::os::unix::net::UnixStream::connect(path).is_ok() {
                return Err(context(io::Error::new(
                    io::ErrorKind::AddrInUse,
                    "another process answers on it",
                )));
            }
            // Left by a daemon that did not stop cleanly: nobody listens.
            std::fs::remove_file(path).map_err(context)?;
        }
        let listener = UnixListener::bind(path).map_err(context)?;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).map_err(context)?;
        Ok(ControlServer {
            path: path.to_path_buf(),
            listener,
            listener_token: None,
            clients: HashMap::new(),
            deadlines: TimerHeap::new(),
            limits,
            stats: ControlStats::default(),
        })
    }

    pub fn stats(&self) -> ControlStats {
        self.stats
    }

    pub fn register<S: Clone, T: Eq + Hash + Clone>(
        &mut self,
        lp: &mut LoopControl<S, T>,
        kind: S,
    ) -> io::Result<()> {
        self.listener_token = Some(lp.register(&mut self.listener, Interest::READABLE, kind)?);
        Ok(())
    }

    /// When a client's deadline passes next.
    pub fn next_deadline(&self) -> Option<Time> {
        self.deadlines.next_deadline()
    }

    pub fn on_event<S: Clone, T: Eq + Hash + Clone>(
        &mut self,
        lp: &mut LoopControl<S, T>,
        token: Token,
        kind: S,
        endpoints: &dyn ControlEndpoints,
    ) {
        if Some(token) == self.listener_token {
            self.accept(lp, kind);
            return;
        }
        let now = lp.now();
        let done = match self.clients.get_mut(&token) {
            None => return,
            Some(client) => client.turn(&self.limits, &mut self.stats, now, endpoints),
        };
        match done {
            Ok(true) => {
                self.stats.answered += 1;
                self.close(lp, token);
            }
            Ok(false) => {
                // The answer waits for room in the socket: ask for WRITABLE too.
                if let Some(client) = self.clients.get_mut(&token)
                    && client.answer.is_some()
                    && let Err(e) = lp.reregister(
                        &mut client.stream,
                        token,
                        Interest::READABLE | Interest::WRITABLE,
                    )
                {
                    debug!("control: reregister: {e}");
                    self.close(lp, token);
                }
            }
            Err(e) => {
                debug!("control: client dropped: {e}");
                self.close(lp, token);
            }
        }
    }

    /// Drops clients past their deadline.
    pub fn on_timer<S: Clone, T: Eq + Hash + Clone>(
        &mut self,
        lp: &mut LoopControl<S, T>,
        now: Time,
    ) {
        while let Some((token, _)) = self.deadlines.pop_due(now) {
            if self.clients.contains_key(&token) {
                self.stats.timed_out += 1;
                debug!("control: client dropped at its deadline");
                self.close(lp, token);
            }
        }
    }

    /// Closes every client and the listener, and removes the socket file.
    pub fn close_all<S: Clone, T: Eq + Hash + Clone>(&mut self, lp: &mut LoopControl<S, T>) {
        let tokens: Vec<Token> = self.clients.keys().copied().collect();
        for token in tokens {
            self.close(lp, token);
        }
        if let Some(token) = self.listener_token.take() {
            lp.deregister(&mut self.listener, token);
        }
        let _ = std::fs::remove_file(&self.path);
    }

    fn accept<S: Clone, T: Eq + Hash + Clone>(&mut self, lp: &mut LoopControl<S, T>, kind: S) {
        loop {
            let mut stream = match self.listener.accept() {
                Ok((stream, _)) => stream,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    warn!("control socket: accept failed: {e}");
                    return;
                }
            };
            self.stats.accepted += 1;
            if self.clients.len() >= self.limits.max_clients {
                self.stats.refused_busy += 1;
                // Best effort, never waiting: a fresh socket has room for one short line.
                let _ = stream.write(b"error: busy, try again\n");
                continue;
            }
            let token = match lp.register(&mut stream, Interest::READABLE, kind.clone()) {
                Ok(t) => t,
                Err(e) => {
                    debug!("control: register: {e}");
                    continue;
                }
            };
            self.deadlines
                .schedule(token, lp.now() + self.limits.deadline);
            self.clients.insert(
                token,
                Client {
                    stream,
                    request: Vec::new(),
                    answer: None,
                    written: 0,
                },
            );
        }
    }

    fn close<S: Clone, T: Eq + Hash + Clone>(&mut self, lp: &mut LoopControl<S, T>, token: Token) {
        self.deadlines.cancel(&token);
        if let Some(mut client) = self.clients.remove(&token) {
            lp.deregister(&mut client.stream, token);
        }
    }
}

impl Client {
    /// Reads what is there, answers once the line is complete, writes what fits. `Ok(true)`:
    /// the answer is out, close.
    fn turn(
        &mut self,
        limits: &ControlLimits,
        stats: &mut ControlStats,
        now: Time,
        endpoints: &dyn ControlEndpoints,
    ) -> io::Result<bool> {
        if self.answer.is_none() {
            let mut buf = [0u8; 1024];
            let mut eof = false;
            loop {
                match self.stream.read(&mut buf) {
                    Ok(0) => {
                        eof = true;
                        break;
                    }
                    Ok(n) => {
                        self.request.extend_from_slice(&buf[..n]);
                        if self.request.len() > limits.max_request || self.request.contains(&b'\n')
                        {
                            break;
                        }
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) => return Err(e),
                }
            }
            let line_end = self.request.iter().position(|b| *b == b'\n');
            let answer = match line_end {
                Some(end) if end <= limits.max_request => {
                    Some(answer_for(&self.request[..end], now, endpoints))
                }
                _ if self.request.len() > limits.max_request => {
                    stats.oversized += 1;
                    Some(format!(
                        "error: request longer than {} bytes\n",
                        limits.max_request
                    ))
                }
                // Closed its side without a newline: the bytes sent are the request.
                None if eof && !self.request.is_empty() => {
                    Some(answer_for(&self.request, now, endpoints))
                }
                None if eof => return Err(io::Error::other("closed without a request")),
                _ => None,
            };
            let Some(answer) = answer else {
                return Ok(false);
            };
            self.answer = Some(answer.into_bytes());
        }
        let answer = self.answer.as_deref().unwrap_or_default();
        while self.written < answer.len() {
            match self.stream.write(&answer[self.written..]) {
                Ok(0) => return Err(io::Error::other("client stopped reading")),
                Ok(n) => self.written += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        }
        Ok(true)
    }
}

fn answer_for(request: &[u8], now: Time, endpoints: &dyn ControlEndpoints) -> String {
    let Ok(text) = std::str::from_utf8(request) else {
        return "error: the request is not UTF-8\n".to_string();
    };
    let mut answer = endpoints.answer(text.trim_end_matches('\r').trim(), now);
    if !answer.ends_with('\n') {
        answer.push('\n');
    }
    answer
}

/// The client side (`node-lifecycled status` / `explain`): sends `request`, returns the answer.
/// Blocking, with `timeout` on each read and write.
pub fn ask(path: &Path, request: &str, timeout: Duration) -> io::Result<String> {
    let mut stream = std::os::unix::net::UnixStream::connect(path)?;
    stream.set_read_timeout(Some(timeout))?;
    stream.set_write_timeout(Some(timeout))?;
    stream.write_all(format!("{request}\n").as_bytes())?;
    let mut answer = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => answer.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            // The daemon closed with part of our request unread (it was refused): the answer
            // came before the reset.
            Err(e) if !answer.is_empty() && e.kind() == io::ErrorKind::ConnectionReset => break,
            Err(e) => return Err(e),
        }
    }
    String::from_utf8(answer).map_err(|_| io::Error::other("the answer is not UTF-8"))
}
