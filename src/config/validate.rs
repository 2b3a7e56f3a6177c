//! Validation of the parsed file into a [`Config`]: every error names the file, the line and
//! the key (moved unchanged from config/mod.rs).

use super::*;

pub(super) struct Validator<'a> {
    pub(super) text: &'a str,
    pub(super) path: &'a Path,
}

impl Validator<'_> {
    pub(super) fn error(
        &self,
        span: Option<Range<usize>>,
        key: &str,
        reason: String,
    ) -> ConfigError {
        ConfigError {
            path: self.path.to_path_buf(),
            line: span.map(|s| line_of(self.text, s.start)),
            key: key.to_string(),
            reason,
        }
    }

    /// Turns serde/toml's error (syntax, wrong type, unknown key) into our one-line form.
    pub(super) fn toml_error(&self, err: toml::de::Error) -> ConfigError {
        let line = err.span().map(|s| line_of(self.text, s.start));
        let message = err.message().lines().next().unwrap_or("").to_string();
        let located_key = line.and_then(|l| key_at_line(self.text, l));
        let (key, reason) = if let Some(field) = unknown_field(&message) {
            // toml points at the unknown key itself; its line gives the section.
            let key = located_key.unwrap_or_else(|| field.to_string());
            let reason = if key.starts_with("pool.") && super::brake::GLOBAL_ONLY.contains(&field) {
                format!("a [[pool]] cannot override {field}: it is set for the whole fleet only")
            } else {
                "unknown key".to_string()
            };
            (key, reason)
        } else {
            (located_key.unwrap_or_default(), plain_types(&message))
        };
        ConfigError {
            path: self.path.to_path_buf(),
            line,
            key,
            reason,
        }
    }

    pub(super) fn config(&self, raw: RawConfig) -> Result<Config, ConfigError> {
        let node_monitor_period =
            self.duration(&raw.node_monitor_period, "node_monitor_period", "5s", false)?;
        let node_monitor_grace_period = self.duration(
            &raw.node_monitor_grace_period,
            "node_monitor_grace_period",
            "50s",
            false,
        )?;
        let node_startup_grace_period = self.duration(
            &raw.node_startup_grace_period,
            "node_startup_grace_period",
            "60s",
            false,
        )?;
        let node_eviction_rate = self.rate(&raw.node_eviction_rate, "node_eviction_rate", 0.1)?;
        let secondary_node_eviction_rate = self.rate(
            &raw.secondary_node_eviction_rate,
            "secondary_node_eviction_rate",
            0.01,
        )?;
        let large_cluster_size_threshold = match &raw.large_cluster_size_threshold {
            None => 50,
            Some(v) => u32::try_from(*v.get_ref()).map_err(|_| {
                self.error(
                    Some(v.span()),
                    "large_cluster_size_threshold",
                    format!("must be a node count >= 0, got {}", v.get_ref()),
                )
            })?,
        };
        let unhealthy_zone_threshold = match &raw.unhealthy_zone_threshold {
            None => 0.55,
            Some(v) => {
                let t = *v.get_ref();
                if !(t > 0.0 && t <= 1.0) {
                    return Err(self.error(
                        Some(v.span()),
                        "unhealthy_zone_threshold",
                        format!("must be in (0, 1], got {t}"),
                    ));
                }
                t
            }
        };
        let pod_eviction_timeout = self.duration(
            &raw.pod_eviction_timeout,
            "pod_eviction_timeout",
            "5m",
            true,
        )?;
        let log_level = match &raw.log_level {
            None => LevelFilter::Info,
            Some(v) => parse_level(v.get_ref()).ok_or_else(|| {
                self.error(
                    Some(v.span()),
                    "log_level",
                    format!(
                        "must be one of error, warn, info, debug, trace, got {:?}",
                        v.get_ref()
                    ),
                )
            })?,
        };
        let dump_format = match raw.dump_format.as_ref().map(|v| (v.get_ref().as_str(), v)) {
            None | Some(("text", _)) => DumpFormat::Text,
            Some(("json", _)) => DumpFormat::Json,
            Some((other, v)) => {
                return Err(self.error(
                    Some(v.span()),
                    "dump_format",
                    format!("must be \"text\" or \"json\", got {other:?}"),
                ));
            }
        };
        let metrics_address = match &raw.metrics_address {
            None => None,
            Some(v) => Some(self.metrics_address(v)?),
        };
        let log_format = match raw.log_format.as_ref().map(|v| (v.get_ref().as_str(), v)) {
            None | Some(("text", _)) => LogFormat::Text,
            Some(("json", _)) => LogFormat::Json,
            Some((other, v)) => {
                return Err(self.error(
                    Some(v.span()),
                    "log_format",
                    format!("must be \"text\" or \"json\", got {other:?}"),
                ));
            }
        };
        let control_socket = match &raw.control_socket {
            None => Some(PathBuf::from(DEFAULT_CONTROL_SOCKET)),
            Some(v) if v.get_ref().is_empty() => None,
            Some(v) => Some(self.control_socket(v)?),
        };
        let api = self.api(&raw.api)?;
        let leader_election = self.leader_election(&raw.leader_election)?;
        let disruption_cooldown =
            self.duration(&raw.disruption_cooldown, "disruption_cooldown", "0s", true)?;
        let taint_based_eviction = flag(&raw.taint_based_eviction, true);
        let pools = self.pools(&raw.pool, api.watch_idle_timeout)?;
        let parts = self.partitions(
            super::partitions::RawPartitions {
                mark_pods_not_ready: &raw.mark_pods_not_ready,
                disruption_domain: &raw.disruption_domain,
                full_disruption: &raw.full_disruption,
                hold_max: &raw.hold_max,
            },
            "",
        )?;
        let condition_taints = self.condition_taints(&raw.condition_taint, taint_based_eviction)?;
        let fencing = self.fencing(&raw.fencing)?;
        let max_unhealthy = self.max_unhealthy(&raw.max_unhealthy, "max_unhealthy")?;
        let admission_default_toleration_seconds = self
            .toleration_seconds(
                &raw.admission_default_toleration_seconds,
                "admission_default_toleration_seconds",
            )?
            .unwrap_or(crate::controller::settings::DEFAULT_ADMISSION_TOLERATION_SECONDS);
        let default_toleration_seconds = self.toleration_seconds(
            &raw.default_toleration_seconds,
            "default_toleration_seconds",
        )?;

        // Relations between keys. The error goes to the key the user wrote, if only one was.
        if api.watch_idle_timeout >= node_monitor_grace_period {
            let (span, key) = pick(
                (&raw.api.watch_idle_timeout, "api.watch_idle_timeout"),
                (&raw.node_monitor_grace_period, "node_monitor_grace_period"),
            );
            return Err(self.error(
                span,
                key,
                format!(
                    "api.watch_idle_timeout ({}) must be shorter than node_monitor_grace_period ({}): \
                     a dead watch must be noticed before nodes are judged on it",
                    format_duration(api.watch_idle_timeout),
                    format_duration(node_monitor_grace_period)
                ),
            ));
        }
        if leader_election.enabled && api.request_timeout >= leader_election.renew_deadline {
            let (span, key) = pick(
                (&raw.api.request_timeout, "api.request_timeout"),
                (
                    &raw.leader_election.renew_deadline,
                    "leader_election.renew_deadline",
                ),
            );
            return Err(self.error(
                span,
                key,
                format!(
                    "api.request_timeout ({}) must be shorter than leader_election.renew_deadline ({}): \
                     one stuck call must not cost the lease",
                    format_duration(api.request_timeout),
                    format_duration(leader_election.renew_deadline)
                ),
            ));
        }

        Ok(Config {
            node_monitor_period,
            node_monitor_grace_period,
            node_startup_grace_period,
            node_eviction_rate,
            secondary_node_eviction_rate,
            large_cluster_size_threshold,
            unhealthy_zone_threshold,
            taint_based_eviction,
            pod_eviction_timeout,
            dry_run: flag(&raw.dry_run, false),
            log_level,
            dump_format,
            metrics_address,
            log_format,
            control_socket,
            api,
            leader_election,
            autonomy: flag(&raw.autonomy, true),
            disruption_cooldown,
            early_suspects: flag(&raw.early_suspects, true),
            mark_pods_not_ready: parts.mark_pods_not_ready.unwrap_or_default(),
            disruption_domain: parts.disruption_domain.unwrap_or_default(),
            full_disruption: parts.full_disruption.unwrap_or_default(),
            hold_max: parts.hold_max,
            pools,
            condition_taints,
            fencing,
            max_unhealthy,
            admission_default_toleration_seconds,
            default_toleration_seconds,
        })
    }

    pub(super) fn duration(
        &self,
        field: &Field<DurationText>,
        key: &str,
        default: &str,
        zero_allowed: bool,
    ) -> Result<Duration, ConfigError> {
        let Some(v) = field else {
            return Ok(parse_duration(default).expect("built-in default durations parse"));
        };
        let d =
            parse_duration(&v.get_ref().0).map_err(|why| self.error(Some(v.span()), key, why))?;
        if d.is_zero() && !zero_allowed {
            return Err(self.error(Some(v.span()), key, "must be greater than 0".to_string()));
        }
        Ok(d)
    }

    pub(super) fn rate(
        &self,
        field: &Field<f64>,
        key: &str,
        default: f64,
    ) -> Result<Rate, ConfigError> {
        let value = field.as_ref().map_or(default, |v| *v.get_ref());
        let span = field.as_ref().map(Spanned::span);
        if !value.is_finite() || value < 0.0 {
            return Err(self.error(
                span,
                key,
                format!("must be a finite number >= 0, got {value}"),
            ));
        }
        // Above 10^9 a rate has more significant digits than an f64 keeps at micro precision:
        // the printed config (`to_toml`) would not read back to the same value.
        if value > MAX_RATE {
            return Err(self.error(
                span,
                key,
                format!("too large, at most {MAX_RATE}, got {value}"),
            ));
        }
        Rate::from_f64(value)
            .ok_or_else(|| self.error(span, key, format!("too large, got {value}")))
    }

    pub(super) fn metrics_address(&self, v: &Spanned<String>) -> Result<SocketAddr, ConfigError> {
        let fail = |why: &str| {
            self.error(
                Some(v.span()),
                "metrics_address",
                format!("{why}, got {:?} (e.g. \"127.0.0.1:9184\")", v.get_ref()),
            )
        };
        let addr: SocketAddr = v.get_ref().parse().map_err(|_| fail("must be ip:port"))?;
        if !addr.ip().is_loopback() {
            return Err(fail(
                "must be a loopback address (the endpoint has no authentication)",
            ));
        }
        Ok(addr)
    }

    pub(super) fn control_socket(&self, v: &Spanned<String>) -> Result<PathBuf, ConfigError> {
        let path = PathBuf::from(v.get_ref());
        // sockaddr_un holds 108 bytes with the terminating NUL.
        let why = if !path.is_absolute() {
            "must be an absolute path (or \"\" for none)"
        } else if v.get_ref().len() > 107 {
            "too long for a Unix socket address (at most 107 bytes)"
        } else if v.get_ref().ends_with('/') {
            "must name a socket, not a directory"
        } else {
            return Ok(path);
        };
        Err(self.error(
            Some(v.span()),
            "control_socket",
            format!("{why}, got {:?}", v.get_ref()),
        ))
    }
}

