//! Splits a protobuf watch body (`application/vnd.kubernetes.protobuf;stream=watch`) into its
//! events: each a 4-byte big-endian length, then that many bytes of `metav1.WatchEvent`.
//!
//! The twin of [`super::lines::LineSplitter`] with the same bound: a frame longer than the
//! limit is reported once and its bytes skipped as they stream past (its length says where the
//! next one starts), so one bad event costs that event and not the stream.

use super::lines::LineError;

const LENGTH_BYTES: usize = 4;

/// At most this many decoded frames' buffers are kept for the next frames (`recycle`), each of
/// at most `SPARE_FRAME_BYTES`: a read of the Lease watch at 5,000 nodes brings ~22 renewals of
/// a few hundred bytes. Larger frames (nodes, pods) are not kept: ≤ 32 KiB per stream.
const SPARE_FRAMES: usize = 32;
const SPARE_FRAME_BYTES: usize = 1024;

#[derive(Debug)]
pub(crate) struct FrameSplitter {
    /// An unfinished frame (its length prefix included) or length prefix.
    buf: Vec<u8>,
    max: usize,
    /// Bytes of an over-long frame still to drop.
    discarding: u64,
    /// Buffers of frames already decoded, handed back (`recycle`): an allocation and a free
    /// per Lease renewal were ~5 % of the daemon's CPU at 5,000 nodes.
    spare: Vec<Vec<u8>>,
}

impl FrameSplitter {
    pub(crate) fn new(max_frame: usize) -> FrameSplitter {
        FrameSplitter {
            buf: Vec::new(),
            max: max_frame.max(1),
            discarding: 0,
            spare: Vec::new(),
        }
    }

    /// A decoded frame's buffer, for the next frames (kept only if small, and few).
    pub(crate) fn recycle(&mut self, frame: Vec<u8>) {
        if self.spare.len() < SPARE_FRAMES && frame.capacity() <= SPARE_FRAME_BYTES {
            self.spare.push(frame);
        }
    }

    /// Appends body bytes; pushes every completed frame (without its length) to `out`. Frames
    /// that arrive whole are copied once, straight from `bytes`.
    pub(crate) fn push(&mut self, mut bytes: &[u8], out: &mut Vec<Result<Vec<u8>, LineError>>) {
        loop {
            if self.discarding > 0 {
                let n = self.discarding.min(bytes.len() as u64);
                self.discarding -= n;
                bytes = &bytes[n as usize..];
            }
            if bytes.is_empty() {
                return;
            }
            if self.buf.is_empty() && bytes.len() >= LENGTH_BYTES {
                // Fast path: whole frames straight from the read.
                let len = frame_len(&bytes[..LENGTH_BYTES]);
                if len > self.max as u64 {
                    out.push(Err(LineError::TooLong { limit: self.max }));
                    self.discarding = len;
                    bytes = &bytes[LENGTH_BYTES..];
                    continue;
                }
                let end = LENGTH_BYTES + len as usize;
                if bytes.len() >= end {
                    out.push(Ok(copy(&mut self.spare, &bytes[LENGTH_BYTES..end])));
                    bytes = &bytes[end..];
                    continue;
                }
            }
            // Only an unfinished frame is held back: first its length, then its bytes.
            if self.buf.len() < LENGTH_BYTES {
                let take = (LENGTH_BYTES - self.buf.len()).min(bytes.len());
                self.buf.extend_from_slice(&bytes[..take]);
                bytes = &bytes[take..];
                if self.buf.len() < LENGTH_BYTES {
                    return;
                }
                let len = frame_len(&self.buf);
                if len > self.max as u64 {
                    out.push(Err(LineError::TooLong { limit: self.max }));
                    self.discarding = len;
                    self.buf.clear();
                    continue;
                }
            }
            let end = LENGTH_BYTES + frame_len(&self.buf) as usize;
            let take = (end - self.buf.len()).min(bytes.len());
            self.buf.extend_from_slice(&bytes[..take]);
            bytes = &bytes[take..];
            if self.buf.len() < end {
                return;
            }
            out.push(Ok(copy(&mut self.spare, &self.buf[LENGTH_BYTES..])));
            self.buf.clear();
        }
    }

    /// At the end of the body: whether it ended inside a frame (which is then lost).
    pub(crate) fn finish(&mut self) -> bool {
        let inside = !self.buf.is_empty() || self.discarding > 0;
        self.buf = Vec::new();
        self.discarding = 0;
        inside
    }

    /// Bytes held for an unfinished frame (memory accounting): at most the limit plus 4.
    #[cfg(test)]
    pub(crate) fn buffered(&self) -> usize {
        self.buf.len()
    }
}

