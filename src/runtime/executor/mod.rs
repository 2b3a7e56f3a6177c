//! The executor: runs the controllers' [`Action`]s as API calls and turns the answers into the
//! [`Input`]s the controllers are waiting for.
//!
//! Single-threaded and never sleeping. Actions wait in a queue, FIFO within priority classes
//! (verdicts, node taints and labels, pod deletions, pod status writes: see [`queue`]); the loop calls
//! [`Executor::run_ready`] between events with a small call budget (one call, one hard timeout
//! each), so a slow or failing API server delays timers by at most one call's timeout, and
//! [`Executor::next_wakeup`] tells the loop when something can run again (client throttle,
//! Retry-After, backoff, a delayed retry).
//!
//! Events (`RecordEvent`) are best effort and come last: they are sent only when no action is
//! waiting, paced by their own token bucket on top of the client throttle, dropped oldest first
//! when too many wait, and never answered, so they can neither block nor fail an action.
//!
//! Who retries what (no failure is retried twice):
//! - client throttle and 429 Retry-After: the action stays at the head of the queue, nothing is
//!   answered; the throttle says when to try again.
//! - timeouts, transport errors, 5xx: the action is answered `Failed` / `Error` / lease read
//!   `Failed` and the controllers retry it themselves (next pass, eviction backoff, lease read
//!   retry); the executor only backs off before its next call (0.1 s doubling to 10 s, reset by
//!   any answer that is not a 5xx), so an outage costs one call per backoff step, not a storm.
//! - 409 on a node status or taint write: the executor re-reads the node and feeds it before
//!   `Conflict`; the controller decides again on the fresh node (upstream's conflict retries).
//! - 409 on a label patch (no resourceVersion: nothing for the controller to decide again on):
//!   retried here, 5 tries 100 ms apart with full jitter (upstream `UpdateLabelBackoff`).
//! - eviction: 404 and a failed UID precondition are final answers (`NotFound`, `Conflict`);
//!   anything else is `Error`, which taint eviction retries (5 attempts).
//!
//! Dry-run (`dry_run = true`): no write is sent. See [`dry_run`] for how the controllers are kept
//! deciding as they would for real. Reads (the live Lease read, the reads dry-run does to check
//! a write's preconditions) are sent.
//!
//! Wiring, per turn of the loop:
//! ```text
//! watched object -> executor.overlay(input) -> controllers.handle -> executor.submit(actions)
//! executor.run_ready(now, 1, &mut decode_ctx) -> each input -> controllers.handle -> submit
//! arm one loop timer at executor.next_wakeup() (and controllers.next_deadline())
//! ```

pub mod dry_run;
mod dry_steps;
mod fencing;
mod live_reads;
mod outcome;
mod plan;
mod queue;
pub mod stats;

use outcome::*;
use plan::*;

use std::collections::VecDeque;
use std::time::Duration;

use log::{debug, warn};
use serde::de::IgnoredAny;

use crate::controller::events::Event;
use crate::controller::fencing::{FenceOutcome, FenceTargetOutcome};
use crate::controller::taint_eviction::{EvictionResult, MAX_ATTEMPTS};
use crate::controller::{Action, Input, LeaseReadOutcome, NODE_LOST_REASON, Outcome};
use crate::kube::decode::{Decode, DecodeContext, decode_object};
use crate::kube::request;
use crate::kube::{ApiClient, ApiError, Budget, PatchType, Preconditions};
use crate::model::{Lease, Node, Pod};
use crate::time::Time;
use crate::time::{Rate, TokenBucket};

use queue::ActionQueue;

pub use dry_run::{DryRunLog, Shadows, WriteKind};
pub use stats::{ExecutorStats, NO_ANSWER};

/// Upstream `UpdateLabelBackoff`: 5 steps of 100 ms, jitter 1.0.
pub const LABEL_CONFLICT_TRIES: u32 = 5;
pub const LABEL_RETRY_DELAY: Duration = Duration::from_millis(100);
/// How long after a verdict call routine calls keep leaving half the burst to verdicts: one
/// kubelet renew interval, over which the nodes of a mass failure fall due.
pub const VERDICT_WINDOW: Duration = Duration::from_secs(10);

