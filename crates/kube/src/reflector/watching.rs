//! The watch's answers fed back by the shell: the watch opened, its events (a watch-list's initial
//! events delivered as a full state), undecodable lines, and how it ended.

use super::{Delta, Phase, Reflector, WatchFlow, Watched};
use crate::decode::WatchEvent;
use crate::time::Time;
use crate::watch::StreamEnd;

impl<T: Watched> Reflector<T> {
    /// The shell opened the watch it was asked for (for the dump: how long it has been up).
    pub fn watch_opened(&mut self, now: Time) {
        self.watching_since = Some(now);
    }

    /// An undecodable line (logged by the shell): counted, and the stream goes on.
    pub fn event_skipped(&mut self, now: Time, reason: String) {
        self.skipped_events += 1;
        self.last_event_at = Some(now);
        self.last_error = Some(reason);
    }

    pub fn watch_event(
        &mut self,
        now: Time,
        event: WatchEvent<T>,
        out: &mut Vec<Delta<T>>,
    ) -> WatchFlow {
        let Phase::Watching { initial } = &mut self.phase else {
            return WatchFlow::Close;
        };
        self.last_event_at = Some(now);
        match event {
            WatchEvent::Added(obj) | WatchEvent::Modified(obj) => {
                note_version(&mut self.resource_version, obj.resource_version());
                if let Some(initial) = initial {
                    if !initial.begun {
                        initial.begun = true;
                        out.push(Delta::Begin);
                    }
                    initial.delivered += 1;
                }
                out.push(Delta::Upsert(obj));
            }
            WatchEvent::Deleted(obj) => {
                note_version(&mut self.resource_version, obj.resource_version());
                if let Some(initial) = initial {
                    initial.delivered = initial.delivered.saturating_sub(1);
                }
                out.push(Delta::Delete(obj.key()));
            }
            WatchEvent::Bookmark(b) => {
                if !b.resource_version.is_empty() {
                    self.resource_version = Some(b.resource_version);
                }
                if b.initial_events_end {
                    if let Some(initial) = initial.take() {
                        self.watch_list_misses = 0;
                        if !initial.begun {
                            out.push(Delta::Begin);
                        }
                        self.full_state_complete(initial.delivered, out);
                    }
                }
            }
            WatchEvent::Error(status) => {
                let message = format!("watch error {}: {}", status.code, status.message);
                self.phase = Phase::ToWatch;
                if status.code == 410 {
                    self.gone(now, message);
                } else {
                    self.fail(now, message);
                }
                return WatchFlow::Close;
            }
        }
        WatchFlow::Continue
    }

    pub fn watch_ended(&mut self, now: Time, end: &StreamEnd) {
        let Phase::Watching { initial } = &self.phase else {
            return;
        };
        let watch_list_incomplete = initial.is_some();
        self.phase = Phase::ToWatch;
        match end {
            StreamEnd::Clean if !watch_list_incomplete => self.ready_at = now,
            StreamEnd::Clean => {
                self.watch_list_miss();
                self.fail(
                    now,
                    "watch-list ended before its initial events were complete".into(),
                );
            }
            StreamEnd::Rejected {
                status: 410,
                message,
            } => self.gone(now, message.clone()),
            StreamEnd::Rejected { status, message }
                if watch_list_incomplete && matches!(status, 400 | 403 | 422) =>
            {
                log::warn!(
                    "{}: watch-list refused ({status}: {message}); using list+watch",
                    T::KIND
                );
                self.watch_list = false;
                self.phase = Phase::ToList;
                self.ready_at = now;
            }
            // A dropped connection says nothing about watch-list support: retry it.
            other => self.fail(now, other.to_string()),
        }
    }

    pub(super) fn watch_list_miss(&mut self) {
        self.watch_list_misses += 1;
        if self.watch_list_misses >= 2 {
            log::warn!(
                "{}: two watch-lists ended without their initial-events-end bookmark; using list+watch",
                T::KIND
            );
            self.watch_list = false;
        }
    }
}

/// The version to resume from, kept in place: no allocation per watch event.
fn note_version(held: &mut Option<String>, rv: &str) {
    if rv.is_empty() {
        return;
    }
    match held {
        Some(s) => {
            s.clear();
            s.push_str(rv);
        }
        None => *held = Some(rv.to_string()),
    }
}
