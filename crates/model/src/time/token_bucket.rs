//! An integer token bucket: exact over arbitrarily long runs.
//!
//! Rates come from config as decimals (0.1 nodes/s, 0.01, 20 qps). Floats would drift after days
//! of refills, so the rate is held in micro-tokens per second and the level in "units" where one
//! token is 10^9 units: each millisecond adds exactly `rate_micro` units. Rates are thus exact to
//! 10^-6 tokens/s, and a caller taking tokens as soon as they exist gets precisely
//! `burst + rate x T` tokens in a window of length T.
//!
//! A rate of zero means "never" (upstream's `FakeNeverRateLimiter`): not even the burst is given.
//! A bucket starts full, like `golang.org/x/time/rate` and client-go's token bucket.

use std::fmt;
use std::time::Duration;

use crate::time::Time;

/// Units in one token: 10^6 micro-tokens x 10^3 milliseconds per second.
const UNIT: u128 = 1_000_000_000;

/// Tokens per second, in millionths.
#[derive(Copy, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Rate(u64);

impl Rate {
    pub const NEVER: Rate = Rate(0);

    pub const fn from_micro_per_second(micro: u64) -> Rate {
        Rate(micro)
    }

    pub const fn per_second(whole: u64) -> Rate {
        Rate(whole * 1_000_000)
    }

    /// From a decimal rate; `None` when negative, not finite or beyond 10^12 per second.
    pub fn from_f64(per_second: f64) -> Option<Rate> {
        if !per_second.is_finite() || !(0.0..=1e12).contains(&per_second) {
            return None;
        }
        Some(Rate((per_second * 1e6).round() as u64))
    }

    pub fn as_f64(self) -> f64 {
        self.0 as f64 / 1e6
    }

    pub const fn micro_per_second(self) -> u64 {
        self.0
    }

    pub const fn is_never(self) -> bool {
        self.0 == 0
    }
}

impl fmt::Debug for Rate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/s", self.as_f64())
    }
}

impl fmt::Display for Rate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/s", self.as_f64())
    }
}

#[derive(Clone, Debug)]
pub struct TokenBucket {
    rate: Rate,
    burst: u64,
    /// Units held, at most `burst * UNIT`.
    level: u128,
    /// When `level` was last brought up to date.
    updated: Time,
}

impl TokenBucket {
    /// A full bucket.
    pub fn new(rate: Rate, burst: u64, now: Time) -> TokenBucket {
        TokenBucket {
            rate,
            burst,
            level: u128::from(burst) * UNIT,
            updated: now,
        }
    }

    pub fn rate(&self) -> Rate {
        self.rate
    }

    pub fn burst(&self) -> u64 {
        self.burst
    }

    /// Takes one token if there is one at `now`.
    pub fn try_take(&mut self, now: Time) -> bool {
        if self.rate.is_never() {
            return false;
        }
        self.refill(now);
        if self.level >= UNIT {
            self.level -= UNIT;
            true
        } else {
            false
        }
    }

    /// Takes one token if `keep` more would still be left at `now` (a call of lower priority
    /// leaving the last tokens to urgent ones).
    pub fn try_take_keeping(&mut self, now: Time, keep: u64) -> bool {
        if self.rate.is_never() {
            return false;
        }
        self.refill(now);
        let need = u128::from(keep.saturating_add(1)) * UNIT;
        if self.level >= need {
            self.level -= UNIT;
            true
        } else {
            false
        }
    }

    /// When the next token will be there (`now` if it already is); `None` for a rate of zero.
    pub fn next_available(&self, now: Time) -> Option<Time> {
        self.next_available_keeping(now, 0)
    }

    /// When a token can be taken with `keep` more left; `None` for a rate of zero or when the
    /// bucket can never hold that many.
    pub fn next_available_keeping(&self, now: Time, keep: u64) -> Option<Time> {
        if self.rate.is_never() || self.burst <= keep {
            return None;
        }
        let need = u128::from(keep + 1) * UNIT;
        let level = self.level_at(now);
        if level >= need {
            return Some(now.max(self.updated));
        }
        let per_ms = u128::from(self.rate.0);
        let wait_ms = (need - level).div_ceil(per_ms);
        let from = now.max(self.updated);
        Some(from.saturating_add(Duration::from_millis(
            u64::try_from(wait_ms).unwrap_or(u64::MAX),
        )))
    }

    /// Whole tokens available at `now` (for the state dump).
    pub fn tokens(&self, now: Time) -> u64 {
        if self.rate.is_never() {
            return 0;
        }
        u64::try_from(self.level_at(now) / UNIT).unwrap_or(u64::MAX)
    }

    /// Empties the bucket (upstream: a swapped limiter that had no token starts drained).
    pub fn drain(&mut self, now: Time) {
        self.refill(now);
        self.level = 0;
    }

