//! The bound pods, compactly: the one copy of every pod the daemon keeps.
//!
//! A pod is a 40-byte record in a slab (`record.rs`) plus its name in a shared arena
//! (`names.rs`, ~23 bytes): the uid as 16 bytes and the resourceVersion as an integer sharing
//! a word with the flags (text fallbacks in a side map), the name's offset, the node name and
//! the namespace with the toleration list as 4-byte ids into shared tables, and the creation
//! second. Pods are
//! found by name through a table of 4-byte slots keyed by the records themselves (`index.rs`:
//! no key is copied, and a hash collision costs a probe, never a pod), and by node through a
//! list of slots per node. BENCHMARKS.md (Floor 1) measures what a pod costs in all.
//! Both controllers read pods from here; nobody else keeps a copy (kube-controller-manager's
//! informers keep three or more whole objects per pod: kubernetes#115699).

use std::collections::HashMap;
use std::hash::BuildHasher;
use std::rc::Rc;

use super::compact::{parse_resource_version, parse_uuid, render_uuid};
use super::ref_table::RefTable;
use super::{ConditionStatus, Name, Pod, PodKey, Toleration};
use crate::time::NameHashState;
use crate::time::Time;

mod index;
mod memory;
mod names;
mod record;
mod view;
pub(super) use index::{SlotIndex, capacity_for};
pub(crate) use memory::malloc_size;
use names::NameArena;
use record::*;
pub use view::PodView;

/// Uids and resourceVersions that are not in the compact form.
#[derive(Debug, Default)]
struct TextIds {
    uid: Option<Name>,
    resource_version: Option<Name>,
}

/// A slot in the table, valid until the pod is removed.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PodId(u32);

/// What an upsert did.
#[derive(Debug)]
pub enum PodUpsert {
    /// The table holds a newer version (a delayed event): nothing changed.
    Older,
    /// Nothing the table keeps changed (the same version again: a relist, the watch echoing
    /// our own write; or a change of fields we do not keep). The version is updated.
    Unchanged,
    Changed(PodChange),
}

/// A pod that changed: its slot, and what it was before (`None` for a new pod).
#[derive(Debug)]
pub struct PodChange {
    pub id: PodId,
    pub key: PodKey,
    pub before: Option<PodBefore>,
}

/// What the consumers compare against.
#[derive(Clone, Debug)]
pub struct PodBefore {
    /// A different pod under the same name (its uid changed).
    pub replaced: bool,
    pub node: Option<Name>,
    pub tolerations: Rc<[Toleration]>,
    pub deleting: bool,
    #[expect(dead_code, reason = "never read: the Ready status an upsert replaced")]
    pub(crate) ready: Option<ConditionStatus>,
}

#[derive(Debug)]
pub struct PodTable {
    records: Slab,
    names: NameArena,
    free: Vec<u32>,
    index: SlotIndex,
    hasher: NameHashState,
    /// ANDed into every hash: all ones, except in tests that force collisions.
    hash_mask: u64,
    /// Each pod's namespace and toleration list as one shared pair: a cluster has few distinct
    /// pairs (its namespaces times the few lists admission and the workloads set), so a pod
    /// names both with one 4-byte id.
    scopes: RefTable<Scope>,
    nodes: RefTable<Name>,
    /// Slots of the pods on each node, by node id.
    by_node: Vec<Vec<u32>>,
    text: HashMap<u32, TextIds>,
    live: usize,
}

impl Default for PodTable {
    fn default() -> Self {
        PodTable::new()
    }
}

