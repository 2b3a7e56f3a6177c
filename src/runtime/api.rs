//! From `[api]` to a resolved [`Connection`] and the daemon's three API clients.
//!
//! Everything here reads files (kubeconfig, certificates, keys, token file) and parses them; it
//! never touches the network. A file that cannot be read or parsed is a configuration error
//! (exit 78), found before the daemon starts; an API server that does not answer, or refuses
//! our credentials, is not: that is for the running daemon to log and retry.

use std::path::{Path, PathBuf};

use crate::config::{ApiConfig, ApiSource};
use crate::kube::in_cluster::SERVICE_ACCOUNT_DIR;
use crate::kube::{ApiClient, Connection, ExplicitSettings, KubeConfigError, TokenSource};
use crate::time::Time;

use super::Clock;
use super::settings::client_settings;

/// Where and how to reach the API server, from the one source `[api]` names. `config_path`
/// anchors relative paths of explicit settings and names the file in errors.
pub(crate) fn connect(api: &ApiConfig, config_path: &Path) -> Result<Connection, KubeConfigError> {
    let allow_insecure = api.allow_insecure_skip_tls_verify;
    match &api.source {
        ApiSource::Kubeconfig { path, context } => {
            Connection::from_kubeconfig(path, context.as_deref(), allow_insecure)
        }
        ApiSource::InCluster => Connection::in_cluster(Path::new(SERVICE_ACCOUNT_DIR)),
        ApiSource::Explicit {
            server,
            certificate_authority,
            client_certificate,
            client_key,
            token_file,
        } => Connection::explicit(
            &ExplicitSettings {
                origin: config_path.to_path_buf(),
                section: "api".to_string(),
                server: server.clone(),
                certificate_authority: certificate_authority.clone(),
                client_certificate: client_certificate.clone(),
                client_key: client_key.clone(),
                token_file: token_file.clone(),
                // Our own file has one switch for both: allowing it is asking for it.
                insecure_skip_tls_verify: allow_insecure,
            },
            allow_insecure,
        ),
    }
}

/// The daemon's API clients, one per user of the API so no throttle starves another:
/// informers (LIST pages), executor (writes and live Lease reads), leader election (renewals
/// must never queue behind a burst of writes).
pub(crate) struct ApiClients {
    pub(crate) connection: Connection,
    /// Bearer tokens for the watch streams (the unary clients have their own).
    pub(crate) tokens: TokenSource,
    pub(crate) informers: ApiClient,
    pub(crate) executor: ApiClient,
    pub(crate) leader: ApiClient,
}

impl ApiClients {
    /// Builds the clients on the daemon's clock. Fails only on local problems (a token file
    /// that cannot be read).
    pub(crate) fn build(
        connection: Connection,
        api: &ApiConfig,
        clock: &Clock,
    ) -> Result<ApiClients, KubeConfigError> {
        let settings = client_settings(api);
        let client = |clock: &Clock| {
            let clock = clock.clone();
            ApiClient::new(&connection, &settings, Box::new(move || clock.now()))
        };
        let informers = client(clock)?;
        let executor = client(clock)?;
        let leader = client(clock)?;
        let tokens = TokenSource::new(&connection.credentials, clock.now())?;
        Ok(ApiClients {
            connection,
            tokens,
            informers,
            executor,
            leader,
        })
    }
}

/// What `check-config` concludes about the connection settings.
#[derive(Debug, PartialEq, Eq)]
pub enum ConnectionCheck {
    /// Every file read and parsed.
    Valid,
    /// Not checkable here, and not an error: a file the settings name cannot be read by this
    /// user (systemd's `LoadCredential=` files exist only inside the service), or the in-cluster
    /// environment is absent outside a pod. The daemon itself exits 78 if it finds the same.
    NotCheckable(String),
}

/// `check-config`: the connection settings are judged too (files read and parsed, no network).
pub fn check(api: &ApiConfig, config_path: &Path) -> Result<ConnectionCheck, KubeConfigError> {
    let dir = config_path.parent().unwrap_or(Path::new("."));
    let named: Vec<PathBuf> = match &api.source {
        ApiSource::Kubeconfig { path, .. } => vec![path.clone()],
        ApiSource::InCluster => {
            if std::env::var_os(crate::kube::in_cluster::HOST_VARIABLE).is_none() {
                return Ok(ConnectionCheck::NotCheckable(format!(
                    "api.in_cluster: not checked: {} is not set here (not in a pod)",
                    crate::kube::in_cluster::HOST_VARIABLE
                )));
            }
            Vec::new()
        }
        ApiSource::Explicit {
            certificate_authority,
            client_certificate,
            client_key,
            token_file,
            ..
        } => [
            certificate_authority,
            client_certificate,
            client_key,
            token_file,
        ]
        .into_iter()
        .flatten()
        .map(|p| dir.join(p))
        .collect(),
    };
    for path in named {
        if let Err(e) = std::fs::File::open(&path) {
            return Ok(ConnectionCheck::NotCheckable(format!(
                "connection not checked: cannot read {}: {e}",
                path.display()
            )));
        }
    }
    let connection = connect(api, config_path)?;
    TokenSource::new(&connection.credentials, Time::ZERO)?;
    Ok(ConnectionCheck::Valid)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    fn temp(name: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "nlc-api-{name}-{}-{}",
            std::process::id(),
            Clock::start().now().as_unix_millis()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn a_kubeconfig_that_cannot_be_parsed_is_an_error_naming_the_file() {
        let dir = temp("bad-kubeconfig");
        let kubeconfig = dir.join("kubeconfig");
        std::fs::write(&kubeconfig, "clusters: [not: {a kubeconfig").unwrap();
        let text = format!(
            "[api]\nkubeconfig = {:?}\n",
            kubeconfig.display().to_string()
        );
        let config = Config::from_str(&text, &dir.join("c.toml")).unwrap();
        let err = check(&config.api, &dir.join("c.toml"))
            .unwrap_err()
            .to_string();
        assert!(err.starts_with(&kubeconfig.display().to_string()), "{err}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn explicit_settings_resolve_relative_files_beside_the_config() {
        let dir = temp("explicit");
        std::fs::write(dir.join("token"), "secret\n").unwrap();
        let text = "[api]\nserver = \"http://127.0.0.1:8080\"\ntoken_file = \"token\"\n";
        let path = dir.join("c.toml");
        let config = Config::from_str(text, &path).unwrap();
        assert_eq!(check(&config.api, &path), Ok(ConnectionCheck::Valid));
        assert_eq!(
            connect(&config.api, &path).unwrap().base_url(),
            "http://127.0.0.1:8080"
        );
        std::fs::write(dir.join("token"), "").unwrap();
        let err = check(&config.api, &path).unwrap_err().to_string();
        assert!(err.contains("api.token_file"), "{err}");
        std::fs::remove_file(dir.join("token")).unwrap();
        let unreadable = check(&config.api, &path).unwrap();
        assert!(
            matches!(&unreadable, ConnectionCheck::NotCheckable(why) if why.contains("token")),
            "{unreadable:?}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