#[derive(Clone, Debug)]
pub struct ExecutorSettings {
    /// Send no write; log and count what would have been written.
    pub dry_run: bool,
    /// Events waiting beyond this are dropped, oldest first (client-go's event cache holds 4096).
    pub max_queued_events: usize,
    /// Events' own pace, on top of the client throttle, so a burst of events (5000 pods marked
    /// NotReady) cannot take the whole client budget from the writes that follow.
    pub event_rate: Rate,
    pub event_burst: u64,
    /// First backoff after a timeout, transport error or 5xx; doubled up to `backoff_max`.
    pub backoff_initial: Duration,
    pub backoff_max: Duration,
    /// Seeds the jitter of label retries.
    pub seed: u64,
}

impl Default for ExecutorSettings {
    fn default() -> ExecutorSettings {
        ExecutorSettings {
            dry_run: false,
            max_queued_events: 4096,
            event_rate: Rate::per_second(5),
            // client-go's event spam filter lets 25 through at once.
            event_burst: 25,
            backoff_initial: Duration::from_millis(100),
            backoff_max: Duration::from_secs(10),
            seed: 0x5eed,
        }
    }
}

#[derive(Debug, Default)]
struct Backoff {
    current: Duration,
    until: Time,
}

pub struct Executor {
    /// Wall time of each node status write (call and re-read on conflict), drained by the
    /// daemon into `node_collector_update_node_health_duration_seconds`.
    node_health_writes: Vec<Duration>,
    client: ApiClient,
    settings: ExecutorSettings,
    queue: ActionQueue,
    /// Jobs waiting for a retry time (label conflicts); few, so a plain list.
    delayed: Vec<Job>,
    events: VecDeque<Event>,
    event_bucket: TokenBucket,
    backoff: Backoff,
    /// Since when the head of the queue has been held by the client throttle.
    throttled_since: Option<Time>,
    /// When the last verdict call (live Lease read, status write) was made.
    last_verdict: Option<Time>,
    rng: u64,
    event_seq: u64,
    stats: ExecutorStats,
    dry: DryRunLog,
    shadows: Shadows,
}

impl Executor {
    pub fn new(client: ApiClient, settings: ExecutorSettings, now: Time) -> Executor {
        let event_bucket = TokenBucket::new(settings.event_rate, settings.event_burst, now);
        Executor {
            client,
            rng: settings.seed | 1,
            settings,
            queue: ActionQueue::default(),
            delayed: Vec::new(),
            events: VecDeque::new(),
            event_bucket,
            backoff: Backoff::default(),
            throttled_since: None,
            last_verdict: None,
            event_seq: 0,
            stats: ExecutorStats::default(),
            dry: DryRunLog::default(),
            shadows: Shadows::default(),
            node_health_writes: Vec::new(),
        }
    }

    /// Durations of the node status writes made since the last call (for the per-node health
    /// update histogram: upstream times `tryUpdateNodeHealth`, whose cost is this write).
    pub fn take_node_health_writes(&mut self) -> Vec<Duration> {
        std::mem::take(&mut self.node_health_writes)
    }

    pub fn is_dry_run(&self) -> bool {
        self.settings.dry_run
    }

    /// Config reload. The owner must also drop what dry-run taught the controllers (it fed them
    /// objects as the writes would have left them): see the daemon's resync on this change.
    pub fn set_dry_run(&mut self, dry_run: bool) {
        self.settings.dry_run = dry_run;
    }

    pub fn client(&self) -> &ApiClient {
        &self.client
    }

    /// Queues the controllers' actions, in order. Events go to their own, droppable queue.
    pub fn submit(&mut self, actions: impl IntoIterator<Item = Action>, now: Time) {
        for action in actions {
            match action {
                Action::RecordEvent(event) => self.push_event(event),
                action => self.queue.push_back(Job {
                    action,
                    stage: Stage::Write,
                    label_conflicts: 0,
                    not_before: now,
                }),
            }
        }
    }

    fn push_event(&mut self, event: Event) {
        if self.settings.max_queued_events == 0 {
            self.stats.events_dropped += 1;
            return;
        }
        while self.events.len() >= self.settings.max_queued_events {
            if let Some(old) = self.events.pop_front() {
                debug!(
                    "dropping event {} {}: too many events waiting",
                    old.reason, old.message
                );
            }
            self.stats.events_dropped += 1;
        }
        self.events.push_back(event);
    }

