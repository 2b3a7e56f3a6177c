//! What `explain` adds about the brake and per-pool timing: the brake covering a node (or a pod's
//! node), and where a pod's not-ready/unreachable timing comes from. Lines inserted after `next:`,
//! only when the keys are configured, so an `explain` without them reads as before.

use crate::controller::Controllers;
use crate::controller::brake::{BrakeScope, BrakeState};
use crate::controller::pool_timing::TimingSource;
use crate::model::PodKey;

fn brake_text(scope: &BrakeScope, b: &BrakeState) -> String {
    format!(
        "{scope}: {} of {} nodes not Ready or about to be judged, max_unhealthy = {}",
        b.unhealthy, b.total, b.limit
    )
}

/// The brake line of a node: engaged over it, or configured and released.
pub(crate) fn node_lines(controllers: &Controllers, node: &str) -> Vec<String> {
    let lc = controllers.lifecycle();
    let store = controllers.store();
    if let Some((scope, b)) = lc.brake_covering(store, node) {
        let since = b.engaged_since.map(|t| t.to_rfc3339()).unwrap_or_default();
        let release = match b.within_since {
            Some(_) => " (back within the limit: it releases after disruption_cooldown)",
            None => "",
        };
        return vec![format!(
            "brake: engaged since {since} ({}): no NoExecute taint, pod deletion or fence on this node until it releases{release}",
            brake_text(scope, b)
        )];
    }
    lc.brakes()
        .scopes
        .iter()
        .filter(|(scope, _)| match scope {
            BrakeScope::Fleet => true,
            BrakeScope::Pool(p) => store
                .node(node)
                .and_then(|n| crate::controller::pools::pool_of(&lc.settings().pools, n))
                .is_some_and(|q| q.name == *p),
        })
        .map(|(scope, b)| format!("brake: released ({})", brake_text(scope, b)))
        .collect()
}

/// The brake holding the pod's deletion, and which toleration seconds it is judged with.
pub(crate) fn pod_lines(controllers: &Controllers, key: &PodKey) -> Vec<String> {
    let store = controllers.store();
    let Some(pod) = store.pods().get(key) else {
        return Vec::new();
    };
    let Some(node) = pod.node_name().and_then(|n| store.node(n)) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let lc = controllers.lifecycle();
    if let Some((scope, b)) = lc.brake_covering(store, &node.name) {
        let held = controllers.eviction().is_some_and(|e| e.held_by_brake(key));
        out.push(format!(
            "brake: engaged ({}): {}",
            brake_text(scope, b),
            if held {
                "its deletion came due and waits for the release (then at once)"
            } else {
                "no deletion starts until it releases; its countdown keeps its deadline"
            }
        ));
    }
    let settings = lc.settings();
    let configured = settings.default_toleration_seconds.is_some()
        || settings
            .pools
            .iter()
            .any(|p| p.default_toleration_seconds.is_some());
    if let Some(eviction) = controllers.eviction().filter(|_| configured) {
        let admission = settings.admission_default_toleration_seconds;
        let line = match eviction.timing_source(node, pod.tolerations()) {
            TimingSource::Replaced { seconds, pool } => format!(
                "eviction timing: not-ready/unreachable tolerated {seconds}s, from {}: the pod kept the admission default ({admission}s), which that stands in for",
                match pool {
                    Some(p) => format!("pool {p}'s default_toleration_seconds"),
                    None => "the global default_toleration_seconds".to_string(),
                }
            ),
            TimingSource::Own => match settings.default_toleration_for(node) {
                Some((s, _)) => format!(
                    "eviction timing: its own tolerations: they are not exactly the admission default ({admission}s), so the {s}s set for its node does not apply"
                ),
                None => "eviction timing: its own tolerations (no default_toleration_seconds for its node)".to_string(),
            },
        };
        out.push(line);
    }
    out
}

/// `text` with `lines` inserted after its `next:` line.
pub(crate) fn insert_after_next(text: String, lines: Vec<String>) -> String {
    if lines.is_empty() {
        return text;
    }
    let mut out = String::with_capacity(text.len() + 200);
    let mut done = false;
    for line in text.split_inclusive('\n') {
        out.push_str(line);
        if !done && line.starts_with("next: ") {
            for l in &lines {
                out.push_str(l);
                out.push('\n');
            }
            done = true;
        }
    }
    if !done {
        for l in &lines {
            out.push_str(l);
            out.push('\n');
        }
    }
    out
}
