//! The three informers (nodes, leases, pods): driving them on the loop and feeding what they
//! deliver to the store and the controllers, up to the initial sync.

use super::*;
use crate::model::{Name, PodKey};

/// The three informers, each with its own source kind and timer.
pub(super) struct Informers {
    pub(super) nodes: Informer<Node, SourceKind, TimerKind>,
    pub(super) leases: Informer<Lease, SourceKind, TimerKind>,
    pub(super) pods: Informer<Pod, SourceKind, TimerKind>,
    /// Per [`Watch`]: since when its cache has not followed the server (`None` while it does),
    /// for `/metrics`: an alert compares it with the grace period.
    down_since: [Option<Time>; 3],
}

impl Informers {
    /// Informers that have not listed yet: their caches are down from `now`.
    pub(super) fn new(config: &InformerConfig, seed: u64, now: Time) -> Informers {
        let kinds = |w: Watch| (SourceKind::Watch(w), TimerKind::Informer(w));
        let (s, t) = kinds(Watch::Nodes);
        let nodes = Informer::new(config.clone(), seed, s, t);
        let (s, t) = kinds(Watch::Leases);
        let leases = Informer::new(config.clone(), seed.rotate_left(21), s, t);
        let (s, t) = kinds(Watch::Pods);
        let pods = Informer::new(config.clone(), seed.rotate_left(42), s, t);
        Informers {
            nodes,
            leases,
            pods,
            down_since: [Some(now); 3],
        }
    }

    pub(super) fn start(&mut self, lp: &mut Lp) {
        self.nodes.start(lp);
        self.leases.start(lp);
        self.pods.start(lp);
    }

    pub(super) fn stop(&mut self, lp: &mut Lp) {
        self.nodes.stop(lp);
        self.leases.stop(lp);
        self.pods.stop(lp);
    }

    pub(super) fn enable_watch_list(&mut self) {
        self.nodes.enable_watch_list();
        self.leases.enable_watch_list();
        self.pods.enable_watch_list();
    }