    /// Actions waiting (queued or delayed), events not counted.
    pub fn pending_actions(&self) -> usize {
        self.queue.len() + self.delayed.len()
    }

    pub fn pending_events(&self) -> usize {
        self.events.len()
    }

    pub fn is_idle(&self) -> bool {
        self.pending_actions() == 0 && self.events.is_empty()
    }

    /// When the next call spending `budget` may be made: the client throttle and our backoff.
    fn gate(&self, budget: Budget) -> Time {
        self.client
            .next_admission_for(self.effective(budget))
            .max(self.backoff.until)
    }

    /// Routine calls leave a reserve of the shared budget only while verdicts are being made
    /// (one in the last [`VERDICT_WINDOW`]): otherwise the whole burst is theirs, as upstream's.
    fn effective(&self, budget: Budget) -> Budget {
        let now = self.client.now();
        match budget {
            Budget::SharedLeavingReserve
                if self
                    .last_verdict
                    .is_none_or(|at| now.since(at) >= VERDICT_WINDOW) =>
            {
                Budget::Shared
            }
            other => other,
        }
    }

    /// Runs one job's calls on `budget`; the client is left on the shared budget, so nothing
    /// else spends the live reads' budget by accident.
    fn with_budget<R>(&mut self, budget: Budget, f: impl FnOnce(&mut Self) -> R) -> R {
        let budget = self.effective(budget);
        self.client.set_budget(budget);
        let result = f(self);
        self.client.set_budget(Budget::Shared);
        result
    }

    /// When `run_ready` has something to do next (a time at or before now: at once); `None`
    /// when nothing is waiting.
    pub fn next_wakeup(&self) -> Option<Time> {
        let mut wake = if let Some(budget) = self.queue.head_budget() {
            Some(self.gate(budget))
        } else if self.events.is_empty() {
            None
        } else if self.settings.dry_run {
            Some(Time::ZERO)
        } else {
            let gate = self.gate(Budget::SharedLeavingReserve);
            Some(self.event_bucket.next_available(gate).unwrap_or(Time::MAX))
        };
        if let Some(retry) = self.delayed.iter().map(|j| j.not_before).min() {
            wake = Some(wake.map_or(retry, |w| w.min(retry)));
        }
        wake
    }

    fn promote_delayed(&mut self, now: Time) {
        if self.delayed.is_empty() {
            return;
        }
        let mut i = 0;
        while i < self.delayed.len() {
            if self.delayed[i].not_before <= now {
                let job = self.delayed.swap_remove(i);
                // Older than anything queued since: back to the head.
                self.queue.push_front(job);
            } else {
                i += 1;
            }
        }
    }

    /// Makes at most `max_calls` API calls, as the throttle and backoff allow, and returns the
    /// inputs to feed the controllers, in order. Never sleeps; each call is bounded by the
    /// client's hard timeout. `ctx` is the process's decoding context (re-read objects share
    /// its interned names with the watched ones).
    pub fn run_ready(
        &mut self,
        now: Time,
        max_calls: usize,
        ctx: &mut DecodeContext,
    ) -> Vec<Input> {
        let mut out = Vec::new();
        let mut now = now;
        let mut calls = 0;
        self.promote_delayed(now);
        if self.settings.dry_run {
            // Events cost no call in dry-run, and are still only "sent" after the actions
            // queued before them have been considered below.
            self.dry_run_events_if_idle();
        }
        while calls < max_calls {
            if let Some(budget) = self.queue.head_budget() {
                if self.backoff.until > now {
                    break;
                }
                if self.gate(budget) > now {
                    self.throttled_since.get_or_insert(now);
                    break;
                }
                let Some(job) = self.queue.pop_front() else {
                    break;
                };
                if budget != Budget::SharedLeavingReserve {
                    self.last_verdict = Some(now);
                }
                calls += 1;
                let health_write = !self.settings.dry_run
                    && matches!(job.action, Action::UpdateNodeConditions { .. });
                let started = std::time::Instant::now();
                let next = if self.settings.dry_run {
                    self.dry_step(job, now, ctx, &mut out)
                } else {
                    self.with_budget(budget, |e| e.step(job, now, ctx, &mut out))
                };
                if health_write {
                    self.node_health_writes.push(started.elapsed());
                }
                now = now.max(self.client.now());
                match next {
                    Next::Done => self.stats.actions_done += 1,
                    Next::Continue(job) => self.queue.push_front(job),
                    Next::Delay(job) => self.delayed.push(job),
                    Next::Hold(job) => {
                        self.queue.push_front(job);
                        break;
                    }
                }
                self.promote_delayed(now);
            } else if !self.events.is_empty() && !self.settings.dry_run {
                if self.gate(Budget::SharedLeavingReserve) > now
                    || !self.event_bucket.has_token(now)
                {
                    break;
                }
                calls += 1;
                if !self.with_budget(Budget::SharedLeavingReserve, |e| e.send_event(now)) {
                    break;
                }
                now = now.max(self.client.now());
                self.promote_delayed(now);
            } else {
                break;
            }
        }
        if self.settings.dry_run {
            self.dry_run_events_if_idle();
        }
        out
    }

