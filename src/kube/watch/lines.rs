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
    buf: Vec<u8>,
    /// Bytes of `buf` already known to hold no newline.
    scanned: usize,
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
            scanned: 0,
            max: max_line.max(1),
            discarding: false,
        }
    }

    /// Appends body bytes; pushes every completed line (without its `\n` / `\r\n`) to `out`.
    /// Blank lines are dropped.
    pub fn push(&mut self, mut bytes: &[u8], out: &mut Vec<Result<Vec<u8>, LineError>>) {
        if self.discarding {
            match bytes.iter().position(|&b| b == b'\n') {
                None => return,
                Some(p) => {
                    self.discarding = false;
                    bytes = &bytes[p + 1..];
                }
            }
        }
        self.buf.extend_from_slice(bytes);
        let mut start = 0;
        let mut from = self.scanned;
        while let Some(p) = self.buf[from..].iter().position(|&b| b == b'\n') {
            let end = from + p;
            let line = trim_cr(&self.buf[start..end]);
            if line.len() > self.max {
                out.push(Err(LineError::TooLong { limit: self.max }));
            } else if !line.is_empty() {
                out.push(Ok(line.to_vec()));
            }
            start = end + 1;
            from = start;
        }
        self.buf.drain(..start);
        self.scanned = self.buf.len();
        // A trailing CR may be the first half of the CRLF that ends a line of exactly `max`.
        let pending = self.buf.len() - usize::from(self.buf.last() == Some(&b'\r'));
        if pending > self.max {
            out.push(Err(LineError::TooLong { limit: self.max }));
            self.buf = Vec::new();
            self.scanned = 0;
            self.discarding = true;
        }
    }

    /// At the end of the body: a last line without its newline, if any.
    pub fn finish(&mut self) -> Option<Vec<u8>> {
        let rest = std::mem::take(&mut self.buf);
        self.scanned = 0;
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::Rng;

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
