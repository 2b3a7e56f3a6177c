//! NoExecute taint eviction (upstream `pkg/controller/tainteviction`), sans-IO.
//!
//! Fed node and pod changes and the time, it keeps one eviction deadline per pod on a node with
//! NoExecute taints (any key: a user's `CustomTaint:NoExecute` evicts as well as ours) and hands
//! out [`Action`]s (`EvictPod`, `RecordEvent`) when they come due. A countdown starts when
//! this machine first sees the taint (or the pod under it), as upstream's. Beyond upstream,
//! whose restarts and new leaders give every pod another full `tolerationSeconds`, the taints
//! found at a start or a takeover count from their `timeAdded` rounded up to the next second
//! (or the pod's creation, or the last edit of its tolerations this process saw, if later;
//! under a swapped taint the first taint's countdown: `history.rs`), never from later than now
//! (`tolerations::countdown`). Countdowns live in memory, as upstream's; a new process finds
//! them again in the taints' `timeAdded`. Those found under the lifecycle's taints wait while
//! the nodes about to be judged would put every zone down or fully disrupt their node's zone
//! (`inherited`).
//!
//! Upstream drains node updates before pod updates so a pod update never judges a pod against
//! stale taints. Fed one input at a time, the same holds by construction: the node map is
//! updated before its pods are examined, so a pod update at `t` sees the taints of every node
//! update delivered at or before `t`.
//!
//! It keeps no copy of nodes or pods: it reads them from the [`World`]'s [`ClusterStore`] and is
//! told what each change replaced ([`Observed`]). Its own state is only the pods with pending work.
//!
//! Cost: a node update whose NoExecute taints changed examines only that node's pods (the
//! store's pods-by-node index); any other node update, and every pod update, is O(1) amortised.

mod action;
mod brake;
mod deletions;
mod dump;
mod history;
mod metrics;
mod timed_evictions;

#[cfg(test)]
mod tests;

pub use crate::inputs::EvictionResult;
pub(crate) use action::EVICTION_EVENT_REASON;
pub use dump::{EvictionDump, PodEviction};
#[cfg(test)]
pub(crate) use metrics::GAVE_UP_KEPT;
pub use metrics::{DELETION_LATENCY_BUCKETS_MS, EvictionMetrics, GaveUp, LatencyHistogram};

use std::time::Duration;

use crate::actions::{Action, ActionId};
use crate::autonomy::autonomous_countdown;
use crate::brake::BrakeCover;
use crate::decisions::Decision;
use crate::events::{Event, EventObject, EventType, TAINT_EVICTION_CONTROLLER};
use crate::in_flight::{InFlight, TAINT_EVICTION_IDS};
use crate::inputs::{Input, Observed};
use crate::model::{
    Autonomy, ClusterStore, ConditionStatus, Name, Node, PodChange, PodKey, PodView, Taint,
    Toleration,
};
use crate::pool_timing::{PoolTiming, TimingSource};
use crate::time::Time;
use crate::tolerations::{
    Countdown, Verdict, countdown, countdown_start, found_under_taint_since, verdict,
};
use crate::world::World;
use timed_evictions::{Due, TimedEvictions, Work};

/// Upstream's `retries`: attempts per eviction before giving up.
pub const MAX_ATTEMPTS: u32 = 5;
/// Backoff before the second attempt; doubled for each further one (100, 200, 400, 800 ms).
/// Upstream sleeps 10 ms between tries; we cannot block, and a little more room helps an
/// overloaded API server.
pub(crate) const RETRY_BACKOFF: Duration = Duration::from_millis(100);
pub(crate) const RETRY_BACKOFF_MAX: Duration = Duration::from_secs(5);

