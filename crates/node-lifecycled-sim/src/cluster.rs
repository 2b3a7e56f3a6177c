//! The object store: every object of every resource, one global resourceVersion counter (as etcd
//! has), a bounded per-resource history of changes for resuming watches, and `Cluster`, the
//! in-process handle tests and simulated kubelets use to read and write objects directly.

use std::collections::{BTreeMap, VecDeque};
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

    fn list(
        &self,
        resource: Resource,
        filter: &Filter,
        limit: Option<usize>,
        continue_token: Option<&str>,
    ) -> Result<ListPage, ApiError> {
        let store = self.store(resource);
        let (start, list_rv) = match continue_token {
            Some(token) => {
                let (rv, key) = decode_continue(token)?;
                if rv < store.compacted_through {
                    return Err(ApiError::expired(
                        "The provided continue parameter is too old to display a consistent list result. \
                         You can start a new list without the continue parameter, or use the continue \
                         token in this response to retrieve the remainder of the results. Continuing \
                         with the provided token results in an inconsistent list - objects that were \
                         created, modified, or deleted between the time the first chunk was returned \
                         and now may show up in the list.",
                    ));
                }
                (Bound::Excluded(key), rv)
            }
            None => (Bound::Unbounded, self.resource_version),
        };
        let limit = limit.filter(|l| *l > 0).unwrap_or(usize::MAX);
        let mut items = Vec::new();
        let mut rest = store.objects.range((start, Bound::Unbounded));
        for (_, object) in rest.by_ref() {
            if filter.matches(object) {
                items.push(object.clone());
                if items.len() == limit {
                    break;
                }
            }
        }
        let mut continue_token = None;
        let mut remaining = None;
        if items.len() == limit {
            // Like etcd, "more" means more keys in the range, matching or not: a filtered list
            // may end with an empty page. Counting is only paid for when it is reported.
            let more = if filter.selects_all() {
                let left = rest.count() as u64;
                remaining = (left > 0).then_some(left);
                left > 0
            } else {
                rest.next().is_some()
            };
            if more {
                if let Some(last) = items.last() {
                    continue_token = Some(encode_continue(list_rv, &last.key));
                }
            }
        }
        Ok(ListPage {
            resource_version: list_rv,
            items,
            continue_token,
            remaining,
        })
    }

    pub fn watch_start(&self, resource: Resource, filter: &Filter, from: WatchFrom) -> WatchStart {
        let store = self.store(resource);
        match from {
            WatchFrom::After(rv) if rv < store.compacted_through => WatchStart::Expired {
                requested: rv,
                oldest: store.compacted_through,
            },
            WatchFrom::After(rv) => WatchStart::Started {
                initial: Vec::new(),
                cursor: rv,
            },
            WatchFrom::Now { initial_events } => WatchStart::Started {
                initial: if initial_events {
                    store
                        .objects
                        .values()
                        .filter(|o| filter.matches(o))
                        .cloned()
                        .collect()
                } else {
                    Vec::new()
                },
                cursor: self.resource_version,
            },
        }
    }

    /// Changes of `resource` after `cursor` if any, advancing it (nothing while stalled).
    fn take_changes(
        &self,
        resource: Resource,
        cursor: &mut u64,
        now: Instant,
        wakeup: &mut Wakeup,
    ) -> bool {
        if self.faults.stalled(now) {
            wakeup.stalled = true;
            return false;
        }
        let store = self.store(resource);
        if *cursor < store.compacted_through {
            wakeup.expired = Some((*cursor, store.compacted_through));
            return true;
        }
        let first = store
            .history
            .partition_point(|c| c.resource_version <= *cursor);
        wakeup.changes = store.history.range(first..).cloned().collect();
        if let Some(last) = wakeup.changes.last() {
            *cursor = last.resource_version;
        }
        wakeup.bookmark_version = Some(self.resource_version.max(*cursor));
        !wakeup.changes.is_empty()
    }
}

