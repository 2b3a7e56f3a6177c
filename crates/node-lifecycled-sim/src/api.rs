//! Request routing and the unary verbs (get, list, create, update, patch, delete): paths as the
//! real API server lays them out, answers as it words them, every write recorded in the log.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use super::cluster::{DeleteOptions, Scope, WatchFrom};
use super::diff;
use super::http::{Request, Response};
use super::list_body::{Format, ListBody};
use super::object::{ObjectKey, StoredObject};
use super::patch::PatchType;
use super::proto::{self, ListFrame};
use super::resource::{Resource, Verb};
use super::schema::{self, Body};
use super::selector::Filter;
use super::shared::Shared;
use super::status::ApiError;
use super::watch::WatchRequest;
use super::write_log::{Identity, WriteRecord};

pub(crate) enum Reply {
    Unary(Response),
    /// A LIST, written as it is serialized.
    List(ListBody),
    Watch(Box<WatchRequest>),
}

/// Where a request points.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Route {
    pub resource: Resource,
    pub namespace: Option<String>,
    pub name: Option<String>,
    pub subresource: Option<String>,
}

impl Route {
    fn key(&self) -> ObjectKey {
        ObjectKey::new(
            self.namespace.as_deref(),
            self.name.as_deref().unwrap_or(""),
        )
    }
}

/// `/api/v1/...` and `/apis/<group>/v1/...`, cluster-scoped or under `namespaces/<ns>/`.
pub(crate) fn parse_route(path: &str) -> Option<Route> {
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (group, rest) = match segments.as_slice() {
        ["api", "v1", rest @ ..] => ("", rest),
        ["apis", group, "v1", rest @ ..] => (*group, rest),
        _ => return None,
    };
    let (namespace, rest) = match rest {
        ["namespaces", ns, rest @ ..] if !rest.is_empty() && !ns.is_empty() => (Some(*ns), rest),
        _ => (None, rest),
    };
    let (plural, name, subresource) = match rest {
        [plural] => (*plural, None, None),
        [plural, name] => (*plural, Some(*name), None),
        [plural, name, sub] => (*plural, Some(*name), Some(*sub)),
        _ => return None,
    };
    let resource = Resource::from_plural(group, plural)?;
    if namespace.is_some() && !resource.namespaced() {
        return None;
    }
    if namespace.is_none() && resource.namespaced() && name.is_some() {
        return None;
    }
    if name == Some("") {
        return None;
    }
    if let Some(sub) = subresource {
        if sub != "status" || !resource.has_status() {
            return None;
        }
    }
    Some(Route {
        resource,
        namespace: namespace.map(str::to_string),
        name: name.map(str::to_string),
        subresource: subresource.map(str::to_string),
    })
}

fn verb_of(request: &Request, route: &Route) -> Result<Verb, ApiError> {
    let named = route.name.is_some();
    Ok(match (request.method.as_str(), named) {
        ("GET", true) => Verb::Get,
        ("GET", false) if request.flag("watch") => Verb::Watch,
        ("GET", false) => Verb::List,
        ("POST", false) if route.namespace.is_some() || !route.resource.namespaced() => {
            Verb::Create
        }
        ("PUT", true) => Verb::Update,
        ("PATCH", true) => Verb::Patch,
        ("DELETE", true) => Verb::Delete,
        (method, _) => return Err(ApiError::method_not_allowed(method)),
    })
}

