//! Fencing with the virtual clock: the composed controllers against a fake API that applies node
//! writes, answers live reads from its own state (annotations included) and
//! records fence commands, which each test ends by hand (exit status, timeout, dry-run).

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use super::*;
use crate::controller::tests::harness::{cond, date, lease, n, node, secs, test_settings};
use crate::controller::{
    Action, ActionId, Controllers, Input, LeaseReadOutcome, Outcome, Settings,
};
use crate::model::{ConditionStatus, Node, NodeConditionType};

fn policy() -> FencingPolicy {
    FencingPolicy {
        after: secs(300),
        max_concurrent: 1,
        match_labels: Vec::new(),
        retry_backoff: secs(60),
        retry_backoff_max: secs(600),
        remove_out_of_service_on_recovery: true,
        skip_cordoned: true,
        steps: 1,
        power_cycle: false,
        recover_timeout: secs(600),
    }
}

struct Api {
    ctl: Controllers,
    now: Time,
    nodes: BTreeMap<Name, Node>,
    annotations: BTreeMap<Name, BTreeMap<String, String>>,
    /// Nodes whose kubelet heartbeats (Lease renewed every 10 s).
    alive: BTreeSet<Name>,
    /// Nodes whose kubelet reports Ready=False (alive, not ready).
    reporting_not_ready: BTreeSet<Name>,
    /// (time, id, node) of every fence command started.
    commands: Vec<(Time, ActionId, Name)>,
    running: Vec<(ActionId, Name)>,
    /// (time, node, step) of every command started.
    ran: Vec<(Time, Name, FenceStep)>,
    events: Vec<(&'static str, String)>,
    /// The live read fails while set.
    reads_fail: bool,
    rv: u64,
}

impl Api {
    fn new(policy: FencingPolicy, t0: Time, names: &[&str]) -> Api {
        Api::with(test_settings(), policy, t0, names)
    }

    fn with(mut settings: Settings, policy: FencingPolicy, t0: Time, names: &[&str]) -> Api {
        settings.fencing = Some(policy);
        let mut api = Api {
            ctl: Controllers::new(settings, t0),
            now: t0,
            nodes: BTreeMap::new(),
            annotations: BTreeMap::new(),
            alive: BTreeSet::new(),
            reporting_not_ready: BTreeSet::new(),
            commands: Vec::new(),
            running: Vec::new(),
            ran: Vec::new(),
            events: Vec::new(),
            reads_fail: false,
            rv: 1,
        };
        for name in names {
            api.alive.insert(n(name));
            api.feed(Input::LeaseUpsert(lease(name, t0)));
            let built = node(name)
                .zone("r", "z")
                .label("rack", "a")
                .ready(ConditionStatus::True, t0, t0)
                .build();
            api.put(built);
        }
        api.feed(Input::InitialSyncDone);
        api
    }

    fn put(&mut self, mut node: Node) {
        self.rv += 1;
        node.resource_version = n(&self.rv.to_string());
        self.nodes.insert(node.name.clone(), node.clone());
        self.feed(Input::NodeUpsert(node));
    }

    fn feed(&mut self, input: Input) {
        let mut inputs = VecDeque::from([input]);
        while let Some(input) = inputs.pop_front() {
            for action in self.ctl.handle(input, self.now) {
                self.execute(action, &mut inputs);
            }
        }
    }

    fn write(&mut self, name: &Name, rv: &Name, change: impl FnOnce(&mut Node)) -> Outcome {
        let Some(node) = self.nodes.get_mut(name) else {
            return Outcome::NotFound;
        };
        if node.resource_version != *rv {
            return Outcome::Conflict;
        }
        change(node);
        self.rv += 1;
        node.resource_version = n(&self.rv.to_string());
        Outcome::Ok
    }

