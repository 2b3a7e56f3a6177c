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
//! The parts: [`plan`] (pure: the call a job's stage makes, what a failure leads to, the event
//! queue's room, retry times), [`queue`] (priority classes and budgets), `wire` (one call
//! through the client with its accounting: throttle wait, backoff, counts), and one
//! `Transport` that carries out each stage — `Live` sends it, `DryRun` reads, checks and
//! records what it would have written. The config's `dry_run` picks the transport; nothing
//! else in the path asks.
//!
//! Wiring, per turn of the loop:
//! ```text
//! watched object -> executor.overlay(input) -> controllers.handle -> executor.submit(actions)
//! executor.run_ready(now, 1, &mut decode_ctx) -> each input -> controllers.handle -> submit
//! arm one loop timer at executor.next_wakeup() (and controllers.next_deadline())
//! ```

pub(crate) mod dry_run;
mod dry_transport;
mod fencing;
mod live;
mod live_reads;
mod outcome;
mod plan;
#[cfg(test)]
mod plan_tests;
mod queue;
pub(crate) mod stats;
mod transport;
mod wire;

use dry_transport::DryRun;
use live::Live;
use live_reads::{read_fence_target, read_lease};
use outcome::*;
use plan::*;
use transport::Transport;
use wire::Wire;

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
use crate::time::{Rate, Rng, TokenBucket};

use queue::ActionQueue;

pub use dry_run::{DryRunLog, Shadows, WriteKind};
pub use stats::{ExecutorStats, NO_ANSWER};

/// Upstream `UpdateLabelBackoff`: 5 steps of 100 ms, jitter 1.0.
pub const LABEL_CONFLICT_TRIES: u32 = 5;
pub(crate) const LABEL_RETRY_DELAY: Duration = Duration::from_millis(100);
/// How long after a verdict call routine calls keep leaving half the burst to verdicts: one
/// kubelet renew interval, over which the nodes of a mass failure fall due.
pub(crate) const VERDICT_WINDOW: Duration = Duration::from_secs(10);

#[derive(Clone, Debug)]
pub struct ExecutorSettings {
    /// Send no write; log and count what would have been written.
    pub dry_run: bool,
    /// Events waiting beyond this are dropped, oldest first. client-go's event broadcaster
    /// queues 1000 (`maxQueuedEvents`, tools/record/event.go) and refuses what comes when it is
    /// full; dropping the oldest instead sends the latest of a burst. A start at 5,000 nodes
    /// queues a RegisteredNode event per node, and at 5 a second they take about a quarter of
    /// an hour to send: the bound keeps that backlog's memory small.
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
            max_queued_events: 1000,
            event_rate: Rate::per_second(5),
            // client-go's event spam filter lets 25 through at once.
            event_burst: 25,
            backoff_initial: Duration::from_millis(100),
            backoff_max: Duration::from_secs(10),
            seed: 0x5eed,
        }
    }
}

pub struct Executor {
    /// The API calls and their accounting (budgets, backoff, counts), whichever transport.
    wire: Wire,
    /// Carries out each job: [`Live`] for real, [`DryRun`] with no write sent.
    transport: Box<dyn Transport>,
    max_queued_events: usize,
    queue: ActionQueue,
    /// Jobs waiting for a retry time (label conflicts); few, so a plain list.
    delayed: Vec<Job>,
    events: VecDeque<Event>,
    /// Shadow mode (`set_shadow_mode`), kept across a change of transport.
    shadow_mode: bool,
}

impl Executor {
    pub fn new(client: ApiClient, settings: ExecutorSettings, now: Time) -> Executor {
        Executor {
            wire: Wire::new(client, &settings, now),
            transport: transport_for(settings.dry_run),
            max_queued_events: settings.max_queued_events,
            queue: ActionQueue::default(),
            delayed: Vec::new(),
            shadow_mode: false,
            events: VecDeque::new(),
        }
    }

    /// Durations of the node status writes made since the last call (for the per-node health
    /// update histogram: upstream times `tryUpdateNodeHealth`, whose cost is this write).
    pub(crate) fn take_node_health_writes(&mut self) -> Vec<Duration> {
        std::mem::take(&mut self.wire.node_health_writes)
    }

    pub(crate) fn is_dry_run(&self) -> bool {
        self.transport.dry_run().is_some()
    }

