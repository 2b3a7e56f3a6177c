//! The decoder's tables of shared values (a node's kept label set, a condition's reason and
//! message), found by a hash of their text: a node status heartbeat carries the same labels
//! and condition texts as the node's last version, so the value already shared is found from
//! the wire's borrowed strings, without interning them or building the value to look it up
//! (interning every label and text and hashing the built value would cost far more per event:
//! `examples/node_event_floor.rs` counts it).
//!
//! Values are told apart by their text, never by the hash alone: a bucket holds every value of
//! one hash, and a lookup compares the text of each.

use std::collections::HashMap;
use std::fmt;
use std::hash::{BuildHasher, Hasher};
use std::rc::Rc;

use crate::time::NameHashState;

/// Shared `Rc<T>`s by the hash of their text (`SharedByText::hash`).
pub(super) struct SharedByText<T: ?Sized> {
    hasher: NameHashState,
    buckets: HashMap<u64, Vec<Rc<T>>, NameHashState>,
}

impl<T: ?Sized> Default for SharedByText<T> {
    fn default() -> Self {
        SharedByText {
            hasher: NameHashState::default(),
            buckets: HashMap::default(),
        }
    }
}

impl<T: ?Sized> fmt::Debug for SharedByText<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SharedByText")
            .field("values", &self.len())
            .finish()
    }
}

impl<T: ?Sized> SharedByText<T> {
    /// The hash of a value's texts, in order. Each text's length is mixed in by the hasher,
    /// so `("ab", "c")` and `("a", "bc")` hash apart.
    pub(super) fn hash<'a>(&self, texts: impl IntoIterator<Item = &'a [u8]>) -> u64 {
        let mut h = self.hasher.build_hasher();
        for text in texts {
            h.write(text);
        }
        h.finish()
    }

    /// The shared value of this hash whose text `same` says is the one looked for.
    pub(super) fn find(&self, hash: u64, mut same: impl FnMut(&T) -> bool) -> Option<&Rc<T>> {
        self.buckets.get(&hash)?.iter().find(|v| same(v))
    }

    /// Shares `value`, whose text hashes to `hash` (the caller found no equal one).
    pub(super) fn insert(&mut self, hash: u64, value: Rc<T>) {
        self.buckets.entry(hash).or_default().push(value);
    }

    /// Drops the values nothing else holds; how many.
    pub(super) fn prune(&mut self) -> usize {
        let before = self.len();
        self.buckets.retain(|_, values| {
            values.retain(|v| Rc::strong_count(v) > 1);
            !values.is_empty()
        });
        before - self.len()
    }

    pub(super) fn len(&self) -> usize {
        self.buckets.values().map(Vec::len).sum()
    }
}
