//! The store's reading side: LIST pages with their continue tokens, and where a watch starts
//! and what it receives from the bounded history of changes.

use super::*;

impl State {
    pub(super) fn list(
        &self,
        resource: Resource,
        filter: &Filter,
        limit: Option<usize>,
        continue_token: Option<&str>,
    ) -> Result<ListPage, ApiError> {
        let store = self.store(resource);
        let (start, list_rv) = match continue_token {
            Some(token) => {
                let (rv, key) = decode_continue(token)?;
                if rv < store.compacted_through {
                    return Err(ApiError::expired(
                        "The provided continue parameter is too old to display a consistent list result. \
                         You can start a new list without the continue parameter, or use the continue \
                         token in this response to retrieve the remainder of the results. Continuing \
                         with the provided token results in an inconsistent list - objects that were \
                         created, modified, or deleted between the time the first chunk was returned \
                         and now may show up in the list.",
                    ));
                }
                (Bound::Excluded(key), rv)
            }
            None => (Bound::Unbounded, self.resource_version),
        };
        let limit = limit.filter(|l| *l > 0).unwrap_or(usize::MAX);
        let mut items = Vec::new();
        let mut rest = store.objects.range((start, Bound::Unbounded));
        for (_, object) in rest.by_ref() {
            if filter.matches(object) {
                items.push(object.clone());
                if items.len() == limit {
                    break;
                }
            }
        }
        let mut continue_token = None;
        let mut remaining = None;
        if items.len() == limit {
            // Like etcd, "more" means more keys in the range, matching or not: a filtered list
            // may end with an empty page. Counting is only paid for when it is reported.
            let more = if filter.selects_all() {
                let left = rest.count() as u64;
                remaining = (left > 0).then_some(left);
                left > 0
            } else {
                rest.next().is_some()
            };
            if more {
                if let Some(last) = items.last() {
                    continue_token = Some(encode_continue(list_rv, &last.key));
                }
            }
        }
        Ok(ListPage {
            resource_version: list_rv,
            items,
            continue_token,
            remaining,
        })
    }

    pub fn watch_start(&self, resource: Resource, filter: &Filter, from: WatchFrom) -> WatchStart {
        let store = self.store(resource);
        match from {
            WatchFrom::After(rv) if rv < store.compacted_through => WatchStart::Expired {
                requested: rv,
                oldest: store.compacted_through,
            },
            WatchFrom::After(rv) => WatchStart::Started {
                initial: Vec::new(),
                cursor: rv,
            },
            WatchFrom::Now { initial_events } => WatchStart::Started {
                initial: if initial_events {
                    store
                        .objects
                        .values()
                        .filter(|o| filter.matches(o))
                        .cloned()
                        .collect()
                } else {
                    Vec::new()
                },
                cursor: self.resource_version,
            },
        }
    }

    /// Changes of `resource` after `cursor` if any, advancing it (nothing while stalled).
    pub(super) fn take_changes(
        &self,
        resource: Resource,
        cursor: &mut u64,
        now: Instant,
        wakeup: &mut Wakeup,
    ) -> bool {
        if self.faults.stalled(now) {
            wakeup.stalled = true;
            return false;
        }
        let store = self.store(resource);
        if *cursor < store.compacted_through {
            wakeup.expired = Some((*cursor, store.compacted_through));
            return true;
        }
        let first = store
            .history
            .partition_point(|c| c.resource_version <= *cursor);
        wakeup.changes = store.history.range(first..).cloned().collect();
        if let Some(last) = wakeup.changes.last() {
            *cursor = last.resource_version;
        }
        wakeup.bookmark_version = Some(self.resource_version.max(*cursor));
        !wakeup.changes.is_empty()
    }
}

fn encode_continue(rv: u64, key: &ObjectKey) -> String {
    let token = json!({"v": "meta.k8s.io/v1", "rv": rv, "ns": key.namespace, "name": key.name});
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(token.to_string())
}

fn decode_continue(token: &str) -> Result<(u64, ObjectKey), ApiError> {
    let invalid = |why: &str| ApiError::bad_request(format!("continue key is not valid: {why}"));
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(token)
        .map_err(|_| invalid("not base64"))?;
    let v: Value = serde_json::from_slice(&bytes).map_err(|_| invalid("not JSON"))?;
    let rv = v["rv"]
        .as_u64()
        .ok_or_else(|| invalid("no resource version"))?;
    let ns = v["ns"].as_str().ok_or_else(|| invalid("no namespace"))?;
    let name = v["name"].as_str().ok_or_else(|| invalid("no name"))?;
    Ok((
        rv,
        ObjectKey {
            namespace: ns.to_string(),
            name: name.to_string(),
        },
    ))
}
