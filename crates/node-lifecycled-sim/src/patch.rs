//! The three PATCH flavours the API server accepts for built-in types.
//!
//! Strategic merge follows Kubernetes' semantics for the fields the controller (and kubelets)
//! touch: maps merge recursively, `null` deletes a key, lists without a `patchMergeKey` (such as
//! `spec.taints`, `spec.tolerations`) are replaced whole, and lists with one (`status.conditions`
//! by `type`, containers by `name`, ...) merge element by element. The `$patch: replace|delete`
//! and `$setElementOrder` directives are honoured; `$retainKeys` and `$deleteFromPrimitiveList`
//! are refused with a clear 422 rather than silently misapplied.

use serde_json::{Map, Value};

use super::resource::Resource;

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum PatchType {
    Strategic,
    Merge,
    Json,
}

impl PatchType {
    pub fn from_content_type(content_type: &str) -> Option<PatchType> {
        let media = content_type.split(';').next().unwrap_or("").trim();
        match media {
            "application/strategic-merge-patch+json" => Some(PatchType::Strategic),
            "application/merge-patch+json" => Some(PatchType::Merge),
            "application/json-patch+json" => Some(PatchType::Json),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            PatchType::Strategic => "strategic",
            PatchType::Merge => "merge",
            PatchType::Json => "json",
        }
    }
}

/// Why a patch could not be applied. `Malformed` is the client's syntax (400); `Unprocessable` a
/// well-formed patch that cannot apply to this object (422).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PatchError {
    Malformed(String),
    Unprocessable(String),
}

impl std::fmt::Display for PatchError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PatchError::Malformed(m) | PatchError::Unprocessable(m) => f.write_str(m),
        }
    }
}

pub fn apply(
    patch_type: PatchType,
    resource: Resource,
    target: &mut Value,
    patch: &Value,
) -> Result<(), PatchError> {
    match patch_type {
        PatchType::Merge => {
            if !patch.is_object() {
                return Err(PatchError::Malformed(
                    "a merge patch must be a JSON object".into(),
                ));
            }
            merge_patch(target, patch);
            Ok(())
        }
        PatchType::Strategic => strategic_merge(resource, target, patch),
        PatchType::Json => json_patch(target, patch),
    }
}

/// RFC 7386 JSON merge patch.
pub fn merge_patch(target: &mut Value, patch: &Value) {
    let Value::Object(patch) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    let Value::Object(target) = target else {
        return;
    };
    for (key, value) in patch {
        if value.is_null() {
            target.remove(key);
        } else {
            merge_patch(target.entry(key.clone()).or_insert(Value::Null), value);
        }
    }
}

/// How a list field merges under strategic merge patch.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum ListStrategy {
    Replace,
    /// Elements are objects identified by this key.
    MergeByKey(&'static str),
    /// A set of primitives (`metadata.finalizers`).
    MergePrimitives,
}

/// The `patchStrategy`/`patchMergeKey` tags of the Kubernetes types, for the lists we serve.
fn list_strategy(resource: Resource, path: &[String]) -> ListStrategy {
    let path: Vec<&str> = path.iter().map(String::as_str).collect();
    match (resource, path.as_slice()) {
        (_, ["metadata", "finalizers"]) => ListStrategy::MergePrimitives,
        (_, ["metadata", "ownerReferences"]) => ListStrategy::MergeByKey("uid"),
        (Resource::Nodes, ["status", "conditions"] | ["status", "addresses"]) => {
            ListStrategy::MergeByKey("type")
        }
        (Resource::Pods, ["status", "conditions"]) => ListStrategy::MergeByKey("type"),
        (
            Resource::Pods,
            [
                "spec",
                "containers" | "initContainers" | "ephemeralContainers" | "volumes",
            ],
        ) => ListStrategy::MergeByKey("name"),
        _ => ListStrategy::Replace,
    }
}

pub fn strategic_merge(
    resource: Resource,
    target: &mut Value,
    patch: &Value,
) -> Result<(), PatchError> {
    let Value::Object(patch) = patch else {
        return Err(PatchError::Malformed(
            "a strategic merge patch must be a JSON object".into(),
        ));
    };
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    let mut path = Vec::new();
    merge_map(resource, &mut path, target, patch)
}

