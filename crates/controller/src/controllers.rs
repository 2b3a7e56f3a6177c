//! The two upstream controllers as one sans-IO machine: the node lifecycle controller and the
//! NoExecute taint eviction controller (kube-controller-manager runs them as two controllers over
//! shared informers; here they share the inputs and one action stream), with fencing beside
//! them.
//!
//! One [`World`] (`world.rs`) holds the cluster for all three: every watched object goes into it
//! first (`World::apply`, the only `&mut` path to its store), then the machines decide on what
//! changed, reading objects from `&World`. `Controllers` owns the world and is the only caller of
//! `apply`. A write of the node lifecycle that a result says landed goes in the same way
//! (`Input::Landed`, made by `NodeLifecycle::landed`), before the lifecycle decides on the
//! result; taint eviction and fencing see the node it changed as any node change.
//! Routing: node and pod changes go to all; leases, action results and lease reads to the node
//! lifecycle; eviction results to taint eviction; fencing's reads, results and command exits to
//! fencing alone. The node lifecycle's own taint writes reach taint eviction as a node change,
//! as upstream's reach its taint manager through the node watch: from the write's answer (a
//! `NodeUpsert` the shell feeds ahead of the result), or from the result itself when no answer
//! came (`Input::Landed`), whichever is first.
//!
//! Nothing is decided before the initial sync of nodes, leases and pods: until
//! `InitialSyncDone`, taint eviction is not fed at all; at that moment it judges the pods of
//! every node in the store.
//! In legacy mode (`taint_based_eviction = false`) there is no taint eviction, as upstream with
//! `--enable-taint-manager=false`.

use crate::model::ClusterStore;
use crate::time::Time;

use super::actions::Action;
use super::cache_currency::CacheCurrency;
use super::decisions::Decision;
use super::dump::StateDump;
use super::fencing::Fencing;
use super::fleet_pause::PauseGate;
use super::inputs::{Input, Observed};
use super::node_lifecycle::NodeLifecycle;
use super::pool_timing::PoolTiming;
use super::settings::Settings;
use super::taint_eviction::{EvictionDump, TaintEviction};
use super::world::World;

pub struct Controllers {
    /// The cluster as the three machines know it; `World::apply`, called only here, is the one
    /// way it changes.
    world: World,
    lifecycle: NodeLifecycle,
    /// `None` in legacy mode.
    eviction: Option<TaintEviction>,
    /// `None` unless `[fencing]` is enabled.
    fencing: Option<Fencing>,
    synced: bool,
    /// Whether the informers' caches may be acted on (`cache_currency.rs`).
    caches: CacheCurrency,
    /// Zone NoExecute tainting and pod deletions wait for current caches and for the end of
    /// a fleet pause of tainting (as of the last input).
    held: bool,
    /// Whether stale caches are (part of) why they are held.
    held_by_caches: bool,
    /// The fleet pause: the one place that says what it holds.
    pause: PauseGate,
    /// Test-only (`without_taint_eviction`): no taint eviction whatever the settings say.
    taint_eviction_off: bool,
    /// Test-only (`taint_eviction_alone`): the node lifecycle decides nothing.
    lifecycle_off: bool,
}

impl Controllers {
    pub fn new(settings: Settings, now: Time) -> Controllers {
        let eviction = settings.taint_based_eviction.then(|| {
            let mut eviction = TaintEviction::new();
            eviction.set_autonomy(settings.autonomy);
            eviction.set_timing(PoolTiming::of(&settings));
            eviction
        });
        let fencing = settings
            .fencing
            .clone()
            .map(|policy| Fencing::new(policy, &settings));
        Controllers {
            world: World::new(),
            lifecycle: NodeLifecycle::new(settings, now),
            eviction,
            fencing,
            synced: false,
            caches: CacheCurrency::default(),
            held: false,
            held_by_caches: false,
            pause: PauseGate::default(),
            taint_eviction_off: false,
            lifecycle_off: false,
        }
    }

