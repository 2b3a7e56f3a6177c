//! The daemon's configuration: `/etc/node-lifecycled/config.toml` -> a validated `Config`.
//!
//! Every key has upstream's default (SPEC §2), so an empty file is a valid configuration. Nothing
//! is silently ignored: an unknown key or a value out of range is an error that names the key and
//! its line, in one line (`conf/bad.toml:3: unhealthy_zone_threshold: must be in (0, 1], got 1.5`),
//! because a daemon that quietly runs with a typo'd setting fails much later and much worse.

mod fencing;
mod policies;
mod raw;
mod render;

use std::fmt;
use std::net::SocketAddr;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::time::Duration;

use log::LevelFilter;
use toml::Spanned;

use crate::controller::condition_taints::ConditionTaint;
use crate::controller::pools::Pool;
use crate::time::Rate;

// Settings owned by the layer that uses them; the config file fills them in.
pub use crate::leader::LeaderElectionConfig;
pub use crate::logging::LogFormat;

// Durations are written and read the same way everywhere: the text form lives with time.
pub use crate::time::{format_duration, parse_duration};
pub use fencing::FencingConfig;
use raw::{DurationText, Field, RawApi, RawConfig, RawLeaderElection, key_at_line, line_of};
pub use render::ConfigChange;

/// Where the packaged unit and `--config` default point.
pub const DEFAULT_CONFIG_PATH: &str = "/etc/node-lifecycled/config.toml";

/// The kubeconfig used when `[api]` names no source: kubeadm keeps each control-plane
/// component's kubeconfig in /etc/kubernetes (controller-manager.conf, scheduler.conf), so ours
/// sits beside them. Chosen over guessing from the environment so the same file means the same
/// thing wherever it is checked; running in a pod is an explicit `in_cluster = true`.
pub const DEFAULT_KUBECONFIG: &str = "/etc/kubernetes/node-lifecycled.conf";

#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    pub node_monitor_period: Duration,
    pub node_monitor_grace_period: Duration,
    pub node_startup_grace_period: Duration,
    pub node_eviction_rate: Rate,
    pub secondary_node_eviction_rate: Rate,
    pub large_cluster_size_threshold: u32,
    pub unhealthy_zone_threshold: f64,
    pub taint_based_eviction: bool,
    pub pod_eviction_timeout: Duration,
    pub dry_run: bool,
    pub log_level: LevelFilter,
    pub dump_format: DumpFormat,
    /// Only a loopback address: the endpoint has no authentication.
    pub metrics_address: Option<SocketAddr>,
    /// Lines on stderr: text (or the journal's native protocol under systemd) or JSON.
    pub log_format: LogFormat,
    /// The Unix socket `node-lifecycled status` / `explain` ask; `None`: none.
    pub control_socket: Option<PathBuf>,
    pub api: ApiConfig,
    pub leader_election: LeaderElectionConfig,
    /// Honour the OpenYurt edge autonomy annotations.
    pub autonomy: bool,
    /// No NoExecute taint for this long after a full disruption ends (zero: upstream).
    pub disruption_cooldown: Duration,
    /// `[[pool]]`, in file order (first match wins).
    pub pools: Vec<Pool>,
    /// `[[condition_taint]]`, in file order.
    pub condition_taints: Vec<ConditionTaint>,
    pub fencing: FencingConfig,
}

/// Where `control_socket` points when the file does not say (systemd's `RuntimeDirectory=`).
pub const DEFAULT_CONTROL_SOCKET: &str = "/run/node-lifecycled/control.sock";

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum DumpFormat {
    Text,
    Json,
}

#[derive(Clone, Debug, PartialEq)]
pub struct ApiConfig {
    pub source: ApiSource,
    pub allow_insecure_skip_tls_verify: bool,
    /// Client-side throttle of API calls (upstream `--kube-api-qps`).
    pub qps: Rate,
    pub burst: u32,
    /// Hard limit of one unary call; well under the leader renew deadline so a stuck call cannot
    /// cost the lease.
    pub request_timeout: Duration,
    /// A watch stream silent for this long is presumed dead and reopened. Each watch asks the
    /// server to end it (`timeoutSeconds`) at 50–80 % of this, so a healthy one always speaks
    /// in time.
    pub watch_idle_timeout: Duration,
}

/// The three mutually exclusive ways of finding the API server.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ApiSource {
    Kubeconfig {
        path: PathBuf,
        context: Option<String>,
    },
    /// The pod's service account: KUBERNETES_SERVICE_HOST/PORT and
    /// /var/run/secrets/kubernetes.io/serviceaccount/{token,ca.crt}.
    InCluster,
    Explicit {
        server: String,
        certificate_authority: Option<PathBuf>,
        client_certificate: Option<PathBuf>,
        client_key: Option<PathBuf>,
        token_file: Option<PathBuf>,
    },
}

