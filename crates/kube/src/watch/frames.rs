//! Splits a protobuf watch body (`application/vnd.kubernetes.protobuf;stream=watch`) into its
//! events: each a 4-byte big-endian length, then that many bytes of `metav1.WatchEvent`.
//!
//! The twin of [`super::lines::LineSplitter`] with the same bound: a frame longer than the
//! limit is reported once and its bytes skipped as they stream past (its length says where the
//! next one starts), so one bad event costs that event and not the stream.
//!
//! The frames a read completes are copied back to back into one buffer, the [`FrameArena`],
//! and handed on as spans of it ([`FrameSpan`]); the stream empties it at its next read. A
//! buffer of its own per frame (recycled) would be a destination on a different part of the
//! heap for each of a read's renewals, each cold after the server's work between two reads,
//! where the same bytes written front to back into one reused buffer stay warm (the chunk
//! decoder's copy, the step before, does just that).

use super::lines::LineError;

const LENGTH_BYTES: usize = 4;

/// The arena's capacity kept from one read to the next: a steady read's frames (42 renewals at
/// 15,000 nodes, ~13 KB; a Node status ~5 KB) fit. A full state's read (thousands of pods'
/// frames) grows it further, and it is freed once read: a larger capacity kept until the next
/// read would stay resident after the trim that follows a sync, for every watch.
const ARENA_KEPT_BYTES: usize = 64 * 1024;

/// Where a frame is in its [`FrameArena`], for the arena's current read only: a span kept past
/// the next read is refused by [`FrameArena::get`], not read as other bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FrameSpan {
    generation: u64,
    start: usize,
    len: usize,
}

/// The frames of one read, back to back.
#[derive(Debug, Default)]
pub(crate) struct FrameArena {
    bytes: Vec<u8>,
    /// Bumped by every `clear`: a span of an earlier read does not match.
    generation: u64,
}

impl FrameArena {
    fn append(&mut self, frame: &[u8]) -> FrameSpan {
        let start = self.bytes.len();
        self.bytes.extend_from_slice(frame);
        FrameSpan {
            generation: self.generation,
            start,
            len: frame.len(),
        }
    }

    /// The frame's bytes; `None` for a span of an earlier read.
    pub(crate) fn get(&self, span: &FrameSpan) -> Option<&[u8]> {
        if span.generation != self.generation {
            return None;
        }
        self.bytes
            .get(span.start..span.start.checked_add(span.len)?)
    }

    /// Every span handed out so far is done with: the next frames start at the front. A buffer
    /// a large read grew is freed whole (a full state's, before the trim that follows a sync).
    pub(crate) fn clear(&mut self) {
        self.generation = self.generation.wrapping_add(1);
        self.bytes.clear();
        if self.bytes.capacity() > ARENA_KEPT_BYTES {
            self.bytes = Vec::new();
        }
    }

    #[cfg(test)]
    pub(crate) fn capacity(&self) -> usize {
        self.bytes.capacity()
    }
}

#[derive(Debug)]
pub(crate) struct FrameSplitter {
    /// An unfinished frame (its length prefix included) or length prefix.
    buf: Vec<u8>,
    max: usize,
    /// Bytes of an over-long frame still to drop.
    discarding: u64,
}

impl FrameSplitter {
    pub(crate) fn new(max_frame: usize) -> FrameSplitter {
        FrameSplitter {
            buf: Vec::new(),
            max: max_frame.max(1),
            discarding: 0,
        }
    }

