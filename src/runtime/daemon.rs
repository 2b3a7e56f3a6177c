//! The daemon: one struct that owns every part of the shell and is driven by the loop.
//!
//! ```text
//!  informers (nodes, node Leases, bound pods) ──deltas──> Controllers ──actions──> Executor
//!        ^  watch sockets, LIST pages                          ^                      │
//!        └── SourceKind::Watch / TimerKind::Informer           └──── results ─────────┘
//!  LeaderElection (own client) ── Acquired / Lost ──> act / stand by
//! ```
//!
//! - Nothing is decided before the initial sync of all three informers (then `READY=1`).
//! - Only the leader decides and writes. A follower feeds the controllers every delta but not
//!   `InitialSyncDone`, so they decide nothing and keep their own probe times; on `Acquired` they
//!   get it and act. Before every executor turn the elector is asked whether we still lead (it
//!   turns false at the renew deadline even if no timer ran): if not, queued writes are
//!   abandoned at once and the controllers become a follower's (`Controllers::into_follower`).
//! - The executor runs as a timer at its `next_wakeup`, with a small budget per turn, so a slow
//!   API server delays the other timers by about one call's timeout at most.
//! - Every handler ends in `rearm`: the controller, executor and leader timers follow the
//!   machines' next deadlines.

use std::io;
use std::path::PathBuf;
use std::time::Duration;

use log::{debug, error, info, trace, warn};
use mio::event::Event;
use mio::{Interest, Token};

use super::Clock;
use super::api::{ApiClients, connect};
use super::event_loop::{EventLoop, Handler, LoopControl};
use super::executor::Executor;
use super::fencing::FenceRunner;
use super::informer::{Informer, InformerConfig, InformerIo, probe_watch_list};
use super::sd_notify::{Notifier, watchdog_interval_from_env};
use super::settings::{controller_settings, executor_settings, informer_config};
use super::signals::{Signal, Signals};
use super::state_dump::{api_source, read_rss_bytes};
use crate::config::{Config, ConfigChange};
use crate::controller::pools::selector_label_keys;
use crate::controller::{Action, Controllers, Input};
use crate::kube::decode::DecodeContext;
use crate::kube::reflector::{Delta, ReflectorStats, Watched};
use crate::kube::{ApiClient, Connection, TokenSource};
use crate::leader::{Jitter, LeaderElection, Transition};
use crate::logging::{self, LogControl};
use crate::model::{ConditionStatus, Kind, Lease, Node, Pod};
use crate::observe::ask;
use crate::observe::control::{ControlEndpoints, ControlLimits, ControlServer};
use crate::observe::decision_log::DecisionLog;
use crate::observe::explain::Acting;
use crate::observe::{
    ActionCount, BuildInfo, ClientSnapshot, DaemonSnapshot, Endpoints, HealthTimings,
    LeaderSnapshot, Limits, LoopSnapshot, MetricsServer, Readiness, ReflectorSnapshot,
    RequestCount, StoreMemory,
};
use crate::time::Time;

/// The three watched kinds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Watch {
    Nodes,
    Leases,
    Pods,
}

impl Watch {
    pub const ALL: [Watch; 3] = [Watch::Nodes, Watch::Leases, Watch::Pods];

    pub fn resource(self) -> &'static str {
        match self {
            Watch::Nodes => "nodes",
            Watch::Leases => "leases",
            Watch::Pods => "pods",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// What a registered loop source is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SourceKind {
    Signal(Signal),
    /// An informer's watch socket.
    Watch(Watch),
    /// The metrics listener and its connections.
    Metrics,
    /// The control socket and its clients (`status`, `explain`).
    Control,
    /// A fence command's stdout or stderr.
    FenceOutput,
}

/// What a loop timer is for.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum TimerKind {
    /// Send `WATCHDOG=1`: armed only while the loop turns, so a stuck loop goes silent.
    Watchdog,
    /// An informer's next LIST page, watch (re)open, idle check or read budget.
    Informer(Watch),
    /// `Controllers::next_deadline`: feed `Input::Tick`.
    Controller,
    /// `Executor::next_wakeup`: run queued API calls.
    Executor,
    /// `LeaderElection::next_deadline`: renew, retry, or notice the renew deadline.
    Leader,
    /// The metrics server's heartbeat and connection deadlines.
    Metrics,
    /// The control socket's client deadlines.
    Control,
    /// The decision log's folded lines are due to be summarised.
    Decisions,
    /// The earliest fence command timeout.
    Fence,
}

