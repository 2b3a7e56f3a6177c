//! The resolved API endpoint: where to connect, how to verify it, how to authenticate.
//!
//! Built once at start-up from a kubeconfig, the in-cluster service account or explicit TOML
//! settings, and shared (cheaply cloned) by the unary client and every watch stream.

use std::path::PathBuf;
use std::sync::Arc;

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Scheme {
    /// Plain HTTP: only ever allowed to a loopback address (tests, the simulator).
    Http,
    Https,
}

/// How requests prove who we are (client certificates live in the TLS config instead).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Credentials {
    None,
    /// A bearer token given inline.
    Token(String),
    /// A bearer token read from a file and re-read at least every minute (bound service-account
    /// tokens rotate).
    TokenFile(PathBuf),
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