impl PodTable {
    pub(crate) fn new() -> PodTable {
        PodTable {
            records: Slab::default(),
            names: NameArena::default(),
            free: Vec::new(),
            index: SlotIndex::default(),
            hasher: NameHashState::default(),
            hash_mask: u64::MAX,
            scopes: RefTable::default(),
            nodes: RefTable::default(),
            by_node: Vec::new(),
            text: HashMap::new(),
            live: 0,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.live
    }

    /// A table whose hashes are ANDed with `mask` (0: every pod collides with every other).
    #[cfg(test)]
    pub(crate) fn with_hash_mask(mask: u64) -> PodTable {
        PodTable {
            hash_mask: mask,
            ..PodTable::new()
        }
    }

    fn hash(&self, namespace: &str, name: &str) -> u64 {
        key_hash(&self.hasher, self.hash_mask, namespace, name.as_bytes())
    }

    fn matches(&self, slot: u32, namespace: &str, name: &str) -> bool {
        let r = self.records.get(slot);
        r.has(LIVE)
            && self.names.get(r.name) == name.as_bytes()
            && namespace_of(&self.scopes, r) == namespace
    }

    fn find(&self, namespace: &str, name: &str) -> Option<u32> {
        let h = self.hash(namespace, name);
        self.index
            .find(h, |slot| self.matches(slot, namespace, name))
    }

    /// Rebuilds the index at `capacity` buckets from the live records (in slot order, so that
    /// the records and names are read front to back), for slots below `slot_bound`.
    fn rebuild_index(&mut self, capacity: usize, slot_bound: usize) {
        let PodTable {
            records,
            names,
            index,
            hasher,
            hash_mask,
            scopes,
            ..
        } = self;
        index.reset(capacity, slot_bound);
        for (slot, r) in records.iter().enumerate() {
            if r.has(LIVE) {
                index.place(
                    key_hash(
                        hasher,
                        *hash_mask,
                        namespace_of(scopes, r),
                        names.get(r.name),
                    ),
                    slot as u32,
                );
            }
        }
    }

    /// Moves the names together (see [`NameArena::compact`]) and points the records at their
    /// new offsets.
    fn compact_names(&mut self) {
        let mut live: Vec<(u32, u32)> = self
            .records
            .iter()
            .enumerate()
            .filter(|(_, r)| r.has(LIVE))
            .map(|(slot, r)| (r.name, slot as u32))
            .collect();
        self.names.compact(&mut live);
        for (offset, slot) in live {
            self.records.get_mut(slot).name = offset;
        }
    }

    pub fn id(&self, key: &PodKey) -> Option<PodId> {
        self.find(&key.namespace, &key.name).map(PodId)
    }

    pub fn get(&self, key: &PodKey) -> Option<PodView<'_>> {
        self.id(key).map(|id| self.view(id))
    }

    /// The pod in slot `id` (which must be live: ids are only valid until the pod is removed).
    pub fn view(&self, id: PodId) -> PodView<'_> {
        PodView {
            table: self,
            slot: id.0,
        }
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = PodView<'_>> + '_ {
        self.records
            .iter()
            .enumerate()
            .filter(|(_, r)| r.has(LIVE))
            .map(|(slot, _)| PodView {
                table: self,
                slot: slot as u32,
            })
    }

    /// The pods bound to `node`, in `namespace/name` order (so that what is decided about them
    /// comes out in a reproducible order).
    pub fn on_node(&self, node: &str) -> Vec<PodId> {
        let Some(id) = self.nodes.id_of(node) else {
            return Vec::new();
        };
        let mut slots: Vec<u32> = self.by_node[id as usize].clone();
        // Names compare as bytes: the same order as `str`'s for UTF-8.
        slots.sort_by(|a, b| {
            let (ra, rb) = (self.records.get(*a), self.records.get(*b));
            let ns = |r: &Record| namespace_of(&self.scopes, r);
            (ns(ra), self.names.get(ra.name)).cmp(&(ns(rb), self.names.get(rb.name)))
        });
        slots.into_iter().map(PodId).collect()
    }

    /// Number of pods bound to `node`.
    #[cfg(test)]
    pub(crate) fn count_on_node(&self, node: &str) -> usize {
        self.nodes
            .id_of(node)
            .map_or(0, |id| self.by_node[id as usize].len())
    }

    /// Stores `pod` unless the table already holds this or a newer version.
    pub(crate) fn upsert(&mut self, pod: Pod) -> PodUpsert {
        match self.find(&pod.key.namespace, &pod.key.name) {
            Some(slot) => self.update(slot, pod),
            None => {
                let key = pod.key.clone();
                let slot = self.insert(pod);
                PodUpsert::Changed(PodChange {
                    id: PodId(slot),
                    key,
                    before: None,
                })
            }
        }
    }

