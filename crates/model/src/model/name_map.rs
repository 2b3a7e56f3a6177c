//! A map by object name that is found by hash and walked in name order: what the per-node maps
//! need (the store's nodes and Leases, the node lifecycle's entries). Its index buckets can be
//! fetched from a name's hash alone, so a batch of lookups can be asked for ahead, a stage at a
//! time (`prefetch_index`, `prefetch_entry`, `likely`: `model/prefetch.rs`).
//!
//! Every Lease renewal looks its node up twice by name. In a `BTreeMap<Rc<str>, _>` that is a
//! walk of a dozen string compares, each behind a pointer to a name somewhere else on the heap,
//! and the walks add up to a large share of the daemon's steady CPU. Here a lookup hashes the
//! name once (`NameHashState`) and compares one entry's name.
//!
//! The entries sit in a slab (`(name, value)` pairs, as dense as a refilled B-tree's), found by
//! a [`SlotIndex`] of 4-byte buckets (the pod table's: the slab entry is the key, so the index
//! holds no copy of the name), and kept in name order by a vector of slots: every walk of the
//! map is in name order, as the `BTreeMap`s it replaces gave (the decisions of a pass come out in
//! that order, and the tests and the state dump rely on it). An insertion finds its place by a
//! binary search; names arrive from a LIST or a watch-list in name order, so during a sync that
//! is an append. About 12 bytes per entry more than a refilled `BTreeMap`.

use std::hash::BuildHasher;

use super::Name;
use super::pod_table::{SlotIndex, capacity_for};
use crate::time::NameHashState;

#[derive(Debug)]
pub struct NameMap<V> {
    /// `None`: a free slot (listed in `free`).
    slab: Vec<Option<(Name, V)>>,
    free: Vec<u32>,
    /// The occupied slots, by name.
    order: Vec<u32>,
    index: SlotIndex,
    hasher: NameHashState,
}

/// Whether the held name is `name`. Names are interned, so a lookup by a held name (a
/// renewal's, the node's own) is usually the very same bytes: compared by address first, the
/// held name's bytes (elsewhere on the heap, a cache miss at every renewal) are not read.
#[inline]
fn same_name(held: &Name, name: &str) -> bool {
    (std::ptr::eq(held.as_ptr(), name.as_ptr()) && held.len() == name.len()) || &**held == name
}

impl<V> Default for NameMap<V> {
    fn default() -> Self {
        NameMap {
            slab: Vec::new(),
            free: Vec::new(),
            order: Vec::new(),
            index: SlotIndex::default(),
            hasher: NameHashState::default(),
        }
    }
}

impl<V> NameMap<V> {
    pub fn new() -> Self {
        NameMap::default()
    }

    pub fn len(&self) -> usize {
        self.order.len()
    }

    pub fn is_empty(&self) -> bool {
        self.order.is_empty()
    }

    /// The hash the index files `name` under (what the `prefetch_` calls take).
    pub(crate) fn hash(&self, name: &str) -> u64 {
        self.hasher.hash_one(name)
    }

    fn entry(&self, slot: u32) -> Option<&(Name, V)> {
        self.slab.get(slot as usize).and_then(Option::as_ref)
    }

    /// The entry at `slot`, if one is there (slots stay until [`NameMap::compact`]).
    pub fn at(&self, slot: u32) -> Option<(&Name, &V)> {
        self.entry(slot).map(|(n, v)| (n, v))
    }

    /// The slot `name` is kept at.
    pub fn slot(&self, name: &str) -> Option<u32> {
        self.slot_of(name)
    }

    /// The value at `slot`, to change.
    pub fn at_mut(&mut self, slot: u32) -> Option<&mut V> {
        self.slab
            .get_mut(slot as usize)
            .and_then(Option::as_mut)
            .map(|(_, v)| v)
    }

    /// The occupied slots with their entries, in no particular order.
    pub fn slots(&self) -> impl Iterator<Item = (u32, &Name, &V)> {
        self.slab
            .iter()
            .enumerate()
            .filter_map(|(i, e)| e.as_ref().map(|(n, v)| (i as u32, n, v)))
    }

    fn slot_of(&self, name: &str) -> Option<u32> {
        let h = self.hash(name);
        self.index.find(h, |slot| {
            self.entry(slot).is_some_and(|(n, _)| same_name(n, name))
        })
    }

    #[cfg(test)]
    pub(crate) fn contains_key(&self, name: &str) -> bool {
        self.slot_of(name).is_some()
    }

    pub fn get(&self, name: &str) -> Option<&V> {
        self.slot_of(name)
            .and_then(|slot| self.entry(slot))
            .map(|(_, v)| v)
    }

    /// Prefetching a batch's lookups (`model/prefetch.rs`), a stage at a time, by the names'
    /// hashes ([`NameMap::hash`]): first the index bucket where a search starts…
    pub(crate) fn prefetch_index(&self, h: u64) {
        self.index.prefetch(h);
    }

