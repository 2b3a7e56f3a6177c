//! The executor when the API server is slow, failing, or pushing back, and when the client
//! throttle paces it: it answers within one call's timeout, backs off instead of storming,
//! keeps 429'd actions queued, never sleeps (it hands the loop a wake-up time instead), and
//! keeps best-effort events from getting in the way of actions.

use std::time::{Duration, Instant};

use crate::executor_support::{Harness, mark, n, node_event, unthrottled};
use node_lifecycled::controller::{Action, ActionId, Input, LeaseReadOutcome, Outcome};
use node_lifecycled::kube::ClientSettings;
use node_lifecycled::runtime::executor::{ExecutorSettings, NO_ANSWER};
use node_lifecycled::time::Rate;
use node_lifecycled_sim::{RequestMatch, Verb};
use node_lifecycled_testkit::runqueue_wait;

fn outcomes(inputs: &[Input]) -> Vec<Outcome> {
    inputs
        .iter()
        .filter_map(|i| match i {
            Input::Result { outcome, .. } => Some(outcome.clone()),
            _ => None,
        })
        .collect()
}

#[test]
fn a_slow_server_fails_the_action_within_the_call_timeout() {
    let client = ClientSettings {
        timeout: Duration::from_millis(500),
        ..unthrottled()
    };
    let mut h = Harness::new(ExecutorSettings::default(), client);
    let pod = h.add_pod("ns", "p", "n1");
    h.sim.faults().delay_responses(
        RequestMatch::on(Verb::Patch, "pods/status"),
        Duration::from_secs(2),
    );
    h.submit([mark(1, &pod), mark(2, &pod)]);
    let started = Instant::now();
    let inputs = h.run(1);
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(450) && took < Duration::from_millis(1500),
        "one call bounded by its 500 ms timeout, took {took:?}"
    );
    assert!(
        matches!(&outcomes(&inputs)[..], [Outcome::Failed(m)] if m.contains("timed out")),
        "{inputs:?}"
    );
    let stats = h.exec.stats();
    assert_eq!(stats.requests_with("patch", NO_ANSWER), 1);
    assert_eq!(stats.backoffs, 1);
    assert!(stats.last_error.unwrap().1.contains("timed out"));
    assert_eq!(
        h.exec.pending_actions(),
        1,
        "the budget was one call: the second action waits for the next turn of the loop"
    );
}

#[test]
fn server_errors_back_off_from_100ms_doubling_and_an_answer_resets_it() {
    let mut h = Harness::real();
    let pods: Vec<_> = (0..6)
        .map(|i| h.add_pod("ns", &format!("p{i}"), "n1"))
        .collect();
    h.sim
        .faults()
        .fail_next(RequestMatch::on(Verb::Patch, "pods/status"), 4, 500);
    h.submit(pods.iter().enumerate().map(|(i, p)| mark(i as u64, p)));
    let t0 = h.now();
    let mut gaps = Vec::new();
    let mut last = t0;
    let mut results = Vec::new();
    while results.len() < 6 {
        let got = outcomes(&h.run(usize::MAX));
        if got.iter().all(|o| o != &Outcome::Ok) {
            assert!(
                got.len() <= 1,
                "one call per backoff step while failing: {got:?}"
            );
        }
        results.extend(got);
        if let Some(at) = h.exec.next_wakeup().filter(|at| *at > h.now()) {
            gaps.push(at - last);
            last = at;
            h.set_now(at);
        }
    }
    let ms = |v: u64| Duration::from_millis(v);
    assert_eq!(gaps, vec![ms(100), ms(200), ms(400), ms(800)]);
    assert!(
        results[..4]
            .iter()
            .all(|o| matches!(o, Outcome::Failed(m) if m.contains("500"))),
        "{results:?}"
    );
    assert_eq!(
        results[4..],
        [Outcome::Ok, Outcome::Ok],
        "after 1.5 s of backoff the 5th call is answered, which resets it: the 6th goes at once"
    );
    assert_eq!(h.now() - t0, ms(1500));
    let stats = h.exec.stats();
    assert_eq!(stats.backoff_until, None);
    assert_eq!(stats.requests_with("patch", 500), 4);
    assert_eq!(stats.requests_with("patch", 200), 2);
}

#[test]
fn the_backoff_is_capped_at_10s() {
    let mut h = Harness::real();
    let pods: Vec<_> = (0..12)
        .map(|i| h.add_pod("ns", &format!("p{i}"), "n1"))
        .collect();
    h.sim
        .faults()
        .fail_next(RequestMatch::on(Verb::Patch, "pods/status"), 100, 503);
    h.submit(pods.iter().enumerate().map(|(i, p)| mark(i as u64, p)));
    let mut last_gap = Duration::ZERO;
    for _ in 0..12 {
        h.run(usize::MAX);
        if let Some(at) = h.exec.next_wakeup() {
            last_gap = at - h.now();
            h.set_now(at);
        }
    }
    assert_eq!(last_gap, Duration::from_secs(10));
}

