//! Which way the API server can send a full state: asked once, at start-up and after a failed
//! probe.

use log::{info, warn};
use serde::Deserialize;

use crate::kube::ApiClient;
use crate::kube::reflector::supports_watch_list;

#[derive(Deserialize)]
struct ServerVersion {
    #[serde(default)]
    major: String,
    #[serde(default)]
    minor: String,
    #[serde(rename = "gitVersion", default)]
    git_version: String,
}

/// Asks `GET /version` whether the server streams watch-lists (1.32 and later): `None` when
/// the version cannot be read (the caller uses list+watch, which works against every server —
/// a watch-list against an older one would look like an empty cluster — and asks again once
/// the server answers).
pub fn probe_watch_list(client: &mut ApiClient) -> Option<bool> {
    match client.get_json::<ServerVersion>("/version") {
        Ok(v) => {
            let supported = supports_watch_list(&v.major, &v.minor);
            info!(
                "API server {} ({}.{}): {}",
                v.git_version,
                v.major,
                v.minor,
                if supported {
                    "watch-list streaming"
                } else {
                    "list+watch"
                }
            );
            Some(supported)
        }
        Err(e) => {
            warn!("cannot read the API server version ({e}); using list+watch for now");
            None
        }
    }
}
