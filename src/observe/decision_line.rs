//! One [`Decision`] rendered as a decision-log line (`decision_log.rs` folds and keeps them):
//! its message with the evidence, its journal fields, and the words for reasons, taints and
//! condition statuses that `explain` uses too.

use log::Level;

use crate::controller::zones::display_zone;
use crate::controller::{Decision, Heartbeat, LeaseEvidence, TaintReason};
use crate::model::{ConditionStatus, Taint};
use crate::time::Time;

use super::decision_log::{LogLine, NAMES_SHOWN};

/// `a, b, c, … (27)` or all of them when few.
pub(super) fn list(names: &[String], total: usize) -> String {
    let shown: Vec<&str> = names.iter().take(NAMES_SHOWN).map(String::as_str).collect();
    if total > shown.len() {
        format!("{}, … ({total} in all)", shown.join(", "))
    } else {
        shown.join(", ")
    }
}

pub(super) fn taint_text(t: &Taint) -> String {
    let effect = t.effect.as_str();
    if t.value.is_empty() {
        format!("{}:{effect}", t.key)
    } else {
        format!("{}={}:{effect}", t.key, t.value)
    }
}

fn stamp(t: Option<Time>) -> String {
    t.map_or_else(|| "never".to_string(), |t| t.to_rfc3339())
}

/// A Ready status as the log and `explain` print it.
pub(super) fn status(s: Option<ConditionStatus>) -> &'static str {
    match s {
        None => "missing",
        Some(ConditionStatus::True) => "True",
        Some(ConditionStatus::False) => "False",
        Some(ConditionStatus::Unknown) => "Unknown",
        Some(ConditionStatus::Other) => "unreadable",
    }
}

/// Why a pod goes: the taint and its `timeAdded`, the toleration that ran out.
pub(crate) fn deletion_reason(d: &Decision) -> String {
    let Decision::PodDeletion {
        taint,
        toleration_seconds,
        countdown_from,
        ..
    } = d
    else {
        return String::new();
    };
    let taint = match taint {
        Some(t) => format!(
            "taint {} (timeAdded {})",
            taint_text(t),
            stamp(t.time_added)
        ),
        None => "its node's NoExecute taints".to_string(),
    };
    match toleration_seconds {
        None => format!("{taint} not tolerated"),
        Some(s) => format!(
            "{taint}: tolerationSeconds {s} from {} ran out",
            countdown_from.to_rfc3339()
        ),
    }
}

fn taint_reason(why: &TaintReason) -> String {
    let mut parts = vec![format!("Ready is {}", status(why.ready))];
    if why.reachable {
        parts.push("NoExecute taints off: reachable again, or every zone is down".into());
    }
    if why.swapped {
        parts.push("swapped for the opposite NoExecute taint at once".into());
    }
    if let Some(zone) = &why.zone_queue {
        parts.push(format!("zone {}'s queue gave a token", display_zone(zone)));
    }
    parts.join("; ")
}

