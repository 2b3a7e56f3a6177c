//! Connection, TLS, identity, server version and clock skew.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use k8s_openapi::api::authentication::v1 as authentication;
use k8s_openapi::apimachinery::pkg::version::Info;

use super::{Check, Options, Report};
use crate::config::{ApiSource, Config, DEFAULT_KUBECONFIG};
use crate::kube::{ApiClient, ApiError, Connection, Credentials, Scheme};
use crate::time::Time;

const GROUP: &str = "cluster";

/// Oldest server the daemon is built and tested against.
pub(crate) const OLDEST_SUPPORTED: (u32, u32) = (1, 20);

/// Skew beyond which timestamps we write (`timeAdded`, which taint eviction counts
/// `tolerationSeconds` from) are too far off to trust.
const SKEW_FAIL: Duration = Duration::from_secs(30);
const SKEW_WARN: Duration = Duration::from_secs(2);

/// What the server said about itself.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Server {
    /// `(major, minor)`; `None` when /version did not say in digits.
    pub(crate) version: Option<(u32, u32)>,
}

/// The daemon's connection, read as the daemon would read it. The packaged config points at
/// systemd's credential copy of the kubeconfig, which exists only inside the service: outside
/// it, the file the unit loads the credential from is read instead.
/// Returns the client and what it connects to, for the `connection` line that
/// [`check_server`] writes once the server has answered.
pub(crate) fn connect(options: &Options, config: &Config) -> Result<(ApiClient, String), String> {
    let insecure = config.api.allow_insecure_skip_tls_verify;
    let (connection, source) = match (&options.kubeconfig, &config.api.source) {
        (Some(path), source) => {
            let context = match source {
                ApiSource::Kubeconfig { context, .. } => context.as_deref(),
                _ => None,
            };
            let c = Connection::from_kubeconfig(path, context, insecure);
            (c, format!("kubeconfig {} (--kubeconfig)", path.display()))
        }
        (None, ApiSource::Kubeconfig { path, context })
            if is_systemd_credential(path) && !path.exists() =>
        {
            let host_file = PathBuf::from(DEFAULT_KUBECONFIG);
            let c = Connection::from_kubeconfig(&host_file, context.as_deref(), insecure);
            (
                c,
                format!(
                    "kubeconfig {} (the unit's LoadCredential= source for {})",
                    host_file.display(),
                    path.display()
                ),
            )
        }
        (None, ApiSource::Kubeconfig { path, .. }) => (
            crate::runtime::api::connect(&config.api, &options.config),
            format!("kubeconfig {}", path.display()),
        ),
        (None, ApiSource::InCluster) => (
            crate::runtime::api::connect(&config.api, &options.config),
            "the pod's service account".to_string(),
        ),
        (None, ApiSource::Explicit { .. }) => (
            crate::runtime::api::connect(&config.api, &options.config),
            format!("[api] settings of {}", options.config.display()),
        ),
    };
    let connection = connection.map_err(|e| e.to_string())?;
    let client = super::client_for(&connection, config)?;
    let tls = match connection.scheme {
        Scheme::Https if insecure => "TLS without verifying the server (insecure)",
        Scheme::Https => "TLS, server certificate verified",
        Scheme::Http => "plain HTTP (loopback only)",
    };
    let credentials = match &connection.credentials {
        Credentials::Token(_) | Credentials::TokenFile(_) => "bearer token",
        Credentials::None => "no bearer token (a client certificate, if the kubeconfig has one)",
    };
    let description = format!(
        "{} via {source}: {tls}, {credentials}",
        connection.base_url()
    );
    Ok((client, description))
}

fn is_systemd_credential(path: &Path) -> bool {
    path.starts_with("/run/credentials/")
}

