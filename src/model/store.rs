//! The cluster as the daemon knows it: nodes, their Leases, bound pods and pods by node — one
//! copy of each, shared by both controllers (kube-runtime's `Store` is the model).
//!
//! The informers write into it (through the controllers' inputs), so do the answers of our own
//! API writes and the writes known to have landed, all through one writer
//! (`controller/node_lifecycle/observe.rs`: `tests/config_and_operator_files/layering.rs` holds
//! every other file of `src/` to reads), and both controllers read it. Two rules keep it honest:
//! - an object older than the one held is ignored (a delayed watch event must not undo what
//!   our write's answer already put here, or the next write would conflict);
//! - a full state (the LIST after a start or a `410 Gone`, or a watch-list's initial events)
//!   marks what it delivers, and what it did not deliver is removed at its end. So the
//!   reflectors need no map of their own.

use std::collections::HashSet;
use std::rc::Rc;

use super::compact::is_older;
use super::pod_table::{PodTable, PodUpsert, malloc_size};
use super::{Lease, Name, NameMap, Node, Pod, PodKey};
use crate::time::NameHashState;

/// A watched kind, for full states.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    Nodes,
    Leases,
    Pods,
}

/// What an upsert of a node or Lease did.
#[derive(Debug)]
pub enum Upserted<T> {
    /// The store holds a newer version: ignored.
    Older,
    /// The same object again: nothing changed.
    Unchanged,
    /// Stored; `before` is the version it replaced.
    Changed { before: Option<T> },
}

/// What a full state's end removed.
#[derive(Debug, Default)]
pub struct Vanished {
    pub(crate) nodes: Vec<Node>,
    pub(crate) leases: Vec<Name>,
    pub(crate) pods: Vec<(PodKey, Option<Name>)>,
}

/// A Lease as the store keeps it.
#[derive(Debug)]
struct HeldLease {
    lease: Lease,
    /// Where the store's owner (the node lifecycle) keeps its node's entry, as it last found
    /// it: a renewal then reaches the entry from the one lookup it makes here. A hint only:
    /// the owner checks it (`NameMap::slot_hinted`); [`NO_SLOT`] until set.
    owner_slot: u32,
}

/// No owner's slot kept yet.
const NO_SLOT: u32 = u32::MAX;

/// What [`ClusterStore::upsert_lease`] did, and where it keeps the Lease.
#[derive(Debug)]
pub struct LeaseStored {
    /// The name the Lease is kept under: its node's allocation once the node is known.
    pub name: Name,
    /// The owner's slot kept beside it ([`NO_SLOT`] if none).
    pub owner_slot: u32,
    pub upserted: Upserted<Lease>,
}

#[derive(Debug, Default)]
pub struct ClusterStore {
    nodes: NameMap<Node>,
    /// How many of `nodes` are not Ready (`Node::is_not_ready`), kept as they change: the
    /// daemon's status line shows it every 5 s, and counting it there was a walk of every node,
    /// a cache miss or two each (0.5 ms at 2,000 nodes, a twentieth of its CPU on a real API server).
    nodes_not_ready: usize,
    /// Found by hash like the nodes (a Lease is looked up by name at every renewal), through
    /// an index whose buckets can be fetched ahead of a batch of renewals
    /// ([`ClusterStore::prefetch_lease_index`]).
    leases: NameMap<HeldLease>,
    pods: PodTable,
    /// Names delivered by the full state in progress, per kind (pods mark their records).
    nodes_seen: Option<HashSet<Name, NameHashState>>,
    leases_seen: Option<HashSet<Name, NameHashState>>,
}

impl ClusterStore {
    pub fn new() -> ClusterStore {
        ClusterStore::default()
    }

    // ---- reads -----------------------------------------------------------------------------

    pub(crate) fn node(&self, name: &str) -> Option<&Node> {
        self.nodes.get(name)
    }

    /// Every node, in name order.
    pub(crate) fn nodes(&self) -> impl Iterator<Item = &Node> {
        self.nodes.values()
    }

    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    /// How many nodes are not Ready: their Ready condition is False, Unknown or missing.
    pub fn nodes_not_ready(&self) -> usize {
        self.nodes_not_ready
    }

    pub(crate) fn lease(&self, name: &str) -> Option<&Lease> {
        self.leases.get(name).map(|h| &h.lease)
    }

    /// Prefetching a batch of renewals (`model/prefetch.rs`), stage by stage: the index
    /// buckets of their Leases…
    pub(crate) fn prefetch_lease_index(&self, name: &str) {
        self.leases.prefetch_index(self.leases.hash(name));
    }