fn merge_map(
    resource: Resource,
    path: &mut Vec<String>,
    target: &mut Value,
    patch: &Map<String, Value>,
) -> Result<(), PatchError> {
    match patch.get("$patch").map(|d| d.as_str()) {
        None | Some(Some("merge")) => {}
        Some(Some("replace")) => {
            *target = Value::Object(without_directives(patch));
            return Ok(());
        }
        Some(Some("delete")) => {
            *target = Value::Object(Map::new());
            return Ok(());
        }
        Some(other) => {
            return Err(PatchError::Unprocessable(format!(
                "unknown $patch directive {other:?} at {}",
                path_text(path)
            )));
        }
    }
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    let mut orders = Vec::new();
    for (key, value) in patch {
        if key == "$patch" {
            continue;
        }
        if let Some(field) = key.strip_prefix("$setElementOrder/") {
            orders.push((field.to_string(), value));
            continue;
        }
        if key.starts_with('$') {
            return Err(PatchError::Unprocessable(format!(
                "the strategic merge directive {key:?} at {} is not supported by the simulator",
                path_text(path)
            )));
        }
        let Value::Object(target_map) = target else {
            return Ok(());
        };
        path.push(key.clone());
        match value {
            Value::Null => {
                target_map.remove(key);
            }
            Value::Object(sub) => {
                if sub.get("$patch").and_then(Value::as_str) == Some("delete") {
                    target_map.remove(key);
                } else {
                    let slot = target_map.entry(key.clone()).or_insert(Value::Null);
                    merge_map(resource, path, slot, sub)?;
                }
            }
            Value::Array(items) => {
                let slot = target_map.entry(key.clone()).or_insert(Value::Null);
                merge_list(list_strategy(resource, path), path, slot, items)?;
            }
            scalar => {
                target_map.insert(key.clone(), scalar.clone());
            }
        }
        path.pop();
    }
    for (field, order) in orders {
        if let Some(Value::Array(list)) = target.get_mut(&field) {
            path.push(field.clone());
            let strategy = list_strategy(resource, path);
            path.pop();
            apply_element_order(strategy, list, order);
        }
    }
    Ok(())
}

fn merge_list(
    strategy: ListStrategy,
    path: &[String],
    target: &mut Value,
    items: &[Value],
) -> Result<(), PatchError> {
    match strategy {
        ListStrategy::Replace => {
            *target = Value::Array(items.iter().map(clean).collect());
        }
        ListStrategy::MergePrimitives => {
            if !target.is_array() {
                *target = Value::Array(Vec::new());
            }
            if let Value::Array(list) = target {
                for item in items {
                    if !list.contains(item) {
                        list.push(item.clone());
                    }
                }
            }
        }
        ListStrategy::MergeByKey(merge_key) => {
            if items
                .iter()
                .any(|i| i.get("$patch").and_then(Value::as_str) == Some("replace"))
            {
                *target = Value::Array(
                    items
                        .iter()
                        .filter(|i| i.get("$patch").is_none())
                        .map(clean)
                        .collect(),
                );
                return Ok(());
            }
            if !target.is_array() {
                *target = Value::Array(Vec::new());
            }
            let Value::Array(list) = target else {
                return Ok(());
            };
            for item in items {
                let Some(item_map) = item.as_object() else {
                    return Err(PatchError::Unprocessable(format!(
                        "{}: list elements must be objects with the merge key {merge_key:?}",
                        path_text(path)
                    )));
                };
                let Some(key_value) = item_map.get(merge_key) else {
                    return Err(PatchError::Unprocessable(format!(
                        "{}: an element has no merge key {merge_key:?}",
                        path_text(path)
                    )));
                };
                let existing = list
                    .iter()
                    .position(|e| e.get(merge_key) == Some(key_value));
                let delete = item_map.get("$patch").and_then(Value::as_str) == Some("delete");
                match (existing, delete) {
                    (Some(i), true) => {
                        list.remove(i);
                    }
                    (None, true) => {}
                    (Some(i), false) => {
                        let mut sub_path = path.to_vec();
                        merge_map_nested(&mut sub_path, &mut list[i], item_map)?;
                    }
                    (None, false) => list.push(clean(item)),
                }
            }
        }
    }
    Ok(())
}

/// Elements of merge-keyed lists merge as plain maps: none of the nested lists we serve carry
/// their own merge keys.
fn merge_map_nested(
    path: &mut Vec<String>,
    target: &mut Value,
    patch: &Map<String, Value>,
) -> Result<(), PatchError> {
    // Events have no keyed lists: using it as the "resource" makes every nested list replace.
    merge_map(Resource::Events, path, target, patch)
}