/// GET /version: reachability, TLS, credentials accepted, version, and the `Date` header for
/// the clock skew. `None` when the server cannot be used (the cause is in the report).
pub(crate) fn check_server(
    client: &mut ApiClient,
    connection: &str,
    config: &Config,
    report: &mut Report,
) -> Option<Server> {
    let (info, date) = match client.get_json_dated::<Info>("/version") {
        Ok(answer) => answer,
        Err(e) => {
            report.push(unreachable(connection, &e));
            return None;
        }
    };
    report.push(Check::ok(GROUP, "connection", connection));
    let received = SystemTime::now();
    let version = parse_version(&info.major, &info.minor);
    let text = if info.git_version.is_empty() {
        format!("{}.{}", info.major, info.minor)
    } else {
        info.git_version.clone()
    };
    report.push(match version {
        Some(v) if v < OLDEST_SUPPORTED => Check::warn(
            GROUP,
            "server version",
            format!("{text}: older than the oldest supported, 1.20"),
        )
        .action("upgrade the control plane before switching"),
        Some(_) => Check::ok(GROUP, "server version", text),
        None => Check::warn(
            GROUP,
            "server version",
            format!("{text}: major/minor not numeric"),
        )
        .action("the controller names below assume 1.29 or later"),
    });
    report.push(clock_skew(date.as_deref(), received, config));
    Some(Server { version })
}

fn unreachable(connection: &str, e: &ApiError) -> Check {
    let message = e.to_string();
    let lower = message.to_ascii_lowercase();
    let (name, action) = match e {
        ApiError::Unauthorized(_) => (
            "credentials",
            "the client certificate or token is refused: issue a new one for user node-lifecycled",
        ),
        ApiError::Forbidden(_) => (
            "credentials",
            "accepted but not allowed to read /version: check the server's RBAC",
        ),
        ApiError::Timeout(_) => (
            "connection",
            "no answer in time: check the server address, the firewall, and [api] request_timeout",
        ),
        _ if lower.contains("certificate") || lower.contains("tls") => (
            "tls",
            "check the CA (certificate-authority-data) and that the server name matches its certificate",
        ),
        _ => (
            "connection",
            "check the server address in the kubeconfig and that the API server is up",
        ),
    };
    Check::fail(GROUP, name, format!("{connection}: {message}")).action(action)
}

/// `"1"`, `"20+"` (as some distributions report) -> `(1, 20)`.
pub(crate) fn parse_version(major: &str, minor: &str) -> Option<(u32, u32)> {
    let digits = |s: &str| -> Option<u32> {
        let d: String = s.chars().take_while(char::is_ascii_digit).collect();
        d.parse().ok()
    };
    Some((digits(major)?, digits(minor)?))
}

fn clock_skew(date: Option<&str>, received: SystemTime, config: &Config) -> Check {
    let Some(date) = date else {
        return Check::warn(
            GROUP,
            "clock skew",
            "the server sent no Date header: unknown",
        )
        .action("compare `date -u` here and on the API server host");
    };
    let Some(server) = parse_http_date(date) else {
        return Check::warn(
            GROUP,
            "clock skew",
            format!("unreadable Date header {date:?}"),
        );
    };
    let local_ms = received
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i128)
        .unwrap_or(0);
    // The Date header has second resolution: compare whole seconds.
    let skew_s = (local_ms / 1000) - i128::from(server.as_unix_millis() / 1000);
    let abs = Duration::from_secs(u64::try_from(skew_s.unsigned_abs()).unwrap_or(u64::MAX));
    let direction = if skew_s > 0 { "ahead of" } else { "behind" };
    let message = format!(
        "this host is {}s {direction} the API server ({date})",
        skew_s.abs()
    );
    if abs <= SKEW_WARN {
        Check::ok(
            GROUP,
            "clock skew",
            format!("within {}s of the API server", SKEW_WARN.as_secs()),
        )
    } else {
        let level_check = if abs >= SKEW_FAIL || abs >= config.controller.node_monitor_grace_period
        {
            Check::fail(GROUP, "clock skew", message)
        } else {
            Check::warn(GROUP, "clock skew", message)
        };
        level_check.action(
            "synchronise clocks (chrony or systemd-timesyncd): taint timeAdded and condition times come from this host",
        )
    }
}