    /// …then, that bucket read, the entry it names (the first whose hash fragment matches:
    /// almost always the name's)…
    pub(crate) fn prefetch_entry(&self, h: u64) {
        if let Some(slot) = self.likely_slot(h) {
            self.prefetch_slot(slot);
        }
    }

    /// …then, that entry read, what it holds (its name's allocation, `prefetch::prefetch_name`,
    /// or what its value points to): the entry a lookup of hash `h` compares first, unchecked.
    pub(crate) fn likely(&self, h: u64) -> Option<(&Name, &V)> {
        self.likely_slot(h)
            .and_then(|slot| self.entry(slot))
            .map(|(n, v)| (n, v))
    }

    /// …or the entry at a slot known beforehand (found through a key: `NodeKey`).
    pub fn prefetch_slot(&self, slot: u32) {
        if let Some(entry) = self.slab.get(slot as usize) {
            super::prefetch::prefetch_whole(entry);
        }
    }

    /// The slot a lookup of hash `h` compares first: unchecked, for prefetching only.
    fn likely_slot(&self, h: u64) -> Option<u32> {
        self.index.find(h, |_| true)
    }

    /// `name`'s entry: the name it is held under (the same text, and the allocation the map
    /// keeps), and its value.
    pub(crate) fn get_key_value(&self, name: &str) -> Option<(&Name, &V)> {
        self.slot_of(name)
            .and_then(|slot| self.entry(slot))
            .map(|(n, v)| (n, v))
    }

    /// `name`'s entry: the name it is held under, and its value.
    pub(crate) fn get_key_value_mut(&mut self, name: &str) -> Option<(&Name, &mut V)> {
        let slot = self.slot_of(name)?;
        self.slab[slot as usize].as_mut().map(|(n, v)| (&*n, v))
    }

    pub fn get_mut(&mut self, name: &str) -> Option<&mut V> {
        let slot = self.slot_of(name)?;
        self.slab[slot as usize].as_mut().map(|(_, v)| v)
    }

    /// Where `name` is or would go in `order`.
    fn position(&self, name: &str) -> Result<usize, usize> {
        self.order
            .binary_search_by(|&slot| self.entry(slot).map_or("", |(n, _)| &**n).cmp(name))
    }

    /// Inserts or replaces; returns the value replaced.
    pub fn insert(&mut self, name: Name, value: V) -> Option<V> {
        if let Some(slot) = self.slot_of(&name) {
            let held = self.slab[slot as usize].as_mut()?;
            return Some(std::mem::replace(&mut held.1, value));
        }
        let at = match self.position(&name) {
            Ok(at) | Err(at) => at,
        };
        let slot = match self.free.pop() {
            Some(slot) => slot,
            None => {
                self.slab.push(None);
                (self.slab.len() - 1) as u32
            }
        };
        if let Some(capacity) = self.index.wants_room_for(slot) {
            self.rebuild_index(capacity);
        }
        let h = self.hash(&name);
        self.slab[slot as usize] = Some((name, value));
        self.index.place(h, slot);
        self.order.insert(at, slot);
        None
    }

    pub fn remove(&mut self, name: &str) -> Option<V> {
        let slot = self.slot_of(name)?;
        let h = self.hash(name);
        let (slab, hasher) = (&self.slab, &self.hasher);
        self.index.remove(h, slot, |other| {
            let name = slab
                .get(other as usize)
                .and_then(Option::as_ref)
                .map_or("", |(n, _)| &**n);
            hasher.hash_one(name)
        });
        if let Ok(at) = self.position(name) {
            self.order.remove(at);
        }
        self.free.push(slot);
        self.slab[slot as usize].take().map(|(_, v)| v)
    }

    fn rebuild_index(&mut self, capacity: usize) {
        self.index.reset(capacity, self.slab.len() + 1);
        for &slot in &self.order {
            if let Some((name, _)) = self.slab[slot as usize].as_ref() {
                self.index.place(self.hasher.hash_one(&**name), slot);
            }
        }
    }

    /// Every entry, in name order.
    pub fn iter(&self) -> impl Iterator<Item = (&Name, &V)> {
        self.order
            .iter()
            .filter_map(|&slot| self.entry(slot).map(|(n, v)| (n, v)))
    }

    pub fn keys(&self) -> impl Iterator<Item = &Name> {
        self.iter().map(|(n, _)| n)
    }

    pub(crate) fn values(&self) -> impl Iterator<Item = &V> {
        self.iter().map(|(_, v)| v)
    }

    /// After a full state: the slab without its free slots (renumbered in name order, so a walk
    /// reads it front to back) and every vector at its size. What `refill` did for the trees.
    pub fn compact(&mut self) {
        let order = std::mem::take(&mut self.order);
        let mut slab = Vec::with_capacity(order.len());
        for slot in order {
            if let Some(entry) = self.slab.get_mut(slot as usize).and_then(Option::take) {
                slab.push(Some(entry));
            }
        }
        self.order = (0..slab.len() as u32).collect();
        self.slab = slab;
        self.free = Vec::new();
        self.rebuild_index(capacity_for(self.slab.len()));
    }

