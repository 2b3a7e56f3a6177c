//! The resolved API endpoint: where to connect, how to verify it, how to authenticate.
//!
//! Built once at start-up from a kubeconfig, the in-cluster service account or explicit TOML
//! settings, and shared (cheaply cloned) by the unary client and every watch stream.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::error::KubeConfigError;
use super::tls::{self, ClientIdentity, ServerVerification, TlsConfigError};

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Scheme {
    /// Plain HTTP: only ever allowed to a loopback address (tests, the simulator).
    Http,
    Https,
}

/// How requests prove who we are (client certificates live in the TLS config instead).
#[derive(Clone, PartialEq, Eq)]
pub enum Credentials {
    None,
    /// A bearer token given inline.
    Token(String),
    /// A bearer token read from a file and re-read at least every minute (bound service-account
    /// tokens rotate).
    TokenFile(PathBuf),
}

/// Never prints an inline token (a `{:?}` in a log line must not leak it).
impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Credentials::None => f.write_str("None"),
            Credentials::Token(_) => f.write_str("Token(<redacted>)"),
            Credentials::TokenFile(path) => f.debug_tuple("TokenFile").field(path).finish(),
        }
    }
}

#[derive(Clone)]
pub struct Connection {
    pub scheme: Scheme,
    /// Host as written in the server URL (IP literal or DNS name, no brackets).
    pub host: String,
    pub port: u16,
    /// Path prefix of the server URL without a trailing slash ("" for most servers).
    pub base_path: String,
    /// TLS settings (CA, client certificate, verification) for `Scheme::Https`.
    pub tls: Option<Arc<rustls::ClientConfig>>,
    pub credentials: Credentials,
}

impl Connection {
    /// `scheme://host:port` + base path, for logs and for ureq.
    pub fn base_url(&self) -> String {
        let scheme = match self.scheme {
            Scheme::Http => "http",
            Scheme::Https => "https",
        };
        let host = if self.host.contains(':') {
            format!("[{}]", self.host)
        } else {
            self.host.clone()
        };
        format!("{scheme}://{host}:{}{}", self.port, self.base_path)
    }
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("url", &self.base_url())
            .field("tls", &self.tls.is_some())
            .field(
                "credentials",
                &match &self.credentials {
                    Credentials::None => "none",
                    Credentials::Token(_) => "token",
                    Credentials::TokenFile(_) => "token file",
                },
            )
            .finish()
    }
}

/// PEM material as read from one setting, with the setting's name for errors.
pub(crate) struct PemSetting {
    pub(crate) field: String,
    pub(crate) bytes: Vec<u8>,
}

/// Everything a settings source (kubeconfig, in-cluster, explicit) resolved, before the TLS
/// material is parsed and checked.
pub(crate) struct ConnectionParts {
    /// The file the settings came from (or `environment`), for errors.
    pub(crate) source: String,
    pub(crate) server: ServerUrl,
    pub(crate) ca: Option<PemSetting>,
    /// Only ever true when our own settings allowed it.
    pub(crate) insecure_skip_tls_verify: bool,
    /// Certificate, then key.
    pub(crate) client_identity: Option<(PemSetting, PemSetting)>,
    pub(crate) credentials: Credentials,
}

