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

mod dispatch;
mod fence_status;
mod informers;
mod kinds;
mod leadership;
mod reload;
mod status;

use informers::*;
use status::*;

use std::io;
use std::path::PathBuf;
use std::time::Duration;

use log::{debug, error, info, trace, warn};
use mio::event::Event;
use mio::{Interest, Token};

use super::Clock;
use super::api::{ApiClients, connect};
use super::control_socket::{ControlEndpoints, ControlLimits, ControlServer};
use super::event_loop::{EventLoop, Handler, LoopControl};
use super::executor::Executor;
use super::fencing::FenceRunner;
use super::informer::{Informer, InformerConfig, InformerIo, probe_watch_list};
use super::metrics_server::{Endpoints, Limits, MetricsServer, Readiness};
use super::sd_notify::{Notifier, watchdog_interval_from_env};
use super::settings::{controller_settings, executor_settings, informer_config, watch_end_leads};
use super::signals::{Signal, Signals};
use super::state_dump::read_rss_bytes;

use crate::config::{Config, ConfigChange};
use crate::controller::cache_currency::cache_settle;
use crate::controller::pools::{node_label_keys, selector_label_keys};
use crate::controller::{Action, Controllers, Input};
use crate::kube::decode::DecodeContext;
use crate::kube::reflector::{Delta, EndTarget, ReflectorStats, Watched};
use crate::kube::{ApiClient, Connection, TokenSource};
use crate::leader::{Jitter, LeaderElection, Transition};
use crate::logging::{self, LogControl};
use crate::model::{Kind, Lease, Node, Pod};
use crate::observe::ask;
use crate::observe::decision_log::DecisionLog;
use crate::observe::explain::Acting;
use crate::observe::{
    ActionCount, BuildInfo, ClientSnapshot, DaemonSnapshot, HealthTimings, LeaderSnapshot,
    LoopSnapshot, ReflectorSnapshot, RequestCount, StoreMemory,
};
use crate::time::Time;
pub(crate) use kinds::{SourceKind, TimerKind, Watch};

type Lp = LoopControl<SourceKind, TimerKind>;

/// Logged once the loop runs; tests and operators wait for it before sending signals.
pub(crate) const READY_FOR_SIGNALS: &str = "ready for signals";

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

pub(crate) struct Daemon {
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
    /// What the controllers were last told by `Input::InformersWatching` (they start out
    /// treating their caches as current).
    informers_watching: bool,
    /// Which informers stopped streaming since all last did (their answers' round trips
    /// measure the settle).
    informers_stale: [bool; 3],
    controllers: Controllers,
    executor: Executor,
    /// Fence commands: started for the controllers, answered as inputs.
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
    /// The fleet pause annotation as last read from the leader Lease (`leadership.rs`).
    pause_seen: Option<String>,
    /// The lease was lost because it could not be renewed (an API server outage): the next
    /// takeover starts a `disruption_cooldown` (`leadership.rs`).
    lost_to_outage: bool,
    /// `status_command` runs (`fence_status.rs`).
    fence_status: fence_status::StatusProbe,
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
        let informer_config = informer_config(
            &config.api,
            config.controller.node_monitor_grace_period,
            config.controller.node_monitor_period,
            watch_list == Some(true),
        );
        let informers = Informers::new(&informer_config, seed, now);
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
            informers_watching: true,
            informers_stale: [false; 3],
            leader,
            acting: false,
            ready_sent: false,
            metrics,
            health_timings: HealthTimings::default(),
            status_refreshed: Time::ZERO,
            watch_list_unknown: watch_list.is_none(),
            decision_log: DecisionLog::new(),
            control,
            pause_seen: None,
            lost_to_outage: false,
            fence_status: Default::default(),
        })
    }

    /// Arms the first timers: informers list at once, the leader looks at its lease at once.
    fn start(&mut self, lp: &mut Lp) {
        let now = lp.now();
        if self.watchdog_every.is_some() {
            lp.schedule(TimerKind::Watchdog, now);
        }
        self.informers.start(lp);
        // The loop's before-sleep hook arms the rest before the first wait.
    }

    fn all_synced(&self) -> bool {
        self.synced.iter().all(|s| *s)
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

    fn on_controller_timer(&mut self, now: Time) {
        let started = std::time::Instant::now();
        self.feed(Input::Tick, now);
        self.health_timings
            .update_all_nodes_health
            .observe(started.elapsed());
        self.maybe_refresh_status(now);
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
            if !self.status_answered(&input) {
                self.feed(input, now);
            }
        }
    }

    // ---- signals --------------------------------------------------------------------------

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
        config.api.source.describe(),
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

/// The decoder keeps the node labels the pool selectors read, beside its fixed set.
fn decode_context(config: &Config) -> DecodeContext {
    let mut decode = DecodeContext::new();
    decode.keep_node_labels(kept_label_keys(config));
    decode
}

/// Node label keys kept beside the built-in ones: pool selectors', and `match_labels`' when
/// the status probe picks nodes by them from the store.
pub(super) fn kept_label_keys(config: &Config) -> Vec<String> {
    // The pools' selectors, the disruption domains' labels (global and per pool), and the
    // fencing selector when the fence agents are probed.
    let mut keys = node_label_keys(
        &selector_label_keys(&config.controller.pools),
        &config.controller.pools,
        &config.controller.disruption_domain,
    );
    let f = &config.fencing;
    if !f.status_command.is_empty() && !f.status_interval.is_zero() {
        keys.extend(f.match_labels.iter().map(|(k, _)| k.clone()));
    }
    keys
}
