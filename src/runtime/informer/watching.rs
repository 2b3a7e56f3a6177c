//! The informer's watch: opened (on the connection the last watch left idle, or a new one),
//! its items read into the reflector a budget at a time, how it ended (counted for
//! `currency.rs`), and its connection kept for the next watch or closed.

use super::*;

impl<T: Watched, S: Clone, K: Eq + Hash + Clone> Informer<T, S, K> {
    /// One read budget of the watch stream.
    pub(super) fn read(&mut self, io: &mut InformerIo<'_, S, K>, out: &mut Vec<Delta<T>>) {
        let Some(stream) = &mut self.stream else {
            self.more_to_read = false;
            return;
        };
        let now = io.lp.now();
        let mut items = std::mem::take(&mut self.items);
        self.more_to_read = stream.on_ready(now, &mut items) == Drain::MoreToRead;
        // The lazy read happened; what follows is the coalescing pause's rule (resumed once
        // a read finds the socket drained and no trickle).
        self.lazy_read_by = None;
        let found = items.len();
        self.deliver(io, &mut items, out);
        // Read: the frames' buffer is emptied before the deltas are fed (a sync's, freed whole
        // before the trim that follows it).
        if let Some(stream) = &mut self.stream {
            stream.release_frames();
        }
        self.items = items;
        self.note_answer(io.lp.now());
        self.coalesce_after_read(io.lp, found);
    }

    /// The current watch's response head: its round trip, and (once the bytes behind it are
    /// read) whether it ends an interruption (`currency.rs`).
    pub(super) fn note_answer(&mut self, now: Time) {
        let Some(status) = self.stream.as_ref().and_then(WatchStream::response_status) else {
            return;
        };
        if !self.head_seen {
            self.head_seen = true;
            self.answer_rtt = match self.watch_sent_at {
                Some((sent, true)) => Some(now.since(sent)),
                _ => None,
            };
        }
        if self.head_counted || self.more_to_read || status != 200 {
            return;
        }
        self.head_counted = true;
        if self.currency.answered(now) {
            self.recovery_rtt = self.answer_rtt;
            debug!(
                "{} watch: answered from our version after a broken connection: current \
                 again (its end or a line is due within {PROBATION:?})",
                T::KIND
            );
        }
    }

    /// The server streams from our version: a line, a clean end or a full state.
    pub(super) fn note_streamed(&mut self) {
        if !self.currency.is_current() {
            self.recovery_rtt = self.answer_rtt;
        }
        self.currency.streamed();
    }

    /// Feeds the stream's items to the reflector; closes the stream when it ended or the
    /// reflector moved on (the items after that point are dropped: they belong to a watch
    /// the reflector no longer follows).
    pub(super) fn deliver(
        &mut self,
        io: &mut InformerIo<'_, S, K>,
        items: &mut Vec<WatchItem>,
        out: &mut Vec<Delta<T>>,
    ) {
        let now = io.lp.now();
        for item in items.drain(..) {
            match item {
                WatchItem::Event(_) | WatchItem::Frame(_) => {
                    // The server streams again, in order from our version (a line that closes
                    // the watch is a failure again below).
                    self.note_streamed();
                    self.watch_events += 1;
                    self.last_event_at = Some(now);
                    let decoded = match &item {
                        WatchItem::Frame(span) => {
                            self.protobuf_watch_events += 1;
                            match self.stream.as_ref().and_then(|s| s.frame(span)) {
                                Some(frame) => proto::decode_watch_event::<T>(frame, io.decode),
                                // Not reachable: the frames are read before the next read.
                                None => Err(crate::kube::decode::DecodeError::new(
                                    "watch event",
                                    "its frame was released before it was read",
                                )),
                            }
                        }
                        WatchItem::Event(line) => decode_watch_event::<T>(line, io.decode),
                        _ => continue,
                    };
                    let flow = match decoded {
                        Ok(event) => self.reflector.watch_event(now, event, out),
                        Err(e) => {
                            warn!("{} watch: skipping an event: {e}", T::KIND);
                            self.reflector.event_skipped(now, e.to_string());
                            WatchFlow::Continue
                        }
                    };
                    if flow == WatchFlow::Close {
                        self.currency.failed(Failure::Broken);
                        debug!(
                            "{} watch: closed ({})",
                            T::KIND,
                            self.reflector.stats().last_error.unwrap_or_default()
                        );
                        self.close_stream(io.lp);
                        break;
                    }
                }
                WatchItem::Skipped(reason) => {
                    self.watch_events += 1;
                    warn!("{} watch: skipping an event: {reason}", T::KIND);
                    self.reflector.event_skipped(now, reason);
                }
                WatchItem::Ended(end) => {
                    let lost = matches!(end, StreamEnd::Broken(_))
                        && self
                            .stream
                            .as_ref()
                            .is_some_and(WatchStream::lost_kept_connection);
                    if lost {
                        debug!("{} watch: the kept connection was closed ({end})", T::KIND);
                        self.close_stream(io.lp);
                        self.resend_on_new_connection(io);
                        break;
                    }
                    self.count_end(&end);
                    self.reflector.watch_ended(now, &end);
                    if end == StreamEnd::Clean {
                        self.keep_connection(io.lp);
                    } else {
                        self.close_stream(io.lp);
                    }
                    break;
                }
            }
        }
    }