    /// Answers every waiting action as failed and drops the events, e.g. when leadership is
    /// lost: the controllers then know nothing is in flight.
    pub fn abandon(&mut self, reason: &str) -> Vec<Input> {
        let jobs: Vec<Job> = self.queue.drain().chain(self.delayed.drain(..)).collect();
        self.stats.events_dropped += self.events.len() as u64;
        self.events.clear();
        jobs.into_iter()
            .filter_map(|j| answer(&j.action, Outcome::Failed(reason.to_string())))
            .collect()
    }

    pub fn stats(&self) -> ExecutorStats {
        let mut stats = self.stats.clone();
        stats.queued_actions = self.pending_actions();
        stats.queued_events = self.events.len();
        stats.backoff_until = (self.backoff.until > Time::ZERO).then_some(self.backoff.until);
        if self.settings.dry_run {
            stats.dry_run_writes = self.dry.counts().map(|(k, n)| (k.as_str(), n)).collect();
            stats.dry_run_shadows = self.shadows.len();
        }
        stats
    }

    /// What dry-run would have written (counts by kind, latest lines).
    pub fn dry_run_log(&self) -> &DryRunLog {
        &self.dry
    }

    /// In dry-run, every watched node and pod (and their deletions) must pass through here on
    /// the way to the controllers, so a relist of an unchanged object does not undo what
    /// dry-run "wrote" to it (see [`dry_run`]). Without dry-run the input is returned as is.
    pub fn overlay(&mut self, input: Input) -> Input {
        if self.settings.dry_run {
            self.shadows.overlay(input)
        } else {
            input
        }
    }

    /// Objects dry-run currently holds a changed copy of.
    pub fn dry_run_shadows(&self) -> usize {
        self.shadows.len()
    }

    // ---- one call ---------------------------------------------------------------------------

    /// Runs one request through the client, recording it, the throttle wait and the backoff.
    fn call<T>(
        &mut self,
        verb: Verb,
        now: Time,
        request: impl FnOnce(&mut ApiClient) -> Result<T, ApiError>,
    ) -> Result<T, ApiError> {
        let result = request(&mut self.client);
        if let Err(ApiError::Throttled { .. }) = &result {
            self.throttled_since.get_or_insert(now);
            return result;
        }
        if let Some(since) = self.throttled_since.take() {
            self.stats.throttle_wait += now.since(since);
        }
        let code = match &result {
            Ok(_) if verb == Verb::Create => 201,
            Ok(_) => 200,
            Err(e) => e.code().unwrap_or(NO_ANSWER),
        };
        *self
            .stats
            .requests
            .entry((verb.as_str(), code))
            .or_default() += 1;
        let after = now.max(self.client.now());
        match &result {
            Err(e) if is_server_trouble(e) => {
                let step = if self.backoff.current.is_zero() {
                    self.settings.backoff_initial
                } else {
                    (self.backoff.current * 2).min(self.settings.backoff_max)
                };
                self.backoff = Backoff {
                    current: step,
                    until: after + step,
                };
                self.stats.backoffs += 1;
                self.stats.last_error = Some((after, e.to_string()));
            }
            // The client throttle now holds every call until Retry-After: that wait starts now.
            Err(ApiError::TooManyRequests { .. }) => self.throttled_since = Some(after),
            other => {
                self.backoff = Backoff::default();
                if let Err(e) = other
                    && !matches!(e, ApiError::NotFound(_) | ApiError::Conflict(_))
                {
                    self.stats.last_error = Some((after, e.to_string()));
                }
            }
        }
        result
    }

