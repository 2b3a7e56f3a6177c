//! How a failed answer reads: a `metav1.Status` body (or whatever came instead) typed into an
//! [`ApiError`] (moved unchanged from kube/client.rs).

use super::*;

/// The parts of `metav1.Status` that type an error.
#[derive(Deserialize)]
struct Status {
    #[serde(default)]
    kind: String,
    #[serde(default)]
    message: String,
    #[serde(default)]
    reason: String,
    #[serde(default)]
    details: Option<StatusDetails>,
}

#[derive(Deserialize)]
struct StatusDetails {
    #[serde(rename = "retryAfterSeconds", default)]
    retry_after_seconds: Option<u32>,
}

pub(super) fn request_error(base_url: &str, label: &str, e: ureq::Error) -> ApiError {
    match e {
        ureq::Error::Timeout(which) => ApiError::Timeout(format!(
            "{label} to {base_url}: no answer in time ({which})"
        )),
        other => ApiError::Transport(format!("{label} to {base_url}: {other}")),
    }
}

pub(super) fn read_error(base_url: &str, label: &str, e: ureq::Error) -> ApiError {
    match e {
        ureq::Error::Timeout(_) => {
            ApiError::Timeout(format!("{label} to {base_url}: body not complete in time"))
        }
        ureq::Error::BodyExceedsLimit(limit) => {
            ApiError::Decode(format!("{label}: body larger than {limit} bytes"))
        }
        other => ApiError::Transport(format!("{label} to {base_url}: reading the body: {other}")),
    }
}

/// Types a non-2xx answer by its code, keeping the Status message (or the body's start).
pub(crate) fn error_from_response(
    request: String,
    code: u16,
    retry_after_header: Option<u32>,
    body: &[u8],
) -> ApiError {
    let (reason, message, retry_after_details) = match serde_json::from_slice::<Status>(body) {
        Ok(status) if status.kind == "Status" => (
            status.reason,
            status.message,
            status.details.and_then(|d| d.retry_after_seconds),
        ),
        _ => {
            let text = String::from_utf8_lossy(body);
            let text: String = text.trim().chars().take(200).collect();
            (String::new(), text.replace(['\n', '\r'], " "), None)
        }
    };
    let status = ApiStatus {
        request,
        code,
        reason,
        message,
    };
    match code {
        401 => ApiError::Unauthorized(status),
        403 => ApiError::Forbidden(status),
        404 => ApiError::NotFound(status),
        409 => ApiError::Conflict(status),
        410 => ApiError::Gone(status),
        422 => ApiError::Invalid(status),
        429 => ApiError::TooManyRequests {
            status,
            retry_after: retry_after_header
                .or(retry_after_details)
                .map(|s| Duration::from_secs(u64::from(s))),
        },
        _ => ApiError::Server(status),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status_body(code: u16, reason: &str, message: &str) -> Vec<u8> {
        serde_json::json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": message, "reason": reason, "code": code
        })
        .to_string()
        .into_bytes()
    }

    #[test]
    fn status_codes_type_the_error_and_keep_the_message() {
        type IsKind = fn(&ApiError) -> bool;
        let cases: [(u16, &str, IsKind); 8] = [
            (401, "Unauthorized", |e| {
                matches!(e, ApiError::Unauthorized(_))
            }),
            (403, "Forbidden", |e| matches!(e, ApiError::Forbidden(_))),
            (404, "NotFound", |e| matches!(e, ApiError::NotFound(_))),
            (409, "Conflict", |e| matches!(e, ApiError::Conflict(_))),
            (410, "Expired", |e| matches!(e, ApiError::Gone(_))),
            (422, "Invalid", |e| matches!(e, ApiError::Invalid(_))),
            (500, "InternalError", |e| matches!(e, ApiError::Server(_))),
            (400, "BadRequest", |e| matches!(e, ApiError::Server(_))),
        ];
        for (code, reason, is_kind) in cases {
            let e = error_from_response(
                "PATCH /api/v1/nodes/n1".into(),
                code,
                None,
                &status_body(code, reason, "the message"),
            );
            assert!(is_kind(&e), "{code} typed as {e:?}");
            let status = e.status().unwrap();
            assert_eq!((status.code, status.reason.as_str()), (code, reason));
            assert_eq!(
                e.to_string(),
                format!("PATCH /api/v1/nodes/n1: {code} {reason}: the message")
            );
        }
    }

    #[test]
    fn too_many_requests_takes_retry_after_from_the_header_or_the_details() {
        let body = serde_json::json!({
            "kind": "Status", "reason": "TooManyRequests", "message": "slow down",
            "details": {"retryAfterSeconds": 7}
        })
        .to_string();
        let header = error_from_response("GET /x".into(), 429, Some(3), body.as_bytes());
        assert!(matches!(
            header,
            ApiError::TooManyRequests { retry_after: Some(d), .. } if d == Duration::from_secs(3)
        ));
        let details = error_from_response("GET /x".into(), 429, None, body.as_bytes());
        assert!(matches!(
            details,
            ApiError::TooManyRequests { retry_after: Some(d), .. } if d == Duration::from_secs(7)
        ));
    }

    #[test]
    fn a_body_that_is_not_a_status_still_gives_one_line() {
        let e = error_from_response("GET /x".into(), 502, None, b"<html>\nbad gateway\n</html>");
        assert_eq!(e.to_string(), "GET /x: 502: <html> bad gateway </html>");
        let e = error_from_response("GET /x".into(), 404, None, &[0xff, 0xfe]);
        assert!(matches!(e, ApiError::NotFound(_)));
    }
}
