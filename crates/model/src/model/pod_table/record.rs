//! A pod's record (40 bytes, 4-aligned) and the slab that holds them, in chunks.

use super::ConditionStatus;

pub(super) const NO_NODE: u32 = u32::MAX;

pub(super) const LIVE: u16 = 1;
/// Seen in the full state (LIST or watch-list) being delivered: see
/// [`super::PodTable::begin_full_state`].
pub(super) const SEEN: u16 = 1 << 1;
pub(super) const DELETING: u16 = 1 << 2;
pub(super) const DAEMONSET: u16 = 1 << 3;
pub(super) const TEXT_UID: u16 = 1 << 4;
pub(super) const TEXT_RV: u16 = 1 << 5;
pub(super) const DISRUPTION: u16 = 1 << 9;
const READY_SHIFT: u16 = 6;
const READY_MASK: u16 = 0b111 << READY_SHIFT;

/// ResourceVersions from this on are kept as text (etcd's revisions are far below: 2^48 is
/// 281 trillion), so that the version and the flags share one word.
pub(super) const COMPACT_RV_LIMIT: u64 = 1 << 48;
const FLAG_BITS: u32 = 16;

#[derive(Debug)]
pub(super) struct Record {
    pub(super) uid: [u8; 16],
    /// The resourceVersion (below [`COMPACT_RV_LIMIT`]) in the high 48 bits, the flags in the
    /// low 16, as two halves (low first) so that the record is 4-aligned: 40 bytes, where a
    /// `u64` would pad it to 48.
    version_flags: [u32; 2],
    /// The name's offset in the table's name arena (`names.rs`).
    pub(super) name: u32,
    /// The namespace and the toleration list, as one id of the pair (`PodTable::scopes`).
    pub(super) scope: u32,
    pub(super) node: u32,
    /// `metadata.creationTimestamp` in Unix seconds (0: none).
    pub(super) created: u32,
}

impl Record {
    pub(super) fn new(name: u32, scope: u32, node: u32) -> Record {
        let mut r = Record::vacant();
        r.name = name;
        r.scope = scope;
        r.node = node;
        r.set_flags(LIVE | SEEN);
        r
    }

    pub(super) fn vacant() -> Record {
        Record {
            uid: [0; 16],
            version_flags: [0; 2],
            name: 0,
            scope: 0,
            node: NO_NODE,
            created: 0,
        }
    }

    fn word(&self) -> u64 {
        u64::from(self.version_flags[0]) | (u64::from(self.version_flags[1]) << 32)
    }

    fn set_word(&mut self, word: u64) {
        self.version_flags = [word as u32, (word >> 32) as u32];
    }

    pub(super) fn flags(&self) -> u16 {
        self.version_flags[0] as u16
    }

    fn set_flags(&mut self, flags: u16) {
        self.set_word((self.word() & !u64::from(u16::MAX)) | u64::from(flags));
    }

    pub(super) fn resource_version(&self) -> u64 {
        self.word() >> FLAG_BITS
    }

    /// `rv` must be below [`COMPACT_RV_LIMIT`] (larger ones are kept as text).
    pub(super) fn set_resource_version(&mut self, rv: u64) {
        debug_assert!(rv < COMPACT_RV_LIMIT);
        self.set_word((rv << FLAG_BITS) | u64::from(self.flags()));
    }

    pub(super) fn has(&self, flag: u16) -> bool {
        self.flags() & flag != 0
    }

    pub(super) fn set(&mut self, flag: u16, on: bool) {
        let flags = self.flags();
        self.set_flags(if on { flags | flag } else { flags & !flag });
    }

    pub(super) fn ready(&self) -> Option<ConditionStatus> {
        match (self.flags() & READY_MASK) >> READY_SHIFT {
            1 => Some(ConditionStatus::True),
            2 => Some(ConditionStatus::False),
            3 => Some(ConditionStatus::Unknown),
            4 => Some(ConditionStatus::Other),
            _ => None,
        }
    }

    pub(super) fn set_ready(&mut self, ready: Option<ConditionStatus>) {
        let bits = match ready {
            None => 0,
            Some(ConditionStatus::True) => 1,
            Some(ConditionStatus::False) => 2,
            Some(ConditionStatus::Unknown) => 3,
            Some(ConditionStatus::Other) => 4,
        };
        self.set_flags((self.flags() & !READY_MASK) | (bits << READY_SHIFT));
    }
}

/// Records per chunk of the slab (45 KB).
const CHUNK_RECORDS: usize = 1 << 10;
const CHUNK_SHIFT: u32 = 10;

/// The records by slot, in chunks of [`CHUNK_RECORDS`]: the slab grows without moving what it
/// holds (one vector grown by a factor would hold the old and the new copy at once while it
/// moves, at 150,000 pods 6.6 MB and more) and keeps at most one chunk unused.
#[derive(Debug, Default)]
pub(super) struct Slab {
    chunks: Vec<Vec<Record>>,
    len: usize,
}

impl Slab {
    /// Slots handed out (live and vacant).
    pub(super) fn len(&self) -> usize {
        self.len
    }

    pub(super) fn get(&self, slot: u32) -> &Record {
        &self.chunks[(slot >> CHUNK_SHIFT) as usize][slot as usize & (CHUNK_RECORDS - 1)]
    }

    pub(super) fn get_mut(&mut self, slot: u32) -> &mut Record {
        &mut self.chunks[(slot >> CHUNK_SHIFT) as usize][slot as usize & (CHUNK_RECORDS - 1)]
    }

    /// Appends a record; returns its slot.
    pub(super) fn push(&mut self, record: Record) -> u32 {
        if self.len % CHUNK_RECORDS == 0 {
            // The first chunk starts small and doubles (a table of a few pods should not hold a
            // whole chunk); the next ones are whole at once.
            let size = if self.chunks.is_empty() {
                16
            } else {
                CHUNK_RECORDS
            };
            self.chunks.push(Vec::with_capacity(size));
        }
        let last = self.chunks.len() - 1;
        let chunk = &mut self.chunks[last];
        if chunk.len() == chunk.capacity() {
            chunk.reserve_exact(chunk.capacity().clamp(1, CHUNK_RECORDS - chunk.len()));
        }
        chunk.push(record);
        self.len += 1;
        (self.len - 1) as u32
    }

    /// Drops the last slot.
    pub(super) fn pop(&mut self) {
        if let Some(last) = self.chunks.last_mut() {
            last.pop();
            self.len -= 1;
            if last.is_empty() {
                self.chunks.pop();
            }
        }
    }

    pub(super) fn last(&self) -> Option<&Record> {
        self.chunks.last().and_then(|c| c.last())
    }

    /// Every slot's record, in slot order.
    pub(super) fn iter(&self) -> impl Iterator<Item = &Record> + '_ {
        self.chunks.iter().flatten()
    }

    pub(super) fn iter_mut(&mut self) -> impl Iterator<Item = &mut Record> + '_ {
        self.chunks.iter_mut().flatten()
    }

    pub(super) fn shrink_to_fit(&mut self) {
        super::memory::shrink_chunks(&mut self.chunks);
    }

    /// Heap bytes held, as allocated (see [`super::malloc_size`]).
    pub(super) fn heap_bytes(&self) -> usize {
        super::memory::chunks_heap_bytes(&self.chunks, self.chunks.capacity())
    }
}
