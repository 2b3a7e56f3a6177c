//! Short, blocking API calls (GET, paginated LIST, PUT, PATCH, DELETE, POST) over one keep-alive
//! ureq `Agent`, each with a hard timeout and paced by the client throttle.
//!
//! The single-threaded executor calls these inline, so nothing here sleeps: when the throttle
//! (or a server's Retry-After) says "not yet", the call returns `ApiError::Throttled { until }`
//! without touching the network, and the executor schedules it. The clock is injected, as
//! everywhere in the daemon, so tests drive it by hand.

use std::io::Read;
use std::time::Duration;

use serde::Deserialize;
use serde::de::DeserializeOwned;
use ureq::Body;
use ureq::http::{Method, Request, Response};

use super::connection::Connection;
use super::error::{ApiError, ApiStatus, KubeConfigError};
use super::throttle::{DEFAULT_BURST, DEFAULT_QPS, Throttle};
use super::token::TokenSource;
use super::transport;
use crate::time::Rate;
use crate::time::Time;

mod answer;
mod status;
pub(crate) use status::error_from_response;
use status::{read_error, request_error};

/// How long a 429 without a usable Retry-After holds every call back.
const DEFAULT_RETRY_AFTER: Duration = Duration::from_secs(1);

/// Most of a failed response's body we read for its Status message.
const MAX_ERROR_BODY: u64 = 1 << 20;

#[derive(Clone, Debug)]
pub struct ClientSettings {
    /// Hard limit on a whole call: connect, TLS, request, response and body. Well under the
    /// leader election renew deadline (10 s), so a hung server cannot make us miss a renewal.
    pub timeout: Duration,
    /// Client throttle; `None` only for tests and the simulator.
    pub qps: Option<Rate>,
    pub burst: u64,
    /// Largest successful response body we read (LIST pages are streamed, not buffered).
    pub max_body_bytes: u64,
}

impl Default for ClientSettings {
    fn default() -> ClientSettings {
        ClientSettings {
            timeout: Duration::from_secs(5),
            qps: Some(Rate::per_second(DEFAULT_QPS)),
            burst: DEFAULT_BURST,
            max_body_bytes: 512 << 20,
        }
    }
}

/// The patch formats the API server accepts, by `Content-Type`.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum PatchType {
    /// Lists merge by their patch key (`spec.taints` is replaced whole: send the full list).
    StrategicMerge,
    /// RFC 7386.
    Merge,
    /// RFC 6902 operations.
    Json,
}

impl PatchType {
    pub(crate) fn content_type(self) -> &'static str {
        match self {
            PatchType::StrategicMerge => "application/strategic-merge-patch+json",
            PatchType::Merge => "application/merge-patch+json",
            PatchType::Json => "application/json-patch+json",
        }
    }
}

/// `DeleteOptions.preconditions`: delete only the object we mean (a pod recreated with the same
/// name has a new UID).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Preconditions {
    pub uid: Option<String>,
    pub resource_version: Option<String>,
}

/// One page of a LIST.
#[derive(Clone, Debug, PartialEq)]
pub struct ListPage<T> {
    pub items: Vec<T>,
    /// The list's resourceVersion: where a watch starts once the last page is in.
    pub resource_version: String,
    /// `metadata.continue`; `None` on the last page.
    pub continue_token: Option<String>,
    pub(crate) remaining_item_count: Option<u64>,
}

#[derive(Deserialize)]
#[serde(bound = "T: DeserializeOwned")]
struct ListBody<T> {
    #[serde(default)]
    metadata: ListMeta,
    #[serde(default)]
    items: Option<Vec<T>>,
}

#[derive(Deserialize, Default)]
struct ListMeta {
    #[serde(rename = "resourceVersion", default)]
    resource_version: String,
    #[serde(rename = "continue", default)]
    continue_token: Option<String>,
    #[serde(rename = "remainingItemCount", default)]
    remaining_item_count: Option<u64>,
}

/// The blocking API client of the single-threaded executor.
/// Which client-side budget a call spends. Writes and every other call share the configured
/// qps/burst, as upstream's one client does. The live Lease reads that confirm a
/// verdict have a budget of their own, of the same qps/burst: in a mass failure the shared
/// budget is spent on pod writes, and a verdict whose read waited for it came hundreds of
/// milliseconds late. A Lease GET is a small single-object read, made at most once per
/// suspected node (kube-controller-manager makes none: it trusts its cache).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Budget {
    #[default]
    Shared,
    /// The shared budget, leaving half its burst to the calls on `Shared`: while verdicts are
    /// being made, their status writes then find a token instead of waiting behind pod writes.
    SharedLeavingReserve,
    LiveReads,
}

