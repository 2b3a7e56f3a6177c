//! The cluster as the daemon knows it: nodes, their Leases, bound pods and pods by node — one
//! copy of each, shared by both controllers (kube-runtime's `Store` is the model).
//!
//! The informers write into it (through the controllers' inputs), so do the answers of our own
//! API writes and the writes known to have landed, all through one writer: the controllers'
//! `World` owns the store and its `apply` is the only `&mut` path to it
//! (`controller/world.rs`), and the machines read it. Two rules keep it honest:
//! - an object older than the one held is ignored (a delayed watch event must not undo what
//!   our write's answer already put here, or the next write would conflict);
//! - a full state (the LIST after a start or a `410 Gone`, or a watch-list's initial events)
//!   marks what it delivers, and what it did not deliver is removed at its end. So the
//!   reflectors need no map of their own.

use std::collections::HashSet;
use std::rc::Rc;

use super::compact::is_older;
use super::node_key::{NodeKey, NodeKeys};
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
    pub nodes: Vec<Node>,
    pub(crate) leases: Vec<Name>,
    pub pods: Vec<(PodKey, Option<Name>)>,
}

/// A node as the store keeps it.
#[derive(Debug)]
struct HeldNode {
    node: Node,
    /// Its key while it is here (`node_key.rs`).
    key: NodeKey,
}

/// A Lease as the store keeps it.
#[derive(Debug)]
struct HeldLease {
    lease: Lease,
    /// The key of its node while the node is here (`None` before it comes and after it left):
    /// a renewal reaches what the machines keep per node from this one lookup.
    node: Option<NodeKey>,
}

/// What [`ClusterStore::upsert_lease`] did, and where it keeps the Lease.
#[derive(Debug)]
pub struct LeaseStored {
    /// The name the Lease is kept under: its node's allocation once the node is known.
    pub name: Name,
    /// Its node's key, if the node is here.
    pub node: Option<NodeKey>,
    pub upserted: Upserted<Lease>,
}

#[derive(Debug, Default)]
pub struct ClusterStore {
    nodes: NameMap<HeldNode>,
    /// The nodes' keys, issued as they come and retired as they go.
    keys: NodeKeys,
    /// How many of `nodes` are not Ready (`Node::is_not_ready`), kept as they change: the
    /// daemon's status line shows it every 5 s, and counting it there would walk every node, a
    /// cache miss or two each.
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

    pub fn node(&self, name: &str) -> Option<&Node> {
        self.nodes.get(name).map(|h| &h.node)
    }

    /// The key of node `name` while it is here (`node_key.rs`).
    pub fn node_key(&self, name: &str) -> Option<NodeKey> {
        self.nodes.get(name).map(|h| h.key)
    }

    /// Every node, in name order.
    pub fn nodes(&self) -> impl Iterator<Item = &Node> {
        self.nodes.values().map(|h| &h.node)
    }

    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    /// How many nodes are not Ready: their Ready condition is False, Unknown or missing.
    pub fn nodes_not_ready(&self) -> usize {
        self.nodes_not_ready
    }

    pub fn lease(&self, name: &str) -> Option<&Lease> {
        self.leases.get(name).map(|h| &h.lease)
    }

    /// Prefetching a batch of renewals (`model/prefetch.rs`), stage by stage: the index
    /// buckets of their Leases…
    pub fn prefetch_lease_index(&self, name: &str) {
        self.leases.prefetch_index(self.leases.hash(name));
    }

    /// …then the Leases those buckets name…
    pub fn prefetch_lease(&self, name: &str) {
        self.leases.prefetch_entry(self.leases.hash(name));
    }

    /// …then, each Lease read, the name it is kept under (the renewal compares its bytes and
    /// clones it); returns its node's key, for the machines to ask for their entries. The
    /// Lease is the one the lookup compares first, unchecked: a guess, for prefetching.
    pub fn prefetch_lease_name(&self, name: &str) -> Option<NodeKey> {
        let (key, held) = self.leases.likely(self.leases.hash(name))?;
        super::prefetch::prefetch_name(key);
        held.node
    }

