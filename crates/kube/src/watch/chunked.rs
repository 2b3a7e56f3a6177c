//! `Transfer-Encoding: chunked` body decoding as a byte-at-a-time state machine, so a chunk
//! header, its data or its CRLF may be split across reads at any boundary.
//!
//! The API server sends every watch event as one or more chunks and ends the body with the
//! zero-size chunk when `timeoutSeconds` expires; that end is the only *clean* end of a watch.

use std::fmt;

/// Longest chunk-size line (size + extensions) or trailer line accepted.
const MAX_LINE: usize = 4096;
/// 15 hex digits keep the size below 2^60: no overflow, and larger than any real chunk.
const MAX_SIZE_DIGITS: usize = 15;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// Reading the hex size; `digits` seen so far.
    Size {
        digits: usize,
    },
    /// After the size: optional whitespace and `;ext=val` until CR LF.
    Extension,
    SizeLf,
    Data {
        remaining: u64,
    },
    DataCr,
    DataLf,
    /// After the last chunk: at the start of a trailer line (or the final CR LF).
    TrailerStart,
    TrailerLine,
    EndLf,
    Done,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ChunkedError {
    BadSize(u8),
    SizeTooLarge,
    LineTooLong,
    MissingCrlf(u8),
}

impl fmt::Display for ChunkedError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ChunkedError::BadSize(b) => {
                write!(f, "chunked body: unexpected byte 0x{b:02x} in chunk size")
            }
            ChunkedError::SizeTooLarge => write!(f, "chunked body: chunk size too large"),
            ChunkedError::LineTooLong => write!(
                f,
                "chunked body: chunk header or trailer longer than {MAX_LINE} bytes"
            ),
            ChunkedError::MissingCrlf(b) => write!(
                f,
                "chunked body: expected CRLF after chunk data, got 0x{b:02x}"
            ),
        }
    }
}

#[derive(Debug)]
pub struct ChunkedDecoder {
    state: State,
    size: u64,
    line_len: usize,
}

impl Default for ChunkedDecoder {
    fn default() -> Self {
        ChunkedDecoder::new()
    }
}

impl ChunkedDecoder {
    pub fn new() -> ChunkedDecoder {
        ChunkedDecoder {
            state: State::Size { digits: 0 },
            size: 0,
            line_len: 0,
        }
    }

    /// The zero-size chunk and the trailers have been read: the body ended cleanly.
    pub fn is_done(&self) -> bool {
        self.state == State::Done
    }

    /// Decodes `input`, appending chunk data to `out`. Returns how many bytes were consumed:
    /// all of them, unless the body ended (bytes after the end belong to the next response).
    /// After an error the decoder must not be fed again.
    pub fn feed(&mut self, input: &[u8], out: &mut Vec<u8>) -> Result<usize, ChunkedError> {
        let mut i = 0;
        while i < input.len() {
            let b = input[i];
            match self.state {
                State::Done => return Ok(i),
                State::Data { remaining } => {
                    let take = usize::try_from(remaining)
                        .unwrap_or(usize::MAX)
                        .min(input.len() - i);
                    out.extend_from_slice(&input[i..i + take]);
                    i += take;
                    let remaining = remaining - take as u64;
                    self.state = if remaining == 0 {
                        State::DataCr
                    } else {
                        State::Data { remaining }
                    };
                    continue;
                }
                State::Size { digits } => match b {
                    b'0'..=b'9' | b'a'..=b'f' | b'A'..=b'F' => {
                        if digits == MAX_SIZE_DIGITS {
                            return Err(ChunkedError::SizeTooLarge);
                        }
                        let v = (b as char).to_digit(16).unwrap_or(0) as u64;
                        self.size = self.size * 16 + v;
                        self.state = State::Size { digits: digits + 1 };
                        self.line_len += 1;
                    }
                    b'\r' | b'\n' | b';' | b' ' | b'\t' if digits > 0 => {
                        self.state = State::Extension;
                        continue; // re-examine the byte in Extension
                    }
                    other => return Err(ChunkedError::BadSize(other)),
                },
                State::Extension => match b {
                    b'\r' => self.state = State::SizeLf,
                    b'\n' => self.end_size_line(),
                    _ => {
                        self.line_len += 1;
                        if self.line_len > MAX_LINE {
                            return Err(ChunkedError::LineTooLong);
                        }
                    }
                },
                State::SizeLf => {
                    if b != b'\n' {
                        return Err(ChunkedError::MissingCrlf(b));
                    }
                    self.end_size_line();
                }
                State::DataCr => match b {
                    b'\r' => self.state = State::DataLf,
                    b'\n' => self.state = State::Size { digits: 0 },
                    other => return Err(ChunkedError::MissingCrlf(other)),
                },
                State::DataLf => {
                    if b != b'\n' {
                        return Err(ChunkedError::MissingCrlf(b));
                    }
                    self.state = State::Size { digits: 0 };
                }
                State::TrailerStart => match b {
                    b'\r' => self.state = State::EndLf,
                    b'\n' => {
                        self.state = State::Done;
                        return Ok(i + 1);
                    }
                    _ => {
                        self.line_len = 1;
                        self.state = State::TrailerLine;
                    }
                },
                State::TrailerLine => {
                    if b == b'\n' {
                        self.state = State::TrailerStart;
                    } else {
                        self.line_len += 1;
                        if self.line_len > MAX_LINE {
                            return Err(ChunkedError::LineTooLong);
                        }
                    }
                }
                State::EndLf => {
                    if b != b'\n' {
                        return Err(ChunkedError::MissingCrlf(b));
                    }
                    self.state = State::Done;
                    return Ok(i + 1);
                }
            }
            i += 1;
        }
        Ok(i)
    }