#[test]
fn too_many_requests_keeps_the_action_queued_until_retry_after() {
    let mut h = Harness::real();
    let pod = h.add_pod("ns", "p", "n1");
    h.sim
        .faults()
        .throttle_next(RequestMatch::on(Verb::Patch, "pods/status"), 1, 3);
    h.submit([mark(1, &pod)]);
    let t0 = h.now();
    assert!(h.run(usize::MAX).is_empty(), "a 429 is not an answer");
    assert_eq!(h.exec.pending_actions(), 1);
    assert_eq!(h.exec.next_wakeup(), Some(t0 + Duration::from_secs(3)));
    h.advance(Duration::from_millis(2_999));
    assert!(h.run(usize::MAX).is_empty());
    h.advance(Duration::from_millis(1));
    assert_eq!(outcomes(&h.run(usize::MAX)), vec![Outcome::Ok]);
    let stats = h.exec.stats();
    assert_eq!(stats.requests_with("patch", 429), 1);
    assert_eq!(
        stats.backoffs, 0,
        "429 is the throttle's business, not a backoff"
    );
    assert_eq!(stats.throttle_wait, Duration::from_secs(3));
}

#[test]
fn a_refused_connection_fails_a_lease_read_so_no_verdict_is_made() {
    let mut h = Harness::real();
    h.sim.faults().refuse_connections(Duration::from_secs(2));
    h.submit([Action::ReadLease {
        id: ActionId(1),
        node: n("n1"),
    }]);
    let inputs = h.run(1);
    assert!(
        matches!(&inputs[..], [Input::LeaseRead { outcome: LeaseReadOutcome::Failed(m), .. }] if m.contains("transport")),
        "{inputs:?}"
    );
}

#[test]
fn one_hundred_actions_at_qps_20_burst_30_are_paced_by_wakeups_never_by_sleeping() {
    let client = ClientSettings {
        qps: Some(Rate::per_second(20)),
        burst: 30,
        ..unthrottled()
    };
    let mut h = Harness::new(ExecutorSettings::default(), client);
    let pods: Vec<_> = (0..100)
        .map(|i| h.add_pod("ns", &format!("p{i}"), "n1"))
        .collect();
    h.submit(pods.iter().enumerate().map(|(i, p)| mark(i as u64, p)));
    let t0 = h.now();
    let wall = Instant::now();
    let waited_before = runqueue_wait();

    // Each write feeds its answer (the pod as written) and its result: count the results.
    let results = |inputs: &[Input]| {
        inputs
            .iter()
            .filter(|i| matches!(i, Input::Result { .. }))
            .count()
    };
    let first = h.run(usize::MAX);
    assert_eq!(results(&first), 30, "the burst goes at once");
    let mut done = results(&first);
    let mut turns = 0;
    while done < 100 {
        let at = h.exec.next_wakeup().unwrap();
        assert!(at > h.now(), "a wake-up in the future, not a busy loop");
        h.set_now(at);
        let got = h.run(usize::MAX);
        assert!(results(&got) > 0, "woken when a call is admitted");
        done += results(&got);
        turns += 1;
    }
    assert_eq!(
        h.now() - t0,
        Duration::from_millis(3_500),
        "70 more at 20/s"
    );
    assert_eq!(turns, 70);
    // Less than the 3.5 s paced, not counting time spent waiting for a CPU on a busy machine.
    let ran = wall
        .elapsed()
        .saturating_sub(runqueue_wait().saturating_sub(waited_before));
    assert!(
        ran < Duration::from_secs(3),
        "3.5 s of pacing took {ran:?} of wall time: nothing slept"
    );
    assert_eq!(h.exec.next_wakeup(), None);
    let stats = h.exec.stats();
    assert_eq!(stats.requests_with("patch", 200), 100);
    assert_eq!(stats.throttle_wait, Duration::from_millis(3_500));
}

/// A start at 5,000 nodes queues a RegisteredNode event per node. As client-go's broadcaster
/// (`maxQueuedEvents` = 1000), at most 1000 wait by default; the latest are the ones kept.
#[test]
fn a_start_backlog_of_registered_node_events_keeps_the_latest_thousand_by_default() {
    let mut h = Harness::new(ExecutorSettings::default(), unthrottled());
    let node = h.add_node("n1");
    h.submit((0..5_000).map(|i| node_event(&node, "RegisteredNode", format!("node {i}"))));
    assert_eq!(h.exec.pending_events(), 1_000);
    assert_eq!(h.exec.stats().events_dropped, 4_000);
    h.run(30);
    let first: Vec<String> = h
        .writes()
        .iter()
        .filter(|w| w.resource.to_string() == "events")
        .map(|w| w.summary.rsplit_once(": ").unwrap().1.to_string())
        .take(1)
        .collect();
    assert_eq!(first, ["node 4000 (source node-controller)"]);
}