impl ApiSource {
    /// Where the API server is found, in one phrase (the state dump, `doctor`).
    pub fn describe(&self) -> String {
        match self {
            ApiSource::Kubeconfig {
                path,
                context: Some(ctx),
            } => format!("kubeconfig {} (context {ctx})", path.display()),
            ApiSource::Kubeconfig {
                path,
                context: None,
            } => format!("kubeconfig {}", path.display()),
            ApiSource::InCluster => "in-cluster".to_string(),
            ApiSource::Explicit { server, .. } => server.clone(),
        }
    }
}

impl Default for Config {
    /// Upstream's defaults (SPEC §2); what an empty file yields.
    fn default() -> Config {
        Config::from_str("", Path::new("<defaults>"))
            .expect("the built-in defaults satisfy the validation")
    }
}

/// A configuration problem, shown as one line: `<path>:<line>: <key>: <reason>`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError {
    pub path: PathBuf,
    /// 1-based; `None` when the problem is not on a line (unreadable file, a default in conflict).
    pub line: Option<usize>,
    /// Dotted key (`api.qps`); empty for syntax errors that are not about one key.
    pub key: String,
    pub reason: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.path.display())?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
        }
        if !self.key.is_empty() {
            write!(f, ": {}", self.key)?;
        }
        write!(f, ": {}", self.reason)
    }
}

impl std::error::Error for ConfigError {}

/// Largest rate (per second) accepted for the eviction rates and `api.qps`.
const MAX_RATE: f64 = 1e9;

/// The documented conf/config.toml is about 10 KB.
const MAX_CONFIG_FILE: u64 = 1024 * 1024;

impl Config {
    /// Reads and validates the file at `path`.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let cannot_read = |reason: String| ConfigError {
            path: path.to_path_buf(),
            line: None,
            key: String::new(),
            reason: format!("cannot read config file: {reason}"),
        };
        // Bounded: `--config /dev/zero` must be an error, not a read until memory runs out.
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(
            &mut std::io::Read::take(
                std::fs::File::open(path).map_err(|e| cannot_read(e.to_string()))?,
                MAX_CONFIG_FILE + 1,
            ),
            &mut bytes,
        )
        .map_err(|e| cannot_read(e.to_string()))?;
        if bytes.len() as u64 > MAX_CONFIG_FILE {
            return Err(cannot_read(format!("larger than {MAX_CONFIG_FILE} bytes")));
        }
        let text = String::from_utf8(bytes)
            .map_err(|_| cannot_read("stream did not contain valid UTF-8".to_string()))?;
        Config::from_str(&text, path)
    }

    /// Parses and validates `text`; `path` only names the file in errors.
    pub fn from_str(text: &str, path: &Path) -> Result<Config, ConfigError> {
        let raw: RawConfig =
            toml::from_str(text).map_err(|e| Validator { text, path }.toml_error(e))?;
        Validator { text, path }.config(raw)
    }

    /// The effective configuration as TOML, every default filled in; reads back to `self`.
    pub fn to_toml(&self) -> String {
        render::to_toml(self)
    }

    /// What differs from `older`, key by key (for the SIGHUP reload log).
    pub fn changes_since(&self, older: &Config) -> Vec<ConfigChange> {
        render::changes(older, self)
    }
}

struct Validator<'a> {
    text: &'a str,
    path: &'a Path,
}