    fn update(&mut self, slot: u32, pod: Pod) -> PodUpsert {
        self.records.get_mut(slot).set(SEEN, true);
        let view = self.view(PodId(slot));
        let record = view.record();
        let older = match parse_resource_version(&pod.resource_version) {
            Some(incoming) if !record.has(TEXT_RV) => incoming < record.resource_version(),
            // A text version on either side: never called older.
            _ => false,
        };
        if older {
            return PodUpsert::Older;
        }
        let same = *view.uid() == *pod.uid
            && view.node_name() == pod.node_name.as_ref()
            && view.ready() == pod.ready
            && view.deleting() == pod.deleting
            && view.daemonset_owned() == pod.daemonset_owned
            && view.disruption_target() == pod.disruption_target
            && *view.tolerations() == pod.tolerations;
        if same {
            // Nothing we keep changed; remember the version (for the staleness check).
            self.set_ids(slot, &pod);
            return PodUpsert::Unchanged;
        }
        let before = {
            let view = self.view(PodId(slot));
            PodBefore {
                replaced: *view.uid() != *pod.uid,
                node: view.node_name().cloned(),
                tolerations: view.tolerations().clone(),
                deleting: view.deleting(),
                ready: view.ready(),
            }
        };
        // Re-point the shared ids first, then the plain fields.
        let old_node = self.records.get(slot).node;
        let new_node = match &pod.node_name {
            Some(n) if self.nodes.get(old_node).is_some_and(|o| o == n) => old_node,
            Some(n) => self.nodes.acquire(n),
            None => NO_NODE,
        };
        if new_node != old_node {
            self.unlink_node(slot, old_node);
            self.link_node(slot, new_node);
        }
        let old_scope = self.records.get(slot).scope;
        if self
            .scopes
            .get(old_scope)
            .is_none_or(|(_, t)| *t != pod.tolerations)
        {
            let id = self
                .scopes
                .acquire(&(pod.key.namespace.clone(), pod.tolerations.clone()));
            self.scopes.release(old_scope);
            self.records.get_mut(slot).scope = id;
        }
        self.set_ids(slot, &pod);
        let key = pod.key;
        PodUpsert::Changed(PodChange {
            id: PodId(slot),
            key,
            before: Some(before),
        })
    }

    fn insert(&mut self, pod: Pod) -> u32 {
        let scope = self
            .scopes
            .acquire(&(pod.key.namespace.clone(), pod.tolerations.clone()));
        let node = pod
            .node_name
            .as_ref()
            .map_or(NO_NODE, |n| self.nodes.acquire(n));
        let name = self.names.push(&pod.key.name);
        let record = Record::new(name, scope, node);
        // Room in the index first: a rebuild reads the live records, and this one is not yet.
        let next = self
            .free
            .last()
            .copied()
            .unwrap_or(self.records.len() as u32);
        if let Some(capacity) = self.index.wants_room_for(next) {
            self.rebuild_index(capacity, self.records.len() + 1);
        }
        let slot = match self.free.pop() {
            Some(slot) => {
                *self.records.get_mut(slot) = record;
                slot
            }
            None => self.records.push(record),
        };
        self.set_ids(slot, &pod);
        self.link_node(slot, node);
        let h = self.hash(&pod.key.namespace, &pod.key.name);
        self.index.place(h, slot);
        self.live += 1;
        slot
    }

    /// The uid, resourceVersion and flags of `pod` into `slot`.
    fn set_ids(&mut self, slot: u32, pod: &Pod) {
        let uid = parse_uuid(&pod.uid);
        let rv = parse_resource_version(&pod.resource_version).filter(|v| *v < COMPACT_RV_LIMIT);
        let r = self.records.get_mut(slot);
        r.uid = uid.unwrap_or([0; 16]);
        r.set_resource_version(rv.unwrap_or(0));
        r.created = creation_second(pod.creation_timestamp);
        r.set(TEXT_UID, uid.is_none());
        r.set(TEXT_RV, rv.is_none());
        r.set(DELETING, pod.deleting);
        r.set(DAEMONSET, pod.daemonset_owned);
        r.set(DISRUPTION, pod.disruption_target);
        r.set_ready(pod.ready);
        if uid.is_none() || rv.is_none() {
            self.text.insert(
                slot,
                TextIds {
                    uid: uid.is_none().then(|| pod.uid.clone()),
                    resource_version: rv.is_none().then(|| pod.resource_version.clone()),
                },
            );
        } else if !self.text.is_empty() {
            // Most tables hold no text ids at all: no hash for them.
            self.text.remove(&slot);
        }
    }

    fn link_node(&mut self, slot: u32, node: u32) {
        if node == NO_NODE {
            return;
        }
        self.records.get_mut(slot).node = node;
        if self.by_node.len() < self.nodes.id_bound() {
            self.by_node.resize_with(self.nodes.id_bound(), Vec::new);
        }
        self.by_node[node as usize].push(slot);
    }

