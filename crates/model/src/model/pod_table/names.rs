//! The pods' names, all in one arena: a name is a length (LEB128, one byte below 128) and its
//! bytes, found by a 4-byte offset kept in the pod's record. One small allocation per pod (a
//! `Box<str>`: 16 bytes in the record, the allocator's rounding and header around ~22 bytes of
//! text) becomes ~23 bytes in a shared buffer.
//!
//! The arena is a list of chunks of [`CHUNK`] bytes (a name never spans two), so that it grows
//! without copying what it holds and its spare room is at most one chunk (a single buffer grown
//! by a factor would keep up to that factor's share unused, and would hold the old and the new
//! buffer at once while it moves). An offset is the chunk's number times [`CHUNK`] plus the
//! position in it: u32 offsets address 4 GiB of names, some 190 million pods, beyond what the
//! table's u32 slots could hold anyway.
//!
//! A removed name leaves a hole, counted in `dead`; [`NameArena::compact`] closes the holes.

/// Bytes per chunk. A name longer than that (no API server accepts one: pod names are at most
/// 253 bytes) gets a chunk of its own, as long as it needs.
pub(super) const CHUNK: usize = 1 << 16;
const CHUNK_BITS: u32 = 16;

#[derive(Debug, Default)]
pub(super) struct NameArena {
    chunks: Vec<Vec<u8>>,
    /// Bytes of names removed since the last compaction.
    dead: usize,
    /// Bytes written since the last compaction (live and dead).
    used: usize,
}

/// `len` as LEB128 into `out`; returns the bytes used.
fn encode_len(mut len: usize, out: &mut [u8; 10]) -> usize {
    let mut n = 0;
    loop {
        let byte = (len & 0x7f) as u8;
        len >>= 7;
        if len == 0 {
            out[n] = byte;
            return n + 1;
        }
        out[n] = byte | 0x80;
        n += 1;
    }
}

/// The length at the start of `bytes` and the bytes it took; `None` if they end first.
fn decode_len(bytes: &[u8]) -> Option<(usize, usize)> {
    let mut len = 0usize;
    for (i, b) in bytes.iter().enumerate().take(10) {
        len |= usize::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            return Some((len, i + 1));
        }
    }
    None
}

impl NameArena {
    /// Stores `name`; returns its offset.
    pub(super) fn push(&mut self, name: &str) -> u32 {
        let mut head = [0u8; 10];
        let head_len = encode_len(name.len(), &mut head);
        let total = head_len + name.len();
        let fits = self
            .chunks
            .last()
            .is_some_and(|c| c.is_empty() || c.len() + total <= CHUNK);
        if !fits {
            // The first chunk starts small (a table of a few pods should not hold 64 KiB); the
            // next ones are whole at once: the one before is full.
            let size = if self.chunks.is_empty() { 256 } else { CHUNK };
            self.chunks.push(Vec::with_capacity(size.max(total)));
        }
        let number = self.chunks.len() - 1;
        let chunk = &mut self.chunks[number];
        if chunk.capacity() - chunk.len() < total {
            // Doubling up to a whole chunk (only the first chunk, or one shrunk by
            // `shrink_to_fit`, is ever smaller).
            let want = (chunk.capacity() * 2).min(CHUNK).max(chunk.len() + total);
            chunk.reserve_exact(want - chunk.len());
        }
        let offset = (number << CHUNK_BITS) + chunk.len();
        chunk.extend_from_slice(&head[..head_len]);
        chunk.extend_from_slice(name.as_bytes());
        self.used += total;
        offset as u32
    }

    /// The name at `offset` (empty for an offset the arena never gave).
    pub(super) fn get(&self, offset: u32) -> &[u8] {
        self.entry(offset).map_or(&[], |(head, len, bytes)| {
            bytes.get(head..head + len).unwrap_or(&[])
        })
    }

    /// The chunk's bytes from `offset` on, with the length's size and the length.
    fn entry(&self, offset: u32) -> Option<(usize, usize, &[u8])> {
        let chunk = self.chunks.get((offset >> CHUNK_BITS) as usize)?;
        let bytes = chunk.get((offset as usize) & (CHUNK - 1)..)?;
        let (len, head) = decode_len(bytes)?;
        Some((head, len, bytes))
    }

    /// The name at `offset` is no longer used: its bytes are a hole until the next compaction.
    pub(super) fn remove(&mut self, offset: u32) {
        if let Some((head, len, _)) = self.entry(offset) {
            self.dead += head + len;
        }
    }

    /// Whether the holes are worth closing: over a quarter of the bytes written. Each
    /// compaction moves the live names once, and at least a third as many bytes have been
    /// removed since the one before, so the moving costs a bounded amount per removed byte.
    pub(super) fn wants_compaction(&self) -> bool {
        self.dead > 0 && self.dead * 4 > self.used
    }

    /// Bytes written since the last compaction (live and dead).
    #[cfg(test)]
    pub(super) fn used(&self) -> usize {
        self.used
    }

    pub(super) fn has_holes(&self) -> bool {
        self.dead > 0
    }

    /// Closes the holes: `live` holds `(offset, owner)` for every name still in use (the owner is
    /// the caller's, carried along); on return each offset is the name's new one. The names move
    /// towards the start in offset order, in place (a name only ever moves to a lower offset,
    /// so it never overwrites one not yet moved), and the chunks left empty are freed.
    pub(super) fn compact(&mut self, live: &mut [(u32, u32)]) {
        live.sort_unstable();
        let (mut to_chunk, mut to_pos) = (0usize, 0usize);
        for (offset, _) in live.iter_mut() {
            let Some((head, len, _)) = self.entry(*offset) else {
                continue;
            };
            let total = head + len;
            let from_chunk = (*offset >> CHUNK_BITS) as usize;
            let from_pos = (*offset as usize) & (CHUNK - 1);
            if to_pos > 0 && to_pos + total > CHUNK {
                to_chunk += 1;
                to_pos = 0;
            }
            if to_chunk == from_chunk {
                self.chunks[to_chunk].copy_within(from_pos..from_pos + total, to_pos);
            } else {
                // `to_chunk` is before `from_chunk`: everything in it was already moved, so
                // what lies past `to_pos` there is free.
                let (before, after) = self.chunks.split_at_mut(from_chunk);
                let (to, from) = (&mut before[to_chunk], &after[0]);
                to.truncate(to_pos);
                to.extend_from_slice(&from[from_pos..from_pos + total]);
            }
            *offset = ((to_chunk << CHUNK_BITS) + to_pos) as u32;
            to_pos += total;
        }
        if to_pos == 0 && to_chunk == 0 {
            self.chunks.clear();
        } else {
            self.chunks.truncate(to_chunk + 1);
            self.chunks[to_chunk].truncate(to_pos);
        }
        self.used -= self.dead;
        self.dead = 0;
    }

    pub(super) fn shrink_to_fit(&mut self) {
        super::memory::shrink_chunks(&mut self.chunks);
    }

    /// Heap bytes held, as allocated (see [`super::malloc_size`]).
    pub(super) fn heap_bytes(&self) -> usize {
        super::memory::chunks_heap_bytes(&self.chunks, self.chunks.capacity())
    }
}
