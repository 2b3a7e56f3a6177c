//! The object store: every object of every resource, one global resourceVersion counter (as etcd
//! has), a bounded per-resource history of changes for resuming watches, and `Cluster`, the
//! in-process handle tests and simulated kubelets use to read and write objects directly.
//!
//! Here: the store's state and its writes (create, modify, delete, commit). Beside it:
//! `history` (LIST pages, continue tokens, where watches start), `update` (what the server does
//! to an update), `locked` (the operations behind the lock) and `handle` (`Cluster`).

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::ops::Bound;
use std::sync::Arc;
use std::time::Instant;

use base64::Engine;
use serde_json::{Map, Value, json};

use super::faults::FaultState;
use super::object::{ObjectKey, StoredObject};
use super::patch::{self, PatchError, PatchType};
use super::resource::{Resource, Verb};
use super::selector::Filter;
use super::shared::Shared;
use super::status::ApiError;
use super::write_log::{Identity, WriteRecord};
use node_lifecycled::time::Time;

mod handle;
mod history;
mod locked;
mod update;

pub(crate) use handle::kubelet_reason;
pub use handle::{Cluster, NODE_LEASE_NAMESPACE};
use update::{pod_grace_period, prepare_update};

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum ChangeType {
    Added,
    Modified,
    Deleted,
}

/// One entry of a resource's watch history.
#[derive(Debug)]
pub struct Change {
    pub resource_version: u64,
    pub change: ChangeType,
    pub object: Arc<StoredObject>,
    /// The version before the change (MODIFIED, DELETED): lets a filtered watch see an object
    /// leave or enter its selection.
    pub previous: Option<Arc<StoredObject>>,
}

#[derive(Debug, Default)]
pub(crate) struct ResourceStore {
    objects: BTreeMap<ObjectKey, Arc<StoredObject>>,
    /// The keys of the objects with a deletionTimestamp, kept as they change: the kubelets look
    /// for them every second, and a walk of two million pods under the lock slowed every call.
    terminating: BTreeSet<ObjectKey>,
    history: VecDeque<Arc<Change>>,
    /// The newest resourceVersion whose change has been evicted from `history`: watches and
    /// continue tokens from before it get 410 Expired.
    compacted_through: u64,
}

pub(crate) struct State {
    pub resource_version: u64,
    stores: [ResourceStore; 4],
    pub faults: FaultState,
    pub shutdown: bool,
    rng: u64,
}

/// How an update treats `status` (the subresource rules of the real registry).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) enum Scope {
    /// PUT/PATCH of the object: `status` is kept as stored for nodes and pods.
    Main,
    /// PUT/PATCH of `/status`: only `status` changes.
    Status,
    /// In-process writes: everything the caller changed is kept.
    Direct,
}

impl Scope {
    pub fn of(subresource: Option<&str>) -> Scope {
        match subresource {
            Some(_) => Scope::Status,
            None => Scope::Main,
        }
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DeleteOptions {
    pub uid: Option<String>,
    pub resource_version: Option<String>,
    pub grace_period_seconds: Option<i64>,
}

#[derive(Debug)]
pub(crate) struct Deleted {
    pub object: Arc<StoredObject>,
    /// False when a pod only got its deletionTimestamp (graceful deletion).
    pub removed: bool,
}

#[derive(Debug)]
pub(crate) struct ListPage {
    pub resource_version: u64,
    pub items: Vec<Arc<StoredObject>>,
    pub continue_token: Option<String>,
    pub remaining: Option<u64>,
}

/// Where a watch starts.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) enum WatchFrom {
    /// Resource version unset or "0": now, optionally after ADDED events for what exists.
    Now { initial_events: bool },
    /// After this resource version.
    After(u64),
}

pub(crate) enum WatchStart {
    Expired {
        requested: u64,
        oldest: u64,
    },
    Started {
        initial: Vec<Arc<StoredObject>>,
        cursor: u64,
    },
}

/// Why `wait_changes` returned.
#[derive(Debug, Default)]
pub(crate) struct Wakeup {
    pub changes: Vec<Arc<Change>>,
    /// The cursor fell out of the history (a stalled or slow watch): (cursor, compacted through).
    pub expired: Option<(u64, u64)>,
    pub dropped: bool,
    pub corrupt: bool,
    pub shutdown: bool,
    pub stalled: bool,
    /// A resourceVersion the watch may report in a bookmark: every change of its resource up to
    /// it has been handed out.
    pub bookmark_version: Option<u64>,
}

/// The fault generations a watch has already acted on.
#[derive(Copy, Clone, Debug, Default)]
pub(crate) struct SeenFaults {
    pub drop: u64,
    pub corrupt: u64,
}

impl State {
    pub fn new() -> State {
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0x5EED);
        State {
            resource_version: 0,
            stores: Default::default(),
            faults: FaultState::default(),
            shutdown: false,
            rng: seed | 1,
        }
    }