    /// Test-only: the node lifecycle (and fencing, if configured) without the taint eviction
    /// machine, settings unchanged: NoExecute taints are written, nobody evicts by them. Upstream
    /// tests its node lifecycle controller the same way, with no taint eviction controller
    /// running (`pkg/controller/nodelifecycle/node_lifecycle_controller_test.go`); suites that
    /// use it say why in their header (`controller::testing::FakeApi`).
    #[doc(hidden)]
    pub fn without_taint_eviction(settings: Settings, now: Time) -> Controllers {
        let mut controllers = Controllers::new(settings, now);
        controllers.eviction = None;
        controllers.taint_eviction_off = true;
        controllers
    }

    /// Test-only: taint eviction alone. The world takes every input as always; the node
    /// lifecycle keeps its entries but judges no node, writes nothing and sets no timer, so the
    /// taints are the tests' own. Upstream tests its taint eviction controller the same way, with no
    /// node lifecycle controller running (`pkg/controller/tainteviction/
    /// taint_eviction_test.go`); suites that use it say why in their header.
    #[doc(hidden)]
    pub fn taint_eviction_alone(settings: Settings, now: Time) -> Controllers {
        let mut controllers = Controllers::new(settings, now);
        controllers.lifecycle_off = true;
        controllers
    }

    /// Holds or releases the work that must not run on a stale cache; called before every
    /// input, so a settle ending is noticed at the tick `next_deadline` asks for.
    ///
    /// THE hold gate: stale caches (`cache_currency.rs`) and a fleet pause of tainting
    /// (`fleet_pause.rs`) hold the same work the same way; a pause of fencing blocks fences.
    fn apply_cache_currency(&mut self, now: Time) {
        let current = self.caches.is_current(now);
        let hold = !current || self.pause.holds_tainting(now);
        self.held = hold;
        self.held_by_caches = !current;
        self.lifecycle.set_caches_current(!hold);
        if let Some(eviction) = self.eviction.as_mut() {
            eviction.set_held(hold);
        }
        if let Some(f) = self.fencing.as_mut() {
            f.set_paused(self.pause.holds_fencing(now).map(|p| p.describe()));
            let tainting = self.pause.current(now).filter(|p| p.what.tainting());
            f.set_taint_paused(tainting.map(|p| p.describe()));
        }
    }

    /// The machine API of the three together: `input` at `now` in, the actions to take out.
    /// The steps run in the data's order: the holds follow the input; the input enters the
    /// world (`World::apply`) and the derived facts follow it; taint eviction, the node
    /// lifecycle and fencing decide on what changed, each reading `&World`.
    pub fn handle(&mut self, input: Input, now: Time) -> Vec<Action> {
        let became_synced = matches!(input, Input::InitialSyncDone) && !self.synced;
        let mut resumed = Vec::new();
        let Some(input) = self.follow_holds(input, now, &mut resumed) else {
            return resumed;
        };
        let mut out = Vec::new();
        if Fencing::answers(&input) {
            // Fencing's own answers go to it alone: they change nothing the others judge.
            self.fencing_decides(&Observed::Input(input), now, &mut out);
            out.append(&mut resumed);
            return out;
        }
        let tick = matches!(input, Input::Tick);
        let observed = self.observe(input, now);
        let mut evictions = Vec::new();
        self.follow_brakes(now, &mut evictions);
        if tick {
            // Before the deadlines due now fire.
            self.follow_takeover_wait(now, &mut evictions);
        }
        self.eviction_decides(&observed, now, &mut evictions);
        let landed = self.land(&observed, now);
        if !self.lifecycle_off {
            self.lifecycle.decide(&self.world, &observed, now, &mut out);
        }
        self.follow_brakes(now, &mut evictions);
        if let Some(node_changed) = &landed {
            // The other machines see the node the lifecycle's write changed as any node
            // change, after the lifecycle (which knows its own write: it decided on the result).
            self.eviction_decides(node_changed, now, &mut evictions);
        }
        if became_synced {
            self.synced = true;
            self.eviction_initial_sync(now, &mut evictions);
        }
        // After the node lifecycle: zone states are recounted for this very change.
        self.fencing_decides(&observed, now, &mut out);
        if let Some(node_changed) = &landed {
            self.fencing_decides(node_changed, now, &mut out);
        }
        out.append(&mut evictions);
        out.append(&mut resumed);
        out
    }

