//! Errors of the `kube` layer, as values a user can act on from one line of log.
//!
//! `KubeConfigError` is a start-up error: which file (or the environment), which field, and why.
//! `ApiError` is the outcome of one API call, typed from the `metav1.Status` body the API server
//! sends with every failure, so callers branch on the kind (a 409 means "re-read and retry") and
//! the server's own message is still there for the log.

use std::fmt;
use std::time::Duration;

use crate::time::Time;

/// A connection setting that cannot be used.
///
/// Shown as `source: field: reason`, e.g.
/// `/etc/kubernetes/admin.conf: users[0].user.client-key-data: not valid base64`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KubeConfigError {
    /// The file the setting came from, or `environment` for in-cluster variables.
    pub(crate) source: String,
    /// Path of the field inside that source (`clusters[0].cluster.server`); empty when the
    /// whole source is at fault (unreadable, not YAML).
    pub field: String,
    pub reason: String,
}

impl KubeConfigError {
    pub(crate) fn new(
        source: impl Into<String>,
        field: impl Into<String>,
        reason: impl Into<String>,
    ) -> KubeConfigError {
        KubeConfigError {
            source: source.into(),
            field: field.into(),
            reason: reason.into(),
        }
    }
}

impl fmt::Display for KubeConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.field.is_empty() {
            write!(f, "{}: {}", self.source, self.reason)
        } else {
            write!(f, "{}: {}: {}", self.source, self.field, self.reason)
        }
    }
}

impl std::error::Error for KubeConfigError {}

/// What the API server said about a failed request (from its `metav1.Status` body when it sent
/// one), plus which request it was, so the log line stands on its own.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApiStatus {
    /// `PATCH /api/v1/nodes/n1`.
    pub(crate) request: String,
    /// HTTP status code.
    pub code: u16,
    /// `Status.reason` (`NotFound`, `Conflict`, `AlreadyExists`, …), empty when absent.
    pub reason: String,
    /// `Status.message`, or the start of the body when it was not a Status.
    pub message: String,
}

impl fmt::Display for ApiStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.request, self.code)?;
        if !self.reason.is_empty() {
            write!(f, " {}", self.reason)?;
        }
        if !self.message.is_empty() {
            write!(f, ": {}", self.message)?;
        }
        Ok(())
    }
}

/// The outcome of an API call that did not succeed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ApiError {
    /// 404.
    NotFound(ApiStatus),
    /// 409: a stale `resourceVersion`, a failed precondition, or `AlreadyExists` (see `reason`).
    Conflict(ApiStatus),
    /// 410: the resourceVersion asked for is too old (relist).
    Gone(ApiStatus),
    /// 401.
    Unauthorized(ApiStatus),
    /// 403 (RBAC).
    Forbidden(ApiStatus),
    /// 429; `retry_after` from the `Retry-After` header or `details.retryAfterSeconds`.
    TooManyRequests {
        status: ApiStatus,
        retry_after: Option<Duration>,
    },
    /// 422.
    Invalid(ApiStatus),
    /// 5xx and any other non-2xx code (400, 405, …).
    Server(ApiStatus),
    /// The hard timeout of the call expired.
    Timeout(String),
    /// Connecting, TLS, or the connection broke.
    Transport(String),
    /// A 2xx answer whose body we could not decode.
    Decode(String),
    /// Not sent: the client token bucket (or a server's Retry-After) allows the next call at
    /// `until`. The caller schedules instead of sleeping in the event loop.
    Throttled { until: Time },
}

impl ApiError {
    /// The server's answer, for the kinds that have one.
    pub(crate) fn status(&self) -> Option<&ApiStatus> {
        match self {
            ApiError::NotFound(s)
            | ApiError::Conflict(s)
            | ApiError::Gone(s)
            | ApiError::Unauthorized(s)
            | ApiError::Forbidden(s)
            | ApiError::Invalid(s)
            | ApiError::Server(s)
            | ApiError::TooManyRequests { status: s, .. } => Some(s),
            ApiError::Timeout(_)
            | ApiError::Transport(_)
            | ApiError::Decode(_)
            | ApiError::Throttled { .. } => None,
        }
    }

    /// The HTTP status code, for the kinds that have one.
    pub fn code(&self) -> Option<u16> {
        self.status().map(|s| s.code)
    }
}

impl fmt::Display for ApiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ApiError::TooManyRequests {
                status,
                retry_after: Some(after),
            } => write!(f, "{status} (retry after {}s)", after.as_secs()),
            ApiError::Timeout(m) => write!(f, "timed out: {m}"),
            ApiError::Transport(m) => write!(f, "transport error: {m}"),
            ApiError::Decode(m) => write!(f, "cannot decode response: {m}"),
            ApiError::Throttled { until } => {
                write!(f, "client throttle: next call allowed at {until:?}")
            }
            other => match other.status() {
                Some(status) => write!(f, "{status}"),
                None => Ok(()),
            },
        }
    }
}

impl std::error::Error for ApiError {}
