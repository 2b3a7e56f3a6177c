//! Fault injection: what a misbehaving API server or network does to a client, on demand.
//!
//! Rules live in the shared state; request handlers consult them before doing any work, watch
//! streams notice drop/corrupt "generations" and stalls when they wake up, and the accept loop
//! honours refusal windows.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::resource::{Resource, Verb};
use super::shared::Shared;

/// Which requests a rule applies to: a verb, a target (`"nodes"`, `"nodes/status"`, `"pods"`, ...),
/// both or neither. A target without a subresource also matches its subresources.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RequestMatch {
    pub verb: Option<Verb>,
    pub target: Option<String>,
}

impl RequestMatch {
    pub fn any() -> RequestMatch {
        RequestMatch::default()
    }

    pub fn verb(verb: Verb) -> RequestMatch {
        RequestMatch {
            verb: Some(verb),
            target: None,
        }
    }

    /// `RequestMatch::on(Verb::Patch, "nodes")`, `RequestMatch::on(Verb::Update, "nodes/status")`.
    pub fn on(verb: Verb, target: &str) -> RequestMatch {
        RequestMatch {
            verb: Some(verb),
            target: Some(target.to_string()),
        }
    }

    pub fn resource(target: &str) -> RequestMatch {
        RequestMatch {
            verb: None,
            target: Some(target.to_string()),
        }
    }

    pub(crate) fn matches(
        &self,
        verb: Verb,
        resource: Resource,
        subresource: Option<&str>,
    ) -> bool {
        if self.verb.is_some_and(|v| v != verb) {
            return false;
        }
        match &self.target {
            None => true,
            Some(target) => match target.split_once('/') {
                Some((r, sub)) => r == resource.plural() && subresource == Some(sub),
                None => target == resource.plural(),
            },
        }
    }
}

/// What an injected failure answers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct FailureRule {
    pub matcher: RequestMatch,
    pub remaining: u32,
    pub code: u16,
    pub retry_after: Option<u32>,
}

#[derive(Debug, Default)]
pub(crate) struct FaultState {
    pub watch_drop_generation: u64,
    pub watch_corrupt_generation: u64,
    /// Watches send nothing while `now < stall_until`.
    pub stall_until: Option<Instant>,
    pub failures: Vec<FailureRule>,
    pub delays: Vec<(RequestMatch, Duration)>,
}

impl FaultState {
    pub fn stalled(&self, now: Instant) -> bool {
        self.stall_until.is_some_and(|until| now < until)
    }

    /// Consumes one use of the first matching failure rule.
    pub fn take_failure(
        &mut self,
        verb: Verb,
        resource: Resource,
        subresource: Option<&str>,
    ) -> Option<(u16, Option<u32>)> {
        let i = self
            .failures
            .iter()
            .position(|r| r.matcher.matches(verb, resource, subresource))?;
        let rule = &mut self.failures[i];
        let answer = (rule.code, rule.retry_after);
        rule.remaining -= 1;
        if rule.remaining == 0 {
            self.failures.remove(i);
        }
        Some(answer)
    }

    pub fn delay_for(&self, verb: Verb, resource: Resource, subresource: Option<&str>) -> Duration {
        self.delays
            .iter()
            .filter(|(m, _)| m.matches(verb, resource, subresource))
            .map(|(_, d)| *d)
            .max()
            .unwrap_or_default()
    }
}

/// The fault-injection controls of a running simulator (`SimHandle::faults()`).
#[derive(Clone)]
pub struct Faults {
    pub(crate) shared: Arc<Shared>,
}

impl Faults {
    /// Closes every open watch connection abruptly (TCP shutdown mid-stream, no end chunk, no TLS
    /// close_notify), as a dying API server or a broken network does.
    pub fn drop_watches(&self) {
        self.shared
            .with_state(|s| s.faults.watch_drop_generation += 1);
        self.shared.changed.notify_all();
    }

    /// Open (and newly opened) watches keep their connection but send nothing, not even
    /// bookmarks, for `duration` (`None`: until `clear_stall`). Events written meanwhile are
    /// delivered when the stall ends, unless the history has moved past them (then 410).
    pub fn stall_watches(&self, duration: Option<Duration>) {
        let until = match duration {
            Some(d) => Instant::now() + d,
            // Far enough to be "forever" without overflowing Instant arithmetic.
            None => Instant::now() + Duration::from_secs(100 * 365 * 24 * 3600),
        };
        self.shared
            .with_state(|s| s.faults.stall_until = Some(until));
        self.shared.changed.notify_all();
    }

    pub fn clear_stall(&self) {
        self.shared.with_state(|s| s.faults.stall_until = None);
        self.shared.changed.notify_all();
    }

    /// Every open watch receives one line that is not JSON, then carries on.
    pub fn corrupt_watches(&self) {
        self.shared
            .with_state(|s| s.faults.watch_corrupt_generation += 1);
        self.shared.changed.notify_all();
    }

    /// The next `count` requests matching `matcher` are answered with `code` (409, 410, 500, 503,
    /// ...) and a `metav1.Status` body worded as the real server words it, without being executed.
    /// A watch answered 410 gets the real server's form: 200, one ERROR event, end of stream.
    pub fn fail_next(&self, matcher: RequestMatch, count: u32, code: u16) {
        self.add_failure(matcher, count, code, None);
    }

    /// The next `count` matching requests get `429 TooManyRequests` with `Retry-After`.
    pub fn throttle_next(&self, matcher: RequestMatch, count: u32, retry_after_seconds: u32) {
        self.add_failure(matcher, count, 429, Some(retry_after_seconds));
    }

    fn add_failure(&self, matcher: RequestMatch, count: u32, code: u16, retry_after: Option<u32>) {
        if count == 0 {
            return;
        }
        self.shared.with_state(|s| {
            s.faults.failures.push(FailureRule {
                matcher,
                remaining: count,
                code,
                retry_after,
            })
        });
    }

    /// Responses to matching requests (and the start of matching watches) are delayed by `delay`
    /// until `clear_delays`.
    pub fn delay_responses(&self, matcher: RequestMatch, delay: Duration) {
        self.shared
            .with_state(|s| s.faults.delays.push((matcher, delay)));
    }

    pub fn clear_delays(&self) {
        self.shared.with_state(|s| s.faults.delays.clear());
    }

    /// Removes every pending failure rule, delay and stall.
    pub fn clear(&self) {
        self.shared.with_state(|s| {
            s.faults.failures.clear();
            s.faults.delays.clear();
            s.faults.stall_until = None;
        });
        self.shared.changed.notify_all();
    }

    /// Stops accepting connections (the listening socket is closed: clients get "connection
    /// refused") for `duration`, then listens again on the same port. Open connections live on.
    pub fn refuse_connections(&self, duration: Duration) {
        self.shared.refuse_connections(duration, false);
    }

    /// An API server restart: every open connection (watches and keep-alive) is closed at once
    /// and new ones are refused for `duration`; then the server is back on the same port with
    /// the same data, as an apiserver restarting in front of the same etcd.
    pub fn restart(&self, duration: Duration) {
        self.shared.refuse_connections(duration, true);
    }
}
