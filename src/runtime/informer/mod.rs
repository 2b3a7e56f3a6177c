//! An informer: one watched kind (nodes, node Leases, bound pods) kept in sync on the event loop.
//!
//! It is the imperative shell around the sans-IO [`Reflector`]: LIST pages go through the
//! blocking, throttled [`ApiClient`] (one page per loop turn, so timers and other streams run
//! between pages; a throttled page waits on a timer, never in a sleep), the watch is a
//! non-blocking [`WatchStream`] registered with the loop, and what the reflector decides is
//! handed to the caller as [`Delta`]s. The first full state may instead be one
//! `resourceVersion=0` LIST read as a stream, a page's worth of items per loop turn
//! ([`CacheList`]); a synced watch that receives a trickle of events is read in batches
//! (`coalesce_after_read`).
//!
//! Each informer owns one loop source kind (its watch socket) and one timer key, both chosen by
//! its owner. The timer is always armed for the earliest thing the informer waits for: the next
//! LIST page or watch (backoff, throttle), the stream's idle deadline, or "now" when the stream
//! stopped at its read budget with bytes left. That last case is how a fast stream yields: mio is
//! edge-triggered, so no new readiness event will come for bytes already received, and reading
//! them all at once would starve the timers; one budget per call, then the timer runs the next
//! budget after every other due timer has fired.
//!
//! A rotated watch (the next watch sent on the connection the last one left idle) is read
//! lazily: its response head comes a millisecond after the request, and reading it on its own
//! readiness event would be a wake-up for nothing but the head. Instead the stream is paused
//! and read at the loop's next wake-up, whatever causes it, at the latest
//! `rotated_watch_read_within` later for a quiet watch, on the coalescing grid for one that
//! had events that recently (`watch_pause.rs`).

use std::hash::Hash;
use std::io::Read;
use std::time::Duration;

use log::{debug, info, warn};
use mio::Token;

use super::event_loop::LoopControl;
use crate::kube::decode::list_stream::ListStream;
use crate::kube::decode::proto::{self, ContentType};
use crate::kube::decode::{DecodeContext, decode_list, decode_watch_event};
use crate::kube::reflector::{
    Delta, EndTarget, ListFailure, ListRequest, Reflector, ReflectorConfig, ReflectorStats, Step,
    WatchFlow, WatchRequest, Watched,
};
use crate::kube::watch::{Drain, StreamEnd, WatchItem, WatchOptions, WatchStream};
use crate::kube::{ApiClient, ApiError, Connection, TokenSource};
use crate::time::Time;

mod currency;
mod listing;
mod server_version;
mod watch_pause;
mod watching;
pub use currency::{Failure, PROBATION, WatchCurrency};
use listing::CacheList;
pub use server_version::probe_watch_list;
pub use watch_pause::{COALESCE_MAX_EVENTS, CoalescePeriod};

/// How many reflector steps one call may take: a watch that cannot even be opened is reported
/// as ended and the reflector is asked again (it then answers with a backoff wait).
const MAX_STEPS_PER_CALL: usize = 4;

#[derive(Clone, Debug, Default)]
pub struct InformerConfig {
    pub reflector: ReflectorConfig,
    /// Options of each watch stream; its idle timeout is the reflector's.
    pub watch: WatchOptions,
    /// After a read that found events, read the watch again this much later instead of on
    /// each arrival, or up to four times that while reads find few events (zero: on each
    /// arrival). See `Informer::coalesce_after_read`.
    pub watch_coalesce: Duration,
    /// What the streamed LIST and the watches ask for.
    pub content_type: ContentType,
    /// A watch sent on a kept connection, when no event arrived for this long, is first read
    /// at the loop's next wake-up, or at the latest this much later (zero: on its own
    /// readiness event, as a new watch). See
    /// `Informer::read_rotated_watch_lazily`.
    pub rotated_watch_read_within: Duration,
}

/// What an informer borrows from its owner for one call: the loop (to register its watch socket
/// and arm its timer), the unary client (LIST pages), where to connect and with which token
/// (the watch), and the shared decoding state.
pub struct InformerIo<'a, S, K> {
    pub lp: &'a mut LoopControl<S, K>,
    pub client: &'a mut ApiClient,
    pub connection: &'a Connection,
    pub tokens: &'a mut TokenSource,
    pub decode: &'a mut DecodeContext,
}

