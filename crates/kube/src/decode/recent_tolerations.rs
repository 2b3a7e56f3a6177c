//! The toleration lists the last pods carried, matched against a pod's wire list before it is
//! converted: most pods of a cluster carry one of a handful of lists (the admission's default
//! not-ready/unreachable pair, a DaemonSet's tolerate-everything), and a LIST or a watch-list
//! delivers them grouped by namespace and name. A hit costs string compares of the wire text;
//! a miss costs what converting and sharing cost anyway (interning every field, hashing the
//! whole list into the shared set: about a quarter of a pod's decode in the sync's profile,
//! `examples/pod_sync_decode.rs`).

use std::rc::Rc;

use super::wire;
use crate::model::{Toleration, TolerationOperator};

/// How many distinct lists are remembered: enough for pods of a few kinds interleaved in name
/// order, small enough that a miss costs a few length compares.
const REMEMBERED: usize = 4;

#[derive(Debug, Default)]
pub(super) struct RecentTolerations {
    /// Most recently used first.
    lists: Vec<Rc<[Toleration]>>,
}

impl RecentTolerations {
    /// The remembered list equal to what converting `wire` would give, if any.
    pub(super) fn find(&mut self, wire: &[wire::Toleration<'_>]) -> Option<Rc<[Toleration]>> {
        let i = self.lists.iter().position(|list| same(list, wire))?;
        let list = self.lists[i].clone();
        if i > 0 {
            // Keep the order of use, so the lists in use stay and a one-off goes first.
            self.lists[..=i].rotate_right(1);
        }
        Some(list)
    }

    /// `list` was just converted and shared: remember it, forgetting the least recently used.
    pub(super) fn remember(&mut self, list: Rc<[Toleration]>) {
        if self.lists.len() == REMEMBERED {
            self.lists.pop();
        }
        self.lists.insert(0, list);
    }

    /// Forgets every list (so that pruning the shared set sees only the pods' references).
    pub(super) fn clear(&mut self) {
        self.lists.clear();
    }
}

/// Whether `wire` converts to `list`, field for field, by the rules of `Pod::from_wire`.
/// Compared as bytes: the list's text is UTF-8, so wire bytes equal to it are too (protobuf's
/// are not checked before this: `wire::LazyStr`).
fn same(list: &[Toleration], wire: &[wire::Toleration<'_>]) -> bool {
    list.len() == wire.len()
        && list.iter().zip(wire).all(|(t, w)| {
            *t.key.as_bytes() == *wire::lazy_bytes(&w.key)
                && *t.value.as_bytes() == *wire::lazy_bytes(&w.value)
                && t.toleration_seconds == w.toleration_seconds
                && match (&t.operator, wire::lazy_bytes(&w.operator)) {
                    (TolerationOperator::Equal, op) => op.is_empty() || op == b"Equal",
                    (TolerationOperator::Exists, op) => op == b"Exists",
                    (TolerationOperator::Other(name), op) => *name.as_bytes() == *op,
                }
                && match (&t.effect, wire::lazy_bytes(&w.effect)) {
                    (None, effect) => effect.is_empty(),
                    (Some(e), effect) => !effect.is_empty() && e.as_str().as_bytes() == effect,
                }
        })
}

#[cfg(test)]
mod tests;
