//! The daemon: the composer of the shell, driven by the loop. `Daemon` holds the config, the
//! clock, the controllers and the executor, and four parts that own the rest of its state
//! behind their own methods: `Leadership` (`leadership.rs`), `Informers` (`informers.rs`),
//! `Observability` (`observability.rs`: status and metrics) and `Fences` (`fences.rs`). The
//! methods that coordinate parts are `Daemon`'s: feeding the controllers (here), acting or not
//! (`acting.rs`), the informers' deltas (`feeding.rs`), the loop's handler (`dispatch.rs`),
//! signals and reload (`reload.rs`), what it tells (`status.rs`).
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

mod acting;
mod dispatch;
mod feeding;
mod fences;
mod informers;
mod kinds;
mod leadership;
mod observability;
mod reload;
mod shadow;
mod status;

use std::io;
use std::path::PathBuf;
use std::time::Duration;

use log::{info, warn};
use mio::Interest;

use fences::Fences;
use informers::{InformerShared, Informers};
use leadership::{Leadership, NOT_RENEWED};
use observability::Observability;

use super::Clock;
use super::api::{ApiClients, connect};
use super::control_socket::{ControlLimits, ControlServer};
use super::event_loop::{EventLoop, LoopControl};
use super::executor::Executor;
use super::informer::probe_watch_list;
use super::metrics_server::{Limits, MetricsServer};
use super::sd_notify::{Notifier, watchdog_interval_from_env};
use super::settings::{controller_settings, executor_settings, informer_config};
use super::signals::Signals;

use crate::config::Config;
use crate::controller::pools::{node_label_keys, selector_label_keys};
use crate::controller::{Action, Controllers, Input};
use crate::kube::decode::DecodeContext;
use crate::leader::{Jitter, LeaderElection};
use crate::logging::{self, LogControl};
use crate::time::Time;
pub(crate) use kinds::{SourceKind, TimerKind};

type Lp = LoopControl<SourceKind, TimerKind>;

/// Logged once the loop runs; tests and operators wait for it before sending signals.
pub(crate) const READY_FOR_SIGNALS: &str = "ready for signals";

/// One executor turn stops starting calls after this long (one call may then still take up to
/// the request timeout): the loop's other timers and watches run between turns.
const EXECUTOR_TURN_BUDGET: Duration = Duration::from_millis(20);
/// And after this many calls, whatever their speed.
const EXECUTOR_TURN_CALLS: usize = 64;
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