/// The metadata only the server sets, and the subresource rules, applied to a proposed update.
/// `None` when the result equals the stored object.
fn prepare_update(
    resource: Resource,
    current: &StoredObject,
    current_value: &Value,
    mut new: Value,
    scope: Scope,
) -> Result<Option<Value>, ApiError> {
    let name = current.key.name.as_str();
    let Some(obj) = new.as_object_mut() else {
        return Err(ApiError::bad_request(format!(
            "a {} must be a JSON object",
            resource.kind()
        )));
    };
    let meta = obj.entry("metadata").or_insert_with(|| json!({}));
    let Some(meta) = meta.as_object_mut() else {
        return Err(ApiError::bad_request("metadata must be a JSON object"));
    };
    if let Some(rv) = meta.get("resourceVersion").and_then(Value::as_str) {
        if !rv.is_empty() && rv != current.resource_version.to_string() {
            return Err(ApiError::conflict(resource, name));
        }
    }
    if let Some(uid) = meta.get("uid").and_then(Value::as_str) {
        if !uid.is_empty() && uid != current.uid {
            return Err(ApiError::uid_precondition(
                resource,
                name,
                uid,
                &current.uid,
            ));
        }
    }
    if let Some(body_name) = meta.get("name").and_then(Value::as_str) {
        if body_name != name {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({body_name}) does not match the name on the URL ({name})"
            )));
        }
    }
    if let Some(body_ns) = meta.get("namespace").and_then(Value::as_str) {
        if !body_ns.is_empty() && body_ns != current.key.namespace {
            return Err(ApiError::bad_request(
                "the namespace of the provided object does not match the namespace sent on the request",
            ));
        }
    }
    let current_meta = current_value.get("metadata").and_then(Value::as_object);
    for field in [
        "name",
        "namespace",
        "uid",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "resourceVersion",
    ] {
        match current_meta.and_then(|m| m.get(field)) {
            Some(v) => meta.insert(field.to_string(), v.clone()),
            None => meta.remove(field),
        };
    }
    let new = match scope {
        Scope::Status if resource.has_status() => {
            let mut merged = current_value.clone();
            set_or_remove(&mut merged, "status", new.get("status").cloned());
            merged
        }
        Scope::Main if resource.has_status() => {
            set_or_remove(&mut new, "status", current_value.get("status").cloned());
            new
        }
        _ => new,
    };
    Ok((new != *current_value).then_some(new))
}

fn set_or_remove(target: &mut Value, key: &str, value: Option<Value>) {
    if let Some(obj) = target.as_object_mut() {
        match value {
            Some(v) => obj.insert(key.to_string(), v),
            None => obj.remove(key),
        };
    }
}

/// The pod's own grace period unless the request gives one; 0 for pods that never ran anywhere or
/// already finished (the real server deletes those at once).
fn pod_grace_period(pod: &Value, requested: Option<i64>) -> i64 {
    let unscheduled = pod
        .pointer("/spec/nodeName")
        .and_then(Value::as_str)
        .is_none_or(str::is_empty);
    let finished = matches!(
        pod.pointer("/status/phase").and_then(Value::as_str),
        Some("Succeeded" | "Failed")
    );
    if unscheduled || finished {
        return 0;
    }
    requested
        .or_else(|| {
            pod.pointer("/spec/terminationGracePeriodSeconds")
                .and_then(Value::as_i64)
        })
        .unwrap_or(30)
        .max(0)
}

fn encode_continue(rv: u64, key: &ObjectKey) -> String {
    let token = json!({"v": "meta.k8s.io/v1", "rv": rv, "ns": key.namespace, "name": key.name});
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(token.to_string())
}

