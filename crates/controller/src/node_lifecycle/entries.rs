//! The node lifecycle's entries ([`NodeEntry`]), one per node in the world's store, found by
//! name and by the node's key (`model::NodeKey`): a renewal comes with its node's key, which
//! the store keeps beside the Lease, and reaches the entry without a lookup by name.
//!
//! Owns the entries' map and the index from keys to their slots in it. The map is compacted
//! after a full state of nodes (its slots move, the keys do not), and the index is rebuilt then.

use crate::model::{Name, NameMap, NodeKey};

use super::NodeEntry;

/// No entry at this key's index.
const NONE: u32 = u32::MAX;

#[derive(Debug, Default)]
pub(super) struct Entries {
    map: NameMap<NodeEntry>,
    /// By key index, the slot of the entry in `map` (`NONE` if none). The entry there is the
    /// key's only if its own key is that key (checked by [`Entries::by_key`]).
    by_key: Vec<u32>,
}

impl Entries {
    pub(super) fn get(&self, name: &str) -> Option<&NodeEntry> {
        self.map.get(name)
    }

    pub(super) fn get_mut(&mut self, name: &str) -> Option<&mut NodeEntry> {
        self.map.get_mut(name)
    }

    /// Every entry, in name order.
    pub(super) fn iter(&self) -> impl Iterator<Item = (&Name, &NodeEntry)> {
        self.map.iter()
    }

    pub(super) fn keys(&self) -> impl Iterator<Item = &Name> {
        self.map.keys()
    }

    pub(super) fn len(&self) -> usize {
        self.map.len()
    }

    /// The slot of `name`'s entry (slots stay until [`Entries::compact`]).
    pub(super) fn slot(&self, name: &str) -> Option<u32> {
        self.map.slot(name)
    }

    pub(super) fn at(&self, slot: u32) -> Option<(&Name, &NodeEntry)> {
        self.map.at(slot)
    }

    pub(super) fn at_mut(&mut self, slot: u32) -> Option<&mut NodeEntry> {
        self.map.at_mut(slot)
    }

    /// The occupied slots with their entries, in no particular order.
    pub(super) fn slots(&self) -> impl Iterator<Item = (u32, &Name, &NodeEntry)> {
        self.map.slots()
    }

    /// The entry of the node `key` is for, with its slot, while it is that node's: the entry
    /// at the key's index holds the very key (its serial too), not an earlier holder's.
    pub(super) fn by_key(&self, key: NodeKey) -> Option<(u32, &NodeEntry)> {
        let slot = *self.by_key.get(key.index())?;
        let (_, e) = self.map.at(slot)?;
        (e.key == key).then_some((slot, e))
    }

    /// [`Entries::by_key`], to change.
    pub(super) fn by_key_mut(&mut self, key: NodeKey) -> Option<(u32, &mut NodeEntry)> {
        let (slot, _) = self.by_key(key)?;
        Some((slot, self.map.at_mut(slot)?))
    }

    /// Prefetching a batch of renewals (`model/prefetch.rs`), a stage at a time: the line of
    /// the index that holds `key`'s slot…
    pub(super) fn prefetch_key(&self, key: NodeKey) {
        if let Some(slot) = self.by_key.get(key.index()) {
            crate::model::prefetch(slot);
        }
    }

    /// …then, that line read, the entry at the slot it holds (unchecked: a guess).
    pub(super) fn prefetch_entry(&self, key: NodeKey) {
        if let Some(&slot) = self.by_key.get(key.index()) {
            self.map.prefetch_slot(slot);
        }
    }

    /// Adds `name`'s entry (none is there: the caller looked), found by its key from now on.
    pub(super) fn insert(&mut self, name: Name, entry: NodeEntry) {
        let key = entry.key;
        self.map.insert(name.clone(), entry);
        if let Some(slot) = self.map.slot(&name) {
            index(&mut self.by_key, key, slot);
        }
    }

    pub(super) fn remove(&mut self, name: &str) -> Option<NodeEntry> {
        let slot = self.map.slot(name)?;
        let entry = self.map.remove(name)?;
        if let Some(held) = self.by_key.get_mut(entry.key.index())
            && *held == slot
        {
            *held = NONE;
        }
        Some(entry)
    }

    /// After a full state of nodes: the map without its free slots (`NameMap::compact`), and
    /// the keys' slots as they now are.
    pub(super) fn compact(&mut self) {
        self.map.compact();
        self.by_key.clear();
        for (slot, _, e) in self.map.slots() {
            index(&mut self.by_key, e.key, slot);
        }
        self.by_key.shrink_to_fit();
    }
}

/// Keeps `slot` as `key`'s in `by_key`.
fn index(by_key: &mut Vec<u32>, key: NodeKey, slot: u32) {
    let at = key.index();
    if by_key.len() <= at {
        by_key.resize(at + 1, NONE);
    }
    by_key[at] = slot;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::health::NodeHealth;
    use crate::model::{ClusterStore, Node};
    use crate::time::Time;

    fn entry(store: &ClusterStore, name: &str) -> NodeEntry {
        let now = Time::from_unix_millis(0);
        let node = store.node(name).expect("stored");
        let key = store.node_key(name).expect("a key");
        let health = NodeHealth::first_seen(node, now);
        NodeEntry::new(key, node.uid.clone(), Name::from("zone"), health, now, None)
    }

    fn node(name: &str) -> Node {
        crate::tests::harness::node(name)
            .uid(&format!("uid-{name}"))
            .build()
    }

    /// A key kept past its node (`a`'s, once `b` holds its index) finds no entry, though the
    /// entry at that index is there; the key of a node still here finds its own entry, also
    /// after the entries are compacted and their slots move (`d` from the third slot to the
    /// second, `c` gone).
    #[test]
    fn a_key_past_its_node_finds_no_entry_and_a_live_key_finds_its_own_through_compaction() {
        let mut store = ClusterStore::new();
        let mut entries = Entries::default();
        for name in ["a", "c", "d"] {
            store.upsert_node(node(name));
            entries.insert(Name::from(name), entry(&store, name));
        }
        let a = store.node_key("a").unwrap();
        for gone in ["c", "a"] {
            entries.remove(gone);
            store.remove_node(gone);
        }
        store.upsert_node(node("b"));
        let b = store.node_key("b").unwrap();
        assert_eq!(b.index(), a.index(), "b holds a's index");
        entries.insert(Name::from("b"), entry(&store, "b"));
        assert!(entries.by_key(a).is_none(), "a's key is not b's");
        let d = store.node_key("d").unwrap();
        let before = entries.by_key(d).map(|(slot, _)| slot);
        entries.compact();
        let (slot, e) = entries.by_key(d).expect("d's entry after compaction");
        assert_ne!(Some(slot), before, "compaction moved d");
        assert_eq!(&*e.uid, "uid-d");
        assert_eq!(entries.by_key(b).map(|(_, e)| &*e.uid), Some("uid-b"));
        assert!(entries.by_key(a).is_none());
        assert_eq!(entries.len(), 2);
    }
}