pub(crate) fn handle(shared: &Shared, request: &Request, identity: &Identity) -> Reply {
    let path = request.path.as_str();
    match (request.method.as_str(), path) {
        ("GET", "/healthz" | "/readyz" | "/livez") => {
            return Reply::Unary(Response::text(200, "ok"));
        }
        ("GET", "/version") => {
            let minor = shared.settings.minor_version;
            let body = json!({"major": "1", "minor": minor.to_string(),
                              "gitVersion": format!("v1.{minor}.0-sim"),
                              "platform": "linux/amd64"});
            return Reply::Unary(Response::json(200, body.to_string().into_bytes()));
        }
        _ => {}
    }
    if let Some(tokens) = &shared.settings.tokens {
        if !identity.token.as_ref().is_some_and(|t| tokens.contains(t)) {
            return Reply::Unary(Response::error(&ApiError::unauthorized()));
        }
    }
    let Some(route) = parse_route(path) else {
        return Reply::Unary(Response::error(&ApiError::path_not_found()));
    };
    let verb = match verb_of(request, &route) {
        Ok(v) => v,
        Err(e) => return Reply::Unary(Response::error(&e)),
    };
    let sub = route.subresource.as_deref();
    let (delay, failure) = shared.with_state(|s| {
        (
            s.faults.delay_for(verb, route.resource, sub),
            s.faults.take_failure(verb, route.resource, sub),
        )
    });
    if delay > Duration::ZERO {
        std::thread::sleep(delay);
    }
    if let Some((code, retry_after)) = failure {
        let mut error = ApiError::injected(
            code,
            Some(route.resource),
            route.name.as_deref().unwrap_or(""),
        );
        if retry_after.is_some() {
            error.retry_after = retry_after;
        }
        if verb == Verb::Watch && code == 410 {
            // The real server reports an expired watch inside a 200 stream.
            return match watch_request(shared, request, &route) {
                Ok(mut w) => {
                    w.forced_error = Some(error);
                    Reply::Watch(Box::new(w))
                }
                Err(e) => Reply::Unary(Response::error(&e)),
            };
        }
        if verb.is_write() {
            record(
                shared,
                identity,
                verb,
                &route,
                None,
                error.code,
                format!("injected: {}", error.message),
            );
        }
        return Reply::Unary(Response::error(&error));
    }
    let result = match verb {
        Verb::Get => shared
            .get_object(route.resource, &route.key())
            .map(|o| Response::json(200, o.json.clone().into_bytes())),
        Verb::List => {
            return match list(shared, request, &route) {
                Ok(body) => Reply::List(body),
                Err(e) => Reply::Unary(Response::error(&e)),
            };
        }
        Verb::Watch => {
            return match watch_request(shared, request, &route) {
                Ok(w) => Reply::Watch(Box::new(w)),
                Err(e) => Reply::Unary(Response::error(&e)),
            };
        }
        Verb::Create | Verb::Update | Verb::Patch | Verb::Delete => {
            write(shared, request, identity, verb, &route)
        }
    };
    Reply::Unary(result.unwrap_or_else(|e| Response::error(&e)))
}

fn list(shared: &Shared, request: &Request, route: &Route) -> Result<ListBody, ApiError> {
    let filter = Filter::parse(
        route.resource,
        route.namespace.as_deref(),
        request.param("fieldSelector"),
        request.param("labelSelector"),
    )?;
    let limit = match request.param("limit") {
        None | Some("") => None,
        Some(l) => Some(
            l.parse::<usize>()
                .map_err(|_| ApiError::bad_request(format!("invalid limit {l:?}")))?,
        ),
    };
    let continue_token = request.param("continue").filter(|c| !c.is_empty());
    // resourceVersion=0 is served from the watch cache, which ignores `limit` (real server
    // behaviour before 1.33 that clients must survive).
    let limit = match (request.param("resourceVersion"), continue_token) {
        (Some("0"), None) => None,
        _ => limit,
    };
    let page = shared.list_objects(route.resource, &filter, limit, continue_token)?;
    let protobuf =
        shared.settings.protobuf && proto::wanted(request.header("accept"), route.resource);
    let mut metadata = json!({"resourceVersion": page.resource_version.to_string()});
    if let Some(token) = &page.continue_token {
        metadata["continue"] = json!(token);
    }
    if let (Some(n), true) = (page.remaining, filter.selects_all()) {
        metadata["remainingItemCount"] = json!(n);
    }
    if protobuf {
        let items: Vec<&[u8]> = page
            .items
            .iter()
            .map(|o| o.proto.as_deref().unwrap_or_default())
            .collect();
        let frame = ListFrame::new(
            route.resource.list_kind(),
            route.resource.api_version(),
            &metadata,
            &items,
        );
        return Ok(ListBody {
            prefix: frame.prefix,
            items: page.items,
            format: Format::Protobuf,
        });
    }
    let prefix = format!(
        "{{\"kind\":\"{}\",\"apiVersion\":\"{}\",\"metadata\":{metadata},\"items\":[",
        route.resource.list_kind(),
        route.resource.api_version()
    );
    Ok(ListBody {
        prefix: prefix.into_bytes(),
        items: page.items,
        format: Format::Json,
    })
}

