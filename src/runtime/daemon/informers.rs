//! Informers: owns the three informers (nodes, leases, pods), what they borrow for a call (the
//! API client, connection, tokens, decoder and their config), which of them synced, whether
//! the controllers were last told the caches follow the server, which stopped since, and
//! whether the server's watch-list support is still unknown. Feeding what they deliver to the
//! controllers is `feeding.rs`.

use std::time::Duration;

use log::debug;
use mio::Token;

use super::Lp;
use super::kinds::{SourceKind, TimerKind, Watch};
use crate::controller::cache_currency::cache_settle;
use crate::kube::decode::DecodeContext;
use crate::kube::reflector::{Delta, EndTarget, ReflectorStats, Watched};
use crate::kube::{ApiClient, Connection, TokenSource};
use crate::leader::Jitter;
use crate::model::{Lease, Node, Pod};
use crate::runtime::informer::{Informer, InformerConfig, InformerIo, probe_watch_list};
use crate::runtime::settings::watch_end_leads;
use crate::time::Time;

/// What informers borrow for a call, kept apart from the informers themselves.
pub(super) struct InformerShared {
    client: ApiClient,
    connection: Connection,
    tokens: TokenSource,
    decode: DecodeContext,
    config: InformerConfig,
}

impl InformerShared {
    pub(super) fn new(
        client: ApiClient,
        connection: Connection,
        tokens: TokenSource,
        decode: DecodeContext,
        config: InformerConfig,
    ) -> InformerShared {
        InformerShared {
            client,
            connection,
            tokens,
            decode,
            config,
        }
    }
}

pub(super) struct Informers {
    shared: InformerShared,
    set: InformerSet,
    /// Each informer delivered a full state at least once (since the last resync).
    synced: [bool; 3],
    /// What the controllers were last told by `Input::InformersWatching` (they start out
    /// treating their caches as current).
    watching: bool,
    /// Which informers stopped streaming since all last did (their answers' round trips
    /// measure the settle).
    stale: [bool; 3],
    /// The server's version could not be read at start: ask again once it answers (watch-list
    /// streaming for later relists if it has it).
    watch_list_unknown: bool,
}

impl Informers {
    /// Informers that have not listed yet: their caches are down from `now`.
    pub(super) fn new(
        shared: InformerShared,
        seed: u64,
        now: Time,
        watch_list_unknown: bool,
    ) -> Informers {
        Informers {
            set: InformerSet::new(&shared.config, seed, now),
            shared,
            synced: [false; 3],
            watching: true,
            stale: [false; 3],
            watch_list_unknown,
        }
    }

    pub(super) fn start(&mut self, lp: &mut Lp) {
        self.set.start(lp);
    }

    /// Stops the informers and replaces them with new ones that list again (not started:
    /// `start`), none synced, the controllers counted as told the caches are current.
    pub(super) fn relist(&mut self, lp: &mut Lp, now: Time) {
        self.set.stop(lp);
        self.set = InformerSet::new(&self.shared.config, Jitter::seed_from_entropy(), now);
        self.synced = [false; 3];
        // New controllers count their caches as current until told.
        self.watching = true;
    }

    pub(super) fn all_synced(&self) -> bool {
        self.synced.iter().all(|s| *s)
    }

    /// Notes that `watch` delivered a full state: true the first time (since the last resync).
    pub(super) fn note_synced(&mut self, watch: Watch) -> bool {
        if self.synced[watch.index()] {
            return false;
        }
        self.synced[watch.index()] = true;
        true
    }