type Lp = LoopControl<SourceKind, TimerKind>;

/// Logged once the loop runs; tests and operators wait for it before sending signals.
pub const READY_FOR_SIGNALS: &str = "ready for signals";

/// One executor turn stops starting calls after this long (one call may then still take up to
/// the request timeout): the loop's other timers and watches run between turns.
const EXECUTOR_TURN_BUDGET: Duration = Duration::from_millis(20);
/// And after this many calls, whatever their speed.
const EXECUTOR_TURN_CALLS: usize = 64;
/// How often `STATUS=` is recomputed at most (it is sent only when it changed). It rides on the
/// controller's timers, which fire at least every `node_monitor_period`: no wake-up of its own.
const STATUS_PERIOD: Duration = Duration::from_secs(5);

/// Why the daemon could not run.
#[derive(Debug)]
pub enum DaemonError {
    /// A connection setting (kubeconfig, certificate, key, token file) is unusable: exit 78.
    Config(String),
    /// The event loop itself failed: exit 1.
    Io(io::Error),
}

impl std::fmt::Display for DaemonError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DaemonError::Config(e) => write!(f, "{e}"),
            DaemonError::Io(e) => write!(f, "event loop failed: {e}"),
        }
    }
}

impl From<io::Error> for DaemonError {
    fn from(e: io::Error) -> DaemonError {
        DaemonError::Io(e)
    }
}

/// What informers borrow for a call, kept apart from the informers themselves.
struct InformerShared {
    client: ApiClient,
    connection: Connection,
    tokens: TokenSource,
    decode: DecodeContext,
    config: InformerConfig,
}

pub struct Daemon {
    config_path: PathBuf,
    config: Config,
    log: LogControl,
    notifier: Notifier,
    signals: Signals,
    watchdog_every: Option<Duration>,
    status: String,
    clock: Clock,
    shared: InformerShared,
    informers: Informers,
    /// Each informer delivered a full state at least once (since the last resync).
    synced: [bool; 3],
    controllers: Controllers,
    executor: Executor,
    /// Fence commands (issue #17): started for the controllers, answered as inputs.
    fencer: FenceRunner,
    fences_to_start: Vec<(
        crate::controller::ActionId,
        crate::controller::fencing::FenceCommand,
    )>,
    leader: LeaderElection,
    /// The controllers got `InitialSyncDone`: they decide and the executor writes. Only while
    /// leading.
    acting: bool,
    ready_sent: bool,
    metrics: Option<MetricsServer>,
    health_timings: HealthTimings,
    /// When `STATUS=` was last recomputed by the controller timer.
    status_refreshed: Time,
    /// The server's version could not be read at start: ask again once it answers (watch-list
    /// streaming for later relists if it has it).
    watch_list_unknown: bool,
    /// Every decision as one line (folded in floods), and the history `explain` shows.
    decision_log: DecisionLog,
    control: Option<ControlServer>,
}

/// The three informers, each with its own source kind and timer.
struct Informers {
    nodes: Informer<Node, SourceKind, TimerKind>,
    leases: Informer<Lease, SourceKind, TimerKind>,
    pods: Informer<Pod, SourceKind, TimerKind>,
}