    /// Aims each watch's end into the pass's window before a tick (`window`: `(opens,
    /// tick)`), away from the windows the other two watches' ends hold.
    pub(super) fn aim_watch_ends(&mut self, window: Option<(Time, Time)>, period: Duration) {
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

    /// Since when the watch's cache has not followed the server; `None` while it does.
    pub(super) fn down_since(&self, watch: Watch) -> Option<Time> {
        self.down_since[watch.index()]
    }

    pub(super) fn reflector_stats(&self) -> [(Watch, ReflectorStats); 3] {
        [
            (Watch::Nodes, self.nodes.stats().reflector),
            (Watch::Leases, self.leases.stats().reflector),
            (Watch::Pods, self.pods.stats().reflector),
        ]
    }
}

/// The deltas fed after one prefetch: a read's renewals at 5,000 nodes (~22), and few enough
/// at a sync that the lines asked for are still in the cache when they are read.
const PREFETCH_AHEAD: usize = 32;

/// A watched kind as the controllers take it.
pub(super) trait Fed: Watched + Sized {
    /// The store's kind, for full states.
    const STORED_AS: Kind;
    fn upserted(self) -> Input;
    fn deleted(key: Self::Key) -> Input;
    /// Asks for the cache lines that feeding `ahead` will read (`model/prefetch.rs`).
    fn prefetch(_controllers: &Controllers, _ahead: &[Delta<Self>]) {}
}

impl Fed for Node {
    const STORED_AS: Kind = Kind::Nodes;
    fn upserted(self) -> Input {
        Input::NodeUpsert(self)
    }
    fn deleted(name: Name) -> Input {
        Input::NodeDeleted(name)
    }
}

impl Fed for Lease {
    const STORED_AS: Kind = Kind::Leases;
    fn upserted(self) -> Input {
        Input::LeaseUpsert(self)
    }
    fn deleted(name: Name) -> Input {
        Input::LeaseDeleted(name)
    }
    /// A read's renewals: each one's Lease and node entry are a few cache misses in a row,
    /// fetched side by side for the batch instead.
    fn prefetch(controllers: &Controllers, ahead: &[Delta<Lease>]) {
        controllers.prefetch_renewals(ahead.iter().filter_map(|delta| match delta {
            Delta::Upsert(lease) => Some(&*lease.name),
            _ => None,
        }));
    }
}

impl Fed for Pod {
    const STORED_AS: Kind = Kind::Pods;
    fn upserted(self) -> Input {
        Input::PodUpsert(self)
    }
    fn deleted(key: PodKey) -> Input {
        Input::PodDeleted(key)
    }
}

/// One informer call (readiness or timer); the deltas go to `out`.
pub(super) fn drive<T: Watched>(
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

impl Daemon {
    /// A watched object (or its deletion) on its way to the controllers: in dry-run, the
    /// executor lays what it "wrote" over it, so a relist cannot undo a write never sent.
    pub(super) fn feed_watched(&mut self, input: Input, now: Time) {
        let input = self.executor.overlay(input);
        self.feed(input, now);
    }

    /// One call of the informer `select` picks, its deltas fed to the controllers; true when
    /// they include a (re)sync. The one path all three informers take.
    fn pump<T: Fed>(
        &mut self,
        lp: &mut Lp,
        token: Option<Token>,
        select: fn(&mut Informers) -> &mut Informer<T, SourceKind, TimerKind>,
    ) -> bool {
        let mut out = select(&mut self.informers).take_deltas();
        drive(
            select(&mut self.informers),
            &mut self.shared,
            lp,
            token,
            &mut out,
        );
        let synced = self.feed_deltas(&mut out, lp.now());
        select(&mut self.informers).return_deltas(out);
        synced
    }

    /// Feeds an informer's deltas to the controllers; true when they include a (re)sync.
    /// A few at a time, each few's lookups asked for first (`Fed::prefetch`).
    pub(super) fn feed_deltas<T: Fed>(&mut self, deltas: &mut Vec<Delta<T>>, now: Time) -> bool {
        let mut synced = false;
        let mut pending = deltas.drain(..);
        while !pending.as_slice().is_empty() {
            let ahead = pending.as_slice();
            T::prefetch(&self.controllers, &ahead[..ahead.len().min(PREFETCH_AHEAD)]);
            for delta in pending.by_ref().take(PREFETCH_AHEAD) {
                match delta {
                    Delta::Begin => self.feed(Input::FullStateBegin(T::STORED_AS), now),
                    Delta::Upsert(object) => self.feed_watched(object.upserted(), now),
                    Delta::Delete(key) => self.feed_watched(T::deleted(key), now),
                    Delta::Synced => {
                        self.feed(Input::FullStateEnd(T::STORED_AS), now);
                        synced = true;
                    }
                }
            }
        }
        if synced {
            // A full state grows tables and leaves freed pages behind: give them back now, so
            // the daemon's peak memory is its steady memory.
            crate::runtime::memory::release_free_memory();
        }
        synced
    }

    pub(super) fn on_informer(&mut self, lp: &mut Lp, watch: Watch, token: Option<Token>) {
        let synced = match watch {
            Watch::Nodes => self.pump(lp, token, |i| &mut i.nodes),
            Watch::Leases => self.pump(lp, token, |i| &mut i.leases),
            Watch::Pods => self.pump(lp, token, |i| &mut i.pods),
        };
        self.report_informers_watching(lp.now());
        if synced && !self.synced[watch.index()] {
            self.synced[watch.index()] = true;
            // What we wait for changed: say so now.
            self.status_refreshed = Time::ZERO;
            self.on_synced(lp);
        }
        // Before the initial sync no controller timer runs: the informers' own wake-ups
        // (events, retries after errors) keep STATUS current.
        self.maybe_refresh_status(lp.now());
    }

    /// Tells the controllers when the informers stop or start following the server: zone
    /// tainting and pod deletions wait for current caches (`controller/cache_currency.rs`),
    /// a settle after the last informer is back measured by the round trips of the watches
    /// that came back.
    pub(super) fn report_informers_watching(&mut self, now: Time) {
        self.informers.note_streaming(now);
        let streaming = self.informers.streaming();
        for (w, s) in streaming {
            self.informers_stale[w.index()] |= !s;
        }
        let all = streaming.iter().all(|(_, s)| *s);
        if all == self.informers_watching {
            return;
        }
        self.informers_watching = all;
        let settle = all.then(|| {
            let rtts = [
                (Watch::Nodes, self.informers.nodes.recovery_rtt()),
                (Watch::Leases, self.informers.leases.recovery_rtt()),
                (Watch::Pods, self.informers.pods.recovery_rtt()),
            ];
            let rtt = rtts
                .into_iter()
                .filter(|(w, _)| self.informers_stale[w.index()])
                .filter_map(|(_, rtt)| rtt)
                .max();
            self.informers_stale = [false; 3];
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
        self.feed(Input::InformersWatching(settle), now);
    }

    /// An informer finished its first full state.
    pub(super) fn on_synced(&mut self, lp: &mut Lp) {
        if !self.all_synced() {
            return;
        }
        if self.watch_list_unknown {
            // The server was not there when we started: ask its version now that it answers.
            if let Some(supported) = probe_watch_list(&mut self.shared.client) {
                self.watch_list_unknown = false;
                if supported {
                    self.informers.enable_watch_list();
                    self.shared.config.reflector.watch_list = true;
                }
            }
        }
        let store = self.controllers.store();
        info!(
            "initial sync complete: {} nodes, {} node leases, {} bound pods",
            store.node_count(),
            store.lease_count(),
            store.pod_count()
        );
        if !self.ready_sent {
            self.ready_sent = true;
            report("READY=1", self.notifier.ready());
        }
        self.maybe_act(lp.now());
        self.refresh_status();
    }
}