/// `bytes` in a spare buffer if there is one.
fn copy(spare: &mut Vec<Vec<u8>>, bytes: &[u8]) -> Vec<u8> {
    match spare.pop() {
        Some(mut buf) => {
            buf.clear();
            buf.extend_from_slice(bytes);
            buf
        }
        None => bytes.to_vec(),
    }
}

fn frame_len(prefix: &[u8]) -> u64 {
    u64::from(u32::from_be_bytes([
        prefix[0], prefix[1], prefix[2], prefix[3],
    ]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::Rng;

    fn framed(events: &[&[u8]]) -> Vec<u8> {
        let mut out = Vec::new();
        for e in events {
            out.extend((e.len() as u32).to_be_bytes());
            out.extend_from_slice(e);
        }
        out
    }

    #[test]
    fn frames_split_at_any_read_boundary_come_out_whole_and_in_order() {
        let events: Vec<Vec<u8>> = (0..50u8).map(|i| vec![i; usize::from(i) * 7]).collect();
        let refs: Vec<&[u8]> = events.iter().map(Vec::as_slice).collect();
        let body = framed(&refs);
        let mut rng = Rng::new(7);
        for _ in 0..200 {
            let mut s = FrameSplitter::new(1 << 20);
            let mut out = Vec::new();
            let mut at = 0;
            while at < body.len() {
                let n = (rng.below(40) as usize + 1).min(body.len() - at);
                s.push(&body[at..at + n], &mut out);
                at += n;
            }
            let got: Vec<Vec<u8>> = out.into_iter().map(Result::unwrap).collect();
            assert_eq!(got, events);
            assert!(!s.finish());
        }
    }

    /// Buffers handed back are reused for the next frames, whole or split across reads, and
    /// the frames stay intact; a buffer larger than `SPARE_FRAME_BYTES`, or one beyond
    /// `SPARE_FRAMES`, is not kept.
    #[test]
    fn recycled_frame_buffers_are_reused_and_bounded() {
        let events: Vec<Vec<u8>> = (0..40u8).map(|i| vec![i; 120]).collect();
        let refs: Vec<&[u8]> = events.iter().map(Vec::as_slice).collect();
        let body = framed(&refs);
        let mut s = FrameSplitter::new(1 << 20);
        let mut out = Vec::new();
        s.push(&body, &mut out);
        let first: Vec<Vec<u8>> = out.drain(..).map(Result::unwrap).collect();
        assert_eq!(first, events);
        let buffers: Vec<*const u8> = first.iter().map(|f| f.as_ptr()).collect();
        for frame in first {
            s.recycle(frame);
        }
        assert_eq!(s.spare.len(), SPARE_FRAMES);
        // Again, in pieces of 37 bytes (the buffered path too).
        for piece in body.chunks(37) {
            s.push(piece, &mut out);
        }
        let second: Vec<Vec<u8>> = out.drain(..).map(Result::unwrap).collect();
        assert_eq!(second, events);
        let reused = second
            .iter()
            .filter(|f| buffers.contains(&f.as_ptr()))
            .count();
        // The spare buffers are alive until taken, so no fresh allocation can have their
        // addresses: without the reuse, at most the 8 dropped ones could come back.
        assert!(s.spare.is_empty(), "every spare buffer was taken");
        assert!(reused >= SPARE_FRAMES, "{reused} frames in reused buffers");
        s.recycle(vec![0u8; SPARE_FRAME_BYTES + 1]);
        assert!(s.spare.is_empty(), "too large to keep");
    }

    #[test]
    fn an_over_long_frame_is_reported_once_and_the_next_one_still_arrives() {
        let big = vec![9u8; 100];
        let body = framed(&[b"a", &big, b"b"]);
        for step in [1, 3, 1000] {
            let mut s = FrameSplitter::new(10);
            let mut out = Vec::new();
            for piece in body.chunks(step) {
                s.push(piece, &mut out);
                assert!(s.buffered() <= 14);
            }
            assert_eq!(
                out,
                vec![
                    Ok(b"a".to_vec()),
                    Err(LineError::TooLong { limit: 10 }),
                    Ok(b"b".to_vec())
                ],
                "step {step}"
            );
        }
    }

    #[test]
    fn a_body_ending_inside_a_frame_says_so() {
        let body = framed(&[b"abcdef"]);
        let mut s = FrameSplitter::new(100);
        let mut out = Vec::new();
        s.push(&body[..7], &mut out);
        assert!(out.is_empty());
        assert!(s.finish());
    }
}