impl Informers {
    fn new(config: &InformerConfig, seed: u64) -> Informers {
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
        }
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

impl Daemon {
    /// Installs signal handlers, binds the metrics endpoint, and builds every part; nothing
    /// runs until [`Daemon::start`].
    fn new(
        lp: &mut Lp,
        config_path: PathBuf,
        config: Config,
        log: LogControl,
        clients: ApiClients,
        watch_list: Option<bool>,
    ) -> io::Result<Daemon> {
        let mut signals = Signals::install()?;
        for (signal, read_end) in signals.sources_mut() {
            lp.register(read_end, Interest::READABLE, SourceKind::Signal(signal))?;
        }
        let notifier = Notifier::from_env().unwrap_or_else(|e| {
            warn!("sd_notify disabled: {e}");
            Notifier::disabled()
        });
        let watchdog_every = watchdog_interval_from_env().filter(|_| notifier.is_enabled());
        let now = lp.now();
        let metrics = match config.metrics_address {
            None => None,
            Some(addr) => {
                let mut server = MetricsServer::bind(addr, Limits::default(), now)?;
                server.register(lp, SourceKind::Metrics)?;
                info!("metrics on http://{}/metrics", server.local_addr());
                Some(server)
            }
        };
        let control = config.control_socket.as_deref().and_then(|path| {
            let bound = ControlServer::bind(path, ControlLimits::default())
                .and_then(|mut server| server.register(lp, SourceKind::Control).map(|()| server));
            match bound {
                Ok(server) => {
                    info!(
                        "control socket {} (node-lifecycled status / explain)",
                        path.display()
                    );
                    Some(server)
                }
                Err(e) => {
                    warn!("control socket off: {e}");
                    None
                }
            }
        });
        let clock = lp.clock().clone();
        let seed = Jitter::seed_from_entropy();
        let informer_config = informer_config(&config.api, watch_list == Some(true));
        let informers = Informers::new(&informer_config, seed);
        let leader_clock = clock.clone();
        let leader = LeaderElection::from_config(
            &config.leader_election,
            clients.leader,
            Box::new(move || leader_clock.now()),
        );
        Ok(Daemon {
            controllers: Controllers::new(controller_settings(&config), now),
            executor: Executor::new(clients.executor, executor_settings(&config, seed), now),
            fencer: FenceRunner::new(&config.fencing),
            fences_to_start: Vec::new(),
            shared: InformerShared {
                client: clients.informers,
                connection: clients.connection,
                tokens: clients.tokens,
                decode: decode_context(&config),
                config: informer_config,
            },
            config_path,
            config,
            log,
            notifier,
            signals,
            watchdog_every,
            status: String::new(),
            clock,
            informers,
            synced: [false; 3],
            leader,
            acting: false,
            ready_sent: false,
            metrics,
            health_timings: HealthTimings::default(),
            status_refreshed: Time::ZERO,
            watch_list_unknown: watch_list.is_none(),
            decision_log: DecisionLog::new(),
            control,
        })
    }

