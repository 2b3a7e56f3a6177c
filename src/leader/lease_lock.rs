//! The imperative shell of leader election: performs the elector's Lease requests with the
//! blocking `ApiClient` (client-go `resourcelock.LeaseLock`) and tells the event loop when to
//! come back. It never sleeps: each call does the requests due now (each bounded by the client's
//! hard timeout, which config keeps below the renew deadline) and returns.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::elector::{
    ElectionSettings, ElectionStats, LeaderElector, LeaseRequest, LeaseResponse, Transition,
};
use super::jitter::Jitter;
use super::record::{LeaseObject, RawLease};
use crate::kube::{ApiClient, ApiError};
use crate::leader::LeaderElectionConfig;
use crate::time::Time;

/// The most requests one `step` makes: a failed fast-path renew, the read after it, the write
/// after that. A bound, so a confused server cannot hold the loop.
const MAX_REQUESTS_PER_STEP: usize = 3;

/// The Lease that is the lock, and its metadata as last seen (kept for updates).
#[derive(Clone, Debug)]
pub struct LeaseLock {
    namespace: String,
    name: String,
    metadata: Option<ObjectMeta>,
}

impl LeaseLock {
    pub fn new(namespace: &str, name: &str) -> LeaseLock {
        LeaseLock {
            namespace: namespace.to_string(),
            name: name.to_string(),
            metadata: None,
        }
    }

    /// An annotation of the Lease as last read or written (the fleet pause lives in one).
    pub(crate) fn annotation(&self, key: &str) -> Option<&str> {
        self.metadata
            .as_ref()
            .and_then(|m| m.annotations.as_ref())
            .and_then(|a| a.get(key))
            .map(String::as_str)
    }

    /// Sets one of the daemon's own annotations in the metadata the next update writes (the
    /// clocks: `leader/clocks.rs`); nothing before the Lease was first read or written.
    pub(crate) fn set_annotation(&mut self, key: &str, value: &str) {
        let Some(metadata) = self.metadata.as_mut() else {
            return;
        };
        metadata
            .annotations
            .get_or_insert_with(Default::default)
            .insert(key.to_string(), value.to_string());
    }

    /// `namespace/name`, for logs.
    pub(crate) fn describe(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    pub(crate) fn collection_path(&self) -> String {
        format!(
            "/apis/coordination.k8s.io/v1/namespaces/{}/leases",
            self.namespace
        )
    }

    pub(crate) fn object_path(&self) -> String {
        format!("{}/{}", self.collection_path(), self.name)
    }

    fn bare_metadata(&self) -> ObjectMeta {
        ObjectMeta {
            name: Some(self.name.clone()),
            namespace: Some(self.namespace.clone()),
            ..Default::default()
        }
    }

    fn unwritable(&self, error: String) -> LeaseResponse {
        LeaseResponse::Failed {
            error: format!("lease {}: {error}", self.describe()),
            retry_at: None,
        }
    }

    /// Performs one request; every outcome is an answer the elector understands.
    pub(crate) fn perform(
        &mut self,
        client: &mut ApiClient,
        request: &LeaseRequest,
    ) -> LeaseResponse {
        let result = match request {
            LeaseRequest::Get => client.get_json::<RawLease>(&self.object_path()),
            LeaseRequest::Create(record) => {
                let body = match LeaseObject::body(self.bare_metadata(), record, None) {
                    Ok(body) => body,
                    Err(e) => return self.unwritable(e),
                };
                client.post::<RawLease>(&self.collection_path(), body.to_string().as_bytes())
            }
            LeaseRequest::Update {
                record,
                resource_version,
            } => {
                let metadata = self
                    .metadata
                    .clone()
                    .unwrap_or_else(|| self.bare_metadata());
                let body = match LeaseObject::body(metadata, record, Some(resource_version)) {
                    Ok(body) => body,
                    Err(e) => return self.unwritable(e),
                };
                client.put::<RawLease>(&self.object_path(), body.to_string().as_bytes())
            }
        };
        let lease = match result {
            Ok(raw) => raw.into_object(&self.describe()),
            Err(ApiError::NotFound(_)) => return LeaseResponse::NotFound,
            Err(ApiError::Conflict(_)) => return LeaseResponse::Conflict,
            Err(ApiError::Throttled { until }) => {
                return LeaseResponse::Failed {
                    error: format!("lease {}: client throttle", self.describe()),
                    retry_at: Some(until),
                };
            }
            Err(e) => Err(e.to_string()),
        };
        match lease {
            Ok(lease) => {
                self.metadata = Some(lease.metadata);
                match request {
                    LeaseRequest::Get => LeaseResponse::Found {
                        record: lease.record,
                        resource_version: lease.resource_version,
                    },
                    _ => LeaseResponse::Written {
                        resource_version: lease.resource_version,
                    },
                }
            }
            Err(error) => LeaseResponse::Failed {
                error,
                retry_at: None,
            },
        }
    }
}

/// Leader election as the daemon runs it: the elector, its lock, its own API client (upstream
/// gives leader election a client of its own, so that a busy controller's throttle cannot
/// starve renewals) and the daemon's clock.
pub struct LeaderElection {
    elector: LeaderElector,
    lock: LeaseLock,
    client: Option<ApiClient>,
    clock: Box<dyn Fn() -> Time>,
}

impl LeaderElection {
    /// Election on `lock` with `client`; the first look at the lease is due at once.
    pub fn new(
        settings: ElectionSettings,
        lock: LeaseLock,
        client: ApiClient,
        clock: Box<dyn Fn() -> Time>,
    ) -> LeaderElection {
        let now = clock();
        LeaderElection {
            elector: LeaderElector::new(settings, Jitter::seed_from_entropy(), now),
            lock,
            client: Some(client),
            clock,
        }
    }

