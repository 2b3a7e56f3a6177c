//! `[fencing]`'s part of the settings: what the controller's fencing machine
//! (`controller/fencing/`) reads.

use std::time::Duration;

/// The controller's part of `[fencing]`; the command and its timeout belong to the shell.
#[derive(Clone, Debug, PartialEq)]
pub struct FencingPolicy {
    pub after: Duration,
    pub max_concurrent: usize,
    pub match_labels: Vec<(String, String)>,
    pub retry_backoff: Duration,
    pub retry_backoff_max: Duration,
    pub remove_out_of_service_on_recovery: bool,
    /// A cordoned node (`spec.unschedulable`) is not fenced (default true).
    pub skip_cordoned: bool,
    /// Power-off steps, tried in order until one succeeds (`[[fencing.step]]`; 1 = `command`).
    pub steps: usize,
    /// `mode = "power-cycle"`: after the taint and the pods gone, power on, wait for Ready
    /// within `recover_timeout`, remove the taint.
    pub power_cycle: bool,
    pub recover_timeout: Duration,
}

impl FencingPolicy {
    pub(crate) fn selects(&self, labels: &[(String, String)]) -> bool {
        self.match_labels
            .iter()
            .all(|(k, v)| labels.iter().any(|(lk, lv)| lk == k && lv == v))
    }

    /// Wait after the `failures`-th failure (1 for the first).
    pub(crate) fn backoff(&self, failures: u32) -> Duration {
        let doublings = failures.saturating_sub(1).min(30);
        self.retry_backoff
            .saturating_mul(1u32 << doublings)
            .min(self.retry_backoff_max)
    }
}
