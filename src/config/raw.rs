//! The file as written, beyond what the tables of `keys.rs` generate: the nested tables of
//! pools, condition taints and fence steps, durations as text, and the line and key of a byte
//! offset. Every key optional, every value with its position.
//!
//! serde does the shape checks (unknown keys, wrong types) and `deny_unknown_fields` makes a typo
//! an error instead of a silently ignored setting; `Spanned` keeps each value's byte range so the
//! validation (`kinds.rs`, `validate.rs`) can name the line of a value that is well-typed but out
//! of range.

use serde::Deserialize;
use toml::Spanned;

pub(super) type Field<T> = Option<Spanned<T>>;

/// One entry of a pool's `match_expressions`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawRequirement {
    pub(crate) key: Field<String>,
    pub(crate) operator: Field<String>,
    pub(crate) values: Field<Vec<String>>,
}

/// One `[[condition_taint]]`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawConditionTaint {
    pub(crate) condition: Field<String>,
    pub(crate) status: Field<String>,
    pub(crate) key: Field<String>,
    pub(crate) value: Field<String>,
    pub(crate) effect: Field<String>,
}

/// One `[[fencing.step]]`.
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawFenceStep {
    pub(crate) command: Field<Vec<String>>,
    pub(crate) timeout: Field<DurationText>,
}

/// A duration as written ("1m30s"); parsed in validation so the error can say why. Its own
/// type only to make serde's type error say what is expected instead of "a string".
pub(super) struct DurationText(pub String);

impl<'de> Deserialize<'de> for DurationText {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = DurationText;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a duration in quotes, like \"5s\" or \"1m30s\"")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<DurationText, E> {
                Ok(DurationText(v.to_string()))
            }
        }
        d.deserialize_str(Visitor)
    }
}

/// 1-based line of a byte offset.
pub(super) fn line_of(text: &str, offset: usize) -> usize {
    let end = offset.min(text.len());
    text.as_bytes()[..end]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}

/// The dotted key a TOML line defines, with its enclosing `[section]`; used to name the key of
/// an error serde reports only by position. `None` for blank lines, comments and oddities.
pub(super) fn key_at_line(text: &str, line: usize) -> Option<String> {
    let mut section: Option<String> = None;
    for (i, raw) in text.lines().enumerate() {
        let trimmed = raw.trim();
        if trimmed.starts_with('[') {
            let name = trimmed
                .trim_start_matches('[')
                .split(']')
                .next()
                .unwrap_or("")
                .trim();
            if i + 1 == line {
                return Some(name.to_string());
            }
            section = Some(name.to_string());
            continue;
        }
        if i + 1 == line {
            let (key, _) = trimmed.split_once('=')?;
            let key = key.trim().trim_matches('"').trim_matches('\'');
            if key.is_empty() || key.starts_with('#') {
                return None;
            }
            return Some(match section {
                Some(s) => format!("{s}.{key}"),
                None => key.to_string(),
            });
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_at_line_names_the_section() {
        let text = "a = 1\n# c\n[api]\nqps = 2\n\"burst\" = 3\n[leader_election]\n";
        assert_eq!(key_at_line(text, 1).as_deref(), Some("a"));
        assert_eq!(key_at_line(text, 2), None);
        assert_eq!(key_at_line(text, 3).as_deref(), Some("api"));
        assert_eq!(key_at_line(text, 4).as_deref(), Some("api.qps"));
        assert_eq!(key_at_line(text, 5).as_deref(), Some("api.burst"));
        assert_eq!(key_at_line(text, 6).as_deref(), Some("leader_election"));
        assert_eq!(key_at_line(text, 99), None);
        assert_eq!(line_of(text, 0), 1);
        assert_eq!(line_of(text, 6), 2);
        assert_eq!(line_of(text, 10_000), 7);
    }
}