    /// …then the Leases those buckets name…
    pub(crate) fn prefetch_lease(&self, name: &str) {
        self.leases.prefetch_entry(self.leases.hash(name));
    }

    /// …then, each Lease read, the name it is kept under (the renewal compares its bytes and
    /// clones it); returns the owner's slot kept beside it, for the owner to ask for its entry.
    /// The Lease is the one the lookup compares first, unchecked: a guess, for prefetching.
    pub(crate) fn prefetch_lease_name(&self, name: &str) -> Option<u32> {
        let (key, held) = self.leases.likely(self.leases.hash(name))?;
        super::prefetch::prefetch_name(key);
        Some(held.owner_slot).filter(|&slot| slot != NO_SLOT)
    }

    pub(crate) fn lease_count(&self) -> usize {
        self.leases.len()
    }

    pub(crate) fn pods(&self) -> &PodTable {
        &self.pods
    }

    pub fn pod_count(&self) -> usize {
        self.pods.len()
    }

    // ---- writes ----------------------------------------------------------------------------

    pub fn upsert_node(&mut self, node: Node) -> Upserted<Node> {
        if let Some(seen) = &mut self.nodes_seen {
            seen.insert(node.name.clone());
        }
        let not_ready = node.is_not_ready();
        match self.nodes.get_mut(&node.name) {
            Some(held) => {
                let was_not_ready = held.is_not_ready();
                let upserted = replace(held, node, |n| &n.resource_version);
                if let Upserted::Changed { .. } = upserted {
                    self.recount_not_ready(was_not_ready, not_ready);
                }
                upserted
            }
            None => {
                self.rekey_lease(&node.name);
                self.nodes.insert(node.name.clone(), node);
                self.recount_not_ready(false, not_ready);
                Upserted::Changed { before: None }
            }
        }
    }

    pub(crate) fn remove_node(&mut self, name: &str) -> Option<Node> {
        let node = self.nodes.remove(name)?;
        self.recount_not_ready(node.is_not_ready(), false);
        Some(node)
    }

    /// A write we know succeeded, before the watch or the write's answer says so (the
    /// resourceVersion is left as it was: the object's next version will replace it): `edit`
    /// changes the stored node `name`; returns what it returned, `None` if there is no such node.
    pub(crate) fn edit_node<R>(
        &mut self,
        name: &str,
        edit: impl FnOnce(&mut Node) -> R,
    ) -> Option<R> {
        let node = self.nodes.get_mut(name)?;
        let was_not_ready = node.is_not_ready();
        let edited = edit(node);
        let not_ready = node.is_not_ready();
        self.recount_not_ready(was_not_ready, not_ready);
        Some(edited)
    }

    fn recount_not_ready(&mut self, was: bool, is: bool) {
        match (was, is) {
            (false, true) => self.nodes_not_ready += 1,
            (true, false) => self.nodes_not_ready -= 1,
            _ => {}
        }
    }

    /// Stores a Lease, found by its name's text (the decode copies it, `inline_text.rs`) and
    /// kept under its node's interned name once the node is known. Returns that name, which
    /// the node lifecycle compares by address, and the owner's slot kept beside the Lease
    /// (`set_lease_owner_slot`): a renewal reaches its node's entry from this one lookup.
    pub fn upsert_lease(&mut self, lease: Lease) -> LeaseStored {
        let (name, owner_slot, upserted) = match self.leases.get_key_value_mut(&lease.name) {
            Some((name, held)) => {
                let name = name.clone();
                let upserted = replace(&mut held.lease, lease, |l| &l.resource_version);
                (name, held.owner_slot, upserted)
            }
            None => {
                // Under the node's name when the node is known; else under a name of its own
                // until the node comes (`rekey_lease`).
                let name = match self.nodes.key(&lease.name) {
                    Some(key) => key.clone(),
                    None => Name::from(&*lease.name),
                };
                let held = HeldLease {
                    lease,
                    owner_slot: NO_SLOT,
                };
                self.leases.insert(name.clone(), held);
                (name, NO_SLOT, Upserted::Changed { before: None })
            }
        };
        if let Some(seen) = &mut self.leases_seen {
            seen.insert(name.clone());
        }
        LeaseStored {
            name,
            owner_slot,
            upserted,
        }
    }

    /// Keeps `slot` beside `name`'s Lease: where the owner found the node's entry.
    pub(crate) fn set_lease_owner_slot(&mut self, name: &str, slot: u32) {
        if let Some(held) = self.leases.get_mut(name) {
            held.owner_slot = slot;
        }
    }