fn watch_request(
    shared: &Shared,
    request: &Request,
    route: &Route,
) -> Result<WatchRequest, ApiError> {
    let filter = Filter::parse(
        route.resource,
        route.namespace.as_deref(),
        request.param("fieldSelector"),
        request.param("labelSelector"),
    )?;
    let send_initial = request.param("sendInitialEvents");
    let from = match request.param("resourceVersion") {
        None | Some("") | Some("0") => WatchFrom::Now {
            initial_events: send_initial != Some("false"),
        },
        Some(_) if send_initial == Some("true") => WatchFrom::Now {
            initial_events: true,
        },
        Some(rv) => WatchFrom::After(
            rv.parse::<u64>()
                .map_err(|_| ApiError::bad_request(format!("invalid resource version {rv:?}")))?,
        ),
    };
    let timeout = match request.param("timeoutSeconds") {
        None | Some("") => Duration::from_secs(1800),
        Some(t) => Duration::from_secs(
            t.parse::<u64>()
                .map_err(|_| ApiError::bad_request(format!("invalid timeoutSeconds {t:?}")))?,
        ),
    };
    Ok(WatchRequest {
        resource: route.resource,
        filter,
        from,
        initial_events_end: send_initial == Some("true"),
        bookmarks: request.flag("allowWatchBookmarks"),
        timeout,
        forced_error: None,
        protobuf: shared.settings.protobuf
            && proto::wanted(request.header("accept"), route.resource),
    })
}

fn parse_body(request: &Request) -> Result<Value, ApiError> {
    serde_json::from_slice(&request.body)
        .map_err(|e| ApiError::bad_request(format!("the request body is not valid JSON: {e}")))
}

fn write(
    shared: &Shared,
    request: &Request,
    identity: &Identity,
    verb: Verb,
    route: &Route,
) -> Result<Response, ApiError> {
    let outcome = execute_write(shared, request, verb, route);
    match &outcome {
        Ok((_, object, summary)) => record(
            shared,
            identity,
            verb,
            route,
            Some(object),
            if verb == Verb::Create { 201 } else { 200 },
            summary.clone(),
        ),
        Err(e) => record(
            shared,
            identity,
            verb,
            route,
            None,
            e.code,
            e.message.clone(),
        ),
    }
    let (code, object, _) = outcome?;
    Ok(Response::json(code, object.json.clone().into_bytes()))
}

/// (status code, resulting object, summary for the write log).
fn execute_write(
    shared: &Shared,
    request: &Request,
    verb: Verb,
    route: &Route,
) -> Result<(u16, Arc<StoredObject>, String), ApiError> {
    let resource = route.resource;
    let scope = Scope::of(route.subresource.as_deref());
    match verb {
        Verb::Create => {
            let body = parse_body(request)?;
            schema::check(resource, Body::Object, &body)?;
            let object = shared.create_object(resource, route.namespace.as_deref(), body)?;
            let summary = match resource {
                Resource::Events => event_summary(&object),
                _ => format!("created uid={}", object.uid),
            };
            Ok((201, object, summary))
        }
        Verb::Update => {
            let body = parse_body(request)?;
            schema::check(resource, Body::Object, &body)?;
            let (new, old) =
                shared.update_object(resource, &route.key(), scope, move |_| Ok(body))?;
            Ok((200, new.clone(), change_summary(&old, &new)))
        }
        Verb::Patch => {
            let content_type = request.header("content-type").unwrap_or("");
            let patch_type = PatchType::from_content_type(content_type)
                .ok_or_else(|| ApiError::unsupported_media_type(content_type))?;
            let patch = parse_body(request)?;
            schema::check(resource, Body::Patch(patch_type), &patch)?;
            let (new, old) =
                shared.patch_object(resource, &route.key(), scope, patch_type, &patch)?;
            let unchanged = if new.resource_version == old.resource_version {
                " (no change)"
            } else {
                ""
            };
            let summary = diff::truncate(format!("{} {patch}{unchanged}", patch_type.as_str()));
            Ok((200, new, summary))
        }
        Verb::Delete => {
            let options = delete_options(request)?;
            let deleted = shared.delete_object(resource, &route.key(), &options)?;
            let mut summary = if deleted.removed {
                "deleted".to_string()
            } else {
                let grace = deleted
                    .object
                    .value()
                    .ok()
                    .and_then(|v| v.pointer("/metadata/deletionGracePeriodSeconds").cloned())
                    .unwrap_or(Value::Null);
                format!("graceful deletion, grace period {grace}s")
            };
            if let Some(uid) = &options.uid {
                summary.push_str(&format!(", precondition uid={uid}"));
            }
            if let Some(rv) = &options.resource_version {
                summary.push_str(&format!(", precondition resourceVersion={rv}"));
            }
            Ok((200, deleted.object, summary))
        }
        Verb::Get | Verb::List | Verb::Watch => Err(ApiError::method_not_allowed(&request.method)),
    }
}

