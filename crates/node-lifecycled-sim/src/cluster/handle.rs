//! `Cluster`: the in-process handle tests and simulated kubelets read and write objects with.

use super::*;

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

    /// A DELETE as the API serves it: a pod with a grace period only gets its
    /// deletionTimestamp (unless the simulator finalizes pod deletes).
    pub fn delete(
        &self,
        resource: Resource,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Value, ApiError> {
        let key = ObjectKey::new(namespace, name);
        let deleted = self
            .shared
            .delete_object(resource, &key, &DeleteOptions::default())?;
        self.log(
            Verb::Delete,
            resource,
            &deleted.object,
            "deleted (direct)".into(),
        );
        deleted.object.value()
    }

    /// Pods that have a deletionTimestamp (graceful deletion requested, not yet removed).
    pub fn terminating_pods(&self) -> Vec<(String, String)> {
        let state = self.shared.lock();
        let pods = state.store(Resource::Pods);
        debug_assert_eq!(
            pods.terminating.len(),
            pods.objects.values().filter(|o| o.terminating).count(),
            "the terminating pods kept"
        );
        pods.terminating
            .iter()
            .map(|key| (key.namespace.clone(), key.name.clone()))
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
                (Ok(a), Ok(b)) => crate::diff::summarize(&a, &b),
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
