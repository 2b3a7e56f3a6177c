//! Running in a pod: the API server from the service environment variables, trusted through the
//! service account's CA, authenticated with its (rotating, hence re-read) token.

use std::path::Path;

use super::connection::{
    Connection, ConnectionParts, Credentials, PemSetting, ServerUrl, read_setting_file,
};
use super::error::KubeConfigError;
use super::token::read_token_file;

/// Where the kubelet mounts the service account's token, CA and namespace.
pub const SERVICE_ACCOUNT_DIR: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

pub const HOST_VARIABLE: &str = "KUBERNETES_SERVICE_HOST";
pub(crate) const PORT_VARIABLE: &str = "KUBERNETES_SERVICE_PORT";

impl Connection {
    /// From `KUBERNETES_SERVICE_HOST` / `KUBERNETES_SERVICE_PORT` and `dir/{token,ca.crt}`
    /// (`dir` is `SERVICE_ACCOUNT_DIR` outside tests).
    pub fn in_cluster(dir: &Path) -> Result<Connection, KubeConfigError> {
        let host = std::env::var(HOST_VARIABLE).ok();
        let port = std::env::var(PORT_VARIABLE).ok();
        Connection::in_cluster_from(host.as_deref(), port.as_deref(), dir)
    }

    /// `in_cluster` with the two variables given (tests cannot safely set the environment).
    pub fn in_cluster_from(
        host: Option<&str>,
        port: Option<&str>,
        dir: &Path,
    ) -> Result<Connection, KubeConfigError> {
        let env_err = |var: &str, reason: String| KubeConfigError::new("environment", var, reason);
        let host = host
            .map(str::trim)
            .filter(|h| !h.is_empty())
            .ok_or_else(|| env_err(HOST_VARIABLE, "not set (not running in a pod?)".to_string()))?;
        let port = port
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .ok_or_else(|| env_err(PORT_VARIABLE, "not set (not running in a pod?)".to_string()))?;
        let url = if host.contains(':') {
            format!("https://[{host}]:{port}")
        } else {
            format!("https://{host}:{port}")
        };
        let server = ServerUrl::parse(&url).map_err(|r| env_err(HOST_VARIABLE, r))?;

        let source = dir.display().to_string();
        let ca_path = dir.join("ca.crt");
        let ca = PemSetting {
            field: "ca.crt".to_string(),
            bytes: read_setting_file(&source, "ca.crt", &ca_path)?,
        };
        let token_path = dir.join("token");
        read_token_file(&token_path)
            .map_err(|reason| KubeConfigError::new(source.clone(), "token", reason))?;
        ConnectionParts {
            source,
            server,
            ca: Some(ca),
            insecure_skip_tls_verify: false,
            client_identity: None,
            credentials: Credentials::TokenFile(token_path),
        }
        .build()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_dir::TestDir;

    #[test]
    fn missing_environment_is_named() {
        let dir = TestDir::new("in-cluster-env");
        let e = Connection::in_cluster_from(None, Some("443"), dir.path()).unwrap_err();
        assert_eq!(
            e.to_string(),
            "environment: KUBERNETES_SERVICE_HOST: not set (not running in a pod?)"
        );
        let e = Connection::in_cluster_from(Some("10.0.0.1"), None, dir.path()).unwrap_err();
        assert_eq!(e.field, PORT_VARIABLE);
        let e =
            Connection::in_cluster_from(Some("10.0.0.1"), Some("https"), dir.path()).unwrap_err();
        assert!(e.reason.contains("not a valid port"), "{e}");
    }

    #[test]
    fn missing_service_account_files_are_named() {
        let dir = TestDir::new("in-cluster-files");
        let e = Connection::in_cluster_from(Some("10.0.0.1"), Some("443"), dir.path()).unwrap_err();
        assert_eq!(e.field, "ca.crt");
        assert!(e.reason.starts_with("cannot read"), "{e}");

        dir.write("ca.crt", "not pem");
        let e = Connection::in_cluster_from(Some("10.0.0.1"), Some("443"), dir.path()).unwrap_err();
        assert_eq!(e.field, "token");

        dir.write("token", "abc");
        let e = Connection::in_cluster_from(Some("10.0.0.1"), Some("443"), dir.path()).unwrap_err();
        assert_eq!(e.field, "ca.crt");
        assert!(e.reason.contains("no PEM CERTIFICATE block"), "{e}");
    }
}
