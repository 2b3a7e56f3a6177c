//! kubeconfig files as kubeadm (`/etc/kubernetes/admin.conf`), k3s (`/etc/rancher/k3s/k3s.yaml`)
//! and `kubectl config` write them.
//!
//! Only what a daemon can use unattended is accepted: a server with a CA, a client certificate
//! and/or a bearer token (inline or `tokenFile`). Exec plugins, auth providers, basic auth and
//! proxies are refused by name rather than silently ignored, so a config that would authenticate
//! differently under kubectl fails at start-up instead of with 401s later. Relative file paths
//! resolve against the kubeconfig's directory, as kubectl does.

use std::path::{Path, PathBuf};

use base64::Engine as _;
use serde::Deserialize;

use super::connection::{
    Connection, ConnectionParts, Credentials, PemSetting, ServerUrl, read_limited,
    read_setting_file,
};
use super::error::KubeConfigError;
use super::token::read_token_file;

/// Far above any real kubeconfig (embedded certificates make them a few KB each), and low
/// enough that the YAML loader's event buffer (about 125 bytes per byte of a deeply nested
/// file) stays far from the daemon's memory budget.
const MAX_KUBECONFIG: u64 = 1024 * 1024;

#[derive(Deserialize, Default)]
struct KubeConfig {
    clusters: Option<Vec<NamedCluster>>,
    users: Option<Vec<NamedUser>>,
    contexts: Option<Vec<NamedContext>>,
    #[serde(rename = "current-context")]
    current_context: Option<String>,
}

#[derive(Deserialize)]
struct NamedCluster {
    name: String,
    cluster: Option<Cluster>,
}

#[derive(Deserialize, Default)]
struct Cluster {
    server: Option<String>,
    #[serde(rename = "certificate-authority")]
    certificate_authority: Option<String>,
    #[serde(rename = "certificate-authority-data")]
    certificate_authority_data: Option<String>,
    #[serde(rename = "insecure-skip-tls-verify", default)]
    insecure_skip_tls_verify: bool,
    #[serde(rename = "tls-server-name")]
    tls_server_name: Option<String>,
    #[serde(rename = "proxy-url")]
    proxy_url: Option<String>,
}

#[derive(Deserialize)]
struct NamedUser {
    name: String,
    user: Option<User>,
}

#[derive(Deserialize, Default)]
struct User {
    #[serde(rename = "client-certificate")]
    client_certificate: Option<String>,
    #[serde(rename = "client-certificate-data")]
    client_certificate_data: Option<String>,
    #[serde(rename = "client-key")]
    client_key: Option<String>,
    #[serde(rename = "client-key-data")]
    client_key_data: Option<String>,
    token: Option<String>,
    #[serde(rename = "tokenFile")]
    token_file: Option<String>,
    username: Option<String>,
    password: Option<String>,
    exec: Option<serde_yaml_ng::Value>,
    #[serde(rename = "auth-provider")]
    auth_provider: Option<serde_yaml_ng::Value>,
    #[serde(rename = "as")]
    impersonate: Option<String>,
}

#[derive(Deserialize)]
struct NamedContext {
    name: String,
    context: Option<Context>,
}

#[derive(Deserialize, Default)]
struct Context {
    cluster: Option<String>,
    user: Option<String>,
}

impl Connection {
    /// The connection a kubeconfig describes, for `context` or else its `current-context`.
    ///
    /// `allow_insecure` is our own setting: a kubeconfig's `insecure-skip-tls-verify: true` is
    /// refused unless it is set, and logged as a warning at every start when it is.
    pub fn from_kubeconfig(
        path: &Path,
        context: Option<&str>,
        allow_insecure: bool,
    ) -> Result<Connection, KubeConfigError> {
        let source = path.display().to_string();
        let bytes = read_limited(path, MAX_KUBECONFIG)
            .map_err(|e| KubeConfigError::new(source.clone(), "", format!("cannot read: {e}")))?;
        let text = String::from_utf8(bytes)
            .map_err(|_| KubeConfigError::new(source.clone(), "", "not UTF-8 text"))?;
        let dir = path.parent().unwrap_or(Path::new("."));
        resolve(&text, &source, dir, context, allow_insecure)?.build()
    }
}

