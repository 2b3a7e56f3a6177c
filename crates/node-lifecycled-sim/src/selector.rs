//! Field and label selectors, as much of them as a controller uses: field selectors on
//! `metadata.name`, `metadata.namespace` and (pods) `spec.nodeName`; label selectors with
//! `k`, `!k`, `k=v`, `k==v`, `k!=v`. Anything else is refused with the real server's 400.

use super::object::StoredObject;
use super::resource::Resource;
use super::status::ApiError;

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Field {
    Name,
    Namespace,
    NodeName,
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct FieldRequirement {
    field: Field,
    equal: bool,
    value: String,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum LabelRequirement {
    Exists(String),
    Absent(String),
    Equals(String, String),
    NotEquals(String, String),
}

/// Which objects a LIST or WATCH selects: namespace, field selector, label selector.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Filter {
    pub namespace: Option<String>,
    fields: Vec<FieldRequirement>,
    labels: Vec<LabelRequirement>,
}

impl Filter {
    pub fn parse(
        resource: Resource,
        namespace: Option<&str>,
        field_selector: Option<&str>,
        label_selector: Option<&str>,
    ) -> Result<Filter, ApiError> {
        let mut filter = Filter {
            namespace: namespace.map(str::to_string),
            ..Filter::default()
        };
        for term in terms(field_selector) {
            filter.fields.push(parse_field(resource, term)?);
        }
        for term in terms(label_selector) {
            filter.labels.push(parse_label(term)?);
        }
        Ok(filter)
    }

    /// Everything in one namespace (`None`: everything).
    pub fn namespace(namespace: Option<&str>) -> Filter {
        Filter {
            namespace: namespace.map(str::to_string),
            ..Filter::default()
        }
    }

    /// True when nothing beyond the namespace is selected (the real server then reports
    /// `remainingItemCount` on paginated lists).
    pub fn selects_all(&self) -> bool {
        self.fields.is_empty() && self.labels.is_empty()
    }

    pub fn matches(&self, object: &StoredObject) -> bool {
        if let Some(ns) = &self.namespace {
            if object.key.namespace != *ns {
                return false;
            }
        }
        self.fields.iter().all(|r| {
            let actual = match r.field {
                Field::Name => object.key.name.as_str(),
                Field::Namespace => object.key.namespace.as_str(),
                Field::NodeName => object.node_name.as_deref().unwrap_or(""),
            };
            (actual == r.value) == r.equal
        }) && self.labels.iter().all(|r| match r {
            LabelRequirement::Exists(k) => object.label(k).is_some(),
            LabelRequirement::Absent(k) => object.label(k).is_none(),
            LabelRequirement::Equals(k, v) => object.label(k) == Some(v.as_str()),
            LabelRequirement::NotEquals(k, v) => object.label(k) != Some(v.as_str()),
        })
    }
}

fn terms(selector: Option<&str>) -> impl Iterator<Item = &str> {
    selector
        .unwrap_or("")
        .split(',')
        .map(str::trim)
        .filter(|t| !t.is_empty())
}

/// Splits `k!=v`, `k==v`, `k=v` into (key, equal, value).
fn split_operator(term: &str) -> Option<(&str, bool, &str)> {
    if let Some((k, v)) = term.split_once("!=") {
        return Some((k.trim(), false, v.trim()));
    }
    if let Some((k, v)) = term.split_once("==") {
        return Some((k.trim(), true, v.trim()));
    }
    term.split_once('=')
        .map(|(k, v)| (k.trim(), true, v.trim()))
}

fn parse_field(resource: Resource, term: &str) -> Result<FieldRequirement, ApiError> {
    let Some((key, equal, value)) = split_operator(term) else {
        return Err(ApiError::bad_request(format!(
            "invalid field selector: {term:?}: expected key=value, key==value or key!=value"
        )));
    };
    let field = match (key, resource) {
        ("metadata.name", _) => Field::Name,
        ("metadata.namespace", r) if r.namespaced() => Field::Namespace,
        ("spec.nodeName", Resource::Pods) => Field::NodeName,
        _ => {
            return Err(ApiError::bad_request(format!(
                "field label not supported: {key}"
            )));
        }
    };
    Ok(FieldRequirement {
        field,
        equal,
        value: value.to_string(),
    })
}

fn parse_label(term: &str) -> Result<LabelRequirement, ApiError> {
    if term.contains(" in ") || term.contains(" notin ") || term.contains('(') {
        return Err(ApiError::bad_request(format!(
            "unable to parse requirement: {term:?}: set-based label selectors are not supported by the simulator"
        )));
    }
    if let Some(key) = term.strip_prefix('!') {
        return Ok(LabelRequirement::Absent(key.trim().to_string()));
    }
    Ok(match split_operator(term) {
        Some((k, true, v)) => LabelRequirement::Equals(k.to_string(), v.to_string()),
        Some((k, false, v)) => LabelRequirement::NotEquals(k.to_string(), v.to_string()),
        None => LabelRequirement::Exists(term.to_string()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(ns: &str, name: &str, node: Option<&str>, labels: serde_json::Value) -> StoredObject {
        let mut v =
            json!({"metadata": {"name": name, "namespace": ns, "labels": labels}, "spec": {}});
        if let Some(n) = node {
            v["spec"]["nodeName"] = json!(n);
        }
        StoredObject::seal(Resource::Pods, v, 1).unwrap()
    }

    #[test]
    fn node_name_field_selectors_select_bound_pods_and_pods_of_one_node() {
        let bound = Filter::parse(Resource::Pods, None, Some("spec.nodeName!="), None).unwrap();
        let on_n1 = Filter::parse(Resource::Pods, None, Some("spec.nodeName=n1"), None).unwrap();
        let a = pod("default", "a", Some("n1"), json!({}));
        let b = pod("default", "b", None, json!({}));
        let c = pod("kube-system", "c", Some("n2"), json!({}));
        assert!(bound.matches(&a) && !bound.matches(&b) && bound.matches(&c));
        assert!(on_n1.matches(&a) && !on_n1.matches(&b) && !on_n1.matches(&c));
        let in_ns = Filter::parse(Resource::Pods, Some("kube-system"), None, None).unwrap();
        assert!(!in_ns.matches(&a) && in_ns.matches(&c));
    }

    #[test]
    fn label_selectors_support_equality_and_existence() {
        let p = pod("d", "p", None, json!({"app": "web", "tier": "front"}));
        let sel = |s: &str| Filter::parse(Resource::Pods, None, None, Some(s)).unwrap();
        assert!(sel("app=web,tier").matches(&p));
        assert!(sel("app==web,!zone").matches(&p));
        assert!(!sel("app!=web").matches(&p));
        assert!(!sel("zone").matches(&p));
    }

    #[test]
    fn unsupported_selectors_are_bad_requests() {
        let err = Filter::parse(Resource::Nodes, None, Some("spec.nodeName=x"), None).unwrap_err();
        assert_eq!(
            (err.code, err.message.as_str()),
            (400, "field label not supported: spec.nodeName")
        );
        let err = Filter::parse(Resource::Pods, None, None, Some("app in (a,b)")).unwrap_err();
        assert_eq!(err.code, 400);
    }
}