/// The shell: the config, the clock, the controllers and the executor, and the parts it
/// composes, each owning its state behind its own methods.
pub(crate) struct Daemon {
    config_path: PathBuf,
    config: Config,
    log: LogControl,
    signals: Signals,
    clock: Clock,
    controllers: Controllers,
    executor: Executor,
    /// The leader elector and whether we act (`leadership.rs`).
    leadership: Leadership,
    /// The three informers and their sync (`informers.rs`).
    informers: Informers,
    /// systemd, metrics, the control socket, the decision log (`observability.rs`).
    observability: Observability,
    /// Fence commands and the fence agent's status probe (`fences.rs`).
    fences: Fences,
    /// Shadow mode's comparer and its file (`shadow.rs`); `None` unless `shadow = true`.
    shadow: Option<shadow::Shadow>,
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
        let shared = InformerShared::new(
            clients.informers,
            clients.connection,
            clients.tokens,
            decode_context(&config),
            informer_config,
        );
        let informers = Informers::new(shared, seed, now, watch_list.is_none());
        let leader_clock = clock.clone();
        let leader = LeaderElection::from_config(
            &config.leader_election,
            clients.leader,
            Box::new(move || leader_clock.now()),
        );
        let mut executor = Executor::new(clients.executor, executor_settings(&config, seed), now);
        executor.set_shadow_mode(config.shadow);
        Ok(Daemon {
            controllers: Controllers::new(controller_settings(&config), now),
            executor,
            fences: Fences::new(&config.fencing),
            shadow: config.shadow.then(|| shadow::Shadow::start(&config, now)),
            config_path,
            config,
            log,
            signals,
            clock,
            leadership: Leadership::new(leader),
            informers,
            observability: Observability::new(notifier, watchdog_every, metrics, control),
        })
    }

    /// Arms the first timers: informers list at once, the leader looks at its lease at once.
    fn start(&mut self, lp: &mut Lp) {
        let now = lp.now();
        if self.observability.watchdog_every().is_some() {
            lp.schedule(TimerKind::Watchdog, now);
        }
        self.informers.start(lp);
        // The loop's before-sleep hook arms the rest before the first wait.
    }

    /// One input to the controllers; what they decide goes to the executor while we act
    /// (fence commands wait for `start_fences`, which has the loop to register their pipes).
    fn feed(&mut self, input: Input, now: Time) {
        let mut actions = self.controllers.handle(input, now);
        if actions.is_empty() {
            return;
        }
        if self.leadership.acting() {
            actions.retain(|action| match action {
                Action::RunFenceCommand { id, command } => {
                    self.fences.queue(*id, command.clone());
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
        self.observability
            .observe_all_nodes_health(started.elapsed());
        if let Some(shadow) = self.shadow.as_mut() {
            let lines = shadow.tick(&self.controllers, now);
            log_lines(lines);
        }
        self.maybe_refresh_status(now);
    }

    /// One executor turn: calls while they are due, within the turn's budget, each answer fed
    /// back to the controllers at once.
    fn on_executor_timer(&mut self, lp: &mut Lp) {
        let turn_started = lp.now();
        for _ in 0..EXECUTOR_TURN_CALLS {
            let now = lp.now();
            if !self.leadership.acting() {
                return;
            }
            if !self.leadership.is_leader(now) {
                self.stop_acting(now, NOT_RENEWED);
                return;
            }
            if now.since(turn_started) >= EXECUTOR_TURN_BUDGET
                || self.executor.next_wakeup().is_none_or(|at| at > now)
            {
                return;
            }
            let inputs = self.executor.run_ready(now, 1, self.informers.decode_mut());
            for took in self.executor.take_node_health_writes() {
                self.observability.observe_node_health(took);
            }
            let now = lp.now();
            for input in inputs {
                let input = self.mask_read_back(input);
                self.feed(input, now);
            }
        }
    }

    /// Logs what the controllers decided in this loop turn (and summaries of folded lines).
    fn log_decisions(&mut self, now: Time) {
        let decisions = self.controllers.take_decisions();
        if let Some(shadow) = self.shadow.as_mut().filter(|_| !decisions.is_empty()) {
            let lines = shadow.decided(&decisions, &self.controllers, now);
            log_lines(lines);
        }
        let lines = if decisions.is_empty() {
            self.observability.flush_decisions(now)
        } else {
            let dry_run = self.executor.is_dry_run();
            self.observability.record_decisions(now, decisions, dry_run)
        };
        log_lines(lines);
    }

    /// Starts the fence commands the controllers asked for; an answer known at once (dry-run,
    /// a program that cannot start) goes straight back to them.
    fn start_fences(&mut self, lp: &mut Lp) {
        while let Some((id, command)) = self.fences.next_to_start() {
            let dry_run = self.executor.is_dry_run();
            if let Some(answer) = self.fences.start(lp, id, command, dry_run) {
                self.feed(answer, lp.now());
            }
        }
    }

    /// Starts the fence agent's status command against the next node when it is due.
    fn probe_fence_agent(&mut self, lp: &mut Lp) {
        self.fences
            .probe_agent(lp, &self.config.fencing, self.controllers.store());
    }

    fn feed_all(&mut self, inputs: Vec<Input>, now: Time) {
        for input in inputs {
            if !self.fences.status_answered(&input) {
                self.feed(input, now);
            }
        }
    }

    // ---- signals --------------------------------------------------------------------------

    /// After the loop: give the lease up so a successor takes over in seconds, not a lease
    /// duration; close the metrics endpoint.
    fn shutdown(&mut self, lp: &mut Lp) {
        if self.fences.running() > 0 {
            // Killing a power-off half way helps nobody; the next leader finds the attempt
            // record on the node and waits a full fencing.after before trying again.
            warn!(
                "{} fence command(s) still running: left to finish on their own",
                self.fences.running()
            );
        }
        if let Some(shadow) = self.shadow.as_mut() {
            shadow.save(lp.now());
        }
        if let Err(e) = self.leadership.release() {
            warn!("could not release the leader lease: {e}");
        }
        self.observability.close_all(lp);
    }
}

/// Logs decision lines with their journal fields.
fn log_lines(lines: Vec<crate::observe::decision_log::LogLine>) {
    for line in lines {
        logging::log_with_fields(line.level, &line.message, &line.fields());
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
        "node-lifecycled {} starting (pid {}): config {}, API {} ({}), leader election {}, dry_run {}, shadow {}",
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
        config.shadow,
    );
    let watch_list = probe_watch_list(&mut clients.informers);
    let mut daemon = Daemon::new(lp.control(), config_path, config, log, clients, watch_list)?;
    info!(
        "sd_notify {}, watchdog {}",
        daemon.observability.notify_address(),
        daemon.observability.watchdog_every().map_or_else(
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

/// The decoder keeps the node labels the pool selectors read, beside its fixed set.
fn decode_context(config: &Config) -> DecodeContext {
    let mut decode = DecodeContext::new();
    decode.keep_node_labels(kept_label_keys(config));
    decode.read_writers(config.shadow);
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
