//! conf/rbac.yaml grants exactly what the daemon needs (docs/upstream.md, "Watches and writes"):
//! the daemon's identity can do its job and nothing more. A permission added or dropped by accident
//! fails here.

use std::collections::BTreeSet;

use serde::Deserialize as _;
use serde_json::Value;

fn documents() -> Vec<Value> {
    let text =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/conf/rbac.yaml")).unwrap();
    serde_yaml_ng::Deserializer::from_str(&text)
        .map(|doc| Value::deserialize(doc).expect("valid YAML document"))
        .filter(|v| !v.is_null())
        .collect()
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .map(|a| a.iter().map(|s| s.as_str().unwrap().to_string()).collect())
        .unwrap_or_default()
}

/// (scope, api group, resource, verb, resource name or "") for every granted permission.
fn grants(docs: &[Value]) -> BTreeSet<(String, String, String, String, String)> {
    let mut out = BTreeSet::new();
    for doc in docs {
        let scope = match doc["kind"].as_str() {
            Some("ClusterRole") => "cluster".to_string(),
            Some("Role") => doc["metadata"]["namespace"].as_str().unwrap().to_string(),
            _ => continue,
        };
        for rule in doc["rules"].as_array().unwrap() {
            let names = strings(&rule["resourceNames"]);
            let names = if names.is_empty() {
                vec![String::new()]
            } else {
                names
            };
            for group in strings(&rule["apiGroups"]) {
                for resource in strings(&rule["resources"]) {
                    for verb in strings(&rule["verbs"]) {
                        for name in &names {
                            out.insert((
                                scope.clone(),
                                group.clone(),
                                resource.clone(),
                                verb.clone(),
                                name.clone(),
                            ));
                        }
                    }
                }
            }
        }
    }
    out
}

#[test]
fn roles_grant_exactly_the_objects_and_verbs_of_spec_section_1() {
    let mut want = BTreeSet::new();
    let mut grant = |scope: &str, group: &str, resource: &str, verbs: &[&str], name: &str| {
        for verb in verbs {
            want.insert((
                scope.into(),
                group.into(),
                resource.into(),
                verb.to_string(),
                name.into(),
            ));
        }
    };
    grant(
        "cluster",
        "",
        "nodes",
        &["get", "list", "watch", "patch"],
        "",
    );
    grant("cluster", "", "nodes/status", &["update", "patch"], "");
    grant(
        "cluster",
        "",
        "pods",
        &["get", "list", "watch", "delete"],
        "",
    );
    grant("cluster", "", "pods/status", &["update", "patch"], "");
    grant("cluster", "", "events", &["create", "patch"], "");
    grant(
        "kube-node-lease",
        "coordination.k8s.io",
        "leases",
        &["get", "list", "watch"],
        "",
    );
    grant(
        "kube-system",
        "coordination.k8s.io",
        "leases",
        // patch: `node-lifecycled pause` / `resume` write the fleet pause annotation (#27).
        &["get", "update", "patch"],
        "node-lifecycled",
    );
    grant(
        "kube-system",
        "coordination.k8s.io",
        "leases",
        &["create"],
        "",
    );
    assert_eq!(grants(&documents()), want);
}

#[test]
fn every_binding_names_an_existing_role_and_both_identities() {
    let docs = documents();
    let roles: BTreeSet<(String, String, String)> = docs
        .iter()
        .filter(|d| matches!(d["kind"].as_str(), Some("Role" | "ClusterRole")))
        .map(|d| {
            (
                d["kind"].as_str().unwrap().to_string(),
                d["metadata"]["namespace"]
                    .as_str()
                    .unwrap_or("")
                    .to_string(),
                d["metadata"]["name"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let bindings: Vec<&Value> = docs
        .iter()
        .filter(|d| {
            matches!(
                d["kind"].as_str(),
                Some("RoleBinding" | "ClusterRoleBinding")
            )
        })
        .collect();
    assert_eq!(bindings.len(), roles.len(), "one binding per role");
    for b in bindings {
        let kind = b["roleRef"]["kind"].as_str().unwrap().to_string();
        let ns = b["metadata"]["namespace"]
            .as_str()
            .unwrap_or("")
            .to_string();
        let name = b["roleRef"]["name"].as_str().unwrap().to_string();
        assert!(roles.contains(&(kind, ns, name)), "{b}");
        let subjects: BTreeSet<String> = b["subjects"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| {
                format!(
                    "{}:{}/{}",
                    s["kind"].as_str().unwrap(),
                    s["namespace"].as_str().unwrap_or(""),
                    s["name"].as_str().unwrap()
                )
            })
            .collect();
        let want: BTreeSet<String> = [
            "User:/node-lifecycled",
            "ServiceAccount:kube-system/node-lifecycled",
        ]
        .into_iter()
        .map(String::from)
        .collect();
        assert_eq!(subjects, want, "{b}");
    }
}