#[derive(Debug)]
pub struct TaintEviction {
    evictions: TimedEvictions,
    /// Attempts handed to the shell and not yet reported back.
    in_flight: InFlight<PodKey>,
    /// One shared empty string for the uid of pod events (upstream's carry none).
    no_uid: Name,
    pub metrics: EvictionMetrics,
    /// Pods judged against their node's taints, ever: the work counter behind the
    /// "a node change costs O(pods on that node)" promise.
    pods_examined: u64,
    /// What was decided and why since the shell last took them.
    decisions: Vec<Decision>,
    /// Honour the nodes' edge autonomy annotations (`controller/autonomy.rs`).
    autonomy: bool,
    /// The caches may be stale: no deletion starts (countdowns keep their deadlines and fire
    /// when released; `controller/cache_currency.rs`).
    held: bool,
    /// The nodes an engaged brake covers (`controller/brake.rs`): their pods' deletions wait,
    /// parked with their deadlines, and go when it releases.
    brake: BrakeCover,
    /// Pods whose deletion came due under the brake (their work is kept).
    parked: Vec<PodKey>,
    /// `default_toleration_seconds` (`controller/pool_timing.rs`); `None`: pods' own.
    timing: Option<PoolTiming>,
    /// The countdowns found at a start or a takeover (`initial_sync`) not fired yet. They are
    /// not due while the node lifecycle's suspects would put every zone down or fully disrupt
    /// their node's zone (`takeover_wait`): the leader that died might have seen it and lifted
    /// the taint, and a restarted upstream lifts it at registration.
    inherited: std::collections::HashSet<PodKey>,
    /// Set while `initial_sync` judges the pods: a countdown started then is inherited.
    inheriting: bool,
    /// The nodes whose inherited countdowns wait now (`Controllers` recounts it at each tick
    /// while some are pending); parked as under a brake.
    takeover_wait: BrakeCover,
    /// Toleration edits and taint swaps seen, for the countdowns found at a takeover.
    history: history::History,
}

impl Default for TaintEviction {
    fn default() -> Self {
        Self::new()
    }
}

impl TaintEviction {
    pub(crate) fn new() -> Self {
        TaintEviction {
            evictions: TimedEvictions::default(),
            in_flight: InFlight::starting_after(TAINT_EVICTION_IDS),
            no_uid: Name::default(),
            metrics: EvictionMetrics::default(),
            pods_examined: 0,
            decisions: Vec::new(),
            autonomy: false,
            held: false,
            brake: BrakeCover::Nothing,
            parked: Vec::new(),
            timing: None,
            inherited: Default::default(),
            inheriting: false,
            takeover_wait: BrakeCover::Nothing,
            history: Default::default(),
        }
    }

    /// Whether edge autonomy stretches the not-ready/unreachable deadlines (config `autonomy`).
    pub(crate) fn set_autonomy(&mut self, on: bool) {
        self.autonomy = on;
    }

    /// Notes the toleration edits and taint swaps `observed` shows (every input, before the
    /// initial sync too: a standby's countdowns are found from them at its takeover).
    pub(crate) fn note_history(&mut self, world: &World, observed: &Observed, now: Time) {
        self.history.note(world.store(), observed, now);
    }

    /// What a leader knew of toleration edits and swaps, for the follower it becomes.
    pub(crate) fn take_history_from(&mut self, old: &mut TaintEviction) {
        self.history = std::mem::take(&mut old.history);
    }

    /// Holds (or releases) deletions while the caches may be stale.
    pub(crate) fn set_held(&mut self, held: bool) {
        self.held = held;
    }

    fn autonomy_of(&self, node: &Node) -> Autonomy {
        if self.autonomy {
            node.autonomy
        } else {
            Autonomy::None
        }
    }

    /// The machine API: decides on what the world reported (see [`Observed`]) at `now`,
    /// reading nodes and pods from `world`, and pushes its actions to `out`.
    pub(crate) fn decide(
        &mut self,
        world: &World,
        observed: &Observed,
        now: Time,
        out: &mut Vec<Action>,
    ) {
        let store = world.store();
        match observed {
            Observed::Node { name, before } => {
                self.node_changed(store, name, before.as_ref(), now, now, out)
            }
            Observed::Pod(change) => self.pod_changed(store, change, now, out),
            Observed::PodsGone(pods) => {
                for (key, _) in pods {
                    self.pod_deleted(key, now, out);
                }
            }
            Observed::Input(Input::Tick) => self.tick(store, now, out),
            Observed::Input(Input::EvictionResult { id, result }) => {
                self.eviction_result(store, *id, result.clone(), now, out)
            }
            // A deleted node's taints are gone with it; pending evictions of its pods are kept,
            // as upstream's (their pods are orphans that pod GC removes anyway).
            Observed::NodesGone(_) => {}
            _ => {}
        }
    }

