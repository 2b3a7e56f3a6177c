//! The executor's way to the API server: one call at a time through the client, with the
//! accounting every transport shares — which budget a call spends, the backoff after server
//! trouble, the time spent waiting for the throttle, the request counts and the events' pace.

use super::*;

#[derive(Debug, Default)]
pub(super) struct Backoff {
    pub(super) current: Duration,
    pub(super) until: Time,
}

pub(super) struct Wire {
    pub(super) client: ApiClient,
    /// First backoff after server trouble and its cap (from the settings).
    backoff_initial: Duration,
    backoff_max: Duration,
    pub(super) backoff: Backoff,
    /// Since when the head of the queue has been held by the client throttle.
    pub(super) throttled_since: Option<Time>,
    /// When the last verdict call (live Lease read, status write) was made.
    pub(super) last_verdict: Option<Time>,
    /// Events' own pace, on top of the client throttle (see `ExecutorSettings::event_rate`).
    pub(super) event_bucket: TokenBucket,
    rng: Rng,
    /// Makes the names of two events about one object in one millisecond differ.
    pub(super) event_seq: u64,
    pub(super) stats: ExecutorStats,
    /// Wall time of each node status write (call and re-read on conflict), drained by the
    /// daemon into `node_collector_update_node_health_duration_seconds`.
    pub(super) node_health_writes: Vec<Duration>,
}

impl Wire {
    pub(super) fn new(client: ApiClient, settings: &ExecutorSettings, now: Time) -> Wire {
        Wire {
            client,
            backoff_initial: settings.backoff_initial,
            backoff_max: settings.backoff_max,
            backoff: Backoff::default(),
            throttled_since: None,
            last_verdict: None,
            event_bucket: TokenBucket::new(settings.event_rate, settings.event_burst, now),
            rng: Rng::new(settings.seed),
            event_seq: 0,
            stats: ExecutorStats::default(),
            node_health_writes: Vec::new(),
        }
    }

    /// When the next call spending `budget` may be made: the client throttle and our backoff.
    pub(super) fn gate(&self, budget: Budget) -> Time {
        self.client
            .next_admission_for(self.effective(budget))
            .max(self.backoff.until)
    }

    /// Routine calls leave a reserve of the shared budget only while verdicts are being made
    /// (one in the last [`VERDICT_WINDOW`]): otherwise the whole burst is theirs, as upstream's.
    fn effective(&self, budget: Budget) -> Budget {
        let now = self.client.now();
        match budget {
            Budget::SharedLeavingReserve
                if self
                    .last_verdict
                    .is_none_or(|at| now.since(at) >= VERDICT_WINDOW) =>
            {
                Budget::Shared
            }
            other => other,
        }
    }

    /// Runs one job's calls on `budget`; the client is left on the shared budget, so nothing
    /// else spends the live reads' budget by accident.
    pub(super) fn with_budget<R>(&mut self, budget: Budget, f: impl FnOnce(&mut Self) -> R) -> R {
        let budget = self.effective(budget);
        self.client.set_budget(budget);
        let result = f(self);
        self.client.set_budget(Budget::Shared);
        result
    }

    /// Runs one request through the client, recording it, the throttle wait and the backoff.
    pub(super) fn call<T>(
        &mut self,
        verb: Verb,
        now: Time,
        request: impl FnOnce(&mut ApiClient) -> Result<T, ApiError>,
    ) -> Result<T, ApiError> {
        let started = self.client.now();
        let result = request(&mut self.client);
        if let Err(ApiError::Throttled { .. }) = &result {
            self.throttled_since.get_or_insert(now);
            return result;
        }
        self.stats
            .request_durations
            .entry(verb.as_str())
            .or_insert_with(crate::observe::api_request_histogram)
            .observe(self.client.now().since(started));
        if let Some(since) = self.throttled_since.take() {
            self.stats.throttle_wait += now.since(since);
        }
        let code = match &result {
            Ok(_) if verb == Verb::Create => 201,
            Ok(_) => 200,
            Err(e) => e.code().unwrap_or(NO_ANSWER),
        };
        *self
            .stats
            .requests
            .entry((verb.as_str(), code))
            .or_default() += 1;
        let after = now.max(self.client.now());
        match &result {
            Err(e) if is_server_trouble(e) => {
                let step = if self.backoff.current.is_zero() {
                    self.backoff_initial
                } else {
                    (self.backoff.current * 2).min(self.backoff_max)
                };
                self.backoff = Backoff {
                    current: step,
                    until: after + step,
                };
                self.stats.backoffs += 1;
                self.stats.last_error = Some((after, e.to_string()));
            }
            // The client throttle now holds every call until Retry-After: that wait starts now.
            Err(ApiError::TooManyRequests { .. }) => self.throttled_since = Some(after),
            other => {
                self.backoff = Backoff::default();
                if let Err(e) = other
                    && !matches!(e, ApiError::NotFound(_) | ApiError::Conflict(_))
                {
                    self.stats.last_error = Some((after, e.to_string()));
                }
            }
        }
        result
    }

    /// PATCH; the answer is the object as written.
    pub(super) fn patch(
        &mut self,
        now: Time,
        path: &str,
        body: &serde_json::Value,
    ) -> Result<Vec<u8>, ApiError> {
        let bytes = body.to_string().into_bytes();
        self.call(Verb::Patch, now, |c| {
            c.patch_bytes(path, PatchType::StrategicMerge, &bytes)
        })
    }

    /// DELETE; the answer is the pod marked for deletion (or a Status if it went at once).
    pub(super) fn delete_pod(
        &mut self,
        now: Time,
        path: &str,
        uid: &str,
    ) -> Result<Vec<u8>, ApiError> {
        let preconditions = Preconditions {
            uid: Some(uid.to_string()),
            resource_version: None,
        };
        // No grace period override: the pod's own, as upstream's plain DELETE.
        self.call(Verb::Delete, now, |c| {
            c.delete_bytes(path, &preconditions, None)
        })
    }

    pub(super) fn get<T: Decode>(
        &mut self,
        now: Time,
        path: &str,
        ctx: &mut DecodeContext,
    ) -> Result<T, ApiError> {
        let bytes = self.call(Verb::Get, now, |c| c.get_bytes(path))?;
        decode_object::<T>(&bytes, ctx).map_err(|e| ApiError::Decode(format!("GET {path}: {e}")))
    }

    pub(super) fn jittered(&mut self, base: Duration) -> Duration {
        // The jitter only has to spread retries, not be unpredictable.
        base + base.mul_f64(self.rng.below(1000) as f64 / 1000.0)
    }
}
