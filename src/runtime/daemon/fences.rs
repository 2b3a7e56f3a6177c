//! Fences: owns the fence runner (the commands running and their pipes), the fence commands the
//! controllers asked for that wait to start, and the status probe of the fence agent.
//!
//! The fence agent's credentials checked before an outage: with `[fencing] status_command` and
//! `status_interval`, every interval the status command runs against one
//! node (each in turn, among those `match_labels` selects; their labels are kept by the decoder
//! for it), as a child of the fence runner (its own ids, never fed to the controllers), and
//! `node_lifecycled_fence_agent_ok{node}` says how it answered. A failure warns; it never
//! blocks a fence. Leader or follower alike: every instance may have to fence one day.

use std::collections::BTreeMap;

use log::warn;
use mio::Token;

use super::Lp;
use super::kinds::SourceKind;
use crate::config::FencingConfig;
use crate::controller::fencing::{FenceCommand, FenceOutcome, FenceStep};
use crate::controller::{ActionId, Input};
use crate::model::{ClusterStore, Node};
use crate::observe::FencingMetrics;
use crate::runtime::fencing::FenceRunner;
use crate::time::Time;

/// Status runs' ids, apart from the controllers' (fencing's count up from `1 << 62`).
const STATUS_IDS: u64 = 1 << 63;

pub(super) struct Fences {
    /// Fence commands: started for the controllers, answered as inputs.
    runner: FenceRunner,
    /// Asked for by the controllers; started by `Daemon::start_fences`, which has the loop.
    to_start: Vec<(ActionId, FenceCommand)>,
    /// `status_command` runs.
    probe: StatusProbe,
}

#[derive(Default)]
struct StatusProbe {
    next_at: Option<Time>,
    last: Option<String>,
    running: Option<(ActionId, String)>,
    seq: u64,
    /// The last answer per node: true for exit 0.
    ok: BTreeMap<String, bool>,
}

impl Fences {
    pub(super) fn new(config: &FencingConfig) -> Fences {
        Fences {
            runner: FenceRunner::new(config),
            to_start: Vec::new(),
            probe: StatusProbe::default(),
        }
    }

    /// Config reload: the next command runs with these.
    pub(super) fn apply(&mut self, config: &FencingConfig) {
        self.runner.apply(config);
    }

    /// A fence command the controllers asked for, to start before the loop sleeps.
    pub(super) fn queue(&mut self, id: ActionId, command: FenceCommand) {
        self.to_start.push((id, command));
    }

    /// The next fence command waiting to start (the last asked for first).
    pub(super) fn next_to_start(&mut self) -> Option<(ActionId, FenceCommand)> {
        self.to_start.pop()
    }

    /// Forgets the commands waiting to start (we stopped acting).
    pub(super) fn clear_queued(&mut self) {
        self.to_start.clear();
    }

    /// Starts a fence command; an answer known at once (dry-run, a program that cannot
    /// start) is returned.
    pub(super) fn start(
        &mut self,
        lp: &mut Lp,
        id: ActionId,
        command: FenceCommand,
        dry_run: bool,
    ) -> Option<Input> {
        self.runner
            .start(lp, SourceKind::FenceOutput, id, command, dry_run)
    }

    /// How many fence commands are running.
    pub(super) fn running(&self) -> usize {
        self.runner.running()
    }

    pub(super) fn on_output(&mut self, token: Token) {
        self.runner.on_output(token);
    }

    /// Commands past their timeout: their ends.
    pub(super) fn on_deadline(&mut self, lp: &mut Lp) -> Vec<Input> {
        self.runner.on_deadline(lp)
    }

    /// Commands that exited: their ends.
    pub(super) fn reap(&mut self, lp: &mut Lp) -> Vec<Input> {
        self.runner.reap(lp)
    }

    /// The Fence timer: the earliest command timeout or status run.
    pub(super) fn next_deadline(&self, config: &FencingConfig) -> Option<Time> {
        [self.runner.next_deadline(), self.status_due(config)]
            .into_iter()
            .flatten()
            .min()
    }

    pub(super) fn metrics(&self) -> FencingMetrics {
        self.runner.metrics.clone()
    }

    /// The status command's last answer per node.
    pub(super) fn agent_ok(&self) -> BTreeMap<String, bool> {
        self.probe.ok.clone()
    }

    fn probing(config: &FencingConfig) -> bool {
        !config.status_command.is_empty() && !config.status_interval.is_zero()
    }

    /// When the next status run is due.
    fn status_due(&self, config: &FencingConfig) -> Option<Time> {
        if !Fences::probing(config) || self.probe.running.is_some() {
            return None;
        }
        Some(self.probe.next_at.unwrap_or(Time::ZERO))
    }

    /// Starts the status command against the next node of `store` when it is due.
    pub(super) fn probe_agent(&mut self, lp: &mut Lp, f: &FencingConfig, store: &ClusterStore) {
        let now = lp.now();
        if self.status_due(f).is_none_or(|at| now < at) {
            return;
        }
        self.probe.next_at = Some(now.saturating_add(f.status_interval));
        let selects = |n: &Node| {
            f.match_labels
                .iter()
                .all(|(k, v)| n.label(k).is_some_and(|l| **l == **v))
        };
        let mut names: Vec<&Node> = store.nodes().filter(|n| selects(n)).collect();
        names.sort_by(|a, b| a.name.cmp(&b.name));
        let next = names
            .iter()
            .find(|n| self.probe.last.as_deref().is_none_or(|l| &*n.name > l))
            .or(names.first());
        let Some(node) = next else {
            return;
        };
        let command = FenceCommand {
            step: FenceStep::Status,
            node: node.name.clone(),
            uid: node.uid.clone(),
            addresses: Vec::new(),
            labels: node
                .labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        };
        let name = node.name.to_string();
        self.probe.seq += 1;
        let id = ActionId(STATUS_IDS + self.probe.seq);
        self.probe.last = Some(name.clone());
        self.probe.running = Some((id, name));
        if let Some(answer) = self
            .runner
            .start(lp, SourceKind::FenceOutput, id, command, false)
        {
            self.status_answered(&answer);
        }
    }

    /// A status run's end (true), or an input for the controllers (false).
    pub(super) fn status_answered(&mut self, input: &Input) -> bool {
        let Input::FenceExited { id, outcome, .. } = input else {
            return false;
        };
        if id.0 <= STATUS_IDS {
            return false;
        }
        let Some((running, node)) = self.probe.running.take() else {
            return true;
        };
        if running != *id {
            self.probe.running = Some((running, node));
            return true;
        }
        let ok = *outcome == FenceOutcome::Exited(0);
        if !ok {
            warn!(
                "fencing: status command for node={node} failed: {outcome}; the fence agent may not \
                 reach or power off this node when it must (fencing is not blocked)"
            );
        }
        self.probe.ok.insert(node, ok);
        true
    }
}