    /// Whether a token could be taken at `now`, without taking it.
    pub fn has_token(&self, now: Time) -> bool {
        !self.rate.is_never() && self.level_at(now) >= UNIT
    }

    fn level_at(&self, now: Time) -> u128 {
        let elapsed = u128::from(now.since(self.updated).as_millis() as u64);
        let cap = u128::from(self.burst) * UNIT;
        (self.level + elapsed * u128::from(self.rate.0)).min(cap)
    }

    fn refill(&mut self, now: Time) {
        if now > self.updated {
            self.level = self.level_at(now);
            self.updated = now;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::Rng;

    fn t(ms: u64) -> Time {
        Time::from_unix_millis(ms)
    }

    #[test]
    fn starts_full_then_paces_at_the_rate() {
        let mut b = TokenBucket::new(Rate::from_f64(0.1).unwrap(), 1, t(0));
        assert!(b.try_take(t(0)));
        assert!(!b.try_take(t(0)));
        assert_eq!(b.next_available(t(0)), Some(t(10_000)));
        assert!(!b.try_take(t(9_999)));
        assert!(b.try_take(t(10_000)));
    }

    #[test]
    fn zero_rate_never_gives_a_token() {
        let mut b = TokenBucket::new(Rate::NEVER, 5, t(0));
        assert!(!b.try_take(t(0)));
        assert!(!b.try_take(t(u64::MAX / 2)));
        assert_eq!(b.next_available(t(0)), None);
    }

    #[test]
    fn rejects_bad_rates() {
        assert_eq!(Rate::from_f64(-0.1), None);
        assert_eq!(Rate::from_f64(f64::NAN), None);
        assert_eq!(Rate::from_f64(f64::INFINITY), None);
        assert_eq!(
            Rate::from_f64(0.01),
            Some(Rate::from_micro_per_second(10_000))
        );
    }

    #[test]
    fn exact_after_a_simulated_year_at_one_per_hundred_seconds() {
        let mut b = TokenBucket::new(Rate::from_f64(0.01).unwrap(), 1, t(0));
        let mut taken = 0u64;
        let mut now = t(0);
        let year = t(365 * 24 * 3600 * 1000);
        while let Some(next) = b.next_available(now) {
            if next > year {
                break;
            }
            now = next;
            assert!(b.try_take(now));
            taken += 1;
        }
        // 1 (burst) + 0.01/s x 31,536,000 s
        assert_eq!(taken, 1 + 315_360);
    }

    /// Property: in any window of length T the tokens taken are at most burst + rate x T, and a
    /// caller that asks as soon as `next_available` says gets exactly burst + floor(rate x T).
    #[test]
    fn property_window_bound_and_greedy_caller_gets_exactly_the_bound() {
        let rates = [0.1, 0.01, 20.0, 0.333333, 1.0, 7.5, 100.0];
        for seed in 1..=200u64 {
            let mut rng = Rng::new(seed);
            let rate = Rate::from_f64(rates[rng.below(rates.len() as u64) as usize]).unwrap();
            let burst = if rng.chance(30) { 1 } else { 1 + rng.below(30) };
            let horizon_ms = 1 + rng.below(600_000);

            // Greedy caller.
            let mut b = TokenBucket::new(rate, burst, t(0));
            let mut now = t(0);
            let mut taken = 0u64;
            while let Some(next) = b.next_available(now) {
                if next > t(horizon_ms) {
                    break;
                }
                now = next;
                assert!(b.try_take(now), "seed {seed}: next_available lied");
                taken += 1;
            }
            let expected = burst as u128 + horizon_ms as u128 * rate.0 as u128 / UNIT;
            let whole_ms_interval = UNIT % rate.0 as u128 == 0;
            if whole_ms_interval || burst >= 2 {
                assert_eq!(
                    taken as u128, expected,
                    "seed {seed} rate {rate} burst {burst} horizon {horizon_ms}"
                );
            } else {
                // One token per whole-millisecond-rounded interval, never more than the bound.
                let interval_ms = UNIT.div_ceil(rate.0 as u128);
                assert!(taken as u128 <= expected, "seed {seed}");
                assert!(
                    taken as u128 > horizon_ms as u128 / interval_ms,
                    "seed {seed}"
                );
            }

            // Random caller: check every window between two take instants.
            let mut b = TokenBucket::new(rate, burst, t(0));
            let mut takes = Vec::new();
            let mut now = 0u64;
            for _ in 0..300 {
                now += rng.below(2_000);
                if b.try_take(t(now)) {
                    takes.push(now);
                }
            }
            for i in 0..takes.len() {
                for j in i..takes.len() {
                    let window = (takes[j] - takes[i]) as u128;
                    let n = (j - i + 1) as u128;
                    assert!(
                        n * UNIT <= burst as u128 * UNIT + window * rate.0 as u128,
                        "seed {seed}: {n} tokens in {window} ms exceeds the bound"
                    );
                }
            }
        }
    }
}