    /// A node new to the store: its Lease, if it came first, is kept under the node's name from
    /// now on (one allocation for both; the renewals' lookups compare it by address).
    fn rekey_lease(&mut self, node_name: &Name) {
        let held = self.leases.key(node_name);
        if held.is_none_or(|held| Rc::ptr_eq(held, node_name)) {
            return;
        }
        let Some(held) = self.leases.remove(node_name) else {
            return;
        };
        self.leases.insert(node_name.clone(), held);
    }

    pub(crate) fn remove_lease(&mut self, name: &str) -> Option<Lease> {
        self.leases.remove(name).map(|h| h.lease)
    }

    pub fn upsert_pod(&mut self, pod: Pod) -> PodUpsert {
        self.pods.upsert(pod)
    }

    /// Removes a pod; `Some(node it was bound to)` if it was held.
    pub(crate) fn remove_pod(&mut self, key: &PodKey) -> Option<Option<Name>> {
        self.pods.remove(key)
    }

    pub(crate) fn pods_mut(&mut self) -> &mut PodTable {
        &mut self.pods
    }

    // ---- full states -----------------------------------------------------------------------

    /// A full state of `kind` starts: everything of that kind is unseen until delivered again.
    pub fn begin_full_state(&mut self, kind: Kind) {
        match kind {
            Kind::Nodes => self.nodes_seen = Some(HashSet::default()),
            Kind::Leases => self.leases_seen = Some(HashSet::default()),
            Kind::Pods => self.pods.begin_full_state(),
        }
    }

    /// The full state of `kind` is complete: what it did not deliver is removed and returned.
    pub fn end_full_state(&mut self, kind: Kind) -> Vanished {
        let mut vanished = Vanished::default();
        match kind {
            Kind::Nodes => {
                let seen = self.nodes_seen.take().unwrap_or_default();
                let gone: Vec<Name> = self
                    .nodes
                    .keys()
                    .filter(|n| !seen.contains(*n))
                    .cloned()
                    .collect();
                vanished.nodes = gone.iter().filter_map(|n| self.remove_node(n)).collect();
                self.nodes.compact();
            }
            Kind::Leases => {
                let seen = self.leases_seen.take().unwrap_or_default();
                vanished.leases = self
                    .leases
                    .keys()
                    .filter(|n| !seen.contains(*n))
                    .cloned()
                    .collect();
                for name in &vanished.leases {
                    self.leases.remove(name);
                }
                self.leases.compact();
            }
            Kind::Pods => vanished.pods = self.pods.end_full_state(),
        }
        vanished
    }

    // ---- accounting ------------------------------------------------------------------------

    /// Heap bytes the store holds, by kind, as allocated (names shared with other objects are
    /// counted where they are first kept: with the node).
    pub fn heap_bytes(&self) -> StoreBytes {
        StoreBytes {
            nodes: self.nodes.values().map(node_bytes).sum::<usize>() + self.nodes.heap_bytes(),
            leases: self.leases.heap_bytes()
                + self
                    .leases
                    .values()
                    .map(|h| h.lease.resource_version.heap_bytes() + h.lease.name.heap_bytes())
                    .sum::<usize>(),
            pods: self.pods.heap_bytes(),
        }
    }
}

/// Stores `new` over `held` unless it is older (by resourceVersion) or the same object.
fn replace<T: PartialEq>(held: &mut T, new: T, version: fn(&T) -> &str) -> Upserted<T> {
    if is_older(version(&new), version(held)) {
        return Upserted::Older;
    }
    if *held == new {
        return Upserted::Unchanged;
    }
    Upserted::Changed {
        before: Some(std::mem::replace(held, new)),
    }
}

/// Heap bytes by kind (see [`ClusterStore::heap_bytes`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StoreBytes {
    pub nodes: usize,
    pub leases: usize,
    pub pods: usize,
}

impl StoreBytes {
    pub(crate) fn total(&self) -> usize {
        self.nodes + self.leases + self.pods
    }
}

