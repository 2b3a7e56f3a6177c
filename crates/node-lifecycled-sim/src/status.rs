//! Errors as the API server reports them: a `metav1.Status` body with `code`, `reason` and the
//! real server's message wording, so clients under test parse exactly what they would in a cluster.

use std::fmt;

use serde_json::{Value, json};

use super::resource::Resource;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApiError {
    pub code: u16,
    /// `metav1.StatusReason`: NotFound, AlreadyExists, Conflict, Invalid, Expired, Gone, ...
    pub reason: &'static str,
    pub message: String,
    /// `details.name` and `details.kind` (the plural, as the real server fills it).
    pub details: Option<(String, &'static str)>,
    /// Seconds for the `Retry-After` header and `details.retryAfterSeconds` (429).
    pub retry_after: Option<u32>,
}

impl ApiError {
    fn new(code: u16, reason: &'static str, message: String) -> ApiError {
        ApiError {
            code,
            reason,
            message,
            details: None,
            retry_after: None,
        }
    }

    fn about(mut self, resource: Resource, name: &str) -> ApiError {
        self.details = Some((name.to_string(), resource.plural()));
        self
    }

    pub fn not_found(resource: Resource, name: &str) -> ApiError {
        ApiError::new(
            404,
            "NotFound",
            format!("{} \"{name}\" not found", qualified(resource)),
        )
        .about(resource, name)
    }

    pub fn already_exists(resource: Resource, name: &str) -> ApiError {
        ApiError::new(
            409,
            "AlreadyExists",
            format!("{} \"{name}\" already exists", qualified(resource)),
        )
        .about(resource, name)
    }

    /// A stale `resourceVersion` on update or patch.
    pub fn conflict(resource: Resource, name: &str) -> ApiError {
        ApiError::new(
            409,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {} \"{name}\": the object has been modified; \
                 please apply your changes to the latest version and try again",
                qualified(resource)
            ),
        )
        .about(resource, name)
    }

    pub fn uid_precondition(
        resource: Resource,
        name: &str,
        wanted: &str,
        actual: &str,
    ) -> ApiError {
        ApiError::new(
            409,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {} \"{name}\": Precondition failed: \
                 UID in precondition: {wanted}, UID in object meta: {actual}",
                qualified(resource)
            ),
        )
        .about(resource, name)
    }

    pub fn resource_version_precondition(
        resource: Resource,
        name: &str,
        wanted: &str,
        actual: u64,
    ) -> ApiError {
        ApiError::new(
            409,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {} \"{name}\": Precondition failed: \
                 ResourceVersion in precondition: {wanted}, ResourceVersion in object meta: {actual}",
                qualified(resource)
            ),
        )
        .about(resource, name)
    }

    pub fn bad_request(message: impl Into<String>) -> ApiError {
        ApiError::new(400, "BadRequest", message.into())
    }

    pub fn invalid(resource: Resource, name: &str, problem: &str) -> ApiError {
        ApiError::new(
            422,
            "Invalid",
            format!("{} \"{name}\" is invalid: {problem}", resource.kind()),
        )
        .about(resource, name)
    }

    /// 410 `Expired`: a too-old resourceVersion or continue token.
    pub fn expired(message: impl Into<String>) -> ApiError {
        ApiError::new(410, "Expired", message.into())
    }

    pub fn too_many_requests(retry_after_seconds: u32) -> ApiError {
        let mut e = ApiError::new(
            429,
            "TooManyRequests",
            "Too many requests, please try again later.".to_string(),
        );
        e.retry_after = Some(retry_after_seconds);
        e
    }

    pub fn internal(message: impl Into<String>) -> ApiError {
        ApiError::new(
            500,
            "InternalError",
            format!("Internal error occurred: {}", message.into()),
        )
    }

    pub fn unauthorized() -> ApiError {
        ApiError::new(401, "Unauthorized", "Unauthorized".to_string())
    }

    pub fn method_not_allowed(method: &str) -> ApiError {
        ApiError::new(
            405,
            "MethodNotAllowed",
            format!("the server does not allow this method on the requested resource ({method})"),
        )
    }

    pub fn unsupported_media_type(content_type: &str) -> ApiError {
        ApiError::new(
            415,
            "UnsupportedMediaType",
            format!(
                "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json (got {content_type:?})"
            ),
        )
    }

    pub fn path_not_found() -> ApiError {
        ApiError::new(
            404,
            "NotFound",
            "the server could not find the requested resource".to_string(),
        )
    }

    pub fn request_too_large(limit: usize) -> ApiError {
        ApiError::new(
            413,
            "RequestEntityTooLarge",
            format!("the request body is larger than {limit} bytes"),
        )
    }

    /// An injected failure with an arbitrary code, worded as the real server words that code.
    pub fn injected(code: u16, resource: Option<Resource>, name: &str) -> ApiError {
        match (code, resource) {
            (409, Some(r)) => ApiError::conflict(r, name),
            (404, Some(r)) => ApiError::not_found(r, name),
            (410, _) => ApiError::expired("too old resource version (injected fault)"),
            (429, _) => ApiError::too_many_requests(1),
            (500, _) => ApiError::internal("injected fault"),
            (503, _) => ApiError::new(
                503,
                "ServiceUnavailable",
                "the server is currently unable to handle the request (injected fault)".into(),
            ),
            (code, _) => ApiError::new(code, "Unknown", format!("injected fault {code}")),
        }
    }

    /// The `metav1.Status` body.
    pub fn to_status(&self) -> Value {
        let mut status = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        let mut details = serde_json::Map::new();
        if let Some((name, kind)) = &self.details {
            details.insert("name".into(), json!(name));
            details.insert("kind".into(), json!(kind));
        }
        if let Some(secs) = self.retry_after {
            details.insert("retryAfterSeconds".into(), json!(secs));
        }
        if !details.is_empty() {
            status["details"] = Value::Object(details);
        }
        status
    }
}

/// `nodes`, `pods`, `leases.coordination.k8s.io`: how the real server names a resource in messages.
fn qualified(resource: Resource) -> String {
    match resource.group() {
        "" => resource.plural().to_string(),
        group => format!("{}.{group}", resource.plural()),
    }
}

impl fmt::Display for ApiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}: {}", self.code, self.reason, self.message)
    }
}

impl std::error::Error for ApiError {}