fn decode_continue(token: &str) -> Result<(u64, ObjectKey), ApiError> {
    let invalid = |why: &str| ApiError::bad_request(format!("continue key is not valid: {why}"));
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(token)
        .map_err(|_| invalid("not base64"))?;
    let v: Value = serde_json::from_slice(&bytes).map_err(|_| invalid("not JSON"))?;
    let rv = v["rv"]
        .as_u64()
        .ok_or_else(|| invalid("no resource version"))?;
    let ns = v["ns"].as_str().ok_or_else(|| invalid("no namespace"))?;
    let name = v["name"].as_str().ok_or_else(|| invalid("no name"))?;
    Ok((
        rv,
        ObjectKey {
            namespace: ns.to_string(),
            name: name.to_string(),
        },
    ))
}

/// Operations on the shared store used by the HTTP handlers and `Cluster`. Each takes the lock
/// once, and wakes watches after a change.
impl Shared {
    pub(crate) fn get_object(
        &self,
        resource: Resource,
        key: &ObjectKey,
    ) -> Result<Arc<StoredObject>, ApiError> {
        self.lock().get(resource, key)
    }

    pub(crate) fn create_object(
        &self,
        resource: Resource,
        namespace: Option<&str>,
        value: Value,
    ) -> Result<Arc<StoredObject>, ApiError> {
        let now = self.clock.now();
        let result =
            self.lock()
                .create(self.settings.history_size, now, resource, namespace, value);
        self.changed.notify_all();
        result
    }

    /// Returns (new, old).
    pub(crate) fn update_object(
        &self,
        resource: Resource,
        key: &ObjectKey,
        scope: Scope,
        change: impl FnOnce(Value) -> Result<Value, ApiError>,
    ) -> Result<(Arc<StoredObject>, Arc<StoredObject>), ApiError> {
        let result = self
            .lock()
            .modify(self.settings.history_size, resource, key, scope, change);
        self.changed.notify_all();
        result
    }

    pub(crate) fn patch_object(
        &self,
        resource: Resource,
        key: &ObjectKey,
        scope: Scope,
        patch_type: PatchType,
        patch: &Value,
    ) -> Result<(Arc<StoredObject>, Arc<StoredObject>), ApiError> {
        self.update_object(resource, key, scope, |mut value| {
            patch::apply(patch_type, resource, &mut value, patch).map_err(|e| match e {
                PatchError::Malformed(m) => ApiError::bad_request(m),
                PatchError::Unprocessable(m) => ApiError::invalid(resource, &key.name, &m),
            })?;
            Ok(value)
        })
    }

    pub(crate) fn delete_object(
        &self,
        resource: Resource,
        key: &ObjectKey,
        options: &DeleteOptions,
    ) -> Result<Deleted, ApiError> {
        let now = self.clock.now();
        let result = self.lock().delete(
            self.settings.history_size,
            now,
            self.settings.finalize_pod_deletes,
            resource,
            key,
            options,
        );
        self.changed.notify_all();
        result
    }

    pub(crate) fn list_objects(
        &self,
        resource: Resource,
        filter: &Filter,
        limit: Option<usize>,
        continue_token: Option<&str>,
    ) -> Result<ListPage, ApiError> {
        self.lock().list(resource, filter, limit, continue_token)
    }

    /// Blocks until a change of `resource` after `cursor`, a fault aimed at watches, shutdown or
    /// `deadline`.
    pub(crate) fn wait_changes(
        &self,
        resource: Resource,
        cursor: &mut u64,
        seen: &mut SeenFaults,
        deadline: Instant,
    ) -> Wakeup {
        let mut state = self.lock();
        loop {
            let mut wakeup = Wakeup::default();
            let now = Instant::now();
            if state.shutdown || self.is_shutting_down() {
                wakeup.shutdown = true;
                return wakeup;
            }
            if state.faults.watch_drop_generation != seen.drop {
                seen.drop = state.faults.watch_drop_generation;
                wakeup.dropped = true;
                return wakeup;
            }
            if state.faults.watch_corrupt_generation != seen.corrupt {
                seen.corrupt = state.faults.watch_corrupt_generation;
                wakeup.corrupt = true;
                return wakeup;
            }
            if state.take_changes(resource, cursor, now, &mut wakeup) || now >= deadline {
                return wakeup;
            }
            let mut wait_until = deadline;
            if let Some(until) = state.faults.stall_until.filter(|u| *u > now) {
                wait_until = wait_until.min(until);
            }
            state = self
                .changed
                .wait_timeout(state, wait_until.saturating_duration_since(now))
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }
}

/// In-process access to the simulator's objects, for tests and simulated kubelets: the same store
/// the HTTP API serves (every write bumps the resourceVersion and reaches watches), without HTTP.
/// Writes here are unconditional and may change anything, status included.
#[derive(Clone)]
pub struct Cluster {
    pub(crate) shared: Arc<Shared>,
    pub(crate) identity: Arc<Identity>,
}

impl Cluster {
    /// The same cluster, recording writes as `identity` in the write log (when
    /// `SimConfig::log_direct_writes` is on).
    pub fn with_identity(&self, identity: Identity) -> Cluster {
        Cluster {
            shared: self.shared.clone(),
            identity: Arc::new(identity),
        }
    }

