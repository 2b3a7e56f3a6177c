//! The elector on a virtual clock, against an in-memory Lease with the API server's optimistic
//! concurrency (a write with a stale resourceVersion conflicts).

use std::time::Duration;

use super::elector::{ElectionSettings, LeaderElector, LeaseRequest, LeaseResponse, Transition};
use super::record::LeaseRecord;
use crate::time::Rng;
use crate::time::Time;

const START: u64 = 1_700_000_000_000;

fn at(ms: u64) -> Time {
    Time::from_unix_millis(START + ms)
}

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

fn settings(identity: &str) -> ElectionSettings {
    ElectionSettings {
        identity: identity.into(),
        lease_duration: secs(15),
        renew_deadline: secs(10),
        retry_period: secs(2),
    }
}

fn elector(identity: &str, now: Time) -> LeaderElector {
    LeaderElector::new(settings(identity), 7, now)
}

fn held_by(holder: &str, renew_time: &str, transitions: i32) -> LeaseRecord {
    LeaseRecord {
        holder_identity: holder.into(),
        lease_duration_seconds: 15,
        acquire_time: Some(renew_time.into()),
        renew_time: Some(renew_time.into()),
        lease_transitions: transitions,
    }
}

/// The API server's side of one Lease.
#[derive(Default)]
struct FakeLease {
    lease: Option<(LeaseRecord, u64)>,
    next_rv: u64,
}

impl FakeLease {
    fn holding(record: LeaseRecord) -> FakeLease {
        FakeLease {
            lease: Some((record, 1)),
            next_rv: 2,
        }
    }

    fn apply(&mut self, request: &LeaseRequest) -> LeaseResponse {
        self.next_rv = self.next_rv.max(1) + 1;
        let rv = self.next_rv;
        match (request, &self.lease) {
            (LeaseRequest::Get, None) => LeaseResponse::NotFound,
            (LeaseRequest::Get, Some((record, rv))) => LeaseResponse::Found {
                record: record.clone(),
                resource_version: rv.to_string(),
            },
            (LeaseRequest::Create(_), Some(_)) => LeaseResponse::Conflict,
            (LeaseRequest::Create(record), None) => {
                self.lease = Some((record.clone(), rv));
                LeaseResponse::Written {
                    resource_version: rv.to_string(),
                }
            }
            (LeaseRequest::Update { .. }, None) => LeaseResponse::NotFound,
            (
                LeaseRequest::Update {
                    record,
                    resource_version,
                },
                Some((_, current)),
            ) => {
                if *resource_version != current.to_string() {
                    return LeaseResponse::Conflict;
                }
                self.lease = Some((record.clone(), rv));
                LeaseResponse::Written {
                    resource_version: rv.to_string(),
                }
            }
        }
    }

    fn renew_by_other(&mut self, holder: &str, stamp: &str) {
        let transitions = self.record().map_or(0, |r| r.lease_transitions);
        self.next_rv += 1;
        self.lease = Some((held_by(holder, stamp, transitions), self.next_rv));
    }

    fn record(&self) -> Option<&LeaseRecord> {
        self.lease.as_ref().map(|(r, _)| r)
    }
}

/// Performs every request `e` has due at `now` against `lease`.
fn drive(e: &mut LeaderElector, lease: &mut FakeLease, now: Time) -> Vec<Transition> {
    let mut out = e.tick(now);
    while let Some(request) = e.poll(now) {
        let response = lease.apply(&request);
        out.extend(e.on_response(response, now));
    }
    out
}

/// Runs `e` from deadline to deadline up to `until`; returns the instant of the first
/// transition equal to `wanted`.
fn run_until(
    e: &mut LeaderElector,
    lease: &mut FakeLease,
    until: Time,
    wanted: &Transition,
) -> Option<Time> {
    while let Some(next) = e.next_deadline() {
        if next > until {
            return None;
        }
        if drive(e, lease, next).contains(wanted) {
            return Some(next);
        }
    }
    None
}