    /// The initial sync (of a new leadership): the pods of every node with NoExecute taints are
    /// judged (pods of untainted nodes have nothing to judge).
    ///
    /// `wait`: the nodes whose countdowns found now wait for the takeover's suspects
    /// (`inherited`).
    pub(crate) fn initial_sync(
        &mut self,
        store: &ClusterStore,
        wait: BrakeCover,
        now: Time,
        out: &mut Vec<Action>,
    ) {
        self.takeover_wait = wait;
        for node in store.nodes() {
            if node.no_execute_taints().next().is_some() {
                // Taints found at a start or a takeover: their pods count from `timeAdded`,
                // unless the node is Ready again (its kubelet came back while nobody led): the
                // lifecycle takes such a taint off at first sight, and until it is off the pods
                // count from now, as upstream's, rather than go at once on a stale taint.
                let ready = node.ready().map(|c| c.status) == Some(ConditionStatus::True);
                let seen_from = if ready { now } else { Time::ZERO };
                // Inherited (waiting for the takeover's suspects): the countdowns under the
                // lifecycle's own taints, which every zone down lifts.
                self.inheriting = !ready && lifecycle_tainted(&taints_of(node));
                self.node_changed(store, &node.name, None, seen_from, now, out);
            }
        }
        self.inheriting = false;
        if self.inherited.is_empty() {
            // Nothing inherited: nothing was parked for the wait.
            self.takeover_wait = BrakeCover::Nothing;
        }
    }

    /// A node was added or changed (`before`: the version it replaced). Only its NoExecute
    /// taints matter; an update that leaves them unchanged (including `timeAdded`) is ignored,
    /// as upstream's `NodeUpdated`. Pods are judged in `namespace/name` order: same inputs,
    /// same actions. `seen_from`: no countdown starts before it (`tolerations::countdown`):
    /// `now` for a taint that appears while this machine watches (upstream's first sight: a
    /// write that lands late, after retries, gives no less than its whole `tolerationSeconds`),
    /// `Time::ZERO` for the taints found at a start or a takeover (from their `timeAdded`, or
    /// the pod's creation or last toleration edit seen if later:
    /// `tolerations::found_under_taint_since`, `history.rs`).
    fn node_changed(
        &mut self,
        store: &ClusterStore,
        name: &str,
        before: Option<&Node>,
        seen_from: Time,
        now: Time,
        out: &mut Vec<Action>,
    ) {
        let Some(node) = store.node(name) else {
            return;
        };
        // Compared with the version it replaced: every change of the store comes here as an
        // `Observed` (our own taint writes too: `World::apply`), so that version's
        // taints are the ones last judged. A node seen for the first time is judged even when
        // untainted (a node re-created under an old name cancels its pods' countdowns, as
        // upstream).
        if before.is_some_and(|b| b.no_execute_taints().eq(node.no_execute_taints())) {
            return;
        }
        let taints: Vec<Taint> = node.no_execute_taints().cloned().collect();
        let autonomy = self.autonomy_of(node);
        let pods = store.pods();
        for id in pods.on_node(name) {
            let pod = pods.view(id);
            if pod.deleting() {
                continue;
            }
            let key = pod.key();
            let tolerations = match &self.timing {
                None => std::borrow::Cow::Borrowed(&pod.tolerations()[..]),
                Some(t) => t.tolerations(node, pod.tolerations()),
            };
            let mut arrived = found_under_taint_since(seen_from, pod.creation_timestamp());
            let mut before_swap = None;
            if seen_from == Time::ZERO {
                // Found at a takeover: not before the pod's tolerations last changed, and the
                // countdown a swapped taint's first taint started is kept.
                if let Some(edited) = self.history.tolerations_changed(&key) {
                    arrived = arrived.max(edited);
                }
                before_swap = self.history.before_swap(node, arrived);
            }
            let judged = (&taints[..], before_swap.as_deref());
            self.process_pod_on_node(&key, &tolerations, judged, autonomy, arrived, now, out);
        }
        self.fire_due(store, now, out);
    }