    /// A full state just delivered is as current as it gets.
    pub(super) fn note_full_state(&mut self, out: &[Delta<T>]) {
        if out.iter().any(|d| matches!(d, Delta::Synced)) {
            self.note_streamed();
        }
    }

    pub(super) fn count_end(&mut self, end: &StreamEnd) {
        match end {
            StreamEnd::Clean => self.note_streamed(),
            StreamEnd::IdleTimeout => self.currency.failed(Failure::Silence),
            StreamEnd::Broken(_) | StreamEnd::Rejected { .. } => {
                self.currency.failed(Failure::Broken)
            }
        }
        match end {
            StreamEnd::Clean => debug!("{} watch: {end}", T::KIND),
            StreamEnd::IdleTimeout => {
                self.idle_timeouts += 1;
                warn!("{} watch: {end}; resuming", T::KIND);
            }
            StreamEnd::Broken(_) => {
                self.broken_watches += 1;
                warn!("{} watch: {end}; resuming", T::KIND);
            }
            StreamEnd::Rejected { .. } => warn!("{} watch: {end}", T::KIND),
        }
    }

    /// Keeps the ended stream's connection for the next watch when it is reusable (see
    /// `WatchStream::rewatch`), else closes it.
    pub(super) fn keep_connection(&mut self, lp: &mut LoopControl<S, K>) {
        if !self.stream.as_ref().is_some_and(WatchStream::is_reusable) {
            return self.close_stream(lp);
        }
        self.more_to_read = false;
        self.clear_pause(lp);
        if let Some(stream) = self.stream.take() {
            self.closed_watch_bytes += stream.bytes_received();
            self.kept = Some(stream);
        }
    }

    /// Closes a kept connection no watch of this turn took.
    pub(super) fn close_kept(&mut self, lp: &mut LoopControl<S, K>) {
        if let Some(stream) = self.kept.take() {
            let token = stream.token();
            lp.deregister_with(token, |registry| stream.close(registry));
        }
    }

    /// The last watch again, on a new connection; the reflector knows it as still open.
    pub(super) fn resend_on_new_connection(&mut self, io: &mut InformerIo<'_, S, K>) {
        let Some(request) = self.last_watch.take() else {
            return;
        };
        if !self.open_watch(io, &request) {
            debug!("{} watch: not sent again", T::KIND);
        }
    }

    pub(super) fn close_stream(&mut self, lp: &mut LoopControl<S, K>) {
        self.answer_rtt = None;
        self.more_to_read = false;
        self.clear_pause(lp);
        if let Some(stream) = self.stream.take() {
            self.closed_watch_bytes += stream.bytes_received();
            let token = stream.token();
            lp.deregister_with(token, |registry| stream.close(registry));
        }
    }

    /// Opens the watch, on the kept connection if there is one; a watch that cannot even
    /// start is reported to the reflector as broken (it backs off) and `false` returned.
    pub(super) fn open_watch(
        &mut self,
        io: &mut InformerIo<'_, S, K>,
        request: &WatchRequest,
    ) -> bool {
        let now = io.lp.now();
        let path = request.path_and_query::<T>();
        let authorization = io.tokens.authorization(now);
        let options = WatchOptions {
            idle_timeout: request.idle_timeout,
            ..self.watch_options.clone()
        };
        let connection = io.connection;
        self.last_watch = Some(request.clone());
        self.head_seen = false;
        self.head_counted = false;
        self.answer_rtt = None;
        let recent_events = self
            .last_event_at
            .is_some_and(|at| now.since(at) < self.rotated_watch_read_within);
        if let Some(mut kept) = self.kept.take() {
            let sent = kept.rewatch(
                connection,
                &path,
                authorization.as_deref(),
                io.lp.registry(),
                now,
                &options,
            );
            match sent {
                Ok(()) => {
                    debug!("{} watch: GET {path} (kept connection)", T::KIND);
                    self.watch_sent_at = Some((now, false));
                    self.kept_connections += 1;
                    self.stream = Some(kept);
                    self.reflector.watch_opened(now);
                    self.read_rotated_watch_lazily(io.lp, recent_events);
                    return true;
                }
                Err(e) => {
                    debug!("{} watch: {e}; new connection", T::KIND);
                    self.kept = Some(kept);
                    self.close_kept(io.lp);
                }
            }
        }
        let opened = io.lp.register_with(self.source.clone(), |registry, token| {
            WatchStream::open(
                connection,
                &path,
                authorization.as_deref(),
                registry,
                token,
                now,
                &options,
            )
        });
        match opened {
            Ok(stream) => {
                debug!("{} watch: GET {path}", T::KIND);
                self.watch_sent_at = Some((now, true));
                self.stream = Some(stream);
                self.reflector.watch_opened(now);
                true
            }
            Err(e) => {
                let end = StreamEnd::Broken(e.to_string());
                self.count_end(&end);
                self.reflector.watch_ended(now, &end);
                false
            }
        }
    }
}