impl ConnectionParts {
    /// Parses the PEM material and builds the TLS configuration; errors name the field at fault.
    pub(crate) fn build(self) -> Result<Connection, KubeConfigError> {
        let source = self.source;
        let err = |field: &str, reason: String| KubeConfigError::new(source.clone(), field, reason);
        let tls = match self.server.scheme {
            Scheme::Http => None,
            Scheme::Https => {
                let ca_field = self
                    .ca
                    .as_ref()
                    .map(|c| c.field.clone())
                    .unwrap_or_default();
                let server = match (self.ca, self.insecure_skip_tls_verify) {
                    (Some(ca), false) => ServerVerification::CaCertificates(
                        tls::parse_certificates(&ca.bytes).map_err(|r| err(&ca.field, r))?,
                    ),
                    (None, true) => ServerVerification::InsecureSkipVerify,
                    (Some(ca), true) => {
                        return Err(err(
                            &ca.field,
                            "cannot be combined with insecure-skip-tls-verify".to_string(),
                        ));
                    }
                    (None, false) => {
                        return Err(err(
                            "certificate-authority",
                            "an https:// server needs a CA certificate to verify it (system \
                             roots are not used)"
                                .to_string(),
                        ));
                    }
                };
                let (identity, cert_field, key_field) = match self.client_identity {
                    None => (None, String::new(), String::new()),
                    Some((cert, key)) => {
                        let chain = tls::parse_certificates(&cert.bytes)
                            .map_err(|r| err(&cert.field, r))?;
                        let private =
                            tls::parse_private_key(&key.bytes).map_err(|r| err(&key.field, r))?;
                        let identity = ClientIdentity {
                            chain,
                            key: private,
                        };
                        (Some(identity), cert.field, key.field)
                    }
                };
                let config = tls::client_config(server, identity).map_err(|e| match e {
                    TlsConfigError::CertificateAuthority(r) => err(&ca_field, r),
                    TlsConfigError::ClientCertificate(r) => err(&cert_field, r),
                    TlsConfigError::ClientKey(r) => err(&key_field, r),
                })?;
                Some(config)
            }
        };
        Ok(Connection {
            scheme: self.server.scheme,
            host: self.server.host,
            port: self.server.port,
            base_path: self.server.base_path,
            tls,
            credentials: self.credentials,
        })
    }
}

/// Reads a file a setting names; the error names the setting and the file.
pub(crate) fn read_setting_file(
    source: &str,
    field: &str,
    path: &Path,
) -> Result<Vec<u8>, KubeConfigError> {
    read_limited(path, MAX_SETTING_FILE).map_err(|e| {
        KubeConfigError::new(
            source,
            field,
            format!("cannot read {}: {e}", path.display()),
        )
    })
}

/// Certificates, keys and CA bundles are a few KB; a system CA bundle is about 200 KB.
pub(crate) const MAX_SETTING_FILE: u64 = 4 * 1024 * 1024;

/// Reads a whole file of at most `limit` bytes. A path that never ends (`/dev/zero`, a FIFO fed
/// forever) or a runaway file is an error, not a read until memory runs out.
pub(crate) fn read_limited(path: &Path, limit: u64) -> Result<Vec<u8>, String> {
    use std::io::Read as _;
    let file = std::fs::File::open(path).map_err(|e| e.to_string())?;
    let mut bytes = Vec::new();
    file.take(limit + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| e.to_string())?;
    if bytes.len() as u64 > limit {
        return Err(format!("larger than {limit} bytes"));
    }
    Ok(bytes)
}

/// A parsed `server:` URL: `https://host[:port][/base/path]`, or `http://` to a loopback address.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerUrl {
    pub(crate) scheme: Scheme,
    pub(crate) host: String,
    pub(crate) port: u16,
    pub(crate) base_path: String,
}