/// The line of one decision.
pub fn render(d: &Decision) -> LogLine {
    let node = d.node().map(|n| n.to_string());
    let zone = d.zone().map(|z| display_zone(z));
    let mut pod = None;
    let message = match d {
        Decision::NodeUnknown {
            node,
            last_seen,
            heartbeat,
            grace,
            lease,
            ..
        } => {
            let heard = match heartbeat {
                Heartbeat::Lease { renew_time } => {
                    format!("Lease renewTime {}", stamp(*renew_time))
                }
                Heartbeat::NodeStatus { last_heartbeat } => {
                    format!("status lastHeartbeatTime {}", stamp(*last_heartbeat))
                }
            };
            let confirmed = match lease {
                LeaseEvidence::Stale {
                    read_at,
                    renew_time,
                } => format!(
                    "; a live Lease read at {} confirmed it (renewTime {})",
                    read_at.to_rfc3339(),
                    stamp(*renew_time)
                ),
                LeaseEvidence::Missing { read_at } => format!(
                    "; a live Lease read at {} found no Lease",
                    read_at.to_rfc3339()
                ),
                LeaseEvidence::NoLease => "; no Lease to read".to_string(),
            };
            format!(
                "node {node} judged Unknown: last heard from {} ({heard}), grace {}s ran out{confirmed}",
                last_seen.to_rfc3339(),
                grace.as_secs_f64()
            )
        }
        Decision::NodeReady { node, was, .. } => {
            format!("node {node} Ready again (was {})", status(*was))
        }
        Decision::ZoneState {
            zone,
            from,
            to,
            size,
            not_ready,
            rate,
        } => {
            let rate = if rate.is_never() {
                "tainting stopped".to_string()
            } else {
                format!("tainting rate {rate}")
            };
            format!(
                "zone {}: {} -> {} ({size} nodes, {not_ready} not ready): {rate}",
                display_zone(zone),
                from.map_or("(new)", |s| s.as_str()),
                to.as_str()
            )
        }
        Decision::AllZonesDown {
            entered: true,
            zones,
        } => format!(
            "all {zones} zones fully disrupted: our view of the cluster is likely broken; tainting stops and NoExecute taints come off"
        ),
        Decision::ZoneWaits {
            zone,
            suspects,
            would_be,
            all_down,
        } => {
            let would = if *all_down {
                "every zone would be fully disrupted".to_string()
            } else {
                format!("the zone would be {}", would_be.as_str())
            };
            format!(
                "zone {}: NoExecute tainting waits for {suspects} suspect node(s) about to be judged (deadline within the next pass, or two Lease renewals missed): counted not ready, {would}",
                display_zone(zone)
            )
        }
        Decision::AllZonesDown { entered: false, .. } => {
            "zones no longer all down: tainting resumes; every node gets a fresh grace period"
                .to_string()
        }
        Decision::Taints {
            node,
            added,
            removed,
            why,
            ..
        } => {
            let changes: Vec<String> = added
                .iter()
                .map(|t| format!("+{}", taint_text(t)))
                .chain(removed.iter().map(|t| format!("-{}", taint_text(t))))
                .collect();
            format!(
                "node {node} taints {} ({})",
                changes.join(" "),
                taint_reason(why)
            )
        }
        Decision::PodsNotReady { node, pods, .. } => {
            let names: Vec<String> = pods.iter().map(ToString::to_string).collect();
            if pods.len() == 1 {
                pod = Some(names[0].clone());
                format!("pod {} marked NotReady: node {node} is not Ready", names[0])
            } else {
                format!(
                    "{} pods on node {node} marked NotReady: {} [+{} lines folded]",
                    pods.len(),
                    list(&names, pods.len()),
                    pods.len() - 1
                )
            }
        }
        Decision::PodDeletion { pod: key, node, .. } => {
            pod = Some(key.to_string());
            format!(
                "deleting pod {key} on node {}: {}",
                node.as_deref().unwrap_or("(none)"),
                deletion_reason(d)
            )
        }
        Decision::DeletionCancelled { pod: key } => {
            pod = Some(key.to_string());
            format!("deletion of pod {key} cancelled")
        }
        Decision::Fencing { detail, .. } | Decision::Pause { detail } => detail.clone(),
        Decision::Brake(b) => brake_line(b),
        Decision::PodsKeptReady { .. } | Decision::DomainHold { .. } => {
            crate::observe::partition_lines::message(d)
        }
    };
    LogLine {
        level: Level::Info,
        message,
        node,
        pod,
        zone,
        decision: d.kind(),
    }
}

/// `decision=brake`: one line when a brake engages, one when it releases.
fn brake_line(b: &crate::controller::brake::BrakeChange) -> String {
    if b.engaged {
        format!(
            "brake engaged ({}): {} of {} nodes not Ready or about to be judged, more than max_unhealthy = {}; no NoExecute taint, pod deletion or fence on its nodes until it releases",
            b.scope, b.unhealthy, b.total, b.limit
        )
    } else {
        format!(
            "brake released ({}): {} of {} nodes not Ready, within max_unhealthy = {} for disruption_cooldown; held taints and deletions go ahead",
            b.scope, b.unhealthy, b.total, b.limit
        )
    }
}