impl Validator<'_> {
    fn error(&self, span: Option<Range<usize>>, key: &str, reason: String) -> ConfigError {
        ConfigError {
            path: self.path.to_path_buf(),
            line: span.map(|s| line_of(self.text, s.start)),
            key: key.to_string(),
            reason,
        }
    }

    /// Turns serde/toml's error (syntax, wrong type, unknown key) into our one-line form.
    fn toml_error(&self, err: toml::de::Error) -> ConfigError {
        let line = err.span().map(|s| line_of(self.text, s.start));
        let message = err.message().lines().next().unwrap_or("").to_string();
        let located_key = line.and_then(|l| key_at_line(self.text, l));
        let (key, reason) = if let Some(field) = unknown_field(&message) {
            // toml points at the unknown key itself; its line gives the section.
            let key = located_key.unwrap_or_else(|| field.to_string());
            (key, "unknown key".to_string())
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

    fn config(&self, raw: RawConfig) -> Result<Config, ConfigError> {
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
        let condition_taints = self.condition_taints(&raw.condition_taint, taint_based_eviction)?;
        let fencing = self.fencing(&raw.fencing)?;

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
            pools,
            condition_taints,
            fencing,
        })
    }

    fn duration(
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

    fn rate(&self, field: &Field<f64>, key: &str, default: f64) -> Result<Rate, ConfigError> {
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

    fn metrics_address(&self, v: &Spanned<String>) -> Result<SocketAddr, ConfigError> {
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

    fn control_socket(&self, v: &Spanned<String>) -> Result<PathBuf, ConfigError> {
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

    fn api(&self, raw: &RawApi) -> Result<ApiConfig, ConfigError> {
        let sources: Vec<(&str, Range<usize>)> = [
            ("api.kubeconfig", raw.kubeconfig.as_ref().map(Spanned::span)),
            (
                "api.in_cluster",
                raw.in_cluster
                    .as_ref()
                    .filter(|v| *v.get_ref())
                    .map(Spanned::span),
            ),
            ("api.server", raw.server.as_ref().map(Spanned::span)),
        ]
        .into_iter()
        .filter_map(|(k, s)| s.map(|s| (k, s)))
        .collect();
        if let [(first, first_span), (second, second_span), ..] = sources.as_slice() {
            return Err(self.error(
                Some(second_span.clone()),
                second,
                format!(
                    "conflicts with {first} (line {}): set only one of api.kubeconfig, api.in_cluster, api.server",
                    line_of(self.text, first_span.start)
                ),
            ));
        }
        let path = |field: &Field<String>, key: &str| -> Result<Option<PathBuf>, ConfigError> {
            match field {
                None => Ok(None),
                Some(v) if v.get_ref().is_empty() => {
                    Err(self.error(Some(v.span()), key, "must not be empty".to_string()))
                }
                Some(v) => Ok(Some(PathBuf::from(v.get_ref()))),
            }
        };
        let only_with_server = [
            (&raw.certificate_authority, "api.certificate_authority"),
            (&raw.client_certificate, "api.client_certificate"),
            (&raw.client_key, "api.client_key"),
            (&raw.token_file, "api.token_file"),
        ];
        let source = match &raw.server {
            Some(server) => {
                if let Some(ctx) = &raw.context {
                    return Err(self.error(
                        Some(ctx.span()),
                        "api.context",
                        "only applies to api.kubeconfig, not with api.server".to_string(),
                    ));
                }
                self.server_url(server)?;
                let client_certificate = path(&raw.client_certificate, "api.client_certificate")?;
                let client_key = path(&raw.client_key, "api.client_key")?;
                if client_certificate.is_some() != client_key.is_some() {
                    let (span, key) = pick(
                        (&raw.client_certificate, "api.client_certificate"),
                        (&raw.client_key, "api.client_key"),
                    );
                    return Err(self.error(
                        span,
                        key,
                        "api.client_certificate and api.client_key must be set together"
                            .to_string(),
                    ));
                }
                ApiSource::Explicit {
                    server: server.get_ref().clone(),
                    certificate_authority: path(
                        &raw.certificate_authority,
                        "api.certificate_authority",
                    )?,
                    client_certificate,
                    client_key,
                    token_file: path(&raw.token_file, "api.token_file")?,
                }
            }
            None => {
                if let Some((v, key)) = only_with_server
                    .iter()
                    .find_map(|(f, k)| f.as_ref().map(|v| (v, *k)))
                {
                    return Err(self.error(
                        Some(v.span()),
                        key,
                        "only applies with api.server".to_string(),
                    ));
                }
                if raw.in_cluster.as_ref().is_some_and(|v| *v.get_ref()) {
                    if let Some(ctx) = &raw.context {
                        return Err(self.error(
                            Some(ctx.span()),
                            "api.context",
                            "only applies to a kubeconfig, not with api.in_cluster".to_string(),
                        ));
                    }
                    ApiSource::InCluster
                } else {
                    let context = match &raw.context {
                        Some(v) if v.get_ref().is_empty() => {
                            return Err(self.error(
                                Some(v.span()),
                                "api.context",
                                "must not be empty (leave it out for the kubeconfig's current-context)"
                                    .to_string(),
                            ));
                        }
                        other => other.as_ref().map(|v| v.get_ref().clone()),
                    };
                    ApiSource::Kubeconfig {
                        path: path(&raw.kubeconfig, "api.kubeconfig")?
                            .unwrap_or_else(|| PathBuf::from(DEFAULT_KUBECONFIG)),
                        context,
                    }
                }
            }
        };
        let allow_insecure_skip_tls_verify = flag(&raw.allow_insecure_skip_tls_verify, false);
        if allow_insecure_skip_tls_verify {
            if let Some(ca) = &raw.certificate_authority {
                // client-go refuses the same combination: a CA that is then not checked is a lie.
                return Err(self.error(
                    Some(ca.span()),
                    "api.certificate_authority",
                    "cannot be combined with api.allow_insecure_skip_tls_verify".to_string(),
                ));
            }
        }
        let qps = self.rate(&raw.qps, "api.qps", 20.0)?;
        if qps.is_never() {
            return Err(self.error(
                raw.qps.as_ref().map(Spanned::span),
                "api.qps",
                format!("must be greater than 0, got {}", qps.as_f64()),
            ));
        }
        let burst = match &raw.burst {
            None => 30,
            Some(v) => match u32::try_from(*v.get_ref()) {
                Ok(b) if (1..=1_000_000).contains(&b) => b,
                _ => {
                    return Err(self.error(
                        Some(v.span()),
                        "api.burst",
                        format!("must be in 1..=1000000, got {}", v.get_ref()),
                    ));
                }
            },
        };
        Ok(ApiConfig {
            source,
            allow_insecure_skip_tls_verify,
            qps,
            burst,
            request_timeout: self.duration(
                &raw.request_timeout,
                "api.request_timeout",
                "5s",
                false,
            )?,
            watch_idle_timeout: self.duration(
                &raw.watch_idle_timeout,
                "api.watch_idle_timeout",
                "30s",
                false,
            )?,
        })
    }

    fn server_url(&self, v: &Spanned<String>) -> Result<(), ConfigError> {
        let url = v.get_ref();
        let rest = url
            .strip_prefix("https://")
            .or_else(|| url.strip_prefix("http://"));
        match rest {
            Some(r) if !r.is_empty() && !r.starts_with('/') => Ok(()),
            _ => Err(self.error(
                Some(v.span()),
                "api.server",
                format!("must be an https:// (or loopback http://) URL with a host, got {url:?}"),
            )),
        }
    }

    fn leader_election(
        &self,
        raw: &RawLeaderElection,
    ) -> Result<LeaderElectionConfig, ConfigError> {
        let object_name = |field: &Field<String>,
                           key: &str,
                           default: &str|
         -> Result<String, ConfigError> {
            let Some(v) = field else {
                return Ok(default.to_string());
            };
            if is_dns_subdomain(v.get_ref()) {
                Ok(v.get_ref().clone())
            } else {
                Err(self.error(
                    Some(v.span()),
                    key,
                    format!(
                        "must be a Kubernetes object name (lowercase letters, digits, '-', '.'), got {:?}",
                        v.get_ref()
                    ),
                ))
            }
        };
        let lease_duration = self.duration(
            &raw.lease_duration,
            "leader_election.lease_duration",
            "15s",
            false,
        )?;
        let renew_deadline = self.duration(
            &raw.renew_deadline,
            "leader_election.renew_deadline",
            "10s",
            false,
        )?;
        let retry_period = self.duration(
            &raw.retry_period,
            "leader_election.retry_period",
            "2s",
            false,
        )?;
        // client-go's leaderelection.NewLeaderElector enforces the same ordering.
        if renew_deadline >= lease_duration {
            let (span, key) = pick(
                (&raw.renew_deadline, "leader_election.renew_deadline"),
                (&raw.lease_duration, "leader_election.lease_duration"),
            );
            return Err(self.error(
                span,
                key,
                format!(
                    "renew_deadline ({}) must be shorter than lease_duration ({})",
                    format_duration(renew_deadline),
                    format_duration(lease_duration)
                ),
            ));
        }
        if retry_period >= renew_deadline {
            let (span, key) = pick(
                (&raw.retry_period, "leader_election.retry_period"),
                (&raw.renew_deadline, "leader_election.renew_deadline"),
            );
            return Err(self.error(
                span,
                key,
                format!(
                    "retry_period ({}) must be shorter than renew_deadline ({})",
                    format_duration(retry_period),
                    format_duration(renew_deadline)
                ),
            ));
        }
        let identity = match &raw.identity {
            Some(v) if v.get_ref().trim().is_empty() => {
                return Err(self.error(
                    Some(v.span()),
                    "leader_election.identity",
                    "must not be empty (leave it out for hostname plus a random suffix)"
                        .to_string(),
                ));
            }
            other => other.as_ref().map(|v| v.get_ref().clone()),
        };
        Ok(LeaderElectionConfig {
            enabled: flag(&raw.enabled, true),
            namespace: object_name(&raw.namespace, "leader_election.namespace", "kube-system")?,
            name: object_name(&raw.name, "leader_election.name", "node-lifecycled")?,
            lease_duration,
            renew_deadline,
            retry_period,
            identity,
        })
    }
}

fn flag(field: &Field<bool>, default: bool) -> bool {
    field.as_ref().map_or(default, |v| *v.get_ref())
}

/// Of two related keys, the one to blame: the first if the file sets it, else the second.
fn pick<'k, T>(
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
fn plain_types(message: &str) -> String {
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
fn unknown_field(message: &str) -> Option<&str> {
    let rest = message.strip_prefix("unknown field `")?;
    rest.split('`').next()
}

pub fn parse_level(text: &str) -> Option<LevelFilter> {
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
fn is_dns_subdomain(s: &str) -> bool {
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

#[cfg(test)]
mod tests;