fn resolve(
    text: &str,
    source: &str,
    dir: &Path,
    context: Option<&str>,
    allow_insecure: bool,
) -> Result<ConnectionParts, KubeConfigError> {
    let err = |field: &str, reason: String| KubeConfigError::new(source, field, reason);
    let config: KubeConfig = if text.trim().is_empty() {
        KubeConfig::default()
    } else {
        serde_yaml_ng::from_str(text).map_err(|e| {
            err(
                "",
                format!("not a valid kubeconfig: {e}").replace('\n', " "),
            )
        })?
    };
    let contexts = config.contexts.unwrap_or_default();
    let clusters = config.clusters.unwrap_or_default();
    let users = config.users.unwrap_or_default();

    let (context_name, context_field) = match context {
        Some(name) => (name.to_string(), "contexts"),
        None => match config.current_context.filter(|c| !c.is_empty()) {
            Some(name) => (name, "current-context"),
            None => {
                return Err(err(
                    "current-context",
                    "not set, and no context was named in our settings".to_string(),
                ));
            }
        },
    };
    let Some((ci, named_context)) = contexts
        .into_iter()
        .enumerate()
        .find(|(_, c)| c.name == context_name)
    else {
        return Err(err(
            context_field,
            format!("no context named {context_name:?}"),
        ));
    };
    let ctx = named_context.context.unwrap_or_default();

    let cluster_name = ctx.cluster.unwrap_or_default();
    let Some((ki, named_cluster)) = clusters
        .into_iter()
        .enumerate()
        .find(|(_, c)| c.name == cluster_name)
    else {
        return Err(err(
            &format!("contexts[{ci}].context.cluster"),
            format!("no cluster named {cluster_name:?}"),
        ));
    };
    let cluster = named_cluster.cluster.unwrap_or_default();
    let cf = |name: &str| format!("clusters[{ki}].cluster.{name}");

    let server_text = cluster
        .server
        .filter(|s| !s.trim().is_empty())
        .ok_or_else(|| err(&cf("server"), "missing".to_string()))?;
    let server = ServerUrl::parse(&server_text).map_err(|r| err(&cf("server"), r))?;
    if cluster.proxy_url.is_some() {
        return Err(err(
            &cf("proxy-url"),
            "proxies are not supported".to_string(),
        ));
    }
    if cluster.tls_server_name.is_some() {
        return Err(err(&cf("tls-server-name"), "not supported".to_string()));
    }
    let ca = pem_setting(
        source,
        dir,
        (&cf("certificate-authority"), cluster.certificate_authority),
        (
            &cf("certificate-authority-data"),
            cluster.certificate_authority_data,
        ),
    )?;
    let insecure = cluster.insecure_skip_tls_verify;
    if insecure {
        if !allow_insecure {
            return Err(err(
                &cf("insecure-skip-tls-verify"),
                "is true, but our settings do not allow insecure TLS (the server would not be \
                 verified)"
                    .to_string(),
            ));
        }
        log::warn!(
            "{source}: {}: server certificate NOT verified: anyone on the network path can \
             impersonate the API server",
            cf("insecure-skip-tls-verify")
        );
    }
    if server.scheme == super::Scheme::Https && ca.is_none() && !insecure {
        return Err(err(
            &format!("clusters[{ki}].cluster"),
            "neither certificate-authority nor certificate-authority-data is set (system roots \
             are not used)"
                .to_string(),
        ));
    }

    let user_name = ctx.user.unwrap_or_default();
    let mut client_identity = None;
    let mut credentials = Credentials::None;
    if !user_name.is_empty() {
        let Some((ui, named_user)) = users
            .into_iter()
            .enumerate()
            .find(|(_, u)| u.name == user_name)
        else {
            return Err(err(
                &format!("contexts[{ci}].context.user"),
                format!("no user named {user_name:?}"),
            ));
        };
        let user = named_user.user.unwrap_or_default();
        let uf = |name: &str| format!("users[{ui}].user.{name}");
        if user.exec.is_some() {
            return Err(err(
                &uf("exec"),
                "exec credential plugins are not supported; use a client certificate or a token"
                    .to_string(),
            ));
        }
        if user.auth_provider.is_some() {
            return Err(err(
                &uf("auth-provider"),
                "auth providers are not supported; use a client certificate or a token".to_string(),
            ));
        }
        if user.username.is_some() || user.password.is_some() {
            return Err(err(
                &uf("username"),
                "basic authentication is not supported (removed from Kubernetes in 1.19)"
                    .to_string(),
            ));
        }
        if user.impersonate.is_some() {
            return Err(err(&uf("as"), "impersonation is not supported".to_string()));
        }
        let cert = pem_setting(
            source,
            dir,
            (&uf("client-certificate"), user.client_certificate),
            (&uf("client-certificate-data"), user.client_certificate_data),
        )?;
        let key = pem_setting(
            source,
            dir,
            (&uf("client-key"), user.client_key),
            (&uf("client-key-data"), user.client_key_data),
        )?;
        client_identity = match (cert, key) {
            (Some(cert), Some(key)) => Some((cert, key)),
            (None, None) => None,
            (Some(cert), None) => {
                return Err(err(&cert.field, "is set but no client-key is".to_string()));
            }
            (None, Some(key)) => {
                return Err(err(
                    &key.field,
                    "is set but no client-certificate is".to_string(),
                ));
            }
        };
        if client_identity.is_some() && server.scheme == super::Scheme::Http {
            log::warn!(
                "{source}: client certificate ignored for plain http:// server {server_text}"
            );
        }
        // As client-go: a tokenFile is what gets (re-)read even when an inline token is there too.
        credentials = match (user.token_file.filter(|t| !t.is_empty()), user.token) {
            (Some(file), _) => {
                let path = resolve_path(dir, &file);
                read_token_file(&path)
                    .map_err(|r| err(&uf("tokenFile"), format!("{}: {r}", path.display())))?;
                Credentials::TokenFile(path)
            }
            (None, Some(token)) if !token.is_empty() => Credentials::Token(token),
            (None, _) => Credentials::None,
        };
    }
    Ok(ConnectionParts {
        source: source.to_string(),
        server,
        ca,
        insecure_skip_tls_verify: insecure,
        client_identity,
        credentials,
    })
}