    fn execute(&mut self, action: Action, inputs: &mut VecDeque<Input>) {
        match action {
            Action::UpdateNodeConditions {
                id,
                node,
                resource_version,
                conditions,
                ..
            } => {
                let outcome = self.write(&node, &resource_version, |n| n.conditions = conditions);
                self.answer(&node, id, outcome, inputs);
            }
            Action::PatchNodeTaints {
                id,
                node,
                resource_version,
                taints,
                ..
            } => {
                let outcome = self.write(&node, &resource_version, |n| n.taints = taints);
                self.answer(&node, id, outcome, inputs);
            }
            Action::PatchNodeFencing {
                id,
                node,
                resource_version,
                annotations,
                taints,
                ..
            } => {
                let outcome = self.write(&node, &resource_version, |n| {
                    if let Some(t) = taints {
                        n.taints = t;
                    }
                });
                if outcome == Outcome::Ok {
                    let notes = self.annotations.entry(node.clone()).or_default();
                    for (k, v) in annotations {
                        match v {
                            Some(v) => notes.insert(k.to_string(), v),
                            None => notes.remove(k),
                        };
                    }
                }
                self.answer(&node, id, outcome, inputs);
            }
            Action::ReadLease { id, node } => {
                let outcome = match self.ctl.store().lease(&node) {
                    Some(l) => LeaseReadOutcome::Found(l.clone()),
                    None => LeaseReadOutcome::NotFound,
                };
                inputs.push_back(Input::LeaseRead { id, outcome });
            }
            Action::ReadFenceTarget { id, node } => {
                let outcome = self.read_target(&node);
                inputs.push_back(Input::FenceTargetRead { id, outcome });
            }
            Action::RunFenceCommand { id, command } => {
                self.ran
                    .push((self.now, command.node.clone(), command.step));
                self.commands.push((self.now, id, command.node.clone()));
                self.running.push((id, command.node));
            }
            Action::RecordEvent(e) => self.events.push((e.reason, e.message)),
            Action::PatchNodeLabels { id, .. }
            | Action::MarkPodNotReady { id, .. }
            | Action::SetPodStatusNodeLost { id, .. }
            | Action::DeletePod { id, .. } => inputs.push_back(Input::Result {
                id,
                outcome: Outcome::Ok,
            }),
            Action::EvictPod { .. } => {}
        }
    }

    fn answer(
        &mut self,
        node: &Name,
        id: ActionId,
        outcome: Outcome,
        inputs: &mut VecDeque<Input>,
    ) {
        if let Some(n) = self.nodes.get(node) {
            // The write's answer, or the re-read after a conflict: the node first.
            inputs.push_back(Input::NodeUpsert(n.clone()));
        }
        inputs.push_back(Input::Result { id, outcome });
    }

    fn read_target(&self, name: &Name) -> FenceTargetOutcome {
        if self.reads_fail {
            return FenceTargetOutcome::Failed("503 Service Unavailable".into());
        }
        let Some(node) = self.nodes.get(name) else {
            return FenceTargetOutcome::NotFound;
        };
        let notes = self.annotations.get(name).cloned().unwrap_or_default();
        let ready = node.ready();
        FenceTargetOutcome::Found(Box::new(FenceTarget {
            uid: node.uid.clone(),
            resource_version: node.resource_version.clone(),
            ready: ready.map(|c| c.status),
            ready_since: ready.and_then(|c| c.last_transition_time),
            labels: node
                .labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            addresses: vec![("InternalIP".into(), "10.0.0.1".into())],
            attempt: notes.get(ATTEMPT_ANNOTATION).cloned(),
            taint_added: notes.get(TAINT_ADDED_ANNOTATION).cloned(),
            fence_state: notes.get(STATE_ANNOTATION).cloned(),
            maintenance: node.maintenance.clone(),
            unschedulable: node.unschedulable,
            out_of_service: node.taints.iter().any(is_out_of_service),
            lease: match self.ctl.store().lease(name) {
                Some(l) => LeaseReadOutcome::Found(l.clone()),
                None => LeaseReadOutcome::NotFound,
            },
        }))
    }

