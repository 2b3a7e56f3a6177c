//! Leader election end to end: two candidates in one process, each with its own bearer token,
//! against the simulated API server over real sockets. Short durations (2 s lease, 1 s renew
//! deadline, 200 ms retry) stand in for 15 s / 10 s / 2 s. The candidates are driven the way
//! the daemon's loop drives them: `step()` when `next_deadline()` is due, nothing in between.

use std::time::Duration;

use node_lifecycled::kube::{ApiClient, ClientSettings, Connection, Credentials, Scheme};
use node_lifecycled::leader::{ElectionSettings, LeaderElection, LeaseLock, Transition};
use node_lifecycled::runtime::Clock;
use node_lifecycled::time::Time;
use node_lifecycled_sim::{RequestMatch, SimConfig, SimHandle, SimServer, Verb, WriteRecord};

const LEASE: Duration = Duration::from_secs(2);
const RENEW_DEADLINE: Duration = Duration::from_secs(1);
const RETRY: Duration = Duration::from_millis(200);
/// Scheduling noise on a shared, busy test machine.
const SLACK: Duration = Duration::from_millis(500);

struct Candidate {
    name: &'static str,
    election: LeaderElection,
    /// false once "killed": it is no longer stepped (kill -9 makes no more requests).
    running: bool,
    acquired: Vec<Time>,
    lost: Vec<Time>,
}

fn candidate(sim: &SimHandle, clock: &Clock, token: &'static str) -> Candidate {
    let connection = Connection {
        scheme: Scheme::Http,
        host: "127.0.0.1".into(),
        port: sim.addr().port(),
        base_path: String::new(),
        tls: None,
        credentials: Credentials::Token(token.into()),
    };
    let settings = ClientSettings {
        timeout: Duration::from_millis(500),
        qps: None,
        ..ClientSettings::default()
    };
    let c = clock.clone();
    let client = ApiClient::new(&connection, &settings, Box::new(move || c.now())).unwrap();
    let c = clock.clone();
    let election = LeaderElection::new(
        ElectionSettings {
            identity: token.into(),
            lease_duration: LEASE,
            renew_deadline: RENEW_DEADLINE,
            retry_period: RETRY,
        },
        LeaseLock::new("kube-system", "node-lifecycled"),
        client,
        Box::new(move || c.now()),
    );
    Candidate {
        name: token,
        election,
        running: true,
        acquired: Vec::new(),
        lost: Vec::new(),
    }
}

/// Steps every running candidate when it is due until `until`, asserting after every step
/// that at most one running candidate may act.
fn run_until(candidates: &mut [Candidate], clock: &Clock, until: Time) {
    loop {
        let now = clock.now();
        if now >= until {
            return;
        }
        for c in candidates.iter_mut().filter(|c| c.running) {
            if c.election.next_deadline().is_some_and(|d| d <= now) {
                for t in c.election.step() {
                    match t {
                        Transition::Acquired => c.acquired.push(clock.now()),
                        Transition::Lost => c.lost.push(clock.now()),
                        Transition::NewLeader(_) => {}
                    }
                }
            }
        }
        let now = clock.now();
        let leaders: Vec<&str> = candidates
            .iter()
            .filter(|c| c.running && c.election.is_leader(now))
            .map(|c| c.name)
            .collect();
        assert!(leaders.len() <= 1, "two leaders at {now:?}: {leaders:?}");
        let next = candidates
            .iter()
            .filter(|c| c.running)
            .filter_map(|c| c.election.next_deadline())
            .min()
            .unwrap_or(until)
            .min(until);
        let wait = next.since(clock.now()).min(Duration::from_millis(20));
        std::thread::sleep(wait.max(Duration::from_millis(1)));
    }
}

/// Successful writes of the leader lease, as the server recorded them: (writer, verb).
fn lease_writes(sim: &SimHandle) -> Vec<(String, Verb)> {
    sim.writes()
        .iter()
        .filter(|w: &&WriteRecord| w.target() == "leases" && w.succeeded())
        .map(|w| (w.identity.label().to_string(), w.verb))
        .collect()
}

fn leader_of(candidates: &[Candidate], now: Time) -> Option<&'static str> {
    candidates
        .iter()
        .find(|c| c.running && c.election.is_leader(now))
        .map(|c| c.name)
}