    /// A pod was added or changed. Reacts only to what can change its fate: a new pod (or a
    /// new UID under the same name), its node, its tolerations, or its deletion starting.
    fn pod_changed(
        &mut self,
        store: &ClusterStore,
        change: &PodChange,
        now: Time,
        out: &mut Vec<Action>,
    ) {
        let pod = store.pods().view(change.id);
        let key = &change.key;
        let (replaced, moved) = match &change.before {
            None => (false, false),
            Some(before) => {
                let moved = before.node.as_ref() != pod.node_name();
                if !before.replaced
                    && !moved
                    && before.deleting == pod.deleting()
                    && before.tolerations == *pod.tolerations()
                {
                    return;
                }
                (before.replaced, moved)
            }
        };
        if replaced {
            // A new pod under an old name: the old one's eviction, whatever its state, is moot.
            self.forget_with_event(key, out);
        } else if moved {
            // The deadline was for the taints of the node it left.
            self.cancel_with_event(key, out);
        }
        if pod.deleting() {
            // Already being deleted: never again (and no retries of ours either).
            self.forget_with_event(key, out);
            return;
        }
        let Some(node) = pod.node_name().and_then(|n| store.node(n)) else {
            return;
        };
        let taints: Vec<Taint> = node.no_execute_taints().cloned().collect();
        if taints.is_empty() {
            return;
        }
        let autonomy = self.autonomy_of(node);
        // A live change of the pod (bound, moved, new tolerations) under taints already
        // there: its countdown starts now, as upstream's, not at a taint older than the pod.
        let tolerations = match &self.timing {
            None => std::borrow::Cow::Borrowed(&pod.tolerations()[..]),
            Some(t) => t.tolerations(node, pod.tolerations()),
        };
        self.process_pod_on_node(key, &tolerations, (&taints, None), autonomy, now, now, out);
        self.fire_due(store, now, out);
    }

    /// A pod was deleted: cancel its eviction (with the "Cancelling" event if one was pending)
    /// and stop any retries.
    fn pod_deleted(&mut self, key: &PodKey, _now: Time, out: &mut Vec<Action>) {
        self.forget_with_event(key, out);
    }

    /// Fires every deadline due at `now`.
    fn tick(&mut self, store: &ClusterStore, now: Time, out: &mut Vec<Action>) {
        self.fire_due(store, now, out);
    }

    /// When this machine must be ticked next: the earliest eviction deadline or retry. Changed
    /// by node taint and pod changes (countdowns start or stop), eviction results (retries)
    /// and ticks (deadlines fired).
    pub(crate) fn next_deadline(&self) -> Option<Time> {
        self.evictions.next_deadline()
    }

    /// The decisions taken since the last call, oldest first.
    pub(crate) fn take_decisions(&mut self) -> Vec<Decision> {
        std::mem::take(&mut self.decisions)
    }

    /// Pods judged against taints since start (see the module docs on cost).
    #[cfg(test)]
    pub(crate) fn pods_examined(&self) -> u64 {
        self.pods_examined
    }

    /// Pods waiting for their eviction deadline.
    pub fn pending_len(&self) -> usize {
        self.evictions.scheduled_len()
    }

    /// The deadline of `pod`'s scheduled eviction, if one is pending.
    #[cfg(test)]
    pub(crate) fn deadline_of(&self, pod: &PodKey) -> Option<Time> {
        match self.evictions.get(pod)? {
            Work::Scheduled { fire_at, .. } => Some(*fire_at),
            Work::Running { .. } => None,
        }
    }