    /// Time passes: live kubelets renew their Leases every 10 s (those reporting NotReady
    /// post Ready=False), timers fire in order.
    fn run_until(&mut self, until: Time) {
        while self.now < until {
            let step = (self.now + secs(10)).min(until);
            while let Some(t) = self.ctl.next_deadline().filter(|t| *t <= step) {
                self.now = self.now.max(t);
                self.feed(Input::Tick);
            }
            self.now = step;
            let alive: Vec<Name> = self.alive.iter().cloned().collect();
            for name in alive {
                self.feed(Input::LeaseUpsert(lease(&name, self.now)));
                let status = if self.reporting_not_ready.contains(&name) {
                    ConditionStatus::False
                } else {
                    ConditionStatus::True
                };
                let Some(mut node) = self.nodes.get(&name).cloned() else {
                    continue;
                };
                let since = node
                    .ready()
                    .filter(|c| c.status == status)
                    .and_then(|c| c.last_transition_time)
                    .unwrap_or(self.now);
                node.conditions = vec![cond(NodeConditionType::Ready, status, self.now, since)];
                self.put(node);
            }
        }
    }

    fn exit(&mut self, name: &str, outcome: FenceOutcome) {
        let at = self
            .running
            .iter()
            .position(|(_, node)| &**node == name)
            .expect("a command runs for the node");
        let (id, _) = self.running.remove(at);
        self.feed(Input::FenceExited {
            id,
            outcome,
            took: secs(3),
        });
    }

    fn commands_for(&self, name: &str) -> Vec<Time> {
        self.commands
            .iter()
            .filter(|(_, _, node)| &**node == name)
            .map(|(t, _, _)| *t)
            .collect()
    }

    fn out_of_service(&self, name: &str) -> bool {
        self.nodes[&n(name)].taints.iter().any(is_out_of_service)
    }

    fn reasons(&self) -> Vec<&'static str> {
        self.events
            .iter()
            .map(|(r, _)| *r)
            .filter(|r| r.contains("Fenc"))
            .collect()
    }

    /// When the node went Ready=Unknown for sure: the stored transition is kept to the
    /// second (as the API keeps it), so the latest instant it can stand for, the second after.
    fn unknown_since(&self, name: &str) -> Time {
        let ready = self.nodes[&n(name)].ready().cloned().unwrap();
        assert_eq!(
            ready.status,
            ConditionStatus::Unknown,
            "{name} is not Unknown"
        );
        let t = ready.last_transition_time.unwrap().as_unix_millis();
        Time::from_unix_millis(t / 1000 * 1000 + 1000)
    }
}

fn t0() -> Time {
    date(2026, 3, 1, 8, 0, 0)
}

/// The story of the issue: a node dies, the command runs once after `after`, the out-of-service
/// taint appears with our record; the node is powered back on and the taint goes.
#[test]
fn a_dead_node_is_fenced_once_after_after_then_released_when_it_comes_back() {
    let mut api = Api::new(policy(), t0(), &["n1", "n2", "n3"]);
    api.alive.remove(&n("n1"));
    api.run_until(t0() + secs(120));
    let since = api.unknown_since("n1");
    assert!(api.commands.is_empty(), "fenced before `after`");
    api.run_until(since + secs(299));
    assert!(api.commands.is_empty(), "fenced before `after`");
    api.run_until(since + secs(301));
    assert_eq!(api.commands_for("n1"), vec![since + secs(300)]);
    let stored = Time::from_unix_millis(since.as_unix_millis() - 1000);
    let record = api.annotations[&n("n1")][ATTEMPT_ANNOTATION].clone();
    assert!(
        record.starts_with(&format!("outage={}", stored.to_rfc3339())),
        "{record}"
    );
    assert!(
        !api.out_of_service("n1"),
        "tainted before the command ended"
    );

    api.exit("n1", FenceOutcome::Exited(0));
    assert!(api.out_of_service("n1"));
    assert_eq!(
        api.annotations[&n("n1")][TAINT_ADDED_ANNOTATION],
        stored.to_rfc3339()
    );
    assert_eq!(api.reasons(), ["FencingNode", "NodeFenced"]);
    api.run_until(since + secs(3600));
    assert_eq!(api.commands.len(), 1, "fenced twice in one outage");

    // Powered back on: the kubelet reports Ready, our taint and records go.
    api.alive.insert(n("n1"));
    api.run_until(since + secs(3620));
    assert!(!api.out_of_service("n1"));
    assert!(
        api.annotations[&n("n1")].is_empty(),
        "{:?}",
        api.annotations
    );
    assert_eq!(api.commands.len(), 1);
    assert_eq!(
        api.reasons(),
        ["FencingNode", "NodeFenced", "FencedNodeRecovered"]
    );
}