impl ServerUrl {
    /// Parses the URL; plain `http://` is refused unless the host is loopback (`127.0.0.0/8`,
    /// `::1`, `localhost`): bearer tokens must not cross a network in the clear.
    pub(crate) fn parse(url: &str) -> Result<ServerUrl, String> {
        let url = url.trim();
        let (scheme, rest) = if let Some(rest) = strip_prefix_ignore_case(url, "https://") {
            (Scheme::Https, rest)
        } else if let Some(rest) = strip_prefix_ignore_case(url, "http://") {
            (Scheme::Http, rest)
        } else {
            return Err(format!(
                "{url:?} must start with https:// (or http:// to a loopback address)"
            ));
        };
        if rest.contains(['?', '#']) {
            return Err(format!("{url:?} must not carry a query or fragment"));
        }
        let (authority, path) = match rest.find('/') {
            Some(i) => rest.split_at(i),
            None => (rest, ""),
        };
        if authority.contains('@') {
            return Err(format!("{url:?}: credentials in the URL are not supported"));
        }
        let (host, port) = if let Some(bracketed) = authority.strip_prefix('[') {
            let Some(end) = bracketed.find(']') else {
                return Err(format!("{url:?}: unclosed '[' in the host"));
            };
            let host = &bracketed[..end];
            match &bracketed[end + 1..] {
                "" => (host, None),
                after => match after.strip_prefix(':') {
                    Some(port) => (host, Some(port)),
                    None => return Err(format!("{url:?}: unexpected {after:?} after the host")),
                },
            }
        } else {
            match authority.split_once(':') {
                Some((host, port)) => (host, Some(port)),
                None => (authority, None),
            }
        };
        if host.is_empty() {
            return Err(format!("{url:?} has no host"));
        }
        let port = match port {
            None => match scheme {
                Scheme::Https => 443,
                Scheme::Http => 80,
            },
            Some(p) => match p.parse::<u16>() {
                Ok(p) if p != 0 => p,
                _ => return Err(format!("{url:?}: {p:?} is not a valid port")),
            },
        };
        if scheme == Scheme::Http && !is_loopback_host(host) {
            return Err(format!(
                "{url:?}: plain http:// is only allowed to a loopback address; use https://"
            ));
        }
        Ok(ServerUrl {
            scheme,
            host: host.to_string(),
            port,
            base_path: path.trim_end_matches('/').to_string(),
        })
    }
}

fn strip_prefix_ignore_case<'a>(s: &'a str, prefix: &str) -> Option<&'a str> {
    let head = s.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix)
        .then(|| &s[prefix.len()..])
}

/// Whether `host` (an IP literal without brackets, or a name) is this machine.
pub(crate) fn is_loopback_host(host: &str) -> bool {
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(url: &str) -> Result<(Scheme, String, u16, String), String> {
        ServerUrl::parse(url).map(|u| (u.scheme, u.host, u.port, u.base_path))
    }

    #[test]
    fn server_urls_as_kubeadm_and_k3s_write_them() {
        assert_eq!(
            parse("https://127.0.0.1:6443"),
            Ok((Scheme::Https, "127.0.0.1".into(), 6443, String::new()))
        );
        assert_eq!(
            parse("https://10.0.0.1"),
            Ok((Scheme::Https, "10.0.0.1".into(), 443, String::new()))
        );
        assert_eq!(
            parse("https://[fd00::1]:6443/prefix/"),
            Ok((Scheme::Https, "fd00::1".into(), 6443, "/prefix".into()))
        );
        assert_eq!(
            parse("HTTPS://api.example.com:443/"),
            Ok((Scheme::Https, "api.example.com".into(), 443, String::new()))
        );
    }

    #[test]
    fn plain_http_only_to_loopback() {
        assert!(parse("http://127.0.0.1:8080").is_ok());
        assert!(parse("http://localhost:8080").is_ok());
        assert!(parse("http://[::1]:8080").is_ok());
        let err = parse("http://10.0.0.1:8080").unwrap_err();
        assert!(err.contains("only allowed to a loopback address"), "{err}");
        assert!(parse("http://api.example.com").is_err());
    }

    #[test]
    fn malformed_server_urls_are_errors() {
        for bad in [
            "",
            "127.0.0.1:6443",
            "ftp://x",
            "https://",
            "https://:6443",
            "https://h:0",
            "https://h:99999",
            "https://h:port",
            "https://[::1",
            "https://[::1]x",
            "https://u:p@h",
            "https://h/?x=1",
        ] {
            assert!(parse(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn debug_output_never_shows_an_inline_token() {
        let shown = format!("{:?}", Credentials::Token("s3cret".into()));
        assert!(!shown.contains("s3cret"), "{shown}");
    }

    #[test]
    fn base_url_brackets_ipv6() {
        let u = ServerUrl::parse("https://[fd00::1]:6443").unwrap();
        let c = Connection {
            scheme: u.scheme,
            host: u.host,
            port: u.port,
            base_path: u.base_path,
            tls: None,
            credentials: Credentials::None,
        };
        assert_eq!(c.base_url(), "https://[fd00::1]:6443");
    }
}