pub struct ApiClient {
    agent: ureq::Agent,
    base_url: String,
    token: TokenSource,
    throttle: Throttle,
    /// The budget of live Lease reads (see [`Budget`]).
    read_throttle: Throttle,
    budget: Budget,
    /// Tokens a `SharedLeavingReserve` call leaves: half the burst.
    reserve: u64,
    max_body_bytes: u64,
    clock: Box<dyn Fn() -> Time>,
}

impl ApiClient {
    /// Reads the token file once (a missing one is a start-up error). `clock` is the daemon's
    /// controller clock; tests pass a virtual one.
    pub fn new(
        connection: &Connection,
        settings: &ClientSettings,
        clock: Box<dyn Fn() -> Time>,
    ) -> Result<ApiClient, KubeConfigError> {
        let now = clock();
        let token = TokenSource::new(&connection.credentials, now)?;
        let throttle = match settings.qps {
            Some(qps) => Throttle::new(qps, settings.burst, now),
            None => Throttle::unlimited(),
        };
        let read_throttle = throttle.clone();
        Ok(ApiClient {
            agent: transport::agent(connection, settings.timeout),
            base_url: connection.base_url(),
            token,
            reserve: throttle.burst() / 2,
            throttle,
            read_throttle,
            budget: Budget::Shared,
            max_body_bytes: settings.max_body_bytes,
            clock,
        })
    }

    /// `scheme://host:port/base`, for logs.
    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    /// The client's clock (the daemon's controller clock): what the throttle measures against,
    /// read again after each blocking call by the executor.
    pub fn now(&self) -> Time {
        (self.clock)()
    }

    /// When the next call would be admitted (now, or later: schedule it then).
    pub fn next_admission(&self) -> Time {
        self.next_admission_for(self.budget)
    }

    /// When a call spending `budget` would be admitted.
    pub fn next_admission_for(&self, budget: Budget) -> Time {
        let now = (self.clock)();
        match budget {
            Budget::Shared => self.throttle.next_admission(now),
            Budget::SharedLeavingReserve => self.throttle.next_admission_keeping(now, self.reserve),
            Budget::LiveReads => self.read_throttle.next_admission(now),
        }
    }

    /// The budget the calls that follow spend.
    pub fn set_budget(&mut self, budget: Budget) {
        self.budget = budget;
    }

    /// GET, the body as bytes.
    pub fn get_bytes(&mut self, path: &str) -> Result<Vec<u8>, ApiError> {
        let response = self.call(Method::GET, path, None)?;
        self.read_body(&format!("GET {path}"), response)
    }

    /// PATCH, the answer (the object as written) as bytes.
    pub fn patch_bytes(
        &mut self,
        path: &str,
        patch_type: PatchType,
        body: &[u8],
    ) -> Result<Vec<u8>, ApiError> {
        let response = self.call(Method::PATCH, path, Some((patch_type.content_type(), body)))?;
        self.read_body(&format!("PATCH {path}"), response)
    }

    /// DELETE like [`ApiClient::delete`], the answer (the object marked for deletion, or a
    /// Status when it is gone at once) as bytes.
    pub fn delete_bytes(
        &mut self,
        path: &str,
        preconditions: &Preconditions,
        grace_period_seconds: Option<i64>,
    ) -> Result<Vec<u8>, ApiError> {
        let options = delete_options(preconditions, grace_period_seconds);
        let response = self.call(Method::DELETE, path, Some(("application/json", &options)))?;
        self.read_body(&format!("DELETE {path}"), response)
    }

    fn read_body(&self, label: &str, response: Response<Body>) -> Result<Vec<u8>, ApiError> {
        let mut bytes = Vec::new();
        let mut reader = self.body_reader(response);
        match reader.read_to_end(&mut bytes) {
            Ok(_) => Ok(bytes),
            Err(e) => Err(read_error(&self.base_url, label, ureq::Error::from(e))),
        }
    }

    /// GET, the body decoded as `T` straight from the socket.
    pub fn get_json<T: DeserializeOwned>(&mut self, path: &str) -> Result<T, ApiError> {
        let response = self.call(Method::GET, path, None)?;
        self.decode(&format!("GET {path}"), response)
    }

    /// GET, the body decoded as `T`, with the response's `Date` header: the server's clock,
    /// for `doctor`'s clock-skew check.
    pub fn get_json_dated<T: DeserializeOwned>(
        &mut self,
        path: &str,
    ) -> Result<(T, Option<String>), ApiError> {
        let response = self.call(Method::GET, path, None)?;
        let date = response
            .headers()
            .get("Date")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        Ok((self.decode(&format!("GET {path}"), response)?, date))
    }