    /// The resources whose initial sync is awaited.
    pub(super) fn unsynced(&self) -> Vec<&'static str> {
        Watch::ALL
            .iter()
            .filter(|w| !self.synced[w.index()])
            .map(|w| w.resource())
            .collect()
    }

    /// The API server the informers read, for what the status says.
    pub(super) fn base_url(&self) -> &str {
        self.shared.client.base_url()
    }

    pub(super) fn decode_mut(&mut self) -> &mut DecodeContext {
        &mut self.shared.decode
    }

    /// Keeps these node label keys beside the decoder's fixed set (from the next update on).
    pub(super) fn keep_node_labels(&mut self, keys: Vec<String>) {
        self.shared.decode.keep_node_labels(keys);
    }

    pub(super) fn aim_watch_ends(&mut self, window: Option<(Time, Time)>, period: Duration) {
        self.set.aim_watch_ends(window, period);
    }

    /// Since when the watch's cache has not followed the server; `None` while it does.
    pub(super) fn down_since(&self, watch: Watch) -> Option<Time> {
        self.set.down_since[watch.index()]
    }

    pub(super) fn reflector_stats(&self) -> [(Watch, ReflectorStats); 3] {
        self.set.reflector_stats()
    }

    /// One call of the informer `select` picks (readiness with a token, else its timer): the
    /// deltas it delivered, in the informer's own buffer (give it back: `give_back`).
    pub(super) fn read<T: Watched>(
        &mut self,
        lp: &mut Lp,
        token: Option<Token>,
        select: fn(&mut InformerSet) -> &mut Informer<T, SourceKind, TimerKind>,
    ) -> Vec<Delta<T>> {
        let mut out = select(&mut self.set).take_deltas();
        drive(select(&mut self.set), &mut self.shared, lp, token, &mut out);
        out
    }

    /// Returns the buffer `read` lent out, drained.
    pub(super) fn give_back<T: Watched>(
        &mut self,
        select: fn(&mut InformerSet) -> &mut Informer<T, SourceKind, TimerKind>,
        deltas: Vec<Delta<T>>,
    ) {
        select(&mut self.set).return_deltas(deltas);
    }

    /// After an informer turn: `Some(settle)` when whether all three caches follow the server
    /// changed since the controllers were last told (`Some(Some(_))`: all follow again, with
    /// the settle measured by the round trips of the watches that came back), `None` when not.
    pub(super) fn watching_changed(&mut self, now: Time) -> Option<Option<Duration>> {
        self.set.note_streaming(now);
        let streaming = self.set.streaming();
        for (w, s) in streaming {
            self.stale[w.index()] |= !s;
        }
        let all = streaming.iter().all(|(_, s)| *s);
        if all == self.watching {
            return None;
        }
        self.watching = all;
        let settle = all.then(|| {
            let rtts = [
                (Watch::Nodes, self.set.nodes.recovery_rtt()),
                (Watch::Leases, self.set.leases.recovery_rtt()),
                (Watch::Pods, self.set.pods.recovery_rtt()),
            ];
            let rtt = rtts
                .into_iter()
                .filter(|(w, _)| self.stale[w.index()])
                .filter_map(|(_, rtt)| rtt)
                .max();
            self.stale = [false; 3];
            cache_settle(rtt)
        });
        if self.all_synced() {
            let stale: Vec<&str> = streaming
                .into_iter()
                .filter(|(_, streaming)| !streaming)
                .map(|(w, _)| w.resource())
                .collect();
            match settle {
                Some(settle) => debug!(
                    "informers watching again: tainting and evictions resume once caught up \
                     ({settle:?})"
                ),
                None => debug!(
                    "not watching {}: new NoExecute taints and pod deletions held",
                    stale.join(", ")
                ),
            }
        }
        Some(settle)
    }

    /// The server was not there when we started: ask its version now that it answers, and
    /// stream later relists with watch-list if it has it.
    pub(super) fn probe_watch_list_if_unknown(&mut self) {
        if self.watch_list_unknown {
            if let Some(supported) = probe_watch_list(&mut self.shared.client) {
                self.watch_list_unknown = false;
                if supported {
                    self.set.enable_watch_list();
                    self.shared.config.reflector.watch_list = true;
                }
            }
        }
    }
}

/// The three informers, each with its own source kind and timer.
pub(super) struct InformerSet {
    nodes: Informer<Node, SourceKind, TimerKind>,
    leases: Informer<Lease, SourceKind, TimerKind>,
    pods: Informer<Pod, SourceKind, TimerKind>,
    /// Per [`Watch`]: since when its cache has not followed the server (`None` while it does),
    /// for `/metrics`: an alert compares it with the grace period.
    down_since: [Option<Time>; 3],
}

