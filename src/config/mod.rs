//! The daemon's configuration: `/etc/node-lifecycled/config.toml` -> a validated `Config`.
//!
//! Every key has upstream's default (docs/upstream.md, "Settings and their defaults"), so an empty
//! file is a valid configuration. Nothing is silently ignored: an unknown key or a value out of
//! range is an error that names the key and its line, in one line (`conf/bad.toml:3:
//! unhealthy_zone_threshold: must be in (0, 1], got 1.5`), because a daemon that quietly runs with
//! a typo'd setting fails much later and much worse.

mod brake;
mod fencing;
mod keys;
mod kinds;
mod partitions;
mod policies;
mod raw;
mod render;
mod validate;
use crate::kube::decode::proto::ContentType;
pub(crate) use validate::parse_level;
use validate::{Validator, is_dns_subdomain};
mod validate_api;

use std::fmt;
use std::net::SocketAddr;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::time::Duration;

use log::LevelFilter;
use toml::Spanned;

use crate::controller::Settings;
use crate::time::Rate;

// Settings owned by the layer that uses them; the config file fills them in.
pub(crate) use crate::leader::LeaderElectionConfig;
pub use crate::logging::LogFormat;

// Durations are written and read the same way everywhere: the text form lives with time.
pub use crate::time::{format_duration, parse_duration};
pub use fencing::{FenceMode, FenceStepConfig, FencingConfig};
use keys::{RawApi, RawConfig, RawLeaderElection};
use raw::{DurationText, Field, key_at_line, line_of};
pub use render::ConfigChange;

/// Where the packaged unit and `--config` default point.
pub const DEFAULT_CONFIG_PATH: &str = "/etc/node-lifecycled/config.toml";

/// The kubeconfig used when `[api]` names no source: kubeadm keeps each control-plane
/// component's kubeconfig in /etc/kubernetes (controller-manager.conf, scheduler.conf), so ours
/// sits beside them. Chosen over guessing from the environment so the same file means the same
/// thing wherever it is checked; running in a pod is an explicit `in_cluster = true`.
pub(crate) const DEFAULT_KUBECONFIG: &str = "/etc/kubernetes/node-lifecycled.conf";

/// The whole configuration. Each layer's keys are that layer's settings type, embedded here
/// as the file fills it in (`controller`); the daemon's own keys are fields of `Config`.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    /// The top-level controller keys, `[[pool]]` and `[[condition_taint]]`; its `fencing` is
    /// `[fencing]`'s policy when enabled (`FencingConfig::policy`). `monitor_pass_early` is the
    /// controller's default: the daemon sets its own (`runtime/settings.rs`).
    pub controller: Settings,
    pub dry_run: bool,
    /// Shadow mode (`shadow.rs` of `observe`): decide as in dry-run and compare with what the
    /// incumbent controller writes.
    pub shadow: bool,
    /// Where shadow mode keeps what it classed (`None`: nowhere, lost at a restart).
    pub shadow_file: Option<PathBuf>,
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
    pub fencing: FencingConfig,
}

impl Config {
    /// Dry-run, or shadow mode (which decides as dry-run does).
    pub fn writes_nothing(&self) -> bool {
        self.dry_run || self.shadow
    }

    /// Each layer's defaults and the daemon's own; what the file sets is written over it
    /// (`keys.rs`). `Config::default()` is this, checked by the validation of an empty file.
    fn with_defaults() -> Config {
        let fencing = FencingConfig::default();
        Config {
            controller: Settings {
                fencing: fencing.policy(),
                ..Settings::default()
            },
            dry_run: false,
            shadow: false,
            shadow_file: Some(PathBuf::from(DEFAULT_SHADOW_FILE)),
            log_level: LevelFilter::Info,
            dump_format: DumpFormat::Text,
            metrics_address: None,
            log_format: LogFormat::Text,
            control_socket: Some(PathBuf::from(DEFAULT_CONTROL_SOCKET)),
            api: ApiConfig::default(),
            leader_election: LeaderElectionConfig::default(),
            fencing,
        }
    }
}

/// Where `shadow_file` points when the file does not say (systemd's `StateDirectory=`).
pub const DEFAULT_SHADOW_FILE: &str = "/var/lib/node-lifecycled/shadow.json";

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
    pub(crate) allow_insecure_skip_tls_verify: bool,
    /// Client-side throttle of API calls (upstream `--kube-api-qps`).
    pub qps: Rate,
    pub burst: u32,
    /// Hard limit of one unary call; well under the leader renew deadline so a stuck call cannot
    /// cost the lease.
    pub(crate) request_timeout: Duration,
    /// A watch stream silent for this long is presumed dead and reopened. Each watch asks the
    /// server to end it (`timeoutSeconds`) at 70–90 % of this, so a healthy one always speaks
    /// in time.
    pub(crate) watch_idle_timeout: Duration,
    /// What the watch-cache LIST and the watches ask for (upstream `--kube-api-content-type`).
    pub(crate) content_type: ContentType,
}

/// client-go's and kube-controller-manager's defaults (`--kube-api-qps` 20, `--kube-api-burst`
/// 30, protobuf), the kubeconfig beside the control plane's (`DEFAULT_KUBECONFIG`).
impl Default for ApiConfig {
    fn default() -> ApiConfig {
        ApiConfig {
            source: ApiSource::Kubeconfig {
                path: PathBuf::from(DEFAULT_KUBECONFIG),
                context: None,
            },
            allow_insecure_skip_tls_verify: false,
            qps: Rate::per_second(20),
            burst: 30,
            request_timeout: Duration::from_secs(5),
            watch_idle_timeout: Duration::from_secs(30),
            content_type: ContentType::Protobuf,
        }
    }
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
    pub(crate) fn describe(&self) -> String {
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
    /// Upstream's defaults (docs/upstream.md, "Settings and their defaults"); what an empty file
    /// yields.
    fn default() -> Config {
        Config::from_str("", Path::new("<defaults>"))
            .expect("the built-in defaults satisfy the validation")
    }
}

/// A configuration problem, shown as one line: `<path>:<line>: <key>: <reason>`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError {
    pub(crate) path: PathBuf,
    /// 1-based; `None` when the problem is not on a line (unreadable file, a default in conflict).
    pub(crate) line: Option<usize>,
    /// Dotted key (`api.qps`); empty for syntax errors that are not about one key.
    pub(crate) key: String,
    pub(crate) reason: String,
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
pub(super) const MAX_RATE: f64 = 1e9;

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

#[cfg(test)]
mod tests;
