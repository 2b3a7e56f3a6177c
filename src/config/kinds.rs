//! How a key is read, checked and printed, by the kind of value it holds: a key names its kind
//! in the table of `keys.rs`, and the kind does the rest (the type serde reads, the range check
//! with its one-line error naming file, line and key, and the TOML spelling `render.rs` prints).
//! A new key of an existing kind needs no code here.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use log::LevelFilter;

use crate::controller::brake::MaxUnhealthy;
use crate::controller::partitions::{FullDisruption, PodsNotReady};
use crate::logging::LogFormat;
use crate::time::Rate;

use super::brake::RawMaxUnhealthy;
use super::partitions::{ModeOrBool, OneOrMany, domain_text};
use super::raw::{DurationText, Field};
use super::render::{dur, float, level_name, string};
use super::{ConfigError, DumpFormat, Validator, is_dns_subdomain, parse_level};

pub(super) trait Kind {
    /// The value as written; its `Deserialize` makes serde's type error say what is expected.
    type Raw;
    /// The value as the layer that owns the key holds it.
    type Value;
    /// The checked value, `Ok(None)` when the file does not set the key (its owner's default
    /// stands). An error names `key` and the value's line.
    fn check(
        v: &Validator<'_>,
        field: &Field<Self::Raw>,
        key: &str,
    ) -> Result<Option<Self::Value>, ConfigError>;
    /// The TOML spelling; `None`: unset (printed as a comment).
    fn render(value: &Self::Value) -> Option<String>;
}

/// A key a `[[pool]]` may override: its field in the pool (`controller/pools.rs`) is unset to
/// inherit the global value.
pub(super) trait Override: Kind {
    type Field;
    fn field(value: Self::Value) -> Self::Field;
    fn render_field(field: &Self::Field) -> Option<String>;
}

/// Kinds whose value is plain: the pool's field is an `Option` of it.
macro_rules! override_plain {
    ($($kind:ident),*) => {$(
        impl Override for $kind {
            type Field = Option<<$kind as Kind>::Value>;
            fn field(value: Self::Value) -> Self::Field {
                Some(value)
            }
            fn render_field(field: &Self::Field) -> Option<String> {
                field.as_ref().and_then(<$kind as Kind>::render)
            }
        }
    )*};
}

/// Kinds whose value is already optional: the pool's field is the value, unset inherits.
macro_rules! override_optional {
    ($($kind:ident),*) => {$(
        impl Override for $kind {
            type Field = <$kind as Kind>::Value;
            fn field(value: Self::Value) -> Self::Field {
                value
            }
            fn render_field(field: &Self::Field) -> Option<String> {
                <$kind as Kind>::render(field)
            }
        }
    )*};
}

override_plain!(Period, PerSecond, PodsMode, DomainKeys, Disruption);
override_optional!(Limit, Brake, MaybeSeconds);

/// A duration greater than zero.
pub(super) struct Period;
/// A duration, zero allowed.
pub(super) struct Delay;
/// An optional duration greater than zero (unset: no limit).
pub(super) struct Limit;
/// Events per second (`crate::time::Rate`).
pub(super) struct PerSecond;
/// A fraction in (0, 1].
pub(super) struct Fraction;
/// A number of nodes.
pub(super) struct NodeCount;
pub(super) struct Flag;
/// Seconds between 0 and a year.
pub(super) struct Seconds;
/// Seconds between 0 and a year, or unset.
pub(super) struct MaybeSeconds;
/// A node count or a percentage, or unset (`controller/brake.rs`).
pub(super) struct Brake;
/// `mark_pods_not_ready`: a mode, or the boolean it replaces.
pub(super) struct PodsMode;
/// `disruption_domain`: one label key or a list of them (empty: the zones).
pub(super) struct DomainKeys;
/// `full_disruption`: `evict` or `hold`.
pub(super) struct Disruption;
pub(super) struct Level;
/// `text` or `json`, for the state dump.
pub(super) struct DumpText;
/// `text` or `json`, for the log lines.
pub(super) struct LogText;
/// A loopback `ip:port`, or unset.
pub(super) struct LoopbackAddress;
/// An absolute socket path; `""`: none.
pub(super) struct SocketPath;
/// An absolute file path; `""`: none.
pub(super) struct FilePath;