fn start() -> (SimHandle, Clock, Vec<Candidate>) {
    let sim = SimServer::start(SimConfig::default()).unwrap();
    let clock = Clock::start();
    let candidates = vec![
        candidate(&sim, &clock, "daemon-a"),
        candidate(&sim, &clock, "daemon-b"),
    ];
    (sim, clock, candidates)
}

#[test]
fn only_one_of_two_candidates_holds_the_lease_and_only_it_writes_the_lease() {
    let (sim, clock, mut candidates) = start();
    let begin = clock.now();
    run_until(&mut candidates, &clock, begin + Duration::from_secs(3));

    let leader = leader_of(&candidates, clock.now()).expect("someone leads");
    let follower = candidates.iter().find(|c| c.name != leader).unwrap();
    assert!(follower.acquired.is_empty(), "{} never led", follower.name);
    let writes = lease_writes(&sim);
    assert_eq!(writes[0], (leader.to_string(), Verb::Create));
    assert!(
        writes.iter().all(|(who, _)| who == leader),
        "every lease write is by the leader: {writes:?}"
    );
    // Renewed about every retry period for 3 s.
    let renewals = writes.iter().filter(|(_, v)| *v == Verb::Update).count();
    assert!((8..=16).contains(&renewals), "{renewals} renewals");
    let lease = sim
        .cluster()
        .get(
            node_lifecycled_sim::Resource::Leases,
            Some("kube-system"),
            "node-lifecycled",
        )
        .unwrap();
    assert_eq!(lease["spec"]["holderIdentity"], leader);
    assert_eq!(lease["spec"]["leaseDurationSeconds"], 2);
    let stats = follower.election.stats(clock.now());
    assert_eq!(stats.holder.as_deref(), Some(leader));
    assert!(!stats.is_leader);
}

#[test]
fn killed_leader_is_replaced_within_lease_duration_plus_retry_period() {
    let (sim, clock, mut candidates) = start();
    let begin = clock.now();
    run_until(&mut candidates, &clock, begin + Duration::from_millis(1500));
    let leader = leader_of(&candidates, clock.now()).expect("someone leads");
    let (li, fi) = if candidates[0].name == leader {
        (0, 1)
    } else {
        (1, 0)
    };

    // kill -9: the leader stops making requests at once.
    candidates[li].running = false;
    let killed_at = clock.now();
    let last_renew_sent = candidates[li]
        .election
        .stats(killed_at)
        .last_renewed_at
        .unwrap();
    run_until(&mut candidates, &clock, killed_at + LEASE + RETRY + SLACK);

    let took_over = *candidates[fi]
        .acquired
        .first()
        .expect("the follower took over");
    let delay = took_over.since(killed_at);
    eprintln!("takeover {delay:?} after kill -9 (lease {LEASE:?}, retry {RETRY:?})");
    assert!(delay <= LEASE + RETRY + SLACK, "{delay:?}");
    // Never before the dead leader's lease could have run out on the follower's clock.
    assert!(
        took_over >= last_renew_sent + LEASE,
        "took over {:?} after the last renewal",
        took_over.since(last_renew_sent)
    );
    let writes = lease_writes(&sim);
    let first_by_follower = writes
        .iter()
        .position(|(who, _)| who == candidates[fi].name)
        .unwrap();
    assert!(
        writes[first_by_follower..]
            .iter()
            .all(|(who, _)| who == candidates[fi].name),
        "{writes:?}"
    );
    let stats = candidates[fi].election.stats(clock.now());
    assert_eq!(stats.lease_transitions, Some(1));
}

#[test]
fn released_lease_is_taken_over_within_one_retry_period() {
    let (sim, clock, mut candidates) = start();
    let begin = clock.now();
    run_until(&mut candidates, &clock, begin + Duration::from_millis(1500));
    let leader = leader_of(&candidates, clock.now()).expect("someone leads");
    let (li, fi) = if candidates[0].name == leader {
        (0, 1)
    } else {
        (1, 0)
    };

    // SIGTERM: release, then exit.
    candidates[li].election.release().unwrap();
    let released_at = clock.now();
    assert!(!candidates[li].election.is_leader(released_at));
    candidates[li].running = false;
    run_until(&mut candidates, &clock, released_at + RETRY + SLACK);

    let took_over = *candidates[fi]
        .acquired
        .first()
        .expect("the follower took over");
    let delay = took_over.since(released_at);
    eprintln!("takeover {delay:?} after release (retry {RETRY:?})");
    assert!(delay <= RETRY + SLACK, "{delay:?}");
    let writes = lease_writes(&sim);
    let n = writes.len();
    assert_eq!(writes[n - 1].0, candidates[fi].name);
    assert!(
        writes
            .iter()
            .any(|(who, v)| who == candidates[li].name && *v == Verb::Update)
    );
    let lease = sim
        .cluster()
        .get(
            node_lifecycled_sim::Resource::Leases,
            Some("kube-system"),
            "node-lifecycled",
        )
        .unwrap();
    assert_eq!(lease["spec"]["holderIdentity"], candidates[fi].name);
}