/// For the state dump and the metrics.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct InformerStats {
    /// `Node`, `Lease`, `Pod`.
    pub(crate) kind: &'static str,
    pub reflector: ReflectorStats,
    /// Bytes received on watch streams (TLS records included), closed ones too.
    pub watch_bytes: u64,
    /// Watch event lines received (decoded or not).
    pub watch_events: u64,
    /// Of those, protobuf frames (the server answered the watch in protobuf).
    pub protobuf_watch_events: u64,
    /// Watch-cache LISTs the server answered in protobuf.
    pub protobuf_lists: u64,
    pub list_pages: u64,
    pub list_bytes: u64,
    /// LIST pages postponed by the client throttle or a server's 429.
    pub throttled_lists: u64,
    /// Watches ended because no byte arrived within the idle timeout.
    pub idle_timeouts: u64,
    /// Watches that broke (reset, closed mid-body, TLS failure) or could not be opened.
    pub broken_watches: u64,
    /// Watches sent on the connection the previous watch left idle (no connect, no handshake).
    pub kept_connections: u64,
    pub watching: bool,
}

pub struct Informer<T: Watched, S, K> {
    reflector: Reflector<T>,
    /// What the watch socket is registered as.
    source: S,
    /// The informer's one timer.
    timer: K,
    watch_options: WatchOptions,
    stream: Option<WatchStream>,
    /// The connection of a watch the server ended cleanly, kept for the next watch of the same
    /// turn (closed at the end of the turn if no watch is due).
    kept: Option<WatchStream>,
    /// The watch last sent: sent again on a new connection if the kept one turns out closed.
    last_watch: Option<WatchRequest>,
    kept_connections: u64,
    /// The stream stopped at its read budget with bytes left: read on again soon.
    more_to_read: bool,
    watch_coalesce: Duration,
    /// The coalescing period in use: `watch_coalesce` times a power of two, by how many
    /// events a read finds (see `watch_pause.rs`).
    coalesce: CoalescePeriod,
    content_type: ContentType,
    /// The stream's readiness events are paused: read it on the timer at this time.
    paused_until: Option<Time>,
    rotated_watch_read_within: Duration,
    /// The pause's read is lazy: `paused_until` is its soft deadline (any wake-up after it
    /// reads), this its hard one. A rotated watch's first read, or a watch that borrows a
    /// busier one's grid (`Informer::coalesce_after_read`).
    lazy_read_by: Option<Time>,
    /// The grid this watch is read on, as `LoopControl::finest_grid` counts it: paused after
    /// a read that found events.
    on_grid: Option<Duration>,
    /// A LIST page the throttle postponed, and when the client will admit it.
    postponed_list: Option<(ListRequest, Time)>,
    items: Vec<WatchItem>,
    /// The deltas buffer the loop borrows for each call (`take_deltas`), kept: a new vector for
    /// every read of dozens of renewals would grow from empty, a reallocation and a copy at
    /// each doubling.
    spare_deltas: Vec<Delta<T>>,
    /// The streamed LIST being read, and how many items to hand on per loop turn.
    cache_list: Option<CacheList>,
    batch: usize,
    closed_watch_bytes: u64,
    watch_events: u64,
    protobuf_watch_events: u64,
    protobuf_lists: u64,
    /// When the last watch event (line or frame) arrived.
    last_event_at: Option<Time>,
    list_pages: u64,
    list_bytes: u64,
    throttled_lists: u64,
    idle_timeouts: u64,
    broken_watches: u64,
    /// Whether the cache follows the server after the watches' failures (`currency.rs`).
    currency: WatchCurrency,
    /// When the current watch was sent, and whether on a new connection (a rotated watch's
    /// head is read lazily: its arrival time says nothing about the server).
    watch_sent_at: Option<(Time, bool)>,
    /// The current watch's response head has been read; it has been counted (`currency`).
    head_seen: bool,
    head_counted: bool,
    /// Request sent → response head of the current watch, on a new connection.
    answer_rtt: Option<Duration>,
    /// `answer_rtt` of the watch that ended the last interruption (`None`: a LIST did).
    recovery_rtt: Option<Duration>,
}

impl<T: Watched, S: Clone, K: Eq + Hash + Clone> Informer<T, S, K> {
    /// `seed` feeds the reflector's jitter. Nothing happens until [`Informer::start`].
    pub fn new(config: InformerConfig, seed: u64, source: S, timer: K) -> Informer<T, S, K> {
        Informer {
            cache_list: None,
            batch: config.reflector.page_size.max(1) as usize,
            reflector: Reflector::new(config.reflector, seed),
            source,
            timer,
            watch_options: WatchOptions {
                accept: config.content_type.accept(),
                ..config.watch
            },
            stream: None,
            kept: None,
            last_watch: None,
            kept_connections: 0,
            more_to_read: false,
            watch_coalesce: config.watch_coalesce,
            coalesce: CoalescePeriod::default(),
            content_type: config.content_type,
            paused_until: None,
            rotated_watch_read_within: config.rotated_watch_read_within,
            lazy_read_by: None,
            on_grid: None,
            postponed_list: None,
            items: Vec::new(),
            spare_deltas: Vec::new(),
            closed_watch_bytes: 0,
            watch_events: 0,
            protobuf_watch_events: 0,
            protobuf_lists: 0,
            last_event_at: None,
            list_pages: 0,
            list_bytes: 0,
            throttled_lists: 0,
            idle_timeouts: 0,
            broken_watches: 0,
            currency: WatchCurrency::default(),
            watch_sent_at: None,
            head_seen: false,
            head_counted: false,
            answer_rtt: None,
            recovery_rtt: None,
        }
    }

