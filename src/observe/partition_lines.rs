//! The decision lines of partitions (pods kept Ready, a domain's hold), apart from
//! `decision_log.rs` to keep it short.

use crate::controller::Decision;
use crate::controller::zones::display_zone;

/// The message of a [`Decision::PodsKeptReady`] or [`Decision::DomainHold`] line.
pub(super) fn message(d: &Decision) -> String {
    match d {
        Decision::PodsKeptReady {
            node,
            zone,
            state,
            all_down,
        } => {
            let why = if *all_down {
                "every domain is down".to_string()
            } else {
                format!(
                    "its domain {} is {} (counting the nodes about to be judged)",
                    display_zone(zone),
                    state.as_str()
                )
            };
            format!(
                "pods on node {node} kept Ready (mark_pods_not_ready = \"unless-disrupted\"): {why}, most likely a link rather than the machines; marked once the node fails alone"
            )
        }
        Decision::DomainHold {
            zone,
            until,
            end: None,
        } => {
            let until = match until {
                Some(t) => format!("until {} (hold_max)", t.to_rfc3339()),
                None => "until it recovers (no hold_max)".to_string(),
            };
            format!(
                "domain {} fully disrupted: held (full_disruption = \"hold\"), no NoExecute taint nor eviction from it {until}",
                display_zone(zone)
            )
        }
        Decision::DomainHold {
            zone,
            end: Some(end),
            ..
        } => format!(
            "domain {} leaves its hold: {}",
            display_zone(zone),
            end.as_str()
        ),
        _ => String::new(),
    }
}
