//! What is watched (nodes, node Leases, bound pods) and the LIST and watch requests that fetch
//! it: paths, queries and the reflector's settings.

use std::fmt::Debug;
use std::hash::Hash;
use std::time::Duration;

use crate::decode::proto::ProtoWire;
use crate::model::{Lease, Name, Node, Pod, PodKey};

/// A watched kind: where it lives and how its objects are keyed.
pub trait Watched: ProtoWire {
    type Key: Clone + Eq + Hash + Debug;
    /// Collection path, e.g. `/api/v1/nodes`.
    const COLLECTION: &'static str;
    /// Already URL-encoded `fieldSelector` value, if the watch is filtered.
    const FIELD_SELECTOR: Option<&'static str> = None;
    fn key(&self) -> Self::Key;
    fn resource_version(&self) -> &str;
}

impl Watched for Node {
    type Key = Name;
    const COLLECTION: &'static str = "/api/v1/nodes";
    fn key(&self) -> Name {
        self.name.clone()
    }
    fn resource_version(&self) -> &str {
        &self.resource_version
    }
}

/// Node heartbeats: the Leases of `kube-node-lease` (one per node, named after it).
impl Watched for Lease {
    type Key = Name;
    const COLLECTION: &'static str =
        "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases";
    fn key(&self) -> Name {
        Name::from(&*self.name)
    }
    fn resource_version(&self) -> &str {
        &self.resource_version
    }
}

/// Pods bound to a node, in every namespace.
impl Watched for Pod {
    type Key = PodKey;
    const COLLECTION: &'static str = "/api/v1/pods";
    /// `spec.nodeName!=`
    const FIELD_SELECTOR: Option<&'static str> = Some("spec.nodeName%21%3D");
    fn key(&self) -> PodKey {
        self.key.clone()
    }
    fn resource_version(&self) -> &str {
        &self.resource_version
    }
}

/// Whether a server of this version serves watch-list (`sendInitialEvents`) reliably: beta and
/// on by default since 1.32 (`WatchList` feature gate). Parses `/version`'s `major`/`minor`
/// fields, which may carry a `+` suffix (`"32+"` on some distributions).
pub fn supports_watch_list(major: &str, minor: &str) -> bool {
    let num = |s: &str| -> Option<u32> { s.trim_end_matches('+').parse().ok() };
    matches!((num(major), num(minor)), (Some(1), Some(m)) if m >= 32)
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReflectorConfig {
    /// LIST page size (client-go's and kube-rs' default).
    pub page_size: u32,
    /// A watch on which no byte arrived for this long is presumed dead and resumed. Watches
    /// ask the server to end them (`timeoutSeconds`) at 70–90 % of this, so a healthy server
    /// always sends something in time — at least the end of the body.
    pub idle_timeout: Duration,
    pub backoff_initial: Duration,
    pub backoff_max: Duration,
    /// After this long without a failure, the backoff starts again from `backoff_initial`.
    pub backoff_reset_after: Duration,
    /// Use watch-list instead of LIST pages for the full state (see the module notes).
    pub watch_list: bool,
    /// The first full state is one `resourceVersion=0` LIST, served from the API server's
    /// watch cache (what kube-controller-manager's informers ask) and read as a stream, instead
    /// of consistent pages read from etcd. Safe although it may be slightly stale: no verdict is
    /// made without a live Lease read, and the watch resumes from the list's version. Relists
    /// (after a `410 Gone`) and the retry after a failed cache list use consistent pages.
    pub initial_list_from_cache: bool,
}

impl Default for ReflectorConfig {
    fn default() -> Self {
        ReflectorConfig {
            page_size: 500,
            idle_timeout: Duration::from_secs(30),
            backoff_initial: Duration::from_millis(500),
            backoff_max: Duration::from_secs(30),
            backoff_reset_after: Duration::from_secs(60),
            watch_list: false,
            initial_list_from_cache: false,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListRequest {
    pub continue_token: Option<String>,
    pub(crate) limit: u32,
    /// `resourceVersion=0`: the whole list in one response from the watch cache (no `limit`,
    /// which the cache ignores), to be read as a stream.
    pub from_watch_cache: bool,
}

impl ListRequest {
    /// Path and query for the unary client. No `resourceVersion`: a quorum read, which honours
    /// `limit` (`resourceVersion=0` is served from the watch cache and ignores it).
    pub fn path_and_query<T: Watched>(&self) -> String {
        let mut q = if self.from_watch_cache {
            format!("{}?resourceVersion=0", T::COLLECTION)
        } else {
            format!("{}?limit={}", T::COLLECTION, self.limit)
        };
        if let Some(c) = &self.continue_token {
            q.push_str("&continue=");
            q.push_str(&encode_query_value(c));
        }
        if let Some(sel) = T::FIELD_SELECTOR {
            q.push_str("&fieldSelector=");
            q.push_str(sel);
        }
        q
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WatchRequest {
    /// Resume point; `None` with `send_initial_events` for a watch-list from "now".
    pub(crate) resource_version: Option<String>,
    pub(crate) allow_bookmarks: bool,
    /// Server-side end of the watch, so streams rotate and prove liveness.
    pub(crate) timeout_seconds: u64,
    pub(crate) send_initial_events: bool,
    /// For the stream's idle deadline.
    pub idle_timeout: Duration,
}

impl WatchRequest {
    pub fn path_and_query<T: Watched>(&self) -> String {
        let mut q = format!(
            "{}?watch=true&timeoutSeconds={}",
            T::COLLECTION,
            self.timeout_seconds
        );
        if self.allow_bookmarks {
            q.push_str("&allowWatchBookmarks=true");
        }
        if let Some(rv) = &self.resource_version {
            q.push_str("&resourceVersion=");
            q.push_str(&encode_query_value(rv));
        }
        if self.send_initial_events {
            q.push_str("&sendInitialEvents=true&resourceVersionMatch=NotOlderThan");
        }
        if let Some(sel) = T::FIELD_SELECTOR {
            q.push_str("&fieldSelector=");
            q.push_str(sel);
        }
        q
    }
}

fn encode_query_value(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    for b in v.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}