    fn store(&self, resource: Resource) -> &ResourceStore {
        &self.stores[resource.index()]
    }

    pub fn seen_faults(&self) -> SeenFaults {
        SeenFaults {
            drop: self.faults.watch_drop_generation,
            corrupt: self.faults.watch_corrupt_generation,
        }
    }

    fn next_random(&mut self) -> u64 {
        // splitmix64: uids and generated names only need to be unique, not unpredictable.
        self.rng = self.rng.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.rng;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn new_uid(&mut self) -> String {
        let a = self.next_random();
        let b = self.next_random();
        format!(
            "{:08x}-{:04x}-4{:03x}-8{:03x}-{:012x}",
            a >> 32,
            (a >> 16) & 0xffff,
            a & 0xfff,
            b >> 52,
            b & 0xffff_ffff_ffff
        )
    }

    fn name_suffix(&mut self) -> String {
        // The alphabet of apimachinery's rand.String: no vowels, no confusable digits.
        const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
        let mut r = self.next_random();
        (0..5)
            .map(|_| {
                let c = ALPHABET[(r % ALPHABET.len() as u64) as usize] as char;
                r /= ALPHABET.len() as u64;
                c
            })
            .collect()
    }

    fn get(&self, resource: Resource, key: &ObjectKey) -> Result<Arc<StoredObject>, ApiError> {
        self.store(resource)
            .objects
            .get(key)
            .cloned()
            .ok_or_else(|| ApiError::not_found(resource, &key.name))
    }

    /// Stores `value` as the next resourceVersion and appends the change to the history.
    fn commit(
        &mut self,
        history_size: usize,
        resource: Resource,
        value: Value,
        change: ChangeType,
        previous: Option<Arc<StoredObject>>,
    ) -> Result<Arc<StoredObject>, ApiError> {
        let rv = self.resource_version + 1;
        let object = Arc::new(StoredObject::seal(resource, value, rv)?);
        self.resource_version = rv;
        let store = &mut self.stores[resource.index()];
        match change {
            ChangeType::Deleted => store.objects.remove(&object.key),
            _ => store.objects.insert(object.key.clone(), object.clone()),
        };
        if object.terminating && change != ChangeType::Deleted {
            store.terminating.insert(object.key.clone());
        } else {
            store.terminating.remove(&object.key);
        }
        store.history.push_back(Arc::new(Change {
            resource_version: rv,
            change,
            object: object.clone(),
            previous,
        }));
        while store.history.len() > history_size {
            if let Some(evicted) = store.history.pop_front() {
                store.compacted_through = evicted.resource_version;
            }
        }
        Ok(object)
    }

    fn create(
        &mut self,
        history_size: usize,
        now: Time,
        resource: Resource,
        namespace: Option<&str>,
        mut value: Value,
    ) -> Result<Arc<StoredObject>, ApiError> {
        let Some(meta) = value
            .as_object_mut()
            .map(|o| o.entry("metadata").or_insert_with(|| json!({})))
            .and_then(Value::as_object_mut)
        else {
            return Err(ApiError::bad_request(format!(
                "a {} must be a JSON object with an object metadata",
                resource.kind()
            )));
        };
        if resource.namespaced() {
            let body_ns = meta.get("namespace").and_then(Value::as_str).unwrap_or("");
            let ns = match (namespace, body_ns) {
                (Some(url), body) if !body.is_empty() && body != url => {
                    return Err(ApiError::bad_request(
                        "the namespace of the provided object does not match the namespace sent on the request",
                    ));
                }
                (Some(url), _) => url.to_string(),
                (None, body) => body.to_string(),
            };
            meta.insert("namespace".into(), Value::from(ns));
        } else {
            meta.remove("namespace");
        }
        let has_name = meta
            .get("name")
            .and_then(Value::as_str)
            .is_some_and(|n| !n.is_empty());
        if !has_name {
            if let Some(prefix) = meta.get("generateName").and_then(Value::as_str) {
                let name = format!("{prefix}{}", self.name_suffix());
                meta.insert("name".into(), Value::from(name));
            }
        }
        let uid = self.new_uid();
        meta.insert("uid".into(), Value::from(uid));
        meta.insert("creationTimestamp".into(), Value::from(now.to_rfc3339()));
        meta.remove("deletionTimestamp");
        meta.remove("deletionGracePeriodSeconds");
        let key = ObjectKey::new(
            meta.get("namespace").and_then(Value::as_str),
            meta.get("name").and_then(Value::as_str).unwrap_or(""),
        );
        if !key.name.is_empty() && self.store(resource).objects.contains_key(&key) {
            return Err(ApiError::already_exists(resource, &key.name));
        }
        self.commit(history_size, resource, value, ChangeType::Added, None)
    }

    /// Read-modify-write of one object: `change` maps the current object to the new one; the
    /// result's `metadata.resourceVersion` and `metadata.uid` are preconditions, subresource rules
    /// apply, and a write that changes nothing neither bumps the version nor notifies watches
    /// (as the real server). Returns (new, old).
    fn modify(
        &mut self,
        history_size: usize,
        resource: Resource,
        key: &ObjectKey,
        scope: Scope,
        change: impl FnOnce(Value) -> Result<Value, ApiError>,
    ) -> Result<(Arc<StoredObject>, Arc<StoredObject>), ApiError> {
        let current = self.get(resource, key)?;
        let current_value = current.value()?;
        let new = change(current_value.clone())?;
        match prepare_update(resource, &current, &current_value, new, scope)? {
            None => Ok((current.clone(), current)),
            Some(value) => {
                let object = self.commit(
                    history_size,
                    resource,
                    value,
                    ChangeType::Modified,
                    Some(current.clone()),
                )?;
                Ok((object, current))
            }
        }
    }

    fn delete(
        &mut self,
        history_size: usize,
        now: Time,
        finalize_pods: bool,
        resource: Resource,
        key: &ObjectKey,
        options: &DeleteOptions,
    ) -> Result<Deleted, ApiError> {
        let current = self.get(resource, key)?;
        if let Some(uid) = options.uid.as_deref().filter(|u| !u.is_empty()) {
            if uid != current.uid {
                return Err(ApiError::uid_precondition(
                    resource,
                    &key.name,
                    uid,
                    &current.uid,
                ));
            }
        }
        if let Some(rv) = options
            .resource_version
            .as_deref()
            .filter(|r| !r.is_empty())
        {
            if rv != current.resource_version.to_string() {
                return Err(ApiError::resource_version_precondition(
                    resource,
                    &key.name,
                    rv,
                    current.resource_version,
                ));
            }
        }
        let mut value = current.value()?;
        if resource == Resource::Pods && !finalize_pods {
            let grace = pod_grace_period(&value, options.grace_period_seconds);
            if grace > 0 {
                let already = value
                    .pointer("/metadata/deletionGracePeriodSeconds")
                    .and_then(Value::as_i64);
                if already.is_some_and(|g| g <= grace) {
                    return Ok(Deleted {
                        object: current,
                        removed: false,
                    });
                }
                let meta = &mut value["metadata"];
                meta["deletionTimestamp"] =
                    Value::from((now + std::time::Duration::from_secs(grace as u64)).to_rfc3339());
                meta["deletionGracePeriodSeconds"] = Value::from(grace);
                let object = self.commit(
                    history_size,
                    resource,
                    value,
                    ChangeType::Modified,
                    Some(current),
                )?;
                return Ok(Deleted {
                    object,
                    removed: false,
                });
            }
        }
        let object = self.commit(
            history_size,
            resource,
            value,
            ChangeType::Deleted,
            Some(current),
        )?;
        Ok(Deleted {
            object,
            removed: true,
        })
    }
}