#[test]
fn acquires_an_absent_lease_by_creating_it() {
    let mut e = elector("cp-1_aa", at(0));
    assert!(!e.is_leader(at(0)));
    assert_eq!(e.next_deadline(), Some(at(0)));
    assert_eq!(e.poll(at(0)), Some(LeaseRequest::Get));
    let out = e.on_response(LeaseResponse::NotFound, at(0));
    assert!(out.is_empty());
    let Some(LeaseRequest::Create(record)) = e.poll(at(0)) else {
        panic!("expected a create");
    };
    assert_eq!(
        record,
        LeaseRecord {
            holder_identity: "cp-1_aa".into(),
            lease_duration_seconds: 15,
            acquire_time: Some("2023-11-14T22:13:20.000000Z".into()),
            renew_time: Some("2023-11-14T22:13:20.000000Z".into()),
            lease_transitions: 0,
        }
    );
    let out = e.on_response(
        LeaseResponse::Written {
            resource_version: "5".into(),
        },
        at(40),
    );
    assert_eq!(
        out,
        vec![
            Transition::Acquired,
            Transition::NewLeader("cp-1_aa".into())
        ]
    );
    assert!(e.is_leader(at(40)));
    // Renewal one retry period after the answer; leadership lasts to the renew deadline.
    assert_eq!(e.next_deadline(), Some(at(2040)));
    let stats = e.stats(at(1000));
    assert_eq!(stats.holder.as_deref(), Some("cp-1_aa"));
    assert!(stats.is_leader);
    assert_eq!(stats.last_renew_age, Some(Duration::from_millis(1000)));
    assert_eq!(stats.lease_transitions, Some(0));
    assert_eq!(stats.acquisitions, 1);
}

#[test]
fn acquires_an_unheld_lease_by_update_with_its_resource_version_and_counts_a_transition() {
    let mut e = elector("me", at(0));
    e.poll(at(0));
    let mut released = held_by("", "2023-01-01T00:00:00.000000Z", 4);
    released.lease_duration_seconds = 1;
    e.on_response(
        LeaseResponse::Found {
            record: released,
            resource_version: "77".into(),
        },
        at(0),
    );
    let Some(LeaseRequest::Update {
        record,
        resource_version,
    }) = e.poll(at(0))
    else {
        panic!("expected an update");
    };
    assert_eq!(resource_version, "77");
    assert_eq!(record.holder_identity, "me");
    assert_eq!(record.lease_transitions, 5);
    assert_eq!(record.lease_duration_seconds, 15);
    assert_eq!(
        record.acquire_time.as_deref(),
        Some("2023-11-14T22:13:20.000000Z")
    );
}

#[test]
fn follower_waits_out_a_live_lease_and_takes_over_exactly_after_lease_duration() {
    let mut lease = FakeLease::holding(held_by("other", "2023-11-14T22:13:00.000000Z", 2));
    let mut e = elector("me", at(0));
    let out = drive(&mut e, &mut lease, at(0));
    assert_eq!(out, vec![Transition::NewLeader("other".into())]);
    assert!(!e.is_leader(at(0)));
    // Looks again within one retry period, jittered down (never later).
    let next = e.next_deadline().unwrap();
    assert!(next > at(1600) && next <= at(2000), "{next:?}");

    // Nobody renews: the first write is exactly 15 s after the record was first seen.
    let mut first_write = None;
    while let Some(next) = e.next_deadline() {
        if next > at(20_000) {
            break;
        }
        match e.poll(next) {
            Some(LeaseRequest::Get) => {
                let r = lease.apply(&LeaseRequest::Get);
                e.on_response(r, next);
            }
            Some(write) => {
                first_write = Some(next);
                let r = lease.apply(&write);
                let out = e.on_response(r, next);
                assert!(out.contains(&Transition::Acquired));
                break;
            }
            None => panic!("a deadline without a request"),
        }
    }
    assert_eq!(first_write, Some(at(15_000)));
    assert!(e.is_leader(at(15_000)));
    let record = lease.record().unwrap();
    assert_eq!(record.holder_identity, "me");
    assert_eq!(record.lease_transitions, 3);
}