    /// One page of a LIST: `limit` items (0: no limit) from `continue_token`, or from
    /// `resource_version` on the first page (a continue token carries its own version, and the
    /// server refuses both together, so `resource_version` is not sent with one). Items are
    /// decoded as they arrive: a page is never held as text.
    pub fn list_page<T: DeserializeOwned>(
        &mut self,
        path: &str,
        limit: u32,
        continue_token: Option<&str>,
        resource_version: Option<&str>,
    ) -> Result<ListPage<T>, ApiError> {
        let mut query = Vec::new();
        if limit > 0 {
            query.push(format!("limit={limit}"));
        }
        match continue_token.filter(|c| !c.is_empty()) {
            Some(token) => query.push(format!("continue={}", percent_encode(token))),
            None => {
                if let Some(rv) = resource_version {
                    query.push(format!("resourceVersion={}", percent_encode(rv)));
                }
            }
        }
        let full_path = if query.is_empty() {
            path.to_string()
        } else {
            let separator = if path.contains('?') { '&' } else { '?' };
            format!("{path}{separator}{}", query.join("&"))
        };
        let response = self.call(Method::GET, &full_path, None)?;
        let body: ListBody<T> = self.decode(&format!("GET {full_path}"), response)?;
        Ok(ListPage {
            items: body.items.unwrap_or_default(),
            resource_version: body.metadata.resource_version,
            continue_token: body.metadata.continue_token.filter(|c| !c.is_empty()),
            remaining_item_count: body.metadata.remaining_item_count,
        })
    }

    /// PUT (replace) a JSON object; the answer decoded as `T` (`serde::de::IgnoredAny` to skip).
    pub fn put<T: DeserializeOwned>(&mut self, path: &str, body: &[u8]) -> Result<T, ApiError> {
        let response = self.call(Method::PUT, path, Some(("application/json", body)))?;
        self.decode(&format!("PUT {path}"), response)
    }

    /// POST (create) a JSON object.
    pub fn post<T: DeserializeOwned>(&mut self, path: &str, body: &[u8]) -> Result<T, ApiError> {
        let response = self.call(Method::POST, path, Some(("application/json", body)))?;
        self.decode(&format!("POST {path}"), response)
    }

    /// PATCH with the given patch format.
    pub fn patch<T: DeserializeOwned>(
        &mut self,
        path: &str,
        patch_type: PatchType,
        body: &[u8],
    ) -> Result<T, ApiError> {
        let response = self.call(Method::PATCH, path, Some((patch_type.content_type(), body)))?;
        self.decode(&format!("PATCH {path}"), response)
    }

    /// DELETE with preconditions and, if given, a grace period (else the object's own).
    pub fn delete(
        &mut self,
        path: &str,
        preconditions: &Preconditions,
        grace_period_seconds: Option<i64>,
    ) -> Result<(), ApiError> {
        let options = delete_options(preconditions, grace_period_seconds);
        let response = self.call(Method::DELETE, path, Some(("application/json", &options)))?;
        let label = format!("DELETE {path}");
        // Read the answer (the object or a Status) to the end so the connection is reused.
        let mut reader = self.body_reader(response);
        std::io::copy(&mut reader, &mut std::io::sink())
            .map(|_| ())
            .map_err(|e| read_error(&self.base_url, &label, ureq::Error::from(e)))
    }