fn delete_options(request: &Request) -> Result<DeleteOptions, ApiError> {
    let mut options = DeleteOptions::default();
    if !request.body.iter().all(u8::is_ascii_whitespace) {
        let body = parse_body(request)?;
        schema::check_delete_options(&body)?;
        let text = |v: &Value| v.as_str().map(str::to_string);
        options.uid = body.pointer("/preconditions/uid").and_then(text);
        options.resource_version = body
            .pointer("/preconditions/resourceVersion")
            .and_then(text);
        options.grace_period_seconds = body.get("gracePeriodSeconds").and_then(Value::as_i64);
    }
    if let Some(g) = request.param("gracePeriodSeconds") {
        options.grace_period_seconds = Some(
            g.parse::<i64>()
                .map_err(|_| ApiError::bad_request(format!("invalid gracePeriodSeconds {g:?}")))?,
        );
    }
    Ok(options)
}

fn change_summary(old: &StoredObject, new: &StoredObject) -> String {
    match (old.value(), new.value()) {
        (Ok(a), Ok(b)) => diff::summarize(&a, &b),
        _ => String::new(),
    }
}

fn event_summary(event: &StoredObject) -> String {
    let Ok(v) = event.value() else {
        return String::new();
    };
    let s = |p: &str| {
        v.pointer(p)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    let object = match s("/involvedObject/namespace").as_str() {
        "" => s("/involvedObject/name"),
        ns => format!("{ns}/{}", s("/involvedObject/name")),
    };
    diff::truncate(format!(
        "{} {} {} {object}: {} (source {})",
        s("/type"),
        s("/reason"),
        s("/involvedObject/kind"),
        s("/message"),
        s("/source/component")
    ))
}

fn record(
    shared: &Shared,
    identity: &Identity,
    verb: Verb,
    route: &Route,
    object: Option<&Arc<StoredObject>>,
    code: u16,
    summary: String,
) {
    shared.record(WriteRecord {
        seq: 0,
        elapsed: shared.clock.elapsed(),
        wall: shared.clock.now(),
        identity: identity.clone(),
        verb,
        resource: route.resource,
        subresource: route.subresource.clone(),
        namespace: route.namespace.clone(),
        name: object
            .map(|o| o.key.name.clone())
            .or_else(|| route.name.clone())
            .unwrap_or_default(),
        code,
        resource_version: object.map(|o| o.resource_version),
        summary,
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_follow_the_api_server_layout() {
        let r = parse_route("/api/v1/nodes/n1/status").unwrap();
        assert_eq!(
            (r.resource, r.name.as_deref(), r.subresource.as_deref()),
            (Resource::Nodes, Some("n1"), Some("status"))
        );
        let r = parse_route("/api/v1/namespaces/default/pods/p").unwrap();
        assert_eq!(
            (r.resource, r.namespace.as_deref()),
            (Resource::Pods, Some("default"))
        );
        let r =
            parse_route("/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases").unwrap();
        assert_eq!((r.resource, r.name), (Resource::Leases, None));
        assert!(parse_route("/apis/coordination.k8s.io/v1/leases").is_some());
        assert!(parse_route("/api/v1/pods").is_some());
        assert!(
            parse_route("/api/v1/pods/p").is_none(),
            "a namespaced object needs its namespace"
        );
        assert!(parse_route("/api/v1/namespaces/x/nodes").is_none());
        assert!(parse_route("/apis/coordination.k8s.io/v1/namespaces/x/leases/l/status").is_none());
        assert!(parse_route("/api/v1/secrets").is_none());
    }
}
