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
        // Every layer's defaults; the top-level keys are checked first, then the sections.
        let mut c = Config::with_defaults();
        self.top_level(&raw, &mut c)?;
        let api = self.api(&raw.api)?;
        let leader_election = self.leader_election(&raw.leader_election)?;
        c.controller.pools = self.pools(&raw.pool, api.watch_idle_timeout)?;
        c.controller.condition_taints =
            self.condition_taints(&raw.condition_taint, c.controller.taint_based_eviction)?;
        let fencing = self.fencing(&raw.fencing)?;
        c.controller.fencing = fencing.policy();
        let node_monitor_grace_period = c.controller.node_monitor_grace_period;

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
        self.monitor_period_within_graces(&raw, &c)?;
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

        self.shadow_alone(&raw, &c, &fencing, &leader_election)?;

        c.api = api;
        c.leader_election = leader_election;
        c.fencing = fencing;
        Ok(c)
    }

    /// Shadow mode writes nothing: not with fencing (a fence is an act, not a decision to
    /// compare), nor holding kube-controller-manager's own leader Lease (it would write it and
    /// take the lead from the controller it is compared with).
    fn shadow_alone(
        &self,
        raw: &RawConfig,
        c: &Config,
        fencing: &FencingConfig,
        leader_election: &LeaderElectionConfig,
    ) -> Result<(), ConfigError> {
        if !c.shadow {
            return Ok(());
        }
        if fencing.enabled {
            let (span, key) = pick(
                (&raw.fencing.enabled, "fencing.enabled"),
                (&raw.shadow, "shadow"),
            );
            return Err(self.error(
                span,
                key,
                "shadow = true cannot run with fencing.enabled = true: shadow mode writes \
                 nothing and a fence is a write; disable fencing while shadowing"
                    .to_string(),
            ));
        }
        if leader_election.enabled && leader_election.name == "kube-controller-manager" {
            let (span, key) = match (&raw.leader_election.name, &raw.shadow) {
                (Some(name), _) => (Some(name.span()), "leader_election.name"),
                (None, shadow) => (shadow.as_ref().map(|s| s.span()), "shadow"),
            };
            return Err(self.error(
                span,
                key,
                "shadow = true cannot elect on kube-controller-manager's Lease: it would write \
                 the incumbent's Lease and take the lead from it; name a Lease of its own"
                    .to_string(),
            ));
        }
        Ok(())
    }

    /// `node_monitor_period` at most half of every grace (global and per pool, monitor and
    /// startup). A node is a suspect of the zone rules once it has been silent for its grace
    /// less the period (`node_lifecycle/suspects.rs`): with the period at or above the grace
    /// every healthy node is one, and nothing is ever tainted or fenced (a brake stays engaged).
    /// Half the grace leaves a healthy kubelet half the grace of silence before it counts.
    fn monitor_period_within_graces(&self, raw: &RawConfig, c: &Config) -> Result<(), ConfigError> {
        let period = c.controller.node_monitor_period;
        let fits = |grace: Duration| period.saturating_mul(2) <= grace;
        let refuse = |span: Option<Range<usize>>, key: &str, grace_key: &str, grace: Duration| {
            self.error(
                span,
                key,
                format!(
                    "node_monitor_period ({}) must be at most half of {grace_key} ({}): a node \
                     counts as a suspect once silent for its grace less the period, so a longer \
                     period makes healthy nodes suspects and nothing is ever tainted or fenced",
                    format_duration(period),
                    format_duration(grace)
                ),
            )
        };
        let globals = [
            (
                &raw.node_monitor_grace_period,
                "node_monitor_grace_period",
                c.controller.node_monitor_grace_period,
            ),
            (
                &raw.node_startup_grace_period,
                "node_startup_grace_period",
                c.controller.node_startup_grace_period,
            ),
        ];
        for (field, key, grace) in globals {
            if !fits(grace) {
                let (span, at) = pick(
                    (&raw.node_monitor_period, "node_monitor_period"),
                    (field, key),
                );
                return Err(refuse(span, at, key, grace));
            }
        }
        for (pool, raw_pool) in c.controller.pools.iter().zip(&raw.pool) {
            let r = raw_pool.get_ref();
            let overrides = [
                (
                    &r.node_monitor_grace_period,
                    "pool.node_monitor_grace_period",
                    pool.node_monitor_grace_period,
                ),
                (
                    &r.node_startup_grace_period,
                    "pool.node_startup_grace_period",
                    pool.node_startup_grace_period,
                ),
            ];
            for (field, key, grace) in overrides {
                if let Some(grace) = grace.filter(|g| !fits(*g)) {
                    let span = field.as_ref().map(|v| v.span());
                    let grace_key = format!("{key} of pool {:?}", &*pool.name);
                    return Err(refuse(span, key, &grace_key, grace));
                }
            }
        }
        Ok(())
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

    pub(super) fn metrics_address(
        &self,
        v: &Spanned<String>,
        key: &str,
    ) -> Result<SocketAddr, ConfigError> {
        let fail = |why: &str| {
            self.error(
                Some(v.span()),
                key,
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

    pub(super) fn control_socket(
        &self,
        v: &Spanned<String>,
        key: &str,
    ) -> Result<PathBuf, ConfigError> {
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
        Err(self.error(Some(v.span()), key, format!("{why}, got {:?}", v.get_ref())))
    }
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
