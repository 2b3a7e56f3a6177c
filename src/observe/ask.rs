//! Answers to the control socket's requests: `status`, `explain NODE`, `explain NAMESPACE/POD`.
//! Gathers the facts from the controllers and the decision log, then renders them with
//! [`super::explain`]. Any other request gets one `error:` line.

use std::rc::Rc;

use crate::controller::{Controllers, explain::PodEviction};
use crate::model::PodKey;
use crate::time::Time;

use super::decision_log::DecisionLog;
use super::explain::{Acting, LogFigures, NodeFacts, PodFacts, explain_node, explain_pod, status};
use super::explain_brake::{self, insert_after_next};
use super::history::Subject;
use super::snapshot::DaemonSnapshot;

pub(crate) const USAGE: &str =
    "error: ask \"status\", \"explain NODE\" or \"explain NAMESPACE/POD\"";

/// The answer to one request line.
pub fn answer(
    request: &str,
    controllers: &Controllers,
    log: &DecisionLog,
    acting: Acting,
    now: Time,
    snapshot: impl FnOnce() -> DaemonSnapshot,
) -> String {
    let mut words = request.split_whitespace();
    match (words.next(), words.next(), words.next()) {
        (Some("status"), None, _) => status(
            &snapshot(),
            LogFigures {
                lines: log.lines,
                folded: log.folded,
                history_bytes: log.history_bytes(),
            },
        ),
        (Some("explain"), Some(what), None) => match what.split_once('/') {
            Some((namespace, name)) if !namespace.is_empty() && !name.is_empty() => {
                let key = PodKey {
                    namespace: Rc::from(namespace),
                    name: Rc::from(name),
                };
                match pod_facts(controllers, log, &key) {
                    Some(f) => {
                        insert_after_next(
                            explain_pod(&f, acting, now),
                            explain_brake::pod_lines(controllers, &key),
                        ) + &holds(controllers, None, now)
                    }
                    None => format!("error: no pod {key} bound to a node is known"),
                }
            }
            Some(_) => format!("error: {what:?} is neither a node nor NAMESPACE/POD"),
            None => match node_facts(controllers, log, what, now) {
                Some(f) => {
                    insert_after_next(
                        explain_node(&f, acting, now),
                        explain_brake::node_lines(controllers, what),
                    ) + &holds(controllers, Some(what), now)
                }
                None => format!("error: no node {what:?} is known"),
            },
        },
        _ => {
            let shown: String = request.chars().take(60).collect();
            format!("{USAGE}, got {shown:?}")
        }
    }
}

/// What holds decisions back whatever the node's health: the fleet pause, and the node's
/// maintenance annotation and cordon as fencing sees them.
fn holds(controllers: &Controllers, node: Option<&str>, now: Time) -> String {
    let mut out = String::new();
    if let Some(p) = controllers.pause(now) {
        out.push_str(&format!(
            "pause: {} paused until {} by {}: {}\n",
            p.what.as_str(),
            p.until_text(),
            p.by,
            p.reason
        ));
    }
    let Some(n) = node.and_then(|n| controllers.store().node(n)) else {
        return out;
    };
    if controllers.fencing().is_some() {
        if n.maintenance.holds(now) {
            out.push_str(&format!(
                "maintenance: {} (not fenced)\n",
                n.maintenance.describe()
            ));
        }
        if n.unschedulable
            && controllers
                .fencing()
                .is_some_and(|f| f.policy().skip_cordoned)
        {
            out.push_str("cordoned: not fenced (fencing.skip_cordoned = true)\n");
        }
    }
    out
}

pub(crate) fn node_facts(
    controllers: &Controllers,
    log: &DecisionLog,
    name: &str,
    now: Time,
) -> Option<NodeFacts> {
    let dump = controllers.lifecycle().dump(controllers.store(), now);
    let node = dump.nodes.into_iter().find(|n| &*n.name == name)?;
    let zone = dump.zones.into_iter().find(|z| z.display == node.zone);
    let pods = controllers.store().pods();
    let ids = pods.on_node(name);
    let evictions = ids
        .iter()
        .filter(|id| controllers.pod_eviction(&pods.view(**id).key()) != PodEviction::None)
        .count();
    Some(NodeFacts {
        queued: controllers.queued_taint(name, now),
        zone,
        pods: ids.len(),
        evictions,
        history: log.history(&Subject::Node(name.to_string())),
        node,
    })
}

pub(crate) fn pod_facts(
    controllers: &Controllers,
    log: &DecisionLog,
    key: &PodKey,
) -> Option<PodFacts> {
    let store = controllers.store();
    let pod = store.pods().get(key)?;
    let node_name = pod.node_name().cloned();
    let node = node_name.as_ref().and_then(|n| store.node(n));
    Some(PodFacts {
        pod: key.to_string(),
        node: node_name.map(|n| n.to_string()),
        node_ready: node.and_then(|n| n.ready()).map(|c| c.status),
        node_no_execute: node
            .map(|n| {
                n.no_execute_taints()
                    .map(|t| format!("{}:{}", t.key, t.effect.as_str()))
                    .collect()
            })
            .unwrap_or_default(),
        ready: pod.ready(),
        deleting: pod.deleting(),
        eviction: controllers.pod_eviction(key),
        history: log.history(&Subject::Pod(key.to_string())),
    })
}
