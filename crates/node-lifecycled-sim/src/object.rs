//! One stored version of an API object: its compact JSON encoding (shared, by `Arc`, between the
//! store, the watch history and every response that carries it, so each version is encoded once)
//! plus the few fields selectors and indexes need without decoding it again.

use serde_json::{Map, Value};

use super::resource::Resource;
use super::status::ApiError;

/// Where an object lives: namespace ("" for cluster-scoped objects) and name. Ordered as the real
/// server orders list results (by key).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ObjectKey {
    pub namespace: String,
    pub name: String,
}

impl ObjectKey {
    pub fn new(namespace: Option<&str>, name: &str) -> ObjectKey {
        ObjectKey {
            namespace: namespace.unwrap_or("").to_string(),
            name: name.to_string(),
        }
    }

    pub fn namespace(&self) -> Option<&str> {
        (!self.namespace.is_empty()).then_some(self.namespace.as_str())
    }
}

impl std::fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.namespace() {
            Some(ns) => write!(f, "{ns}/{}", self.name),
            None => f.write_str(&self.name),
        }
    }
}

#[derive(Debug)]
pub struct StoredObject {
    pub key: ObjectKey,
    pub uid: String,
    pub resource_version: u64,
    /// Compact JSON with `kind`, `apiVersion` and `metadata.resourceVersion` filled in.
    pub json: String,
    /// The same version's protobuf message (no envelope), for a kind the real server serves in
    /// protobuf (nodes, pods, leases): encoded here, once, like `json`.
    pub proto: Option<Box<[u8]>>,
    pub labels: Vec<(String, String)>,
    /// Pods only: `spec.nodeName` (selected by `fieldSelector=spec.nodeName=...`).
    pub node_name: Option<String>,
    /// `metadata.deletionTimestamp` is set: graceful deletion in progress.
    pub terminating: bool,
}

impl StoredObject {
    /// Encodes `value` as version `resource_version` of an object of `resource`, after checking the
    /// shape every object must have (a JSON object with `metadata.name`).
    pub fn seal(
        resource: Resource,
        mut value: Value,
        resource_version: u64,
    ) -> Result<StoredObject, ApiError> {
        let Some(obj) = value.as_object_mut() else {
            return Err(ApiError::bad_request(format!(
                "a {} must be a JSON object",
                resource.kind()
            )));
        };
        obj.insert("kind".into(), Value::from(resource.kind()));
        obj.insert("apiVersion".into(), Value::from(resource.api_version()));
        let meta = obj
            .entry("metadata")
            .or_insert_with(|| Value::Object(Map::new()));
        let Some(meta) = meta.as_object_mut() else {
            return Err(ApiError::bad_request("metadata must be a JSON object"));
        };
        meta.insert(
            "resourceVersion".into(),
            Value::from(resource_version.to_string()),
        );
        let name = match meta.get("name").and_then(Value::as_str) {
            Some(n) if !n.is_empty() => n.to_string(),
            _ => {
                return Err(ApiError::invalid(
                    resource,
                    "",
                    "metadata.name: Required value: name or generateName is required",
                ));
            }
        };
        let namespace = str_field(meta, "namespace").to_string();
        if resource.namespaced() == namespace.is_empty() {
            return Err(ApiError::invalid(
                resource,
                &name,
                if resource.namespaced() {
                    "metadata.namespace: Required value"
                } else {
                    "metadata.namespace: Forbidden: not allowed on this type"
                },
            ));
        }
        let uid = str_field(meta, "uid").to_string();
        let terminating = meta.get("deletionTimestamp").is_some_and(|t| !t.is_null());
        let labels = meta
            .get("labels")
            .and_then(Value::as_object)
            .map(|l| {
                l.iter()
                    .map(|(k, v)| (k.clone(), v.as_str().unwrap_or("").to_string()))
                    .collect()
            })
            .unwrap_or_default();
        let node_name = match resource {
            Resource::Pods => value
                .pointer("/spec/nodeName")
                .and_then(Value::as_str)
                .filter(|n| !n.is_empty())
                .map(str::to_string),
            _ => None,
        };
        let json = serde_json::to_string(&value)
            .map_err(|e| ApiError::internal(format!("encoding {}: {e}", resource.kind())))?;
        let proto = super::proto::encode_object(resource, &value).map(Vec::into_boxed_slice);
        Ok(StoredObject {
            key: ObjectKey { namespace, name },
            uid,
            resource_version,
            json,
            proto,
            labels,
            node_name,
            terminating,
        })
    }

    /// Decodes the stored JSON (it was produced by `seal`, so this only fails on a bug).
    pub fn value(&self) -> Result<Value, ApiError> {
        serde_json::from_str(&self.json)
            .map_err(|e| ApiError::internal(format!("decoding stored {}: {e}", self.key)))
    }

    pub fn label(&self, key: &str) -> Option<&str> {
        self.labels
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// The same object re-stamped with another resourceVersion (a DELETED event carries the
    /// version of the deletion, as the real server sends it).
    pub fn restamped(
        &self,
        resource: Resource,
        resource_version: u64,
    ) -> Result<StoredObject, ApiError> {
        StoredObject::seal(resource, self.value()?, resource_version)
    }
}

fn str_field<'a>(map: &'a Map<String, Value>, key: &str) -> &'a str {
    map.get(key).and_then(Value::as_str).unwrap_or("")
}