/// A Kubernetes object name (RFC 1123 subdomain), as of a namespace or a Lease.
pub(super) struct ObjectName;
/// A non-blank text, or unset.
pub(super) struct Identity;

fn set<T>(field: &Field<T>) -> Option<&toml::Spanned<T>> {
    field.as_ref()
}

impl Kind for Period {
    type Raw = DurationText;
    type Value = Duration;
    fn check(
        v: &Validator<'_>,
        f: &Field<DurationText>,
        key: &str,
    ) -> Result<Option<Duration>, ConfigError> {
        set(f).map(|_| v.duration(f, key, "1s", false)).transpose()
    }
    fn render(d: &Duration) -> Option<String> {
        Some(dur(*d))
    }
}

impl Kind for Delay {
    type Raw = DurationText;
    type Value = Duration;
    fn check(
        v: &Validator<'_>,
        f: &Field<DurationText>,
        key: &str,
    ) -> Result<Option<Duration>, ConfigError> {
        set(f).map(|_| v.duration(f, key, "0s", true)).transpose()
    }
    fn render(d: &Duration) -> Option<String> {
        Some(dur(*d))
    }
}

impl Kind for Limit {
    type Raw = DurationText;
    type Value = Option<Duration>;
    fn check(
        v: &Validator<'_>,
        f: &Field<DurationText>,
        key: &str,
    ) -> Result<Option<Option<Duration>>, ConfigError> {
        Ok(Period::check(v, f, key)?.map(Some))
    }
    fn render(d: &Option<Duration>) -> Option<String> {
        d.map(dur)
    }
}

impl Kind for PerSecond {
    type Raw = f64;
    type Value = Rate;
    fn check(v: &Validator<'_>, f: &Field<f64>, key: &str) -> Result<Option<Rate>, ConfigError> {
        set(f).map(|_| v.rate(f, key, 0.0)).transpose()
    }
    fn render(r: &Rate) -> Option<String> {
        Some(float(r.as_f64()))
    }
}

impl Kind for Fraction {
    type Raw = f64;
    type Value = f64;
    fn check(v: &Validator<'_>, f: &Field<f64>, key: &str) -> Result<Option<f64>, ConfigError> {
        let Some(x) = f else { return Ok(None) };
        let t = *x.get_ref();
        if !(t > 0.0 && t <= 1.0) {
            return Err(v.error(Some(x.span()), key, format!("must be in (0, 1], got {t}")));
        }
        Ok(Some(t))
    }
    fn render(t: &f64) -> Option<String> {
        Some(float(*t))
    }
}

impl Kind for NodeCount {
    type Raw = i64;
    type Value = u32;
    fn check(v: &Validator<'_>, f: &Field<i64>, key: &str) -> Result<Option<u32>, ConfigError> {
        let Some(x) = f else { return Ok(None) };
        u32::try_from(*x.get_ref()).map(Some).map_err(|_| {
            v.error(
                Some(x.span()),
                key,
                format!("must be a node count >= 0, got {}", x.get_ref()),
            )
        })
    }
    fn render(n: &u32) -> Option<String> {
        Some(n.to_string())
    }
}

impl Kind for Flag {
    type Raw = bool;
    type Value = bool;
    fn check(_: &Validator<'_>, f: &Field<bool>, _: &str) -> Result<Option<bool>, ConfigError> {
        Ok(f.as_ref().map(|b| *b.get_ref()))
    }
    fn render(b: &bool) -> Option<String> {
        Some(b.to_string())
    }
}

impl Kind for Seconds {
    type Raw = i64;
    type Value = u64;
    fn check(v: &Validator<'_>, f: &Field<i64>, key: &str) -> Result<Option<u64>, ConfigError> {
        v.toleration_seconds(f, key)
    }
    fn render(s: &u64) -> Option<String> {
        Some(s.to_string())
    }
}

