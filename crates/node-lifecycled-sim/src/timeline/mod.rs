//! The story of a run, read from the simulator's write log: what the daemon changed, as facts
//! ("node z1-n003 Ready=Unknown", "taint z1-n003 +node.kubernetes.io/unreachable:NoExecute",
//! "pod default/web-7 deleted") that scenario expectations are checked against, and as readable
//! timeline lines (`t=  9.8s node z1-n003 Ready=Unknown (NodeStatusUnknown)`).
//!
//! Only the daemon's HTTP writes are in the log (the kubelets write directly); they are picked out
//! by the bearer token the daemon was given. Times are relative to the start of the scenario.

use std::collections::HashMap;
use std::time::Duration;

use serde_json::Value;

use super::resource::{Resource, Verb};
use super::write_log::WriteRecord;

mod render;

pub use render::Timeline;

/// The prefix of the taints the node lifecycle controller manages; only these changes are its
/// own (a taint PATCH carries the full list, other writers' taints included).
const CONTROLLER_TAINT_PREFIX: &str = "node.kubernetes.io/";

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FactKind {
    /// A step of the scenario (not a write by the daemon).
    Step(String),
    NodeReady {
        node: String,
        status: String,
        reason: String,
    },
    TaintAdded {
        node: String,
        taint: String,
    },
    TaintRemoved {
        node: String,
        taint: String,
    },
    NodeLabels {
        node: String,
        labels: String,
    },
    PodNotReady {
        pod: String,
    },
    /// The taint eviction's `DisruptionTarget` condition, written before the DELETE.
    PodDisruptionTarget {
        pod: String,
    },
    /// Legacy eviction's `NodeLost` status.
    PodNodeLost {
        pod: String,
    },
    PodDeleted {
        pod: String,
        detail: String,
    },
    Event {
        reason: String,
        object: String,
    },
    /// The daemon's leader-election Lease changed hands: `holder` took it (`None`: the holder is
    /// not in the write's summary), or it was released (`Some("")`).
    LeaderLease {
        lease: String,
        holder: Option<String>,
    },
    /// A write the API server refused.
    Failed {
        what: String,
        code: u16,
        message: String,
    },
    Other {
        what: String,
    },
    /// The daemon's fence command ran for `node` (a line the scenario's command appended to
    /// `$NODE_LIFECYCLED_SIM_WORK_DIR/fence-runs`; read at the end of the run).
    FenceRun {
        node: String,
    },
    /// The daemon recorded a fence attempt on `node` (`node-lifecycled.io/fence-attempt`), which
    /// it writes before each power-off step's command runs; `step` counts from 1 (`FENCE_STEP`).
    FenceAttempt {
        node: String,
        step: usize,
    },
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fact {
    /// Since the start of the scenario.
    pub t: Duration,
    pub kind: FactKind,
}

/// Turns write records into facts, keeping what it must remember between records (each node's
/// last known controller taints).
#[derive(Debug, Default)]
pub struct FactReader {
    writer_token: Option<String>,
    start: Duration,
    taints: HashMap<String, Vec<String>>,
    last_seq: u64,
    /// Taint keys outside the prefix the daemon owns too (its `[[condition_taint]]` keys).
    owned_keys: Vec<String>,
}

impl FactReader {
    /// Reads the writes made with `token` (all HTTP writes when `None`), with times relative to
    /// `start` (the write log's elapsed time when the scenario began).
    pub fn new(token: Option<&str>, start: Duration) -> FactReader {
        FactReader {
            writer_token: token.map(str::to_string),
            start,
            ..FactReader::default()
        }
    }

    /// Counts taints with these keys as the daemon's own as well (custom condition taints).
    pub fn owning(mut self, keys: impl IntoIterator<Item = String>) -> FactReader {
        self.owned_keys.extend(keys);
        self
    }

    /// The facts of the records not read yet (records are taken in `seq` order; older ones are
    /// skipped, so the whole log can be passed each time).
    pub fn read(&mut self, records: &[WriteRecord]) -> Vec<Fact> {
        let mut facts = Vec::new();
        for record in records {
            if record.seq <= self.last_seq {
                continue;
            }
            self.last_seq = record.seq;
            if !self.is_daemon(record) {
                continue;
            }
            let t = record.elapsed.saturating_sub(self.start);
            for kind in self.facts_of(record) {
                facts.push(Fact { t, kind });
            }
        }
        facts
    }

    /// Each node's controller taints (`node.kubernetes.io/…`) after the daemon's last taint write.
    pub fn controller_taints(&self) -> &HashMap<String, Vec<String>> {
        &self.taints
    }

    fn is_daemon(&self, record: &WriteRecord) -> bool {
        match &self.writer_token {
            Some(token) => record.identity.token.as_deref() == Some(token),
            // In-process writes (kubelets, scenario steps) carry no token.
            None => record.identity.token.is_some() || record.identity.client_cn.is_some(),
        }
    }

    fn facts_of(&mut self, r: &WriteRecord) -> Vec<FactKind> {
        let object = match &r.namespace {
            Some(ns) => format!("{ns}/{}", r.name),
            None => r.name.clone(),
        };
        if !r.succeeded() {
            return vec![FactKind::Failed {
                what: format!("{} {} {object}", r.verb, r.target()),
                code: r.code,
                message: r.summary.clone(),
            }];
        }
        let sub = r.subresource.as_deref();
        let other = || {
            vec![FactKind::Other {
                what: format!("{} {} {object}", r.verb, r.target()),
            }]
        };
        match (r.resource, sub, r.verb) {
            (Resource::Nodes, Some("status"), Verb::Patch) => {
                match patch_body(&r.summary).and_then(|p| ready_condition(&p)) {
                    Some((status, reason)) => vec![FactKind::NodeReady {
                        node: r.name.clone(),
                        status,
                        reason,
                    }],
                    None => other(),
                }
            }
            (Resource::Nodes, Some("status"), Verb::Update) => match ready_from_diff(&r.summary) {
                Some((status, reason)) => vec![FactKind::NodeReady {
                    node: r.name.clone(),
                    status,
                    reason,
                }],
                None => other(),
            },
            (Resource::Nodes, None, Verb::Patch) => {
                let Some(patch) = patch_body(&r.summary) else {
                    return other();
                };
                let mut facts = Vec::new();
                if let Some(list) = patch.pointer("/spec/taints").and_then(Value::as_array) {
                    facts.extend(self.taint_changes(&r.name, list));
                }
                if let Some(labels) = patch.pointer("/metadata/labels").and_then(Value::as_object) {
                    let text: Vec<String> = labels
                        .iter()
                        .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("")))
                        .collect();
                    facts.push(FactKind::NodeLabels {
                        node: r.name.clone(),
                        labels: text.join(","),
                    });
                }
                if let Some(record) = patch
                    .pointer(&format!(
                        "/metadata/annotations/{}",
                        FENCE_ATTEMPT.replace('/', "~1")
                    ))
                    .and_then(Value::as_str)
                {
                    facts.push(FactKind::FenceAttempt {
                        node: r.name.clone(),
                        step: fence_step(record),
                    });
                }
                let known = patch.pointer("/spec/taints").is_some()
                    || patch.pointer("/metadata/labels").is_some()
                    || facts
                        .iter()
                        .any(|f| matches!(f, FactKind::FenceAttempt { .. }));
                if !known {
                    return other();
                }
                // A taint list re-sent with the same controller taints is no news.
                facts
            }
            (Resource::Pods, Some("status"), Verb::Patch | Verb::Update) => {
                let patch = patch_body(&r.summary).unwrap_or(Value::Null);
                let mut facts = Vec::new();
                let conditions = patch
                    .pointer("/status/conditions")
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default();
                let has = |t: &str, s: &str| {
                    conditions
                        .iter()
                        .any(|c| c["type"] == t && c["status"] == s)
                        || r.summary
                            .contains(&format!("status.conditions[{t}].status: \"{s}\""))
                        || r.summary.contains(&format!(
                            "status.conditions[{t}].status: \"True\" -> \"{s}\""
                        ))
                };
                if has("Ready", "False") {
                    facts.push(FactKind::PodNotReady {
                        pod: object.clone(),
                    });
                }
                if has("DisruptionTarget", "True") {
                    facts.push(FactKind::PodDisruptionTarget {
                        pod: object.clone(),
                    });
                }
                if patch.pointer("/status/reason").and_then(Value::as_str) == Some("NodeLost")
                    || r.summary.contains("\"NodeLost\"")
                {
                    facts.push(FactKind::PodNodeLost {
                        pod: object.clone(),
                    });
                }
                if facts.is_empty() {
                    return other();
                }
                facts
            }
            (Resource::Pods, None, Verb::Delete) => vec![FactKind::PodDeleted {
                pod: object,
                detail: delete_detail(&r.summary),
            }],
            (Resource::Events, None, Verb::Create) => match event_fact(&r.summary) {
                Some(fact) => vec![fact],
                None => other(),
            },
            (Resource::Leases, None, _) if r.namespace.as_deref() != Some("kube-node-lease") => {
                if r.verb == Verb::Create || r.summary.contains("holderIdentity") {
                    vec![FactKind::LeaderLease {
                        lease: object,
                        holder: lease_holder(&r.summary),
                    }]
                } else {
                    // Renewals: one every retry period, not news.
                    Vec::new()
                }
            }
            _ => other(),
        }
    }

    fn taint_changes(&mut self, node: &str, list: &[Value]) -> Vec<FactKind> {
        let new: Vec<String> = list
            .iter()
            .filter(|t| {
                t.get("key").and_then(Value::as_str).is_some_and(|k| {
                    k.starts_with(CONTROLLER_TAINT_PREFIX) || self.owned_keys.iter().any(|o| o == k)
                })
            })
            .filter_map(taint_text)
            .collect();
        let old = self.taints.insert(node.to_string(), new.clone());
        let old = old.unwrap_or_default();
        let mut facts = Vec::new();
        for t in &new {
            if !old.contains(t) {
                facts.push(FactKind::TaintAdded {
                    node: node.to_string(),
                    taint: t.clone(),
                });
            }
        }
        for t in &old {
            if !new.contains(t) {
                facts.push(FactKind::TaintRemoved {
                    node: node.to_string(),
                    taint: t.clone(),
                });
            }
        }
        facts
    }
}

