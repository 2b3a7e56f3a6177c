//! Request bodies: typed (k8s-openapi) objects as the JSON the API server receives.

use serde::Serialize;
use serde_json::Value;

/// A body as the JSON value sent. The k8s-openapi types serialize infallibly (string keys,
/// in-range timestamps); should that ever change, the body becomes `null`, which the API server
/// refuses with a 400 the caller reports, rather than a panic in the daemon.
pub fn to_json<T: Serialize>(body: &T) -> Value {
    serde_json::to_value(body).unwrap_or_else(|e| {
        log::error!("cannot serialize a request body: {e}");
        Value::Null
    })
}
