//! Partitions are not failures: what a node's pods show while it cannot be reached
//! (`mark_pods_not_ready`), which nodes share the zone rules (`disruption_domain`), and what a
//! fully dark domain means (`full_disruption`, `hold_max`). Every default is upstream's.
//!
//! A disruption domain takes the place of upstream's zone everywhere the zone rules and rates
//! use it: the zone states, the rate-limited queues, suspects, fencing's zone gate, and the
//! names in metrics, the dump and `explain`. Its key is the values of the configured labels
//! (`example.com/site=lab-3`, several labels joined by `,`); a node lacking one of them falls
//! back to upstream's region + zone key, so a domain key never collides with a zone key (those
//! hold a NUL separator, ours a `=`).

use std::time::Duration;

/// Whether a node's pods are marked NotReady when the node stops being Ready.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Default)]
pub enum PodsNotReady {
    /// Upstream: at the verdict.
    #[default]
    Always,
    /// Not while the node's disruption domain is partially or fully disrupted, or every
    /// domain is down (most likely a link, not the machines); still when the node fails alone.
    UnlessDisrupted,
    /// Never (the old `mark_pods_not_ready = false`).
    Never,
}

impl PodsNotReady {
    pub fn parse(s: &str) -> Option<PodsNotReady> {
        match s {
            "always" => Some(PodsNotReady::Always),
            "unless-disrupted" => Some(PodsNotReady::UnlessDisrupted),
            "never" => Some(PodsNotReady::Never),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            PodsNotReady::Always => "always",
            PodsNotReady::UnlessDisrupted => "unless-disrupted",
            PodsNotReady::Never => "never",
        }
    }
}

/// What a fully disrupted domain beside healthy ones means.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Default)]
pub enum FullDisruption {
    /// Upstream: presumed dead, tainted at the normal rate.
    #[default]
    Evict,
    /// Presumed cut off: no NoExecute taint and no eviction until `hold_max` has passed since
    /// it became fully disrupted (forever without `hold_max`).
    Hold,
}

impl FullDisruption {
    pub fn parse(s: &str) -> Option<FullDisruption> {
        match s {
            "evict" => Some(FullDisruption::Evict),
            "hold" => Some(FullDisruption::Hold),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            FullDisruption::Evict => "evict",
            FullDisruption::Hold => "hold",
        }
    }
}

/// How long a domain is held: `None` without end.
pub(crate) type HoldFor = Option<Duration>;
