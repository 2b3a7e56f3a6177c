//! WATCH: a chunked 200 response carrying one JSON event per line, fed from the resource's
//! history. The stream starts after a resourceVersion (or with the current state), sends
//! BOOKMARKs when asked, ends cleanly at `timeoutSeconds` (the connection stays open for the
//! next request), reports an expired version as the real server does (one ERROR event with a
//! 410 Status, then the end), and obeys the fault injector (drop, stall, corrupt line).

use std::io::{self, Write};
use std::net::Shutdown;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;

use super::cluster::{Change, ChangeType, WatchFrom, WatchStart};
use super::http::{LAST_CHUNK, Transport, push_chunk, write_chunked_head};
use super::object::StoredObject;
use super::resource::Resource;
use super::selector::Filter;
use super::shared::Shared;
use super::status::ApiError;

/// How often a quiet watch checks that its client is still there.
const LIVENESS_INTERVAL: Duration = Duration::from_secs(1);
/// Initial events are written in batches of this many objects.
const INITIAL_BATCH: usize = 500;

#[derive(Debug)]
pub(crate) struct WatchRequest {
    pub resource: Resource,
    pub filter: Filter,
    pub from: WatchFrom,
    /// `sendInitialEvents=true`: end the initial ADDED events with the annotated bookmark.
    pub initial_events_end: bool,
    pub bookmarks: bool,
    pub timeout: Duration,
    /// An injected error to report in-stream instead of watching.
    pub forced_error: Option<ApiError>,
}

pub(crate) enum WatchEnd {
    /// The chunked body ended properly; the connection can serve another request.
    Clean,
    /// The connection is finished (client gone, or closed on purpose).
    Closed,
}

pub(crate) fn serve(
    shared: &Shared,
    out: &mut Transport,
    request: WatchRequest,
) -> io::Result<WatchEnd> {
    let resource = request.resource;
    let end_at = Instant::now() + request.timeout;
    let (start, mut seen) = {
        let state = shared.lock();
        (
            state.watch_start(resource, &request.filter, request.from),
            state.seen_faults(),
        )
    };
    write_chunked_head(out)?;
    if let Some(error) = &request.forced_error {
        return finish_with_error(out, error);
    }
    let mut cursor = match start {
        WatchStart::Expired { requested, oldest } => {
            let error =
                ApiError::expired(format!("too old resource version: {requested} ({oldest})"));
            return finish_with_error(out, &error);
        }
        WatchStart::Started { initial, cursor } => {
            for batch in initial.chunks(INITIAL_BATCH) {
                let mut buf = Vec::new();
                for object in batch {
                    push_chunk(&mut buf, &event_line("ADDED", &object.json));
                }
                out.write_all(&buf)?;
            }
            if request.initial_events_end {
                let mut buf = Vec::new();
                push_chunk(&mut buf, &bookmark_line(resource, cursor, true));
                out.write_all(&buf)?;
            }
            out.flush()?;
            cursor
        }
    };
    let interval = shared.settings.bookmark_interval;
    let mut next_bookmark = Instant::now() + interval;
    loop {
        let now = Instant::now();
        let mut deadline = end_at.min(now + LIVENESS_INTERVAL);
        if request.bookmarks {
            deadline = deadline.min(next_bookmark);
        }
        let wakeup = shared.wait_changes(resource, &mut cursor, &mut seen, deadline);
        if wakeup.shutdown || wakeup.dropped {
            // Abrupt: no end chunk, no close_notify.
            let _ = out.tcp().shutdown(Shutdown::Both);
            return Ok(WatchEnd::Closed);
        }
        if wakeup.corrupt {
            let mut buf = Vec::new();
            push_chunk(
                &mut buf,
                b"{\"type\":\"MODIFIED\",\"object\":{\"kind\":\"Node\",\"metadata\":{\"name\":\x00corrupt\n",
            );
            out.write_all(&buf)?;
            out.flush()?;
            continue;
        }
        if let Some((requested, oldest)) = wakeup.expired {
            let error =
                ApiError::expired(format!("too old resource version: {requested} ({oldest})"));
            return finish_with_error(out, &error);
        }
        let mut buf = Vec::new();
        for change in &wakeup.changes {
            if let Some(line) = change_line(resource, &request.filter, change) {
                push_chunk(&mut buf, &line);
            }
        }
        let now = Instant::now();
        if request.bookmarks && now >= next_bookmark {
            if let Some(rv) = wakeup.bookmark_version {
                push_chunk(&mut buf, &bookmark_line(resource, rv, false));
                next_bookmark = now + interval;
            }
        }
        if !buf.is_empty() {
            out.write_all(&buf)?;
            out.flush()?;
        }
        if now >= end_at && !wakeup.stalled {
            out.write_all(LAST_CHUNK)?;
            out.flush()?;
            return Ok(WatchEnd::Clean);
        }
        if client_gone(out) {
            return Ok(WatchEnd::Closed);
        }
    }
}