/// A node's heap bytes. What it shares with other nodes (its label set; interned reasons,
/// messages and label values, the same kubelet text on every node) counts as its share: the
/// allocation divided by the holders (the interner's and the decoder's tables among them), so
/// the sum over the nodes is what they hold together, not a copy per node.
fn node_bytes(node: &Node) -> usize {
    let rc = |s: &str| malloc_size(16 + s.len());
    let shared = |s: &Name| rc(s) / Rc::strong_count(s);
    let labels = node.labels.shared();
    rc(&node.name)
        + rc(&node.uid)
        + rc(&node.resource_version)
        + (malloc_size(16 + labels.len() * std::mem::size_of::<(Name, Name)>())
            + labels.iter().map(|(_, v)| shared(v)).sum::<usize>())
            / Rc::strong_count(labels)
        + malloc_size(node.taints.capacity() * std::mem::size_of::<super::Taint>())
        + malloc_size(node.conditions.capacity() * std::mem::size_of::<super::NodeCondition>())
        // The condition types are interned (shared by every node): only the list is the node's.
        + malloc_size(
            node.other_conditions.capacity()
                * std::mem::size_of::<(Name, super::ConditionStatus)>(),
        )
        + node
            .conditions
            .iter()
            .filter_map(|c| c.text.pair())
            .map(|pair| {
                (malloc_size(16 + std::mem::size_of::<(Option<Name>, Option<Name>)>())
                    + pair.0.as_ref().map_or(0, shared)
                    + pair.1.as_ref().map_or(0, shared))
                    / Rc::strong_count(pair)
            })
            .sum::<usize>()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str, rv: &str) -> Node {
        Node {
            name: Rc::from(name),
            uid: Rc::from("uid"),
            resource_version: Rc::from(rv),
            creation_timestamp: crate::time::Time::ZERO,
            labels: Default::default(),
            taints: Vec::new(),
            unschedulable: false,
            conditions: Vec::new(),
            other_conditions: Vec::new(),
            autonomy: Default::default(),
            maintenance: Default::default(),
        }
    }

    /// Our taint write's answer (version 12) is stored; the watch then delivers version 11
    /// (from before the write) late: the store keeps 12, so the next write does not conflict.
    #[test]
    fn an_older_watch_event_after_our_write_keeps_the_newer_node() {
        let mut s = ClusterStore::new();
        s.upsert_node(node("n1", "10"));
        let mut written = node("n1", "12");
        written.unschedulable = true;
        assert!(matches!(s.upsert_node(written), Upserted::Changed { .. }));
        assert!(matches!(s.upsert_node(node("n1", "11")), Upserted::Older));
        assert_eq!(&*s.node("n1").unwrap().resource_version, "12");
        assert!(s.node("n1").unwrap().unschedulable);
        let mut echo = node("n1", "12");
        echo.unschedulable = true;
        assert!(matches!(s.upsert_node(echo), Upserted::Unchanged));
    }

    #[test]
    fn a_relist_removes_nodes_and_leases_it_did_not_deliver() {
        let mut s = ClusterStore::new();
        s.upsert_node(node("a", "1"));
        s.upsert_node(node("b", "1"));
        s.begin_full_state(Kind::Nodes);
        s.upsert_node(node("a", "1"));
        let v = s.end_full_state(Kind::Nodes);
        assert_eq!(v.nodes.len(), 1);
        assert_eq!(&*v.nodes[0].name, "b");
        assert_eq!(s.node_count(), 1);
    }

    /// The count of nodes not Ready kept by the store is the count of them, after any sequence
    /// of watch events, relists, removals and our own writes landed (the status line shows it
    /// and no longer walks the nodes; debug builds also check it there).
    #[test]
    fn the_count_of_nodes_not_ready_follows_every_change() {
        use super::super::{ConditionStatus, ConditionText, NodeCondition, NodeConditionType};
        use crate::time::Rng;
        fn with_ready(name: &str, rv: u64, status: Option<ConditionStatus>) -> Node {
            let mut n = node(name, &rv.to_string());
            n.conditions = status
                .into_iter()
                .map(|status| NodeCondition {
                    kind: NodeConditionType::Ready,
                    status,
                    last_heartbeat_time: None,
                    last_transition_time: None,
                    text: ConditionText::default(),
                })
                .collect();
            n
        }
        let statuses = [
            None,
            Some(ConditionStatus::True),
            Some(ConditionStatus::False),
            Some(ConditionStatus::Unknown),
        ];
        for seed in 1..=50u64 {
            let mut rng = Rng::new(seed);
            let mut s = ClusterStore::new();
            let mut rv = 0u64;
            for step in 0..300 {
                let name = format!("n{}", rng.below(12));
                let status = statuses[rng.below(4) as usize];
                rv += 1;
                match rng.below(10) {
                    0..=4 => {
                        s.upsert_node(with_ready(&name, rv, status));
                    }
                    // An older version: not stored, the count unchanged.
                    5 => {
                        s.upsert_node(with_ready(&name, 0, status));
                    }
                    6 => {
                        s.remove_node(&name);
                    }
                    7 => {
                        s.edit_node(&name, |n| {
                            *n = with_ready(&n.name.clone(), rv, status);
                        });
                    }
                    _ => {
                        // A relist that delivers about half of the nodes again.
                        s.begin_full_state(Kind::Nodes);
                        for i in 0..12 {
                            if rng.below(2) == 0 {
                                let status = statuses[rng.below(4) as usize];
                                s.upsert_node(with_ready(&format!("n{i}"), rv, status));
                            }
                        }
                        s.end_full_state(Kind::Nodes);
                    }
                }
                let walked = s.nodes().filter(|n| n.is_not_ready()).count();
                assert_eq!(s.nodes_not_ready(), walked, "seed {seed} step {step}");
            }
        }
    }

    fn lease(name: &str, rv: &str) -> Lease {
        Lease {
            name: name.into(),
            renew_time: None,
            duration_seconds: Some(40),
            resource_version: rv.into(),
        }
    }

    /// The name `name`'s Lease is kept under.
    fn lease_key<'a>(s: &'a ClusterStore, name: &str) -> &'a Name {
        s.leases.key(name).expect("the Lease is held")
    }

    /// The store keeps every Lease under its node's name allocation, whichever came first, and
    /// a renewal (the name's text, copied from the wire) returns that name, so the node
    /// lifecycle finds its entry by address.
    #[test]
    fn a_lease_is_kept_under_its_nodes_name_whichever_came_first() {
        let mut s = ClusterStore::new();
        s.upsert_node(node("first", "1"));
        let stored = s.upsert_lease(lease("first", "2"));
        let node_name = &s.node("first").unwrap().name;
        assert!(Rc::ptr_eq(&stored.name, node_name), "the node's name");
        assert!(Rc::ptr_eq(lease_key(&s, "first"), node_name));
        assert_eq!(stored.owner_slot, NO_SLOT);

        // The Lease first: kept under a name of its own until its node comes.
        let early = s.upsert_lease(lease("later", "3"));
        s.upsert_node(node("later", "4"));
        let node_name = s.node("later").unwrap().name.clone();
        assert!(!Rc::ptr_eq(&early.name, &node_name));
        assert!(Rc::ptr_eq(lease_key(&s, "later"), &node_name));

        // A renewal is stored under the held name, with the owner's slot kept beside it; it
        // allocates no name.
        s.set_lease_owner_slot("later", 7);
        let renewal = s.upsert_lease(lease("later", "5"));
        assert!(matches!(renewal.upserted, Upserted::Changed { .. }));
        assert!(Rc::ptr_eq(&renewal.name, &node_name));
        assert!(Rc::ptr_eq(lease_key(&s, "later"), &node_name));
        assert_eq!(renewal.owner_slot, 7);
        assert_eq!(&*s.lease("later").unwrap().name, "later");
        assert_eq!(&*s.lease("later").unwrap().resource_version, "5");
        // Older and unchanged renewals change nothing and keep the slot.
        assert!(matches!(
            s.upsert_lease(lease("later", "4")).upserted,
            Upserted::Older
        ));
        let again = s.upsert_lease(lease("later", "5"));
        assert!(matches!(again.upserted, Upserted::Unchanged));
        assert_eq!(again.owner_slot, 7);
        assert_eq!(s.lease_count(), 2);
    }

    /// A Lease's name past the inline room (`inline_text.rs`) is a heap block of the Lease's,
    /// and the store's bytes count it.
    #[test]
    fn a_lease_name_past_the_inline_room_is_counted_in_the_store_bytes() {
        let long = "n".repeat(60);
        let mut short = ClusterStore::new();
        short.upsert_lease(lease(&long[..40], "1"));
        let mut heap = ClusterStore::new();
        heap.upsert_lease(lease(&long, "1"));
        let name_block = crate::model::LeaseName::new(&long).heap_bytes();
        assert!(name_block > 0);
        assert_eq!(
            heap.heap_bytes().leases,
            short.heap_bytes().leases + name_block
        );
    }

    /// A relist of Leases marks what it delivers by name: Leases under other allocations of the
    /// names count as the held ones, and only what it did not deliver is removed.
    #[test]
    fn a_relist_of_leases_keeps_what_it_delivered_by_name_and_removes_the_rest() {
        let mut s = ClusterStore::new();
        for name in ["a", "b"] {
            s.upsert_node(node(name, "1"));
            s.upsert_lease(lease(name, "2"));
        }
        s.begin_full_state(Kind::Leases);
        s.upsert_lease(lease("a", "2"));
        let vanished = s.end_full_state(Kind::Leases);
        assert_eq!(vanished.leases.len(), 1);
        assert_eq!(&*vanished.leases[0], "b");
        assert!(Rc::ptr_eq(lease_key(&s, "a"), &s.node("a").unwrap().name));
    }
}