#[test]
fn an_out_of_service_taint_we_did_not_add_is_never_removed() {
    let mut api = Api::new(policy(), t0(), &["n1", "n2", "n3"]);
    let mut tainted = api.nodes[&n("n1")].clone();
    tainted.taints.push(out_of_service_taint(t0()));
    api.put(tainted);
    api.run_until(t0() + secs(600));
    assert!(api.out_of_service("n1"), "a person's taint was removed");
    assert!(api.commands.is_empty());
}

/// A kubelet that posts Ready=False is alive: that node is never powered off.
#[test]
fn a_node_reporting_not_ready_is_alive_and_never_fenced() {
    let mut api = Api::new(policy(), t0(), &["n1", "n2", "n3"]);
    api.reporting_not_ready.insert(n("n1"));
    api.run_until(t0() + secs(3600));
    assert!(api.commands.is_empty());
}

/// Done when: a control-plane partition (every node silent) fences nobody.
#[test]
fn a_partitioned_control_plane_with_every_node_silent_fences_nobody() {
    let mut api = Api::new(policy(), t0(), &["n1", "n2", "n3"]);
    api.alive.clear();
    api.run_until(t0() + secs(3600));
    assert_eq!(
        api.nodes[&n("n1")].ready().map(|c| c.status),
        Some(ConditionStatus::Unknown)
    );
    assert!(api.commands.is_empty(), "{:?}", api.commands);
}

#[test]
fn a_partially_disrupted_zone_is_not_fenced() {
    let mut api = Api::new(policy(), t0(), &["n1", "n2", "n3", "n4", "n5"]);
    for name in ["n1", "n2", "n3"] {
        api.alive.remove(&n(name));
    }
    api.run_until(t0() + secs(3600));
    assert!(api.commands.is_empty(), "{:?}", api.commands);
}

/// A live read that finds the Lease renewed (the watch lagged) stops the fence.
#[test]
fn a_lease_renewed_in_the_live_read_stops_the_fence() {
    let mut api = Api::new(policy(), t0(), &["n1", "n2", "n3"]);
    api.alive.remove(&n("n1"));
    api.run_until(t0() + secs(120));
    let since = api.unknown_since("n1");
    // The Lease is renewed where only the live read sees it (our cache says stale).
    let now = since + secs(300);
    let before = Time::from_unix_millis(now.as_unix_millis() - 1000);
    api.run_until(before);
    api.feed(Input::LeaseUpsert(lease("n1", before)));
    // The node lifecycle would take it back; fencing must not wait for that.
    api.run_until(now + secs(1));
    assert!(api.commands.is_empty(), "{:?}", api.commands);
}

#[test]
fn a_failed_live_read_fences_nothing_and_tries_again() {
    let mut api = Api::new(policy(), t0(), &["n1", "n2", "n3"]);
    api.alive.remove(&n("n1"));
    api.run_until(t0() + secs(120));
    let since = api.unknown_since("n1");
    api.reads_fail = true;
    api.run_until(since + secs(400));
    assert!(api.commands.is_empty());
    api.reads_fail = false;
    api.run_until(since + secs(410));
    assert_eq!(api.commands.len(), 1);
}

#[test]
fn nodes_outside_match_labels_are_not_fenced() {
    let mut p = policy();
    p.match_labels = vec![("rack".into(), "b".into())];
    let mut api = Api::new(p, t0(), &["n1", "n2", "n3"]);
    api.alive.remove(&n("n1"));
    api.run_until(t0() + secs(3600));
    assert!(api.commands.is_empty());

    let mut p = policy();
    p.match_labels = vec![("rack".into(), "a".into())];
    let mut api = Api::new(p, t0(), &["n1", "n2", "n3"]);
    api.alive.remove(&n("n1"));
    api.run_until(t0() + secs(3600));
    assert_eq!(api.commands.len(), 1);
}

