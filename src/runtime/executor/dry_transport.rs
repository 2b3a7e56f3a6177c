//! Dry-run's stages: read what a write would change, apply it to a shadow copy, answer as the
//! API server would have, and write nothing.

use super::*;

/// The dry-run transport: what would have been written (counts and latest lines), and the
/// objects as the writes would have left them (see [`dry_run`]).
#[derive(Default)]
pub(crate) struct DryRun {
    log: DryRunLog,
    shadows: Shadows,
}

impl DryRun {
    pub(crate) fn log(&self) -> &DryRunLog {
        &self.log
    }

    /// Objects dry-run currently holds a changed copy of.
    pub(crate) fn shadows(&self) -> usize {
        self.shadows.len()
    }

    /// Whether `input` is one of dry-run's own answers (`Shadows::holds`).
    pub(crate) fn holds(&self, input: &Input) -> bool {
        self.shadows.holds(input)
    }
}

impl Transport for DryRun {
    /// One job in dry-run: a live read of the object (on the shared budget), the write's
    /// preconditions checked against it, a "would" line, and the object as the write would
    /// have left it fed back.
    fn step(
        &mut self,
        wire: &mut Wire,
        job: Job,
        _budget: Budget,
        now: Time,
        ctx: &mut DecodeContext,
        out: &mut Vec<Input>,
    ) -> Next {
        let target = match dry_target(&job.action) {
            Ok(t) => t,
            Err(e) => return finish(&job, Outcome::Failed(e), out),
        };
        match target {
            DryTarget::Lease(path) => read_lease(wire, job, now, &path, ctx, out),
            DryTarget::FenceTarget(node, lease) => {
                read_fence_target(wire, Some(&self.shadows), job, now, &node, &lease, ctx, out)
            }
            DryTarget::Node(path) => match wire.get::<Node>(now, &path, ctx) {
                Ok(node) => {
                    let node = self.shadows.node(node);
                    self.dry_node_write(job, node, out)
                }
                Err(e) => fail(job, classify(e), out),
            },
            DryTarget::Pod(path) => match wire.get::<Pod>(now, &path, ctx) {
                Ok(pod) => {
                    let pod = self.shadows.pod(pod);
                    self.dry_pod_write(job, pod, out)
                }
                Err(e) => match classify(e) {
                    Failure::Conflict => finish(&job, Outcome::Failed("409 on a read".into()), out),
                    failure => fail(job, failure, out),
                },
            },
        }
    }

    /// Events cost no call in dry-run: never delivered one at a time within a run's budget,
    /// but all at once whenever no action waits before them.
    fn may_deliver_event(&self, _wire: &Wire, _now: Time) -> bool {
        false
    }

    fn next_event_at(&self, _wire: &Wire) -> Time {
        Time::ZERO
    }

    fn deliver_event(
        &mut self,
        _wire: &mut Wire,
        events: &mut VecDeque<Event>,
        _now: Time,
    ) -> bool {
        self.deliver_free_events(events);
        true
    }

    fn deliver_free_events(&mut self, events: &mut VecDeque<Event>) {
        while let Some(event) = events.pop_front() {
            self.log
                .record(WriteKind::Event, dry_run::event_line(&event));
        }
    }

    /// Every watched node and pod (and their deletions) passes through here on the way to
    /// the controllers, so a relist of an unchanged object does not undo what dry-run
    /// "wrote" to it.
    fn overlay(&mut self, input: Input) -> Input {
        self.shadows.overlay(input)
    }

    fn set_shadow_mode(&mut self, on: bool) {
        self.shadows.set_shadow_mode(on);
    }

    fn keep_as_shadow(&mut self, input: &Input) {
        match input {
            Input::NodeUpsert(node) => self.shadows.remember_node(node.clone()),
            Input::PodUpsert(pod) => self.shadows.remember_pod(pod.clone()),
            _ => {}
        }
    }

    fn report(&self, stats: &mut ExecutorStats) {
        stats.dry_run_writes = self.log.counts().map(|(k, n)| (k.as_str(), n)).collect();
        stats.dry_run_shadows = self.shadows.len();
    }

    fn dry_run(&self) -> Option<&DryRun> {
        Some(self)
    }
}

