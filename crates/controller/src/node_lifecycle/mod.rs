//! The node lifecycle controller as a deterministic state machine: `(input, now) -> actions`.
//!
//! Upstream runs a 5 s `monitorNodeHealth` pass, a 100 ms NoExecute tainting pass and node/pod
//! event workers. Here the same decisions are driven by events and exact timers:
//! - a node's health verdict is due at `probe_time + grace` (its own timer), and before
//!   declaring it Unknown on an expired Lease the Lease is read live (KEP-5647);
//! - node updates reconcile NoSchedule taints and labels at once;
//! - the periodic pass (every `node_monitor_period`) re-evaluates every node as a safety net;
//! - zone disruption is recomputed whenever a node's Ready changes (counts kept incrementally).
//!
//! Writes are optimistic and asynchronous: each carries an id, the result comes back as an
//! input. At most one taint write, one label write and one status write per node is in flight.

mod brake;
mod busy;
mod changes;
mod clocks;
mod deadlines;
mod disruption;
mod dump;
mod entries;
mod entry;
mod facts;
mod health;
#[cfg(test)]
mod inspect;
mod legacy_eviction;
mod observe;
mod partitions;
mod pass_gate;
mod pending;
mod pods;
mod results;
mod suspect_tally;
mod suspects;
mod tainting;

pub use legacy_eviction::NODE_LOST_REASON;

use busy::Busy;
use deadlines::Timer;
use entry::{EvictionJob, NodeEntry, TaintWrite, Verdict};
use pending::Pending;

use std::rc::Rc;
use std::time::Duration;

use crate::model::{Name, Node, PodView};
use crate::time::Time;

use super::actions::Action;
use super::condition_taints::{ConditionTaint, retire_condition_taints};
use super::decisions::{Decision, LeaseEvidence};
use super::dump::LegacyEviction;
use super::events::{Event, EventObject, EventType, NODE_CONTROLLER};
use super::health::NodeHealth;
use super::in_flight::{InFlight, NODE_LIFECYCLE_IDS};
use super::inputs::{Input, Observed};
use super::rate_limited_queue::RateLimitedTimedQueue;
use super::settings::Settings;
use super::taint_ops::TaintOp;
use super::world::World;
use super::zones::Zones;

pub struct NodeLifecycle {
    settings: Settings,
    /// Fixed at start: switching eviction modes needs a restart.
    taint_based: bool,
    synced: bool,
    /// What the controller keeps per node beside the node itself (the node, its Lease and its
    /// pods are in the `World`'s store, `controller/world.rs`, which every method that judges
    /// them is given), by name and by the node's key (`entries.rs`).
    nodes: entries::Entries,
    /// The zones: their counts, states, holds and queues (`zones.rs`).
    zones: Zones,
    /// Its timers: the passes, retries, the brake's release, the nodes' grace deadlines.
    deadlines: deadlines::Deadlines,
    /// Writes and live reads sent and not answered yet, with what each is about.
    in_flight: InFlight<Pending>,
    /// Pods being marked NotReady, nodes whose pods are kept Ready, pods marked NodeLost.
    pod_work: pods::PodWork,
    disruption_dirty: bool,
    /// What was decided and why since the shell last took them (see [`Decision`]).
    decisions: Vec<Decision>,
    /// What gates the zone queues' pass (`pass_gate.rs`).
    pass_gate: pass_gate::PassGate,
    /// Custom condition taints a reload dropped from the config: still ours, so they are
    /// removed from every node rather than left behind.
    retired_condition_taints: Vec<ConditionTaint>,
    /// Test switch: the monitor pass evaluates every node, settled or not (the reference the
    /// differential test compares the pass with).
    full_monitor_pass: bool,
    /// The brakes on mass decisions (`brake.rs`); empty when none is configured.
    brakes: crate::brake::Brakes,
    /// Clocks a previous leader left (`clocks.rs`), honoured at the initial sync.
    inherited_clocks: Option<crate::clocks::Clocks>,
    /// The suspects and the brakes' counts, kept as nodes change (`suspect_tally.rs`).
    tally: suspect_tally::SuspectTally,
}