/// Non-zero exit (and a timeout) → FencingFailed, tried again after 1 m, then 2 m (doubling).
#[test]
fn a_failed_fence_is_retried_with_a_doubling_backoff() {
    let mut api = Api::new(policy(), t0(), &["n1", "n2", "n3"]);
    api.alive.remove(&n("n1"));
    api.run_until(t0() + secs(120));
    let since = api.unknown_since("n1");
    let first = since + secs(300);
    api.run_until(first);
    assert_eq!(api.commands_for("n1"), [first]);
    api.exit("n1", FenceOutcome::Exited(1));
    assert!(!api.out_of_service("n1"));
    api.run_until(first + secs(59));
    assert_eq!(api.commands.len(), 1, "retried before the backoff");
    api.run_until(first + secs(61));
    assert_eq!(api.commands_for("n1"), [first, first + secs(60)]);
    api.exit("n1", FenceOutcome::TimedOut);
    api.run_until(first + secs(60 + 119));
    assert_eq!(api.commands.len(), 2, "the second wait is 2 m");
    api.run_until(first + secs(60 + 121));
    assert_eq!(api.commands.len(), 3);
    api.exit("n1", FenceOutcome::Exited(0));
    assert!(api.out_of_service("n1"));
    assert_eq!(
        api.reasons(),
        [
            "FencingNode",
            "FencingFailed",
            "FencingNode",
            "FencingFailed",
            "FencingNode",
            "NodeFenced"
        ]
    );
    let failed = &api
        .events
        .iter()
        .find(|(r, _)| *r == "FencingFailed")
        .unwrap()
        .1;
    assert!(failed.contains("exit status 1"), "{failed}");
}

#[test]
fn max_concurrent_bounds_the_fence_commands_running_at_once() {
    let mut api = Api::new(policy(), t0(), &["n1", "n2", "n3", "n4", "n5", "n6"]);
    api.alive.remove(&n("n1"));
    api.alive.remove(&n("n2"));
    api.run_until(t0() + secs(120));
    let since = api.unknown_since("n1").max(api.unknown_since("n2"));
    api.run_until(since + secs(400));
    assert_eq!(api.commands.len(), 1, "two at once with max_concurrent = 1");
    let first = api.commands[0].2.clone();
    api.exit(&first, FenceOutcome::Exited(0));
    assert_eq!(api.commands.len(), 2, "the next waits only for the slot");
    assert_ne!(api.commands[1].2, first);

    let mut p = policy();
    p.max_concurrent = 2;
    let mut api = Api::new(p, t0(), &["n1", "n2", "n3", "n4", "n5", "n6"]);
    api.alive.remove(&n("n1"));
    api.alive.remove(&n("n2"));
    api.run_until(t0() + secs(500));
    assert_eq!(api.commands.len(), 2);
}

/// A restart while the command runs: the new process finds the attempt record for the same
/// outage, waits one more full `after`, checks again, then runs once.
#[test]
fn a_restart_mid_fence_waits_a_full_after_for_a_fresh_verdict() {
    let mut api = Api::new(policy(), t0(), &["n1", "n2", "n3"]);
    api.alive.remove(&n("n1"));
    api.run_until(t0() + secs(120));
    let since = api.unknown_since("n1");
    api.run_until(since + secs(310));
    assert_eq!(api.commands.len(), 1);

    // Restart: a new process, same cluster (nodes, Leases, annotations), nothing in memory.
    let restart = since + secs(320);
    let mut settings = test_settings();
    settings.fencing = Some(policy());
    api.ctl = Controllers::new(settings, restart);
    api.now = restart;
    api.running.clear();
    for name in ["n1", "n2", "n3"] {
        let renew = if name == "n1" { t0() } else { restart };
        api.feed(Input::LeaseUpsert(lease(name, renew)));
        let node = api.nodes[&n(name)].clone();
        api.feed(Input::NodeUpsert(node));
    }
    api.feed(Input::InitialSyncDone);
    api.run_until(restart + secs(299));
    assert_eq!(
        api.commands.len(),
        1,
        "ran again without a fresh verdict: {:?} restart {restart:?}",
        api.commands
    );
    api.run_until(restart + secs(320));
    assert_eq!(api.commands.len(), 2);
    api.exit("n1", FenceOutcome::Exited(0));
    assert!(api.out_of_service("n1"));
}