/// A `file` / `file-data` pair: exactly one may be set (kubectl refuses both, too).
fn pem_setting(
    source: &str,
    dir: &Path,
    (file_field, file): (&str, Option<String>),
    (data_field, data): (&str, Option<String>),
) -> Result<Option<PemSetting>, KubeConfigError> {
    let file = file.filter(|f| !f.is_empty());
    let data = data.filter(|d| !d.is_empty());
    match (file, data) {
        (None, None) => Ok(None),
        (Some(_), Some(_)) => Err(KubeConfigError::new(
            source,
            data_field,
            format!("cannot be combined with {}", last_segment(file_field)),
        )),
        (Some(file), None) => {
            let path = resolve_path(dir, &file);
            Ok(Some(PemSetting {
                field: format!("{file_field} ({})", path.display()),
                bytes: read_setting_file(source, file_field, &path)?,
            }))
        }
        (None, Some(data)) => {
            let compact: String = data.split_ascii_whitespace().collect();
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(compact)
                .map_err(|_| KubeConfigError::new(source, data_field, "not valid base64"))?;
            Ok(Some(PemSetting {
                field: data_field.to_string(),
                bytes,
            }))
        }
    }
}

fn last_segment(field: &str) -> &str {
    field.rsplit('.').next().unwrap_or(field)
}