#[test]
fn follower_restarts_its_wait_whenever_the_holder_renews() {
    let mut lease = FakeLease::holding(held_by("other", "t0", 0));
    let mut e = elector("me", at(0));
    drive(&mut e, &mut lease, at(0));
    // The holder renews at 10 s, then dies. Its renewal is seen at the first look after 10 s.
    assert_eq!(
        run_until(&mut e, &mut lease, at(10_000), &Transition::Acquired),
        None
    );
    lease.renew_by_other("other", "t10");
    let mut seen_at = None;
    while let Some(next) = e.next_deadline() {
        drive(&mut e, &mut lease, next);
        if seen_at.is_none() {
            seen_at = Some(next);
        }
        if e.is_leader(next) {
            assert_eq!(next, seen_at.unwrap() + secs(15));
            assert!(next > at(25_000));
            return;
        }
        assert!(next < at(40_000), "never took over");
    }
}

#[test]
fn leader_renews_every_retry_period_on_the_fast_path() {
    let mut lease = FakeLease::default();
    let mut e = elector("me", at(0));
    drive(&mut e, &mut lease, at(0));
    assert!(e.is_leader(at(0)));
    let acquired = lease.record().unwrap().clone();
    assert_eq!(e.next_deadline(), Some(at(2000)));
    // The fast path writes without reading first, with the resourceVersion of our last write.
    let Some(LeaseRequest::Update {
        record,
        resource_version,
    }) = e.poll(at(2000))
    else {
        panic!("expected the renewal");
    };
    assert_eq!(
        resource_version,
        lease.lease.as_ref().unwrap().1.to_string()
    );
    assert_eq!(record.acquire_time, acquired.acquire_time);
    assert_eq!(
        record.renew_time.as_deref(),
        Some("2023-11-14T22:13:22.000000Z")
    );
    assert_eq!(record.lease_transitions, acquired.lease_transitions);
    let r = lease.apply(&LeaseRequest::Update {
        record,
        resource_version,
    });
    assert!(e.on_response(r, at(2000)).is_empty());
    assert!(e.is_leader(at(11_999)));
    assert!(!e.is_leader(at(12_000)));
    assert_eq!(e.next_deadline(), Some(at(4000)));
}

#[test]
fn leader_loses_leadership_at_renew_deadline_when_updates_fail_before_others_may_take_over() {
    let mut lease = FakeLease::default();
    let mut e = elector("me", at(0));
    drive(&mut e, &mut lease, at(0));
    assert!(e.is_leader(at(9_999)));
    assert!(
        !e.is_leader(at(10_000)),
        "false at the deadline even before a tick"
    );
    // From now on every renewal fails (the API server is unreachable).
    let mut lost_at = None;
    while let Some(next) = e.next_deadline() {
        let mut out = e.tick(next);
        if let Some(request) = e.poll(next) {
            assert!(matches!(request, LeaseRequest::Update { .. }) || request == LeaseRequest::Get);
            let failed = LeaseResponse::Failed {
                error: "timed out".into(),
                retry_at: None,
            };
            out.extend(e.on_response(failed, next));
        }
        if out.contains(&Transition::Lost) {
            lost_at = Some(next);
            break;
        }
        assert!(next <= at(10_000));
    }
    assert_eq!(lost_at, Some(at(10_000)));
    // Another candidate seeing our acquisition at 0 ms may take over only from 15 s on.
    let mut other = elector("other", at(0));
    drive(&mut other, &mut lease, at(0));
    let took_over = run_until(&mut other, &mut lease, at(30_000), &Transition::Acquired);
    assert_eq!(took_over, Some(at(15_000)));
    assert!(took_over.unwrap() > lost_at.unwrap());
    assert_eq!(e.stats(at(10_000)).losses, 1);
}

#[test]
fn renew_deadline_counts_from_when_the_renewal_was_sent() {
    let mut lease = FakeLease::default();
    let mut e = elector("me", at(0));
    drive(&mut e, &mut lease, at(0));
    let renewal = e.poll(at(2000)).unwrap();
    let r = lease.apply(&renewal);
    // A slow answer: the server may have applied it as early as 2 s.
    e.on_response(r, at(6000));
    assert!(e.is_leader(at(11_999)));
    assert!(!e.is_leader(at(12_000)));
    assert_eq!(e.next_deadline(), Some(at(8000)));
}