    fn end_size_line(&mut self) {
        self.line_len = 0;
        self.state = if self.size == 0 {
            State::TrailerStart
        } else {
            State::Data {
                remaining: self.size,
            }
        };
        self.size = 0;
    }
}

/// Encodes `data` as chunks of at most `chunk` bytes (test servers and property tests).
pub fn encode_chunks(data: &[u8], chunk: usize, out: &mut Vec<u8>) {
    for piece in data.chunks(chunk.max(1)) {
        out.extend_from_slice(format!("{:x}\r\n", piece.len()).as_bytes());
        out.extend_from_slice(piece);
        out.extend_from_slice(b"\r\n");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::Rng;

    fn decode_all(input: &[u8]) -> Result<(Vec<u8>, usize, bool), ChunkedError> {
        let mut d = ChunkedDecoder::new();
        let mut out = Vec::new();
        let n = d.feed(input, &mut out)?;
        Ok((out, n, d.is_done()))
    }

    #[test]
    fn extensions_trailers_and_bytes_after_the_end() {
        let body = b"4;name=val\r\nWiki\r\n5\r\npedia\r\nE\r\n in\r\n\r\nchunks.\r\n0\r\nExpires: never\r\n\r\nNEXT";
        let (out, consumed, done) = decode_all(body).unwrap();
        assert_eq!(out, b"Wikipedia in\r\n\r\nchunks.");
        assert!(done);
        assert_eq!(&body[consumed..], b"NEXT");
    }

    #[test]
    fn split_at_every_boundary_gives_the_same_bytes() {
        let body = b"1a\r\nabcdefghijklmnopqrstuvwxyz\r\n3 ; x=\"y\"\r\n123\r\n0\r\n\r\n";
        for split in 0..=body.len() {
            let mut d = ChunkedDecoder::new();
            let mut out = Vec::new();
            d.feed(&body[..split], &mut out).unwrap();
            d.feed(&body[split..], &mut out).unwrap();
            assert!(d.is_done(), "split {split}");
            assert_eq!(out, b"abcdefghijklmnopqrstuvwxyz123", "split {split}");
        }
    }

    #[test]
    fn malformed_bodies_are_errors() {
        assert_eq!(decode_all(b"zz\r\n"), Err(ChunkedError::BadSize(b'z')));
        assert_eq!(decode_all(b"\r\n"), Err(ChunkedError::BadSize(b'\r')));
        assert_eq!(
            decode_all(b"ffffffffffffffff\r\n"),
            Err(ChunkedError::SizeTooLarge)
        );
        assert_eq!(
            decode_all(b"2\r\nabX"),
            Err(ChunkedError::MissingCrlf(b'X'))
        );
        let mut long = b"1;".to_vec();
        long.resize(MAX_LINE + 10, b'x');
        assert_eq!(decode_all(&long), Err(ChunkedError::LineTooLong));
    }

    #[test]
    fn property_random_chunking_and_random_splits_round_trip() {
        for seed in 0..200 {
            let mut rng = Rng::new(seed);
            let len = rng.below(3000) as usize;
            let data: Vec<u8> = (0..len).map(|_| rng.next_u64() as u8).collect();
            let mut body = Vec::new();
            encode_chunks(&data, 1 + rng.below(500) as usize, &mut body);
            body.extend_from_slice(b"0\r\n\r\n");
            let mut d = ChunkedDecoder::new();
            let mut out = Vec::new();
            let mut pos = 0;
            while pos < body.len() {
                let step = 1 + rng.below(64) as usize;
                let end = (pos + step).min(body.len());
                let n = d.feed(&body[pos..end], &mut out).unwrap();
                assert_eq!(n, end - pos, "seed {seed}");
                pos = end;
            }
            assert!(d.is_done(), "seed {seed}");
            assert_eq!(out, data, "seed {seed}");
        }
    }

    #[test]
    fn property_garbage_never_panics() {
        for seed in 0..500 {
            let mut rng = Rng::new(seed);
            let len = rng.below(200) as usize;
            let alphabet = b"0123456789abcdefABCDEF\r\n; =x";
            let garbage: Vec<u8> = (0..len)
                .map(|_| {
                    if rng.chance(80) {
                        alphabet[rng.below(alphabet.len() as u64) as usize]
                    } else {
                        rng.next_u64() as u8
                    }
                })
                .collect();
            let mut d = ChunkedDecoder::new();
            let mut out = Vec::new();
            let _ = d.feed(&garbage, &mut out);
        }
    }
}
