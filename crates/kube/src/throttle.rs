//! The client-side request throttle (upstream `--kube-api-qps` / `--kube-api-burst`, 20 / 30 for
//! kube-controller-manager), sans-IO.
//!
//! Every API call asks `admit(now)` first. The answer is either "go" or the earliest time to ask
//! again, so the single-threaded executor schedules the call instead of sleeping in the event
//! loop. A 429's `Retry-After` pushes that time for every call, not only the one refused: the
//! server is telling the whole client to back off.

use std::time::Duration;

use crate::time::Time;
use crate::time::{Rate, TokenBucket};

/// Upstream kube-controller-manager client defaults.
pub(crate) const DEFAULT_QPS: u64 = 20;
pub(crate) const DEFAULT_BURST: u64 = 30;

#[derive(Clone, Debug)]
pub(crate) struct Throttle {
    /// `None`: no client-side limit (tests, the simulator); Retry-After still applies.
    bucket: Option<TokenBucket>,
    /// No call before this time (a server's Retry-After).
    not_before: Time,
}

impl Throttle {
    /// `qps` tokens a second, at most `burst` at once; starts full, as client-go's limiter does.
    /// A rate of zero admits nothing: validate settings before building one.
    pub(crate) fn new(qps: Rate, burst: u64, now: Time) -> Throttle {
        Throttle {
            bucket: Some(TokenBucket::new(qps, burst, now)),
            not_before: Time::ZERO,
        }
    }

    /// A throttle that only honours Retry-After.
    pub(crate) fn unlimited() -> Throttle {
        Throttle {
            bucket: None,
            not_before: Time::ZERO,
        }
    }

    /// Takes a token for one call at `now`, or says when to ask again.
    pub(crate) fn admit(&mut self, now: Time) -> Result<(), Time> {
        self.admit_keeping(now, 0)
    }

    /// Like [`Throttle::admit`], for a call that must leave `keep` tokens to urgent ones.
    pub(crate) fn admit_keeping(&mut self, now: Time, keep: u64) -> Result<(), Time> {
        if now < self.not_before {
            return Err(self.not_before);
        }
        match &mut self.bucket {
            None => Ok(()),
            Some(bucket) => {
                if bucket.try_take_keeping(now, keep) {
                    Ok(())
                } else {
                    Err(bucket
                        .next_available_keeping(now, keep)
                        .unwrap_or(Time::MAX))
                }
            }
        }
    }

    /// When a call would be admitted, without taking a token (`now` if at once).
    pub(crate) fn next_admission(&self, now: Time) -> Time {
        self.next_admission_keeping(now, 0)
    }

    /// When a call leaving `keep` tokens would be admitted.
    pub(crate) fn next_admission_keeping(&self, now: Time, keep: u64) -> Time {
        let from = now.max(self.not_before);
        match &self.bucket {
            None => from,
            Some(bucket) => bucket
                .next_available_keeping(from, keep)
                .unwrap_or(Time::MAX),
        }
    }

    /// The burst (0 when unlimited).
    pub(crate) fn burst(&self) -> u64 {
        self.bucket.as_ref().map_or(0, TokenBucket::burst)
    }

    /// The server answered 429 with `Retry-After`: no call of ours before `now + after`.
    pub(crate) fn retry_after(&mut self, now: Time, after: Duration) {
        self.not_before = self.not_before.max(now.saturating_add(after));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: Time = Time::from_unix_millis(1_700_000_000_000);

    /// Runs `calls` calls as fast as the throttle allows on a virtual clock; returns when the
    /// last one was admitted.
    fn run_calls(throttle: &mut Throttle, calls: u32, start: Time) -> Time {
        let mut now = start;
        let mut admitted = 0;
        while admitted < calls {
            match throttle.admit(now) {
                Ok(()) => admitted += 1,
                Err(next) => {
                    assert!(
                        next > now,
                        "throttle asked to retry at {next:?}, not after {now:?}"
                    );
                    now = next;
                }
            }
        }
        now
    }

    #[test]
    fn two_hundred_calls_at_qps_20_burst_30_take_8_5_seconds() {
        let mut throttle = Throttle::new(Rate::per_second(DEFAULT_QPS), DEFAULT_BURST, T0);
        let done = run_calls(&mut throttle, 200, T0);
        // The burst of 30 goes at once, the other 170 at 20/s.
        assert_eq!(done - T0, Duration::from_millis(8_500));
    }

    #[test]
    fn the_burst_is_admitted_at_once_and_the_next_call_waits_one_interval() {
        let mut throttle = Throttle::new(Rate::per_second(20), 30, T0);
        for _ in 0..30 {
            assert_eq!(throttle.admit(T0), Ok(()));
        }
        assert_eq!(throttle.admit(T0), Err(T0 + Duration::from_millis(50)));
        assert_eq!(throttle.next_admission(T0), T0 + Duration::from_millis(50));
    }

    #[test]
    fn retry_after_3s_defers_the_next_call_3s() {
        let mut throttle = Throttle::new(Rate::per_second(20), 30, T0);
        assert_eq!(throttle.admit(T0), Ok(()));
        throttle.retry_after(T0, Duration::from_secs(3));
        let until = T0 + Duration::from_secs(3);
        assert_eq!(throttle.admit(T0), Err(until));
        assert_eq!(
            throttle.admit(T0 + Duration::from_millis(2_999)),
            Err(until)
        );
        assert_eq!(throttle.next_admission(T0), until);
        assert_eq!(throttle.admit(until), Ok(()));
    }

    #[test]
    fn a_shorter_retry_after_does_not_shorten_a_longer_one() {
        let mut throttle = Throttle::unlimited();
        throttle.retry_after(T0, Duration::from_secs(10));
        throttle.retry_after(T0, Duration::from_secs(1));
        assert_eq!(throttle.admit(T0), Err(T0 + Duration::from_secs(10)));
    }

    /// Routine calls that leave half the burst: urgent calls then take it at once while the
    /// routine ones use the whole rate; the two together never pass qps/burst.
    #[test]
    fn routine_calls_leave_a_reserve_that_urgent_calls_take_at_once() {
        let mut throttle = Throttle::new(Rate::per_second(20), 30, T0);
        let mut routine = 0;
        while throttle.admit_keeping(T0, 15).is_ok() {
            routine += 1;
        }
        assert_eq!(routine, 15);
        assert_eq!(
            throttle.admit_keeping(T0, 15),
            Err(T0 + Duration::from_millis(50))
        );
        for _ in 0..15 {
            assert_eq!(throttle.admit(T0), Ok(()));
        }
        assert_eq!(throttle.admit(T0), Err(T0 + Duration::from_millis(50)));
        // Drained: a routine call now waits for 16 tokens' worth of refill.
        assert_eq!(
            throttle.next_admission_keeping(T0, 15),
            T0 + Duration::from_millis(800)
        );
        let done = run_calls(&mut throttle, 200, T0);
        assert_eq!(done - T0, Duration::from_millis(10_000));
    }

    #[test]
    fn unlimited_admits_everything() {
        let mut throttle = Throttle::unlimited();
        assert_eq!(run_calls(&mut throttle, 10_000, T0), T0);
    }
}
