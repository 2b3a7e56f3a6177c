//! Validation of issue #26's part A keys (`controller/partitions.rs`): `mark_pods_not_ready`
//! (a mode, or the old boolean), `disruption_domain` (a label key or a list of them),
//! `full_disruption` and `hold_max`, global and per `[[pool]]`. Same rules as the rest of the
//! file: one line naming the file, the line and the key.

use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;

use crate::controller::partitions::{FullDisruption, PodsNotReady};

use super::policies::is_qualified_name;
use super::raw::{DurationText, Field};
use super::{ConfigError, Validator};

/// `mark_pods_not_ready`: a mode, or the boolean it replaces (true = always, false = never).
#[derive(Deserialize)]
#[serde(untagged)]
pub(super) enum ModeOrBool {
    Bool(bool),
    Mode(String),
}

/// `disruption_domain`: one label key, or a list of them.
#[derive(Deserialize)]
#[serde(untagged)]
pub(super) enum OneOrMany {
    One(String),
    Many(Vec<String>),
}

/// The four keys as written, global or in one pool.
pub(super) struct RawPartitions<'r> {
    pub mark_pods_not_ready: &'r Field<ModeOrBool>,
    pub disruption_domain: &'r Field<OneOrMany>,
    pub full_disruption: &'r Field<String>,
    pub hold_max: &'r Field<DurationText>,
}

/// The four keys validated; `None`: not set.
#[derive(Default)]
pub(super) struct Partitions {
    pub mark_pods_not_ready: Option<PodsNotReady>,
    pub disruption_domain: Option<Vec<String>>,
    pub full_disruption: Option<FullDisruption>,
    pub hold_max: Option<Duration>,
}

impl Validator<'_> {
    /// `prefix` is `""` at the top level, `"pool."` in a pool.
    pub(super) fn partitions(
        &self,
        raw: RawPartitions<'_>,
        prefix: &str,
    ) -> Result<Partitions, ConfigError> {
        let key = |k: &str| format!("{prefix}{k}");
        let mark_pods_not_ready = match raw.mark_pods_not_ready {
            None => None,
            Some(v) => Some(match v.get_ref() {
                ModeOrBool::Bool(true) => PodsNotReady::Always,
                ModeOrBool::Bool(false) => PodsNotReady::Never,
                ModeOrBool::Mode(m) => PodsNotReady::parse(m).ok_or_else(|| {
                    self.error(
                        Some(v.span()),
                        &key("mark_pods_not_ready"),
                        format!(
                            "must be \"always\", \"unless-disrupted\" or \"never\" (or the old \
                             true / false), got {m:?}"
                        ),
                    )
                })?,
            }),
        };
        let disruption_domain = match raw.disruption_domain {
            None => None,
            Some(v) => Some(self.domain_labels(v, &key("disruption_domain"))?),
        };
        let full_disruption = match raw.full_disruption {
            None => None,
            Some(v) => Some(FullDisruption::parse(v.get_ref()).ok_or_else(|| {
                self.error(
                    Some(v.span()),
                    &key("full_disruption"),
                    format!("must be \"evict\" or \"hold\", got {:?}", v.get_ref()),
                )
            })?),
        };
        let hold_max = match raw.hold_max {
            None => None,
            Some(_) => Some(self.duration(raw.hold_max, &key("hold_max"), "0s", false)?),
        };
        Ok(Partitions {
            mark_pods_not_ready,
            disruption_domain,
            full_disruption,
            hold_max,
        })
    }

    fn domain_labels(&self, v: &Spanned<OneOrMany>, key: &str) -> Result<Vec<String>, ConfigError> {
        let keys = match v.get_ref() {
            OneOrMany::One(k) => vec![k.clone()],
            OneOrMany::Many(ks) => ks.clone(),
        };
        if keys.is_empty() {
            return Err(self.error(
                Some(v.span()),
                key,
                "must name at least one label key (leave it out for the zone)".to_string(),
            ));
        }
        for (i, k) in keys.iter().enumerate() {
            if !is_qualified_name(k) {
                return Err(self.error(
                    Some(v.span()),
                    key,
                    format!("{k:?} is not a valid label key"),
                ));
            }
            if keys[..i].contains(k) {
                return Err(self.error(Some(v.span()), key, format!("{k:?} is named twice")));
            }
        }
        Ok(keys)
    }
}

/// TOML spelling of a domain's label keys.
pub(super) fn domain_text(keys: &[String]) -> String {
    let quoted: Vec<String> = keys
        .iter()
        .map(|k| toml::Value::String(k.clone()).to_string())
        .collect();
    format!("[{}]", quoted.join(", "))
}