impl Kind for MaybeSeconds {
    type Raw = i64;
    type Value = Option<u64>;
    fn check(
        v: &Validator<'_>,
        f: &Field<i64>,
        key: &str,
    ) -> Result<Option<Option<u64>>, ConfigError> {
        Ok(v.toleration_seconds(f, key)?.map(Some))
    }
    fn render(s: &Option<u64>) -> Option<String> {
        s.map(|s| s.to_string())
    }
}

impl Kind for Brake {
    type Raw = RawMaxUnhealthy;
    type Value = Option<MaxUnhealthy>;
    fn check(
        v: &Validator<'_>,
        f: &Field<RawMaxUnhealthy>,
        key: &str,
    ) -> Result<Option<Option<MaxUnhealthy>>, ConfigError> {
        Ok(v.max_unhealthy(f, key)?.map(Some))
    }
    fn render(m: &Option<MaxUnhealthy>) -> Option<String> {
        m.map(|m| m.to_toml())
    }
}

impl Kind for PodsMode {
    type Raw = ModeOrBool;
    type Value = PodsNotReady;
    fn check(
        v: &Validator<'_>,
        f: &Field<ModeOrBool>,
        key: &str,
    ) -> Result<Option<PodsNotReady>, ConfigError> {
        let Some(x) = f else { return Ok(None) };
        Ok(Some(match x.get_ref() {
            ModeOrBool::Bool(true) => PodsNotReady::Always,
            ModeOrBool::Bool(false) => PodsNotReady::Never,
            ModeOrBool::Mode(m) => PodsNotReady::parse(m).ok_or_else(|| {
                v.error(
                    Some(x.span()),
                    key,
                    format!(
                        "must be \"always\", \"unless-disrupted\" or \"never\" (or the old \
                         true / false), got {m:?}"
                    ),
                )
            })?,
        }))
    }
    fn render(m: &PodsNotReady) -> Option<String> {
        Some(string(m.as_str()))
    }
}

impl Kind for DomainKeys {
    type Raw = OneOrMany;
    type Value = Vec<String>;
    fn check(
        v: &Validator<'_>,
        f: &Field<OneOrMany>,
        key: &str,
    ) -> Result<Option<Vec<String>>, ConfigError> {
        set(f).map(|x| v.domain_labels(x, key)).transpose()
    }
    fn render(keys: &Vec<String>) -> Option<String> {
        (!keys.is_empty()).then(|| domain_text(keys))
    }
}

impl Kind for Disruption {
    type Raw = String;
    type Value = FullDisruption;
    fn check(
        v: &Validator<'_>,
        f: &Field<String>,
        key: &str,
    ) -> Result<Option<FullDisruption>, ConfigError> {
        let Some(x) = f else { return Ok(None) };
        FullDisruption::parse(x.get_ref()).map(Some).ok_or_else(|| {
            v.error(
                Some(x.span()),
                key,
                format!("must be \"evict\" or \"hold\", got {:?}", x.get_ref()),
            )
        })
    }
    fn render(m: &FullDisruption) -> Option<String> {
        Some(string(m.as_str()))
    }
}

impl Kind for Level {
    type Raw = String;
    type Value = LevelFilter;
    fn check(
        v: &Validator<'_>,
        f: &Field<String>,
        key: &str,
    ) -> Result<Option<LevelFilter>, ConfigError> {
        let Some(x) = f else { return Ok(None) };
        parse_level(x.get_ref()).map(Some).ok_or_else(|| {
            v.error(
                Some(x.span()),
                key,
                format!(
                    "must be one of error, warn, info, debug, trace, got {:?}",
                    x.get_ref()
                ),
            )
        })
    }
    fn render(l: &LevelFilter) -> Option<String> {
        Some(string(level_name(*l)))
    }
}

/// `text` or `json`, as `(text, json)` of the owner's type.
fn text_or_json<T>(
    v: &Validator<'_>,
    f: &Field<String>,
    key: &str,
    (text, json): (T, T),
) -> Result<Option<T>, ConfigError> {
    let Some(x) = f else { return Ok(None) };
    match x.get_ref().as_str() {
        "text" => Ok(Some(text)),
        "json" => Ok(Some(json)),
        other => Err(v.error(
            Some(x.span()),
            key,
            format!("must be \"text\" or \"json\", got {other:?}"),
        )),
    }
}