#[test]
fn a_write_answered_after_its_renew_deadline_does_not_make_a_leader() {
    let mut e = elector("me", at(0));
    e.poll(at(0));
    e.on_response(LeaseResponse::NotFound, at(0));
    e.poll(at(0)).unwrap();
    let out = e.on_response(
        LeaseResponse::Written {
            resource_version: "3".into(),
        },
        at(10_000),
    );
    assert!(!out.contains(&Transition::Acquired));
    assert!(!e.is_leader(at(10_000)));
}

#[test]
fn release_hands_the_lease_to_a_follower_within_one_retry_period() {
    let mut lease = FakeLease::default();
    let mut a = elector("a", at(0));
    let mut b = LeaderElector::new(settings("b"), 99, at(100));
    drive(&mut a, &mut lease, at(0));
    drive(&mut b, &mut lease, at(100));
    assert!(a.is_leader(at(100)) && !b.is_leader(at(100)));
    for t in (2000..=6000).step_by(2000) {
        drive(&mut a, &mut lease, at(t));
    }
    run_until(&mut b, &mut lease, at(6000), &Transition::Acquired);

    let release = a.release(at(6500)).expect("a release update");
    assert!(!a.is_leader(at(6500)), "no writes once the release starts");
    let LeaseRequest::Update { record, .. } = &release else {
        panic!("{release:?}");
    };
    assert_eq!(record.holder_identity, "");
    assert_eq!(record.lease_duration_seconds, 1);
    let transitions = record.lease_transitions;
    let r = lease.apply(&release);
    assert!(matches!(r, LeaseResponse::Written { .. }));
    a.on_response(r, at(6510));
    assert_eq!(a.next_deadline(), None, "a released elector stops");
    assert_eq!(a.poll(at(60_000)), None);

    let took_over = run_until(&mut b, &mut lease, at(20_000), &Transition::Acquired).unwrap();
    assert!(took_over <= at(6500) + secs(2), "{took_over:?}");
    assert_eq!(lease.record().unwrap().holder_identity, "b");
    assert_eq!(lease.record().unwrap().lease_transitions, transitions + 1);
}

#[test]
fn release_is_a_no_op_for_a_follower_and_when_disabled() {
    let mut lease = FakeLease::holding(held_by("other", "x", 0));
    let mut e = elector("me", at(0));
    drive(&mut e, &mut lease, at(0));
    assert_eq!(e.release(at(10)), None);
    assert_eq!(e.next_deadline(), None);
    let mut off = LeaderElector::disabled("me".into());
    assert_eq!(off.release(at(10)), None);
}

#[test]
fn release_requested_with_a_request_in_flight_follows_its_answer() {
    let mut lease = FakeLease::default();
    let mut e = elector("me", at(0));
    drive(&mut e, &mut lease, at(0));
    let renewal = e.poll(at(2000)).unwrap();
    assert_eq!(e.release(at(2001)), None);
    assert!(!e.is_leader(at(2001)));
    let r = lease.apply(&renewal);
    let out = e.on_response(r, at(2002));
    assert!(!out.contains(&Transition::Acquired));
    let Some(LeaseRequest::Update { record, .. }) = e.poll(at(2002)) else {
        panic!("expected the release");
    };
    assert_eq!(record.holder_identity, "");
}

#[test]
fn holders_renew_time_in_the_future_or_past_does_not_matter_only_its_change() {
    for stamp in [
        "2099-01-01T00:00:00.000000Z",
        "1970-01-01T00:00:01.000000Z",
        "not a time at all",
    ] {
        let mut lease = FakeLease::holding(held_by("other", stamp, 0));
        let mut e = elector("me", at(0));
        drive(&mut e, &mut lease, at(0));
        let took_over = run_until(&mut e, &mut lease, at(60_000), &Transition::Acquired);
        assert_eq!(took_over, Some(at(15_000)), "renewTime {stamp}");
    }
}

#[test]
fn conflict_on_acquire_leaves_a_follower_that_retries_later() {
    let mut e = elector("me", at(0));
    e.poll(at(0));
    e.on_response(LeaseResponse::NotFound, at(0));
    assert!(matches!(e.poll(at(0)), Some(LeaseRequest::Create(_))));
    // Another candidate created it first: AlreadyExists.
    let out = e.on_response(LeaseResponse::Conflict, at(5));
    assert!(out.is_empty());
    assert!(!e.is_leader(at(5)));
    let next = e.next_deadline().unwrap();
    assert!(next >= at(5) + Duration::from_millis(1666) && next <= at(2005));
    assert_eq!(e.poll(next), Some(LeaseRequest::Get));
    assert_eq!(e.stats(next).failed_requests, 1);
}

