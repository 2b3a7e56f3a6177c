//! Values shared by many records (namespaces, node names, toleration lists), each stored once
//! and named by a 4-byte id, counted so that an id is freed (and reused) with its last user.

use std::borrow::Borrow;
use std::collections::HashMap;
use std::hash::Hash;

use crate::time::NameHashState;

#[derive(Debug)]
pub(crate) struct RefTable<T> {
    values: Vec<Option<(T, u32)>>,
    /// Hashed by `NameHashState`: every pod inserted looks its scope (namespace and whole
    /// toleration list) up here.
    ids: HashMap<T, u32, NameHashState>,
    free: Vec<u32>,
    /// The id the last `acquire` returned (`u32::MAX`: none). A LIST delivers a workload's pods
    /// together, all with the same namespace and toleration list (the pod table's scope), so
    /// the value is most often the last one again: one comparison (by content: `Rc<str>` and
    /// `Rc<[T]>` have no pointer shortcut) instead of a hash of the whole toleration list and
    /// the same comparison in the map.
    last: u32,
}

impl<T> Default for RefTable<T> {
    fn default() -> Self {
        RefTable {
            values: Vec::new(),
            ids: HashMap::default(),
            free: Vec::new(),
            last: u32::MAX,
        }
    }
}

impl<T: Hash + Eq + Clone> RefTable<T> {
    /// The id of `value`, one more user counted.
    pub(crate) fn acquire(&mut self, value: &T) -> u32 {
        // A freed id's slot is `None`, a reused one holds its new value: either way the
        // comparison decides.
        if let Some(Some((held, users))) = self.values.get_mut(self.last as usize)
            && held == value
        {
            *users += 1;
            return self.last;
        }
        if let Some(&id) = self.ids.get(value) {
            if let Some((_, users)) = &mut self.values[id as usize] {
                *users += 1;
            }
            self.last = id;
            return id;
        }
        let id = match self.free.pop() {
            Some(id) => {
                self.values[id as usize] = Some((value.clone(), 1));
                id
            }
            None => {
                self.values.push(Some((value.clone(), 1)));
                (self.values.len() - 1) as u32
            }
        };
        self.ids.insert(value.clone(), id);
        self.last = id;
        id
    }

    /// One user fewer; the value is dropped with its last.
    pub(crate) fn release(&mut self, id: u32) {
        let Some(slot) = self.values.get_mut(id as usize) else {
            return;
        };
        let Some((value, users)) = slot else {
            return;
        };
        *users -= 1;
        if *users == 0 {
            self.ids.remove(&*value);
            *slot = None;
            self.free.push(id);
        }
    }

    pub(crate) fn get(&self, id: u32) -> Option<&T> {
        self.values
            .get(id as usize)
            .and_then(|v| v.as_ref())
            .map(|(v, _)| v)
    }

    pub(crate) fn id_of<Q>(&self, value: &Q) -> Option<u32>
    where
        T: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.ids.get(value).copied()
    }

    /// Ids handed out so far (freed ones included): the bound for tables indexed by id.
    pub(crate) fn id_bound(&self) -> usize {
        self.values.len()
    }

    pub(crate) fn shrink_to_fit(&mut self) {
        self.ids.shrink_to_fit();
        self.free.shrink_to_fit();
    }

    /// Heap bytes of the table itself (not of what its values point to).
    pub(crate) fn table_bytes(&self) -> usize {
        self.values.capacity() * std::mem::size_of::<Option<(T, u32)>>()
            + self.ids.capacity() * (std::mem::size_of::<(T, u32)>() + 1)
            + self.free.capacity() * 4
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::rc::Rc;

    #[test]
    fn the_last_value_again_is_counted_even_after_its_id_was_freed_and_reused() {
        let mut t: RefTable<Rc<str>> = RefTable::default();
        let a = t.acquire(&Rc::from("a"));
        assert_eq!(
            t.acquire(&Rc::from("a")),
            a,
            "the last value, by comparison"
        );
        t.release(a);
        t.release(a);
        assert_eq!(t.get(a), None);
        // The last id is free: "a" is new again, and takes the freed id.
        let a2 = t.acquire(&Rc::from("a"));
        assert_eq!(t.id_of("a"), Some(a2));
        t.release(a2);
        // The last id reused by another value: "a" is not taken for it.
        let b = t.acquire(&Rc::from("b"));
        assert_eq!(b, a2);
        let a3 = t.acquire(&Rc::from("a"));
        assert_ne!(a3, b);
        assert_eq!(t.get(b).map(|v| &**v), Some("b"));
        assert_eq!(t.get(a3).map(|v| &**v), Some("a"));
        // Counted: two releases of "a" after two acquires free it, "b" stays.
        t.acquire(&Rc::from("a"));
        t.release(a3);
        assert_eq!(t.id_of("a"), Some(a3));
        t.release(a3);
        assert_eq!(t.id_of("a"), None);
        assert_eq!(t.id_of("b"), Some(b));
    }

    #[test]
    fn ids_are_shared_counted_and_reused() {
        let mut t: RefTable<Rc<str>> = RefTable::default();
        let a = t.acquire(&Rc::from("a"));
        assert_eq!(t.acquire(&Rc::from("a")), a);
        let b = t.acquire(&Rc::from("b"));
        assert_ne!(a, b);
        t.release(a);
        assert_eq!(t.id_of("a"), Some(a), "one user left");
        t.release(a);
        assert_eq!(t.id_of("a"), None);
        assert_eq!(t.get(a), None);
        let c = t.acquire(&Rc::from("c"));
        assert_eq!(c, a, "the freed id is reused");
        assert_eq!(t.id_of("b"), Some(b));
    }
}
