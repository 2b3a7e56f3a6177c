//! Validation of the brake and the per-pool eviction timing: `max_unhealthy` (global and per
//! `[[pool]]`), `admission_default_toleration_seconds` (global only) and
//! `default_toleration_seconds` (global and per pool). Same rules as the rest of the file: one
//! line naming the file, the line and the key.

use crate::controller::brake::MaxUnhealthy;
use serde::Deserialize;

use super::raw::Field;
use super::{ConfigError, Validator};

/// `max_unhealthy` as written: a count (`10`) or a percentage string (`"40%"`).
#[derive(Deserialize)]
#[serde(untagged)]
pub(super) enum RawMaxUnhealthy {
    Count(i64),
    Text(String),
    /// Refused with a reason (`0.4`: a fraction is not a count; say `"40%"`).
    Fraction(f64),
}

/// Longest `default_toleration_seconds` accepted: a year (a longer one is a typo, and the sum
/// with a taint's `timeAdded` must stay far from overflow).
const MAX_TOLERATION_SECONDS: i64 = 365 * 24 * 3600;

/// Keys only the top level may set: a `[[pool]]` writing one gets this reason, not a bare
/// "unknown key".
pub(super) const GLOBAL_ONLY: [&str; 9] = [
    "admission_default_toleration_seconds",
    "disruption_cooldown",
    "node_monitor_period",
    "large_cluster_size_threshold",
    "unhealthy_zone_threshold",
    "taint_based_eviction",
    "pod_eviction_timeout",
    "early_suspects",
    "lifecycle_conditions",
];

impl Validator<'_> {
    pub(super) fn max_unhealthy(
        &self,
        field: &Field<RawMaxUnhealthy>,
        key: &str,
    ) -> Result<Option<MaxUnhealthy>, ConfigError> {
        let Some(v) = field else {
            return Ok(None);
        };
        let bad = |why: String| self.error(Some(v.span()), key, why);
        match v.get_ref() {
            RawMaxUnhealthy::Count(n) => u32::try_from(*n)
                .map(|n| Some(MaxUnhealthy::Count(n)))
                .map_err(|_| {
                    bad(format!(
                        "must be a node count >= 0 or a percentage, got {n}"
                    ))
                }),
            RawMaxUnhealthy::Fraction(x) => Err(bad(format!(
                "must be a node count (10) or a percentage in quotes (\"40%\"), got {x}"
            ))),
            RawMaxUnhealthy::Text(text) => {
                let number = text.trim().strip_suffix('%').ok_or_else(|| {
                    bad(format!(
                        "must be a node count (10) or a percentage (\"40%\"), got {text:?}"
                    ))
                })?;
                match number.trim().parse::<f64>() {
                    Ok(p) if (0.0..=100.0).contains(&p) => Ok(Some(MaxUnhealthy::Percent(p))),
                    _ => Err(bad(format!(
                        "a percentage must be between 0% and 100%, got {text:?}"
                    ))),
                }
            }
        }
    }

    pub(super) fn toleration_seconds(
        &self,
        field: &Field<i64>,
        key: &str,
    ) -> Result<Option<u64>, ConfigError> {
        let Some(v) = field else {
            return Ok(None);
        };
        let s = *v.get_ref();
        if !(0..=MAX_TOLERATION_SECONDS).contains(&s) {
            return Err(self.error(
                Some(v.span()),
                key,
                format!("must be seconds between 0 and {MAX_TOLERATION_SECONDS}, got {s}"),
            ));
        }
        Ok(Some(s as u64))
    }
}