#[test]
fn conflict_on_a_renewal_rereads_at_once_and_yields_to_a_new_holder() {
    let mut lease = FakeLease::default();
    let mut e = elector("me", at(0));
    drive(&mut e, &mut lease, at(0));
    // Someone took the lease behind our back (e.g. an operator, or a holder with a longer clock).
    lease.renew_by_other("intruder", "x");
    let renewal = e.poll(at(2000)).unwrap();
    let r = lease.apply(&renewal);
    assert_eq!(r, LeaseResponse::Conflict);
    assert!(e.on_response(r, at(2000)).is_empty());
    assert_eq!(e.next_deadline(), Some(at(2000)));
    assert_eq!(e.poll(at(2000)), Some(LeaseRequest::Get));
    let r = lease.apply(&LeaseRequest::Get);
    let out = e.on_response(r, at(2001));
    assert_eq!(
        out,
        vec![Transition::Lost, Transition::NewLeader("intruder".into())]
    );
    assert!(!e.is_leader(at(2001)));
}

#[test]
fn a_stale_copy_of_our_own_lease_is_renewed_through_a_read() {
    let mut lease = FakeLease::default();
    let mut e = elector("me", at(0));
    drive(&mut e, &mut lease, at(0));
    // Someone touched the lease without taking it (a label): our resourceVersion is stale.
    let (record, _) = lease.lease.clone().unwrap();
    lease.lease = Some((record, 50));
    let out = drive(&mut e, &mut lease, at(2000));
    assert!(out.is_empty(), "{out:?}");
    assert!(e.is_leader(at(11_999)));
    assert!(!e.is_leader(at(12_000)), "renewed at 2 s");
    assert_eq!(lease.record().unwrap().holder_identity, "me");
}

#[test]
fn a_leader_that_lost_may_take_its_still_unclaimed_lease_back() {
    let mut lease = FakeLease::default();
    let mut e = elector("me", at(0));
    drive(&mut e, &mut lease, at(0));
    assert_eq!(e.tick(at(10_000)), vec![Transition::Lost]);
    // The server answers again: the lease still names us and nobody changed it.
    let out = drive(&mut e, &mut lease, at(10_500));
    assert_eq!(out, vec![Transition::Acquired]);
    assert_eq!(lease.record().unwrap().lease_transitions, 0);
    assert_eq!(e.stats(at(10_500)).acquisitions, 2);
}

#[test]
fn throttled_requests_retry_when_the_client_admits_them() {
    let mut e = elector("me", at(0));
    e.poll(at(0));
    e.on_response(
        LeaseResponse::Failed {
            error: "throttled".into(),
            retry_at: Some(at(120)),
        },
        at(0),
    );
    assert_eq!(e.next_deadline(), Some(at(120)));
    assert_eq!(e.stats(at(0)).last_error.as_deref(), Some("throttled"));
}

#[test]
fn disabled_election_is_always_leader_and_never_calls_the_api() {
    let mut e = LeaderElector::disabled("solo".into());
    assert!(e.is_leader(at(0)));
    assert!(e.is_leader(Time::MAX));
    assert_eq!(e.poll(at(0)), None);
    assert_eq!(e.next_deadline(), None);
    assert!(e.tick(at(1_000_000)).is_empty());
    assert!(!e.stats(at(0)).enabled);
}

#[test]
fn lease_duration_is_written_in_whole_seconds_rounded_up() {
    let mut s = settings("me");
    assert_eq!(s.lease_duration_seconds(), 15);
    s.lease_duration = Duration::from_millis(1500);
    assert_eq!(s.lease_duration_seconds(), 2);
    s.lease_duration = Duration::from_millis(1);
    assert_eq!(s.lease_duration_seconds(), 1);
}

/// One candidate in the randomised run: requests take time, answers can be lost after the
/// server applied the write, candidates are cut off from the server for a while, die (stop) or
/// come back.
struct Candidate {
    elector: LeaderElector,
    /// (request, applied at, answered at, answer once applied, answer lost).
    pending: Option<(LeaseRequest, Time, Time, Option<LeaseResponse>, bool)>,
    alive: bool,
    /// Cut off from the server until then: requests fail without reaching it.
    partitioned_until: Time,
}

