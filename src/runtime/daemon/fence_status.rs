//! The fence agent's credentials checked before an outage: with `[fencing] status_command` and
//! `status_interval`, every interval the status command runs against one
//! node (each in turn, among those `match_labels` selects; their labels are kept by the decoder
//! for it), as a child of the fence runner (its own ids, never fed to the controllers), and
//! `node_lifecycled_fence_agent_ok{node}` says how it answered. A failure warns; it never
//! blocks a fence. Leader or follower alike: every instance may have to fence one day.

use std::collections::BTreeMap;

use crate::controller::ActionId;
use crate::controller::fencing::{FenceCommand, FenceOutcome, FenceStep};

use super::*;

/// Status runs' ids, apart from the controllers' (fencing's count up from `1 << 62`).
const STATUS_IDS: u64 = 1 << 63;

#[derive(Default)]
pub(super) struct StatusProbe {
    next_at: Option<Time>,
    last: Option<String>,
    running: Option<(ActionId, String)>,
    seq: u64,
    /// The last answer per node: true for exit 0.
    pub(super) ok: BTreeMap<String, bool>,
}

impl Daemon {
    fn probing(&self) -> bool {
        let f = &self.config.fencing;
        !f.status_command.is_empty() && !f.status_interval.is_zero()
    }

    /// When the next status run is due (for the Fence timer).
    pub(super) fn status_due(&self) -> Option<Time> {
        if !self.probing() || self.fence_status.running.is_some() {
            return None;
        }
        Some(self.fence_status.next_at.unwrap_or(Time::ZERO))
    }

    /// Starts the status command against the next node when it is due.
    pub(super) fn probe_fence_agent(&mut self, lp: &mut Lp) {
        let now = lp.now();
        if self.status_due().is_none_or(|at| now < at) {
            return;
        }
        let f = &self.config.fencing;
        self.fence_status.next_at = Some(now.saturating_add(f.status_interval));
        let selects = |n: &crate::model::Node| {
            f.match_labels
                .iter()
                .all(|(k, v)| n.label(k).is_some_and(|l| **l == **v))
        };
        let store = self.controllers.store();
        let mut names: Vec<&crate::model::Node> = store.nodes().filter(|n| selects(n)).collect();
        names.sort_by(|a, b| a.name.cmp(&b.name));
        let next = names
            .iter()
            .find(|n| {
                self.fence_status
                    .last
                    .as_deref()
                    .is_none_or(|l| &*n.name > l)
            })
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
        self.fence_status.seq += 1;
        let id = ActionId(STATUS_IDS + self.fence_status.seq);
        self.fence_status.last = Some(name.clone());
        self.fence_status.running = Some((id, name));
        if let Some(answer) = self
            .fencer
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
        let Some((running, node)) = self.fence_status.running.take() else {
            return true;
        };
        if running != *id {
            self.fence_status.running = Some((running, node));
            return true;
        }
        let ok = *outcome == FenceOutcome::Exited(0);
        if !ok {
            warn!(
                "fencing: status command for node={node} failed: {outcome}; the fence agent may not \
                 reach or power off this node when it must (fencing is not blocked)"
            );
        }
        self.fence_status.ok.insert(node, ok);
        true
    }
}