    /// An empty deltas buffer for one call of `on_ready`/`on_timer`, with the capacity the
    /// last one left (give it back with [`Informer::return_deltas`]).
    pub fn take_deltas(&mut self) -> Vec<Delta<T>> {
        std::mem::take(&mut self.spare_deltas)
    }

    /// The buffer `take_deltas` lent, drained by the caller: kept for the next call unless a
    /// full state grew it (a sync's 150,000 pods must not stay allocated).
    pub fn return_deltas(&mut self, mut deltas: Vec<Delta<T>>) {
        const KEPT_CAPACITY: usize = 1024;
        deltas.clear();
        if deltas.capacity() <= KEPT_CAPACITY {
            self.spare_deltas = deltas;
        }
    }

    /// Arms the informer's timer for now: the first LIST (or watch-list) runs on the loop's
    /// next turn.
    pub fn start(&mut self, lp: &mut LoopControl<S, K>) {
        lp.schedule(self.timer.clone(), lp.now());
    }

    /// Closes the watch and disarms the timer.
    pub(crate) fn stop(&mut self, lp: &mut LoopControl<S, K>) {
        self.cache_list = None;
        self.close_stream(lp);
        self.close_kept(lp);
        lp.cancel(&self.timer);
    }

    /// Later full states (relists) use watch-list streaming (the server turned out to have it).
    pub(crate) fn enable_watch_list(&mut self) {
        self.reflector.enable_watch_list();
    }

    /// A full state has been delivered at least once.
    pub fn is_synced(&self) -> bool {
        self.reflector.is_synced()
    }

    /// The cache follows the server: it holds a full state, no relist is due, and every
    /// failed watch has a successor known to stream from our version (`currency.rs`): one
    /// that sent a line or ended in time (a watch the server ends at its `timeoutSeconds`
    /// resumes from its version and misses nothing), or, after a broken connection (not a
    /// silent one), whose response head arrived and the bytes behind it were read. A head
    /// after silence is not enough: a frozen server answers and then sends nothing (the
    /// soak's `watch-freeze`). See `controller/cache_currency.rs`.
    pub fn is_streaming(&self) -> bool {
        self.reflector.is_synced()
            && !self.reflector.needs_full_state()
            && self.currency.is_current()
    }

    /// Request sent → response head of the watch that last made the cache current again
    /// after a failure, on a new connection; `None` when a LIST did (or nothing failed yet).
    /// The caches' settle is measured by it (`controller/cache_currency.rs`).
    pub(crate) fn recovery_rtt(&self) -> Option<Duration> {
        self.recovery_rtt
    }

    /// How the last watch failures left the cache (for tests and the dump).
    pub fn currency(&self) -> WatchCurrency {
        self.currency
    }

    /// Where the ends of later watches should land (`kube/reflector/watch_end.rs`).
    pub fn set_end_target(&mut self, target: Option<EndTarget>) {
        self.reflector.set_end_target(target);
    }

    /// When the server should end the watch last sent.
    pub(crate) fn expected_watch_end(&self) -> Option<Time> {
        self.reflector.expected_watch_end()
    }

    pub fn stats(&self) -> InformerStats {
        let open_bytes = self.stream.as_ref().map_or(0, WatchStream::bytes_received);
        InformerStats {
            kind: T::KIND,
            reflector: self.reflector.stats(),
            watch_bytes: self.closed_watch_bytes + open_bytes,
            watch_events: self.watch_events,
            protobuf_watch_events: self.protobuf_watch_events,
            protobuf_lists: self.protobuf_lists,
            list_pages: self.list_pages,
            list_bytes: self.list_bytes,
            throttled_lists: self.throttled_lists,
            idle_timeouts: self.idle_timeouts,
            broken_watches: self.broken_watches,
            kept_connections: self.kept_connections,
            watching: self.stream.is_some(),
        }
    }

    /// The loop reported the informer's source ready (`token` is the event's).
    pub fn on_ready(
        &mut self,
        io: &mut InformerIo<'_, S, K>,
        token: Token,
        out: &mut Vec<Delta<T>>,
    ) {
        // While paused, an event still queued from before the pause is not a reason to read.
        if self.stream.as_ref().map(WatchStream::token) == Some(token)
            && self.paused_until.is_none()
        {
            self.read(io, out);
        }
        self.step(io, out);
        self.note_full_state(out);
        self.rearm(io.lp);
    }