#[test]
fn a_node_that_recovers_while_its_command_runs_is_not_tainted() {
    let mut api = Api::new(policy(), t0(), &["n1", "n2", "n3"]);
    api.alive.remove(&n("n1"));
    api.run_until(t0() + secs(120));
    let since = api.unknown_since("n1");
    api.run_until(since + secs(301));
    assert_eq!(api.commands.len(), 1);
    api.alive.insert(n("n1"));
    api.run_until(since + secs(320));
    assert_eq!(
        api.nodes[&n("n1")].ready().map(|c| c.status),
        Some(ConditionStatus::True)
    );
    api.exit("n1", FenceOutcome::Exited(0));
    assert!(!api.out_of_service("n1"));
    api.run_until(since + secs(3600));
    assert_eq!(api.commands.len(), 1);
}

/// Dry-run: the shell runs nothing and answers `DryRun`; no taint, no retry in this outage.
#[test]
fn dry_run_adds_no_taint_and_does_not_retry() {
    let mut api = Api::new(policy(), t0(), &["n1", "n2", "n3"]);
    api.alive.remove(&n("n1"));
    api.run_until(t0() + secs(120));
    let since = api.unknown_since("n1");
    api.run_until(since + secs(301));
    api.exit("n1", FenceOutcome::DryRun);
    api.run_until(since + secs(3600));
    assert!(!api.out_of_service("n1"));
    assert_eq!(api.commands.len(), 1);
}

#[test]
fn nothing_is_fenced_without_fencing_settings_or_before_the_initial_sync() {
    let t = t0();
    let mut ctl = Controllers::new(test_settings(), t);
    let dead = node("n1").ready(ConditionStatus::Unknown, t, t).build();
    let mut settings = test_settings();
    settings.fencing = Some(policy());
    let mut unsynced = Controllers::new(settings, t);
    for c in [&mut ctl, &mut unsynced] {
        let actions = c.handle(Input::NodeUpsert(dead.clone()), t + secs(3600));
        assert!(actions.is_empty(), "{actions:?}");
    }
    assert!(ctl.fencing().is_none());
}

#[test]
fn backoff_doubles_up_to_its_maximum() {
    let p = policy();
    assert_eq!(p.backoff(1), secs(60));
    assert_eq!(p.backoff(2), secs(120));
    assert_eq!(p.backoff(4), secs(480));
    assert_eq!(p.backoff(5), secs(600));
    assert_eq!(p.backoff(u32::MAX), secs(600));
    assert_eq!(
        attempt_outage(&attempt_record(t0(), t0() + secs(5))),
        Some(t0())
    );
    assert_eq!(attempt_outage("garbage"), None);
}

/// Row "brake vs fencing": two of six nodes dead is more than `max_unhealthy = 1`: nobody is
/// fenced while the brake is engaged, however long; when one comes back the brake releases and
/// the other, dead for longer than `after`, is fenced then.
#[test]
fn brake_vs_fencing_no_fence_while_engaged_then_fenced_after_release() {
    let settings = Settings {
        max_unhealthy: Some(crate::controller::brake::MaxUnhealthy::Count(1)),
        ..test_settings()
    };
    let names = ["n1", "n2", "n3", "n4", "n5", "n6"];
    let mut api = Api::with(settings, policy(), t0(), &names);
    api.alive.remove(&n("n1"));
    api.alive.remove(&n("n2"));
    api.run_until(t0() + secs(3600));
    assert!(api.commands.is_empty(), "{:?}", api.commands);
    api.alive.insert(n("n2"));
    api.run_until(t0() + secs(3700));
    let fenced = api.commands_for("n1");
    assert_eq!(fenced.len(), 1, "{:?}", api.commands);
    assert!(fenced[0] > t0() + secs(3600), "{fenced:?}");
    assert!(api.commands_for("n2").is_empty());
}
mod cycle;
mod holds;
