//! Signals as loop events.
//!
//! A signal handler may interrupt the loop anywhere, so it does nothing but write a byte to a
//! socket (signal-hook's self-pipe); the socket's read end is registered with the loop's Poll and
//! the signal is acted on between two actions, like any other input. One socket pair per signal:
//! signal-hook writes the same byte for every signal, so the token says which signal it was.

use std::io::{self, Read};
use std::os::unix::net::UnixStream as StdUnixStream;

use mio::net::UnixStream;
use signal_hook::SigId;
use signal_hook::consts::signal::{SIGCHLD, SIGHUP, SIGINT, SIGTERM, SIGUSR1};

#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Signal {
    /// SIGTERM: systemd's stop.
    Terminate,
    /// SIGINT: Ctrl-C in a terminal; stops like SIGTERM.
    Interrupt,
    /// SIGHUP: re-read the config file (`systemctl reload`).
    Reload,
    /// SIGUSR1: log a state dump.
    DumpState,
    /// SIGCHLD: a fence command ended; reap it (`try_wait`) without blocking or a thread.
    ChildExited,
}

impl Signal {
    pub(crate) const ALL: [Signal; 5] = [
        Signal::Terminate,
        Signal::Interrupt,
        Signal::Reload,
        Signal::DumpState,
        Signal::ChildExited,
    ];

    pub(crate) fn number(self) -> i32 {
        match self {
            Signal::Terminate => SIGTERM,
            Signal::Interrupt => SIGINT,
            Signal::Reload => SIGHUP,
            Signal::DumpState => SIGUSR1,
            Signal::ChildExited => SIGCHLD,
        }
    }

    pub(crate) fn name(self) -> &'static str {
        match self {
            Signal::Terminate => "SIGTERM",
            Signal::Interrupt => "SIGINT",
            Signal::Reload => "SIGHUP",
            Signal::DumpState => "SIGUSR1",
            Signal::ChildExited => "SIGCHLD",
        }
    }
}

struct SignalPipe {
    signal: Signal,
    read_end: UnixStream,
    id: SigId,
}

/// The installed handlers and the read ends the loop watches.
pub struct Signals {
    pipes: Vec<SignalPipe>,
}

impl Signals {
    /// Installs handlers for every `Signal`. From here on these signals no longer kill the
    /// process: they wait in their pipes until the loop reads them.
    pub fn install() -> io::Result<Signals> {
        let mut pipes = Vec::with_capacity(Signal::ALL.len());
        for signal in Signal::ALL {
            let (read_end, write_end) = StdUnixStream::pair()?;
            read_end.set_nonblocking(true)?;
            // The write end is set non-blocking by signal-hook (MSG_DONTWAIT): a full pipe drops
            // the byte, which is fine because one unread byte already means "pending".
            let id = signal_hook::low_level::pipe::register(signal.number(), write_end)?;
            pipes.push(SignalPipe {
                signal,
                read_end: UnixStream::from_std(read_end),
                id,
            });
        }
        Ok(Signals { pipes })
    }

    /// Each signal with the read end to register with the Poll.
    pub fn sources_mut(&mut self) -> impl Iterator<Item = (Signal, &mut UnixStream)> {
        self.pipes.iter_mut().map(|p| (p.signal, &mut p.read_end))
    }

    /// Reads all pending deliveries of `signal` (mio is edge-triggered: read to `WouldBlock`).
    /// Returns how many arrived; several of one kind since the last read count as one request.
    pub fn drain(&mut self, signal: Signal) -> usize {
        let Some(pipe) = self.pipes.iter_mut().find(|p| p.signal == signal) else {
            return 0;
        };
        let mut total = 0;
        let mut buf = [0u8; 64];
        loop {
            match pipe.read_end.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => total += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => break,
            }
        }
        total
    }
}

impl Drop for Signals {
    fn drop(&mut self) {
        for pipe in &self.pipes {
            signal_hook::low_level::unregister(pipe.id);
        }
    }
}
