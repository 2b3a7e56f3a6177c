//! Signals: SIGHUP reloads the config (what needs a restart is said, not applied), dry-run
//! switching, SIGUSR1's dump, SIGTERM. Owns no state: the config, its path, the log control and
//! the signal pipes are `Daemon`'s (`mod.rs`).

use log::{debug, error, info, warn};

use super::{Daemon, Lp, kept_label_keys};
use crate::config::{Config, ConfigChange};
use crate::controller::Controllers;
use crate::runtime::settings::controller_settings;
use crate::runtime::signals::Signal;

pub(super) fn needs_restart(change: &ConfigChange) -> bool {
    // The eviction mode decides which machines exist; switching it live would orphan one's
    // state, so it waits for a restart like the connection settings.
    change.needs_restart() || change.key == "taint_based_eviction"
}

pub(super) fn join(changes: &[ConfigChange]) -> String {
    changes
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

impl Daemon {
    pub(super) fn on_signal(&mut self, lp: &mut Lp, signal: Signal) {
        if self.signals.drain(signal) == 0 {
            return;
        }
        debug!("{} received", signal.name());
        match signal {
            Signal::Terminate | Signal::Interrupt => {
                info!("{}: stopping", signal.name());
                self.observability.stopping();
                lp.stop();
            }
            Signal::DumpState => {
                self.refresh_status();
                let snapshot = self.snapshot(lp.now(), lp.snapshot());
                for line in snapshot.dump_lines() {
                    info!("{line}");
                }
            }
            Signal::Reload => self.reload(lp),
            Signal::ChildExited => {
                let ended = self.fences.reap(lp);
                self.feed_all(ended, lp.now());
            }
        }
    }

    /// SIGHUP: a valid file replaces what can change live; anything else keeps running as is.
    pub(super) fn reload(&mut self, lp: &mut Lp) {
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
        self.config.controller.taint_based_eviction = old.controller.taint_based_eviction;
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
        self.informers
            .keep_node_labels(kept_label_keys(&self.config));
        self.fences.apply(&self.config.fencing);
        let actions = self
            .controllers
            .apply_settings(controller_settings(&self.config), now);
        if self.leadership.acting() {
            self.executor.submit(actions, now);
        }
        if self.config.writes_nothing() != old.writes_nothing() {
            self.switch_dry_run(lp);
        }
        self.switch_shadow(&old, lp);
        self.refresh_status();
    }

    /// Shadow mode on or off (a reload): its part is built from the file or saved and
    /// dropped; a change of its settings is applied.
    fn switch_shadow(&mut self, old: &Config, lp: &mut Lp) {
        let now = lp.now();
        self.executor.set_shadow_mode(self.config.shadow);
        self.informers.decode_mut().read_writers(self.config.shadow);
        match (old.shadow, self.config.shadow, self.shadow.as_mut()) {
            (_, false, Some(shadow)) => {
                shadow.save(now);
                self.shadow = None;
                warn!("shadow mode is off");
            }
            (_, true, None) => {
                // It reports from the next full state of nodes and pods: the relist that
                // follows the switch to dry-run.
                self.shadow = Some(super::shadow::Shadow::start(&self.config, now));
                if old.writes_nothing() {
                    // Already in dry-run: no relist follows the switch, ask for one.
                    self.informers.relist(lp, now);
                    self.report_informers_watching(now);
                    self.informers.start(lp);
                }
                warn!(
                    "shadow mode is on: nothing is written, decisions are compared with the incumbent's writes"
                );
            }
            (_, true, Some(shadow)) => shadow.apply(&self.config),
            _ => {}
        }
    }

    /// Dry-run fed the controllers objects as the writes would have left them, so neither mode
    /// may inherit the other's view: queued work is dropped and the caches are rebuilt from a
    /// fresh list of the cluster, after which the controllers decide again.
    pub(super) fn switch_dry_run(&mut self, lp: &mut Lp) {
        let now = lp.now();
        let dry_run = self.config.writes_nothing();
        let abandoned = self.executor.abandon("dry_run changed");
        self.executor.set_dry_run(dry_run);
        self.leadership.pause_acting();
        self.controllers = Controllers::new(controller_settings(&self.config), now);
        self.informers.relist(lp, now);
        // New controllers count their caches as current until told: tell them at once.
        self.report_informers_watching(now);
        self.informers.start(lp);
        warn!(
            "dry_run is now {dry_run}{}: {} queued writes dropped; relisting nodes, leases and \
             pods so decisions start again from the cluster's real state",
            if self.config.shadow { " (shadow)" } else { "" },
            abandoned.len()
        );
    }
}