    /// The informer's timer fired.
    pub fn on_timer(&mut self, io: &mut InformerIo<'_, S, K>, out: &mut Vec<Delta<T>>) {
        let now = io.lp.now();
        let paused_read_due = self.paused_until.is_some_and(|at| now >= at);
        // A probe's end may be waiting in the socket: read it before judging the probation.
        let probation_due = self.currency.deadline().is_some_and(|at| now >= at);
        if self.more_to_read || paused_read_due || probation_due {
            self.read(io, out);
        }
        if self.currency.check(io.lp.now()) {
            warn!(
                "{} watch: answered after a broken connection, but neither a line nor its end \
                 within {PROBATION:?}: the server answers without streaming; waiting for a line",
                T::KIND
            );
        }
        if let Some(stream) = &mut self.stream {
            let mut items = std::mem::take(&mut self.items);
            stream.check_idle(io.lp.now(), &mut items);
            self.deliver(io, &mut items, out);
            self.items = items;
        }
        self.step(io, out);
        self.note_full_state(out);
        self.rearm(io.lp);
    }

    /// Does what the reflector asks, at most one LIST page per call; a kept connection that
    /// no watch took is closed.
    fn step(&mut self, io: &mut InformerIo<'_, S, K>, out: &mut Vec<Delta<T>>) {
        self.step_once(io, out);
        self.close_kept(io.lp);
    }

    fn step_once(&mut self, io: &mut InformerIo<'_, S, K>, out: &mut Vec<Delta<T>>) {
        if self.cache_list.is_some() {
            self.read_cache_list(io, out);
            return;
        }
        for _ in 0..MAX_STEPS_PER_CALL {
            let now = io.lp.now();
            if let Some((_, until)) = &self.postponed_list {
                if now < *until {
                    return;
                }
                if let Some((request, _)) = self.postponed_list.take() {
                    self.list_page(io, request, out);
                }
                return;
            }
            // After a broken watch the next one is a probe (`currency.rs`).
            self.reflector.set_probe_next(self.currency.wants_probe());
            match self.reflector.poll(now) {
                Step::List(request) => {
                    self.list_page(io, request, out);
                    return;
                }
                Step::Watch(request) => {
                    if self.open_watch(io, &request) {
                        return;
                    }
                }
                Step::Wait { .. } | Step::InFlight => return,
            }
        }
    }

    /// Arms the timer for the earliest thing the informer waits for.
    fn rearm(&mut self, lp: &mut LoopControl<S, K>) {
        let mut at = (self.more_to_read || self.cache_list.is_some()).then(|| lp.now());
        let mut earliest = |t: Time| at = Some(at.map_or(t, |a| a.min(t)));
        if let Some(stream) = &self.stream {
            earliest(stream.idle_deadline());
        }
        if let Some(probation) = self.currency.deadline() {
            earliest(probation);
        }
        let lazy_read_after = match (self.paused_until, self.lazy_read_by) {
            (Some(soft), Some(hard)) => {
                earliest(hard);
                Some(soft)
            }
            (Some(read_at), None) => {
                earliest(read_at);
                None
            }
            (None, _) => None,
        };
        match &self.postponed_list {
            Some((_, until)) => earliest(*until),
            None => {
                if let Some(wakeup) = self.reflector.next_wakeup() {
                    earliest(wakeup);
                }
            }
        }
        match (at, lazy_read_after) {
            (Some(at), Some(soft)) => lp.schedule_lazy(self.timer.clone(), soft, at),
            (Some(at), None) => lp.schedule(self.timer.clone(), at),
            (None, _) => {
                lp.cancel(&self.timer);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Lease;

    /// The loop lends one deltas buffer per call and takes it back: a read's deltas reuse the
    /// last read's capacity, handed back empty; one a full state grew is let go.
    #[test]
    fn the_deltas_buffer_is_lent_back_empty_and_kept_unless_a_full_state_grew_it() {
        let mut informer: Informer<Lease, u8, u8> =
            Informer::new(InformerConfig::default(), 1, 0, 0);
        let mut deltas = informer.take_deltas();
        deltas.extend((0..40).map(|_| Delta::Synced));
        let capacity = deltas.capacity();
        informer.return_deltas(deltas);
        let again = informer.take_deltas();
        assert!(again.is_empty(), "handed back empty");
        assert_eq!(
            again.capacity(),
            capacity,
            "the last read's capacity is kept"
        );
        assert_eq!(informer.take_deltas().capacity(), 0, "lent once");
        let mut full_state = again;
        full_state.extend((0..5000).map(|_| Delta::Synced));
        informer.return_deltas(full_state);
        assert_eq!(
            informer.take_deltas().capacity(),
            0,
            "a full state's buffer is let go"
        );
    }
}