    /// GET whose 2xx body the caller reads as it arrives (a watch-cache LIST, see
    /// `decode::list_stream`). `timeout` bounds the whole call, body included, in place of the
    /// client's per-call timeout: such a body can take seconds to arrive. No size limit: the
    /// caller holds one item at a time and limits that.
    /// `accept` is sent as the Accept header; the answer's Content-Type comes back with the body
    /// (a server may answer JSON whatever was asked).
    pub fn get_streamed(
        &mut self,
        path: &str,
        timeout: Duration,
        accept: &str,
    ) -> Result<(String, impl Read + use<>), ApiError> {
        let response = self.call_with(Method::GET, path, None, Some(timeout), Some(accept))?;
        let content_type = response
            .headers()
            .get("Content-Type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string();
        let body = response
            .into_body()
            .into_with_config()
            .limit(u64::MAX)
            .reader();
        Ok((content_type, body))
    }

    /// Admits, sends, and turns any non-2xx answer into a typed error.
    fn call(
        &mut self,
        method: Method,
        path: &str,
        body: Option<(&str, &[u8])>,
    ) -> Result<Response<Body>, ApiError> {
        self.call_with(method, path, body, None, None)
    }

    /// [`ApiClient::call`], with the call's timeout overridden when `timeout` is given.
    fn call_with(
        &mut self,
        method: Method,
        path: &str,
        body: Option<(&str, &[u8])>,
        timeout: Option<Duration>,
        accept: Option<&str>,
    ) -> Result<Response<Body>, ApiError> {
        let now = (self.clock)();
        let admitted = match self.budget {
            Budget::Shared => self.throttle.admit(now),
            Budget::SharedLeavingReserve => self.throttle.admit_keeping(now, self.reserve),
            Budget::LiveReads => self.read_throttle.admit(now),
        };
        admitted.map_err(|until| ApiError::Throttled { until })?;
        let label = format!("{method} {path}");
        let url = format!("{}{path}", self.base_url);
        let mut request = Request::builder().method(method).uri(&url);
        if let Some(accept) = accept {
            request = request.header("Accept", accept);
        }
        if let Some(authorization) = self.token.authorization(now) {
            request = request.header("Authorization", authorization);
        }
        let sent = match body {
            None => request
                .body(())
                .map_err(|e| ApiError::Transport(format!("{label}: invalid request: {e}")))
                .and_then(|r| self.run(&label, r, timeout)),
            Some((content_type, bytes)) => request
                .header("Content-Type", content_type)
                .body(bytes)
                .map_err(|e| ApiError::Transport(format!("{label}: invalid request: {e}")))
                .and_then(|r| self.run(&label, r, timeout)),
        }?;
        let code = sent.status().as_u16();
        if (200..300).contains(&code) {
            return Ok(sent);
        }
        let retry_after_header = sent
            .headers()
            .get("Retry-After")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u32>().ok());
        let mut bytes = Vec::new();
        // A body that breaks off still leaves the code to type the error.
        let _ = sent
            .into_body()
            .into_reader()
            .take(MAX_ERROR_BODY)
            .read_to_end(&mut bytes);
        let error = error_from_response(label, code, retry_after_header, &bytes);
        if let ApiError::TooManyRequests { retry_after, .. } = &error {
            let after = retry_after.unwrap_or(DEFAULT_RETRY_AFTER);
            // The server means the whole client, whichever budget the call spent.
            self.throttle.retry_after((self.clock)(), after);
            self.read_throttle.retry_after((self.clock)(), after);
        }
        Err(error)
    }

    fn run(
        &self,
        label: &str,
        request: Request<impl ureq::AsSendBody>,
        timeout: Option<Duration>,
    ) -> Result<Response<Body>, ApiError> {
        let request = match timeout {
            Some(t) => self
                .agent
                .configure_request(request)
                .timeout_global(Some(t))
                .build(),
            None => request,
        };
        self.agent
            .run(request)
            .map_err(|e| request_error(&self.base_url, label, e))
    }

    fn body_reader(&self, response: Response<Body>) -> impl Read + use<> {
        response
            .into_body()
            .into_with_config()
            .limit(self.max_body_bytes)
            .reader()
    }

    /// Decodes a 2xx body, reading it to the end (keep-alive): see `answer::decode`.
    fn decode<T: DeserializeOwned>(
        &self,
        label: &str,
        response: Response<Body>,
    ) -> Result<T, ApiError> {
        answer::decode(&self.base_url, label, self.body_reader(response))
    }
}

fn delete_options(preconditions: &Preconditions, grace_period_seconds: Option<i64>) -> Vec<u8> {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;
    let pre = meta::Preconditions {
        uid: preconditions.uid.clone(),
        resource_version: preconditions.resource_version.clone(),
    };
    let options = meta::DeleteOptions {
        api_version: Some("v1".into()),
        kind: Some("DeleteOptions".into()),
        preconditions: (pre.uid.is_some() || pre.resource_version.is_some()).then_some(pre),
        grace_period_seconds,
        ..Default::default()
    };
    // Strings and integers only: serialization cannot fail; `{}` would still be a valid body.
    serde_json::to_vec(&options).unwrap_or_else(|_| b"{}".to_vec())
}

/// Percent-encodes a query value (continue tokens are base64: `+`, `/`, `=`).
fn percent_encode(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for b in value.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delete_options_carry_preconditions_and_grace() {
        let body = delete_options(
            &Preconditions {
                uid: Some("u-1".into()),
                resource_version: None,
            },
            Some(30),
        );
        let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(v["preconditions"], serde_json::json!({"uid": "u-1"}));
        assert_eq!(v["gracePeriodSeconds"], 30);
        let bare: serde_json::Value =
            serde_json::from_slice(&delete_options(&Preconditions::default(), None)).unwrap();
        assert!(bare.get("preconditions").is_none() && bare.get("gracePeriodSeconds").is_none());
    }

    #[test]
    fn continue_tokens_are_percent_encoded() {
        assert_eq!(percent_encode("eyJ2Ijoi+/="), "eyJ2Ijoi%2B%2F%3D");
        assert_eq!(percent_encode("a-b.c_d~"), "a-b.c_d~");
    }
}