    /// The holds follow the input first (a fleet pause is an input of its own, consumed here:
    /// `None`); fencing judges every node again where a pause of it (or of tainting) ended.
    fn follow_holds(
        &mut self,
        input: Input,
        now: Time,
        resumed: &mut Vec<Action>,
    ) -> Option<Input> {
        if let Input::InformersWatching(all) = input {
            self.caches.watching(all, now);
        }
        // As the fencing machine was last told (the pause may have run out since).
        let fencing_was_paused = self.fencing.as_ref().map(Fencing::pauses);
        self.pause.tick(now);
        let fed = match input {
            Input::FleetPause(pause) => {
                self.pause.set(pause, now);
                None
            }
            other => Some(other),
        };
        self.apply_cache_currency(now);
        let fencing_is_paused = self.fencing.as_ref().map(Fencing::pauses);
        let ended = match (fencing_was_paused, fencing_is_paused) {
            (Some((f0, t0)), Some((f1, t1))) => (f0 && !f1) || (t0 && !t1),
            _ => false,
        };
        if ended && let Some(f) = self.fencing.as_mut().filter(|_| self.synced) {
            // Fencing may go on: every node is judged now, not at its next recheck.
            f.judge_all(&self.world, &self.lifecycle, now, resumed);
        }
        fed
    }

    /// The input into the world, through its one writer; the facts the lifecycle derives (the
    /// suspects, the brakes' counts) follow it before any machine decides on it.
    fn observe(&mut self, input: Input, now: Time) -> Observed {
        let observed = self.world.apply(input);
        self.lifecycle.follow(self.world.store(), &observed, now);
        observed
    }

    /// Taint eviction notes and decides on `observed`, under the brakes (and the takeover's
    /// wait) as it was last told them.
    fn eviction_decides(&mut self, observed: &Observed, now: Time, out: &mut Vec<Action>) {
        if let Some(eviction) = self.eviction.as_mut() {
            eviction.note_history(&self.world, observed, now);
        }
        if let Some(eviction) = self.eviction.as_mut().filter(|_| self.synced) {
            eviction.decide(&self.world, observed, now, out);
        }
    }

    /// A write of ours that this result says landed enters the world now, through its one
    /// writer, before the lifecycle decides on the result (as if its answer had come first, as
    /// the live shell feeds it: `runtime/executor/live.rs`, `absorb_answer`). The node it
    /// changed, if it changed one, for the other machines.
    /// Only an answer (a write's result, a live Lease read) can say so: nothing else (a
    /// renewal) asks the lifecycle.
    fn land(&mut self, observed: &Observed, now: Time) -> Option<Observed> {
        if !matches!(
            observed,
            Observed::Input(Input::Result { .. } | Input::LeaseRead { .. })
        ) {
            return None;
        }
        let landed = self.lifecycle.landed(observed)?;
        let applied = self.world.apply(Input::Landed(landed));
        self.lifecycle.landed_applied(&applied);
        self.lifecycle
            .tally_observed(self.world.store(), &applied, now);
        matches!(applied, Observed::Node { .. }).then_some(applied)
    }

