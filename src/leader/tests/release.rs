//! Giving the Lease up at shutdown: the hand-over to a follower, and when a release does nothing
//! or waits for an answer.

use super::*;

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
