//! The stream's socket I/O, one read budget at a time: the request flushed, and bytes read until
//! `WouldBlock` (mio is edge-triggered), on plain TCP or through rustls driven by hand.

use std::io::{self, BufRead, Read, Write};

use super::{Drain, WatchStream};
use crate::time::Time;
use crate::watch::response::{StreamEnd, WatchItem};

impl WatchStream {
    pub(super) fn flush(&mut self) -> io::Result<()> {
        if let Some(tls) = &mut self.tls {
            while tls.wants_write() {
                match tls.write_tls(&mut self.socket) {
                    Ok(_) => {}
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(e),
                }
            }
            return Ok(());
        }
        while !self.pending.is_empty() {
            match self.socket.write(&self.pending) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => {
                    self.pending.drain(..n);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    pub(super) fn read_plain(
        &mut self,
        now: Time,
        out: &mut Vec<WatchItem>,
    ) -> Result<Drain, StreamEnd> {
        let mut delivered = 0;
        // A short read on a paused stream left the socket empty: reading on until
        // `WouldBlock` would cost a syscall for nothing. Not on readiness events (mio's
        // edge-triggered rule is to read until `WouldBlock`); a paused stream is read again
        // on its timer, and registering it again reports bytes that arrived meanwhile
        // (one `recv` per coalesced read instead of two).
        let mut drained = false;
        loop {
            if drained {
                return Ok(Drain::Done);
            }
            self.socket_reads += 1;
            match self.socket.read(&mut self.buf) {
                Ok(0) => {
                    self.decoder.eof(out);
                    return Ok(Drain::Done);
                }
                Ok(n) => {
                    drained = self.paused && n < self.buf.len();
                    self.last_activity = now;
                    self.bytes_received += n as u64;
                    self.awaiting_reused = false;
                    self.decoder.feed(&self.buf[..n], out);
                    if self.decoder.is_ended() {
                        return Ok(Drain::Done);
                    }
                    delivered += n;
                    if delivered >= self.read_budget {
                        return Ok(Drain::MoreToRead);
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(Drain::Done),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(StreamEnd::Broken(format!("read: {e}"))),
            }
        }
    }

    pub(super) fn read_tls(
        &mut self,
        now: Time,
        out: &mut Vec<WatchItem>,
    ) -> Result<Drain, StreamEnd> {
        let Some(tls) = &mut self.tls else {
            return Ok(Drain::Done);
        };
        let mut delivered = 0;
        let mut tcp_eof = false;
        // As in `read_plain`: a short read on a paused stream left the socket empty.
        let mut drained = false;
        loop {
            // Drain every plaintext byte rustls holds first: edge-triggered, nothing will
            // remind us, and rustls refuses more TLS records while its plaintext buffer is full.
            // Decoded where rustls holds it (`fill_buf`), without a copy.
            loop {
                let mut reader = tls.reader();
                match reader.fill_buf() {
                    Ok([]) => {
                        // close_notify: the server closed the connection properly.
                        self.decoder.eof(out);
                        return Ok(Drain::Done);
                    }
                    Ok(plaintext) => {
                        let n = plaintext.len();
                        self.awaiting_reused = false;
                        self.decoder.feed(plaintext, out);
                        reader.consume(n);
                        if self.decoder.is_ended() {
                            return Ok(Drain::Done);
                        }
                        delivered += n;
                        if delivered >= self.read_budget {
                            return Ok(Drain::MoreToRead);
                        }
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => {
                        // API server shutdown: TCP dropped without close_notify.
                        return Err(StreamEnd::Broken(
                            "connection closed without TLS close_notify".into(),
                        ));
                    }
                    Err(e) => return Err(StreamEnd::Broken(format!("TLS read: {e}"))),
                }
            }
            // Key updates and the rest of the handshake may need writing.
            while tls.wants_write() {
                match tls.write_tls(&mut self.socket) {
                    Ok(_) => {}
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(StreamEnd::Broken(format!("write: {e}"))),
                }
            }
            if tcp_eof {
                return Err(StreamEnd::Broken(
                    "connection closed without TLS close_notify".into(),
                ));
            }
            if self.wire_at == self.wire_end {
                if drained {
                    return Ok(Drain::Done);
                }
                // One large read instead of one per 4 KiB, until it would block.
                self.socket_reads += 1;
                match self.socket.read(&mut self.buf) {
                    Ok(0) => {
                        tcp_eof = true;
                        continue;
                    }
                    Ok(n) => {
                        drained = self.paused && n < self.buf.len();
                        (self.wire_at, self.wire_end) = (0, n);
                        self.last_activity = now;
                        self.bytes_received += n as u64;
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(Drain::Done),
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) => return Err(StreamEnd::Broken(format!("read: {e}"))),
                }
            }
            // From memory: rustls takes what its deframer has room for; the rest waits here
            // for the next round of this loop (or the next call, after a full budget).
            let mut wire = &self.buf[self.wire_at..self.wire_end];
            match tls.read_tls(&mut wire) {
                Ok(n) => self.wire_at += n,
                Err(e) => return Err(StreamEnd::Broken(format!("TLS read: {e}"))),
            }
            if let Err(e) = tls.process_new_packets() {
                // Send the alert rustls queued, best effort.
                let _ = tls.write_tls(&mut self.socket);
                return Err(StreamEnd::Broken(format!("TLS: {e}")));
            }
        }
    }
}