fn node_event(node: &Node, reason: &'static str, message: String) -> Action {
    Action::RecordEvent(Event {
        object: EventObject::Node {
            name: node.name.clone(),
            uid: node.uid.clone(),
        },
        event_type: EventType::Normal,
        reason,
        message,
        component: NODE_CONTROLLER,
    })
}

fn pod_event(
    pod: PodView<'_>,
    event_type: EventType,
    reason: &'static str,
    message: String,
) -> Action {
    Action::RecordEvent(Event {
        object: EventObject::Pod {
            namespace: pod.namespace().clone(),
            name: Name::from(pod.name()),
            uid: pod.uid(),
        },
        event_type,
        reason,
        message,
        component: NODE_CONTROLLER,
    })
}

impl NodeLifecycle {
    pub(crate) fn new(settings: Settings, _now: Time) -> NodeLifecycle {
        NodeLifecycle {
            taint_based: settings.taint_based_eviction,
            settings,
            synced: false,
            nodes: Default::default(),
            zones: Zones::default(),
            deadlines: Default::default(),
            in_flight: InFlight::counting(NODE_LIFECYCLE_IDS, Pending::is_verdict),
            pod_work: Default::default(),
            disruption_dirty: false,
            decisions: Vec::new(),
            retired_condition_taints: Vec::new(),
            pass_gate: Default::default(),
            full_monitor_pass: false,
            brakes: Default::default(),
            inherited_clocks: None,
            tally: Default::default(),
        }
    }

    /// The decisions taken since the last call, oldest first.
    pub(crate) fn take_decisions(&mut self) -> Vec<Decision> {
        std::mem::take(&mut self.decisions)
    }

    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// When this machine must be ticked next: the earliest of its timers (the periodic pass,
    /// each node's grace, the zone queues' pass, retries). Changed by every input that arms or
    /// disarms one (node and lease changes, answers, ticks) and by `apply_settings`.
    pub(crate) fn next_deadline(&self) -> Option<Time> {
        self.deadlines.next_deadline()
    }

    /// The periodic pass's window while it is pending: from `monitor_pass_early` before its
    /// tick (a tick from then on runs it) to its tick. `None` when no pass is pending (before
    /// the initial sync).
    pub(crate) fn monitor_pass_window(&self) -> Option<(Time, Time)> {
        let tick = self.deadlines.deadline(&Timer::MonitorPass)?;
        let early = self
            .settings
            .monitor_pass_early
            .min(self.settings.node_monitor_period);
        let early_ms = crate::time::duration_millis(early);
        let opens = Time::from_unix_millis(tick.as_unix_millis().saturating_sub(early_ms));
        Some((opens, tick))
    }

    /// Test switch: the monitor pass evaluates every node (see `monitor_pass`).
    #[doc(hidden)]
    pub(crate) fn use_full_monitor_pass(&mut self, full: bool) {
        self.full_monitor_pass = full;
    }

    /// Whether the zone queues' pass may act (see `Controllers`, `cache_currency.rs`).
    pub(super) fn set_caches_current(&mut self, current: bool) {
        self.pass_gate.set_caches_current(current);
    }

    /// The rate-limited queue of the node's zone (for `explain`: its place and ETA).
    pub(crate) fn zone_queue_of(&self, node: &str) -> Option<&RateLimitedTimedQueue> {
        let entry = self.nodes.get(node)?;
        Some(self.zones.get(&entry.zone)?.queue())
    }

    /// Every zone is fully disrupted: most likely our own view of the cluster is broken.
    #[cfg(test)]
    pub(crate) fn all_zones_down(&self) -> bool {
        self.all_zones_fully_disrupted()
    }

