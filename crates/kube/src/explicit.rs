//! Connection settings written directly in our own TOML (no kubeconfig): a server URL and files.
//!
//! The TOML parser lives elsewhere; it hands us the values plus where they came from, so errors
//! read like every other settings error: `/etc/node-lifecycled/config.toml: kube.client_key: …`.

use std::path::{Path, PathBuf};

use super::connection::{
    Connection, ConnectionParts, Credentials, PemSetting, ServerUrl, read_setting_file,
};
use super::error::KubeConfigError;
use super::token::read_token_file;

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ExplicitSettings {
    /// The file these settings were read from; relative paths resolve against its directory.
    pub origin: PathBuf,
    /// The table the keys live in (`kube`), for error messages.
    pub section: String,
    /// `https://host:port`, or `http://` to a loopback address.
    pub server: String,
    pub certificate_authority: Option<PathBuf>,
    pub client_certificate: Option<PathBuf>,
    pub client_key: Option<PathBuf>,
    pub token_file: Option<PathBuf>,
    /// Honoured only together with `allow_insecure` (see `Connection::explicit`).
    pub insecure_skip_tls_verify: bool,
}

impl Connection {
    /// The connection our own settings describe. `insecure_skip_tls_verify` needs
    /// `allow_insecure` too, as for kubeconfigs, and is logged as a warning at every start.
    pub fn explicit(
        settings: &ExplicitSettings,
        allow_insecure: bool,
    ) -> Result<Connection, KubeConfigError> {
        let source = settings.origin.display().to_string();
        let key = |name: &str| {
            if settings.section.is_empty() {
                name.to_string()
            } else {
                format!("{}.{name}", settings.section)
            }
        };
        let err =
            |name: &str, reason: String| KubeConfigError::new(source.clone(), key(name), reason);
        let dir = settings.origin.parent().unwrap_or(Path::new("."));
        let resolve = |p: &Path| {
            if p.is_absolute() {
                p.to_path_buf()
            } else {
                dir.join(p)
            }
        };
        let pem =
            |name: &str, path: &Option<PathBuf>| -> Result<Option<PemSetting>, KubeConfigError> {
                match path {
                    None => Ok(None),
                    Some(p) => {
                        let path = resolve(p);
                        Ok(Some(PemSetting {
                            field: format!("{} ({})", key(name), path.display()),
                            bytes: read_setting_file(&source, &key(name), &path)?,
                        }))
                    }
                }
            };

        let server = ServerUrl::parse(&settings.server).map_err(|r| err("server", r))?;
        if settings.insecure_skip_tls_verify {
            if !allow_insecure {
                return Err(err(
                    "insecure_skip_tls_verify",
                    "is true, but insecure TLS is not allowed".to_string(),
                ));
            }
            log::warn!(
                "{source}: {}: server certificate NOT verified: anyone on the network path can \
                 impersonate the API server",
                key("insecure_skip_tls_verify")
            );
        }
        let ca = pem("certificate_authority", &settings.certificate_authority)?;
        let cert = pem("client_certificate", &settings.client_certificate)?;
        let client_key = pem("client_key", &settings.client_key)?;
        let client_identity = match (cert, client_key) {
            (Some(c), Some(k)) => Some((c, k)),
            (None, None) => None,
            (Some(_), None) => {
                return Err(err(
                    "client_key",
                    "missing (client_certificate is set)".to_string(),
                ));
            }
            (None, Some(_)) => {
                return Err(err(
                    "client_certificate",
                    "missing (client_key is set)".to_string(),
                ));
            }
        };
        let credentials = match &settings.token_file {
            None => Credentials::None,
            Some(p) => {
                let path = resolve(p);
                read_token_file(&path)
                    .map_err(|r| err("token_file", format!("{}: {r}", path.display())))?;
                Credentials::TokenFile(path)
            }
        };
        if server.scheme == super::Scheme::Https
            && ca.is_none()
            && !settings.insecure_skip_tls_verify
        {
            return Err(err(
                "certificate_authority",
                "missing: an https:// server needs a CA certificate to verify it".to_string(),
            ));
        }
        ConnectionParts {
            source: source.clone(),
            server,
            ca,
            insecure_skip_tls_verify: settings.insecure_skip_tls_verify,
            client_identity,
            credentials,
        }
        .build()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Scheme;
    use crate::test_dir::TestDir;

    fn settings(dir: &TestDir) -> ExplicitSettings {
        ExplicitSettings {
            origin: dir.path().join("config.toml"),
            section: "kube".to_string(),
            server: "http://127.0.0.1:8080".to_string(),
            ..ExplicitSettings::default()
        }
    }

    #[test]
    fn a_loopback_http_server_with_a_token_file() {
        let dir = TestDir::new("explicit-http");
        dir.write("token", "t");
        let s = ExplicitSettings {
            token_file: Some("token".into()),
            ..settings(&dir)
        };
        let c = Connection::explicit(&s, false).unwrap();
        assert_eq!(c.scheme, Scheme::Http);
        assert!(c.tls.is_none());
        assert_eq!(
            c.credentials,
            Credentials::TokenFile(dir.path().join("token"))
        );
    }

    #[test]
    fn errors_name_our_config_file_and_key() {
        let dir = TestDir::new("explicit-errors");
        let origin = dir.path().join("config.toml").display().to_string();
        let s = ExplicitSettings {
            server: "https://10.0.0.1:6443".into(),
            ..settings(&dir)
        };
        let e = Connection::explicit(&s, false).unwrap_err();
        assert_eq!(e.source, origin);
        assert_eq!(e.field, "kube.certificate_authority");

        let s = ExplicitSettings {
            client_certificate: Some("missing.crt".into()),
            ..settings(&dir)
        };
        let e = Connection::explicit(&s, false).unwrap_err();
        assert_eq!(e.field, "kube.client_certificate");
        assert!(e.reason.contains("missing.crt"), "{e}");

        let s = ExplicitSettings {
            server: "https://10.0.0.1:6443".into(),
            insecure_skip_tls_verify: true,
            ..settings(&dir)
        };
        let e = Connection::explicit(&s, false).unwrap_err();
        assert_eq!(e.field, "kube.insecure_skip_tls_verify");
        assert!(Connection::explicit(&s, true).is_ok());
    }
}
