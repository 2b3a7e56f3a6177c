//! Taking the Lease: creating it, updating an unheld one, waiting out a live holder, conflicts on
//! the way in, and the disabled election.

use super::*;

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
