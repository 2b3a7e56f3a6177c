//! The real server's audit log (`ServerOptions::audit`) read back: every request the policy
//! selected, as the server saw it, with the server's own timestamps. The protocol tests read
//! what the daemon asked for (a watch-list, a live Lease read); the differential tier reads what
//! each controller wrote.

use std::path::Path;

use node_lifecycled::time::Time;
use serde_json::Value;

/// Writes by everyone to nodes, pods and events, with the objects they produced (the Lease
/// renewals of the test's kubelets are left out: the busiest and least telling), and the
/// controllers' reads at Metadata level.
pub const DECISIONS_POLICY: &str = "\
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: None
  resources: [{group: coordination.k8s.io, resources: [leases]}]
  verbs: [create, update, patch]
- level: RequestResponse
  verbs: [create, update, patch, delete]
  resources: [{group: '', resources: [nodes, nodes/status, pods, pods/status, events]}]
- level: Metadata
  users: [node-lifecycled]
";

/// Every request of user `node-lifecycled` at Metadata level (what it asked, not what it got).
pub const REQUESTS_POLICY: &str = "\
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Metadata
  users: [node-lifecycled]
";

/// One request as the audit log has it.
#[derive(Clone, Debug)]
pub struct Request {
    pub user: String,
    pub verb: String,
    pub uri: String,
    pub resource: String,
    pub subresource: String,
    pub namespace: String,
    pub name: String,
    pub code: i64,
    /// When the server received it.
    pub received: Time,
    /// The object it produced (RequestResponse level), `Null` otherwise.
    pub response: Value,
}

/// The requests completed so far, in the order the server finished them (a watch appears when
/// its response started).
pub fn read(log: &Path) -> Vec<Request> {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    text.lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|e| e["stage"] == "ResponseComplete" || e["stage"] == "ResponseStarted")
        .filter_map(|e| {
            let s = |v: &Value| v.as_str().unwrap_or("").to_string();
            Some(Request {
                user: s(&e["user"]["username"]),
                verb: s(&e["verb"]),
                uri: s(&e["requestURI"]),
                resource: s(&e["objectRef"]["resource"]),
                subresource: s(&e["objectRef"]["subresource"]),
                namespace: s(&e["objectRef"]["namespace"]),
                name: s(&e["objectRef"]["name"]),
                code: e["responseStatus"]["code"].as_i64().unwrap_or(0),
                received: Time::parse_rfc3339(e["requestReceivedTimestamp"].as_str()?)?,
                response: e["responseObject"].clone(),
            })
        })
        .collect()
}