    /// The least lag seen from each kubelet's renewals (`NodeEntry::lease_lag_ms`), for the
    /// follower this machine becomes: at its takeover a node's health clock starts from its
    /// last renewal (`register`).
    pub(super) fn lease_lags(&self) -> Vec<(Name, i64)> {
        self.nodes
            .iter()
            .filter_map(|(n, e)| e.lease_lag_ms.map(|lag| (n.clone(), lag)))
            .collect()
    }

    /// Keeps the lags a leader saw (see [`Self::lease_lags`]) for the nodes still here.
    pub(super) fn keep_lease_lags(&mut self, lags: Vec<(Name, i64)>) {
        self.tally_invalidate();
        for (name, lag) in lags {
            if let Some(e) = self.nodes.get_mut(&name) {
                e.lease_lag_ms = Some(lag);
            }
        }
    }

    /// The world adopted from another machine's (a follower keeps the leader's caches warm,
    /// `World::adopt`): every node gets an entry, unregistered until the initial sync.
    pub(super) fn adopt_world(&mut self, world: &World, now: Time) {
        let store = world.store();
        let names: Vec<Name> = store.nodes().map(|n| n.name.clone()).collect();
        let mut out = Vec::new();
        for name in &names {
            self.on_node_changed(store, name, None, now, &mut out);
        }
        self.nodes.compact();
        self.tally_slots_moved();
        debug_assert!(out.is_empty(), "an unsynced machine decides nothing");
    }

    /// The machine API (the same shape as `TaintEviction::decide`): decides on what
    /// `World::apply` reported at `now`, reading the cluster from `world`, and pushes its
    /// actions to `out`.
    pub(crate) fn decide(
        &mut self,
        world: &World,
        observed: &Observed,
        now: Time,
        out: &mut Vec<Action>,
    ) {
        let store = world.store();
        let mut changed_node = None;
        let brakes_follow = self.brakes_follow(observed);
        // A renewal changes no zone's queue, hold or cooldown (only a brake's count, while one
        // is engaged): the tainting pass stays armed as it is.
        let renewal = matches!(observed, Observed::Lease { .. });
        match observed {
            Observed::Nothing => {}
            Observed::Node { name, before } => {
                self.on_node_changed(store, name, before.as_ref(), now, out);
                changed_node = Some(name);
            }
            Observed::NodesGone(nodes) => {
                for node in nodes {
                    self.forget_node(node, out);
                }
                // The end of a full state of nodes (the store refilled its map too).
                self.nodes.compact();
                self.tally_slots_moved();
            }
            Observed::Lease {
                name,
                renew_time,
                node,
                renewed,
            } => {
                if let Some(key) = *node {
                    self.on_lease_changed(store, name, key, *renew_time, *renewed, now);
                }
            }
            Observed::Pod(change) => self.on_pod_changed(store, change, now, out),
            Observed::PodsGone(pods) => {
                for (key, _) in pods {
                    self.pod_work.pod_gone(key);
                }
            }
            Observed::Input(input) => match input {
                Input::InitialSyncDone => self.on_initial_sync(store, now, out),
                Input::Tick => self.on_tick(store, now, out),
                Input::Result { id, outcome } => {
                    let node = self.in_flight.get(*id).map(|p| p.node().clone());
                    self.on_result(store, *id, outcome.clone(), now, out);
                    // The answer may have ended a verdict on every path (`results.rs`).
                    if let Some(node) = node {
                        self.tally_refresh(store, &node, now);
                    }
                }
                Input::LeaseRead { id, outcome } => {
                    let node = self.in_flight.get(*id).map(|p| p.node().clone());
                    self.on_lease_read(store, *id, outcome.clone(), now, out);
                    if let Some(node) = node {
                        self.tally_refresh(store, &node, now);
                    }
                }
                // Watched objects went through `World::apply`; eviction results are routed to the
                // taint eviction machine by `Controllers`.
                _ => {}
            },
        }
        if self.synced {
            // A hold starts or ends with its domain's state (its `hold_max` runs out in the
            // eviction pass): not looked at on inputs that changed no zone, such as renewals.
            let zones_changed = self.disruption_dirty;
            if self.disruption_dirty {
                self.handle_disruption(store, now, out);
            }
            if brakes_follow {
                self.update_brakes(store, now);
            }
            if zones_changed {
                self.refresh_holds(store, now);
            }
            if let Some(name) = changed_node {
                self.taint_due_now(store, name, now, out);
            }
            if !renewal || zones_changed || brakes_follow {
                self.arm_eviction_pass(store, now);
            }
        }
    }