impl InformerSet {
    /// Informers that have not listed yet: their caches are down from `now`.
    fn new(config: &InformerConfig, seed: u64, now: Time) -> InformerSet {
        let kinds = |w: Watch| (SourceKind::Watch(w), TimerKind::Informer(w));
        let (s, t) = kinds(Watch::Nodes);
        let nodes = Informer::new(config.clone(), seed, s, t);
        let (s, t) = kinds(Watch::Leases);
        let leases = Informer::new(config.clone(), seed.rotate_left(21), s, t);
        let (s, t) = kinds(Watch::Pods);
        let pods = Informer::new(config.clone(), seed.rotate_left(42), s, t);
        InformerSet {
            nodes,
            leases,
            pods,
            down_since: [Some(now); 3],
        }
    }

    /// `Informers::read`'s choices.
    pub(super) fn nodes(&mut self) -> &mut Informer<Node, SourceKind, TimerKind> {
        &mut self.nodes
    }

    pub(super) fn leases(&mut self) -> &mut Informer<Lease, SourceKind, TimerKind> {
        &mut self.leases
    }

    pub(super) fn pods(&mut self) -> &mut Informer<Pod, SourceKind, TimerKind> {
        &mut self.pods
    }

    fn start(&mut self, lp: &mut Lp) {
        self.nodes.start(lp);
        self.leases.start(lp);
        self.pods.start(lp);
    }

    fn stop(&mut self, lp: &mut Lp) {
        self.nodes.stop(lp);
        self.leases.stop(lp);
        self.pods.stop(lp);
    }

    fn enable_watch_list(&mut self) {
        self.nodes.enable_watch_list();
        self.leases.enable_watch_list();
        self.pods.enable_watch_list();
    }

    /// Aims each watch's end into the pass's window before a tick (`window`: `(opens,
    /// tick)`), away from the windows the other two watches' ends hold.
    fn aim_watch_ends(&mut self, window: Option<(Time, Time)>, period: Duration) {
        let ends = [
            self.nodes.expected_watch_end(),
            self.leases.expected_watch_end(),
            self.pods.expected_watch_end(),
        ];
        let target = |others: [Option<Time>; 2]| {
            let (opens, tick) = window.filter(|(opens, tick)| opens < tick)?;
            let (lead_min, lead_max) = watch_end_leads(tick - opens);
            Some(EndTarget {
                grid: tick,
                period,
                lead_min,
                lead_max,
                taken: others,
            })
        };
        self.nodes.set_end_target(target([ends[1], ends[2]]));
        self.leases.set_end_target(target([ends[0], ends[2]]));
        self.pods.set_end_target(target([ends[0], ends[1]]));
    }

    /// Whether each informer's cache follows the server (see `Informer::is_streaming`).
    fn streaming(&self) -> [(Watch, bool); 3] {
        [
            (Watch::Nodes, self.nodes.is_streaming()),
            (Watch::Leases, self.leases.is_streaming()),
            (Watch::Pods, self.pods.is_streaming()),
        ]
    }

    /// Notes, after an informer turn, which caches stopped or started following the server.
    fn note_streaming(&mut self, now: Time) {
        for (watch, streaming) in self.streaming() {
            let since = &mut self.down_since[watch.index()];
            if streaming {
                *since = None;
            } else {
                since.get_or_insert(now);
            }
        }
    }

    fn reflector_stats(&self) -> [(Watch, ReflectorStats); 3] {
        [
            (Watch::Nodes, self.nodes.stats().reflector),
            (Watch::Leases, self.leases.stats().reflector),
            (Watch::Pods, self.pods.stats().reflector),
        ]
    }
}

/// One informer call (readiness or timer); the deltas go to `out`.
fn drive<T: Watched>(
    informer: &mut Informer<T, SourceKind, TimerKind>,
    shared: &mut InformerShared,
    lp: &mut Lp,
    token: Option<Token>,
    out: &mut Vec<Delta<T>>,
) {
    let mut io = InformerIo {
        lp,
        client: &mut shared.client,
        connection: &shared.connection,
        tokens: &mut shared.tokens,
        decode: &mut shared.decode,
    };
    match token {
        Some(token) => informer.on_ready(&mut io, token, out),
        None => informer.on_timer(&mut io, out),
    }
}