    /// Appends body bytes; every completed frame (without its length) goes into `arena` and its
    /// span to `out`. Frames that arrive whole are copied once, straight from `bytes`.
    pub(crate) fn push(
        &mut self,
        mut bytes: &[u8],
        arena: &mut FrameArena,
        out: &mut Vec<Result<FrameSpan, LineError>>,
    ) {
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
                    out.push(Ok(arena.append(&bytes[LENGTH_BYTES..end])));
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
            out.push(Ok(arena.append(&self.buf[LENGTH_BYTES..])));
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

    /// The frames (or errors) `out` holds, read from the arena.
    fn resolved(
        arena: &FrameArena,
        out: Vec<Result<FrameSpan, LineError>>,
    ) -> Vec<Result<Vec<u8>, LineError>> {
        out.into_iter()
            .map(|r| r.map(|span| arena.get(&span).expect("a span of this read").to_vec()))
            .collect()
    }

    #[test]
    fn frames_split_at_any_read_boundary_come_out_whole_and_in_order() {
        let events: Vec<Vec<u8>> = (0..50u8).map(|i| vec![i; usize::from(i) * 7]).collect();
        let refs: Vec<&[u8]> = events.iter().map(Vec::as_slice).collect();
        let body = framed(&refs);
        let mut rng = Rng::new(7);
        for _ in 0..200 {
            let mut s = FrameSplitter::new(1 << 20);
            let mut arena = FrameArena::default();
            let mut out = Vec::new();
            let mut at = 0;
            while at < body.len() {
                let n = (rng.below(40) as usize + 1).min(body.len() - at);
                s.push(&body[at..at + n], &mut arena, &mut out);
                at += n;
            }
            let got: Vec<Vec<u8>> = resolved(&arena, out)
                .into_iter()
                .map(Result::unwrap)
                .collect();
            assert_eq!(got, events);
            assert!(!s.finish());
        }
    }

    /// A read's frames lie back to back in one buffer, reused read after read (its capacity
    /// kept, the frames intact whole or split across reads); a span kept past the next read is
    /// refused, not read as the new frames; a buffer a large read grew is given back.
    #[test]
    fn a_reads_frames_share_one_buffer_that_the_next_read_reuses_and_old_spans_are_refused() {
        let events: Vec<Vec<u8>> = (0..40u8).map(|i| vec![i; 120]).collect();
        let refs: Vec<&[u8]> = events.iter().map(Vec::as_slice).collect();
        let body = framed(&refs);
        let mut s = FrameSplitter::new(1 << 20);
        let mut arena = FrameArena::default();
        let mut out = Vec::new();
        s.push(&body, &mut arena, &mut out);
        let first = out.clone();
        let spans: Vec<FrameSpan> = first.iter().cloned().map(Result::unwrap).collect();
        assert_eq!(
            spans
                .windows(2)
                .filter(|w| w[1].start != w[0].start + w[0].len)
                .count(),
            0,
            "back to back"
        );
        assert_eq!(
            resolved(&arena, std::mem::take(&mut out)),
            events.iter().cloned().map(Ok).collect::<Vec<_>>()
        );
        let capacity = arena.capacity();
        arena.clear();
        // Again, in pieces of 37 bytes (the buffered path too).
        for piece in body.chunks(37) {
            s.push(piece, &mut arena, &mut out);
        }
        assert_eq!(arena.capacity(), capacity, "the same buffer");
        for span in &spans {
            assert_eq!(arena.get(span), None, "a span of the read before");
        }
        let second: Vec<Vec<u8>> = resolved(&arena, std::mem::take(&mut out))
            .into_iter()
            .map(Result::unwrap)
            .collect();
        assert_eq!(second, events);
        arena.clear();
        let big = vec![7u8; 2 * ARENA_KEPT_BYTES];
        s.push(&framed(&[&big]), &mut arena, &mut out);
        assert_eq!(resolved(&arena, std::mem::take(&mut out)), vec![Ok(big)]);
        arena.clear();
        assert_eq!(arena.capacity(), 0, "freed");
    }

    #[test]
    fn an_over_long_frame_is_reported_once_and_the_next_one_still_arrives() {
        let big = vec![9u8; 100];
        let body = framed(&[b"a", &big, b"b"]);
        for step in [1, 3, 1000] {
            let mut s = FrameSplitter::new(10);
            let mut arena = FrameArena::default();
            let mut out = Vec::new();
            for piece in body.chunks(step) {
                s.push(piece, &mut arena, &mut out);
                assert!(s.buffered() <= 14);
            }
            assert_eq!(
                resolved(&arena, out),
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
        let mut arena = FrameArena::default();
        let mut out = Vec::new();
        s.push(&body[..7], &mut arena, &mut out);
        assert!(out.is_empty());
        assert!(s.finish());
    }
}