    /// The server's clock (wall time, never going backwards).
    pub fn now(&self) -> Time {
        self.shared.clock.now()
    }

    /// Time since the server started: the clock of the write log's `elapsed`.
    pub fn elapsed(&self) -> std::time::Duration {
        self.shared.clock.elapsed()
    }

    /// The current global resourceVersion.
    pub fn resource_version(&self) -> u64 {
        self.shared.lock().resource_version
    }

    pub fn get(&self, resource: Resource, namespace: Option<&str>, name: &str) -> Option<Value> {
        let object = self
            .shared
            .get_object(resource, &ObjectKey::new(namespace, name))
            .ok()?;
        object.value().ok()
    }

    /// All objects of a resource (in one namespace, or all), in key order.
    pub fn list(&self, resource: Resource, namespace: Option<&str>) -> Vec<Value> {
        let filter = Filter::namespace(namespace);
        let objects = match self.shared.list_objects(resource, &filter, None, None) {
            Ok(page) => page.items,
            Err(_) => Vec::new(),
        };
        objects.iter().filter_map(|o| o.value().ok()).collect()
    }

    pub fn count(&self, resource: Resource) -> usize {
        self.shared.lock().store(resource).objects.len()
    }

    /// Creates an object (namespace from `metadata.namespace`); AlreadyExists if present.
    pub fn create(&self, resource: Resource, value: Value) -> Result<Value, ApiError> {
        let object = self.shared.create_object(resource, None, value)?;
        self.log(Verb::Create, resource, &object, "created (direct)".into());
        object.value()
    }

    /// Creates the object, or replaces it whole (keeping its uid and creationTimestamp).
    pub fn upsert(
        &self,
        resource: Resource,
        namespace: Option<&str>,
        mut value: Value,
    ) -> Result<Value, ApiError> {
        if let Some(meta) = value.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.remove("resourceVersion");
            meta.remove("uid");
            if let Some(ns) = namespace {
                meta.insert("namespace".into(), Value::from(ns));
            }
        }
        let name = value
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let key = ObjectKey::new(namespace, &name);
        let proposed = value.clone();
        match self
            .shared
            .update_object(resource, &key, Scope::Direct, move |_| Ok(proposed))
        {
            Ok((object, old)) => {
                self.log_change(resource, &object, &old);
                object.value()
            }
            Err(e) if e.code == 404 => {
                let object = self.shared.create_object(resource, namespace, value)?;
                self.log(Verb::Create, resource, &object, "created (direct)".into());
                object.value()
            }
            Err(e) => Err(e),
        }
    }

    /// Read-modify-write under the store lock: `change` edits the current object in place.
    pub fn update(
        &self,
        resource: Resource,
        namespace: Option<&str>,
        name: &str,
        change: impl FnOnce(&mut Value),
    ) -> Result<Value, ApiError> {
        let key = ObjectKey::new(namespace, name);
        let (object, old) = self
            .shared
            .update_object(resource, &key, Scope::Direct, |mut v| {
                change(&mut v);
                Ok(v)
            })?;
        self.log_change(resource, &object, &old);
        object.value()
    }

