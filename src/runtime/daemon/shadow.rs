//! Shadow mode's part of the daemon (`observe/shadow`): the comparer, what the incumbent
//! last wrote on each marked object, and the file that keeps what was classed across
//! restarts (written whole to a temporary file, then renamed over the old one).

use std::path::{Path, PathBuf};
use std::time::Duration;

use log::{info, warn};

use crate::config::Config;
use crate::controller::pools::pool_of;
use crate::controller::{Controllers, Decision, Input};
use crate::model::{ConditionStatus, Kind};
use crate::observe::ShadowFigures;
use crate::observe::decision_log::LogLine;
use crate::observe::shadow::{
    Comparer, IncumbentWatch, NodeFacts, Record, RuleProbe, ShadowHistory, mask, report,
};
use crate::time::Time;

/// The file is written at most this often (and at shutdown).
const SAVE_EVERY: Duration = Duration::from_secs(10);

pub(super) struct Shadow {
    comparer: Comparer,
    watch: IncumbentWatch,
    file: Option<PathBuf>,
    dirty: bool,
    saved_at: Option<Time>,
    /// Our decisions that went unmatched since the last warning check.
    unmatched_ours: bool,
    /// Whether a full state of nodes, and of pods, was seen.
    full_states: (bool, bool),
    /// The last write of the file failed (said once).
    save_failing: bool,
}

/// The controllers, asked about a node when a divergence needs its rule.
struct Probe<'a> {
    controllers: &'a Controllers,
    now: Time,
}

impl RuleProbe for Probe<'_> {
    fn facts(&self, node: &str) -> NodeFacts {
        let c = self.controllers;
        let settings = c.lifecycle().settings();
        let stored = c.store().node(node);
        NodeFacts {
            zone: None,
            autonomous: stored.is_some_and(|n| settings.is_autonomous(n)),
            pool_timing: stored.is_some_and(|n| pool_of(&settings.pools, n).is_some()),
            caches_held: c.held_by_caches(),
            paused: c.pause(self.now).is_some(),
            waits_for_suspects: c.lifecycle().zone_waits_for_suspects(node),
            brake_engaged: c.lifecycle().brakes().any_engaged(),
        }
    }
}