/// RFC 9110 IMF-fixdate, as Go's net/http writes `Date`: `Sun, 06 Nov 1994 08:49:37 GMT`.
pub(crate) fn parse_http_date(text: &str) -> Option<Time> {
    let parts: Vec<&str> = text.split_whitespace().collect();
    let [_weekday, day, month, year, clock, "GMT"] = parts.as_slice() else {
        return None;
    };
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let month = MONTHS.iter().position(|m| m == month)? + 1;
    let day: u32 = day.parse().ok()?;
    let year: u32 = year.parse().ok()?;
    Time::parse_rfc3339(&format!("{year:04}-{month:02}-{day:02}T{clock}Z"))
}

/// Who the server says we are (SelfSubjectReview, authentication.k8s.io/v1 since 1.28).
/// Older servers are not asked: RBAC answers 403 before routing finds nothing there.
pub(crate) fn check_identity(
    client: &mut ApiClient,
    version: Option<(u32, u32)>,
    report: &mut Report,
) {
    if version.is_some_and(|v| v < (1, 28)) {
        report.push(Check::ok(
            GROUP,
            "identity",
            "unknown: this server has no SelfSubjectReview (authentication.k8s.io/v1, Kubernetes 1.28)",
        ));
        return;
    }
    let review = authentication::SelfSubjectReview::default();
    let body = crate::kube::body::to_json(&review).to_string();
    let path = "/apis/authentication.k8s.io/v1/selfsubjectreviews";
    report.push(
        match client.post::<authentication::SelfSubjectReview>(path, body.as_bytes()) {
            Ok(answer) => {
                let user = answer.status.and_then(|s| s.user_info).unwrap_or_default();
                let name = user.username.unwrap_or_default();
                let groups = user.groups.unwrap_or_default();
                let check = Check::ok(
                    GROUP,
                    "identity",
                    format!("user {name:?}, groups [{}]", groups.join(", ")),
                );
                if groups.iter().any(|g| g == "system:masters") {
                    Check { level: super::Level::Warn, ..check }.action(
                        "this identity bypasses RBAC: give the daemon its own (user node-lifecycled, conf/rbac.yaml)",
                    )
                } else {
                    check
                }
            }
            Err(ApiError::NotFound(_)) => Check::ok(
                GROUP,
                "identity",
                "unknown: this server does not serve SelfSubjectReview (authentication.k8s.io/v1)",
            ),
            Err(e) => Check::warn(GROUP, "identity", format!("unknown: {e}")),
        },
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_and_http_dates_parse_as_servers_write_them() {
        assert_eq!(parse_version("1", "20"), Some((1, 20)));
        assert_eq!(parse_version("1", "29+"), Some((1, 29)));
        assert_eq!(parse_version("", "29"), None);
        assert_eq!(
            parse_http_date("Sun, 06 Nov 1994 08:49:37 GMT"),
            Time::parse_rfc3339("1994-11-06T08:49:37Z")
        );
        assert_eq!(parse_http_date("Sun, 06 Nov 1994 08:49:37 PST"), None);
        assert_eq!(parse_http_date("yesterday"), None);
    }

    #[test]
    fn clock_skew_is_ok_within_two_seconds_and_fails_beyond_thirty() {
        let config = Config::from_str("", Path::new("t.toml")).unwrap();
        let server = "Sun, 06 Nov 1994 08:49:37 GMT";
        let at = |s: u64| UNIX_EPOCH + Duration::from_secs(784_111_777 + s);
        assert_eq!(
            clock_skew(Some(server), at(1), &config).level,
            super::super::Level::Ok
        );
        let warn = clock_skew(Some(server), at(10), &config);
        assert_eq!(warn.level, super::super::Level::Warn);
        assert!(warn.message.contains("10s ahead of"), "{}", warn.message);
        assert_eq!(
            clock_skew(
                Some(server),
                at(0).checked_sub(Duration::from_secs(60)).unwrap(),
                &config
            )
            .level,
            super::super::Level::Fail
        );
        assert_eq!(
            clock_skew(None, at(0), &config).level,
            super::super::Level::Warn
        );
    }
}