pub(super) fn flag(field: &Field<bool>, default: bool) -> bool {
    field.as_ref().map_or(default, |v| *v.get_ref())
}

/// Of two related keys, the one to blame: the first if the file sets it, else the second.
pub(super) fn pick<'k, T>(
    first: (&Field<T>, &'k str),
    second: (&Field<T>, &'k str),
) -> (Option<Range<usize>>, &'k str) {
    match (first.0, second.0) {
        (Some(v), _) => (Some(v.span()), first.1),
        (None, Some(v)) => (Some(v.span()), second.1),
        (None, None) => (None, first.1),
    }
}

/// serde names Rust types ("expected i64", "struct RawApi"); say it in the file's terms.
pub(super) fn plain_types(message: &str) -> String {
    let mut out = message
        .replace("expected i64", "expected an integer")
        .replace("expected f64", "expected a number");
    if let Some(i) = out.find("expected struct Raw") {
        out.truncate(i);
        out.push_str("expected a table");
    }
    out
}

/// `unknown field `foo`, expected one of ...` -> `foo`.
pub(super) fn unknown_field(message: &str) -> Option<&str> {
    let rest = message.strip_prefix("unknown field `")?;
    rest.split('`').next()
}

pub(crate) fn parse_level(text: &str) -> Option<LevelFilter> {
    Some(match text {
        "error" => LevelFilter::Error,
        "warn" => LevelFilter::Warn,
        "info" => LevelFilter::Info,
        "debug" => LevelFilter::Debug,
        "trace" => LevelFilter::Trace,
        _ => return None,
    })
}

/// RFC 1123 subdomain, as Kubernetes requires of namespace and Lease names.
pub(super) fn is_dns_subdomain(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 253
        && s.split('.').all(|label| {
            !label.is_empty()
                && label
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        })
}