/// `$setElementOrder/<field>`: elements named in the order list come first, in that order; the
/// rest keep their relative order after them.
fn apply_element_order(strategy: ListStrategy, list: &mut [Value], order: &Value) {
    let Value::Array(order) = order else { return };
    let rank = |element: &Value| -> usize {
        order
            .iter()
            .position(|o| match strategy {
                ListStrategy::MergeByKey(k) => o.get(k).is_some() && o.get(k) == element.get(k),
                _ => o == element,
            })
            .unwrap_or(usize::MAX)
    };
    list.sort_by_key(|e| rank(e));
}

/// A patch value being inserted where nothing was: nested `null`s mean "absent" and directives
/// are dropped.
fn clean(value: &Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(k, v)| !v.is_null() && !k.starts_with('$'))
                .map(|(k, v)| (k.clone(), clean(v)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(clean).collect()),
        other => other.clone(),
    }
}

fn without_directives(map: &Map<String, Value>) -> Map<String, Value> {
    map.iter()
        .filter(|(k, _)| !k.starts_with('$'))
        .map(|(k, v)| (k.clone(), clean(v)))
        .collect()
}

fn path_text(path: &[String]) -> String {
    if path.is_empty() {
        ".".to_string()
    } else {
        path.join(".")
    }
}

/// RFC 6902 JSON patch: add, remove, replace, move, copy, test.
pub fn json_patch(target: &mut Value, patch: &Value) -> Result<(), PatchError> {
    let Value::Array(ops) = patch else {
        return Err(PatchError::Malformed(
            "a JSON patch must be an array of operations".into(),
        ));
    };
    for (i, op) in ops.iter().enumerate() {
        let field = |name: &str| -> Result<&str, PatchError> {
            op.get(name).and_then(Value::as_str).ok_or_else(|| {
                PatchError::Malformed(format!("operation {i}: missing string field {name:?}"))
            })
        };
        let value = || {
            op.get("value").cloned().ok_or_else(|| {
                PatchError::Malformed(format!("operation {i}: missing field \"value\""))
            })
        };
        let path = field("path")?;
        let fail = |e: String| PatchError::Unprocessable(format!("operation {i} ({path}): {e}"));
        match field("op")? {
            "add" => pointer_add(target, path, value()?).map_err(fail)?,
            "remove" => {
                pointer_remove(target, path).map_err(fail)?;
            }
            "replace" => {
                pointer_remove(target, path).map_err(fail)?;
                pointer_add(target, path, value()?).map_err(fail)?;
            }
            "move" => {
                let from = field("from")?;
                let moved = pointer_remove(target, from).map_err(fail)?;
                pointer_add(target, path, moved).map_err(fail)?;
            }
            "copy" => {
                let from = field("from")?;
                let copied = target
                    .pointer(from)
                    .cloned()
                    .ok_or_else(|| fail(format!("no value at {from}")))?;
                pointer_add(target, path, copied).map_err(fail)?;
            }
            "test" => {
                let expected = value()?;
                if target.pointer(path) != Some(&expected) {
                    return Err(fail(format!("test failed: value is not {expected}")));
                }
            }
            other => {
                return Err(PatchError::Malformed(format!(
                    "operation {i}: unknown op {other:?}"
                )));
            }
        }
    }
    Ok(())
}

fn split_pointer(path: &str) -> Result<(String, String), String> {
    if path.is_empty() {
        return Err("the whole document cannot be replaced".into());
    }
    if !path.starts_with('/') {
        return Err(format!("{path:?} is not a JSON pointer"));
    }
    let cut = path.rfind('/').unwrap_or(0);
    let last = path[cut + 1..].replace("~1", "/").replace("~0", "~");
    Ok((path[..cut].to_string(), last))
}

fn pointer_add(target: &mut Value, path: &str, value: Value) -> Result<(), String> {
    let (parent, last) = split_pointer(path)?;
    match target.pointer_mut(&parent) {
        Some(Value::Object(map)) => {
            map.insert(last, value);
            Ok(())
        }
        Some(Value::Array(list)) => {
            let index = if last == "-" {
                list.len()
            } else {
                last.parse::<usize>()
                    .ok()
                    .filter(|i| *i <= list.len())
                    .ok_or_else(|| format!("index {last:?} out of range"))?
            };
            list.insert(index, value);
            Ok(())
        }
        Some(_) => Err(format!("{parent:?} is not a container")),
        None => Err(format!("no value at {parent:?}")),
    }
}