    /// Removes an object at once (no grace period): what a kubelet does when a terminating pod's
    /// containers have stopped.
    pub fn remove(
        &self,
        resource: Resource,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Value, ApiError> {
        let key = ObjectKey::new(namespace, name);
        let now = self.shared.clock.now();
        let result = self.shared.lock().delete(
            self.shared.settings.history_size,
            now,
            true,
            resource,
            &key,
            &DeleteOptions::default(),
        );
        self.shared.changed.notify_all();
        let deleted = result?;
        self.log(
            Verb::Delete,
            resource,
            &deleted.object,
            "removed (direct)".into(),
        );
        deleted.object.value()
    }

    /// Pods that have a deletionTimestamp (graceful deletion requested, not yet removed).
    pub fn terminating_pods(&self) -> Vec<(String, String)> {
        let state = self.shared.lock();
        state
            .store(Resource::Pods)
            .objects
            .values()
            .filter(|o| o.terminating)
            .map(|o| (o.key.namespace.clone(), o.key.name.clone()))
            .collect()
    }

    /// The kubelet heartbeat: creates or renews the node's Lease in `kube-node-lease`
    /// (holder = node, 40 s duration, `renewTime` = `time` with microseconds).
    pub fn renew_lease(&self, node: &str, time: Time) -> Result<(), ApiError> {
        self.renew_lease_with(node, time, None)
    }

    /// [`Cluster::renew_lease`] by a kubelet that renews every `renew_interval`: the Lease's
    /// `leaseDurationSeconds` is four times that (whole seconds, at least 1), as the kubelet
    /// renews at a quarter of its Lease's duration.
    pub fn renew_lease_every(
        &self,
        node: &str,
        time: Time,
        renew_interval: std::time::Duration,
    ) -> Result<(), ApiError> {
        let seconds = (renew_interval.as_millis() * 4).div_ceil(1000).max(1);
        self.renew_lease_with(node, time, Some(seconds as u64))
    }

    fn renew_lease_with(
        &self,
        node: &str,
        time: Time,
        duration_seconds: Option<u64>,
    ) -> Result<(), ApiError> {
        let renew = Value::from(time.to_rfc3339_micros());
        let key = ObjectKey::new(Some(NODE_LEASE_NAMESPACE), node);
        let renewed = self
            .shared
            .update_object(Resource::Leases, &key, Scope::Direct, |mut v| {
                let spec = v
                    .as_object_mut()
                    .map(|o| o.entry("spec").or_insert_with(|| json!({})));
                match spec.and_then(Value::as_object_mut) {
                    Some(spec) => {
                        spec.insert("renewTime".into(), renew.clone());
                        if let Some(seconds) = duration_seconds {
                            spec.insert("leaseDurationSeconds".into(), seconds.into());
                        }
                        Ok(v)
                    }
                    None => Err(ApiError::invalid(
                        Resource::Leases,
                        node,
                        "spec: must be an object",
                    )),
                }
            });
        match renewed {
            Ok((object, old)) => {
                self.log_change(Resource::Leases, &object, &old);
                Ok(())
            }
            Err(e) if e.code == 404 => {
                let lease = json!({
                    "metadata": {"name": node, "namespace": NODE_LEASE_NAMESPACE},
                    "spec": {"holderIdentity": node,
                             "leaseDurationSeconds": duration_seconds.unwrap_or(40),
                             "renewTime": renew}
                });
                self.create(Resource::Leases, lease).map(|_| ())
            }
            Err(e) => Err(e),
        }
    }

    /// What a kubelet's status update does to one condition: `lastHeartbeatTime` = `heartbeat`,
    /// and `lastTransitionTime` = `heartbeat` when the status changes (or the condition is new).
    pub fn set_node_condition(
        &self,
        node: &str,
        condition_type: &str,
        status: &str,
        heartbeat: Time,
    ) -> Result<(), ApiError> {
        let stamp = Value::from(heartbeat.to_rfc3339());
        let (reason, message) = kubelet_reason(condition_type, status);
        self.update(Resource::Nodes, None, node, |v| {
            let status_map = v
                .as_object_mut()
                .map(|o| o.entry("status").or_insert_with(|| json!({})));
            let Some(Value::Object(status_map)) = status_map else {
                return;
            };
            let conditions = status_map.entry("conditions").or_insert_with(|| json!([]));
            if !conditions.is_array() {
                *conditions = json!([]);
            }
            let Some(list) = conditions.as_array_mut() else {
                return;
            };
            let mut entry = Map::new();
            entry.insert("type".into(), Value::from(condition_type));
            entry.insert("status".into(), Value::from(status));
            entry.insert("lastHeartbeatTime".into(), stamp.clone());
            entry.insert("lastTransitionTime".into(), stamp.clone());
            entry.insert("reason".into(), Value::from(reason));
            entry.insert("message".into(), Value::from(message));
            match list.iter_mut().find(|c| c["type"] == condition_type) {
                Some(existing) => {
                    if existing["status"] == status {
                        entry.insert(
                            "lastTransitionTime".into(),
                            existing["lastTransitionTime"].clone(),
                        );
                    }
                    *existing = Value::Object(entry);
                }
                None => list.push(Value::Object(entry)),
            }
        })
        .map(|_| ())
    }

    fn log_change(&self, resource: Resource, object: &StoredObject, old: &StoredObject) {
        if self.shared.settings.log_direct_writes && object.resource_version != old.resource_version
        {
            let summary = match (old.value(), object.value()) {
                (Ok(a), Ok(b)) => super::diff::summarize(&a, &b),
                _ => String::new(),
            };
            self.log(Verb::Update, resource, object, summary);
        }
    }

    fn log(&self, verb: Verb, resource: Resource, object: &StoredObject, summary: String) {
        if !self.shared.settings.log_direct_writes {
            return;
        }
        self.shared.record(WriteRecord {
            seq: 0,
            elapsed: self.shared.clock.elapsed(),
            wall: self.shared.clock.now(),
            identity: (*self.identity).clone(),
            verb,
            resource,
            subresource: None,
            namespace: object.key.namespace().map(str::to_string),
            name: object.key.name.clone(),
            code: 200,
            resource_version: Some(object.resource_version),
            summary,
        });
    }
}

/// Where kubelets keep their heartbeat Leases.
pub const NODE_LEASE_NAMESPACE: &str = "kube-node-lease";

/// The reasons and messages a kubelet writes (pkg/kubelet/nodestatus/setters.go).
pub(crate) fn kubelet_reason(condition_type: &str, status: &str) -> (&'static str, &'static str) {
    match (condition_type, status) {
        ("Ready", "True") => ("KubeletReady", "kubelet is posting ready status"),
        ("Ready", _) => ("KubeletNotReady", "container runtime is down"),
        ("MemoryPressure", "True") => (
            "KubeletHasInsufficientMemory",
            "kubelet has insufficient memory available",
        ),
        ("MemoryPressure", _) => (
            "KubeletHasSufficientMemory",
            "kubelet has sufficient memory available",
        ),
        ("DiskPressure", "True") => ("KubeletHasDiskPressure", "kubelet has disk pressure"),
        ("DiskPressure", _) => ("KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
        ("PIDPressure", "True") => (
            "KubeletHasInsufficientPID",
            "kubelet has insufficient PID available",
        ),
        ("PIDPressure", _) => (
            "KubeletHasSufficientPID",
            "kubelet has sufficient PID available",
        ),
        ("NetworkUnavailable", "True") => ("NoRouteCreated", "Node created without a route"),
        ("NetworkUnavailable", _) => ("RouteCreated", "RouteController created a route"),
        _ => ("SimulatedCondition", "set by the simulator"),
    }
}