const FENCE_ATTEMPT: &str = "node-lifecycled.io/fence-attempt";

/// The step an attempt record names, from 1: the first step's record has no `step=`, a later
/// one `step=N` with N counted from 0 (the daemon's `attempt_record_step`).
fn fence_step(record: &str) -> usize {
    record
        .split(',')
        .find_map(|part| part.strip_prefix("step="))
        .and_then(|s| s.parse::<usize>().ok())
        .map_or(1, |i| i + 1)
}

/// `key:Effect` (or `key=value:Effect`).
fn taint_text(taint: &Value) -> Option<String> {
    let key = taint.get("key")?.as_str()?;
    let effect = taint.get("effect")?.as_str()?;
    Some(match taint.get("value").and_then(Value::as_str) {
        Some(v) if !v.is_empty() => format!("{key}={v}:{effect}"),
        _ => format!("{key}:{effect}"),
    })
}

/// The new holder from a Lease write's summary: a PATCH body, or a PUT diff
/// (`spec.holderIdentity: "a" -> "b"`, `(added) "b"`, `-> (removed)`).
fn lease_holder(summary: &str) -> Option<String> {
    if let Some(patch) = patch_body(summary) {
        if let Some(h) = patch.pointer("/spec/holderIdentity") {
            return Some(h.as_str().unwrap_or("").to_string());
        }
    }
    let marker = "spec.holderIdentity: ";
    let rest = &summary[summary.find(marker)? + marker.len()..];
    let change = rest.split(';').next()?.trim();
    let new = change
        .rsplit("-> ")
        .next()?
        .trim_start_matches("(added) ")
        .trim();
    Some(match new {
        "(removed)" | "null" => String::new(),
        quoted => quoted.trim_matches('"').to_string(),
    })
}

