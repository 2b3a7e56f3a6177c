//! The bound pods, compactly: the one copy of every pod the daemon keeps.
//!
//! A pod is a 56-byte record in one slab plus its name: the uid as 16 bytes and the
//! resourceVersion as an integer sharing a word with the flags (text fallbacks in a side map),
//! the namespace, node name and toleration list as 4-byte ids into shared tables, and the
//! creation second. Pods are found by a 64-bit hash of
//! `namespace/name` (an `u64 -> slot` map; a second pod with the same hash, astronomically
//! rare, goes to an exact overflow map), and by node through a list of slots per node.
//! Both controllers read pods from here; nobody else keeps a copy (kube-controller-manager's
//! informers keep three or more whole objects per pod: kubernetes#115699).

use std::collections::HashMap;
use std::hash::{BuildHasher, BuildHasherDefault, Hasher, RandomState};
use std::rc::Rc;

use super::compact::{parse_resource_version, parse_uuid, render_uuid};
use super::ref_table::RefTable;
use super::{ConditionStatus, Name, Pod, PodKey, Toleration};
use crate::time::Time;

mod memory;
mod view;
pub(crate) use memory::malloc_size;
pub(crate) use view::PodView;

const NO_NODE: u32 = u32::MAX;

const LIVE: u16 = 1;
/// Seen in the full state (LIST or watch-list) being delivered: see [`PodTable::begin_full_state`].
const SEEN: u16 = 1 << 1;
const DELETING: u16 = 1 << 2;
const DAEMONSET: u16 = 1 << 3;
const TEXT_UID: u16 = 1 << 4;
const TEXT_RV: u16 = 1 << 5;
const DISRUPTION: u16 = 1 << 9;
const READY_SHIFT: u16 = 6;
const READY_MASK: u16 = 0b111 << READY_SHIFT;

/// ResourceVersions from this on are kept as text (etcd's revisions are far below: 2^48 is
/// 281 trillion), so that the version and the flags share one word.
const COMPACT_RV_LIMIT: u64 = 1 << 48;
const FLAG_BITS: u32 = 16;

#[derive(Debug)]
struct Record {
    name: Box<str>,
    uid: [u8; 16],
    /// The resourceVersion (below [`COMPACT_RV_LIMIT`]) in the high 48 bits, the flags in the
    /// low 16: one word, so that the creation second fits in the 56 bytes (with a `u16` of flags
    /// of its own the record would be padded to 64).
    version_flags: u64,
    namespace: u32,
    node: u32,
    tolerations: u32,
    /// `metadata.creationTimestamp` in Unix seconds (0: none).
    created: u32,
}

impl Record {
    fn vacant() -> Record {
        Record {
            name: Box::default(),
            uid: [0; 16],
            version_flags: 0,
            namespace: 0,
            node: NO_NODE,
            tolerations: 0,
            created: 0,
        }
    }

    fn flags(&self) -> u16 {
        self.version_flags as u16
    }

    fn set_flags(&mut self, flags: u16) {
        self.version_flags = (self.version_flags & !u64::from(u16::MAX)) | u64::from(flags);
    }

    fn resource_version(&self) -> u64 {
        self.version_flags >> FLAG_BITS
    }

    /// `rv` must be below [`COMPACT_RV_LIMIT`] (larger ones are kept as text).
    fn set_resource_version(&mut self, rv: u64) {
        debug_assert!(rv < COMPACT_RV_LIMIT);
        self.version_flags = (rv << FLAG_BITS) | u64::from(self.flags());
    }

    fn has(&self, flag: u16) -> bool {
        self.flags() & flag != 0
    }

    fn set(&mut self, flag: u16, on: bool) {
        let flags = self.flags();
        self.set_flags(if on { flags | flag } else { flags & !flag });
    }

    fn ready(&self) -> Option<ConditionStatus> {
        match (self.flags() & READY_MASK) >> READY_SHIFT {
            1 => Some(ConditionStatus::True),
            2 => Some(ConditionStatus::False),
            3 => Some(ConditionStatus::Unknown),
            4 => Some(ConditionStatus::Other),
            _ => None,
        }
    }

    fn set_ready(&mut self, ready: Option<ConditionStatus>) {
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

/// Uids and resourceVersions that are not in the compact form.
#[derive(Debug, Default)]
struct TextIds {
    uid: Option<Name>,
    #[cfg_attr(
        not(test),
        expect(
            dead_code,
            reason = "read by PodView::resource_version, which only the unit tests call"
        )
    )]
    resource_version: Option<Name>,
}

