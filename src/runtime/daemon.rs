//! The daemon: one struct that owns every part of the shell and is driven by the loop.
//!
//! Today it serves signals and systemd and waits; the API client, the controller and its
//! executor join as fields of `Daemon`, their sockets as `SourceKind`s and their deadlines as
//! `TimerKind`s, dispatched from `on_event` / `on_timer` below.

use std::io;
use std::path::PathBuf;
use std::time::Duration;

use log::{debug, error, info, trace, warn};
use mio::Interest;
use mio::event::Event;

use super::Clock;
use super::event_loop::{EventLoop, Handler, LoopControl};
use super::sd_notify::{Notifier, watchdog_interval_from_env};
use super::signals::{Signal, Signals};
use super::state_dump::{StateDump, read_rss_bytes};
use crate::config::{Config, ConfigChange, DumpFormat};
use crate::logging::LogControl;
use crate::time::Time;

/// What a registered loop source is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SourceKind {
    Signal(Signal),
}

/// What a loop timer is for.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum TimerKind {
    /// Send `WATCHDOG=1`: armed only while the loop turns, so a stuck loop goes silent.
    Watchdog,
}

/// Logged once the loop runs; tests and operators wait for it before sending signals.
pub const READY_FOR_SIGNALS: &str = "ready for signals";

pub struct Daemon {
    config_path: PathBuf,
    config: Config,
    log: LogControl,
    notifier: Notifier,
    signals: Signals,
    watchdog_every: Option<Duration>,
    status: String,
}

impl Daemon {
    /// Installs signal handlers, registers them with the loop and arms the watchdog.
    pub fn new(
        lp: &mut LoopControl<SourceKind, TimerKind>,
        config_path: PathBuf,
        config: Config,
        log: LogControl,
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
        if watchdog_every.is_some() {
            lp.schedule(TimerKind::Watchdog, lp.now());
        }
        Ok(Daemon {
            config_path,
            config,
            log,
            notifier,
            signals,
            watchdog_every,
            status: String::new(),
        })
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    /// `READY=1`: to be sent once the caches are synced (the API client's issue wires it).
    pub fn announce_ready(&self) {
        report("READY=1", self.notifier.ready());
    }

    /// What the daemon is doing, for `systemctl status` and the state dump.
    pub fn set_status(&mut self, status: &str) {
        status.clone_into(&mut self.status);
        report("STATUS", self.notifier.status(status));
    }

    fn on_signal(&mut self, lp: &mut LoopControl<SourceKind, TimerKind>, signal: Signal) {
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
            Signal::DumpState => self.dump_state(lp),
            Signal::Reload => self.reload(),
        }
    }

    fn dump_state(&self, lp: &LoopControl<SourceKind, TimerKind>) {
        let now = lp.now();
        let dump = StateDump {
            version: env!("CARGO_PKG_VERSION"),
            pid: std::process::id(),
            started_at: lp.clock().started_at(),
            uptime: lp.clock().uptime(),
            rss_bytes: read_rss_bytes(),
            loop_stats: lp.stats(),
            sources: lp.sources(),
            timers_pending: lp.timers().len(),
            next_timer_in: lp.timers().next_deadline().map(|at| at.since(now)),
            config_path: self.config_path.clone(),
            config: self.config.clone(),
            status: self.status.clone(),
        };
        match self.config.dump_format {
            DumpFormat::Text => dump.to_text_lines().iter().for_each(|l| info!("{l}")),
            DumpFormat::Json => info!("{}", dump.to_json()),
        }
    }

    /// SIGHUP: a valid file replaces what can change live; anything else keeps running as is.
    fn reload(&mut self) {
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
            changes.into_iter().partition(ConfigChange::needs_restart);
        let old_level = self.config.log_level;
        self.config = Config {
            // Read once at start-up: connections, identity and listener are built from them.
            api: self.config.api.clone(),
            leader_election: self.config.leader_election.clone(),
            metrics_address: self.config.metrics_address,
            ..new
        };
        if self.config.log_level != old_level && !self.log.set_level(self.config.log_level) {
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
    }
}

impl Handler<SourceKind, TimerKind> for Daemon {
    fn on_event(
        &mut self,
        lp: &mut LoopControl<SourceKind, TimerKind>,
        _token: mio::Token,
        source: SourceKind,
        _event: &Event,
    ) {
        match source {
            SourceKind::Signal(signal) => self.on_signal(lp, signal),
        }
    }

    fn on_timer(
        &mut self,
        lp: &mut LoopControl<SourceKind, TimerKind>,
        timer: TimerKind,
        now: Time,
    ) {
        match timer {
            TimerKind::Watchdog => {
                trace!("watchdog ping");
                report("WATCHDOG=1", self.notifier.watchdog());
                if let Some(every) = self.watchdog_every {
                    lp.schedule(TimerKind::Watchdog, now + every);
                }
            }
        }
    }
}

/// Runs the daemon until SIGTERM/SIGINT. An error means the loop itself could not run.
pub fn run(config_path: PathBuf, config: Config, log: LogControl) -> io::Result<()> {
    let mut lp: EventLoop<SourceKind, TimerKind> = EventLoop::new(Clock::start())?;
    let mut daemon = Daemon::new(lp.control(), config_path, config, log)?;
    let c = daemon.config();
    info!(
        "node-lifecycled {} starting (pid {}): config {}, dry_run {}, sd_notify {}, watchdog {}",
        env!("CARGO_PKG_VERSION"),
        std::process::id(),
        daemon.config_path.display(),
        c.dry_run,
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
    daemon.set_status("waiting: API client not wired yet");
    info!(
        "waiting: API client not wired yet; {READY_FOR_SIGNALS} (SIGTERM/SIGINT stop, SIGUSR1 state dump, SIGHUP reload)"
    );
    lp.run(&mut daemon)?;
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
