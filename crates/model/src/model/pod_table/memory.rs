//! The pod table's memory: what a sync's growth left unused given back, and the heap bytes it
//! holds counted as glibc's malloc allocates them.

use super::{LIVE, PodTable, TextIds};
use std::collections::HashMap;

use crate::model::Toleration;

impl PodTable {
    /// Gives back what a sync's growth left unused, and closes the name arena's holes.
    pub(crate) fn shrink_to_fit(&mut self) {
        // Trailing vacant slots can go; others stay on the free list.
        let before = self.records.len();
        while self.records.last().is_some_and(|r| !r.has(LIVE)) {
            self.records.pop();
        }
        let bound = self.records.len() as u32;
        if bound as usize != before {
            self.free.retain(|s| *s < bound);
        }
        if self.names.has_holes() {
            self.compact_names();
        }
        if let Some(capacity) = self.index.wants_shrink() {
            self.rebuild_index(capacity, self.records.len());
        }
        self.records.shrink_to_fit();
        self.names.shrink_to_fit();
        self.free.shrink_to_fit();
        self.text.shrink_to_fit();
        self.scopes.shrink_to_fit();
        self.nodes.shrink_to_fit();
        self.by_node.shrink_to_fit();
    }

    /// Heap bytes held for pods (records, names, indexes, shared tables), as allocated.
    pub(crate) fn heap_bytes(&self) -> usize {
        let by_node: usize = self
            .by_node
            .iter()
            .map(|v| malloc_size(v.capacity() * 4))
            .sum();
        // A list held by several pairs (one per namespace using it) is one allocation.
        let toleration_lists: usize = (0..self.scopes.id_bound() as u32)
            .filter_map(|id| self.scopes.get(id))
            .map(|(_, t)| {
                let bytes = malloc_size(16 + std::mem::size_of_val::<[Toleration]>(t));
                (t.as_ptr(), bytes)
            })
            .collect::<HashMap<_, _>>()
            .into_values()
            .sum();
        self.records.heap_bytes()
            + self.names.heap_bytes()
            + malloc_size(self.index.capacity() * 4)
            + self.text.capacity() * (std::mem::size_of::<(u32, TextIds)>() + 1)
            + malloc_size(self.free.capacity() * 4)
            + self.by_node.capacity() * std::mem::size_of::<Vec<u32>>()
            + by_node
            + self.scopes.table_bytes()
            + self.nodes.table_bytes()
            + toleration_lists
    }
}

/// What glibc's malloc takes for a request of `n` bytes (16-byte chunks, 8 bytes of header,
/// at least 32): the honest cost of a small allocation.
pub(crate) fn malloc_size(n: usize) -> usize {
    if n == 0 {
        return 0;
    }
    (n + 8).div_ceil(16).max(2) * 16
}

/// A list of chunks (the name arena's and the record slab's: they grow a chunk at a time and
/// never copy) at its size: only the last chunk can have room left.
pub(super) fn shrink_chunks<T>(chunks: &mut Vec<Vec<T>>) {
    if let Some(last) = chunks.last_mut() {
        last.shrink_to_fit();
    }
    chunks.shrink_to_fit();
}

/// Heap bytes a list of chunks holds, as allocated.
pub(super) fn chunks_heap_bytes<T>(chunks: &[Vec<T>], list_capacity: usize) -> usize {
    chunks
        .iter()
        .map(|c| malloc_size(c.capacity() * std::mem::size_of::<T>()))
        .sum::<usize>()
        + list_capacity * std::mem::size_of::<Vec<T>>()
}