    /// Arms the first timers: informers list at once, the leader looks at its lease at once.
    fn start(&mut self, lp: &mut Lp) {
        let now = lp.now();
        if self.watchdog_every.is_some() {
            lp.schedule(TimerKind::Watchdog, now);
        }
        self.informers.start(lp);
        self.rearm(lp);
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    fn all_synced(&self) -> bool {
        self.synced.iter().all(|s| *s)
    }

    /// What the daemon is doing, for `systemctl status` and the state dump; sent on change.
    fn set_status(&mut self, status: String) {
        if status != self.status {
            report("STATUS", self.notifier.status(&status));
            self.status = status;
        }
    }

    /// `leader|follower|dry-run, N nodes, M not Ready, K pending evictions`, or what the
    /// daemon is waiting for.
    fn status_line(&self) -> String {
        if !self.all_synced() {
            let waiting: Vec<&str> = Watch::ALL
                .iter()
                .filter(|w| !self.synced[w.index()])
                .map(|w| w.resource())
                .collect();
            let error = self
                .informers
                .reflector_stats()
                .into_iter()
                .find_map(|(_, stats)| stats.last_error);
            return match error {
                Some(e) => format!(
                    "waiting for the initial sync of {} from {}: {e}",
                    waiting.join(", "),
                    self.shared.client.base_url()
                ),
                None => format!("waiting for the initial sync of {}", waiting.join(", ")),
            };
        }
        let role = match (self.acting, self.executor.is_dry_run()) {
            (true, true) => "dry-run",
            (true, false) => "leader",
            (false, _) => "follower",
        };
        let (mut nodes, mut not_ready) = (0, 0);
        for node in self.controllers.store().nodes() {
            nodes += 1;
            if node.ready().map(|c| c.status) != Some(ConditionStatus::True) {
                not_ready += 1;
            }
        }
        let pending = self
            .controllers
            .eviction()
            .filter(|_| self.acting)
            .map_or(0, |e| e.pending_len());
        format!("{role}, {nodes} nodes, {not_ready} not Ready, {pending} pending evictions")
    }

    fn refresh_status(&mut self) {
        let line = self.status_line();
        self.set_status(line);
    }

    // ---- inputs to the controllers ----------------------------------------------------------

    /// A watched object (or its deletion) on its way to the controllers: in dry-run, the
    /// executor lays what it "wrote" over it, so a relist cannot undo a write never sent.
    fn feed_watched(&mut self, input: Input, now: Time) {
        let input = self.executor.overlay(input);
        self.feed(input, now);
    }

    /// One input to the controllers; what they decide goes to the executor while we act
    /// (fence commands wait for `start_fences`, which has the loop to register their pipes).
    fn feed(&mut self, input: Input, now: Time) {
        let mut actions = self.controllers.handle(input, now);
        if actions.is_empty() {
            return;
        }
        if self.acting {
            actions.retain(|action| match action {
                Action::RunFenceCommand { id, command } => {
                    self.fences_to_start.push((*id, command.clone()));
                    false
                }
                _ => true,
            });
            self.executor.submit(actions, now);
        } else {
            // Unsynced controllers decide nothing; this is a safety net, not a path.
            warn!(
                "not acting: {} actions from the controllers dropped",
                actions.len()
            );
        }
    }

    /// Feeds an informer's deltas to the controllers; true when they include a (re)sync.
    fn feed_deltas<T: Watched>(
        &mut self,
        deltas: Vec<Delta<T>>,
        now: Time,
        kind: Kind,
        upsert: fn(T) -> Input,
        delete: fn(T::Key) -> Input,
    ) -> bool {
        let mut synced = false;
        for delta in deltas {
            match delta {
                Delta::Begin => self.feed(Input::FullStateBegin(kind), now),
                Delta::Upsert(object) => self.feed_watched(upsert(object), now),
                Delta::Delete(key) => self.feed_watched(delete(key), now),
                Delta::Synced => {
                    self.feed(Input::FullStateEnd(kind), now);
                    synced = true;
                }
            }
        }
        if synced {
            // A full state grows tables and leaves freed pages behind: give them back now, so
            // the daemon's peak memory is its steady memory.
            super::memory::release_free_memory();
        }
        synced
    }

    fn on_informer(&mut self, lp: &mut Lp, watch: Watch, token: Option<Token>) {
        let synced = match watch {
            Watch::Nodes => {
                let mut out = Vec::new();
                drive(
                    &mut self.informers.nodes,
                    &mut self.shared,
                    lp,
                    token,
                    &mut out,
                );
                self.feed_deltas(
                    out,
                    lp.now(),
                    Kind::Nodes,
                    Input::NodeUpsert,
                    Input::NodeDeleted,
                )
            }
            Watch::Leases => {
                let mut out = Vec::new();
                drive(
                    &mut self.informers.leases,
                    &mut self.shared,
                    lp,
                    token,
                    &mut out,
                );
                self.feed_deltas(
                    out,
                    lp.now(),
                    Kind::Leases,
                    Input::LeaseUpsert,
                    Input::LeaseDeleted,
                )
            }
            Watch::Pods => {
                let mut out = Vec::new();
                drive(
                    &mut self.informers.pods,
                    &mut self.shared,
                    lp,
                    token,
                    &mut out,
                );
                self.feed_deltas(
                    out,
                    lp.now(),
                    Kind::Pods,
                    Input::PodUpsert,
                    Input::PodDeleted,
                )
            }
        };
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

    /// An informer finished its first full state.
    fn on_synced(&mut self, lp: &mut Lp) {
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

    /// Starts deciding and writing if we lead and the caches are complete.
    fn maybe_act(&mut self, now: Time) {
        if self.acting || !self.all_synced() || !self.leader.is_leader(now) {
            return;
        }
        self.acting = true;
        info!(
            "acting{}: deciding on {} nodes",
            if self.leader.elector().is_enabled() {
                " as leader"
            } else {
                " (leader election disabled)"
            },
            self.controllers.store().node_count()
        );
        self.feed(Input::InitialSyncDone, now);
    }

    /// We may no longer write: drop what is queued at once, and keep only what a follower has.
    fn stop_acting(&mut self, now: Time, why: &str) {
        if !self.acting {
            return;
        }
        self.acting = false;
        self.fences_to_start.clear();
        let abandoned = self.executor.abandon(why);
        let settings = controller_settings(&self.config);
        let old = std::mem::replace(&mut self.controllers, Controllers::new(settings, now));
        self.controllers = old.into_follower(now);
        warn!(
            "stopped acting ({why}): {} queued writes abandoned; standing by as a follower",
            abandoned.len()
        );
        self.refresh_status();
    }

    // ---- timers ---------------------------------------------------------------------------

    fn on_controller_timer(&mut self, now: Time) {
        let started = std::time::Instant::now();
        self.feed(Input::Tick, now);
        self.health_timings
            .update_all_nodes_health
            .observe(started.elapsed());
        self.maybe_refresh_status(now);
    }

    /// Recomputes `STATUS=` on wake-ups the loop makes anyway: each one until the initial sync
    /// (few: list pages and retries, and what we wait for or fail on must show at once), then at
    /// most every [`STATUS_PERIOD`].
    fn maybe_refresh_status(&mut self, now: Time) {
        if !self.all_synced()
            || self.status_refreshed == Time::ZERO
            || now.since(self.status_refreshed) >= STATUS_PERIOD
        {
            self.status_refreshed = now;
            self.refresh_status();
        }
    }

    /// One executor turn: calls while they are due, within the turn's budget, each answer fed
    /// back to the controllers at once.
    fn on_executor_timer(&mut self, lp: &mut Lp) {
        let turn_started = lp.now();
        for _ in 0..EXECUTOR_TURN_CALLS {
            let now = lp.now();
            if !self.acting {
                return;
            }
            if !self.leader.is_leader(now) {
                self.stop_acting(now, "leader lease not renewed in time");
                return;
            }
            if now.since(turn_started) >= EXECUTOR_TURN_BUDGET
                || self.executor.next_wakeup().is_none_or(|at| at > now)
            {
                return;
            }
            let inputs = self.executor.run_ready(now, 1, &mut self.shared.decode);
            for took in self.executor.take_node_health_writes() {
                self.health_timings.update_node_health.observe(took);
            }
            let now = lp.now();
            for input in inputs {
                self.feed(input, now);
            }
        }
    }

    fn on_leader_timer(&mut self, lp: &mut Lp) {
        for transition in self.leader.step() {
            let now = lp.now();
            match transition {
                Transition::Acquired => self.maybe_act(now),
                Transition::Lost => self.stop_acting(now, "leadership lost"),
                Transition::NewLeader(_) => {}
            }
        }
        let now = lp.now();
        if self.acting && !self.leader.is_leader(now) {
            self.stop_acting(now, "leader lease not renewed in time");
        }
        self.refresh_status();
    }

    /// Logs what the controllers decided in this loop turn (and summaries of folded lines).
    fn log_decisions(&mut self, now: Time) {
        let decisions = self.controllers.take_decisions();
        let lines = if decisions.is_empty() {
            self.decision_log.flush(now)
        } else {
            let dry_run = self.executor.is_dry_run();
            self.decision_log.record(now, decisions, dry_run)
        };
        for line in lines {
            logging::log_with_fields(line.level, &line.message, &line.fields());
        }
    }

    /// Starts the fence commands the controllers asked for; an answer known at once (dry-run,
    /// a program that cannot start) goes straight back to them.
    fn start_fences(&mut self, lp: &mut Lp) {
        while let Some((id, command)) = self.fences_to_start.pop() {
            let dry_run = self.executor.is_dry_run();
            if let Some(answer) =
                self.fencer
                    .start(lp, SourceKind::FenceOutput, id, command, dry_run)
            {
                self.feed(answer, lp.now());
            }
        }
    }

    fn feed_all(&mut self, inputs: Vec<Input>, now: Time) {
        for input in inputs {
            self.feed(input, now);
        }
    }

    /// Keeps the machines' timers at their next deadlines; called after every handler.
    fn rearm(&mut self, lp: &mut Lp) {
        // Fences first: an answer known at once (dry-run) is a decision logged below.
        self.start_fences(lp);
        self.log_decisions(lp.now());
        match self.decision_log.next_deadline() {
            Some(at) => lp.schedule(TimerKind::Decisions, at),
            None => {
                lp.cancel(&TimerKind::Decisions);
            }
        }
        if let Some(at) = self.control.as_ref().and_then(ControlServer::next_deadline) {
            lp.schedule(TimerKind::Control, at);
        }
        match self.fencer.next_deadline() {
            Some(at) => lp.schedule(TimerKind::Fence, at),
            None => {
                lp.cancel(&TimerKind::Fence);
            }
        }
        match self.controllers.next_deadline() {
            Some(at) => lp.schedule(TimerKind::Controller, at),
            None => {
                lp.cancel(&TimerKind::Controller);
            }
        }
        match self.executor.next_wakeup().filter(|_| self.acting) {
            Some(at) => lp.schedule(TimerKind::Executor, at),
            None => {
                lp.cancel(&TimerKind::Executor);
            }
        }
        match self.leader.next_deadline() {
            Some(at) => lp.schedule(TimerKind::Leader, at),
            None => {
                lp.cancel(&TimerKind::Leader);
            }
        }
        if let Some(at) = self.metrics.as_ref().and_then(MetricsServer::next_deadline) {
            lp.schedule(TimerKind::Metrics, at);
        }
    }

    // ---- signals --------------------------------------------------------------------------

    fn on_signal(&mut self, lp: &mut Lp, signal: Signal) {
        if self.signals.drain(signal) == 0 {
            return;
        }
        debug!("{} received", signal.name());
        match signal {
            Signal::Terminate | Signal::Interrupt => {
                info!("{}: stopping", signal.name());
                report("STOPPING=1", self.notifier.stopping());
                lp.stop();
            }
            Signal::DumpState => {
                self.refresh_status();
                let snapshot = self.snapshot(lp.now(), LoopSnapshot::of(lp));
                for line in snapshot.dump_lines() {
                    info!("{line}");
                }
            }
            Signal::Reload => self.reload(lp),
            Signal::ChildExited => {
                let ended = self.fencer.reap(lp);
                self.feed_all(ended, lp.now());
            }
        }
    }

    /// SIGHUP: a valid file replaces what can change live; anything else keeps running as is.
    fn reload(&mut self, lp: &mut Lp) {
        let new = match Config::load(&self.config_path) {
            Ok(new) => new,
            Err(e) => {
                error!("reload failed, keeping the running configuration: {e}");
                return;
            }
        };
        let changes = new.changes_since(&self.config);
        if changes.is_empty() {
            info!(
                "config reloaded from {}: no changes",
                self.config_path.display()
            );
            return;
        }
        let (later, live): (Vec<ConfigChange>, Vec<ConfigChange>) =
            changes.into_iter().partition(needs_restart);
        let old = std::mem::replace(&mut self.config, new);
        // Read once at start-up: connections, identity, listener and the eviction mode.
        self.config.api = old.api.clone();
        self.config.leader_election = old.leader_election.clone();
        self.config.metrics_address = old.metrics_address;
        self.config.taint_based_eviction = old.taint_based_eviction;
        if self.config.log_level != old.log_level && !self.log.set_level(self.config.log_level) {
            warn!(
                "log_level {} not applied: RUST_LOG={:?} sets the filter",
                self.config.log_level.as_str().to_ascii_lowercase(),
                self.log.rust_log().unwrap_or_default()
            );
        }
        if !live.is_empty() {
            info!(
                "config reloaded from {}: {}",
                self.config_path.display(),
                join(&live)
            );
        }
        if !later.is_empty() {
            warn!(
                "config reloaded from {}: restart to apply {}",
                self.config_path.display(),
                join(&later)
            );
        }
        let now = lp.now();
        // Pool selectors may read label keys not kept before: nodes carry them from their
        // next update (a node's pool is decided on the labels the store has).
        self.shared
            .decode
            .keep_node_labels(selector_label_keys(&self.config.pools));
        self.fencer.apply(&self.config.fencing);
        let actions = self
            .controllers
            .apply_settings(controller_settings(&self.config), now);
        if self.acting {
            self.executor.submit(actions, now);
        }
        if self.config.dry_run != old.dry_run {
            self.switch_dry_run(lp);
        }
        self.refresh_status();
    }

    /// Dry-run fed the controllers objects as the writes would have left them, so neither mode
    /// may inherit the other's view: queued work is dropped and the caches are rebuilt from a
    /// fresh list of the cluster, after which the controllers decide again.
    fn switch_dry_run(&mut self, lp: &mut Lp) {
        let now = lp.now();
        let dry_run = self.config.dry_run;
        let abandoned = self.executor.abandon("dry_run changed");
        self.executor.set_dry_run(dry_run);
        self.acting = false;
        self.controllers = Controllers::new(controller_settings(&self.config), now);
        self.informers.stop(lp);
        self.informers = Informers::new(&self.shared.config, Jitter::seed_from_entropy());
        self.synced = [false; 3];
        self.informers.start(lp);
        warn!(
            "dry_run is now {dry_run}: {} queued writes dropped; relisting nodes, leases and pods \
             so decisions start again from the cluster's real state",
            abandoned.len()
        );
    }

    // ---- observability --------------------------------------------------------------------

    fn leader_snapshot(&self, now: Time) -> LeaderSnapshot {
        let stats = self.leader.stats(now);
        if !stats.enabled {
            return LeaderSnapshot::disabled(stats.identity);
        }
        LeaderSnapshot {
            enabled: true,
            identity: stats.identity,
            holder: stats.holder,
            is_leader: stats.is_leader,
            renew_age: stats.last_renew_age.filter(|_| stats.is_leader),
        }
    }

    fn client_snapshot(&self) -> ClientSnapshot {
        let stats = self.executor.stats();
        let requests = stats
            .requests
            .iter()
            .map(|((verb, code), count)| RequestCount {
                verb: http_method(verb).to_string(),
                code: if *code == 0 {
                    "no_answer".to_string()
                } else {
                    code.to_string()
                },
                count: *count,
            })
            .collect();
        let dry_run_actions = self
            .executor
            .dry_run_log()
            .counts()
            .map(|(kind, count)| ActionCount {
                kind: kind.as_str().to_string(),
                count,
            })
            .collect();
        ClientSnapshot {
            requests,
            throttle_wait: stats.throttle_wait,
            dry_run_actions,
        }
    }

    /// Everything the dump and `/metrics` show, at `now`.
    fn snapshot(&self, now: Time, event_loop: LoopSnapshot) -> DaemonSnapshot {
        let (controller, evictions) = self.controllers.dump(now);
        DaemonSnapshot {
            now,
            build: BuildInfo::current(self.clock.started_at(), self.clock.uptime()),
            config_path: self.config_path.clone(),
            config: self.config.clone(),
            status: self.status.clone(),
            leadership: self.leader_snapshot(now),
            reflectors: self
                .informers
                .reflector_stats()
                .into_iter()
                .map(|(w, mut stats)| {
                    // The reflector counts its last full state; the store holds the objects.
                    let store = self.controllers.store();
                    stats.objects = match w {
                        Watch::Nodes => store.node_count(),
                        Watch::Leases => store.lease_count(),
                        Watch::Pods => store.pod_count(),
                    };
                    ReflectorSnapshot::from_stats(w.resource(), &stats, now)
                })
                .collect(),
            controller,
            evictions,
            pod_deletion_duration: self
                .controllers
                .eviction()
                .map(|e| e.metrics.pod_deletion_duration.clone()),
            health_timings: self.health_timings.clone(),
            client: self.client_snapshot(),
            rss_bytes: read_rss_bytes(),
            store: StoreMemory::of(self.controllers.store()),
            event_loop,
            fencing: self
                .config
                .fencing
                .enabled
                .then(|| self.fencer.metrics.clone()),
        }
    }

    /// After the loop: give the lease up so a successor takes over in seconds, not a lease
    /// duration; close the metrics endpoint.
    fn shutdown(&mut self, lp: &mut Lp) {
        if self.fencer.running() > 0 {
            // Killing a power-off half way helps nobody; the next leader finds the attempt
            // record on the node and waits a full fencing.after before trying again.
            warn!(
                "{} fence command(s) still running: left to finish on their own",
                self.fencer.running()
            );
        }
        if let Err(e) = self.leader.release() {
            warn!("could not release the leader lease: {e}");
        }
        if let Some(mut server) = self.metrics.take() {
            server.close_all(lp);
        }
        if let Some(mut server) = self.control.take() {
            server.close_all(lp);
        }
    }
}

fn http_method(verb: &str) -> &'static str {
    match verb {
        "get" => "GET",
        "patch" => "PATCH",
        "delete" => "DELETE",
        "create" => "POST",
        _ => "OTHER",
    }
}

fn needs_restart(change: &ConfigChange) -> bool {
    // The eviction mode decides which machines exist; switching it live would orphan one's
    // state, so it waits for a restart like the connection settings.
    change.needs_restart() || change.key == "taint_based_eviction"
}

impl Endpoints for Daemon {
    fn metrics(&self, now: Time, event_loop: LoopSnapshot) -> String {
        crate::observe::metrics::render(&self.snapshot(now, event_loop))
    }

    fn readiness(&self) -> Readiness {
        Readiness::of(self.all_synced(), &self.leader_snapshot(self.clock.now()))
    }
}

/// The daemon lent to the control socket, with the loop's figures of the moment.
struct Asked<'a> {
    daemon: &'a Daemon,
    event_loop: LoopSnapshot,
}

impl ControlEndpoints for Asked<'_> {
    fn answer(&self, request: &str, now: Time) -> String {
        let d = self.daemon;
        let acting = if d.acting {
            Acting::Yes
        } else if !d.all_synced() {
            Acting::NotSynced
        } else {
            Acting::Follower
        };
        ask::answer(
            request,
            &d.controllers,
            &d.decision_log,
            acting,
            now,
            || d.snapshot(now, self.event_loop),
        )
    }
}

impl Handler<SourceKind, TimerKind> for Daemon {
    fn on_event(&mut self, lp: &mut Lp, token: Token, source: SourceKind, _event: &Event) {
        match source {
            SourceKind::Signal(signal) => self.on_signal(lp, signal),
            SourceKind::Watch(watch) => self.on_informer(lp, watch, Some(token)),
            SourceKind::Metrics => {
                if let Some(mut server) = self.metrics.take() {
                    server.on_event(lp, token, SourceKind::Metrics, self);
                    self.metrics = Some(server);
                }
            }
            SourceKind::Control => {
                if let Some(mut server) = self.control.take() {
                    let asked = Asked {
                        daemon: self,
                        event_loop: LoopSnapshot::of(lp),
                    };
                    server.on_event(lp, token, SourceKind::Control, &asked);
                    self.control = Some(server);
                }
            }
            SourceKind::FenceOutput => self.fencer.on_output(token),
        }
        self.rearm(lp);
    }

