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

mod acquire;
mod release;
mod renew;
mod safety;