#[test]
fn events_wait_behind_actions_have_their_own_pace_and_are_dropped_when_too_many_wait() {
    let settings = ExecutorSettings {
        max_queued_events: 5,
        event_rate: Rate::per_second(2),
        event_burst: 2,
        ..ExecutorSettings::default()
    };
    let mut h = Harness::new(settings, unthrottled());
    let node = h.add_node("n1");
    let pod = h.add_pod("ns", "p", "n1");
    let events: Vec<Action> = (0..8)
        .map(|i| node_event(&node, "RegisteredNode", format!("event {i}")))
        .collect();
    h.submit(events);
    h.submit([mark(1, &pod)]);
    assert_eq!(h.exec.stats().events_dropped, 3);
    assert_eq!(h.exec.pending_events(), 5);

    assert_eq!(outcomes(&h.run(1)), vec![Outcome::Ok], "the action first");
    let t0 = h.now();
    h.run(usize::MAX);
    assert_eq!(h.exec.stats().events_sent, 2, "then the events' burst");
    assert_eq!(
        h.exec.next_wakeup(),
        Some(t0 + Duration::from_millis(500)),
        "then their own pace"
    );
    h.run_until_idle();
    let messages: Vec<String> = h
        .writes()
        .iter()
        .filter(|w| w.resource.to_string() == "events")
        .map(|w| w.summary.rsplit_once(": ").unwrap().1.to_string())
        .collect();
    assert_eq!(
        messages,
        (3..8)
            .map(|i| format!("event {i} (source node-controller)"))
            .collect::<Vec<_>>(),
        "the oldest were dropped"
    );
    assert_eq!(h.now() - t0, Duration::from_millis(1_500));

    // An action submitted while events wait still goes first.
    h.submit((0..3).map(|i| node_event(&node, "RegisteredNode", format!("late {i}"))));
    h.submit([mark(2, &pod)]);
    h.advance(Duration::from_secs(10));
    h.run(1);
    assert!(h.writes().last().unwrap().is(Verb::Patch, "pods/status"));
}

#[test]
fn a_failed_event_is_dropped_and_never_fails_or_blocks_an_action() {
    let mut h = Harness::real();
    let node = h.add_node("n1");
    let pod = h.add_pod("ns", "p", "n1");
    h.sim
        .faults()
        .fail_next(RequestMatch::on(Verb::Create, "events"), 1, 403);
    h.submit([
        node_event(&node, "RegisteredNode", "x".into()),
        mark(1, &pod),
    ]);
    let inputs = h.run_until_idle();
    assert_eq!(outcomes(&inputs), vec![Outcome::Ok]);
    // The pod write's answer and its result; nothing about the event.
    assert_eq!(inputs.len(), 2, "{inputs:?}");
    assert!(
        matches!(&inputs[0], Input::PodUpsert(p) if p.key == pod.key),
        "{inputs:?}"
    );
    let stats = h.exec.stats();
    assert_eq!(stats.events_failed, 1);
    assert_eq!(stats.events_sent, 0);
}

#[test]
fn abandoning_answers_every_waiting_action_as_failed() {
    let mut h = Harness::real();
    let pod = h.add_pod("ns", "p", "n1");
    h.submit([
        mark(1, &pod),
        Action::ReadLease {
            id: ActionId(2),
            node: n("n1"),
        },
    ]);
    let inputs = h.exec.abandon("leadership lost");
    assert_eq!(inputs.len(), 2);
    assert_eq!(
        outcomes(&inputs),
        vec![Outcome::Failed("leadership lost".into())]
    );
    // Answered most urgent class first: the lease read (a verdict's step) before the pod write.
    assert!(matches!(
        &inputs[0],
        Input::LeaseRead {
            outcome: LeaseReadOutcome::Failed(_),
            ..
        }
    ));
    assert!(h.exec.is_idle());
    assert!(h.writes().is_empty());
}

