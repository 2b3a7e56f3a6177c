//! The sans-IO leader elector: client-go's `LeaderElector` (`tryAcquireOrRenew`, `renew`,
//! `release`) as a state machine fed `now` and the answers to its own Lease requests.
//!
//! One request at a time: `poll(now)` hands out the next request when one is due, the caller
//! performs it and feeds the answer to `on_response`; `next_deadline()` says when to call again
//! (a retry, or the instant leadership runs out). Nothing here reads a clock or sleeps.
//!
//! Safety rests on three rules, all on our own clock:
//! - a lease held by someone else is expired only `leaseDurationSeconds` after we *observed* its
//!   record change (the holder's `renewTime` is another host's clock and is never read);
//! - we are leader only until `renew_deadline` after the *sending* of our last successful acquire
//!   or renew (the server applied it after that instant, so others observed it after it too);
//! - `renew_deadline < lease_duration`, so we stop acting before anyone may take over.

use std::time::Duration;

use super::jitter::Jitter;
use super::record::LeaseRecord;
use crate::leader::LeaderElectionConfig;
use crate::time::Time;

/// client-go's release writes this duration so that the lease is free at once for everyone.
const RELEASED_LEASE_DURATION_SECONDS: i32 = 1;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ElectionSettings {
    /// `holderIdentity` written while we hold the lease.
    pub identity: String,
    /// How long others wait, after seeing our record change, before taking over.
    pub lease_duration: Duration,
    /// How long after the last successful renewal we still act as leader.
    pub renew_deadline: Duration,
    /// Interval between renewals (leader) and between looks at the lease (followers).
    pub retry_period: Duration,
}

impl ElectionSettings {
    /// Upstream's defaults (15 s / 10 s / 2 s) or whatever the config says; the identity is the
    /// configured one or `<hostname>_<random hex>`.
    pub(crate) fn from_config(config: &LeaderElectionConfig) -> ElectionSettings {
        ElectionSettings {
            identity: config.identity_or_default(),
            lease_duration: config.lease_duration,
            renew_deadline: config.renew_deadline,
            retry_period: config.retry_period,
        }
    }

    /// `leaseDurationSeconds` is whole seconds; round up so that nobody waits less than
    /// `lease_duration` (which keeps `renew_deadline < ` what others wait).
    pub(crate) fn lease_duration_seconds(&self) -> i32 {
        let ms = self.lease_duration.as_millis();
        i32::try_from(ms.div_ceil(1000)).unwrap_or(i32::MAX)
    }
}

/// A request the caller performs against
/// `/apis/coordination.k8s.io/v1/namespaces/NS/leases/NAME`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LeaseRequest {
    /// GET the lease.
    Get,
    /// POST a new lease with this record.
    Create(LeaseRecord),
    /// PUT the lease with this record, `metadata.resourceVersion` = `resource_version`.
    Update {
        record: LeaseRecord,
        resource_version: String,
    },
}

/// The answer to the request `poll` (or `release`) handed out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LeaseResponse {
    /// The GET found the lease.
    Found {
        record: LeaseRecord,
        resource_version: String,
    },
    /// The create or update succeeded; the lease's new resourceVersion.
    Written { resource_version: String },
    /// 404.
    NotFound,
    /// 409: a stale resourceVersion, or AlreadyExists on create: someone else wrote first.
    Conflict,
    /// Anything else. `retry_at`: the request was not sent and may be retried then (client throttle).
    Failed {
        error: String,
        retry_at: Option<Time>,
    },
}

/// What changed, for the daemon to react to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Transition {
    /// We hold the lease now: start acting.
    Acquired,
    /// We may no longer act (renew deadline passed, or someone else holds the lease). `is_leader`
    /// was already false from the instant it happened; this is the notice.
    Lost,
    /// The lease names a new holder (client-go `OnNewLeader`), us included.
    NewLeader(String),
}

/// What the state dump shows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ElectionStats {
    pub enabled: bool,
    pub(crate) identity: String,
    /// The holder named by the lease as last seen; `None` when unknown or unheld.
    pub holder: Option<String>,
    pub is_leader: bool,
    /// Since when we lead (our clock), while we do.
    pub(crate) leading_since: Option<Time>,
    /// When our last successful acquire or renew was sent, and how long ago that is.
    pub last_renewed_at: Option<Time>,
    pub(crate) last_renew_age: Option<Duration>,
    /// `leaseTransitions` of the lease as last seen.
    pub lease_transitions: Option<i32>,
    pub(crate) acquisitions: u64,
    pub(crate) losses: u64,
    pub failed_requests: u64,
    pub last_error: Option<String>,
    pub(crate) next_attempt: Option<Time>,
}