    /// From the config: `new` when enabled, else `disabled` (the client is then dropped).
    pub fn from_config(
        config: &LeaderElectionConfig,
        client: ApiClient,
        clock: Box<dyn Fn() -> Time>,
    ) -> LeaderElection {
        if config.enabled {
            let lock = LeaseLock::new(&config.namespace, &config.name);
            LeaderElection::new(ElectionSettings::from_config(config), lock, client, clock)
        } else {
            LeaderElection::disabled(config.identity_or_default(), clock)
        }
    }

    /// No election: always leader, never a request.
    pub(crate) fn disabled(identity: String, clock: Box<dyn Fn() -> Time>) -> LeaderElection {
        LeaderElection {
            elector: LeaderElector::disabled(identity),
            lock: LeaseLock::new("", ""),
            client: None,
            clock,
        }
    }

    pub(crate) fn elector(&self) -> &LeaderElector {
        &self.elector
    }

    pub(crate) fn lock(&self) -> &LeaseLock {
        &self.lock
    }

    pub(crate) fn lock_mut(&mut self) -> &mut LeaseLock {
        &mut self.lock
    }

    /// Whether writes are allowed at `now` (check before every write).
    pub fn is_leader(&self, now: Time) -> bool {
        self.elector.is_leader(now)
    }

    /// When to call `step` next (schedule a loop timer for it).
    pub fn next_deadline(&self) -> Option<Time> {
        self.elector.next_deadline()
    }

    /// Notices a passed renew deadline, then performs the requests due now.
    pub fn step(&mut self) -> Vec<Transition> {
        let mut out = self.elector.tick((self.clock)());
        let Some(client) = self.client.as_mut() else {
            return out;
        };
        for _ in 0..MAX_REQUESTS_PER_STEP {
            let Some(request) = self.elector.poll((self.clock)()) else {
                break;
            };
            let response = self.lock.perform(client, &request);
            log_response(&self.lock, &request, &response);
            out.extend(self.elector.on_response(response, (self.clock)()));
        }
        for t in &out {
            log_transition(&self.lock, self.elector.settings(), t);
        }
        out
    }

    /// Gives the lease up (shutdown): from now on `is_leader` is false (unless election is
    /// disabled); when the lease names us, one update (bounded by the client timeout) frees it
    /// for the next candidate.
    pub fn release(&mut self) -> Result<(), String> {
        let Some(client) = self.client.as_mut() else {
            return Ok(());
        };
        let Some(request) = self.elector.release((self.clock)()) else {
            return Ok(());
        };
        let response = self.lock.perform(client, &request);
        let outcome = match &response {
            LeaseResponse::Written { .. } => Ok(()),
            LeaseResponse::Failed { error, .. } => Err(error.clone()),
            other => Err(format!(
                "lease {}: release answered {other:?}",
                self.lock.describe()
            )),
        };
        self.elector.on_response(response, (self.clock)());
        if outcome.is_ok() {
            log::info!("released leader lease {}", self.lock.describe());
        }
        outcome
    }

    pub fn stats(&self, now: Time) -> ElectionStats {
        self.elector.stats(now)
    }
}

fn log_response(lock: &LeaseLock, request: &LeaseRequest, response: &LeaseResponse) {
    let what = match request {
        LeaseRequest::Get => "read",
        LeaseRequest::Create(_) => "create",
        LeaseRequest::Update { .. } => "update",
    };
    match response {
        LeaseResponse::Failed { error, .. } => {
            log::warn!("leader lease {}: {what} failed: {error}", lock.describe())
        }
        LeaseResponse::Conflict => log::debug!(
            "leader lease {}: {what} conflicted (someone else wrote first)",
            lock.describe()
        ),
        _ => {}
    }
}

fn log_transition(lock: &LeaseLock, settings: &ElectionSettings, transition: &Transition) {
    match transition {
        Transition::Acquired => log::info!(
            "acquired leader lease {} as {}",
            lock.describe(),
            settings.identity
        ),
        Transition::Lost => log::warn!(
            "lost leader lease {}: stopped writing (not renewed within {:?} or taken by another)",
            lock.describe(),
            settings.renew_deadline
        ),
        Transition::NewLeader(holder) => {
            log::info!("leader lease {} is held by {holder}", lock.describe())
        }
    }
}
