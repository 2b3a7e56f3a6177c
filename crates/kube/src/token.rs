//! Bearer tokens for the `Authorization` header, re-read from their file as they rotate.
//!
//! Bound service-account tokens are rewritten by the kubelet well before they expire (about every
//! 48 minutes for the default hour); client-go re-reads the file at most once a minute and so do
//! we. The clock is an input so a test can rewrite the file and advance a virtual clock instead of
//! waiting a minute.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::connection::Credentials;
use super::error::KubeConfigError;
use crate::time::Time;

/// How long a token read from a file is used before the file is read again.
pub(crate) const TOKEN_REREAD_INTERVAL: Duration = Duration::from_secs(60);

/// Produces the `Authorization` header value for each request (unary calls and watch streams).
pub struct TokenSource {
    kind: Kind,
}

enum Kind {
    None,
    Static(String),
    File {
        path: PathBuf,
        header: String,
        read_at: Time,
    },
}

impl TokenSource {
    /// Reads a token file at once, so a missing or empty file is a start-up error.
    pub fn new(credentials: &Credentials, now: Time) -> Result<TokenSource, KubeConfigError> {
        let kind = match credentials {
            Credentials::None => Kind::None,
            Credentials::Token(token) => Kind::Static(
                bearer_header(token)
                    .map_err(|reason| KubeConfigError::new("settings", "token", reason))?,
            ),
            Credentials::TokenFile(path) => Kind::File {
                header: read_token_file(path).map_err(|reason| {
                    KubeConfigError::new(path.display().to_string(), "bearer token", reason)
                })?,
                path: path.clone(),
                read_at: now,
            },
        };
        Ok(TokenSource { kind })
    }

    /// `Bearer <token>`, or `None` when we authenticate by client certificate only.
    ///
    /// A token file is read again once `TOKEN_REREAD_INTERVAL` has passed; if it cannot be read
    /// then (mid-rotation, deleted), the last good token is kept and a warning logged: an
    /// expired token fails loudly with 401 anyway, a missing header would fail the same way.
    pub fn authorization(&mut self, now: Time) -> Option<String> {
        match &mut self.kind {
            Kind::None => None,
            Kind::Static(header) => Some(header.clone()),
            Kind::File {
                path,
                header,
                read_at,
            } => {
                if now >= read_at.saturating_add(TOKEN_REREAD_INTERVAL) {
                    *read_at = now;
                    match read_token_file(path) {
                        Ok(fresh) => *header = fresh,
                        Err(reason) => log::warn!(
                            "{}: cannot re-read the bearer token, keeping the previous one: {reason}",
                            path.display()
                        ),
                    }
                }
                Some(header.clone())
            }
        }
    }
}

impl std::fmt::Debug for TokenSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.kind {
            Kind::None => f.write_str("TokenSource::None"),
            Kind::Static(_) => f.write_str("TokenSource::Static(..)"),
            Kind::File { path, .. } => write!(f, "TokenSource::File({})", path.display()),
        }
    }
}

/// Service-account tokens are 1–2 KB.
const MAX_TOKEN_FILE: u64 = 1024 * 1024;

/// Reads and checks a token file, returning the header value.
pub(crate) fn read_token_file(path: &Path) -> Result<String, String> {
    let bytes = super::connection::read_limited(path, MAX_TOKEN_FILE)
        .map_err(|e| format!("cannot read: {e}"))?;
    let text = String::from_utf8(bytes).map_err(|_| "cannot read: not UTF-8 text".to_string())?;
    bearer_header(&text)
}

fn bearer_header(token: &str) -> Result<String, String> {
    let token = token.trim();
    if token.is_empty() {
        return Err("the token is empty".to_string());
    }
    // A stray newline or control byte would make an invalid header on every request.
    if !token.bytes().all(|b| b.is_ascii_graphic()) {
        return Err("the token contains characters not allowed in an HTTP header".to_string());
    }
    Ok(format!("Bearer {token}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_dir::TestDir;

    const T0: Time = Time::from_unix_millis(1_700_000_000_000);

    #[test]
    fn a_rotated_token_file_is_picked_up_within_a_minute() {
        let dir = TestDir::new("token-rotation");
        let path = dir.write("token", "first-token\n");
        let mut source = TokenSource::new(&Credentials::TokenFile(path.clone()), T0).unwrap();
        assert_eq!(
            source.authorization(T0).as_deref(),
            Some("Bearer first-token")
        );

        std::fs::write(&path, "second-token").unwrap();
        // Within the minute the cached token is still used (no file read per request)...
        let just_before = T0 + (TOKEN_REREAD_INTERVAL - Duration::from_millis(1));
        assert_eq!(
            source.authorization(just_before).as_deref(),
            Some("Bearer first-token")
        );
        // ...and from the minute on, the rewritten one.
        let at_minute = T0 + TOKEN_REREAD_INTERVAL;
        assert_eq!(
            source.authorization(at_minute).as_deref(),
            Some("Bearer second-token")
        );
    }

    #[test]
    fn a_token_file_that_vanishes_keeps_the_last_good_token() {
        let dir = TestDir::new("token-vanishes");
        let path = dir.write("token", "kept");
        let mut source = TokenSource::new(&Credentials::TokenFile(path.clone()), T0).unwrap();
        std::fs::remove_file(&path).unwrap();
        let later = T0 + Duration::from_secs(120);
        assert_eq!(source.authorization(later).as_deref(), Some("Bearer kept"));
    }

    #[test]
    fn a_missing_or_empty_token_file_fails_at_start() {
        let dir = TestDir::new("token-missing");
        let missing = dir.path().join("nope");
        let err = TokenSource::new(&Credentials::TokenFile(missing.clone()), T0).unwrap_err();
        assert_eq!(err.source, missing.display().to_string());
        assert!(err.reason.starts_with("cannot read"), "{err}");

        let empty = dir.write("empty", "\n");
        let err = TokenSource::new(&Credentials::TokenFile(empty), T0).unwrap_err();
        assert_eq!(err.reason, "the token is empty");
    }

    #[test]
    fn tokens_with_header_breaking_bytes_are_refused() {
        let err = TokenSource::new(&Credentials::Token("a\nb".into()), T0).unwrap_err();
        assert!(
            err.reason.contains("not allowed in an HTTP header"),
            "{err}"
        );
    }

    #[test]
    fn no_credentials_no_header() {
        let mut source = TokenSource::new(&Credentials::None, T0).unwrap();
        assert_eq!(source.authorization(T0), None);
    }
}