fn finish_with_error(out: &mut Transport, error: &ApiError) -> io::Result<WatchEnd> {
    let line = format!(
        "{}\n",
        json!({"type": "ERROR", "object": error.to_status()})
    );
    let mut buf = Vec::new();
    push_chunk(&mut buf, line.as_bytes());
    buf.extend_from_slice(LAST_CHUNK);
    out.write_all(&buf)?;
    out.flush()?;
    Ok(WatchEnd::Clean)
}

fn event_line(event_type: &str, object_json: &str) -> Vec<u8> {
    let mut line = Vec::with_capacity(object_json.len() + 32);
    line.extend_from_slice(b"{\"type\":\"");
    line.extend_from_slice(event_type.as_bytes());
    line.extend_from_slice(b"\",\"object\":");
    line.extend_from_slice(object_json.as_bytes());
    line.extend_from_slice(b"}\n");
    line
}

fn bookmark_line(resource: Resource, rv: u64, initial_events_end: bool) -> Vec<u8> {
    let mut metadata = json!({"resourceVersion": rv.to_string()});
    if initial_events_end {
        metadata["annotations"] = json!({"k8s.io/initial-events-end": "true"});
    }
    let event = json!({"type": "BOOKMARK", "object": {
        "kind": resource.kind(), "apiVersion": resource.api_version(), "metadata": metadata}});
    format!("{event}\n").into_bytes()
}

/// The event a filtered watch sees for a change: objects entering the selection are ADDED,
/// leaving it DELETED (stamped with the change's version, as the real watch cache does).
fn change_line(resource: Resource, filter: &Filter, change: &Change) -> Option<Vec<u8>> {
    let now = filter.matches(&change.object);
    let before = change.previous.as_ref().is_some_and(|p| filter.matches(p));
    let (event_type, object): (&str, Arc<StoredObject>) = match (change.change, before, now) {
        (ChangeType::Added, _, true) => ("ADDED", change.object.clone()),
        (ChangeType::Modified, true, true) => ("MODIFIED", change.object.clone()),
        (ChangeType::Modified, false, true) => ("ADDED", change.object.clone()),
        (ChangeType::Modified, true, false) => {
            let previous = change.previous.as_ref()?;
            let restamped = previous.restamped(resource, change.resource_version).ok()?;
            ("DELETED", Arc::new(restamped))
        }
        (ChangeType::Deleted, _, true) => ("DELETED", change.object.clone()),
        _ => return None,
    };
    Some(event_line(event_type, &object.json))
}

/// A watch client sends nothing; readable data or end-of-stream means it has gone away.
fn client_gone(out: &Transport) -> bool {
    let tcp = out.tcp();
    if tcp.set_nonblocking(true).is_err() {
        return true;
    }
    let mut byte = [0u8; 1];
    let gone = match tcp.peek(&mut byte) {
        Ok(_) => true,
        Err(e) => e.kind() != io::ErrorKind::WouldBlock,
    };
    gone || tcp.set_nonblocking(false).is_err()
}