    /// The initial sync: taint eviction judges the pods of every node in the store.
    fn eviction_initial_sync(&mut self, now: Time, out: &mut Vec<Action>) {
        if let Some(eviction) = self.eviction.as_mut() {
            // A start or takeover in a mass failure: the brake holds the overdue deletions the
            // taints found at start would fire at once.
            let lifecycle = &self.lifecycle;
            let store = self.world.store();
            eviction.set_brake(lifecycle.brake_cover(store), store, now, out);
            // The countdowns found wait while the suspects would put every zone down or fully
            // disrupt their node's zone (the lifecycle counted every node and zone and judged
            // them just now).
            let wait = lifecycle.takeover_wait_cover(store, now);
            eviction.initial_sync(store, wait, now, out);
        }
    }

    fn fencing_decides(&mut self, observed: &Observed, now: Time, out: &mut Vec<Action>) {
        if let Some(f) = self.fencing.as_mut() {
            f.decide(&self.world, &self.lifecycle, observed, now, out);
        }
    }

    /// The clocks the next leader is to honour (`controller/clocks.rs`): the shell writes them
    /// where it reads them at a takeover.
    pub fn clocks(&self, now: Time) -> super::clocks::Clocks {
        self.lifecycle.clocks(now)
    }

    /// Clocks a previous leader left; honoured at the initial sync (call before it).
    pub fn inherit_clocks(&mut self, clocks: super::clocks::Clocks) {
        self.lifecycle.inherit_clocks(clocks);
    }

    /// Tells taint eviction which nodes' inherited countdowns wait for the takeover's
    /// suspects (`TaintEviction::inherited`), while any is pending: counted at each tick (the
    /// suspects change with time; a deadline comes due at a tick), so a wait ends at most one
    /// tick after its suspects renewed or were judged.
    fn follow_takeover_wait(&mut self, now: Time, out: &mut Vec<Action>) {
        let lifecycle = &self.lifecycle;
        if let Some(eviction) = self
            .eviction
            .as_mut()
            .filter(|e| self.synced && e.has_inherited())
        {
            let store = self.world.store();
            let cover = lifecycle.takeover_wait_cover(store, now);
            eviction.set_takeover_wait(cover, store, now, out);
        }
    }

    /// Tells taint eviction which nodes the engaged brakes cover (a release lets the held
    /// deletions go).
    fn follow_brakes(&mut self, now: Time, out: &mut Vec<Action>) {
        let lifecycle = &self.lifecycle;
        if let Some(eviction) = self.eviction.as_mut().filter(|_| self.synced) {
            // No brake engaged and none held: the cover is `Nothing` (`brake_cover`'s first
            // test) and `set_brake` of the cover it holds returns at once, so it is not built
            // (this runs twice per input, a renewal's included). Otherwise the cover is set
            // (a reload that removed the last brake lets its held deletions go).
            if !lifecycle.brakes().any_engaged() && eviction.brake_holds_nothing() {
                return;
            }
            let store = self.world.store();
            eviction.set_brake(lifecycle.brake_cover(store), store, now, out);
        }
    }

    /// What both controllers decided and why since the last call, oldest first within each
    /// (the node lifecycle's first): the evidence behind the actions they returned.
    pub fn take_decisions(&mut self) -> Vec<Decision> {
        let mut decisions = self.pause.take_decisions();
        decisions.extend(self.lifecycle.take_decisions());
        if let Some(eviction) = self.eviction.as_mut() {
            decisions.extend(eviction.take_decisions());
        }
        if let Some(fencing) = self.fencing.as_mut() {
            decisions.extend(fencing.take_decisions());
        }
        decisions
    }

