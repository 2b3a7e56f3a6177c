//! The index by name: an open-addressing table of 4-byte buckets, each a slot of the record
//! slab. The record is the key: a probe compares the record's namespace and name, so no key is
//! stored here and no two pods can collide into losing one (a pod with the same hash as
//! another just takes the next free bucket).
//!
//! A bucket is `tag << slot_bits | (slot + 1)` (0: empty): the slot in the low bits, and in the
//! bits the slots do not need (14 at 150,000 pods, 12 at 450,000) a fragment of the hash, so
//! that a probe only reads the record of a bucket whose fragment matches. Linear probing, the
//! home bucket picked from the hash's high half by a multiply (so the size need not be a power
//! of two), at most 80 % full and grown by half, so that it holds 5 to 7.5 bytes per pod. (Grown
//! by a quarter it would hold 5 to 6.3, but a sync from empty would rehash every key about 4.3
//! times instead of 2.2: each rehash is a hash of the key read from the records, `time/name_hash.rs`.)
//! A removal shifts the entries after it back (no tombstones); the homes of those it looks at
//! are rehashed from their records, which the caller provides.

/// The fewest bits given to slots (so that a small table is not rebuilt at every doubling).
const MIN_SLOT_BITS: u32 = 12;

#[derive(Debug)]
pub(crate) struct SlotIndex {
    buckets: Vec<u32>,
    len: usize,
    slot_bits: u32,
}

impl Default for SlotIndex {
    fn default() -> Self {
        SlotIndex {
            buckets: Vec::new(),
            len: 0,
            slot_bits: MIN_SLOT_BITS,
        }
    }
}

/// Bits needed to write `n`.
fn bit_length(n: u64) -> u32 {
    u64::BITS - n.leading_zeros()
}

impl SlotIndex {
    fn home(&self, h: u64) -> usize {
        (((h >> 32) * self.buckets.len() as u64) >> 32) as usize
    }

    fn slot_mask(&self) -> u32 {
        ((1u64 << self.slot_bits) - 1) as u32
    }

    /// The hash's fragment in the bits above the slot's (none once slots need all 32).
    fn tag(&self, h: u64) -> u32 {
        ((h & 0xffff_ffff) << self.slot_bits) as u32
    }

    fn next(&self, i: usize) -> usize {
        if i + 1 == self.buckets.len() {
            0
        } else {
            i + 1
        }
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// The slot whose hash is `h` and for which `is` holds (the caller compares the record).
    pub(crate) fn find(&self, h: u64, mut is: impl FnMut(u32) -> bool) -> Option<u32> {
        if self.buckets.is_empty() {
            return None;
        }
        let (mask, tag) = (self.slot_mask(), self.tag(h));
        let mut i = self.home(h);
        loop {
            let bucket = self.buckets[i];
            let slot = bucket & mask;
            if slot == 0 {
                return None;
            }
            if bucket & !mask == tag && is(slot - 1) {
                return Some(slot - 1);
            }
            i = self.next(i);
        }
    }

    /// Asks for the line of `h`'s home bucket (`model/prefetch.rs`).
    pub(crate) fn prefetch(&self, h: u64) {
        if let Some(bucket) = self.buckets.get(self.home(h)) {
            crate::model::prefetch::prefetch(bucket);
        }
    }

    /// The capacity to rebuild with before `slot` can be added, if the table is too full or
    /// its slot bits too few; `None` if [`SlotIndex::place`] can take it as it is.
    pub(crate) fn wants_room_for(&self, slot: u32) -> Option<usize> {
        let full = (self.len + 1) * 5 > self.buckets.len() * 4;
        if full {
            return Some(capacity_for(self.len + 1));
        }
        (bit_length(u64::from(slot) + 1) > self.slot_bits).then_some(self.buckets.len())
    }

    /// A capacity to give back to, if the table is under 40 % full.
    pub(crate) fn wants_shrink(&self) -> Option<usize> {
        let target = capacity_for(self.len);
        (self.len * 5 < self.buckets.len() * 2 && target < self.buckets.len()).then_some(target)
    }

    /// Empties the table at `capacity` buckets, with slot bits for slots below `slot_bound`;
    /// the caller places every entry again.
    pub(crate) fn reset(&mut self, capacity: usize, slot_bound: usize) {
        self.buckets = Vec::new();
        self.buckets = vec![0; capacity.max(8)];
        self.len = 0;
        let bound = (slot_bound.max(capacity) as u64) + 1;
        self.slot_bits = bit_length(bound).clamp(MIN_SLOT_BITS, 32);
    }

    /// Adds `slot` under hash `h`. The caller made room ([`SlotIndex::wants_room_for`]).
    pub(crate) fn place(&mut self, h: u64, slot: u32) {
        debug_assert!(self.wants_room_for(slot).is_none());
        let bucket = self.tag(h) | (slot + 1);
        let mask = self.slot_mask();
        let mut i = self.home(h);
        while self.buckets[i] & mask != 0 {
            i = self.next(i);
        }
        self.buckets[i] = bucket;
        self.len += 1;
    }

    /// Removes `slot` (hashed `h`); `hash_of` gives the hash of another slot's record, for the
    /// entries shifted back into the gap.
    pub(crate) fn remove(&mut self, h: u64, slot: u32, hash_of: impl Fn(u32) -> u64) {
        if self.buckets.is_empty() {
            return;
        }
        let mask = self.slot_mask();
        let mut i = self.home(h);
        loop {
            match self.buckets[i] & mask {
                0 => return,
                s if s == slot + 1 => break,
                _ => i = self.next(i),
            }
        }
        // Backward shift: an entry after the gap moves into it unless its home lies after the
        // gap (cyclically within (gap, entry]), where it would no longer be found.
        let mut j = i;
        loop {
            j = self.next(j);
            let bucket = self.buckets[j];
            if bucket & mask == 0 {
                break;
            }
            let home = self.home(hash_of((bucket & mask) - 1));
            let stays = if i <= j {
                i < home && home <= j
            } else {
                i < home || home <= j
            };
            if !stays {
                self.buckets[i] = bucket;
                i = j;
            }
        }
        self.buckets[i] = 0;
        self.len -= 1;
    }

    pub(crate) fn capacity(&self) -> usize {
        self.buckets.capacity()
    }
}

/// Buckets for `len` entries at 53 % full: room to grow by half before the next rebuild.
pub(crate) fn capacity_for(len: usize) -> usize {
    (len * 15 / 8 + 1).max(8)
}