    /// Upstream's `processPodOnNode`. `arrived`: when the pod came under the taints, if this
    /// machine saw it happen (`tolerations::countdown`); `Time::ZERO` otherwise. `taints`:
    /// the node's NoExecute taints, and (found at a takeover) the same with the taint a swap
    /// replaced in place (`history.rs`): the countdown that one started is kept, as upstream
    /// keeps the countdown that started earlier.
    #[allow(clippy::too_many_arguments)]
    fn process_pod_on_node(
        &mut self,
        key: &PodKey,
        tolerations: &[Toleration],
        (taints, before_swap): (&[Taint], Option<&[Taint]>),
        autonomy: Autonomy,
        arrived: Time,
        now: Time,
        out: &mut Vec<Action>,
    ) {
        self.pods_examined += 1;
        if !self.inheriting && !self.inherited.is_empty() && !lifecycle_tainted(taints) {
            // The lifecycle's taint went: what is left is no longer the takeover's to hold.
            self.inherited.remove(key);
        }
        let judge = |taints: &[Taint]| match autonomy {
            Autonomy::None => countdown(taints, tolerations, now, arrived),
            _ => autonomous_countdown(autonomy, taints, tolerations, now, arrived),
        };
        let mut judged = judge(taints);
        if let Some(first) = before_swap.map(judge)
            && first != Countdown::Forever
        {
            judged = first;
        }
        let (from, at) = match judged {
            Countdown::Forever => {
                self.cancel_with_event(key, out);
                return;
            }
            Countdown::NotTolerated => {
                // Any countdown is moot: evict now (a running eviction just goes on).
                self.cancel_with_event(key, out);
                self.evictions.add(key.clone(), now, now);
                return;
            }
            Countdown::Until { from, at } => (from, at),
        };
        match self.evictions.get(key) {
            None => {
                self.evictions.add_counted(key.clone(), now, from, at);
                if self.inheriting {
                    self.inherited.insert(key.clone());
                }
            }
            // Already being evicted.
            Some(Work::Running { .. }) => {}
            // Keep a countdown that started earlier, even if the pod now tolerates longer or
            // shorter: upstream compares start times, not deadlines.
            Some(Work::Scheduled { created_at, .. }) if *created_at < now => {}
            // Started this very instant (e.g. node then pod update at the same ms): upstream
            // replaces it with the new deadline; we do too, without a spurious "Cancelling".
            Some(Work::Scheduled { created_at, .. }) => {
                let created_at = *created_at;
                self.evictions.reschedule(key, created_at, from, at);
            }
        }
    }

    /// Upstream's `cancelWorkWithEvent`: the event only when a pending deadline was stopped.
    fn cancel_with_event(&mut self, key: &PodKey, out: &mut Vec<Action>) {
        self.inherited.remove(key);
        if self.evictions.cancel(key) {
            self.decisions
                .push(Decision::DeletionCancelled { pod: key.clone() });
            out.push(self.cancel_event(key));
        }
    }

    fn forget_with_event(&mut self, key: &PodKey, out: &mut Vec<Action>) {
        self.inherited.remove(key);
        if self.evictions.forget(key) {
            self.decisions
                .push(Decision::DeletionCancelled { pod: key.clone() });
            out.push(self.cancel_event(key));
        }
    }

    fn cancel_event(&self, key: &PodKey) -> Action {
        Action::RecordEvent(self.pod_event(key, format!("Cancelling deletion of Pod {key}")))
    }

    fn pod_event(&self, key: &PodKey, message: String) -> Event {
        Event {
            object: EventObject::Pod {
                namespace: key.namespace.clone(),
                name: key.name.clone(),
                uid: self.no_uid.clone(),
            },
            event_type: EventType::Normal,
            reason: EVICTION_EVENT_REASON,
            message,
            component: TAINT_EVICTION_CONTROLLER,
        }
    }
}

/// The node's NoExecute taints.
fn taints_of(node: &Node) -> Vec<Taint> {
    node.no_execute_taints().cloned().collect()
}

/// Whether `taints` hold the lifecycle's not-ready or unreachable NoExecute taint.
fn lifecycle_tainted(taints: &[Taint]) -> bool {
    use crate::model::taint_keys;
    taints
        .iter()
        .any(|t| &*t.key == taint_keys::NOT_READY || &*t.key == taint_keys::UNREACHABLE)
}