    /// Heap bytes held besides what the values themselves point to.
    pub(crate) fn heap_bytes(&self) -> usize {
        self.slab.capacity() * std::mem::size_of::<Option<(Name, V)>>()
            + (self.free.capacity() + self.order.capacity()) * 4
            + self.index.capacity() * 4
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn name(s: &str) -> Name {
        Name::from(s)
    }

    /// The map against a `BTreeMap` through a long mixed sequence: lookups, order and lengths
    /// agree after every step.
    #[test]
    fn behaves_as_a_btreemap_through_inserts_replacements_removals_and_compaction() {
        let mut map = NameMap::new();
        let mut reference = BTreeMap::new();
        let mut x: u64 = 0x2545_f491_4f6c_dd1d;
        for step in 0..20_000u32 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let key = format!("node-{:04}", x % 700);
            match x % 7 {
                0 | 1 => assert_eq!(map.remove(&key), reference.remove(&key), "remove {key}"),
                2 if step % 1000 == 0 => map.compact(),
                _ => assert_eq!(
                    map.insert(name(&key), step),
                    reference.insert(key.clone(), step),
                    "insert {key}"
                ),
            }
            assert_eq!(map.len(), reference.len());
            assert_eq!(map.get(&key), reference.get(&key), "get {key}");
            if step % 500 == 0 {
                let walked: Vec<(String, u32)> =
                    map.iter().map(|(n, v)| (n.to_string(), *v)).collect();
                let expected: Vec<(String, u32)> =
                    reference.iter().map(|(n, v)| (n.clone(), *v)).collect();
                assert_eq!(walked, expected, "order after step {step}");
            }
        }
        for (k, v) in &reference {
            assert_eq!(map.get(k), Some(v));
            assert!(map.contains_key(k));
        }
        assert!(!map.contains_key("node-x"));
    }

    /// A lookup by the held name's own bytes (a renewal's interned name) is taken by address;
    /// one by a copy of them compares the text; a slice that starts at the held name's address
    /// but is shorter (a prefix of it) is not that name.
    #[test]
    fn a_name_is_found_by_its_own_bytes_by_a_copy_and_never_by_a_prefix_at_its_address() {
        let mut map = NameMap::new();
        let long = name("node-10");
        map.insert(long.clone(), 10);
        map.insert(name("node-1"), 1);
        assert_eq!(map.get(&long), Some(&10), "the held allocation itself");
        assert_eq!(
            map.get(&String::from("node-10")),
            Some(&10),
            "a copy of its bytes"
        );
        let prefix = &long[..6];
        assert_eq!(prefix, "node-1");
        assert!(std::ptr::eq(prefix.as_ptr(), long.as_ptr()));
        // The comparison itself (a lookup only calls it on a hash match, so the map alone
        // would seldom put a prefix to it).
        assert!(same_name(&long, &long));
        assert!(same_name(&long, "node-10"));
        assert!(!same_name(&long, prefix));
        assert!(!same_name(&long, "node-11"));
        assert_eq!(
            map.get(prefix),
            Some(&1),
            "a prefix at its address is another name"
        );
        map.remove(prefix);
        assert_eq!(map.get(prefix), None);
        assert_eq!(map.get(&long), Some(&10));
    }

    #[test]
    fn names_inserted_out_of_order_are_walked_in_order_and_found_after_compaction() {
        let mut map = NameMap::new();
        for n in ["c", "a", "b", "aa", "", "z"] {
            map.insert(name(n), n.len());
        }
        let keys: Vec<&str> = map.keys().map(|k| &**k).collect();
        assert_eq!(keys, ["", "a", "aa", "b", "c", "z"]);
        map.remove("aa");
        map.compact();
        let keys: Vec<&str> = map.keys().map(|k| &**k).collect();
        assert_eq!(keys, ["", "a", "b", "c", "z"]);
        *map.get_mut("b").expect("b") = 7;
        assert_eq!(map.values().copied().collect::<Vec<_>>(), [0, 1, 7, 1, 1]);
        assert_eq!(map.insert(name("z"), 9), Some(1));
        assert!(map.get("aa").is_none());
    }

    #[test]
    fn a_large_map_grows_its_index_and_keeps_every_name() {
        let mut map = NameMap::new();
        for i in 0..20_000 {
            map.insert(
                name(&format!("ip-10-0-{}-{}.ec2.internal", i / 256, i % 256)),
                i,
            );
        }
        map.compact();
        for i in (0..20_000).step_by(7) {
            let key = format!("ip-10-0-{}-{}.ec2.internal", i / 256, i % 256);
            assert_eq!(map.get(&key), Some(&i));
        }
        assert_eq!(map.len(), 20_000);
        assert!(map.heap_bytes() >= 20_000 * std::mem::size_of::<Option<(Name, i32)>>());
    }
}
