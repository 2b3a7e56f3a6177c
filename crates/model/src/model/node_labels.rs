//! A node's kept labels, shared between nodes with the same set.
//!
//! A kubelet's labels that the controllers read (zone and region in both forms, os, arch) repeat
//! across every node of a zone: the decoder keeps one copy per distinct set
//! (`kube/decode/mod.rs`, `DecodeContext::share_labels`), as it does for pods' tolerations, so a
//! node holds a pointer instead of a vector of eight pairs. The rare writes (our own label patch
//! landing, tests) copy the set first.

use std::ops::Deref;
use std::rc::Rc;

use super::Name;

#[derive(Clone, PartialEq, Eq, Hash)]
pub struct NodeLabels(Rc<[(Name, Name)]>);

impl NodeLabels {
    /// The shared allocation (for sharing and accounting).
    pub fn shared(&self) -> &Rc<[(Name, Name)]> {
        &self.0
    }

    /// Appends a label (the set is copied: it may be shared with other nodes).
    pub fn push(&mut self, label: (Name, Name)) {
        let mut list = self.0.to_vec();
        list.push(label);
        self.0 = list.into();
    }

    /// Sets `key` to `value`, appending it when absent (a merge patch of `metadata.labels`).
    pub fn set(&mut self, key: Name, value: Name) {
        let mut list = self.0.to_vec();
        match list.iter_mut().find(|(k, _)| *k == key) {
            Some(slot) => slot.1 = value,
            None => list.push((key, value)),
        }
        self.0 = list.into();
    }
}

impl Default for NodeLabels {
    fn default() -> NodeLabels {
        NodeLabels(Rc::from(Vec::new()))
    }
}

impl Deref for NodeLabels {
    type Target = [(Name, Name)];

    fn deref(&self) -> &[(Name, Name)] {
        &self.0
    }
}

impl<'a> IntoIterator for &'a NodeLabels {
    type Item = &'a (Name, Name);
    type IntoIter = std::slice::Iter<'a, (Name, Name)>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}

impl From<Rc<[(Name, Name)]>> for NodeLabels {
    fn from(list: Rc<[(Name, Name)]>) -> NodeLabels {
        NodeLabels(list)
    }
}

impl From<Vec<(Name, Name)>> for NodeLabels {
    fn from(list: Vec<(Name, Name)>) -> NodeLabels {
        NodeLabels(list.into())
    }
}

impl FromIterator<(Name, Name)> for NodeLabels {
    fn from_iter<I: IntoIterator<Item = (Name, Name)>>(iter: I) -> NodeLabels {
        NodeLabels(iter.into_iter().collect())
    }
}

/// As the list it holds (what `{:?}` of a node's labels printed before they were shared).
impl std::fmt::Debug for NodeLabels {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_copy_the_set_and_leave_other_nodes_alone() {
        let shared: NodeLabels = vec![(Rc::from("k"), Rc::from("v"))].into();
        let mut a = shared.clone();
        a.set(Rc::from("k"), Rc::from("w"));
        a.push((Rc::from("x"), Rc::from("y")));
        assert_eq!(&*shared.0, &[(Rc::from("k"), Rc::from("v"))][..]);
        assert_eq!(a.len(), 2);
        assert_eq!(&*a[0].1, "w");
        a.set(Rc::from("z"), Rc::from("1"));
        assert_eq!(a.len(), 3);
    }
}
