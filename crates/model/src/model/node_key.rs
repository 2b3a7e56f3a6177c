//! Stable keys for the nodes the store holds: what another table keeps per node is indexed by
//! the node's [`NodeKey`], and a Lease keeps its node's key (`store.rs`), so a renewal reaches
//! a machine's per-node entry from the store's one lookup, with no second lookup by name.
//!
//! A key is issued when a node enters the store and retired when it leaves; it does not change
//! while the node stays, whatever the store does to its own maps (they are compacted after a
//! full state, `NameMap::compact`, which moves their slots). Its `index` is dense (a retired
//! index is issued again), so a table can be a vector; its `serial` tells an index's holders
//! apart, so a key kept past its node's deletion (by a table not told yet) never finds the
//! node that came next at that index.

use std::num::NonZeroU32;

/// A node's key while it is in the store (see the module's head).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct NodeKey {
    index: u32,
    /// Never 0, so an `Option<NodeKey>` is 8 bytes.
    serial: NonZeroU32,
}

impl NodeKey {
    /// Where a table indexed by keys keeps this node: dense, below the most nodes held at once.
    pub fn index(self) -> usize {
        self.index as usize
    }
}

/// Issues and retires the keys (the store's).
#[derive(Debug, Default)]
pub(crate) struct NodeKeys {
    /// Indexes retired, to be issued again.
    free: Vec<u32>,
    /// Indexes issued so far (all below it).
    issued: u32,
    /// The last serial issued. Serials wrap after 2^32 - 1 nodes created, when a key of the first
    /// round might in principle meet its namesake; tables drop a node's key when they learn
    /// it is gone, long before.
    serial: u32,
}

impl NodeKeys {
    pub(crate) fn issue(&mut self) -> NodeKey {
        let index = self.free.pop().unwrap_or_else(|| {
            self.issued += 1;
            self.issued - 1
        });
        self.serial = self.serial.checked_add(1).unwrap_or(1);
        NodeKey {
            index,
            serial: NonZeroU32::new(self.serial).unwrap_or(NonZeroU32::MIN),
        }
    }

    pub(crate) fn retire(&mut self, key: NodeKey) {
        self.free.push(key.index);
    }

    /// Heap bytes held.
    pub(crate) fn heap_bytes(&self) -> usize {
        self.free.capacity() * 4
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_retired_index_is_issued_again_under_a_new_serial() {
        let mut keys = NodeKeys::default();
        let a = keys.issue();
        let b = keys.issue();
        assert_eq!((a.index(), b.index()), (0, 1));
        keys.retire(a);
        let c = keys.issue();
        assert_eq!(c.index(), 0, "the index is dense");
        assert_ne!(c, a, "but the key is another");
        assert_eq!(std::mem::size_of::<Option<NodeKey>>(), 8);
    }
}
