//! Feeding the informers' deltas to the controllers: driving an informer on the loop, the
//! prefetch ahead of a batch, the caches' currency told to the controllers, and what the
//! initial sync starts. Owns no state: the informers' is `informers.rs`.

use log::info;
use mio::Token;

use super::informers::InformerSet;
use super::kinds::{SourceKind, TimerKind, Watch};
use super::{Daemon, Lp};
use crate::controller::{Controllers, Input};
use crate::kube::reflector::{Delta, Watched};
use crate::model::{Kind, Lease, Name, Node, Pod, PodKey};
use crate::runtime::informer::Informer;
use crate::time::Time;

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

impl Daemon {
    /// A watched object (or its deletion) on its way to the controllers: in dry-run, the
    /// executor lays what it "wrote" over it, so a relist cannot undo a write never sent.
    /// In shadow mode, the incumbent's writes are read off the server's object first, then
    /// kept from the controllers (`observe/shadow/mask.rs`).
    pub(super) fn feed_watched(&mut self, input: Input, now: Time) {
        let mut late = Vec::new();
        let input = match self.shadow.as_mut() {
            None => self.executor.overlay(input),
            Some(shadow) => {
                // The server's object, before dry-run's overlay: the incumbent's writes,
                // never ours.
                let acting = self.leadership.acting();
                let lines = shadow.watched(&input, &self.controllers, now, acting);
                super::log_lines(lines);
                let input = self.executor.overlay(input);
                let (input, masked) = shadow.mask(input, &self.controllers);
                if masked {
                    self.executor.keep_as_shadow(&input);
                }
                late = shadow.late_marks(&self.controllers);
                input
            }
        };
        self.feed(input, now);
        for pod in late {
            self.executor.keep_as_shadow(&pod);
            self.feed(pod, now);
        }
    }

    /// In shadow mode, an object the executor fed back that is not dry-run's own answer is
    /// the server's, read back (the re-read after a version conflict): it may hold the
    /// incumbent's writes our watches have not delivered yet, so it is masked as a watched
    /// object is. Dry-run's answers (our write laid over the object) go as they are.
    pub(super) fn mask_read_back(&mut self, input: Input) -> Input {
        let Some(shadow) = self.shadow.as_ref() else {
            return input;
        };
        if !matches!(input, Input::NodeUpsert(_) | Input::PodUpsert(_))
            || self.executor.is_own_answer(&input)
        {
            return input;
        }
        let (input, masked) = shadow.mask(input, &self.controllers);
        if masked {
            self.executor.keep_as_shadow(&input);
        }
        input
    }

    /// One call of the informer `select` picks, its deltas fed to the controllers; true when
    /// they include a (re)sync. The one path all three informers take.
    fn pump<T: Fed>(
        &mut self,
        lp: &mut Lp,
        token: Option<Token>,
        select: fn(&mut InformerSet) -> &mut Informer<T, SourceKind, TimerKind>,
    ) -> bool {
        let mut out = self.informers.read(lp, token, select);
        let synced = self.feed_deltas(&mut out, lp.now());
        self.informers.give_back(select, out);
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
                        if let Some(shadow) = self.shadow.as_mut() {
                            shadow.full_state_end(T::STORED_AS);
                        }
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
            Watch::Nodes => self.pump(lp, token, InformerSet::nodes),
            Watch::Leases => self.pump(lp, token, InformerSet::leases),
            Watch::Pods => self.pump(lp, token, InformerSet::pods),
        };
        self.report_informers_watching(lp.now());
        if synced && self.informers.note_synced(watch) {
            // What we wait for changed: say so now.
            self.observability.refresh_status_soon();
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
        if let Some(settle) = self.informers.watching_changed(now) {
            self.feed(Input::InformersWatching(settle), now);
        }
    }

    /// An informer finished its first full state.
    pub(super) fn on_synced(&mut self, lp: &mut Lp) {
        if !self.informers.all_synced() {
            return;
        }
        self.informers.probe_watch_list_if_unknown();
        let store = self.controllers.store();
        info!(
            "initial sync complete: {} nodes, {} node leases, {} bound pods",
            store.node_count(),
            store.lease_count(),
            store.pod_count()
        );
        self.observability.ready_once();
        self.maybe_act(lp.now());
        self.refresh_status();
    }
}
