//! String interning: one allocation per distinct name, shared by every object that uses it.

use std::collections::HashSet;
use std::rc::Rc;

use crate::time::NameHashState;

#[derive(Default, Debug)]
pub struct Interner {
    /// Hashed by `NameHashState`: every decoded pod interns its namespace and node name.
    set: HashSet<Rc<str>, NameHashState>,
}

impl Interner {
    pub fn new() -> Interner {
        Interner::default()
    }

    pub fn intern(&mut self, s: &str) -> Rc<str> {
        if let Some(existing) = self.set.get(s) {
            return existing.clone();
        }
        let rc: Rc<str> = Rc::from(s);
        self.set.insert(rc.clone());
        rc
    }

    /// Drops names nothing else refers to any more (call now and then, e.g. after a relist).
    pub fn prune(&mut self) -> usize {
        let before = self.set.len();
        self.set.retain(|s| Rc::strong_count(s) > 1);
        before - self.set.len()
    }

    /// The names interned (tests of the decoders' footprint).
    #[cfg(any(test, feature = "testing"))]
    pub fn len(&self) -> usize {
        self.set.len()
    }

    #[cfg(any(test, feature = "testing"))]
    pub fn is_empty(&self) -> bool {
        self.set.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_name_same_allocation_and_prune_frees_unused() {
        let mut i = Interner::new();
        let a = i.intern("node-1");
        let b = i.intern("node-1");
        assert!(Rc::ptr_eq(&a, &b));
        i.intern("gone");
        assert_eq!(i.prune(), 1);
        assert_eq!(i.len(), 1);
    }
}
