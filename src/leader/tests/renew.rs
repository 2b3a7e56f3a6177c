//! Holding the Lease: renewals every retry period, the renew deadline, conflicts and stale copies
//! on a renewal, and throttled requests.

use super::*;

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
