//! Durations as people write them in the config file: "100ms", "5s", "1m30s", "1.5h", "250us".
//!
//! The grammar is Go's `time.ParseDuration` minus the sign (a negative period or timeout is never
//! meaningful here, so "-1s" is an error rather than something to clamp): one or more
//! `<number><unit>` groups, number = digits with an optional fraction, unit one of
//! h, m, s, ms, us (or µs), ns. A bare "0" is accepted like Go. No spaces, no empty string.

use std::fmt::Write as _;
use std::time::Duration;

const NANOS_PER: [(&str, u128); 8] = [
    // Longest unit spellings first, so "ms" is not read as "m" followed by garbage.
    ("ms", 1_000_000),
    ("us", 1_000),
    ("µs", 1_000),
    ("ns", 1),
    ("h", 3_600_000_000_000),
    ("m", 60_000_000_000),
    ("s", 1_000_000_000),
    ("d", 0), // recognised only to give a better message than "unknown unit"
];

/// Parses a duration; the error is a short reason suitable after `<key>: `.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let bad = |why: &str| Err(format!("invalid duration {text:?}: {why}"));
    if text.is_empty() {
        return bad("empty (write e.g. \"5s\")");
    }
    if text == "0" {
        return Ok(Duration::ZERO);
    }
    if text.starts_with('-') {
        return bad("must not be negative");
    }
    let mut rest = text;
    let mut total: u128 = 0;
    while !rest.is_empty() {
        let digits_end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let number = &rest[..digits_end];
        if number.is_empty() {
            return bad("expected a number before each unit (e.g. \"1m30s\")");
        }
        rest = &rest[digits_end..];
        let Some((unit, nanos_per_unit)) = NANOS_PER.iter().find(|(u, _)| rest.starts_with(u))
        else {
            return if rest.is_empty() {
                bad("missing unit (one of h, m, s, ms, us, ns)")
            } else {
                bad("unknown unit (use h, m, s, ms, us, ns)")
            };
        };
        if *nanos_per_unit == 0 {
            return bad("days are not a unit here (use h, e.g. \"24h\")");
        }
        rest = &rest[unit.len()..];
        total =
            total
                .checked_add(scaled(number, *nanos_per_unit).ok_or_else(|| {
                    format!("invalid duration {text:?}: {number:?} is not a number")
                })?)
                .ok_or_else(|| format!("invalid duration {text:?}: too large"))?;
    }
    let secs = u64::try_from(total / 1_000_000_000)
        .map_err(|_| format!("invalid duration {text:?}: too large"))?;
    if secs > MAX_SECS {
        return bad("too large (at most 100 years)");
    }
    Ok(Duration::new(secs, (total % 1_000_000_000) as u32))
}

/// Nobody means a period longer than this; the bound keeps every later `Time + Duration` exact.
const MAX_SECS: u64 = 100 * 365 * 24 * 3600;

/// `number` (digits, optionally one '.' and more digits) times `unit` nanoseconds, exactly;
/// fraction digits beyond nanosecond precision are dropped.
fn scaled(number: &str, unit: u128) -> Option<u128> {
    let (whole, frac) = match number.split_once('.') {
        Some((w, f)) => (w, f),
        None => (number, ""),
    };
    if (whole.is_empty() && frac.is_empty()) || frac.contains('.') {
        return None;
    }
    let whole: u128 = if whole.is_empty() {
        0
    } else {
        // 30 digits is already beyond MAX_SECS in nanoseconds; refusing early avoids overflow.
        if whole.len() > 30 {
            return None;
        }
        whole.parse().ok()?
    };
    let mut value = whole.checked_mul(unit)?;
    let mut scale = unit;
    for digit in frac.bytes().take(18) {
        scale /= 10;
        value = value.checked_add(u128::from(digit - b'0') * scale)?;
    }
    Some(value)
}

/// The canonical spelling `parse_duration` reads back: "1m30s", "100ms", "1h", "0s", "1s500ms".
pub fn format_duration(d: Duration) -> String {
    if d.is_zero() {
        return "0s".to_string();
    }
    let mut out = String::new();
    let secs = d.as_secs();
    let (h, m, s) = (secs / 3600, (secs % 3600) / 60, secs % 60);
    let nanos = d.subsec_nanos();
    let (ms, us, ns) = (nanos / 1_000_000, (nanos / 1_000) % 1_000, nanos % 1_000);
    for (value, unit) in [
        (h, "h"),
        (m, "m"),
        (s, "s"),
        (u64::from(ms), "ms"),
        (u64::from(us), "us"),
        (u64::from(ns), "ns"),
    ] {
        if value != 0 {
            let _ = write!(out, "{value}{unit}");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_the_spellings_the_config_documents() {
        let cases = [
            ("100ms", Duration::from_millis(100)),
            ("5s", Duration::from_secs(5)),
            ("1m30s", Duration::from_secs(90)),
            ("1h", Duration::from_secs(3600)),
            ("250us", Duration::from_micros(250)),
            ("250µs", Duration::from_micros(250)),
            ("1.5s", Duration::from_millis(1500)),
            ("0.1s", Duration::from_millis(100)),
            (".5m", Duration::from_secs(30)),
            ("2h45m", Duration::from_secs(2 * 3600 + 45 * 60)),
            ("0", Duration::ZERO),
            ("0s", Duration::ZERO),
            ("7ns", Duration::from_nanos(7)),
        ];
        for (text, want) in cases {
            assert_eq!(parse_duration(text), Ok(want), "{text}");
        }
    }

    #[test]
    fn rejects_what_is_not_a_duration() {
        for text in [
            "",
            "5 parsecs",
            "5",
            "-1s",
            "s",
            "5s ",
            " 5s",
            "5x",
            "1..5s",
            ".s",
            "5d",
            "1e3s",
            "5S",
            "1m30",
            "999999999999999999999999999999999h",
        ] {
            let err = parse_duration(text).expect_err(text);
            assert!(err.contains("invalid duration"), "{text}: {err}");
        }
        assert!(parse_duration("5 parsecs").unwrap_err().contains("unit"));
        assert!(parse_duration("-1s").unwrap_err().contains("negative"));
        assert!(parse_duration("101y").is_err());
        assert!(parse_duration("877000h").unwrap_err().contains("too large"));
    }

    #[test]
    fn format_is_read_back_exactly() {
        for d in [
            Duration::ZERO,
            Duration::from_millis(100),
            Duration::from_secs(90),
            Duration::from_millis(1500),
            Duration::from_secs(3600 * 25 + 1),
            Duration::new(3, 1_002_003),
        ] {
            let text = format_duration(d);
            assert_eq!(parse_duration(&text), Ok(d), "{text}");
        }
        assert_eq!(format_duration(Duration::from_secs(90)), "1m30s");
        assert_eq!(format_duration(Duration::from_secs(300)), "5m");
        assert_eq!(format_duration(Duration::from_millis(100)), "100ms");
    }
}
