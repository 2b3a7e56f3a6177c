//! A pod of the table read in place through its slot: no copy of the pod is made to look at it.

use super::*;

/// A pod in the table, read through its slot.
#[derive(Copy, Clone)]
pub struct PodView<'a> {
    pub(super) table: &'a PodTable,
    pub(super) slot: u32,
}

impl<'a> PodView<'a> {
    pub(super) fn record(&self) -> &'a Record {
        self.table.records.get(self.slot)
    }

    pub fn namespace(&self) -> &'a Name {
        &self
            .table
            .scopes
            .get(self.record().scope)
            .expect("a live pod's namespace is held")
            .0
    }

    pub fn name(&self) -> &'a str {
        // The arena holds what `upsert` was given, a `str`: this never falls back.
        std::str::from_utf8(self.table.names.get(self.record().name)).unwrap_or("")
    }

    /// The key as the API names it (allocates the name: for actions and events).
    pub fn key(&self) -> PodKey {
        PodKey {
            namespace: self.namespace().clone(),
            name: Rc::from(self.name()),
        }
    }

    /// The uid (rendered: for preconditions and events).
    pub fn uid(&self) -> Name {
        let r = self.record();
        if r.has(TEXT_UID) {
            if let Some(uid) = self.table.text.get(&self.slot).and_then(|t| t.uid.clone()) {
                return uid;
            }
        }
        Rc::from(render_uuid(&r.uid))
    }

    /// The resourceVersion (rendered).
    pub(crate) fn resource_version(&self) -> Name {
        let r = self.record();
        if r.has(TEXT_RV) {
            if let Some(rv) = self
                .table
                .text
                .get(&self.slot)
                .and_then(|t| t.resource_version.clone())
            {
                return rv;
            }
        }
        Rc::from(r.resource_version().to_string())
    }

    pub fn node_name(&self) -> Option<&'a Name> {
        self.table.nodes.get(self.record().node)
    }

    pub fn ready(&self) -> Option<ConditionStatus> {
        self.record().ready()
    }

    pub fn tolerations(&self) -> &'a Rc<[Toleration]> {
        &self
            .table
            .scopes
            .get(self.record().scope)
            .expect("a live pod's tolerations are held")
            .1
    }

    pub fn deleting(&self) -> bool {
        self.record().has(DELETING)
    }

    pub fn daemonset_owned(&self) -> bool {
        self.record().has(DAEMONSET)
    }

    pub fn disruption_target(&self) -> bool {
        self.record().has(DISRUPTION)
    }

    /// `metadata.creationTimestamp`, in whole seconds; `None` when the pod had none.
    pub fn creation_timestamp(&self) -> Option<Time> {
        match self.record().created {
            0 => None,
            secs => Some(Time::from_unix_millis(u64::from(secs) * 1000)),
        }
    }

    /// The pod as a model value (for replays, tests, and shadow mode giving the controllers
    /// back a pod as it was before the incumbent's write).
    pub fn to_pod(&self) -> Pod {
        Pod {
            key: self.key(),
            uid: self.uid(),
            resource_version: self.resource_version(),
            node_name: self.node_name().cloned(),
            ready: self.ready(),
            tolerations: self.tolerations().clone(),
            deleting: self.deleting(),
            daemonset_owned: self.daemonset_owned(),
            disruption_target: self.disruption_target(),
            creation_timestamp: self.creation_timestamp(),
        }
    }
}
