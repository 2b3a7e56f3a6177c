//! Log lines on stderr, shaped for where they end up.
//!
//! Under systemd, stderr is a stream into journald, which stamps every line itself and reads a
//! `<N>` prefix as the syslog priority (so `journalctl -p warning` works): print `<4>message`
//! and no timestamp. Anywhere else print `2026-11-22T10:00:00.123Z WARN  message`.
//!
//! The level comes from the config and can change on SIGHUP; `RUST_LOG`, when set, wins over
//! both (it is what an operator reaches for while debugging, and it can name modules).

use std::io::Write as _;
use std::time::SystemTime;

use log::{Level, LevelFilter};

use crate::time::Time;

/// How the logger was set up; lets a config reload change the level.
#[derive(Debug)]
pub struct LogControl {
    rust_log: Option<String>,
}

impl LogControl {
    /// Applies a new level from the config; `false` when RUST_LOG pins the filter instead.
    pub fn set_level(&self, level: LevelFilter) -> bool {
        if self.rust_log.is_some() {
            return false;
        }
        log::set_max_level(level);
        true
    }

    /// The RUST_LOG filter in force, if any.
    pub fn rust_log(&self) -> Option<&str> {
        self.rust_log.as_deref()
    }
}

/// Installs the global logger. Call once, after the config is read.
pub fn init(level: LevelFilter) -> LogControl {
    let journald = stderr_is_journal();
    let rust_log = std::env::var("RUST_LOG")
        .ok()
        .filter(|v| !v.trim().is_empty());
    let mut builder = env_logger::Builder::new();
    builder
        .target(env_logger::Target::Stderr)
        .format(move |buf, record| {
            let prefix = line_prefix(journald, record.level(), wall_clock_now());
            let target = record.target();
            if target.starts_with(env!("CARGO_CRATE_NAME")) {
                writeln!(buf, "{prefix}{}", record.args())
            } else {
                // Lines from libraries (rustls, ureq) say where they come from.
                writeln!(buf, "{prefix}[{target}] {}", record.args())
            }
        });
    match &rust_log {
        Some(filters) => {
            builder.parse_filters(filters);
        }
        // The logger lets everything through and the global max level does the filtering, so
        // a reload can change the level with `log::set_max_level` alone.
        None => {
            builder.filter_level(LevelFilter::Trace);
        }
    }
    // A second init (tests) keeps the first logger; that is harmless.
    let _ = builder.try_init();
    let control = LogControl { rust_log };
    control.set_level(level);
    control
}

/// For the few lines printed before the logger exists (a bad config): same shape, error priority.
pub fn early_error(message: &str) {
    let prefix = line_prefix(stderr_is_journal(), Level::Error, wall_clock_now());
    eprintln!("{prefix}{message}");
}

/// `<3>` under journald, else `2026-11-22T10:00:00.123Z ERROR `.
pub fn line_prefix(journald: bool, level: Level, now: Time) -> String {
    if journald {
        format!("<{}>", syslog_priority(level))
    } else {
        format!("{now:?} {level:<5} ")
    }
}

/// sd-daemon(3) priorities: err 3, warning 4, info 6, debug 7 (notice 5 is unused by `log`).
pub fn syslog_priority(level: Level) -> u8 {
    match level {
        Level::Error => 3,
        Level::Warn => 4,
        Level::Info => 6,
        Level::Debug | Level::Trace => 7,
    }
}

/// True when stderr is the stream systemd connected to journald. JOURNAL_STREAM alone is not
/// enough: it is inherited by anything the service starts, even with stderr redirected to a
/// file, so compare it with stderr's device and inode as systemd.exec(5) recommends.
pub fn stderr_is_journal() -> bool {
    let Ok(value) = std::env::var("JOURNAL_STREAM") else {
        return false;
    };
    match stderr_dev_ino() {
        Some((dev, ino)) => journal_stream_matches(&value, dev, ino),
        None => false,
    }
}

/// `JOURNAL_STREAM` is `<device>:<inode>` in decimal.
pub fn journal_stream_matches(value: &str, dev: u64, ino: u64) -> bool {
    let Some((d, i)) = value.split_once(':') else {
        return false;
    };
    d.parse() == Ok(dev) && i.parse() == Ok(ino)
}

fn stderr_dev_ino() -> Option<(u64, u64)> {
    use std::os::fd::AsFd as _;
    use std::os::unix::fs::MetadataExt as _;
    let fd = std::io::stderr().as_fd().try_clone_to_owned().ok()?;
    let meta = std::fs::File::from(fd).metadata().ok()?;
    Some((meta.dev(), meta.ino()))
}

fn wall_clock_now() -> Time {
    let ms = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(crate::time::duration_millis)
        .unwrap_or(0);
    Time::from_unix_millis(ms)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn journald_lines_carry_syslog_priority_and_no_timestamp() {
        let now = Time::parse_rfc3339("2026-11-22T10:00:00.123Z").unwrap();
        assert_eq!(line_prefix(true, Level::Error, now), "<3>");
        assert_eq!(line_prefix(true, Level::Warn, now), "<4>");
        assert_eq!(line_prefix(true, Level::Info, now), "<6>");
        assert_eq!(line_prefix(true, Level::Debug, now), "<7>");
        assert_eq!(line_prefix(true, Level::Trace, now), "<7>");
    }

    #[test]
    fn terminal_lines_carry_a_millisecond_utc_timestamp() {
        let now = Time::parse_rfc3339("2026-11-22T10:00:00.123Z").unwrap();
        assert_eq!(
            line_prefix(false, Level::Info, now),
            "2026-11-22T10:00:00.123Z INFO  "
        );
        assert_eq!(
            line_prefix(false, Level::Error, now),
            "2026-11-22T10:00:00.123Z ERROR "
        );
    }

    #[test]
    fn journal_stream_must_match_stderr_device_and_inode() {
        assert!(journal_stream_matches("8:12345", 8, 12345));
        assert!(!journal_stream_matches("8:12345", 8, 12346));
        assert!(!journal_stream_matches("8", 8, 12345));
        assert!(!journal_stream_matches("", 0, 0));
        assert!(!journal_stream_matches("x:y", 0, 0));
    }
}
