//! Splits the decoded body into newline-delimited JSON watch events.
//!
//! Lines are bounded: an over-long line is reported once and then skipped up to its newline, so
//! one bad event costs that event and not the stream.

use std::fmt;

/// Far above any real object (the API server caps objects at about 1.5 MiB in etcd).
pub const DEFAULT_MAX_LINE: usize = 16 * 1024 * 1024;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LineError {
    TooLong { limit: usize },
}

impl fmt::Display for LineError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LineError::TooLong { limit } => {
                write!(f, "watch event longer than {limit} bytes, skipped")
            }
        }
    }
}

#[derive(Debug)]
pub struct LineSplitter {
    /// The start of a line whose newline has not arrived yet (never holds a newline).
    buf: Vec<u8>,
    max: usize,
    /// Inside an over-long line: drop bytes until the next newline.
    discarding: bool,
}

impl Default for LineSplitter {
    fn default() -> Self {
        LineSplitter::new(DEFAULT_MAX_LINE)
    }
}

impl LineSplitter {
    pub fn new(max_line: usize) -> LineSplitter {
        LineSplitter {
            buf: Vec::new(),
            max: max_line.max(1),
            discarding: false,
        }
    }

    /// Appends body bytes; pushes every completed line (without its `\n` / `\r\n`) to `out`.
    /// Blank lines are dropped. Lines that arrive whole are copied once, straight from
    /// `bytes` (every watch event passes here); only a line's unfinished start is held back.
    pub fn push(&mut self, mut bytes: &[u8], out: &mut Vec<Result<Vec<u8>, LineError>>) {
        if self.discarding {
            match find_newline(bytes) {
                None => return,
                Some(p) => {
                    self.discarding = false;
                    bytes = &bytes[p + 1..];
                }
            }
        }
        if !self.buf.is_empty() {
            let Some(p) = find_newline(bytes) else {
                self.buf.extend_from_slice(bytes);
                self.check_unfinished(out);
                return;
            };
            self.buf.extend_from_slice(&bytes[..p]);
            emit(&self.buf, self.max, out);
            self.buf.clear();
            bytes = &bytes[p + 1..];
        }
        while let Some(p) = find_newline(bytes) {
            emit(&bytes[..p], self.max, out);
            bytes = &bytes[p + 1..];
        }
        self.buf.extend_from_slice(bytes);
        self.check_unfinished(out);
    }

    /// An unfinished line already longer than the limit is reported now and skipped.
    fn check_unfinished(&mut self, out: &mut Vec<Result<Vec<u8>, LineError>>) {
        // A trailing CR may be the first half of the CRLF that ends a line of exactly `max`.
        let pending = self.buf.len() - usize::from(self.buf.last() == Some(&b'\r'));
        if pending > self.max {
            out.push(Err(LineError::TooLong { limit: self.max }));
            self.buf = Vec::new();
            self.discarding = true;
        }
    }

    /// At the end of the body: a last line without its newline, if any.
    pub fn finish(&mut self) -> Option<Vec<u8>> {
        let rest = std::mem::take(&mut self.buf);
        let discarding = std::mem::replace(&mut self.discarding, false);
        let line = trim_cr(&rest);
        (!discarding && !line.is_empty()).then(|| line.to_vec())
    }

    /// Bytes held waiting for a newline (memory accounting): at most the limit plus one CR.
    pub fn buffered(&self) -> usize {
        self.buf.len()
    }
}

fn trim_cr(line: &[u8]) -> &[u8] {
    line.strip_suffix(b"\r").unwrap_or(line)
}

fn emit(line: &[u8], max: usize, out: &mut Vec<Result<Vec<u8>, LineError>>) {
    let line = trim_cr(line);
    if line.len() > max {
        out.push(Err(LineError::TooLong { limit: max }));
    } else if !line.is_empty() {
        out.push(Ok(line.to_vec()));
    }
}

