//! Values shared by many records (namespaces, node names, toleration lists), each stored once
//! and named by a 4-byte id, counted so that an id is freed (and reused) with its last user.

use std::borrow::Borrow;
use std::collections::HashMap;
use std::hash::Hash;

use super::name_hash::NameHashState;

#[derive(Debug)]
pub(crate) struct RefTable<T> {
    values: Vec<Option<(T, u32)>>,
    /// Hashed by `NameHashState`: every pod inserted looks its scope (namespace and whole
    /// toleration list) up here.
    ids: HashMap<T, u32, NameHashState>,
    free: Vec<u32>,
}

impl<T> Default for RefTable<T> {
    fn default() -> Self {
        RefTable {
            values: Vec::new(),
            ids: HashMap::default(),
            free: Vec::new(),
        }
    }
}

impl<T: Hash + Eq + Clone> RefTable<T> {
    /// The id of `value`, one more user counted.
    pub(crate) fn acquire(&mut self, value: &T) -> u32 {
        if let Some(&id) = self.ids.get(value) {
            if let Some((_, users)) = &mut self.values[id as usize] {
                *users += 1;
            }
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