/// Why a request was made, which decides what its answer means.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Purpose {
    /// GET, then decide (client-go's slow path).
    Read,
    /// Optimistic update of the record we wrote last (client-go's fast path).
    Renew,
    /// Create, or update after a read: take the lease or renew it.
    Acquire,
    /// Give the lease up on shutdown.
    Release,
}

#[derive(Clone, Debug)]
struct InFlight {
    purpose: Purpose,
    sent_at: Time,
    /// The record a create or update carries.
    record: Option<LeaseRecord>,
}

/// The lease as we last saw it, and when we saw its record change.
#[derive(Clone, Debug)]
struct Observed {
    record: LeaseRecord,
    resource_version: String,
    changed_at: Time,
}

#[derive(Clone, Debug)]
pub struct LeaderElector {
    settings: ElectionSettings,
    enabled: bool,
    observed: Option<Observed>,
    /// While we lead: when the last successful acquire or renew was sent.
    renewed_at: Option<Time>,
    leading_since: Option<Time>,
    last_renewed_at: Option<Time>,
    /// A request due at once (the write after a read, a re-read after a failed fast path, the
    /// release).
    queued: Option<(LeaseRequest, Purpose)>,
    in_flight: Option<InFlight>,
    next_attempt: Time,
    release_requested: bool,
    /// After a release: no further requests.
    stopped: bool,
    reported_leader: String,
    jitter: Jitter,
    acquisitions: u64,
    losses: u64,
    failed_requests: u64,
    last_error: Option<String>,
}

impl LeaderElector {
    /// Starts as a follower with its first look at the lease due at `now`. `seed` spreads the
    /// followers' retries (`Jitter::seed_from_entropy()` in the daemon).
    pub(crate) fn new(settings: ElectionSettings, seed: u64, now: Time) -> LeaderElector {
        LeaderElector {
            settings,
            enabled: true,
            observed: None,
            renewed_at: None,
            leading_since: None,
            last_renewed_at: None,
            queued: None,
            in_flight: None,
            next_attempt: now,
            release_requested: false,
            stopped: false,
            reported_leader: String::new(),
            jitter: Jitter::new(seed),
            acquisitions: 0,
            losses: 0,
            failed_requests: 0,
            last_error: None,
        }
    }

    /// Leader election switched off (a single control plane): always leader, never a request.
    pub(crate) fn disabled(identity: String) -> LeaderElector {
        let settings = ElectionSettings {
            identity,
            lease_duration: Duration::ZERO,
            renew_deadline: Duration::ZERO,
            retry_period: Duration::ZERO,
        };
        LeaderElector {
            enabled: false,
            ..LeaderElector::new(settings, 0, Time::ZERO)
        }
    }

    pub(crate) fn settings(&self) -> &ElectionSettings {
        &self.settings
    }

    pub(crate) fn is_enabled(&self) -> bool {
        self.enabled
    }

    /// Whether we may act (write) at `now`. Turns false exactly `renew_deadline` after the
    /// sending of our last successful acquire or renew, whether or not `tick` ran since.
    pub(crate) fn is_leader(&self, now: Time) -> bool {
        if !self.enabled {
            return true;
        }
        self.renewed_at
            .is_some_and(|at| now < at + self.settings.renew_deadline)
    }

    /// The holder named by the lease as last seen.
    pub(crate) fn holder(&self) -> Option<&str> {
        self.observed
            .as_ref()
            .map(|o| o.record.holder_identity.as_str())
            .filter(|h| !h.is_empty())
    }

    /// When to call `tick` / `poll` next: the next attempt, or the instant leadership runs out,
    /// whichever is first. `None` while disabled, or when nothing remains to do.
    pub(crate) fn next_deadline(&self) -> Option<Time> {
        if !self.enabled {
            return None;
        }
        let attempt = (self.in_flight.is_none() && (self.queued.is_some() || !self.stopped))
            .then_some(self.next_attempt);
        let loss = self.renewed_at.map(|at| at + self.settings.renew_deadline);
        match (attempt, loss) {
            (Some(a), Some(l)) => Some(a.min(l)),
            (a, l) => a.or(l),
        }
    }

    /// Notices the renew deadline passing.
    pub(crate) fn tick(&mut self, now: Time) -> Vec<Transition> {
        let mut out = Vec::new();
        self.check_renew_deadline(now, &mut out);
        out
    }