/// The first `\n`, eight bytes at a time: every status heartbeat brings a Node of several KB,
/// and a byte-wise search would be a visible share of the daemon's CPU.
fn find_newline(bytes: &[u8]) -> Option<usize> {
    const ONES: u64 = u64::from_ne_bytes([0x01; 8]);
    const HIGHS: u64 = u64::from_ne_bytes([0x80; 8]);
    const NEWLINES: u64 = u64::from_ne_bytes([b'\n'; 8]);
    let mut chunks = bytes.chunks_exact(8);
    let mut offset = 0;
    for chunk in &mut chunks {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        let x = u64::from_ne_bytes(word) ^ NEWLINES;
        // Some byte of x is zero (that byte was a newline).
        if x.wrapping_sub(ONES) & !x & HIGHS != 0 {
            return chunk.iter().position(|&b| b == b'\n').map(|p| offset + p);
        }
        offset += 8;
    }
    let rest = chunks.remainder();
    rest.iter().position(|&b| b == b'\n').map(|p| offset + p)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::Rng;

    fn ok_lines(out: Vec<Result<Vec<u8>, LineError>>) -> Vec<String> {
        out.into_iter()
            .map(|l| String::from_utf8(l.unwrap()).unwrap())
            .collect()
    }

    #[test]
    fn lines_split_anywhere_come_out_whole() {
        let text = b"{\"a\":1}\n{\"b\":2}\r\n\n{\"c\":3}\n";
        for split in 0..=text.len() {
            let mut s = LineSplitter::default();
            let mut out = Vec::new();
            s.push(&text[..split], &mut out);
            s.push(&text[split..], &mut out);
            assert_eq!(
                ok_lines(out),
                ["{\"a\":1}", "{\"b\":2}", "{\"c\":3}"],
                "split {split}"
            );
            assert_eq!(s.finish(), None);
        }
    }

    #[test]
    fn over_long_line_is_reported_once_and_the_next_line_survives() {
        let mut s = LineSplitter::new(10);
        let mut out = Vec::new();
        s.push(b"short\n0123456789ABCDEF", &mut out);
        s.push(b"more of the long line", &mut out);
        s.push(b"\nnext\n", &mut out);
        assert_eq!(out.len(), 3);
        assert_eq!(out[0], Ok(b"short".to_vec()));
        assert_eq!(out[1], Err(LineError::TooLong { limit: 10 }));
        assert_eq!(out[2], Ok(b"next".to_vec()));
        // A long line that arrives whole is reported the same way.
        let mut out = Vec::new();
        s.push(b"0123456789ABCDEF\nok\n", &mut out);
        assert_eq!(
            out,
            [Err(LineError::TooLong { limit: 10 }), Ok(b"ok".to_vec())]
        );
    }

    #[test]
    fn unterminated_last_line_is_returned_by_finish() {
        let mut s = LineSplitter::default();
        let mut out = Vec::new();
        s.push(b"{\"x\":1}\n{\"y\"", &mut out);
        s.push(b":2}", &mut out);
        assert_eq!(out.len(), 1);
        assert_eq!(s.finish(), Some(b"{\"y\":2}".to_vec()));
    }

    #[test]
    fn newline_search_finds_the_first_newline_at_every_offset() {
        for len in 0..40 {
            // Bytes one bit away from a newline (0x0b, 0x8a) must not count as one.
            let other: Vec<u8> = (0..len).map(|i| [0x0b, 0x8a, b'x'][i % 3]).collect();
            assert_eq!(find_newline(&other), None, "len {len}");
            for at in 0..len {
                let mut bytes = other.clone();
                bytes[at] = b'\n';
                // A later newline changes nothing.
                bytes[len - 1] = b'\n';
                assert_eq!(find_newline(&bytes), Some(at), "len {len}, newline at {at}");
            }
        }
    }

    #[test]
    fn property_random_splits_keep_every_line() {
        for seed in 0..200 {
            let mut rng = Rng::new(seed);
            let lines: Vec<String> = (0..rng.below(50))
                .map(|i| {
                    format!(
                        "{{\"n\":{i},\"pad\":\"{}\"}}",
                        "x".repeat(rng.below(300) as usize)
                    )
                })
                .collect();
            let text = lines.iter().map(|l| format!("{l}\n")).collect::<String>();
            let bytes = text.as_bytes();
            let mut s = LineSplitter::new(400);
            let mut out = Vec::new();
            let mut pos = 0;
            while pos < bytes.len() {
                let end = (pos + 1 + rng.below(100) as usize).min(bytes.len());
                s.push(&bytes[pos..end], &mut out);
                pos = end;
            }
            assert_eq!(ok_lines(out), lines, "seed {seed}");
        }
    }
}
