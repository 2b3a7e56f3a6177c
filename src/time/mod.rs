//! Time as the controller sees it.
//!
//! `Time` is milliseconds since the Unix epoch on the *controller's* clock. The shell produces it
//! as "wall clock at start-up + monotonic time elapsed since", so it never jumps backwards while
//! the daemon runs, yet converts to the RFC 3339 stamps the API wants without a second clock.
//! Tests drive it by hand (a virtual clock): the core never reads a clock itself.

pub mod deadline_lanes;
pub mod duration_text;
pub mod timer_heap;
pub mod token_bucket;

pub use deadline_lanes::{Armed, DeadlineLanes};
pub use duration_text::{format_duration, parse_duration};
pub use timer_heap::TimerHeap;
pub use token_bucket::{Rate, TokenBucket};

use std::fmt;
use std::ops::{Add, AddAssign, Sub};
use std::time::Duration;

#[derive(Copy, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Time(u64);

impl Time {
    pub const ZERO: Time = Time(0);
    pub const MAX: Time = Time(u64::MAX);

    pub const fn from_unix_millis(ms: u64) -> Time {
        Time(ms)
    }

    pub const fn as_unix_millis(self) -> u64 {
        self.0
    }

    /// Time elapsed since `earlier`, zero when `earlier` is later (never panics).
    pub fn since(self, earlier: Time) -> Duration {
        Duration::from_millis(self.0.saturating_sub(earlier.0))
    }

    pub fn saturating_add(self, d: Duration) -> Time {
        Time(self.0.saturating_add(duration_millis(d)))
    }

    /// RFC 3339 in UTC with second precision, as `metav1.Time` serialises (`2015-01-01T12:00:00Z`).
    pub fn to_rfc3339(self) -> String {
        let (y, mo, d, h, mi, s, _) = civil_from_millis(self.0);
        format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}Z")
    }

    /// RFC 3339 with microseconds, as `metav1.MicroTime` (Lease `renewTime`) serialises.
    pub fn to_rfc3339_micros(self) -> String {
        let (y, mo, d, h, mi, s, ms) = civil_from_millis(self.0);
        format!(
            "{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}.{:06}Z",
            ms * 1000
        )
    }

    /// Parses the RFC 3339 forms the API server emits: `2015-01-01T12:00:00Z`,
    /// with fractional seconds (`.123456Z`) and with a numeric offset (`+02:00`).
    /// Times before 1970 clamp to the epoch; anything malformed is `None`.
    pub fn parse_rfc3339(s: &str) -> Option<Time> {
        let b = s.as_bytes();
        if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b'T' | b't' | b' ') {
            return None;
        }
        if b[13] != b':' || b[16] != b':' {
            return None;
        }
        let num = |r: std::ops::Range<usize>| -> Option<i64> {
            let part = s.get(r)?;
            if !part.bytes().all(|c| c.is_ascii_digit()) {
                return None;
            }
            part.parse().ok()
        };
        let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
        let (h, mi, sec) = (num(11..13)?, num(14..16)?, num(17..19)?);
        if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || sec > 60 {
            return None;
        }
        let mut i = 19;
        let mut millis = 0i64;
        if b.get(i) == Some(&b'.') {
            i += 1;
            let start = i;
            while i < b.len() && b[i].is_ascii_digit() {
                i += 1;
            }
            if i == start {
                return None;
            }
            let frac = &s[start..i.min(start + 3)];
            millis = frac.parse::<i64>().ok()? * 10i64.pow(3 - frac.len() as u32);
        }
        let offset_secs = match b.get(i) {
            Some(b'Z') | Some(b'z') if i + 1 == b.len() => 0,
            Some(sign @ (b'+' | b'-')) if i + 6 == b.len() && b[i + 3] == b':' => {
                let oh = num(i + 1..i + 3)?;
                let om = num(i + 4..i + 6)?;
                let off = oh * 3600 + om * 60;
                if *sign == b'+' { off } else { -off }
            }
            _ => return None,
        };
        let days = days_from_civil(y, mo, d);
        let secs = days * 86_400 + h * 3600 + mi * 60 + sec - offset_secs;
        let ms = secs.saturating_mul(1000) + millis;
        Some(Time(ms.max(0) as u64))
    }
}

impl fmt::Debug for Time {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (y, mo, d, h, mi, s, ms) = civil_from_millis(self.0);
        write!(f, "{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}.{ms:03}Z")
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

// Howard Hinnant's civil-date algorithms: exact for the proleptic Gregorian calendar.
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn civil_from_millis(ms: u64) -> (i64, u32, u32, u32, u32, u32, u32) {
    let secs = (ms / 1000) as i64;
    let milli = (ms % 1000) as u32;
    let days = secs.div_euclid(86_400);
    let sod = secs.rem_euclid(86_400);
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    let (h, mi, s) = (
        (sod / 3600) as u32,
        ((sod % 3600) / 60) as u32,
        (sod % 60) as u32,
    );
    (y, m, d, h, mi, s, milli)
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
    }
}