fn resolve_path(dir: &Path, file: &str) -> PathBuf {
    let path = Path::new(file);
    if path.is_absolute() {
        path.to_path_buf()
    } else {
        dir.join(path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Scheme;
    use crate::test_dir::TestDir;

    fn resolve_str(text: &str, context: Option<&str>) -> Result<ConnectionParts, KubeConfigError> {
        resolve(
            text,
            "/etc/kubernetes/admin.conf",
            Path::new("/etc/kubernetes"),
            context,
            false,
        )
    }

    const TWO_CONTEXTS: &str = "
apiVersion: v1
kind: Config
clusters:
- name: a
  cluster:
    server: http://127.0.0.1:8080
- name: b
  cluster:
    server: http://127.0.0.1:9090/prefix
users:
- name: tok
  user:
    token: abc
contexts:
- name: ca
  context: {cluster: a, user: tok}
- name: cb
  context: {cluster: b}
current-context: cb
";

    #[test]
    fn current_context_or_a_named_one() {
        let parts = resolve_str(TWO_CONTEXTS, None).unwrap();
        assert_eq!(
            (parts.server.port, parts.server.base_path.as_str()),
            (9090, "/prefix")
        );
        assert_eq!(parts.credentials, Credentials::None);

        let parts = resolve_str(TWO_CONTEXTS, Some("ca")).unwrap();
        assert_eq!(parts.server.port, 8080);
        assert_eq!(parts.credentials, Credentials::Token("abc".into()));
    }

    fn error_of(text: &str, context: Option<&str>) -> String {
        match resolve_str(text, context) {
            Ok(_) => panic!("accepted:\n{text}"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn errors_name_the_file_and_the_field() {
        assert_eq!(
            error_of(TWO_CONTEXTS, Some("zz")),
            "/etc/kubernetes/admin.conf: contexts: no context named \"zz\""
        );
        let no_current = TWO_CONTEXTS.replace("current-context: cb", "");
        assert_eq!(
            error_of(&no_current, None),
            "/etc/kubernetes/admin.conf: current-context: not set, and no context was named in our settings"
        );
        let bad_cluster = TWO_CONTEXTS.replace("{cluster: b}", "{cluster: nope}");
        assert_eq!(
            error_of(&bad_cluster, None),
            "/etc/kubernetes/admin.conf: contexts[1].context.cluster: no cluster named \"nope\""
        );
        let remote_http = TWO_CONTEXTS.replace("http://127.0.0.1:9090", "http://10.1.2.3:9090");
        assert!(
            error_of(&remote_http, None).starts_with(
                "/etc/kubernetes/admin.conf: clusters[1].cluster.server: \"http://10.1.2.3:9090/prefix\": plain http://"
            ),
            "{}",
            error_of(&remote_http, None)
        );
        let bad_data = TWO_CONTEXTS.replace(
            "token: abc",
            "client-key-data: '!!notbase64'\n    client-certificate-data: QUJD",
        );
        assert_eq!(
            error_of(&bad_data, Some("ca")),
            "/etc/kubernetes/admin.conf: users[0].user.client-key-data: not valid base64"
        );
    }

    #[test]
    fn unsupported_authentication_is_refused_by_name() {
        for (user, field) in [
            (
                "exec: {command: aws, apiVersion: client.authentication.k8s.io/v1beta1}",
                "exec",
            ),
            ("auth-provider: {name: gcp}", "auth-provider"),
            ("username: admin\n    password: secret", "username"),
            ("as: someone", "as"),
        ] {
            let text = TWO_CONTEXTS.replace("token: abc", user);
            let e = error_of(&text, Some("ca"));
            let expected = format!("/etc/kubernetes/admin.conf: users[0].user.{field}: ");
            assert!(e.starts_with(&expected), "{e}");
        }
    }

    #[test]
    fn https_without_a_ca_is_refused() {
        let text = TWO_CONTEXTS.replace("http://127.0.0.1:9090", "https://127.0.0.1:9090");
        let e = error_of(&text, None);
        assert!(
            e.starts_with("/etc/kubernetes/admin.conf: clusters[1].cluster: neither"),
            "{e}"
        );
    }

    #[test]
    fn insecure_skip_tls_verify_only_when_our_settings_allow_it() {
        let text = TWO_CONTEXTS.replace(
            "server: http://127.0.0.1:9090/prefix",
            "server: https://10.0.0.1:6443\n    insecure-skip-tls-verify: true",
        );
        let e = error_of(&text, None);
        assert!(
            e.starts_with("/etc/kubernetes/admin.conf: clusters[1].cluster.insecure-skip-tls-verify: is true, but"),
            "{e}"
        );
        let parts = resolve(&text, "k", Path::new("/"), None, true).unwrap();
        assert!(parts.insecure_skip_tls_verify);
        let connection = parts.build().unwrap();
        assert_eq!(connection.scheme, Scheme::Https);
        assert!(connection.tls.is_some());
    }

    #[test]
    fn a_file_and_its_data_twin_together_are_refused() {
        let text = TWO_CONTEXTS.replace(
            "server: http://127.0.0.1:9090/prefix",
            "server: https://10.0.0.1:6443\n    certificate-authority: ca.crt\n    certificate-authority-data: QUJD",
        );
        assert_eq!(
            error_of(&text, None),
            "/etc/kubernetes/admin.conf: clusters[1].cluster.certificate-authority-data: cannot be combined with certificate-authority"
        );
    }

    #[test]
    fn relative_paths_resolve_against_the_kubeconfig_directory() {
        let dir = TestDir::new("kubeconfig-relative");
        dir.write("token", "from-file");
        let text = TWO_CONTEXTS.replace("token: abc", "tokenFile: token");
        let kubeconfig = dir.write("config", text);
        let connection = Connection::from_kubeconfig(&kubeconfig, Some("ca"), false).unwrap();
        assert_eq!(
            connection.credentials,
            Credentials::TokenFile(dir.path().join("token"))
        );

        let text = TWO_CONTEXTS.replace("token: abc", "tokenFile: missing-token");
        let kubeconfig = dir.write("config2", text);
        let e = Connection::from_kubeconfig(&kubeconfig, Some("ca"), false).unwrap_err();
        assert_eq!(e.field, "users[0].user.tokenFile");
        assert!(e.reason.contains("missing-token: cannot read"), "{e}");
    }

    #[test]
    fn unreadable_and_malformed_files_are_one_line_errors() {
        let e = Connection::from_kubeconfig(Path::new("/nonexistent/kubeconfig"), None, false)
            .unwrap_err();
        assert!(
            e.to_string()
                .starts_with("/nonexistent/kubeconfig: cannot read"),
            "{e}"
        );
        let e = resolve_str("clusters: [[[", None).err().unwrap();
        assert!(e.reason.starts_with("not a valid kubeconfig"), "{e}");
        let e = resolve_str("clusters:\n- cluster: {server: x}\n", None)
            .err()
            .unwrap();
        assert!(e.reason.contains("missing field `name`"), "{e}");
        assert!(!e.to_string().contains('\n'), "{e}");
    }
}