#[test]
fn never_two_leaders_under_latency_lost_answers_partitions_and_dying_candidates() {
    for seed in 0..60 {
        let mut rng = Rng::new(seed);
        let mut lease = FakeLease::default();
        let s = ElectionSettings {
            identity: String::new(),
            lease_duration: secs(3),
            // A thin margin to the lease duration: safety must not lean on slack.
            renew_deadline: Duration::from_millis(2700),
            retry_period: Duration::from_millis(400),
        };
        let mut candidates: Vec<Candidate> = (0..3)
            .map(|i| Candidate {
                elector: LeaderElector::new(
                    ElectionSettings {
                        identity: format!("c{i}"),
                        ..s.clone()
                    },
                    seed * 10 + i,
                    at(i * 37),
                ),
                pending: None,
                alive: true,
                partitioned_until: Time::ZERO,
            })
            .collect();
        let mut now = at(0);
        let mut leadership_changes = 0;
        let mut last_leader: Option<usize> = None;
        let mut stuck = 0;
        while now < at(300_000) {
            // The next event: a candidate's deadline, a request reaching the server, an answer.
            let mut next = now + secs(1);
            for c in candidates.iter().filter(|c| c.alive) {
                match &c.pending {
                    Some((_, apply, answer, applied, _)) => {
                        next = next.min(if applied.is_none() { *apply } else { *answer })
                    }
                    None => {
                        if let Some(d) = c.elector.next_deadline() {
                            next = next.min(d)
                        }
                    }
                }
            }
            if next <= now {
                stuck += 1;
                assert!(stuck < 100, "seed {seed}: no progress at {now:?}");
            } else {
                stuck = 0;
            }
            now = next.max(now);
            for c in candidates.iter_mut() {
                if !c.alive {
                    if rng.chance(5) {
                        c.elector =
                            LeaderElector::new(c.elector.settings().clone(), rng.next_u64(), now);
                        c.alive = true;
                    }
                    continue;
                }
                c.elector.tick(now);
                match c.pending.take() {
                    Some((request, apply, answer, None, lost)) if apply <= now => {
                        let response = if c.partitioned_until > now {
                            LeaseResponse::Failed {
                                error: "connection refused".into(),
                                retry_at: None,
                            }
                        } else {
                            lease.apply(&request)
                        };
                        c.pending = Some((request, apply, answer, Some(response), lost));
                    }
                    Some((_, _, answer, Some(response), lost)) if answer <= now => {
                        let response = if lost {
                            LeaseResponse::Failed {
                                error: "timed out".into(),
                                retry_at: None,
                            }
                        } else {
                            response
                        };
                        c.elector.on_response(response, now);
                    }
                    other => c.pending = other,
                }
                if c.pending.is_none() {
                    if let Some(request) = c.elector.poll(now) {
                        let apply = now + Duration::from_millis(rng.below(300));
                        let answer = apply + Duration::from_millis(rng.below(300));
                        c.pending = Some((request, apply, answer, None, rng.chance(10)));
                    }
                }
                if rng.chance(1) {
                    c.partitioned_until = now + Duration::from_millis(rng.below(6000));
                }
                // Death: kill -9, or a graceful release now and then.
                if rng.below(1000) < 3 {
                    if rng.chance(50) {
                        if let Some(release) = c.elector.release(now) {
                            let r = lease.apply(&release);
                            c.elector.on_response(r, now);
                        }
                    }
                    c.alive = false;
                    c.pending = None;
                }
            }
            let leaders: Vec<usize> = (0..candidates.len())
                .filter(|&i| candidates[i].alive && candidates[i].elector.is_leader(now))
                .collect();
            assert!(
                leaders.len() <= 1,
                "seed {seed}: {leaders:?} lead at {now:?}"
            );
            if let Some(&l) = leaders.first() {
                if last_leader != Some(l) {
                    leadership_changes += 1;
                    last_leader = Some(l);
                }
            }
        }

        assert!(
            leadership_changes >= 2,
            "seed {seed}: the run exercised no takeover"
        );
    }
}
