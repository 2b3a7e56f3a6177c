//! Reading a 2xx answer's JSON body into a value, and telling a broken transport from bad JSON.

use std::io::{BufReader, Read};

use serde::de::DeserializeOwned;

use super::status::read_error;
use crate::error::ApiError;

/// Decodes a 2xx body, reading it to the end (keep-alive).
///
/// A body of up to `SLICE_DECODE_MAX` bytes (a write's answer, one object) is read whole and
/// decoded from the slice: `serde_json::from_reader` pulls a reader one byte per call, and a
/// 64 KiB `BufReader` is zero-filled on its first read, far more work than a 1 KB answer's
/// decode. A longer body (a LIST page) streams through the reader, so memory stays bounded.
pub(super) fn decode<T: DeserializeOwned>(
    base_url: &str,
    label: &str,
    body: impl Read,
) -> Result<T, ApiError> {
    let mut reader = RecordingReader {
        inner: body,
        error: None,
    };
    let mut head = Vec::new();
    let read = (&mut reader)
        .take(SLICE_DECODE_MAX as u64 + 1)
        .read_to_end(&mut head);
    if read.is_err() {
        // As `from_reader` would have judged it: a syntax error before the break is the
        // JSON's; otherwise the body broke off or timed out, which is the transport.
        return match (serde_json::from_slice::<T>(&head), reader.error.take()) {
            (Err(e), _) if !e.is_eof() => Err(ApiError::Decode(format!("{label}: {e}"))),
            (_, Some(io_error)) => Err(read_error(base_url, label, io_error)),
            (_, None) => Err(ApiError::Decode(format!("{label}: the body broke off"))),
        };
    }
    if head.len() <= SLICE_DECODE_MAX {
        return serde_json::from_slice(&head)
            .map_err(|e| ApiError::Decode(format!("{label}: {e}")));
    }
    let mut rest =
        std::io::Cursor::new(head).chain(BufReader::with_capacity(64 * 1024, &mut reader));
    let decoded = serde_json::from_reader(&mut rest);
    drop(rest);
    match decoded {
        Ok(value) => Ok(value),
        Err(e) => match reader.error.take() {
            // The body broke off or timed out: that is the transport, not the JSON.
            Some(io_error) => Err(read_error(base_url, label, io_error)),
            None => Err(ApiError::Decode(format!("{label}: {e}"))),
        },
    }
}

/// The longest body `decode` reads whole before decoding: the size of the buffer
/// it streamed every body through before.
const SLICE_DECODE_MAX: usize = 64 * 1024;

/// Keeps the I/O error behind a serde_json failure (serde only keeps its message).
struct RecordingReader<R> {
    inner: R,
    error: Option<ureq::Error>,
}

impl<R: Read> Read for RecordingReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.inner.read(buf).inspect_err(|e| {
            if self.error.is_none() {
                let copy = std::io::Error::new(e.kind(), e.to_string());
                self.error = Some(match e.kind() {
                    std::io::ErrorKind::TimedOut => ureq::Error::Timeout(ureq::Timeout::Global),
                    _ => ureq::Error::Io(copy),
                });
            }
        })
    }
}