    /// PATCH; the answer is the object as written.
    fn patch(
        &mut self,
        now: Time,
        path: &str,
        body: &serde_json::Value,
    ) -> Result<Vec<u8>, ApiError> {
        let bytes = body.to_string().into_bytes();
        self.call(Verb::Patch, now, |c| {
            c.patch_bytes(path, PatchType::StrategicMerge, &bytes)
        })
    }

    /// DELETE; the answer is the pod marked for deletion (or a Status if it went at once).
    fn delete_pod(&mut self, now: Time, path: &str, uid: &str) -> Result<Vec<u8>, ApiError> {
        let preconditions = Preconditions {
            uid: Some(uid.to_string()),
            resource_version: None,
        };
        // No grace period override: the pod's own, as upstream's plain DELETE.
        self.call(Verb::Delete, now, |c| {
            c.delete_bytes(path, &preconditions, None)
        })
    }

    /// A successful write's answer is the object as it now is: it goes to the controllers
    /// (and so into the store) ahead of the write's result, so the next write of the same
    /// object carries its new resourceVersion instead of meeting a 409, and a late watch
    /// event of the old version is recognised as older. An answer that does not decode (a
    /// Status for a pod deleted at once) is left to the watch.
    fn absorb_answer(action: &Action, bytes: &[u8], ctx: &mut DecodeContext, out: &mut Vec<Input>) {
        match action {
            Action::UpdateNodeConditions { .. }
            | Action::PatchNodeTaints { .. }
            | Action::PatchNodeLabels { .. }
            | Action::PatchNodeFencing { .. } => match decode_object::<Node>(bytes, ctx) {
                Ok(node) => out.push(Input::NodeUpsert(node)),
                Err(e) => debug!("{}: answer not absorbed: {e}", describe(action)),
            },
            Action::MarkPodNotReady { .. }
            | Action::SetPodStatusNodeLost { .. }
            | Action::DeletePod { .. }
            | Action::EvictPod { .. } => match decode_object::<Pod>(bytes, ctx) {
                // A pod's answer without a node (never the case for the pods we write) is
                // not one of the bound pods the store holds.
                Ok(pod) if pod.node_name.is_some() => out.push(Input::PodUpsert(pod)),
                Ok(_) => {}
                Err(e) => debug!("{}: answer not absorbed: {e}", describe(action)),
            },
            Action::ReadLease { .. }
            | Action::ReadFenceTarget { .. }
            | Action::RunFenceCommand { .. }
            | Action::RecordEvent(_) => {}
        }
    }

    fn get<T: Decode>(
        &mut self,
        now: Time,
        path: &str,
        ctx: &mut DecodeContext,
    ) -> Result<T, ApiError> {
        let bytes = self.call(Verb::Get, now, |c| c.get_bytes(path))?;
        decode_object::<T>(&bytes, ctx).map_err(|e| ApiError::Decode(format!("GET {path}: {e}")))
    }

    fn send_event(&mut self, now: Time) -> bool {
        let Some(event) = self.events.pop_front() else {
            return false;
        };
        self.event_seq += 1;
        let (namespace, body) = request::event_body(&event_record(&event), now, self.event_seq);
        let path = match request::events_path(&namespace) {
            Ok(p) => p,
            Err(e) => {
                debug!("event {} not recorded: {e}", event.reason);
                self.stats.events_failed += 1;
                return true;
            }
        };
        let bytes = body.to_string().into_bytes();
        match self.call(Verb::Create, now, |c| c.post::<IgnoredAny>(&path, &bytes)) {
            Ok(_) => {
                self.event_bucket.try_take(now);
                self.stats.events_sent += 1;
                true
            }
            Err(ApiError::Throttled { .. }) => {
                self.events.push_front(event);
                false
            }
            Err(e) => {
                self.event_bucket.try_take(now);
                debug!("event {} {} not recorded: {e}", event.reason, event.message);
                self.stats.events_failed += 1;
                true
            }
        }
    }

