//! Every write body that arrives is checked against the upstream type (k8s-openapi), as the real
//! API server decodes it into its Go struct: a body that does not parse is a 400 with a
//! `metav1.Status`, so a malformed body from the daemon fails a test here instead of a production
//! call.
//!
//! A create or update body is a whole object. A strategic-merge or merge patch is a partial
//! object: it must parse as the same type once the strategic-merge directives (`$patch`,
//! `$setElementOrder/...`, `$retainKeys`, ...) are set aside — they are the patch's syntax, not
//! fields. As with Go's decoder, an absent field is its zero value (required-field validation
//! is a separate 422 matter); a field of the wrong type or shape is what fails. A JSON patch (RFC 6902) is a list of operations, checked where it is applied.

use k8s_openapi::api::coordination::v1 as coordination;
use k8s_openapi::api::core::v1 as core;
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::patch::PatchType;
use super::resource::Resource;
use super::status::ApiError;

/// What a write body is meant to be.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Body {
    /// POST or PUT: a whole object.
    Object,
    Patch(PatchType),
}

pub fn check(resource: Resource, body: Body, value: &Value) -> Result<(), ApiError> {
    let value = match body {
        Body::Patch(PatchType::Json) => return Ok(()),
        Body::Patch(PatchType::Strategic) => normalized(value, true),
        Body::Object | Body::Patch(PatchType::Merge) => normalized(value, false),
    };
    let value = &value;
    let parsed = match resource {
        Resource::Nodes => parses::<core::Node>(value),
        Resource::Pods => parses::<core::Pod>(value),
        Resource::Leases => parses::<coordination::Lease>(value),
        Resource::Events => parses::<core::Event>(value),
    };
    parsed.map_err(|e| {
        let what = match body {
            Body::Object => "",
            Body::Patch(_) => " patch",
        };
        ApiError::bad_request(format!(
            "the{what} body cannot be handled as a {}: {e}",
            resource.kind()
        ))
    })
}

/// DELETE bodies are `DeleteOptions`.
pub fn check_delete_options(value: &Value) -> Result<(), ApiError> {
    parses::<meta::DeleteOptions>(value).map_err(|e| {
        ApiError::bad_request(format!("the body cannot be handled as DeleteOptions: {e}"))
    })
}

fn parses<T: DeserializeOwned>(value: &Value) -> Result<(), serde_json::Error> {
    T::deserialize(value).map(drop)
}

/// The body as Go's decoder sees it: a `null` member leaves the field at its zero value (and
/// in a patch deletes the key), so null members are dropped. With `directives`, the
/// strategic-merge directives go too: `$`-keys, and list elements that are directives
/// (`{"$patch": "delete", "type": "X"}` names an element to drop, not a value).
fn normalized(value: &Value, directives: bool) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(k, v)| !(v.is_null() || (directives && k.starts_with('$'))))
                .map(|(k, v)| (k.clone(), normalized(v, directives)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(
            items
                .iter()
                .filter(|v| !(directives && v.get("$patch").is_some()))
                .map(|v| normalized(v, directives))
                .collect(),
        ),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn whole_objects_must_parse_as_the_upstream_type() {
        let node = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"},
            "spec": {"taints": [{"key": "k", "effect": "NoSchedule"}]}});
        assert_eq!(check(Resource::Nodes, Body::Object, &node), Ok(()));
        // As in Go, an absent field decodes to its zero value (validation is a later, 422
        // matter); a field of the wrong type does not decode at all.
        let no_effect = json!({"metadata": {"name": "n1"}, "spec": {"taints": [{"key": "k"}]}});
        assert_eq!(check(Resource::Nodes, Body::Object, &no_effect), Ok(()));
        let numeric_effect = json!({"metadata": {"name": "n1"},
            "spec": {"taints": [{"key": "k", "effect": 1}]}});
        let e = check(Resource::Nodes, Body::Object, &numeric_effect).unwrap_err();
        assert_eq!((e.code, e.reason), (400, "BadRequest"));
        assert!(
            e.message.contains("cannot be handled as a Node"),
            "{}",
            e.message
        );
        assert!(e.message.contains("invalid type: integer"), "{}", e.message);
        let wrong_kind = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "n1"}});
        assert!(check(Resource::Nodes, Body::Object, &wrong_kind).is_err());
        let lease = json!({"metadata": {"name": "l"},
            "spec": {"leaseDurationSeconds": "fifteen"}});
        assert!(check(Resource::Leases, Body::Object, &lease).is_err());
        let event = json!({"metadata": {"name": "e"}, "involvedObject": {"kind": "Node"},
            "count": 1, "firstTimestamp": "not a time"});
        assert!(check(Resource::Events, Body::Object, &event).is_err());
    }

    #[test]
    fn strategic_patches_are_partial_objects_and_directives_are_not_fields() {
        let patch = json!({"metadata": {"uid": "u"}, "status": {
        "$setElementOrder/conditions": [{"type": "Ready"}],
        "conditions": [
            {"type": "Ready", "status": "False"},
            {"type": "Gone", "$patch": "delete"},
        ]}});
        let strategic = Body::Patch(PatchType::Strategic);
        assert_eq!(check(Resource::Pods, strategic, &patch), Ok(()));
        let boolean_status =
            json!({"status": {"conditions": [{"type": "Ready", "status": false}]}});
        assert!(check(Resource::Pods, strategic, &boolean_status).is_err());
        let deleting = json!({"metadata": {"labels": {"gone": null, "kept": "1"}},
            "spec": {"taints": null}});
        assert_eq!(
            check(Resource::Nodes, strategic, &deleting),
            Ok(()),
            "null deletes"
        );
        assert_eq!(
            check(Resource::Nodes, Body::Patch(PatchType::Merge), &deleting),
            Ok(())
        );
        let taints_as_text = json!({"spec": {"taints": "none"}});
        assert!(
            check(
                Resource::Nodes,
                Body::Patch(PatchType::Merge),
                &taints_as_text
            )
            .is_err()
        );
        assert_eq!(
            check(
                Resource::Nodes,
                Body::Patch(PatchType::Json),
                &json!([{"op": "add"}])
            ),
            Ok(()),
            "JSON patches are checked where they are applied"
        );
    }

    #[test]
    fn delete_options_must_parse() {
        assert_eq!(
            check_delete_options(&json!({"preconditions": {"uid": "u"}, "gracePeriodSeconds": 3})),
            Ok(())
        );
        assert!(check_delete_options(&json!({"gracePeriodSeconds": "soon"})).is_err());
    }
}