    /// The one deadline name of the machine API: when the shell must call
    /// `handle(Input::Tick, now)` next (its poll timeout), the earliest of the three machines'
    /// (taint eviction and fencing count only once synced). Any `handle`, `apply_settings` or
    /// `into_follower` can move it, earlier or later: ask again after each; `None` = no timer.
    pub fn next_deadline(&self) -> Option<Time> {
        let eviction = self.eviction.as_ref().filter(|_| self.synced);
        let fencing = self.fencing.as_ref().filter(|_| self.synced);
        // Held deletions are not due before the caches are current (no wake-up loop on a
        // deadline that cannot be acted on); the settle's end is a deadline of its own.
        let (eviction_due, current_at) = match (eviction.and_then(|e| e.next_deadline()), self.held)
        {
            (due, false) => (due, None),
            (due, true) => {
                // Released when the caches are current and the pause is over, whichever is
                // later (a pause's end is a deadline of its own, below).
                let caches_at = if self.held_by_caches {
                    self.caches.current_at()
                } else {
                    Some(Time::ZERO)
                };
                // A pause with no end of its own (an unreadable annotation: until its next
                // valid write) releases nothing by time.
                let pause_at = if self.pause.open_ended() {
                    None
                } else {
                    Some(self.pause.next_deadline().unwrap_or(Time::ZERO))
                };
                let at = caches_at.and_then(|c| pause_at.map(|p| c.max(p)));
                (
                    due.and_then(|d| at.map(|at| d.max(at))),
                    caches_at.filter(|_| self.held_by_caches),
                )
            }
        };
        [
            self.lifecycle
                .next_deadline()
                .filter(|_| !self.lifecycle_off),
            eviction_due,
            fencing.and_then(|f| f.next_deadline()),
            current_at.filter(|_| self.synced),
            self.pause.next_deadline(),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// The periodic pass's window, `(opens, tick)`: a `handle(Input::Tick, now)` with `now`
    /// from `opens` on runs the pass (`Settings::monitor_pass_early`); the shell may wait for
    /// a wake-up it makes anyway until `tick`, and aims its own (a watch's end) into it.
    pub fn monitor_pass_window(&self) -> Option<(Time, Time)> {
        self.lifecycle.monitor_pass_window()
    }

    /// When `next_deadline` is the pass's tick: the instant its window opens, from which the
    /// tick may come early (a lazy deadline for the shell). `None` when something else is
    /// due first, or the window is empty.
    pub fn next_soft_deadline(&self) -> Option<Time> {
        let (opens, tick) = self.monitor_pass_window()?;
        (opens < tick && self.next_deadline() == Some(tick)).then_some(opens)
    }

    /// Config reload: rates, thresholds and grace periods apply now; fencing turned on starts
    /// judging the nodes, turned off forgets its work (commands already running finish).
    pub fn apply_settings(&mut self, settings: Settings, now: Time) -> Vec<Action> {
        if let Some(eviction) = self.eviction.as_mut() {
            eviction.set_autonomy(settings.autonomy);
            eviction.set_timing(PoolTiming::of(&settings));
        }
        match (settings.fencing.clone(), self.fencing.as_mut()) {
            (None, _) => self.fencing = None,
            (Some(policy), Some(f)) => f.apply(policy, &settings),
            (Some(policy), None) => {
                let mut f = Fencing::new(policy, &settings);
                if self.synced {
                    // Turned on while acting: it has watched no outage yet.
                    f.started_acting(now);
                }
                f.set_paused(self.pause.holds_fencing(now).map(|p| p.describe()));
                let tainting = self.pause.current(now).filter(|p| p.what.tainting());
                f.set_taint_paused(tainting.map(|p| p.describe()));
                self.fencing = Some(f);
            }
        }
        let mut actions = self.lifecycle.apply_settings(&self.world, settings, now);
        let mut evictions = Vec::new();
        self.follow_brakes(now, &mut evictions);
        actions.append(&mut evictions);
        if let Some(f) = self.fencing.as_mut().filter(|_| self.synced) {
            f.judge_all(&self.world, &self.lifecycle, now, &mut actions);
        }
        actions
    }

    /// Test switch: the monitor pass evaluates every node, settled or not; the reference of
    /// the differential test (`tests/randomized/monitor_pass.rs`).
    #[doc(hidden)]
    pub fn use_full_monitor_pass(&mut self, full: bool) {
        self.lifecycle.use_full_monitor_pass(full);
    }

    pub fn fencing(&self) -> Option<&Fencing> {
        self.fencing.as_ref()
    }

    /// The fleet pause in force at `now` (`status`, `explain`, the metric).
    /// Zone tainting and deletions wait for the caches to follow the server again.
    pub fn held_by_caches(&self) -> bool {
        self.held && self.held_by_caches
    }

    pub fn pause(&self, now: Time) -> Option<&super::fleet_pause::FleetPause> {
        self.pause.current(now)
    }

    /// A leader that lost its lease becomes a follower: a fresh, unsynced machine that knows
    /// the same nodes, leases and pods (so a later takeover starts from warm caches) but none of
    /// the old one's queues, pending writes or eviction countdowns, which belonged to a
    /// leadership that is over (a new leadership finds the countdowns again in the taints'
    /// `timeAdded`, and keeps the taints of nodes not Ready: `NodeLifecycle::register`). Probe
    /// times restart from `now`: the follower's own observation.
    pub fn into_follower(mut self, now: Time) -> Controllers {
        let mut settings = self.lifecycle.settings().clone();
        // Taint eviction switched off by `without_taint_eviction` stays off.
        settings.taint_based_eviction = self.eviction.is_some() || self.taint_eviction_off;
        settings.fencing = self.fencing.as_ref().map(|f| f.policy().clone());
        let mut follower = if self.taint_eviction_off {
            Controllers::without_taint_eviction(settings, now)
        } else {
            Controllers::new(settings, now)
        };
        // The informers go on as they were: a follower's caches are as current as the leader's.
        follower.caches = self.caches;
        // The pause is the cluster's, not the leadership's.
        follower.pause = self.pause;
        // Toleration edits and taint swaps seen are the cluster's history too.
        if let (Some(new), Some(old)) = (follower.eviction.as_mut(), self.eviction.as_mut()) {
            new.take_history_from(old);
        }
        let lags = self.lifecycle.lease_lags();
        follower.world.adopt(self.world);
        follower.lifecycle.adopt_world(&follower.world, now);
        follower.lifecycle.keep_lease_lags(lags);
        follower.apply_cache_currency(now);
        follower
    }

    /// Asks for what the renewals of `names` (a batch about to be fed) will read
    /// (`model/prefetch.rs`), a stage at a time over the batch: the index buckets of their
    /// Leases in the store, the Leases, then (by the node key each Lease keeps) the line of the
    /// node lifecycle's index that holds its entry's slot, then the entry. Each stage reads only
    /// what the one before fetched, so a batch waits for a few misses, not a few per renewal.
    /// Reads only: nothing any decision sees changes, and a wrong guess costs a line.
    pub fn prefetch_renewals<'a>(&self, names: impl Iterator<Item = &'a str> + Clone) {
        let store = self.world.store();
        for name in names.clone() {
            store.prefetch_lease_index(name);
        }
        for name in names.clone() {
            store.prefetch_lease(name);
        }
        for name in names.clone() {
            if let Some(key) = store.prefetch_lease_name(name) {
                self.lifecycle.prefetch_entry_index(key);
            }
        }
        for name in names {
            if let Some(key) = store.likely_lease_node(name) {
                self.lifecycle.prefetch_entry(key);
            }
        }
    }

    /// The cluster as the controllers know it.
    pub fn store(&self) -> &ClusterStore {
        self.world.store()
    }

    #[cfg(test)]
    pub(crate) fn is_synced(&self) -> bool {
        self.synced
    }

    pub fn lifecycle(&self) -> &NodeLifecycle {
        &self.lifecycle
    }

    pub fn eviction(&self) -> Option<&TaintEviction> {
        self.eviction.as_ref()
    }

    /// What the SIGUSR1 dump shows of the controllers.
    pub fn dump(&self, now: Time) -> (StateDump, Option<EvictionDump>) {
        (
            self.lifecycle.dump(self.world.store(), now),
            self.eviction.as_ref().map(|e| e.dump(now)),
        )
    }
}
