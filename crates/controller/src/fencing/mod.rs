//! Fencing for bare metal, sans-IO: power off a node that stopped heartbeating through the
//! operator's command, then let Kubernetes release its stateful pods and volumes
//! with the `node.kubernetes.io/out-of-service=nodeshutdown:NoExecute` taint (non-graceful node
//! shutdown, GA in 1.28).
//!
//! One outage of a node is the span its Ready condition stays Unknown; it is named by that
//! condition's `lastTransitionTime`. For each outage:
//! 1. the node has been Ready=Unknown (silent: a kubelet reporting Ready=False is alive) for
//!    `after` (counted from the second after the stored `lastTransitionTime`, which the API
//!    truncates, and from when this instance started acting), its zone is `Normal`, not every zone is down, this instance leads and is synced
//!    (the machine is fed nothing before that), no out-of-service taint is on it, and fewer than
//!    `max_concurrent` fences are under way: read the node and its Lease live
//!    (`ReadFenceTarget`);
//! 2. the read confirms it: same node (uid), still Unknown for the same outage, Lease not
//!    renewed within `node_monitor_grace_period` (or absent), labels match `match_labels`, the
//!    gates still hold: record the attempt on the node (annotation [`ATTEMPT_ANNOTATION`],
//!    written before anything runs), then run the command (`RunFenceCommand`);
//! 3. exit 0 and the node still Unknown for the same outage: add the out-of-service taint and
//!    [`TAINT_ADDED_ANNOTATION`] in one write. A node that came back while its command ran is
//!    not tainted. A failure (exit status, signal, timeout, spawn error) is tried again after
//!    `retry_backoff`, doubled per failure up to `retry_backoff_max`;
//! 4. a node reporting Ready=True again that carries the taint *we* added (in memory, or
//!    [`TAINT_ADDED_ANNOTATION`] read live after a restart) gets it removed, with the
//!    annotation, when `remove_out_of_service_on_recovery`. A taint we did not add is never
//!    removed.
//!
//! Held off (`holds.rs`): a fleet pause of fencing, a node's maintenance annotation, or its cordon
//! (with `skip_cordoned`) keeps it from steps 1 and 2, checked on the cache and again on the live
//! read; the node is checked again every `node_monitor_period`.
//!
//! New leader rule: nothing is fenced before `after` has passed since this instance started
//! acting (the initial sync of its leadership), however old the outage: it must have watched
//! the node silent itself for that long.
//!
//! Restart rule: a node that carries an attempt record for its current outage that this
//! process did not make (a restart, or a new leader, while a command ran) is not fenced at
//! once: it gets one more full `after` (from when this instance started acting, which is
//! after the record was written), then every check of step 2 again on a new live read, so no
//! two runs follow each other without a fresh verdict.
//!
//! Every later step passes the checks of the first: an escalation step after a failed one, the
//! power-cycle's power-on, and a step resumed after a restart (`cycle.rs`). A fleet pause of
//! tainting holds the out-of-service taint (step 3) as it holds every new NoExecute taint.

/// Records a fencing step for the decision log (the core logs nothing itself).
macro_rules! decide {
    ($self:ident, $name:expr, $($arg:tt)*) => {
        $self.decisions.push(crate::decisions::Decision::Fencing {
            node: $name.clone(),
            detail: format!($($arg)*),
        })
    };
}

mod confirm;
mod cycle;
mod holds;
mod machine;
mod outage;
mod outcomes;
#[cfg(test)]
mod tests;

use crate::model::{Name, Taint, TaintEffect};
use crate::time::Time;

pub use super::actions::{FenceCommand, FenceStep};
pub use super::inputs::{FenceOutcome, FenceTarget, FenceTargetOutcome};
pub use super::settings::FencingPolicy;
pub(crate) use machine::Fencing;

pub(crate) const OUT_OF_SERVICE_KEY: &str = "node.kubernetes.io/out-of-service";
pub(crate) const OUT_OF_SERVICE_VALUE: &str = "nodeshutdown";
/// `outage=<Ready lastTransitionTime>,started=<time>`: written before the command runs.
pub const ATTEMPT_ANNOTATION: &str = "node-lifecycled.io/fence-attempt";
/// Power-cycle progress after the power-off: `outage=<t>,on=started|done,at=<t>`, written before
/// the power-on command runs and after it succeeds.
pub const STATE_ANNOTATION: &str = "node-lifecycled.io/fence-state";
/// `<Ready lastTransitionTime>` of the outage whose out-of-service taint we added.
pub const TAINT_ADDED_ANNOTATION: &str = "node-lifecycled.io/out-of-service-added";

pub fn out_of_service_taint(now: Time) -> Taint {
    Taint {
        key: Name::from(OUT_OF_SERVICE_KEY),
        value: Name::from(OUT_OF_SERVICE_VALUE),
        effect: TaintEffect::NoExecute,
        // Second precision, as the API stores it.
        time_added: Some(Time::from_unix_millis(now.as_unix_millis() / 1000 * 1000)),
    }
}

pub fn is_out_of_service(t: &Taint) -> bool {
    &*t.key == OUT_OF_SERVICE_KEY && t.effect == TaintEffect::NoExecute
}

/// The attempt record's value.
pub(crate) fn attempt_record(outage: Time, started: Time) -> String {
    format!(
        "outage={},started={}",
        outage.to_rfc3339(),
        started.to_rfc3339()
    )
}

/// The attempt record of step `step` (escalation: each step is recorded before it runs).
pub(crate) fn attempt_record_step(outage: Time, started: Time, step: usize) -> String {
    format!("{},step={step}", attempt_record(outage, started))
}

/// The step an attempt record names (0 when none).
pub(crate) fn attempt_step(record: &str) -> usize {
    record
        .split(',')
        .find_map(|part| part.strip_prefix("step="))
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

/// A power-cycle state record.
pub(crate) fn state_record(outage: Time, on: &str, at: Time) -> String {
    format!(
        "outage={},on={on},at={}",
        outage.to_rfc3339(),
        at.to_rfc3339()
    )
}

/// `(outage, on, at)` of a state record.
pub(crate) fn parse_state(record: &str) -> Option<(Time, String, Time)> {
    let field = |k: &str| {
        record
            .split(',')
            .find_map(|part| part.strip_prefix(k).map(str::to_string))
    };
    Some((
        Time::parse_rfc3339(&field("outage=")?)?,
        field("on=")?,
        Time::parse_rfc3339(&field("at=")?)?,
    ))
}

/// The outage an attempt record names (`None` when unreadable: then it names no outage).
pub(crate) fn attempt_outage(record: &str) -> Option<Time> {
    record
        .split(',')
        .find_map(|part| part.strip_prefix("outage="))
        .and_then(Time::parse_rfc3339)
}