/// The JSON body of a PATCH summary (`strategic {...}`, maybe followed by ` (no change)`).
fn patch_body(summary: &str) -> Option<Value> {
    let (_, rest) = summary.split_once(' ')?;
    serde_json::Deserializer::from_str(rest)
        .into_iter::<Value>()
        .next()?
        .ok()
}

fn ready_condition(patch: &Value) -> Option<(String, String)> {
    let ready = patch
        .pointer("/status/conditions")?
        .as_array()?
        .iter()
        .find(|c| c["type"] == "Ready")?;
    Some((
        ready["status"].as_str()?.to_string(),
        ready["reason"].as_str().unwrap_or("").to_string(),
    ))
}

/// Ready's new status and reason from a PUT's diff summary
/// (`status.conditions[Ready].status: "True" -> "Unknown"; …reason: "…" -> "NodeStatusUnknown"`).
pub(crate) fn ready_from_diff(summary: &str) -> Option<(String, String)> {
    let after = |field: &str| -> Option<String> {
        let marker = format!("status.conditions[Ready].{field}: ");
        let rest = &summary[summary.find(&marker)? + marker.len()..];
        let rest = rest.split(';').next()?;
        let new = rest.rsplit("-> ").next()?.trim();
        Some(new.trim_matches('"').to_string())
    };
    Some((after("status")?, after("reason").unwrap_or_default()))
}