/// The map key is already a hash.
#[derive(Default)]
struct PreHashed(u64);

impl Hasher for PreHashed {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(*b);
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = v;
    }
}

/// A slot in the table, valid until the pod is removed.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct PodId(u32);

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
    pub(crate) id: PodId,
    pub(crate) key: PodKey,
    pub(crate) before: Option<PodBefore>,
}

/// What the consumers compare against.
#[derive(Clone, Debug)]
pub(crate) struct PodBefore {
    /// A different pod under the same name (its uid changed).
    pub(crate) replaced: bool,
    pub(crate) node: Option<Name>,
    pub(crate) tolerations: Rc<[Toleration]>,
    pub(crate) deleting: bool,
    #[expect(dead_code, reason = "never read: the Ready status an upsert replaced")]
    pub(crate) ready: Option<ConditionStatus>,
}

#[derive(Debug)]
pub(crate) struct PodTable {
    records: Vec<Record>,
    free: Vec<u32>,
    index: HashMap<u64, u32, BuildHasherDefault<PreHashed>>,
    overflow: HashMap<PodKey, u32>,
    hasher: RandomState,
    namespaces: RefTable<Name>,
    nodes: RefTable<Name>,
    /// Slots of the pods on each node, by node id.
    by_node: Vec<Vec<u32>>,
    tolerations: RefTable<Rc<[Toleration]>>,
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
            records: Vec::new(),
            free: Vec::new(),
            index: HashMap::default(),
            overflow: HashMap::new(),
            hasher: RandomState::new(),
            namespaces: RefTable::default(),
            nodes: RefTable::default(),
            by_node: Vec::new(),
            tolerations: RefTable::default(),
            text: HashMap::new(),
            live: 0,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.live
    }

    fn hash(&self, namespace: &str, name: &str) -> u64 {
        self.hasher.hash_one((namespace, name))
    }

    fn matches(&self, slot: u32, namespace: &str, name: &str) -> bool {
        let r = &self.records[slot as usize];
        r.has(LIVE)
            && &*r.name == name
            && self
                .namespaces
                .get(r.namespace)
                .is_some_and(|n| &**n == namespace)
    }

    fn find(&self, namespace: &str, name: &str) -> Option<u32> {
        let h = self.hash(namespace, name);
        let slot = *self.index.get(&h)?;
        if self.matches(slot, namespace, name) {
            return Some(slot);
        }
        self.overflow
            .iter()
            .find(|(k, _)| &*k.namespace == namespace && &*k.name == name)
            .map(|(_, s)| *s)
    }

    pub(crate) fn id(&self, key: &PodKey) -> Option<PodId> {
        self.find(&key.namespace, &key.name).map(PodId)
    }

    pub(crate) fn get(&self, key: &PodKey) -> Option<PodView<'_>> {
        self.id(key).map(|id| self.view(id))
    }

    /// The pod in slot `id` (which must be live: ids are only valid until the pod is removed).
    pub(crate) fn view(&self, id: PodId) -> PodView<'_> {
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
    pub(crate) fn on_node(&self, node: &str) -> Vec<PodId> {
        let Some(id) = self.nodes.id_of(node) else {
            return Vec::new();
        };
        let mut slots: Vec<u32> = self.by_node[id as usize].clone();
        slots.sort_by(|a, b| {
            let (ra, rb) = (&self.records[*a as usize], &self.records[*b as usize]);
            let ns = |r: &Record| self.namespaces.get(r.namespace).map(|n| &**n).unwrap_or("");
            (ns(ra), &*ra.name).cmp(&(ns(rb), &*rb.name))
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
        self.records[slot as usize].set(SEEN, true);
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
        let old_node = self.records[slot as usize].node;
        let new_node = match &pod.node_name {
            Some(n) if self.nodes.get(old_node).is_some_and(|o| o == n) => old_node,
            Some(n) => self.nodes.acquire(n),
            None => NO_NODE,
        };
        if new_node != old_node {
            self.unlink_node(slot, old_node);
            self.link_node(slot, new_node);
        }
        let old_tolerations = self.records[slot as usize].tolerations;
        if self.tolerations.get(old_tolerations) != Some(&pod.tolerations) {
            let id = self.tolerations.acquire(&pod.tolerations);
            self.tolerations.release(old_tolerations);
            self.records[slot as usize].tolerations = id;
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
        let namespace = self.namespaces.acquire(&pod.key.namespace);
        let node = pod
            .node_name
            .as_ref()
            .map_or(NO_NODE, |n| self.nodes.acquire(n));
        let tolerations = self.tolerations.acquire(&pod.tolerations);
        let record = Record {
            name: Box::from(&*pod.key.name),
            uid: [0; 16],
            version_flags: u64::from(LIVE | SEEN),
            namespace,
            node,
            tolerations,
            created: 0,
        };
        let slot = match self.free.pop() {
            Some(slot) => {
                self.records[slot as usize] = record;
                slot
            }
            None => {
                // Grow by an eighth, not by doubling: the slab is the largest table we keep.
                if self.records.len() == self.records.capacity() {
                    self.records.reserve_exact((self.records.len() / 8).max(64));
                }
                self.records.push(record);
                (self.records.len() - 1) as u32
            }
        };
        self.set_ids(slot, &pod);
        self.link_node(slot, node);
        let h = self.hash(&pod.key.namespace, &pod.key.name);
        match self.index.entry(h) {
            std::collections::hash_map::Entry::Occupied(_) => {
                self.overflow.insert(pod.key.clone(), slot);
            }
            std::collections::hash_map::Entry::Vacant(v) => {
                v.insert(slot);
            }
        }
        self.live += 1;
        slot
    }

    /// The uid, resourceVersion and flags of `pod` into `slot`.
    fn set_ids(&mut self, slot: u32, pod: &Pod) {
        let uid = parse_uuid(&pod.uid);
        let rv = parse_resource_version(&pod.resource_version).filter(|v| *v < COMPACT_RV_LIMIT);
        let r = &mut self.records[slot as usize];
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
        } else {
            self.text.remove(&slot);
        }
    }

    fn link_node(&mut self, slot: u32, node: u32) {
        if node == NO_NODE {
            return;
        }
        self.records[slot as usize].node = node;
        if self.by_node.len() < self.nodes.id_bound() {
            self.by_node.resize_with(self.nodes.id_bound(), Vec::new);
        }
        self.by_node[node as usize].push(slot);
    }

    fn unlink_node(&mut self, slot: u32, node: u32) {
        self.records[slot as usize].node = NO_NODE;
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
        let node = {
            let r = &self.records[slot as usize];
            self.nodes.get(r.node).cloned()
        };
        let h = self.hash(&key.namespace, &key.name);
        if self.overflow.remove(key).is_none() {
            self.index.remove(&h);
            // Promote a pod with the same hash from the overflow map.
            let promoted = self
                .overflow
                .iter()
                .find(|(k, _)| self.hash(&k.namespace, &k.name) == h)
                .map(|(k, s)| (k.clone(), *s));
            if let Some((k, s)) = promoted {
                self.overflow.remove(&k);
                self.index.insert(h, s);
            }
        }
        let r = std::mem::replace(&mut self.records[slot as usize], Record::vacant());
        self.unlink_node(slot, r.node);
        self.namespaces.release(r.namespace);
        self.tolerations.release(r.tolerations);
        self.text.remove(&slot);
        self.free.push(slot);
        self.live -= 1;
        node
    }

    /// A write we know succeeded (the pod's Ready condition set), before the watch says so.
    pub(crate) fn set_ready(&mut self, key: &PodKey, ready: ConditionStatus) {
        if let Some(slot) = self.find(&key.namespace, &key.name) {
            self.records[slot as usize].set_ready(Some(ready));
        }
    }

    /// A deletion we know was accepted, before the watch says so.
    pub(crate) fn set_deleting(&mut self, key: &PodKey) {
        if let Some(slot) = self.find(&key.namespace, &key.name) {
            self.records[slot as usize].set(DELETING, true);
        }
    }

    /// A full state (LIST or watch-list) starts: every pod is unseen until it is delivered again.
    pub(crate) fn begin_full_state(&mut self) {
        for r in &mut self.records {
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

/// A creation time as the table keeps it: whole Unix seconds (what the API keeps), 0 for none.
/// Past 2106 it saturates (the countdown never starts later than now anyway).
fn creation_second(t: Option<Time>) -> u32 {
    t.map_or(0, |t| {
        u32::try_from(t.as_unix_millis() / 1000).unwrap_or(u32::MAX)
    })
}

#[cfg(test)]
mod tests;
