//! Every permission the daemon needs, derived from conf/rbac.yaml's rules (compiled in, so the
//! list cannot drift from the file operators apply) and asked with SelfSubjectAccessReview.

use k8s_openapi::api::authorization::v1 as authorization;
use serde::Deserialize;

use super::{Check, Report};
use crate::config::Config;
use crate::kube::ApiClient;

const GROUP: &str = "permissions";

/// The RBAC the project ships, as `kubectl apply -f conf/rbac.yaml` grants it.
pub(crate) const RBAC_YAML: &str = include_str!("../../conf/rbac.yaml");

/// The Role that grants the leader election Lease; its namespace and name follow
/// `[leader_election]` (rbac.yaml says to change both together).
const LEADER_ROLE: &str = "node-lifecycled-leader-election";

const WHERE_RBAC: &str =
    "kubectl apply -f conf/rbac.yaml (packaged: /usr/share/doc/node-lifecycled/rbac.yaml)";

/// One `verb` on one resource, cluster-wide (`namespace` `None`) or in a namespace, on any
/// object or on the one named.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Permission {
    pub(crate) verb: String,
    pub(crate) group: String,
    pub(crate) resource: String,
    pub(crate) subresource: Option<String>,
    pub(crate) namespace: Option<String>,
    pub(crate) name: Option<String>,
}

impl Permission {
    /// `patch nodes/status`, `get leases in kube-system named node-lifecycled`.
    pub(crate) fn describe(&self) -> String {
        let mut text = format!("{} {}", self.verb, self.resource);
        if let Some(sub) = &self.subresource {
            text.push('/');
            text.push_str(sub);
        }
        if !self.group.is_empty() {
            text.push('.');
            text.push_str(&self.group);
        }
        if let Some(ns) = &self.namespace {
            text.push_str(" in ");
            text.push_str(ns);
        }
        if let Some(name) = &self.name {
            text.push_str(" named ");
            text.push_str(name);
        }
        text
    }
}

#[derive(Deserialize)]
struct Document {
    #[serde(default)]
    kind: String,
    #[serde(default)]
    metadata: Metadata,
    #[serde(default)]
    rules: Vec<Rule>,
}