    fn unlink_node(&mut self, slot: u32, node: u32) {
        self.records.get_mut(slot).node = NO_NODE;
        if node == NO_NODE {
            return;
        }
        if let Some(slots) = self.by_node.get_mut(node as usize)
            && let Some(i) = slots.iter().position(|s| *s == slot)
        {
            slots.swap_remove(i);
            if slots.is_empty() {
                *slots = Vec::new();
            }
        }
        self.nodes.release(node);
    }

    /// Removes the pod; returns the node it was bound to.
    pub(crate) fn remove(&mut self, key: &PodKey) -> Option<Option<Name>> {
        let slot = self.find(&key.namespace, &key.name)?;
        Some(self.remove_slot(slot, key))
    }

    fn remove_slot(&mut self, slot: u32, key: &PodKey) -> Option<Name> {
        let node = self.nodes.get(self.records.get(slot).node).cloned();
        let h = self.hash(&key.namespace, &key.name);
        {
            let PodTable {
                records,
                names,
                index,
                hasher,
                hash_mask,
                scopes,
                ..
            } = &mut *self;
            index.remove(h, slot, |other| {
                let r = records.get(other);
                key_hash(
                    hasher,
                    *hash_mask,
                    namespace_of(scopes, r),
                    names.get(r.name),
                )
            });
        }
        let r = std::mem::replace(self.records.get_mut(slot), Record::vacant());
        self.names.remove(r.name);
        self.unlink_node(slot, r.node);
        self.scopes.release(r.scope);
        self.text.remove(&slot);
        self.free.push(slot);
        self.live -= 1;
        if self.names.wants_compaction() {
            self.compact_names();
        }
        node
    }

    /// A write we know succeeded (the pod's Ready condition set), before the watch says so.
    pub fn set_ready(&mut self, key: &PodKey, ready: ConditionStatus) {
        if let Some(slot) = self.find(&key.namespace, &key.name) {
            self.records.get_mut(slot).set_ready(Some(ready));
        }
    }

    /// A deletion we know was accepted, before the watch says so.
    pub fn set_deleting(&mut self, key: &PodKey) {
        if let Some(slot) = self.find(&key.namespace, &key.name) {
            self.records.get_mut(slot).set(DELETING, true);
        }
    }

    /// A full state (LIST or watch-list) starts: every pod is unseen until it is delivered again.
    pub(crate) fn begin_full_state(&mut self) {
        for r in self.records.iter_mut() {
            r.set(SEEN, false);
        }
    }

    /// The full state is complete: pods it did not deliver are gone. Returns their keys and
    /// nodes, and sizes the tables to what they hold.
    pub(crate) fn end_full_state(&mut self) -> Vec<(PodKey, Option<Name>)> {
        let unseen: Vec<(u32, PodKey)> = self
            .iter()
            .filter(|v| !v.record().has(SEEN))
            .map(|v| (v.slot, v.key()))
            .collect();
        let gone = unseen
            .into_iter()
            .map(|(slot, key)| {
                let node = self.remove_slot(slot, &key);
                (key, node)
            })
            .collect();
        self.shrink_to_fit();
        gone
    }
}

/// A pod's namespace and toleration list (see `PodTable::scopes`).
type Scope = (Name, Rc<[Toleration]>);

/// The namespace of `r` (empty for a vacant record).
fn namespace_of<'a>(scopes: &'a RefTable<Scope>, r: &Record) -> &'a str {
    scopes.get(r.scope).map_or("", |(ns, _)| &**ns)
}

/// The index's hash of a pod's key, from the name's bytes (a rebuild reads them from the
/// arena); each part ends with a separator, as `str`'s `Hash` does.
fn key_hash(hasher: &NameHashState, mask: u64, namespace: &str, name: &[u8]) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = hasher.build_hasher();
    namespace.hash(&mut h);
    h.write(name);
    h.write_u8(0xff);
    h.finish() & mask
}

/// A creation time as the table keeps it: whole Unix seconds (what the API keeps), 0 for none.
/// Past 2106 it saturates (the countdown never starts later than now anyway).
fn creation_second(t: Option<Time>) -> u32 {
    t.map_or(0, |t| {
        u32::try_from(t.as_unix_millis() / 1000).unwrap_or(u32::MAX)
    })
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_compact;