fn pointer_remove(target: &mut Value, path: &str) -> Result<Value, String> {
    let (parent, last) = split_pointer(path)?;
    match target.pointer_mut(&parent) {
        Some(Value::Object(map)) => map
            .remove(&last)
            .ok_or_else(|| format!("no value at {path}")),
        Some(Value::Array(list)) => match last.parse::<usize>() {
            Ok(i) if i < list.len() => Ok(list.remove(i)),
            _ => Err(format!("index {last:?} out of range")),
        },
        _ => Err(format!("no value at {path}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn strategic_merge_replaces_taints_whole_and_merges_conditions_by_type() {
        let mut node = json!({
            "metadata": {"name": "n1", "labels": {"a": "1", "b": "2"}},
            "spec": {"taints": [{"key": "x", "effect": "NoSchedule"}, {"key": "y", "effect": "NoExecute"}]},
            "status": {"conditions": [
                {"type": "Ready", "status": "True"},
                {"type": "MemoryPressure", "status": "False"}
            ]}
        });
        let patch = json!({
            "metadata": {"labels": {"a": null, "c": "3"}},
            "spec": {"taints": [{"key": "z", "effect": "NoExecute"}]},
            "status": {"conditions": [{"type": "Ready", "status": "Unknown"}, {"type": "PIDPressure", "status": "False"}]}
        });
        strategic_merge(Resource::Nodes, &mut node, &patch).unwrap();
        assert_eq!(node["metadata"]["labels"], json!({"b": "2", "c": "3"}));
        assert_eq!(
            node["spec"]["taints"],
            json!([{"key": "z", "effect": "NoExecute"}])
        );
        assert_eq!(
            node["status"]["conditions"],
            json!([
                {"type": "Ready", "status": "Unknown"},
                {"type": "MemoryPressure", "status": "False"},
                {"type": "PIDPressure", "status": "False"}
            ])
        );
    }

    #[test]
    fn strategic_merge_honours_delete_directive_and_element_order() {
        let mut pod = json!({"status": {"conditions": [
            {"type": "Ready", "status": "True"},
            {"type": "PodScheduled", "status": "True"}
        ]}});
        let patch = json!({"status": {
            "$setElementOrder/conditions": [{"type": "PodScheduled"}, {"type": "DisruptionTarget"}],
            "conditions": [
                {"type": "Ready", "$patch": "delete"},
                {"type": "DisruptionTarget", "status": "True", "reason": "DeletionByTaintManager"}
            ]
        }});
        strategic_merge(Resource::Pods, &mut pod, &patch).unwrap();
        assert_eq!(
            pod["status"]["conditions"],
            json!([
                {"type": "PodScheduled", "status": "True"},
                {"type": "DisruptionTarget", "status": "True", "reason": "DeletionByTaintManager"}
            ])
        );
    }

    #[test]
    fn strategic_merge_refuses_retain_keys() {
        let mut v = json!({"spec": {}});
        let err = strategic_merge(
            Resource::Nodes,
            &mut v,
            &json!({"spec": {"$retainKeys": ["a"]}}),
        )
        .unwrap_err();
        assert!(matches!(err, PatchError::Unprocessable(m) if m.contains("$retainKeys")));
    }

    #[test]
    fn merge_patch_replaces_lists_and_deletes_nulls() {
        let mut v = json!({"a": {"b": 1, "c": 2}, "l": [1, 2]});
        merge_patch(&mut v, &json!({"a": {"b": null, "d": 4}, "l": [3]}));
        assert_eq!(v, json!({"a": {"c": 2, "d": 4}, "l": [3]}));
    }

    #[test]
    fn json_patch_applies_all_operations_and_stops_at_a_failed_test() {
        let mut v = json!({"spec": {"taints": [{"key": "a"}]}, "metadata": {"labels": {"x": "1"}}});
        json_patch(
            &mut v,
            &json!([
                {"op": "test", "path": "/metadata/labels/x", "value": "1"},
                {"op": "add", "path": "/spec/taints/-", "value": {"key": "b"}},
                {"op": "replace", "path": "/metadata/labels/x", "value": "2"},
                {"op": "copy", "from": "/metadata/labels/x", "path": "/metadata/labels/y"},
                {"op": "move", "from": "/metadata/labels/y", "path": "/metadata/labels/z"},
                {"op": "remove", "path": "/spec/taints/0"}
            ]),
        )
        .unwrap();
        assert_eq!(
            v,
            json!({"spec": {"taints": [{"key": "b"}]}, "metadata": {"labels": {"x": "2", "z": "2"}}})
        );
        let err = json_patch(
            &mut v,
            &json!([{"op": "test", "path": "/metadata/labels/x", "value": "9"}]),
        );
        assert!(matches!(err, Err(PatchError::Unprocessable(_))));
        let err = json_patch(&mut v, &json!([{"op": "remove", "path": "/nope"}]));
        assert!(matches!(err, Err(PatchError::Unprocessable(_))));
    }
}
