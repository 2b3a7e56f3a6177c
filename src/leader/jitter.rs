//! Spreads followers' retries so that candidates started together do not poll the Lease in step.
//!
//! client-go waits `retry · (1 + 1.2·r)` (JitterFactor 1.2, r in [0, 1)), up to 2.2 retry
//! periods. We keep the factor 1.2 as the ratio of the longest to the shortest wait but jitter
//! *downwards*, `retry / 1.2 ..= retry`: a follower then looks at the Lease at least once per
//! retry period, which is what lets a released lease change hands within one retry period (with
//! the 2 s default, client-go's spread would allow 4.4 s).

use std::time::Duration;

use crate::time::Rng;

/// client-go `leaderelection.JitterFactor`.
pub(crate) const JITTER_FACTOR: f64 = 1.2;

/// The spread needs no cryptographic quality, only independence between processes (seeded from
/// /dev/urandom by the shell, by hand in tests).
#[derive(Clone, Debug)]
pub(crate) struct Jitter {
    rng: Rng,
}

impl Jitter {
    pub(crate) fn new(seed: u64) -> Jitter {
        Jitter {
            rng: Rng::new(seed),
        }
    }

    /// A seed from /dev/urandom, else from the time and process id.
    pub(crate) fn seed_from_entropy() -> u64 {
        Rng::seed_from_entropy()
    }

    /// A wait in `retry / JITTER_FACTOR ..= retry`, whole milliseconds.
    pub(crate) fn follower_wait(&mut self, retry: Duration) -> Duration {
        let max = u64::try_from(retry.as_millis()).unwrap_or(u64::MAX);
        let min = (max as f64 / JITTER_FACTOR) as u64;
        let spread = max - min;
        let offset = if spread == 0 {
            0
        } else {
            self.rng.below(spread + 1)
        };
        Duration::from_millis(min + offset)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn follower_waits_stay_within_one_retry_period_and_spread_out() {
        let retry = Duration::from_secs(2);
        let mut seen = std::collections::BTreeSet::new();
        for seed in 0..50 {
            let mut jitter = Jitter::new(seed);
            for _ in 0..20 {
                let wait = jitter.follower_wait(retry);
                assert!(
                    wait >= Duration::from_millis(1666) && wait <= retry,
                    "{wait:?}"
                );
                seen.insert(wait);
            }
        }
        assert!(seen.len() > 100, "only {} distinct waits", seen.len());
        assert!(seen.contains(&retry) || seen.iter().any(|w| *w > Duration::from_millis(1990)));
    }

    #[test]
    fn different_seeds_give_different_sequences() {
        let retry = Duration::from_secs(2);
        let a: Vec<_> = (0..5)
            .scan(Jitter::new(1), |j, _| Some(j.follower_wait(retry)))
            .collect();
        let b: Vec<_> = (0..5)
            .scan(Jitter::new(2), |j, _| Some(j.follower_wait(retry)))
            .collect();
        assert_ne!(a, b);
    }
}