/// Mass failure: the pod writes of earlier verdicts have spent the whole client budget (qps 20 /
/// burst 30), and a node falls due. Its live Lease read has a budget of its
/// own and goes at once; its status write is next in line for the shared budget, ahead of the
/// 70 pod writes still waiting, so it waits one token interval at most.
#[test]
fn a_verdict_does_not_wait_behind_pod_writes_that_spent_the_client_budget() {
    let client = ClientSettings {
        qps: Some(Rate::per_second(20)),
        burst: 30,
        ..unthrottled()
    };
    let mut h = Harness::new(ExecutorSettings::default(), client);
    let node = h.add_node("dead");
    let lease_time = h.now();
    h.sim
        .cluster()
        .create(
            node_lifecycled_sim::Resource::Leases,
            node_lifecycled_sim::fixtures::node_lease("dead", lease_time),
        )
        .unwrap();
    let pods: Vec<_> = (0..100)
        .map(|i| h.add_pod("ns", &format!("p{i}"), "n1"))
        .collect();
    h.submit(pods.iter().enumerate().map(|(i, p)| mark(i as u64, p)));
    h.run(usize::MAX); // the burst of 30 goes
    assert!(h.exec.next_wakeup().unwrap() > h.now(), "budget spent");

    h.submit([Action::ReadLease {
        id: ActionId(1000),
        node: n("dead"),
    }]);
    assert_eq!(h.exec.next_wakeup(), Some(h.now()), "the read is due now");
    let inputs = h.run(usize::MAX);
    assert!(
        matches!(
            &inputs[..],
            [Input::LeaseRead {
                id: ActionId(1000),
                outcome: LeaseReadOutcome::Found(_)
            }]
        ),
        "the live read went at once, and nothing else: {inputs:?}"
    );

    let t0 = h.now();
    h.submit([Action::UpdateNodeConditions {
        id: ActionId(1001),
        node: node.name.clone(),
        uid: node.uid.clone(),
        resource_version: node.resource_version.clone(),
        conditions: Vec::new(),
    }]);
    let at = h.exec.next_wakeup().unwrap();
    assert!(at - t0 <= Duration::from_millis(50), "{:?}", at - t0);
    h.set_now(at);
    let inputs = h.run(1);
    assert!(
        inputs.iter().any(|i| matches!(
            i,
            Input::Result {
                id: ActionId(1001),
                ..
            }
        )),
        "the status write is the next call: {inputs:?}"
    );
    // While verdicts are being made, the pod writes leave half the burst (15 tokens): they wait
    // until 16 are there, then go at 20/s. The next verdict's status write goes at once.
    let t1 = h.now();
    while h.now() - t1 < Duration::from_secs(2) {
        let at = h.exec.next_wakeup().unwrap();
        h.set_now(at);
        h.run(usize::MAX);
    }
    let before = h.exec.stats().requests_with("patch", 200);
    assert!(
        before > 1 + 30 + 20,
        "pod writes flow at the rate: {before}"
    );
    h.submit([Action::UpdateNodeConditions {
        id: ActionId(1002),
        node: node.name.clone(),
        uid: node.uid.clone(),
        resource_version: node.resource_version.clone(),
        conditions: Vec::new(),
    }]);
    assert_eq!(
        h.exec.next_wakeup(),
        Some(h.now()),
        "a token was left for it"
    );
    h.run(1);
    assert_eq!(h.exec.stats().requests_with("patch", 200), before + 1);
    // Everything still within qps 20 / burst 30: 30 at once, then 20/s.
    h.run_until_idle();
    let patches = h.exec.stats().requests_with("patch", 200);
    assert_eq!(patches, 102);
    let tokens = 30 + (h.now() - t0).as_millis() as u64 / 50;
    assert!(patches <= tokens, "{patches} writes, {tokens} tokens");
}

/// A mass failure queues a live Lease read per node: 5,000 reads at qps 20 take 250 s on their
/// own budget. The status writes of the verdicts already confirmed go on the shared budget
/// meanwhile; before, the first read waiting for a token held every write behind it, and a
/// zone of 5,000 nodes had 20 marked Unknown after a minute (`bench --mass-failure`).
#[test]
fn status_writes_go_while_the_live_reads_of_a_mass_failure_wait_for_their_budget() {
    let client = ClientSettings {
        qps: Some(Rate::per_second(20)),
        burst: 30,
        ..unthrottled()
    };
    let mut h = Harness::new(ExecutorSettings::default(), client);
    let node = h.add_node("dead");
    h.submit((0..100).map(|i| Action::ReadLease {
        id: ActionId(i),
        node: n(&format!("gone-{i}")),
    }));
    h.run(usize::MAX); // the reads' burst of 30 goes
    assert!(
        h.exec.next_wakeup().unwrap() > h.now(),
        "the reads' budget spent"
    );
    h.submit([Action::UpdateNodeConditions {
        id: ActionId(1001),
        node: node.name.clone(),
        uid: node.uid.clone(),
        resource_version: node.resource_version.clone(),
        conditions: Vec::new(),
    }]);
    assert_eq!(
        h.exec.next_wakeup(),
        Some(h.now()),
        "the status write has a token of the shared budget"
    );
    let inputs = h.run(1);
    assert!(
        inputs.iter().any(|i| matches!(
            i,
            Input::Result {
                id: ActionId(1001),
                ..
            }
        )),
        "the status write went ahead of the 70 reads waiting: {inputs:?}"
    );
}
