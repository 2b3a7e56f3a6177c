//! Time as the controller sees it.
//!
//! `Time` is milliseconds since the Unix epoch on the *controller's* clock. The shell produces it
//! as "wall clock at start-up + monotonic time elapsed since", so it never jumps backwards while
//! the daemon runs, yet converts to the RFC 3339 stamps the API wants without a second clock.
//! Tests drive it by hand (a virtual clock): the core never reads a clock itself.

pub(crate) mod deadline_lanes;
pub(crate) mod duration_text;
pub(crate) mod name_hash;
pub(crate) mod rng;
pub mod timer_heap;
pub(crate) mod token_bucket;

pub use deadline_lanes::{Armed, DeadlineLanes};
pub use duration_text::{format_duration, parse_duration};
pub use name_hash::NameHashState;
pub use rng::Rng;
pub use timer_heap::TimerHeap;
pub use token_bucket::{Rate, TokenBucket};

use std::fmt;
use std::hash::{Hash, Hasher};
use std::num::NonZeroU64;
use std::ops::{Add, AddAssign, Sub};
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;

/// Held as milliseconds + 1 in a `NonZeroU64`, so an `Option<Time>` takes 8 bytes, not 16 (a
/// node keeps a dozen of them: its conditions' heartbeats and transitions, its health record).
/// The order is the milliseconds' (the offset is the same for all), and so is the hash. The
/// largest time is `u64::MAX - 1` ms, some 584 million years out, far past what jiff formats.
#[derive(Copy, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Time(NonZeroU64);

impl Time {
    pub const ZERO: Time = Time::from_unix_millis(0);
    pub const MAX: Time = Time(NonZeroU64::MAX);

    /// Saturates at [`Time::MAX`].
    pub const fn from_unix_millis(ms: u64) -> Time {
        match NonZeroU64::new(ms.saturating_add(1)) {
            Some(v) => Time(v),
            // `saturating_add(1)` of any u64 is at least 1.
            None => Time(NonZeroU64::MIN),
        }
    }

    pub const fn as_unix_millis(self) -> u64 {
        self.0.get() - 1
    }

    /// Time elapsed since `earlier`, zero when `earlier` is later (never panics).
    pub fn since(self, earlier: Time) -> Duration {
        Duration::from_millis(self.0.get().saturating_sub(earlier.0.get()))
    }

    pub fn saturating_add(self, d: Duration) -> Time {
        Time(self.0.saturating_add(duration_millis(d)))
    }

    /// RFC 3339 in UTC with second precision, as `metav1.Time` serialises (`2015-01-01T12:00:00Z`).
    pub fn to_rfc3339(self) -> String {
        format!("{:.0}", self.timestamp())
    }

    /// RFC 3339 with microseconds, as `metav1.MicroTime` (Lease `renewTime`) serialises.
    pub fn to_rfc3339_micros(self) -> String {
        format!("{:.6}", self.timestamp())
    }

    /// Parses the RFC 3339 forms the API server emits: `2015-01-01T12:00:00Z`,
    /// with fractional seconds (`.123456Z`) and with a numeric offset (`+02:00`).
    /// Times before 1970 clamp to the epoch; anything malformed is `None`, and so is
    /// what jiff would accept beyond RFC 3339 (an offset without its colon, a bracketed zone).
    pub fn parse_rfc3339(s: &str) -> Option<Time> {
        let offset = s
            .get(19..)?
            .trim_start_matches(|c: char| c == '.' || c.is_ascii_digit());
        let rfc3339_offset =
            matches!(offset, "Z" | "z") || (offset.len() == 6 && offset.as_bytes()[3] == b':');
        if !rfc3339_offset {
            return None;
        }
        let stamp = s.parse::<Timestamp>().ok()?;
        Some(Time::from_unix_millis(
            u64::try_from(stamp.as_millisecond()).unwrap_or(0),
        ))
    }

    /// As jiff's timestamp, for formatting (every `Time` is in jiff's range).
    fn timestamp(self) -> Timestamp {
        i64::try_from(self.as_unix_millis())
            .ok()
            .and_then(|ms| Timestamp::from_millisecond(ms).ok())
            .unwrap_or(Timestamp::MAX)
    }
}

impl Default for Time {
    fn default() -> Time {
        Time::ZERO
    }
}

/// Hashes the milliseconds, as the `u64` it was before (maps keyed by time keep their order).
impl Hash for Time {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.as_unix_millis().hash(state);
    }
}

impl fmt::Debug for Time {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:.3}", self.timestamp())
    }
}

impl fmt::Display for Time {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

impl Add<Duration> for Time {
    type Output = Time;
    fn add(self, d: Duration) -> Time {
        self.saturating_add(d)
    }
}

impl AddAssign<Duration> for Time {
    fn add_assign(&mut self, d: Duration) {
        *self = self.saturating_add(d);
    }
}

impl Sub<Time> for Time {
    type Output = Duration;
    fn sub(self, earlier: Time) -> Duration {
        self.since(earlier)
    }
}

/// Whole milliseconds of a duration, saturating (durations here are config values and timeouts).
pub fn duration_millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_round_trips_and_accepts_api_server_forms() {
        let t = Time::parse_rfc3339("2015-01-01T12:00:00Z").unwrap();
        assert_eq!(t.as_unix_millis(), 1_420_113_600_000);
        assert_eq!(t.to_rfc3339(), "2015-01-01T12:00:00Z");
        let micro = Time::parse_rfc3339("2024-02-29T23:59:59.123456Z").unwrap();
        assert_eq!(micro.to_rfc3339_micros(), "2024-02-29T23:59:59.123000Z");
        let offset = Time::parse_rfc3339("2015-01-01T14:00:00+02:00").unwrap();
        assert_eq!(offset, t);
        assert_eq!(format!("{micro:?}"), "2024-02-29T23:59:59.123Z");
        let spaced = Time::parse_rfc3339("2015-01-01 12:00:00z").unwrap();
        assert_eq!(spaced, t);
        let before_epoch = Time::parse_rfc3339("1969-12-31T23:59:59Z").unwrap();
        assert_eq!(before_epoch, Time::ZERO);
    }

    #[test]
    fn malformed_stamps_are_none_not_panics() {
        for bad in [
            "",
            "2015",
            "2015-13-01T00:00:00Z",
            "2015-01-01T00:00:00",
            "2015-01-01T00:00:00.Z",
            "xxxx-01-01T00:00:00Z",
            "2015-01-01T00:00:00+0200",
            "2015-01-01T00:00:00Zjunk",
        ] {
            assert_eq!(Time::parse_rfc3339(bad), None, "{bad}");
        }
    }

    #[test]
    fn arithmetic_saturates() {
        let t = Time::from_unix_millis(1000);
        assert_eq!(t + Duration::from_millis(500), Time::from_unix_millis(1500));
        assert_eq!(Time::ZERO - t, Duration::ZERO);
        assert_eq!(Time::MAX + Duration::from_secs(1), Time::MAX);
        assert_eq!(Time::from_unix_millis(u64::MAX), Time::MAX);
        assert_eq!(Time::ZERO.as_unix_millis(), 0);
        assert_eq!(Time::default(), Time::ZERO);
        assert!(Time::ZERO < Time::from_unix_millis(1));
        assert_eq!(std::mem::size_of::<Option<Time>>(), 8);
    }
}
