//! Validation of the partition keys (`controller/partitions.rs`): `mark_pods_not_ready` (a mode, or
//! the old boolean), `disruption_domain` (a label key or a list of them), `full_disruption` and
//! `hold_max`, global and per `[[pool]]`. Same rules as the rest of the
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
    pub(crate) mark_pods_not_ready: &'r Field<ModeOrBool>,
    pub(crate) disruption_domain: &'r Field<OneOrMany>,
    pub(crate) full_disruption: &'r Field<String>,
    pub(crate) hold_max: &'r Field<DurationText>,
}

/// The four keys validated; `None`: not set.
#[derive(Default)]
pub(super) struct Partitions {
    pub(crate) mark_pods_not_ready: Option<PodsNotReady>,
    pub(crate) disruption_domain: Option<Vec<String>>,
    pub(crate) full_disruption: Option<FullDisruption>,
    pub(crate) hold_max: Option<Duration>,
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

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::time::Duration;

    use crate::config::Config;
    use crate::controller::partitions::{FullDisruption, PodsNotReady};

    const PARTITIONS: &str = r#"mark_pods_not_ready = "unless-disrupted"
disruption_domain = "example.com/site"
full_disruption = "hold"
hold_max = "30m"

[[pool]]
name = "racks"
match_labels = { "example.com/rack" = "r7" }
mark_pods_not_ready = true
disruption_domain = ["example.com/site", "example.com/rack"]
full_disruption = "evict"
hold_max = "1h"

[[pool]]
name = "old"
match_labels = { "example.com/rack" = "r8" }
mark_pods_not_ready = false
"#;

    #[test]
    fn partition_keys_are_read_printed_and_read_back_the_same() {
        let c = Config::from_str(PARTITIONS, Path::new("<test>")).unwrap();
        assert_eq!(c.mark_pods_not_ready, PodsNotReady::UnlessDisrupted);
        assert_eq!(c.disruption_domain, ["example.com/site"]);
        assert_eq!(c.full_disruption, FullDisruption::Hold);
        assert_eq!(c.hold_max, Some(Duration::from_secs(1800)));
        let racks = &c.pools[0];
        assert_eq!(racks.mark_pods_not_ready, Some(PodsNotReady::Always));
        assert_eq!(
            racks.disruption_domain.as_deref(),
            Some(
                &[
                    "example.com/site".to_string(),
                    "example.com/rack".to_string()
                ][..]
            )
        );
        assert_eq!(racks.full_disruption, Some(FullDisruption::Evict));
        assert_eq!(racks.hold_max, Some(Duration::from_secs(3600)));
        assert_eq!(c.pools[1].mark_pods_not_ready, Some(PodsNotReady::Never));
        assert_eq!(c.pools[1].disruption_domain, None);
        let printed = c.to_toml();
        let back = Config::from_str(&printed, Path::new("<printed>"))
            .unwrap_or_else(|e| panic!("{e}\n{printed}"));
        assert_eq!(back, c, "{printed}");
        // A reload names each key that changed.
        let changed: Vec<String> = c
            .changes_since(&Config::default())
            .into_iter()
            .map(|ch| ch.key)
            .collect();
        for key in [
            "mark_pods_not_ready",
            "disruption_domain",
            "full_disruption",
            "hold_max",
            "pool",
        ] {
            assert!(changed.iter().any(|k| k == key), "{key}: {changed:?}");
        }
    }

    #[test]
    fn without_the_keys_the_defaults_are_upstreams() {
        let d = Config::default();
        assert_eq!(d.mark_pods_not_ready, PodsNotReady::Always);
        assert!(d.disruption_domain.is_empty());
        assert_eq!(d.full_disruption, FullDisruption::Evict);
        assert_eq!(d.hold_max, None);
        let printed = d.to_toml();
        assert!(
            printed.contains("mark_pods_not_ready = \"always\""),
            "{printed}"
        );
        assert!(
            printed.contains("# disruption_domain is not set"),
            "{printed}"
        );
    }

    #[test]
    fn bad_partition_values_name_file_line_and_key() {
        let cases = [
            ("mark_pods_not_ready = \"maybe\"", "mark_pods_not_ready"),
            ("mark_pods_not_ready = 3", "mark_pods_not_ready"),
            ("full_disruption = \"keep\"", "full_disruption"),
            ("disruption_domain = \"UPPER/x\"", "disruption_domain"),
            ("disruption_domain = [\"a\", \"a\"]", "disruption_domain"),
            ("hold_max = \"-1s\"", "hold_max"),
        ];
        for (text, key) in cases {
            let e = Config::from_str(&format!("\n{text}\n"), Path::new("bad.toml")).unwrap_err();
            assert_eq!((e.line, e.key.as_str()), (Some(2), key), "{text}: {e}");
        }
    }
}
