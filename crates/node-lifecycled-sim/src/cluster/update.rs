//! What the server itself does to an update: the metadata only it sets, the subresource rules,
//! and a pod's deletion grace period.

use super::*;

/// The metadata only the server sets, and the subresource rules, applied to a proposed update.
/// `None` when the result equals the stored object.
pub(super) fn prepare_update(
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
pub(super) fn pod_grace_period(pod: &Value, requested: Option<i64>) -> i64 {
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