    /// The request to perform now, if one is due and none is in flight.
    pub(crate) fn poll(&mut self, now: Time) -> Option<LeaseRequest> {
        if !self.enabled || self.in_flight.is_some() {
            return None;
        }
        let (request, purpose) = match self.queued.take() {
            Some(queued) => queued,
            None if self.stopped || now < self.next_attempt => return None,
            None => match (&self.observed, self.is_leader(now)) {
                (Some(observed), true) => {
                    let record = LeaseRecord {
                        holder_identity: self.settings.identity.clone(),
                        lease_duration_seconds: self.settings.lease_duration_seconds(),
                        acquire_time: observed.record.acquire_time.clone(),
                        renew_time: Some(now.to_rfc3339_micros()),
                        lease_transitions: observed.record.lease_transitions,
                    };
                    let request = LeaseRequest::Update {
                        record,
                        resource_version: observed.resource_version.clone(),
                    };
                    (request, Purpose::Renew)
                }
                _ => (LeaseRequest::Get, Purpose::Read),
            },
        };
        let record = match &request {
            LeaseRequest::Create(r) | LeaseRequest::Update { record: r, .. } => Some(r.clone()),
            LeaseRequest::Get => None,
        };
        self.in_flight = Some(InFlight {
            purpose,
            sent_at: now,
            record,
        });
        Some(request)
    }

    /// The answer to the request in flight.
    pub(crate) fn on_response(&mut self, response: LeaseResponse, now: Time) -> Vec<Transition> {
        let mut out = Vec::new();
        let Some(flight) = self.in_flight.take() else {
            return out;
        };
        self.check_renew_deadline(now, &mut out);
        match (flight.purpose, response) {
            (
                Purpose::Read,
                LeaseResponse::Found {
                    record,
                    resource_version,
                },
            ) => {
                self.observe(record, resource_version, now);
                self.decide(now, &mut out);
            }
            (Purpose::Read, LeaseResponse::NotFound) => {
                let record = self.our_record(now, None, 0);
                self.queue(LeaseRequest::Create(record), Purpose::Acquire, now);
            }
            (Purpose::Renew | Purpose::Acquire, LeaseResponse::Written { resource_version }) => {
                let record = flight.record.unwrap_or_default();
                self.observe(record, resource_version, now);
                self.last_renewed_at = Some(flight.sent_at);
                // A write answered only after its own renew deadline buys nothing: the lease is
                // ours on the server, but others may take it as soon as we could act.
                if now < flight.sent_at + self.settings.renew_deadline && !self.release_requested {
                    if self.renewed_at.is_none() {
                        self.acquisitions += 1;
                        self.leading_since = Some(flight.sent_at);
                        out.push(Transition::Acquired);
                    }
                    self.renewed_at = Some(flight.sent_at);
                }
                self.next_attempt = now + self.settings.retry_period;
            }
            (Purpose::Renew, LeaseResponse::Conflict | LeaseResponse::NotFound) => {
                // Our copy is stale: read the lease at once and decide on what is there.
                self.queue(LeaseRequest::Get, Purpose::Read, now);
            }
            (Purpose::Release, LeaseResponse::Written { resource_version }) => {
                let record = flight.record.unwrap_or_default();
                self.observe(record, resource_version, now);
            }
            (Purpose::Release, response) => {
                // The lease simply expires for the others; nothing more to try.
                self.note_failure(&response);
            }
            (_, response) => {
                self.note_failure(&response);
                let retry_at = match &response {
                    LeaseResponse::Failed { retry_at, .. } => *retry_at,
                    _ => None,
                };
                self.next_attempt = match retry_at {
                    Some(at) => at.max(now),
                    None => now + self.retry_wait(),
                };
            }
        }
        self.report_leader(&mut out);
        if self.release_requested && !self.stopped {
            self.begin_release(now);
        }
        out
    }

    /// Gives the lease up (SIGTERM), client-go's `ReleaseOnCancel`: at once `is_leader` is false,
    /// and when the lease still names us the returned update empties `holderIdentity` with a
    /// 1 s duration, so a follower takes it at its next look. Feed the answer to `on_response`.
    /// With a request in flight the release follows its answer (`poll` hands it out).
    pub(crate) fn release(&mut self, now: Time) -> Option<LeaseRequest> {
        if !self.enabled || self.stopped {
            return None;
        }
        self.release_requested = true;
        if self.in_flight.is_some() {
            self.renewed_at = None;
            self.leading_since = None;
            return None;
        }
        self.begin_release(now);
        self.poll(now)
    }

    pub(crate) fn stats(&self, now: Time) -> ElectionStats {
        ElectionStats {
            enabled: self.enabled,
            identity: self.settings.identity.clone(),
            holder: self.holder().map(str::to_string),
            is_leader: self.is_leader(now),
            leading_since: self.leading_since.filter(|_| self.is_leader(now)),
            last_renewed_at: self.last_renewed_at,
            last_renew_age: self.last_renewed_at.map(|at| now.since(at)),
            lease_transitions: self.observed.as_ref().map(|o| o.record.lease_transitions),
            acquisitions: self.acquisitions,
            losses: self.losses,
            failed_requests: self.failed_requests,
            last_error: self.last_error.clone(),
            next_attempt: self.next_deadline(),
        }
    }

