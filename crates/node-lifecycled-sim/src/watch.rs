//! WATCH: a chunked 200 response carrying one JSON event per line (or, when the client asks
//! protobuf, one length-prefixed `WatchEvent` frame per event), fed from the resource's
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
use super::proto;
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
    /// Answer in protobuf frames (the client asked for it; see [`proto::wanted`]).
    pub protobuf: bool,
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
    let encoding = Encoding {
        resource,
        protobuf: request.protobuf,
    };
    write_chunked_head(
        out,
        if encoding.protobuf {
            proto::WATCH_MEDIA_TYPE
        } else {
            "application/json"
        },
    )?;
    if let Some(error) = &request.forced_error {
        return finish_with_error(out, encoding, error);
    }
    let mut cursor = match start {
        WatchStart::Expired { requested, oldest } => {
            let error =
                ApiError::expired(format!("too old resource version: {requested} ({oldest})"));
            return finish_with_error(out, encoding, &error);
        }
        WatchStart::Started { initial, cursor } => {
            for batch in initial.chunks(INITIAL_BATCH) {
                let mut buf = Vec::new();
                for object in batch {
                    push_chunk(&mut buf, &encoding.event("ADDED", object));
                }
                out.write_all(&buf)?;
            }
            if request.initial_events_end {
                let mut buf = Vec::new();
                push_chunk(&mut buf, &encoding.bookmark(cursor, true));
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
            if encoding.protobuf {
                // A frame whose event is not a message (field 1 claims 100 bytes of 3).
                push_chunk(&mut buf, &[0, 0, 0, 3, 0x0a, 100, 0]);
            } else {
                push_chunk(
                    &mut buf,
                    b"{\"type\":\"MODIFIED\",\"object\":{\"kind\":\"Node\",\"metadata\":{\"name\":\x00corrupt\n",
                );
            }
            out.write_all(&buf)?;
            out.flush()?;
            continue;
        }
        if let Some((requested, oldest)) = wakeup.expired {
            let error =
                ApiError::expired(format!("too old resource version: {requested} ({oldest})"));
            return finish_with_error(out, encoding, &error);
        }
        let mut buf = Vec::new();
        for change in &wakeup.changes {
            if let Some(line) = change_line(encoding, &request.filter, change) {
                push_chunk(&mut buf, &line);
            }
        }
        let now = Instant::now();
        if request.bookmarks && now >= next_bookmark {
            if let Some(rv) = wakeup.bookmark_version {
                push_chunk(&mut buf, &encoding.bookmark(rv, false));
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

fn finish_with_error(
    out: &mut Transport,
    encoding: Encoding,
    error: &ApiError,
) -> io::Result<WatchEnd> {
    let event = if encoding.protobuf {
        proto::watch_frame("ERROR", &proto::status(&error.to_status()))
    } else {
        format!(
            "{}\n",
            json!({"type": "ERROR", "object": error.to_status()})
        )
        .into_bytes()
    };
    let mut buf = Vec::new();
    push_chunk(&mut buf, &event);
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

/// How a watch writes its events: JSON lines or protobuf frames, for one resource.
#[derive(Clone, Copy)]
struct Encoding {
    resource: Resource,
    protobuf: bool,
}

impl Encoding {
    fn event(self, event_type: &str, object: &StoredObject) -> Vec<u8> {
        match (self.protobuf, &object.proto) {
            (true, Some(raw)) => {
                proto::watch_frame(event_type, &proto::enveloped_object(self.resource, raw))
            }
            _ => event_line(event_type, &object.json),
        }
    }

    fn bookmark(self, rv: u64, initial_events_end: bool) -> Vec<u8> {
        let mut metadata = json!({"resourceVersion": rv.to_string()});
        if initial_events_end {
            metadata["annotations"] = json!({"k8s.io/initial-events-end": "true"});
        }
        let resource = self.resource;
        if self.protobuf {
            if let Some(object) = proto::bookmark_object(resource, &json!({"metadata": metadata})) {
                return proto::watch_frame("BOOKMARK", &object);
            }
        }
        let event = json!({"type": "BOOKMARK", "object": {
            "kind": resource.kind(), "apiVersion": resource.api_version(), "metadata": metadata}});
        format!("{event}\n").into_bytes()
    }
}

/// The event a filtered watch sees for a change: objects entering the selection are ADDED,
/// leaving it DELETED (stamped with the change's version, as the real watch cache does).
fn change_line(encoding: Encoding, filter: &Filter, change: &Change) -> Option<Vec<u8>> {
    let resource = encoding.resource;
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
    Some(encoding.event(event_type, &object))
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