fn delete_detail(summary: &str) -> String {
    match summary.split(", precondition").next() {
        Some(s) if s.starts_with("graceful deletion, grace period ") => {
            format!("grace {}", &s["graceful deletion, grace period ".len()..])
        }
        _ => String::new(),
    }
}

/// The simulator's event summary: `Normal NodeNotReady Node z1-n003: message (source …)`.
fn event_fact(summary: &str) -> Option<FactKind> {
    let mut words = summary.splitn(4, ' ');
    let _type = words.next()?;
    let reason = words.next()?;
    let _kind = words.next()?;
    let object = words.next()?.split(':').next()?;
    Some(FactKind::Event {
        reason: reason.to_string(),
        object: object.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn put_diffs_name_ready_status_and_reason() {
        let s = r#"status.conditions[Ready].status: "True" -> "Unknown"; status.conditions[Ready].reason: "KubeletReady" -> "NodeStatusUnknown""#;
        assert_eq!(
            ready_from_diff(s),
            Some(("Unknown".into(), "NodeStatusUnknown".into()))
        );
        assert_eq!(ready_from_diff("spec.x: 1 -> 2"), None);
    }

    #[test]
    fn lease_holders_come_from_patches_and_put_diffs() {
        assert_eq!(
            lease_holder(r#"spec.holderIdentity: "a" -> "b"; spec.renewTime: "x" -> "y""#),
            Some("b".into())
        );
        assert_eq!(
            lease_holder(r#"spec.holderIdentity: "a" -> """#),
            Some(String::new())
        );
        assert_eq!(
            lease_holder(r#"spec.holderIdentity: (added) "cp-1""#),
            Some("cp-1".into())
        );
        assert_eq!(
            lease_holder(r#"strategic {"spec":{"holderIdentity":"cp-2"}}"#),
            Some("cp-2".into())
        );
        assert_eq!(lease_holder("created uid=1"), None);
    }

    #[test]
    fn patch_summaries_keep_their_json_even_when_unchanged() {
        let v = patch_body(r#"strategic {"spec":{"taints":[]}} (no change)"#).unwrap();
        assert_eq!(v["spec"]["taints"], serde_json::json!([]));
    }
}