    /// Applies new settings (config reload): rates, thresholds, graces and the period take
    /// effect now. `taint_based_eviction` is kept as started (a mode switch needs a restart).
    pub(crate) fn apply_settings(
        &mut self,
        world: &World,
        mut settings: Settings,
        now: Time,
    ) -> Vec<Action> {
        let store = world.store();
        settings.taint_based_eviction = self.taint_based;
        let period_changed = settings.node_monitor_period != self.settings.node_monitor_period;
        retire_condition_taints(
            &mut self.retired_condition_taints,
            &self.settings.condition_taints,
            &settings.condition_taints,
        );
        self.settings = settings;
        self.tally_invalidate();
        self.pool_cover_changed();
        let mut out = Vec::new();
        if !self.synced {
            return out;
        }
        if period_changed {
            self.deadlines
                .schedule(Timer::MonitorPass, now + self.settings.node_monitor_period);
        }
        let names: Vec<Name> = self.nodes.keys().cloned().collect();
        for name in &names {
            self.arm_grace(store, name, now);
            self.move_to_domain(store, name, now);
        }
        if !self.all_zones_fully_disrupted() {
            let keys: Vec<Name> = self.zones.keys().cloned().collect();
            for key in keys {
                self.set_limiter_in_zone(store, &key, now);
            }
        }
        self.disruption_dirty = true;
        self.handle_disruption(store, now, &mut out);
        // The settings may hold a domain, or no longer.
        self.refresh_holds(store, now);
        self.update_brakes(store, now);
        for name in &names {
            self.evaluate(store, name, now, &mut out);
            // The condition taint rules may have changed.
            self.pump_taints(store, name, now, &mut out);
            if self.taint_based {
                self.queue_condition_taints(store, name, now);
            }
        }
        self.arm_eviction_pass(store, now);
        out
    }

    // ---- inputs ----------------------------------------------------------------------------
}

/// 0–100 ms, from the node's name and the try (FNV-1a): spreads the retries of nodes that
/// conflicted together, as upstream's random jitter does, and keeps runs reproducible.
fn taint_jitter(node: &str, tries: u32) -> Duration {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in node.bytes().chain(tries.to_le_bytes()) {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    Duration::from_millis(h % 101)
}

/// The sizes of a node's entry and of its parts, for `examples/node_floor.rs`.
pub(crate) fn entry_sizes() -> Vec<(&'static str, usize)> {
    use std::mem::size_of;
    vec![
        ("NodeEntry", size_of::<NodeEntry>()),
        ("health", size_of::<NodeHealth>()),
        ("Busy (boxed, busy nodes only)", size_of::<Busy>()),
        ("verdict", size_of::<Verdict>()),
        ("lease evidence", size_of::<Option<LeaseEvidence>>()),
        ("taint write", size_of::<Option<TaintWrite>>()),
        ("legacy job", size_of::<Option<EvictionJob>>()),
    ]
}

/// The domain named `key` as a shared name: the zone's own when it exists (one copy for its
/// nodes, not one per node).
fn domain_name(zones: &Zones, key: String) -> Name {
    match zones.get(key.as_str()) {
        Some(zone) => zone.key.clone(),
        None => Rc::from(key),
    }
}

/// Time elapsed, for the dump (`Duration::ZERO` when `then` is in the future).
fn age(now: Time, then: Time) -> Duration {
    now.since(then)
}