impl DryRun {
    fn dry_node_write(&mut self, job: Job, mut node: Node, out: &mut Vec<Input>) -> Next {
        match &job.action {
            Action::UpdateNodeConditions {
                node: name,
                uid,
                resource_version,
                conditions,
                ..
            } => {
                if node.uid != *uid || node.resource_version != *resource_version {
                    // What the server's 409 and our re-read would have given.
                    out.push(Input::NodeUpsert(node));
                    return finish(&job, Outcome::Conflict, out);
                }
                let line = dry_run::conditions_line(name, &node.conditions, conditions);
                self.log.record(WriteKind::NodeStatus, line);
                dry_run::apply_conditions(&mut node, conditions);
            }
            Action::PatchNodeTaints {
                node: name,
                resource_version,
                taints,
                ..
            } => {
                if node.resource_version != *resource_version {
                    out.push(Input::NodeUpsert(node));
                    return finish(&job, Outcome::Conflict, out);
                }
                let line = dry_run::taints_line(name, &node.taints, taints);
                self.log.record(WriteKind::Taints, line);
                node.taints = taints.clone();
            }
            Action::PatchNodeLabels {
                node: name, labels, ..
            } => {
                self.log
                    .record(WriteKind::Labels, dry_run::labels_line(name, labels));
                dry_run::apply_labels(&mut node, labels);
            }
            Action::PatchNodeFencing {
                node: name,
                resource_version,
                annotations,
                taints,
                ..
            } => {
                if node.resource_version != *resource_version {
                    out.push(Input::NodeUpsert(node));
                    return finish(&job, Outcome::Conflict, out);
                }
                let notes: Vec<String> = annotations
                    .iter()
                    .map(|(k, v)| format!("{k}={}", v.as_deref().unwrap_or("(removed)")))
                    .collect();
                self.log.record(
                    WriteKind::Labels,
                    format!("would annotate node {name}: {}", notes.join(", ")),
                );
                if let Some(taints) = taints {
                    let line = dry_run::taints_line(name, &node.taints, taints);
                    self.log.record(WriteKind::Taints, line);
                    node.taints = taints.clone();
                }
            }
            _ => return Next::Done,
        }
        // Before the result, as a real write's answer is fed (see `absorb_answer`).
        self.shadows.remember_node(node.clone());
        out.push(Input::NodeUpsert(node));
        finish(&job, Outcome::Ok, out)
    }

    fn dry_pod_write(&mut self, job: Job, mut pod: Pod, out: &mut Vec<Input>) -> Next {
        let (uid, kind, line) = match &job.action {
            Action::MarkPodNotReady { pod: key, uid, .. } => (
                uid,
                WriteKind::PodNotReady,
                format!("{} NotReady", dry_run::pod_line("mark", key)),
            ),
            Action::SetPodStatusNodeLost {
                pod: key,
                uid,
                message,
                ..
            } => (
                uid,
                WriteKind::PodNodeLost,
                format!("would set pod {key} status reason {NODE_LOST_REASON}: {message}"),
            ),
            Action::DeletePod { pod: key, uid, .. } => {
                (uid, WriteKind::PodDelete, dry_run::pod_line("delete", key))
            }
            Action::EvictPod { pod: key, uid, .. } => (
                uid,
                WriteKind::PodEviction,
                format!(
                    "{} (condition DisruptionTarget, then delete)",
                    dry_run::pod_line("evict", key)
                ),
            ),
            _ => return Next::Done,
        };
        if pod.uid != *uid {
            // The UID precondition would fail: the name belongs to another pod now.
            return finish(&job, Outcome::Conflict, out);
        }
        self.log.record(kind, line);
        let changed = match &job.action {
            Action::MarkPodNotReady { .. } => {
                dry_run::apply_not_ready(&mut pod);
                true
            }
            Action::DeletePod { .. } | Action::EvictPod { .. } => {
                dry_run::apply_delete(&mut pod);
                true
            }
            _ => false,
        };
        // Before the result, as a real write's answer is fed (see `absorb_answer`).
        if changed {
            self.shadows.remember_pod(pod.clone());
            out.push(Input::PodUpsert(pod));
        }
        finish(&job, Outcome::Ok, out)
    }
}
