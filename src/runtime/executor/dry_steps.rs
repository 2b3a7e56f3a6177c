//! Dry-run's stages: read what a write would change, apply it to a shadow copy, answer as the
//! API server would have, and write nothing.

use super::*;

impl Executor {
    pub(super) fn dry_run_events_if_idle(&mut self) {
        if !self.queue.is_empty() {
            return;
        }
        while let Some(event) = self.events.pop_front() {
            self.dry
                .record(WriteKind::Event, dry_run::event_line(&event));
        }
    }

    /// One job in dry-run: a live read of the object, the write's preconditions checked against
    /// it, a "would" line, and the object as the write would have left it fed back.
    pub(super) fn dry_step(
        &mut self,
        job: Job,
        now: Time,
        ctx: &mut DecodeContext,
        out: &mut Vec<Input>,
    ) -> Next {
        let target = match dry_target(&job.action) {
            Ok(t) => t,
            Err(e) => return self.finish(&job, Outcome::Failed(e), out),
        };
        match target {
            DryTarget::Lease(path) => self.read_lease(job, now, &path, ctx, out),
            DryTarget::FenceTarget(node, lease) => {
                self.read_fence_target(job, now, &node, &lease, ctx, out)
            }
            DryTarget::Node(path) => match self.get::<Node>(now, &path, ctx) {
                Ok(node) => {
                    let node = self.shadows.node(node);
                    self.dry_node_write(job, node, out)
                }
                Err(e) => self.fail(job, classify(e), out),
            },
            DryTarget::Pod(path) => match self.get::<Pod>(now, &path, ctx) {
                Ok(pod) => {
                    let pod = self.shadows.pod(pod);
                    self.dry_pod_write(job, pod, out)
                }
                Err(e) => match classify(e) {
                    Failure::Conflict => {
                        self.finish(&job, Outcome::Failed("409 on a read".into()), out)
                    }
                    failure => self.fail(job, failure, out),
                },
            },
        }
    }

    pub(super) fn dry_node_write(
        &mut self,
        job: Job,
        mut node: Node,
        out: &mut Vec<Input>,
    ) -> Next {
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
                    return self.finish(&job, Outcome::Conflict, out);
                }
                let line = dry_run::conditions_line(name, &node.conditions, conditions);
                self.dry.record(WriteKind::NodeStatus, line);
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
                    return self.finish(&job, Outcome::Conflict, out);
                }
                let line = dry_run::taints_line(name, &node.taints, taints);
                self.dry.record(WriteKind::Taints, line);
                node.taints = taints.clone();
            }
            Action::PatchNodeLabels {
                node: name, labels, ..
            } => {
                self.dry
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
                    return self.finish(&job, Outcome::Conflict, out);
                }
                let notes: Vec<String> = annotations
                    .iter()
                    .map(|(k, v)| format!("{k}={}", v.as_deref().unwrap_or("(removed)")))
                    .collect();
                self.dry.record(
                    WriteKind::Labels,
                    format!("would annotate node {name}: {}", notes.join(", ")),
                );
                if let Some(taints) = taints {
                    let line = dry_run::taints_line(name, &node.taints, taints);
                    self.dry.record(WriteKind::Taints, line);
                    node.taints = taints.clone();
                }
            }
            _ => return Next::Done,
        }
        // Before the result, as a real write's answer is fed (see `absorb_answer`).
        self.shadows.remember_node(node.clone());
        out.push(Input::NodeUpsert(node));
        self.finish(&job, Outcome::Ok, out)
    }

    pub(super) fn dry_pod_write(&mut self, job: Job, mut pod: Pod, out: &mut Vec<Input>) -> Next {
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
            return self.finish(&job, Outcome::Conflict, out);
        }
        self.dry.record(kind, line);
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
        self.finish(&job, Outcome::Ok, out)
    }
}