    fn on_timer(&mut self, lp: &mut Lp, timer: TimerKind, now: Time) {
        match timer {
            TimerKind::Watchdog => {
                trace!("watchdog ping");
                report("WATCHDOG=1", self.notifier.watchdog());
                if let Some(every) = self.watchdog_every {
                    lp.schedule(TimerKind::Watchdog, now + every);
                }
            }
            TimerKind::Informer(watch) => self.on_informer(lp, watch, None),
            TimerKind::Controller => self.on_controller_timer(now),
            TimerKind::Executor => self.on_executor_timer(lp),
            TimerKind::Leader => self.on_leader_timer(lp),
            TimerKind::Metrics => {
                if let Some(server) = &mut self.metrics {
                    server.on_timer(lp, now);
                }
            }
            TimerKind::Control => {
                if let Some(server) = &mut self.control {
                    server.on_timer(lp, now);
                }
            }
            // `rearm` below logs the summaries that came due.
            TimerKind::Decisions => {}
            TimerKind::Fence => {
                let ended = self.fencer.on_deadline(lp);
                self.feed_all(ended, now);
            }
        }
        self.rearm(lp);
    }
}

/// Runs the daemon until SIGTERM/SIGINT.
pub fn run(config_path: PathBuf, config: Config, log: LogControl) -> Result<(), DaemonError> {
    let clock = Clock::start();
    let connection =
        connect(&config.api, &config_path).map_err(|e| DaemonError::Config(e.to_string()))?;
    let mut clients = ApiClients::build(connection, &config.api, &clock)
        .map_err(|e| DaemonError::Config(e.to_string()))?;
    let mut lp: EventLoop<SourceKind, TimerKind> = EventLoop::new(clock)?;
    info!(
        "node-lifecycled {} starting (pid {}): config {}, API {} ({}), leader election {}, dry_run {}",
        env!("CARGO_PKG_VERSION"),
        std::process::id(),
        config_path.display(),
        clients.informers.base_url(),
        api_source(&config.api.source),
        if config.leader_election.enabled {
            format!(
                "{}/{}",
                config.leader_election.namespace, config.leader_election.name
            )
        } else {
            "off".to_string()
        },
        config.dry_run,
    );
    let watch_list = probe_watch_list(&mut clients.informers);
    let mut daemon = Daemon::new(lp.control(), config_path, config, log, clients, watch_list)?;
    info!(
        "sd_notify {}, watchdog {}",
        if daemon.notifier.is_enabled() {
            daemon.notifier.address()
        } else {
            "off"
        },
        daemon.watchdog_every.map_or_else(
            || "off".to_string(),
            |d| format!("every {}", crate::config::format_duration(d))
        ),
    );
    daemon.start(lp.control());
    daemon.refresh_status();
    info!("{READY_FOR_SIGNALS} (SIGTERM/SIGINT stop, SIGUSR1 state dump, SIGHUP reload)");
    lp.run(&mut daemon)?;
    daemon.shutdown(lp.control());
    info!("stopped");
    Ok(())
}

fn report(what: &str, result: io::Result<()>) {
    if let Err(e) = result {
        warn!("sd_notify {what}: {e}");
    }
}

fn join(changes: &[ConfigChange]) -> String {
    changes
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// The decoder keeps the node labels the pool selectors read, beside its fixed set.
fn decode_context(config: &Config) -> DecodeContext {
    let mut decode = DecodeContext::new();
    decode.keep_node_labels(selector_label_keys(&config.pools));
    decode
}
