//! The journal's native protocol (systemd.journal-fields(7), sd_journal_sendv(3)): one datagram
//! per entry on `/run/systemd/journal/socket`, each field `KEY=value\n`, or for a value holding a
//! newline the binary-safe form `KEY\n`, its length as 64-bit little endian, the value, `\n`.
//!
//! Written in-tree (some 60 lines) rather than with `systemd-journal-logger`: that crate installs
//! its own global logger, so the RUST_LOG filter, the text/JSON fallbacks and per-line fields
//! would have to be rebuilt around it, and it cannot be pointed at a test socket.
//!
//! The socket is non-blocking: a journald that cannot keep up must not stall the event loop.
//! A datagram that cannot be sent (full, too large, journald restarting) is written to stderr
//! instead, which systemd connects to the journal too (without the fields).

use std::io;
use std::os::unix::net::UnixDatagram;
use std::path::Path;

/// Where journald listens.
pub(crate) const JOURNAL_SOCKET: &str = "/run/systemd/journal/socket";

/// Appends one field in the form the journal reads.
pub(crate) fn put_field(out: &mut Vec<u8>, key: &str, value: &str) {
    out.extend_from_slice(key.as_bytes());
    if value.contains('\n') {
        out.push(b'\n');
        out.extend_from_slice(&(value.len() as u64).to_le_bytes());
        out.extend_from_slice(value.as_bytes());
    } else {
        out.push(b'=');
        out.extend_from_slice(value.as_bytes());
    }
    out.push(b'\n');
}

/// Parses a datagram back into fields (tests, and anyone checking what was sent).
pub fn parse_fields(mut data: &[u8]) -> Option<Vec<(String, String)>> {
    let mut fields = Vec::new();
    while !data.is_empty() {
        let end = data.iter().position(|b| *b == b'\n' || *b == b'=')?;
        let key = String::from_utf8(data[..end].to_vec()).ok()?;
        if data[end] == b'=' {
            let rest = &data[end + 1..];
            let nl = rest.iter().position(|b| *b == b'\n')?;
            fields.push((key, String::from_utf8(rest[..nl].to_vec()).ok()?));
            data = &rest[nl + 1..];
        } else {
            let rest = &data[end + 1..];
            let len = u64::from_le_bytes(rest.get(..8)?.try_into().ok()?) as usize;
            let value = rest.get(8..8 + len)?;
            if rest.get(8 + len) != Some(&b'\n') {
                return None;
            }
            fields.push((key, String::from_utf8(value.to_vec()).ok()?));
            data = &rest[8 + len + 1..];
        }
    }
    Some(fields)
}

/// A connected, non-blocking datagram socket to journald.
#[derive(Debug)]
pub(crate) struct JournalSocket {
    socket: UnixDatagram,
}

impl JournalSocket {
    pub(crate) fn connect(path: &Path) -> io::Result<JournalSocket> {
        let socket = UnixDatagram::unbound()?;
        socket.connect(path)?;
        socket.set_nonblocking(true)?;
        Ok(JournalSocket { socket })
    }

    /// Sends one entry; an error means it was not sent (the caller falls back to stderr).
    pub(crate) fn send(&self, fields: &[(&str, &str)]) -> io::Result<()> {
        let mut datagram = Vec::with_capacity(256);
        for (key, value) in fields {
            put_field(&mut datagram, key, value);
        }
        let sent = self.socket.send(&datagram)?;
        if sent != datagram.len() {
            return Err(io::Error::other("journal datagram truncated"));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_values_are_key_equals_value_and_multiline_ones_binary_safe() {
        let mut out = Vec::new();
        put_field(&mut out, "NODE", "worker-3");
        put_field(&mut out, "MESSAGE", "a\nb");
        let mut expected = b"NODE=worker-3\nMESSAGE\n".to_vec();
        expected.extend_from_slice(&3u64.to_le_bytes());
        expected.extend_from_slice(b"a\nb\n");
        assert_eq!(out, expected);
        assert_eq!(
            parse_fields(&out).unwrap(),
            [
                ("NODE".to_string(), "worker-3".to_string()),
                ("MESSAGE".to_string(), "a\nb".to_string())
            ]
        );
        assert_eq!(parse_fields(b"MESSAGE\n\x05\0\0\0\0\0\0\0ab"), None);
    }
}