#[test]
fn leader_that_cannot_renew_stops_at_its_renew_deadline_before_anyone_takes_over() {
    let (sim, clock, mut candidates) = start();
    let begin = clock.now();
    run_until(&mut candidates, &clock, begin + Duration::from_millis(1500));
    let leader = leader_of(&candidates, clock.now()).expect("someone leads");
    let li = candidates.iter().position(|c| c.name == leader).unwrap();

    // Every lease update now fails (the follower only reads while the lease is live).
    sim.faults()
        .fail_next(RequestMatch::on(Verb::Update, "leases"), 1000, 500);
    let cut_at = clock.now();
    let last_renew_sent = candidates[li]
        .election
        .stats(cut_at)
        .last_renewed_at
        .unwrap();
    run_until(&mut candidates, &clock, cut_at + LEASE + SLACK);
    let lost = *candidates[li]
        .lost
        .first()
        .expect("the leader stepped down");
    eprintln!(
        "stepped down {:?} after its last successful renewal (renew deadline {RENEW_DEADLINE:?})",
        lost.since(last_renew_sent)
    );
    assert!(lost.since(last_renew_sent) >= RENEW_DEADLINE);
    assert!(lost.since(last_renew_sent) <= RENEW_DEADLINE + SLACK);
    assert!(leader_of(&candidates, clock.now()).is_none());

    // The server heals: someone leads again.
    sim.faults().clear();
    let healed = clock.now();
    run_until(&mut candidates, &clock, healed + LEASE + RETRY + SLACK);
    assert!(leader_of(&candidates, clock.now()).is_some());
}

#[test]
fn a_lease_that_cannot_be_decoded_is_an_error_not_a_takeover() {
    let sim = SimServer::start(SimConfig::default()).unwrap();
    let clock = Clock::start();
    sim.cluster()
        .create(
            node_lifecycled_sim::Resource::Leases,
            serde_json::json!({
                "metadata": {"name": "node-lifecycled", "namespace": "kube-system"},
                "spec": {"holderIdentity": "someone", "leaseDurationSeconds": "forever"}
            }),
        )
        .unwrap();
    let mut candidates = vec![candidate(&sim, &clock, "daemon-a")];
    let begin = clock.now();
    run_until(&mut candidates, &clock, begin + Duration::from_millis(500));
    let stats = candidates[0].election.stats(clock.now());
    assert!(!stats.is_leader);
    assert!(stats.failed_requests >= 1);
    let error = stats.last_error.unwrap();
    assert!(
        error.starts_with(
            "cannot decode response: GET /apis/coordination.k8s.io/v1/namespaces/kube-system/leases/node-lifecycled"
        ),
        "{error}"
    );
    assert!(lease_writes(&sim).is_empty());
}

#[test]
fn disabled_election_leads_at_once_and_never_touches_the_lease() {
    let sim = SimServer::start(SimConfig::default()).unwrap();
    let clock = Clock::start();
    let mut config = node_lifecycled::config::Config::default().leader_election;
    config.enabled = false;
    let connection = Connection {
        scheme: Scheme::Http,
        host: "127.0.0.1".into(),
        port: sim.addr().port(),
        base_path: String::new(),
        tls: None,
        credentials: Credentials::None,
    };
    let c = clock.clone();
    let client = ApiClient::new(
        &connection,
        &ClientSettings::default(),
        Box::new(move || c.now()),
    )
    .unwrap();
    let c = clock.clone();
    let mut election = LeaderElection::from_config(&config, client, Box::new(move || c.now()));
    assert!(election.is_leader(clock.now()));
    assert_eq!(election.next_deadline(), None);
    assert!(election.step().is_empty());
    election.release().unwrap();
    assert!(sim.writes().is_empty());
    assert!(!election.stats(clock.now()).enabled);
}