    /// The node key kept beside the Lease a lookup of `name` compares first, unchecked: the
    /// guess [`ClusterStore::prefetch_lease_name`] read, read again (its line is here now).
    pub fn likely_lease_node(&self, name: &str) -> Option<NodeKey> {
        self.leases.likely(self.leases.hash(name))?.1.node
    }

    pub fn lease_count(&self) -> usize {
        self.leases.len()
    }

    pub fn pods(&self) -> &PodTable {
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
                let was_not_ready = held.node.is_not_ready();
                let upserted = replace(&mut held.node, node, |n| &n.resource_version);
                if let Upserted::Changed { .. } = upserted {
                    self.recount_not_ready(was_not_ready, not_ready);
                }
                upserted
            }
            None => {
                let key = self.keys.issue();
                self.rekey_lease(&node.name, key);
                self.nodes.insert(node.name.clone(), HeldNode { node, key });
                self.recount_not_ready(false, not_ready);
                Upserted::Changed { before: None }
            }
        }
    }

    pub fn remove_node(&mut self, name: &str) -> Option<Node> {
        let HeldNode { node, key } = self.nodes.remove(name)?;
        self.keys.retire(key);
        if let Some(held) = self.leases.get_mut(name) {
            held.node = None;
        }
        self.recount_not_ready(node.is_not_ready(), false);
        Some(node)
    }

    /// A write we know succeeded, before the watch or the write's answer says so (the
    /// resourceVersion is left as it was: the object's next version will replace it): `edit`
    /// changes the stored node `name`; returns what it returned, `None` if there is no such node.
    pub fn edit_node<R>(&mut self, name: &str, edit: impl FnOnce(&mut Node) -> R) -> Option<R> {
        let node = &mut self.nodes.get_mut(name)?.node;
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
    /// the node lifecycle compares by address, and the node's key kept beside the Lease: a
    /// renewal reaches the machines' entries for its node from this one lookup.
    pub fn upsert_lease(&mut self, lease: Lease) -> LeaseStored {
        let (name, node, upserted) = match self.leases.get_key_value_mut(&lease.name) {
            Some((name, held)) => {
                let name = name.clone();
                let upserted = replace(&mut held.lease, lease, |l| &l.resource_version);
                (name, held.node, upserted)
            }
            None => {
                // Under the node's name when the node is known; else under a name of its own
                // until the node comes (`rekey_lease`).
                let (name, node) = match self.nodes.get_key_value(&lease.name) {
                    Some((name, held)) => (name.clone(), Some(held.key)),
                    None => (Name::from(&*lease.name), None),
                };
                let held = HeldLease { lease, node };
                self.leases.insert(name.clone(), held);
                (name, node, Upserted::Changed { before: None })
            }
        };
        if let Some(seen) = &mut self.leases_seen {
            seen.insert(name.clone());
        }
        LeaseStored {
            name,
            node,
            upserted,
        }
    }

    /// A node new to the store, under `key`: its Lease, if it came first, keeps the key, and is
    /// kept under the node's name from now on (one allocation for both; the renewals' lookups
    /// compare it by address).
    fn rekey_lease(&mut self, node_name: &Name, key: NodeKey) {
        let Some((held_name, held)) = self.leases.get_key_value_mut(node_name) else {
            return;
        };
        held.node = Some(key);
        if Rc::ptr_eq(held_name, node_name) {
            return;
        }
        let Some(held) = self.leases.remove(node_name) else {
            return;
        };
        self.leases.insert(node_name.clone(), held);
    }

    pub fn remove_lease(&mut self, name: &str) -> Option<Lease> {
        self.leases.remove(name).map(|h| h.lease)
    }

    pub fn upsert_pod(&mut self, pod: Pod) -> PodUpsert {
        self.pods.upsert(pod)
    }

    /// Removes a pod; `Some(node it was bound to)` if it was held.
    pub fn remove_pod(&mut self, key: &PodKey) -> Option<Option<Name>> {
        self.pods.remove(key)
    }

    pub fn pods_mut(&mut self) -> &mut PodTable {
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
            nodes: self
                .nodes
                .values()
                .map(|h| node_bytes(&h.node))
                .sum::<usize>()
                + self.nodes.heap_bytes()
                + self.keys.heap_bytes(),
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
    pub fn total(&self) -> usize {
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
mod tests;
