//! Deleting the pods whose time came: the deadlines fired (unless the caches are stale or a
//! brake holds them), the shell's answers to each `EvictPod` (retries with backoff, metrics), and
//! the evidence behind each deletion for the decision log.

use super::*;

impl TaintEviction {
    /// The shell's report on an [`Action::EvictPod`]. A result for a pod deleted or
    /// replaced meanwhile still counts in the metrics but never causes a retry; an id never
    /// handed out (or already reported) is ignored.
    pub(super) fn eviction_result(
        &mut self,
        store: &ClusterStore,
        id: ActionId,
        result: EvictionResult,
        now: Time,
        out: &mut Vec<Action>,
    ) {
        let Some(key) = self.in_flight.answered(id) else {
            return;
        };
        let current = match self.evictions.get(&key) {
            Some(Work::Running {
                fire_at,
                attempt,
                in_flight: Some(running),
                ..
            }) if *running == id => Some((*fire_at, *attempt)),
            _ => None,
        };
        match result {
            EvictionResult::Deleted => {
                self.metrics.pod_deletions_total += 1;
                if let Some((fire_at, _)) = current {
                    self.metrics.pod_deletion_duration.observe(now - fire_at);
                }
            }
            EvictionResult::NotFound => self.metrics.already_gone_total += 1,
            EvictionResult::Conflict => self.metrics.replaced_total += 1,
            EvictionResult::Error(error) => {
                let Some((_, attempt)) = current else {
                    return;
                };
                if attempt >= MAX_ATTEMPTS {
                    self.evictions.finish(&key);
                    self.metrics.gave_up(GaveUp {
                        pod: key,
                        at: now,
                        error,
                    });
                } else {
                    self.metrics.retries_total += 1;
                    self.evictions.retry_at(&key, now + retry_backoff(attempt));
                }
                self.fire_due(store, now, out);
                return;
            }
        }
        if current.is_some() {
            self.evictions.finish(&key);
        }
    }

    pub(super) fn fire_due(&mut self, store: &ClusterStore, now: Time, out: &mut Vec<Action>) {
        if self.held {
            return;
        }
        loop {
            let next = if self.brake == BrakeCover::Nothing
                && self.takeover_wait == BrakeCover::Nothing
            {
                self.evictions.pop_due(now)
            } else {
                let (brake, wait, inherited) = (&self.brake, &self.takeover_wait, &self.inherited);
                let held = |key: &PodKey| brake::parked_now(brake, wait, inherited, store, key);
                self.evictions.pop_due_unless(now, held, &mut self.parked)
            };
            let Some((key, due)) = next else {
                break;
            };
            if matches!(due, Due::Fire { .. }) {
                self.inherited.remove(&key);
            }
            let Some(pod) = store.pods().get(&key) else {
                // Cannot happen (a deleted pod's work is forgotten); drop it rather than act.
                self.evictions.forget(&key);
                continue;
            };
            let (fire_at, attempt) = match due {
                Due::Fire {
                    fire_at,
                    counted_from,
                } => {
                    let evidence =
                        deletion_evidence(store, &key, counted_from, fire_at, self.timing.as_ref());
                    self.decisions.push(evidence);
                    out.push(Action::RecordEvent(
                        self.pod_event(&key, format!("Marking for deletion Pod {key}")),
                    ));
                    (fire_at, 1)
                }
                Due::Retry if !still_evicted(store, &pod) => {
                    // The taint went (or the pod now tolerates it forever) while the failed
                    // attempt waited: retrying would delete a pod nothing evicts any more.
                    // Upstream's worker stops with its last 10 ms try; ours stops here.
                    self.evictions.finish(&key);
                    continue;
                }
                Due::Retry => match self.evictions.get(&key) {
                    Some(Work::Running {
                        fire_at, attempt, ..
                    }) => (*fire_at, attempt + 1),
                    _ => continue,
                },
            };
            let uid = pod.uid();
            let condition_present = pod.disruption_target();
            let id = self.in_flight.send(
                key.clone(),
                |id| Action::EvictPod {
                    id,
                    pod: key.clone(),
                    uid,
                    attempt,
                    condition_present,
                },
                out,
            );
            self.evictions.start_attempt(key, fire_at, attempt, id);
        }
    }
}

/// Whether `pod`'s node still carries a NoExecute taint the pod does not tolerate forever.
fn still_evicted(store: &ClusterStore, pod: &PodView<'_>) -> bool {
    let Some(node) = pod.node_name().and_then(|n| store.node(n)) else {
        return false;
    };
    let taints: Vec<Taint> = node.no_execute_taints().cloned().collect();
    !taints.is_empty() && verdict(&taints, pod.tolerations()) != Verdict::TolerateForever
}

/// Why a pod's deletion starts (at `fire_at`): the NoExecute taint of its node it does not
/// tolerate, or the one whose toleration ran out first, and since when the countdown ran.
fn deletion_evidence(
    store: &ClusterStore,
    key: &PodKey,
    counted_from: Time,
    fire_at: Time,
    timing: Option<&PoolTiming>,
) -> Decision {
    let pod = store.pods().get(key);
    let node_name = pod.as_ref().and_then(|p| p.node_name().cloned());
    let node = node_name.as_ref().and_then(|n| store.node(n));
    let taints: Vec<Taint> = node
        .map(|n| n.no_execute_taints().cloned().collect())
        .unwrap_or_default();
    let own: &[Toleration] = match &pod {
        Some(p) => p.tolerations(),
        None => &[],
    };
    // The seconds it was judged with: a pool's stand-in for the admission default.
    let tolerations = match (timing, node) {
        (Some(t), Some(node)) => t.tolerations(node, own),
        _ => std::borrow::Cow::Borrowed(own),
    };
    let tolerations: &[Toleration] = &tolerations;
    // The taint that decides: one no toleration matches, else the one whose toleration runs
    // out first, each counted from its own start.
    let mut chosen: Option<(Taint, Option<u64>, Time)> = None;
    for taint in &taints {
        match verdict(std::slice::from_ref(taint), tolerations) {
            Verdict::NotTolerated => {
                chosen = Some((taint.clone(), None, fire_at));
                break;
            }
            Verdict::TolerateFor(d) => {
                let due = countdown_start(taint, fire_at) + d;
                if chosen
                    .as_ref()
                    .is_none_or(|(_, _, earliest)| due < *earliest)
                {
                    chosen = Some((taint.clone(), Some(d.as_secs()), due));
                }
            }
            Verdict::TolerateForever => {}
        }
    }
    let (taint, toleration_seconds) = match chosen {
        Some((t, s, _)) => (Some(t), s),
        None => (None, None),
    };
    Decision::PodDeletion {
        pod: key.clone(),
        node: node_name,
        taint,
        toleration_seconds,
        countdown_from: counted_from,
    }
}

/// Backoff after failed attempt `attempt` (1-based): 100 ms, 200 ms, 400 ms, ... capped.
fn retry_backoff(attempt: u32) -> Duration {
    let factor = 1u32 << attempt.saturating_sub(1).min(16);
    RETRY_BACKOFF.saturating_mul(factor).min(RETRY_BACKOFF_MAX)
}
