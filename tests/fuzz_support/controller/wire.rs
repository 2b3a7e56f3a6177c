//! The watch's wire: every object the fake API delivers is rendered to JSON and read back
//! through the decoder, as from a watch (`FakeApi::wire`).

use node_lifecycled::controller::testing::Wire;
use node_lifecycled::controller::{Input, LeaseReadOutcome};
use node_lifecycled::kube::decode::{DecodeContext, decode_object};
use node_lifecycled::model::{Lease, Node, Pod};

/// The wire for `FakeApi::wire`: node, Lease and pod objects go through JSON.
pub fn json_wire() -> Box<Wire> {
    let mut ctx = DecodeContext::new();
    Box::new(move |input| match input {
        Input::NodeUpsert(node) => Input::NodeUpsert(decode_node(&node, &mut ctx)),
        Input::LeaseUpsert(lease) => Input::LeaseUpsert(decode_lease(&lease, &mut ctx)),
        Input::PodUpsert(pod) => Input::PodUpsert(decode_pod(&pod, &mut ctx)),
        Input::LeaseRead {
            id,
            outcome: LeaseReadOutcome::Found(lease),
        } => Input::LeaseRead {
            id,
            outcome: LeaseReadOutcome::Found(decode_lease(&lease, &mut ctx)),
        },
        other => other,
    })
}

fn decode_node(n: &Node, ctx: &mut DecodeContext) -> Node {
    let json = node_json(n);
    decode_object::<Node>(json.as_bytes(), ctx)
        .unwrap_or_else(|e| panic!("fake node does not decode: {e}\n{json}"))
}

fn decode_lease(l: &Lease, ctx: &mut DecodeContext) -> Lease {
    // renewTime is a MicroTime; condition heartbeats are whole seconds (metav1.Time).
    let renew = l
        .renew_time
        .map(|t| format!(r#","renewTime":"{}""#, t.to_rfc3339_micros()))
        .unwrap_or_default();
    let json = format!(
        r#"{{"metadata":{{"name":"{name}","namespace":"kube-node-lease","resourceVersion":"{}"}},"spec":{{"holderIdentity":"{name}","leaseDurationSeconds":40{renew}}}}}"#,
        l.resource_version,
        name = l.name,
    );
    decode_object::<Lease>(json.as_bytes(), ctx).expect("fake lease decodes")
}

fn decode_pod(p: &Pod, ctx: &mut DecodeContext) -> Pod {
    let tolerations: Vec<String> = p
        .tolerations
        .iter()
        .map(|t| {
            let secs = t
                .toleration_seconds
                .map(|s| format!(r#","tolerationSeconds":{s}"#))
                .unwrap_or_default();
            let effect = t
                .effect
                .as_ref()
                .map(|e| format!(r#","effect":"{}""#, e.as_str()))
                .unwrap_or_default();
            format!(r#"{{"key":"{}","operator":"Exists"{effect}{secs}}}"#, t.key)
        })
        .collect();
    let deletion = if p.deleting {
        r#","deletionTimestamp":"2030-01-01T00:00:00Z""#
    } else {
        ""
    };
    let ready = match p.ready {
        Some(s) => format!(r#"{{"type":"Ready","status":"{}"}}"#, s.as_str()),
        None => String::new(),
    };
    let json = format!(
        r#"{{"metadata":{{"name":"{}","namespace":"{}","uid":"{}","resourceVersion":"{}"{deletion}}},"spec":{{"nodeName":"{}","tolerations":[{}]}},"status":{{"conditions":[{ready}]}}}}"#,
        p.key.name,
        p.key.namespace,
        p.uid,
        p.resource_version,
        p.node_name.as_deref().unwrap_or_default(),
        tolerations.join(","),
    );
    decode_object::<Pod>(json.as_bytes(), ctx).expect("fake pod decodes")
}

fn node_json(n: &Node) -> String {
    let conditions: Vec<String> = n
        .conditions
        .iter()
        .map(|c| {
            let mut s = format!(
                r#"{{"type":"{}","status":"{}""#,
                c.kind.as_str(),
                c.status.as_str()
            );
            if let Some(t) = c.last_heartbeat_time {
                s += &format!(r#","lastHeartbeatTime":"{}""#, t.to_rfc3339());
            }
            if let Some(t) = c.last_transition_time {
                s += &format!(r#","lastTransitionTime":"{}""#, t.to_rfc3339());
            }
            if let Some(r) = c.text.reason() {
                s += &format!(r#","reason":"{r}""#);
            }
            s + "}"
        })
        .collect();
    let taints: Vec<String> = n
        .taints
        .iter()
        .map(|t| {
            let added = t
                .time_added
                .map(|a| format!(r#","timeAdded":"{}""#, a.to_rfc3339()))
                .unwrap_or_default();
            format!(
                r#"{{"key":"{}","value":"{}","effect":"{}"{added}}}"#,
                t.key,
                t.value,
                t.effect.as_str()
            )
        })
        .collect();
    let labels: Vec<String> = n
        .labels
        .iter()
        .map(|(k, v)| format!(r#""{k}":"{v}""#))
        .collect();
    format!(
        r#"{{"metadata":{{"name":"{}","uid":"{}","resourceVersion":"{}","creationTimestamp":"{}","labels":{{{}}}}},"spec":{{"taints":[{}]}},"status":{{"conditions":[{}]}}}}"#,
        n.name,
        n.uid,
        n.resource_version,
        n.creation_timestamp.to_rfc3339(),
        labels.join(","),
        taints.join(","),
        conditions.join(",")
    )
}