    /// Config reload: the other transport, from the next job on. A new dry-run starts with an
    /// empty record and no shadows. The owner must also drop what dry-run taught the
    /// controllers (it fed them objects as the writes would have left them): see the daemon's
    /// resync on this change.
    pub(crate) fn set_dry_run(&mut self, dry_run: bool) {
        if dry_run != self.is_dry_run() {
            self.transport = transport_for(dry_run);
            self.transport.set_shadow_mode(self.shadow_mode);
        }
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
        let (kept, dropped) = events_to_drop(self.events.len(), self.max_queued_events);
        for _ in 0..dropped {
            if let Some(old) = self.events.pop_front() {
                debug!(
                    "dropping event {} {}: too many events waiting",
                    old.reason, old.message
                );
            }
        }
        self.wire.stats.events_dropped += dropped as u64;
        if kept {
            self.events.push_back(event);
        } else {
            self.wire.stats.events_dropped += 1;
        }
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

    /// When `run_ready` has something to do next (a time at or before now: at once); `None`
    /// when nothing is waiting.
    pub fn next_wakeup(&self) -> Option<Time> {
        let head = if let Some(gate) = self.queue.head_budgets().map(|b| self.wire.gate(b)).min() {
            Some(gate)
        } else if self.events.is_empty() {
            None
        } else {
            Some(self.transport.next_event_at(&self.wire))
        };
        let retry = self.delayed.iter().map(|j| j.not_before).min();
        earliest(head, retry)
    }

    fn promote_delayed(&mut self, now: Time) {
        for job in take_due(&mut self.delayed, now) {
            // Older than anything queued since: back to the head.
            self.queue.push_front(job);
        }
    }

    /// Events that cost no call go whenever no action waits before them.
    fn deliver_free_events(&mut self) {
        if self.queue.is_empty() {
            self.transport.deliver_free_events(&mut self.events);
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
        self.deliver_free_events();
        while calls < max_calls {
            if self.queue.head_budget().is_some() {
                if self.wire.backoff.until > now {
                    break;
                }
                // The most urgent job with a token of its budget (`ActionQueue::pop_ready`).
                let wire = &self.wire;
                let Some((job, budget)) = self.queue.pop_ready(|b| wire.gate(b) <= now) else {
                    self.wire.throttled_since.get_or_insert(now);
                    break;
                };
                if budget != Budget::SharedLeavingReserve {
                    self.wire.last_verdict = Some(now);
                }
                calls += 1;
                let next = self
                    .transport
                    .step(&mut self.wire, job, budget, now, ctx, &mut out);
                now = now.max(self.wire.client.now());
                match next {
                    Next::Done => self.wire.stats.actions_done += 1,
                    Next::Continue(job) => self.queue.push_front(job),
                    Next::Delay(job) => self.delayed.push(job),
                    Next::Hold(job) => {
                        self.queue.push_front(job);
                        break;
                    }
                }
                self.promote_delayed(now);
            } else if !self.events.is_empty() && self.transport.may_deliver_event(&self.wire, now) {
                calls += 1;
                if !self
                    .transport
                    .deliver_event(&mut self.wire, &mut self.events, now)
                {
                    break;
                }
                if self.events.is_empty() && self.events.capacity() > 64 {
                    // A backlog sent: its queue's memory goes back too.
                    self.events = VecDeque::new();
                }
                now = now.max(self.wire.client.now());
                self.promote_delayed(now);
            } else {
                break;
            }
        }
        self.deliver_free_events();
        out
    }

    /// Answers every waiting action as failed and drops the events, e.g. when leadership is
    /// lost: the controllers then know nothing is in flight.
    pub fn abandon(&mut self, reason: &str) -> Vec<Input> {
        let jobs: Vec<Job> = self.queue.drain().chain(self.delayed.drain(..)).collect();
        self.wire.stats.events_dropped += self.events.len() as u64;
        self.events.clear();
        jobs.into_iter()
            .filter_map(|j| answer(&j.action, Outcome::Failed(reason.to_string())))
            .collect()
    }

    pub fn stats(&self) -> ExecutorStats {
        let mut stats = self.wire.stats.clone();
        stats.queued_actions = self.pending_actions();
        stats.queued_events = self.events.len();
        let until = self.wire.backoff.until;
        stats.backoff_until = (until > Time::ZERO).then_some(until);
        self.transport.report(&mut stats);
        stats
    }

    /// What dry-run would have written (counts by kind, latest lines); empty when not in
    /// dry-run.
    pub fn dry_run_log(&self) -> &DryRunLog {
        static NOTHING: DryRunLog = DryRunLog::EMPTY;
        self.transport.dry_run().map_or(&NOTHING, DryRun::log)
    }

    /// Every watched node and pod (and their deletions) must pass through here on the way to
    /// the controllers, so a relist of an unchanged object does not undo what dry-run
    /// "wrote" to it (see [`dry_run`]). Without dry-run the input is returned as is.
    pub fn overlay(&mut self, input: Input) -> Input {
        self.transport.overlay(input)
    }

    /// Shadow mode: dry-run builds on this object (the server's without the incumbent's
    /// writes) while the server's copy stays at its version. Nothing without dry-run.
    /// Whether `input`, fed back by [`Executor::run_ready`], is dry-run's answer as a write of
    /// ours left the object; otherwise it is the server's object read back (a 409's re-read).
    pub(crate) fn is_own_answer(&self, input: &Input) -> bool {
        self.transport.dry_run().is_some_and(|d| d.holds(input))
    }

    pub(crate) fn keep_as_shadow(&mut self, input: &Input) {
        self.transport.keep_as_shadow(input);
    }

    /// Shadow mode: dry-run keeps the incumbent's writes out of what it builds on.
    pub(crate) fn set_shadow_mode(&mut self, on: bool) {
        self.shadow_mode = on;
        self.transport.set_shadow_mode(on);
    }

    /// Objects dry-run currently holds a changed copy of.
    pub fn dry_run_shadows(&self) -> usize {
        self.transport.dry_run().map_or(0, DryRun::shadows)
    }
}

fn transport_for(dry_run: bool) -> Box<dyn Transport> {
    if dry_run {
        Box::new(DryRun::default())
    } else {
        Box::new(Live)
    }
}