/// The history the file holds; a missing file is a new history, an unreadable one too,
/// with one warning line.
fn load(file: Option<&Path>, now: Time) -> ShadowHistory {
    let fresh = || ShadowHistory::new(now.as_unix_millis());
    let Some(path) = file else {
        return fresh();
    };
    match std::fs::read_to_string(path) {
        Ok(text) => ShadowHistory::from_json(&text).unwrap_or_else(|e| {
            warn!(
                "shadow: {} unreadable ({e}): starting an empty history",
                path.display()
            );
            fresh()
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => fresh(),
        Err(e) => {
            warn!("shadow: {}: {e}: starting an empty history", path.display());
            fresh()
        }
    }
}

/// Writes `text` to `path` whole or not at all.
fn write_atomically(path: &Path, text: &str) -> std::io::Result<()> {
    let tmp = path.with_extension("json.tmp");
    std::fs::write(&tmp, text)?;
    std::fs::rename(&tmp, path)
}

impl Shadow {
    pub(super) fn start(config: &Config, now: Time) -> Shadow {
        let file = config.shadow_file.clone();
        Shadow {
            comparer: Comparer::new(
                config.controller.node_monitor_period,
                config.controller.node_monitor_grace_period,
                now,
                load(file.as_deref(), now),
            ),
            watch: IncumbentWatch::default(),
            file,
            dirty: false,
            saved_at: None,
            unmatched_ours: false,
            full_states: (false, false),
            save_failing: false,
        }
    }

    pub(super) fn apply(&mut self, config: &Config) {
        self.comparer.set_timing(
            config.controller.node_monitor_period,
            config.controller.node_monitor_grace_period,
        );
        if config.shadow_file != self.file {
            self.file = config.shadow_file.clone();
            self.dirty = true;
        }
    }

    /// A full state of nodes or pods ended: once both did, a change of a mark is a write.
    pub(super) fn full_state_end(&mut self, kind: Kind) {
        match kind {
            Kind::Nodes => self.full_states.0 = true,
            Kind::Pods => self.full_states.1 = true,
            _ => {}
        }
        if self.full_states == (true, true) {
            self.watch.prime();
        }
    }

    /// A watched object, as the server has it (before dry-run's overlay). Its marks are
    /// followed always; the writes they show are compared only while we decide (`acting`): a
    /// follower decides nothing and would see every write of the incumbent as only theirs.
    pub(super) fn watched(
        &mut self,
        input: &Input,
        controllers: &Controllers,
        now: Time,
        acting: bool,
    ) -> Vec<LogLine> {
        let writes = match input {
            Input::NodeUpsert(node) => self.watch.node(node, now),
            Input::PodUpsert(pod) => self.watch.pod(pod, now),
            Input::NodeDeleted(name) => {
                self.watch.node_deleted(name);
                return Vec::new();
            }
            Input::PodDeleted(key) => {
                self.watch.pod_deleted(key);
                return Vec::new();
            }
            _ => return Vec::new(),
        };
        if writes.is_empty() || !acting {
            return Vec::new();
        }
        let probe = Probe { controllers, now };
        let records = self.comparer.theirs(writes, now, &probe);
        self.lines(records)
    }

    /// Pods the incumbent marked NotReady before its mark of their node arrived: our
    /// controllers saw that Ready=False unmasked; these are the pods as they were (Ready).
    pub(super) fn late_marks(&mut self, controllers: &Controllers) -> Vec<Input> {
        let pods = controllers.store().pods();
        self.watch
            .take_late_marks()
            .iter()
            .filter_map(|key| pods.get(key))
            .filter(|p| p.ready() == Some(ConditionStatus::False))
            .map(|p| {
                let mut pod = p.to_pod();
                pod.ready = Some(ConditionStatus::True);
                Input::PodUpsert(pod)
            })
            .collect()
    }

    /// The object as the controllers are to see it, and whether that differs from the server's.
    pub(super) fn mask(&self, input: Input, controllers: &Controllers) -> (Input, bool) {
        let store = controllers.store();
        match input {
            Input::NodeUpsert(raw) => {
                let ours = store.node(&raw.name);
                if !mask::node_needs_mask(&raw, ours) {
                    return (Input::NodeUpsert(raw), false);
                }
                let masked = mask::node(raw.clone(), ours);
                let changed = masked != raw;
                (Input::NodeUpsert(masked), changed)
            }
            Input::PodUpsert(raw) => {
                let ours = store
                    .pods()
                    .get(&raw.key)
                    .filter(|p| p.uid() == raw.uid)
                    .map(|p| mask::PodView {
                        ready: p.ready(),
                        deleting: p.deleting(),
                        disruption_target: p.disruption_target(),
                    });
                let marked = raw
                    .node_name
                    .as_deref()
                    .is_some_and(|n| self.watch.node_marked(n));
                let masked = mask::pod(raw.clone(), ours, marked);
                let changed = masked != raw;
                (Input::PodUpsert(masked), changed)
            }
            other => (other, false),
        }
    }

    pub(super) fn decided(
        &mut self,
        decisions: &[Decision],
        controllers: &Controllers,
        now: Time,
    ) -> Vec<LogLine> {
        let probe = Probe { controllers, now };
        let records = self.comparer.ours(decisions, now, &probe);
        self.lines(records)
    }

    /// Classes what waited too long, warns when nothing is compared, writes the file when due.
    pub(super) fn tick(&mut self, controllers: &Controllers, now: Time) -> Vec<LogLine> {
        let probe = Probe { controllers, now };
        let records = self.comparer.tick(now, &probe);
        let lines = self.lines(records);
        if self
            .comparer
            .nothing_to_compare(now, std::mem::take(&mut self.unmatched_ours))
        {
            warn!(
                "shadow: nothing to compare: our decisions go unmatched and no write of the \
                 incumbent was seen for an hour: is kube-controller-manager's node lifecycle \
                 controller running?"
            );
        }
        if self.dirty && self.saved_at.is_none_or(|at| now.since(at) >= SAVE_EVERY) {
            self.save(now);
        }
        lines
    }

    pub(super) fn save(&mut self, now: Time) {
        self.saved_at = Some(now);
        self.dirty = false;
        let Some(path) = &self.file else {
            return;
        };
        match write_atomically(path, &self.comparer.history.to_json()) {
            Err(e) if !self.save_failing => {
                self.save_failing = true;
                warn!(
                    "shadow: could not write {}: {e} (said once; the report is kept in memory)",
                    path.display()
                );
            }
            Err(_) => {}
            Ok(()) if self.save_failing => {
                self.save_failing = false;
                info!("shadow: {} written again", path.display());
            }
            Ok(()) => {}
        }
    }

    /// `shadow report …` over the control socket.
    pub(super) fn answer(&self, request: &str, now: Time) -> String {
        report::answer(
            request,
            Some((&self.comparer.history, self.comparer.pending())),
            now,
        )
    }

    /// The counts and what the part holds, for `/metrics`.
    pub(super) fn figures(&self) -> ShadowFigures {
        let (nodes, pods) = self.watch.len();
        ShadowFigures {
            totals: self.comparer.history.totals.clone(),
            pending: self.comparer.pending(),
            marked: nodes + pods,
            bytes: self.watch.bytes(),
        }
    }

    fn lines(&mut self, records: Vec<Record>) -> Vec<LogLine> {
        if !records.is_empty() {
            self.dirty = true;
        }
        records
            .iter()
            .inspect(|r| {
                if r.ours.is_some() && r.theirs.is_none() {
                    self.unmatched_ours = true;
                }
            })
            .filter(|r| r.is_divergence())
            .map(report::line)
            .collect()
    }
}