    /// Finishes a job with `outcome`, logging what is worth a line.
    fn finish(&mut self, job: &Job, outcome: Outcome, out: &mut Vec<Input>) -> Next {
        match &outcome {
            Outcome::Failed(reason) => warn!(
                "{} failed: {reason}; {}",
                describe(&job.action),
                what_next(&job.action)
            ),
            Outcome::NotFound => debug!("{}: not found", describe(&job.action)),
            Outcome::Conflict => debug!("{}: conflict", describe(&job.action)),
            Outcome::Ok => {}
        }
        out.extend(answer(&job.action, outcome));
        Next::Done
    }

    /// The common ending of a failed write.
    fn fail(&mut self, job: Job, failure: Failure, out: &mut Vec<Input>) -> Next {
        match failure {
            Failure::Hold => Next::Hold(job),
            Failure::NotFound => self.finish(&job, Outcome::NotFound, out),
            Failure::Conflict => self.finish(&job, Outcome::Conflict, out),
            Failure::Failed(m) => self.finish(&job, Outcome::Failed(m), out),
        }
    }

    fn jittered(&mut self, base: Duration) -> Duration {
        // xorshift64: the jitter only has to spread retries, not be unpredictable.
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        base + base.mul_f64((self.rng % 1000) as f64 / 1000.0)
    }

    /// One call of a job, for real.
    fn step(
        &mut self,
        mut job: Job,
        now: Time,
        ctx: &mut DecodeContext,
        out: &mut Vec<Input>,
    ) -> Next {
        let planned = match plan(&job, now) {
            Ok(p) => p,
            Err(e) => return self.finish(&job, Outcome::Failed(e), out),
        };
        match planned {
            Plan::Patch(path, body) => match self.patch(now, &path, &body) {
                Ok(answer) => match job.action {
                    Action::EvictPod { .. } => {
                        Self::absorb_answer(&job.action, &answer, ctx, out);
                        job.stage = Stage::Delete;
                        Next::Continue(job)
                    }
                    _ => {
                        Self::absorb_answer(&job.action, &answer, ctx, out);
                        self.finish(&job, Outcome::Ok, out)
                    }
                },
                Err(e) => match (classify(e), &job.action) {
                    (
                        Failure::Conflict,
                        Action::UpdateNodeConditions { .. }
                        | Action::PatchNodeTaints { .. }
                        | Action::PatchNodeFencing { .. },
                    ) => {
                        job.stage = Stage::Reread;
                        Next::Continue(job)
                    }
                    (Failure::Conflict, Action::PatchNodeLabels { .. }) => {
                        job.label_conflicts += 1;
                        if job.label_conflicts < LABEL_CONFLICT_TRIES {
                            self.stats.conflict_retries += 1;
                            job.not_before =
                                now.max(self.client.now()) + self.jittered(LABEL_RETRY_DELAY);
                            Next::Delay(job)
                        } else {
                            let m = format!("409 Conflict {LABEL_CONFLICT_TRIES} times in a row");
                            self.finish(&job, Outcome::Failed(m), out)
                        }
                    }
                    (failure, _) => self.fail(job, failure, out),
                },
            },
            Plan::Delete(path, uid) => match self.delete_pod(now, &path, &uid) {
                Ok(answer) => {
                    Self::absorb_answer(&job.action, &answer, ctx, out);
                    self.finish(&job, Outcome::Ok, out)
                }
                Err(e) => self.fail(job, classify(e), out),
            },
            Plan::RereadNode(path) => match self.get::<Node>(now, &path, ctx) {
                Ok(node) => {
                    // The fresh node first: the controller decides again on it.
                    out.push(Input::NodeUpsert(node));
                    self.finish(&job, Outcome::Conflict, out)
                }
                Err(e) => match classify(e) {
                    Failure::Hold => Next::Hold(job),
                    Failure::NotFound => self.finish(&job, Outcome::NotFound, out),
                    Failure::Conflict => {
                        let m = "409 Conflict, then 409 re-reading the node".to_string();
                        self.finish(&job, Outcome::Failed(m), out)
                    }
                    Failure::Failed(e) => {
                        let m = format!("409 Conflict, then re-reading the node failed: {e}");
                        self.finish(&job, Outcome::Failed(m), out)
                    }
                },
            },
            Plan::ReadLease(path) => self.read_lease(job, now, &path, ctx, out),
            Plan::ReadFenceTarget(node, lease) => {
                self.read_fence_target(job, now, &node, &lease, ctx, out)
            }
        }
    }
}