    /// client-go `tryAcquireOrRenew` after its GET: wait while someone else holds a live lease,
    /// else write ourselves in.
    fn decide(&mut self, now: Time, out: &mut Vec<Transition>) {
        let Some(observed) = &self.observed else {
            return;
        };
        let record = &observed.record;
        let ours = record.holder_identity == self.settings.identity;
        let expires_at = observed.changed_at + record.lease_duration();
        if record.is_held() && !ours && now < expires_at {
            if self.renewed_at.take().is_some() {
                self.losses += 1;
                self.leading_since = None;
                out.push(Transition::Lost);
            }
            // Look again after the usual wait, or exactly when the lease runs out if sooner, so
            // a dead holder is replaced `leaseDurationSeconds` after its last renewal was seen.
            self.next_attempt = (now + self.retry_wait()).min(expires_at);
            return;
        }
        let resource_version = observed.resource_version.clone();
        let record = if ours {
            // Renewing (or re-taking a lease that still names us): keep the term's start.
            self.our_record(now, record.acquire_time.clone(), record.lease_transitions)
        } else {
            self.our_record(now, None, record.lease_transitions.saturating_add(1))
        };
        self.queue(
            LeaseRequest::Update {
                record,
                resource_version,
            },
            Purpose::Acquire,
            now,
        );
    }

    fn our_record(&self, now: Time, acquire_time: Option<String>, transitions: i32) -> LeaseRecord {
        let stamp = now.to_rfc3339_micros();
        LeaseRecord {
            holder_identity: self.settings.identity.clone(),
            lease_duration_seconds: self.settings.lease_duration_seconds(),
            acquire_time: Some(acquire_time.unwrap_or_else(|| stamp.clone())),
            renew_time: Some(stamp),
            lease_transitions: transitions,
        }
    }

    fn begin_release(&mut self, now: Time) {
        self.stopped = true;
        self.queued = None;
        self.renewed_at = None;
        self.leading_since = None;
        let Some(observed) = &self.observed else {
            return;
        };
        if observed.record.holder_identity != self.settings.identity {
            return;
        }
        let stamp = now.to_rfc3339_micros();
        let record = LeaseRecord {
            holder_identity: String::new(),
            lease_duration_seconds: RELEASED_LEASE_DURATION_SECONDS,
            acquire_time: Some(stamp.clone()),
            renew_time: Some(stamp),
            lease_transitions: observed.record.lease_transitions,
        };
        let request = LeaseRequest::Update {
            record,
            resource_version: observed.resource_version.clone(),
        };
        self.queue(request, Purpose::Release, now);
    }

    /// Records what the server holds; the expiry clock restarts only when the record changed.
    fn observe(&mut self, record: LeaseRecord, resource_version: String, now: Time) {
        match &mut self.observed {
            Some(o) if o.record == record => o.resource_version = resource_version,
            _ => {
                self.observed = Some(Observed {
                    record,
                    resource_version,
                    changed_at: now,
                })
            }
        }
    }

    fn check_renew_deadline(&mut self, now: Time, out: &mut Vec<Transition>) {
        if self.renewed_at.is_some() && !self.is_leader(now) {
            self.renewed_at = None;
            self.leading_since = None;
            self.losses += 1;
            out.push(Transition::Lost);
        }
    }

    fn report_leader(&mut self, out: &mut Vec<Transition>) {
        let Some(holder) = self.holder().map(str::to_string) else {
            return;
        };
        if holder != self.reported_leader {
            self.reported_leader = holder.clone();
            out.push(Transition::NewLeader(holder));
        }
    }

    fn queue(&mut self, request: LeaseRequest, purpose: Purpose, now: Time) {
        self.queued = Some((request, purpose));
        self.next_attempt = now;
    }

    /// Leaders retry on the period (client-go `wait.Until`), followers with jitter.
    fn retry_wait(&mut self) -> Duration {
        if self.renewed_at.is_some() {
            self.settings.retry_period
        } else {
            self.jitter.follower_wait(self.settings.retry_period)
        }
    }

    fn note_failure(&mut self, response: &LeaseResponse) {
        self.failed_requests += 1;
        self.last_error = Some(match response {
            LeaseResponse::Failed { error, .. } => error.clone(),
            LeaseResponse::Conflict => "conflict: the lease was changed by someone else".into(),
            LeaseResponse::NotFound => "the lease does not exist".into(),
            other => format!("unexpected answer {other:?}"),
        });
    }
}