/// `text` or `json` as one of the owner's two-valued formats (`dump_format`, `log_format`).
macro_rules! text_or_json_kind {
    ($kind:ident, $format:ident) => {
        impl Kind for $kind {
            type Raw = String;
            type Value = $format;
            fn check(
                v: &Validator<'_>,
                f: &Field<String>,
                key: &str,
            ) -> Result<Option<$format>, ConfigError> {
                text_or_json(v, f, key, ($format::Text, $format::Json))
            }
            fn render(format: &$format) -> Option<String> {
                Some(string(match format {
                    $format::Text => "text",
                    $format::Json => "json",
                }))
            }
        }
    };
}

text_or_json_kind!(DumpText, DumpFormat);
text_or_json_kind!(LogText, LogFormat);

impl Kind for LoopbackAddress {
    type Raw = String;
    type Value = Option<SocketAddr>;
    fn check(
        v: &Validator<'_>,
        f: &Field<String>,
        key: &str,
    ) -> Result<Option<Option<SocketAddr>>, ConfigError> {
        set(f)
            .map(|x| v.metrics_address(x, key).map(Some))
            .transpose()
    }
    fn render(a: &Option<SocketAddr>) -> Option<String> {
        a.map(|a| string(&a.to_string()))
    }
}

impl Kind for SocketPath {
    type Raw = String;
    type Value = Option<PathBuf>;
    fn check(
        v: &Validator<'_>,
        f: &Field<String>,
        key: &str,
    ) -> Result<Option<Option<PathBuf>>, ConfigError> {
        match f {
            None => Ok(None),
            Some(x) if x.get_ref().is_empty() => Ok(Some(None)),
            Some(x) => v.control_socket(x, key).map(|p| Some(Some(p))),
        }
    }
    fn render(p: &Option<PathBuf>) -> Option<String> {
        Some(string(
            &p.as_deref()
                .map(|p| p.to_string_lossy().into_owned())
                .unwrap_or_default(),
        ))
    }
}

impl Kind for FilePath {
    type Raw = String;
    type Value = Option<PathBuf>;
    fn check(
        v: &Validator<'_>,
        f: &Field<String>,
        key: &str,
    ) -> Result<Option<Option<PathBuf>>, ConfigError> {
        match f {
            None => Ok(None),
            Some(x) if x.get_ref().is_empty() => Ok(Some(None)),
            Some(x) if !x.get_ref().starts_with('/') || x.get_ref().ends_with('/') => Err(v.error(
                Some(x.span()),
                key,
                format!(
                    "must be an absolute path to a file (or \"\" for none), got {:?}",
                    x.get_ref()
                ),
            )),
            Some(x) => Ok(Some(Some(PathBuf::from(x.get_ref())))),
        }
    }
    fn render(p: &Option<PathBuf>) -> Option<String> {
        SocketPath::render(p)
    }
}

impl Kind for ObjectName {
    type Raw = String;
    type Value = String;
    fn check(
        v: &Validator<'_>,
        f: &Field<String>,
        key: &str,
    ) -> Result<Option<String>, ConfigError> {
        let Some(x) = f else { return Ok(None) };
        if is_dns_subdomain(x.get_ref()) {
            return Ok(Some(x.get_ref().clone()));
        }
        Err(v.error(
            Some(x.span()),
            key,
            format!(
                "must be a Kubernetes object name (lowercase letters, digits, '-', '.'), got {:?}",
                x.get_ref()
            ),
        ))
    }
    fn render(s: &String) -> Option<String> {
        Some(string(s))
    }
}

impl Kind for Identity {
    type Raw = String;
    type Value = Option<String>;
    fn check(
        v: &Validator<'_>,
        f: &Field<String>,
        key: &str,
    ) -> Result<Option<Option<String>>, ConfigError> {
        let Some(x) = f else { return Ok(None) };
        if x.get_ref().trim().is_empty() {
            return Err(v.error(
                Some(x.span()),
                key,
                "must not be empty (leave it out for hostname plus a random suffix)".to_string(),
            ));
        }
        Ok(Some(Some(x.get_ref().clone())))
    }
    fn render(s: &Option<String>) -> Option<String> {
        s.as_deref().map(string)
    }
}