#[derive(Default, Deserialize)]
struct Metadata {
    #[serde(default)]
    name: String,
    #[serde(default)]
    namespace: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Rule {
    #[serde(default)]
    api_groups: Vec<String>,
    #[serde(default)]
    resources: Vec<String>,
    #[serde(default)]
    resource_names: Vec<String>,
    #[serde(default)]
    verbs: Vec<String>,
}

/// The permissions the ClusterRoles and Roles of an RBAC manifest grant, one per verb,
/// resource and name. `leader` is `Some((namespace, name))` of the leader Lease, or `None`
/// when leader election is off (its Role is then not needed).
pub(crate) fn required(
    yaml: &str,
    leader: Option<(&str, &str)>,
) -> Result<Vec<Permission>, String> {
    let mut out = Vec::new();
    for document in serde_yaml_ng::Deserializer::from_str(yaml) {
        let doc = Document::deserialize(document).map_err(|e| format!("rbac.yaml: {e}"))?;
        let mut namespace = match doc.kind.as_str() {
            "ClusterRole" => None,
            "Role" => Some(doc.metadata.namespace.clone().ok_or_else(|| {
                format!("rbac.yaml: Role {} has no namespace", doc.metadata.name)
            })?),
            _ => continue,
        };
        let mut leader_name = None;
        if doc.kind == "Role" && doc.metadata.name == LEADER_ROLE {
            let Some((ns, name)) = leader else { continue };
            namespace = Some(ns.to_string());
            leader_name = Some(name.to_string());
        }
        for rule in &doc.rules {
            let names: Vec<Option<String>> = if rule.resource_names.is_empty() {
                vec![None]
            } else if let Some(name) = &leader_name {
                vec![Some(name.clone())]
            } else {
                rule.resource_names.iter().cloned().map(Some).collect()
            };
            for group in &rule.api_groups {
                for resource in &rule.resources {
                    let (resource, subresource) = match resource.split_once('/') {
                        Some((r, s)) => (r.to_string(), Some(s.to_string())),
                        None => (resource.clone(), None),
                    };
                    for verb in &rule.verbs {
                        for name in &names {
                            out.push(Permission {
                                verb: verb.clone(),
                                group: group.clone(),
                                resource: resource.clone(),
                                subresource: subresource.clone(),
                                namespace: namespace.clone(),
                                name: name.clone(),
                            });
                        }
                    }
                }
            }
        }
    }
    Ok(out)
}

fn review(p: &Permission) -> authorization::SelfSubjectAccessReview {
    authorization::SelfSubjectAccessReview {
        spec: authorization::SelfSubjectAccessReviewSpec {
            resource_attributes: Some(authorization::ResourceAttributes {
                verb: Some(p.verb.clone()),
                group: Some(p.group.clone()),
                resource: Some(p.resource.clone()),
                subresource: p.subresource.clone(),
                namespace: p.namespace.clone(),
                name: p.name.clone(),
                ..Default::default()
            }),
            ..Default::default()
        },
        ..Default::default()
    }
}

/// Asks the server about each permission: one line per missing one, one line for the rest.
pub(crate) fn check(client: &mut ApiClient, config: &Config, report: &mut Report) {
    let le = &config.leader_election;
    let leader = le
        .enabled
        .then_some((le.namespace.as_str(), le.name.as_str()));
    let permissions = match required(RBAC_YAML, leader) {
        Ok(p) => p,
        Err(e) => {
            report.push(Check::fail(GROUP, "rbac.yaml", e));
            return;
        }
    };
    let path = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews";
    let mut granted = 0;
    for permission in &permissions {
        let body = crate::kube::body::to_json(&review(permission)).to_string();
        match client.post::<authorization::SelfSubjectAccessReview>(path, body.as_bytes()) {
            Ok(answer) => {
                let status = answer.status.unwrap_or_default();
                if status.allowed && !status.denied.unwrap_or(false) {
                    granted += 1;
                } else {
                    report.push(
                        Check::fail(GROUP, permission.describe(), "not allowed").action(WHERE_RBAC),
                    );
                }
            }
            Err(e) => {
                // The same answer would come for every other one: say it once.
                report.push(
                    Check::fail(GROUP, "selfsubjectaccessreviews", format!("cannot ask: {e}"))
                        .action("the identity needs create selfsubjectaccessreviews (system:basic-user grants it)"),
                );
                return;
            }
        }
    }
    if granted == permissions.len() {
        report.push(Check::ok(
            GROUP,
            "rbac.yaml",
            format!("all {granted} permissions of conf/rbac.yaml granted"),
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn described(leader: Option<(&str, &str)>) -> Vec<String> {
        required(RBAC_YAML, leader)
            .unwrap()
            .iter()
            .map(Permission::describe)
            .collect()
    }

    #[test]
    fn every_rule_of_the_shipped_rbac_becomes_a_question() {
        let all = described(Some(("kube-system", "node-lifecycled")));
        for expected in [
            "patch nodes",
            "watch nodes",
            "update nodes/status",
            "delete pods",
            "patch pods/status",
            "create events",
            "list leases.coordination.k8s.io in kube-node-lease",
            "update leases.coordination.k8s.io in kube-system named node-lifecycled",
            "create leases.coordination.k8s.io in kube-system",
        ] {
            assert!(
                all.contains(&expected.to_string()),
                "{expected} missing: {all:#?}"
            );
        }
        assert!(
            !all.iter()
                .any(|p| p.contains("update nodes ") || p == "update nodes")
        );
        // nodes 4 + nodes/status 2 + pods 4 + pods/status 2 + events 2 + node leases 3 + leader 4
        // (get, update, patch for `pause` / `resume`, create)
        assert!(all.contains(
            &"patch leases.coordination.k8s.io in kube-system named node-lifecycled".to_string()
        ));
        assert_eq!(all.len(), 21, "{all:#?}");
    }

    #[test]
    fn the_leader_lease_follows_the_config_and_is_not_asked_when_election_is_off() {
        let moved = described(Some(("ops", "nl")));
        assert!(moved.contains(&"get leases.coordination.k8s.io in ops named nl".to_string()));
        assert!(!moved.iter().any(|p| p.contains("kube-system")));
        let off = described(None);
        assert_eq!(off.len(), 17);
        assert!(!off.iter().any(|p| p.contains("kube-system")));
    }

    #[test]
    fn a_role_without_namespace_is_an_error_naming_it() {
        let yaml = "kind: Role\nmetadata:\n  name: r\nrules: []\n";
        assert_eq!(
            required(yaml, None).unwrap_err(),
            "rbac.yaml: Role r has no namespace"
        );
    }
}
