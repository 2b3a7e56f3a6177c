//! Log lines, shaped for where they end up.
//!
//! - Under systemd (stderr is the journal stream, see [`stderr_is_journal`]) with
//!   `log_format = "text"`: the journal's native protocol ([`journal`]), so every decision line
//!   carries `NODE=`, `POD=`, `ZONE=`, `DECISION=` besides `MESSAGE=` and `PRIORITY=`. Should the
//!   socket be unusable, stderr as below.
//! - Text on stderr: under journald a `<N>` prefix (the syslog priority, so `journalctl -p
//!   warning` works) and no timestamp; anywhere else `2026-11-22T10:00:00.123Z WARN  message`.
//! - `log_format = "json"`: one object per line on stderr (`ts`, `level`, `msg`, and `node`,
//!   `pod`, `zone`, `decision` when the line has them), for log shippers.
//!
//! The level comes from the config and can change on SIGHUP; `RUST_LOG`, when set, wins over
//! both (it is what an operator reaches for while debugging, and it can name modules).

pub mod journal;

use std::io::Write as _;
use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::SystemTime;

use log::{Level, LevelFilter, Log, Metadata, Record};

use crate::time::Time;
use journal::{JOURNAL_SOCKET, JournalSocket};

/// Points the native journal path at another socket (and selects it without systemd): for
/// tests, and for a journald listening elsewhere.
pub(crate) const JOURNAL_SOCKET_ENV: &str = "NODE_LIFECYCLED_JOURNAL_SOCKET";

/// `SYSLOG_IDENTIFIER=`, what `journalctl -t` selects.
pub(crate) const SYSLOG_IDENTIFIER: &str = "node-lifecycled";

/// How lines are written (the config's `log_format`).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum LogFormat {
    /// Text on stderr; under systemd, the journal's native protocol with NODE=, POD=, ZONE=.
    Text,
    /// One JSON object per line on stderr, for log shippers.
    Json,
}

/// The structured part of a line (decision lines have some; most lines none).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Fields<'a> {
    pub(crate) node: Option<&'a str>,
    /// `namespace/name`.
    pub(crate) pod: Option<&'a str>,
    pub(crate) zone: Option<&'a str>,
    pub(crate) decision: Option<&'a str>,
}

/// How the logger was set up; lets a config reload change the level.
#[derive(Debug)]
pub struct LogControl {
    rust_log: Option<String>,
}

impl LogControl {
    /// Applies a new level from the config; `false` when RUST_LOG pins the filter instead.
    pub(crate) fn set_level(&self, level: LevelFilter) -> bool {
        if self.rust_log.is_some() {
            return false;
        }
        log::set_max_level(level);
        true
    }

    /// The RUST_LOG filter in force, if any.
    pub(crate) fn rust_log(&self) -> Option<&str> {
        self.rust_log.as_deref()
    }
}

/// Where lines go.
#[derive(Debug)]
pub(crate) enum Output {
    /// Text on stderr; `journald`: with the `<N>` prefix and no timestamp.
    Text {
        journald: bool,
    },
    Json,
    Journal(JournalSocket),
}

impl Output {
    /// What `format` and the environment call for: the native journal when stderr is the
    /// journal stream (or [`JOURNAL_SOCKET_ENV`] names a socket) and it can be reached.
    pub(crate) fn choose(format: LogFormat) -> Output {
        let journald = stderr_is_journal();
        if format == LogFormat::Json {
            return Output::Json;
        }
        let path = match std::env::var_os(JOURNAL_SOCKET_ENV) {
            Some(p) if !p.is_empty() => PathBuf::from(p),
            _ if journald => PathBuf::from(JOURNAL_SOCKET),
            _ => return Output::Text { journald },
        };
        match JournalSocket::connect(&path) {
            Ok(socket) => Output::Journal(socket),
            Err(e) => {
                let out = Output::Text { journald };
                out.write(
                    Level::Warn,
                    None,
                    &format!("journal socket {}: {e}; logging to stderr", path.display()),
                    &Fields::default(),
                );
                out
            }
        }
    }

    /// Writes one line. `target`: a library's name, shown in front of its lines.
    pub(crate) fn write(
        &self,
        level: Level,
        target: Option<&str>,
        message: &str,
        fields: &Fields<'_>,
    ) {
        let message = match target {
            Some(t) => format!("[{t}] {message}"),
            None => message.to_string(),
        };
        let line = match self {
            Output::Text { journald } => {
                format!(
                    "{}{message}\n",
                    line_prefix(*journald, level, wall_clock_now())
                )
            }
            Output::Json => json_line(level, wall_clock_now(), &message, fields),
            Output::Journal(socket) => {
                let priority = syslog_priority(level).to_string();
                let mut kv: Vec<(&str, &str)> = vec![
                    ("MESSAGE", &message),
                    ("PRIORITY", &priority),
                    ("SYSLOG_IDENTIFIER", SYSLOG_IDENTIFIER),
                ];
                kv.extend(fields.node.map(|v| ("NODE", v)));
                kv.extend(fields.pod.map(|v| ("POD", v)));
                kv.extend(fields.zone.map(|v| ("ZONE", v)));
                kv.extend(fields.decision.map(|v| ("DECISION", v)));
                if socket.send(&kv).is_ok() {
                    return;
                }
                format!("{}{message}\n", line_prefix(true, level, wall_clock_now()))
            }
        };
        // One write per line, so lines of a burst never interleave; a closed stderr is ignored.
        let _ = std::io::stderr().lock().write_all(line.as_bytes());
    }
}

/// `{"ts":"…","level":"INFO","msg":"…","node":"…"}`.
pub(crate) fn json_line(level: Level, now: Time, message: &str, fields: &Fields<'_>) -> String {
    let mut object = serde_json::Map::new();
    object.insert("ts".into(), format!("{now:?}").into());
    object.insert("level".into(), level.as_str().into());
    object.insert("msg".into(), message.into());
    for (key, value) in [
        ("node", fields.node),
        ("pod", fields.pod),
        ("zone", fields.zone),
        ("decision", fields.decision),
    ] {
        if let Some(v) = value {
            object.insert(key.into(), v.into());
        }
    }
    let mut line = serde_json::Value::Object(object).to_string();
    line.push('\n');
    line
}

struct Logger {
    /// RUST_LOG's filter; `None`: everything passes and the global max level filters.
    filter: Option<env_logger::Logger>,
    output: Output,
}

impl Log for Logger {
    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        self.filter.as_ref().is_none_or(|f| f.enabled(metadata))
    }

    fn log(&self, record: &Record<'_>) {
        if self.filter.as_ref().is_some_and(|f| !f.matches(record)) {
            return;
        }
        let target = record.target();
        // Lines from libraries (rustls, ureq) say where they come from.
        let shown = (!target.starts_with(env!("CARGO_CRATE_NAME"))).then_some(target);
        self.output.write(
            record.level(),
            shown,
            &record.args().to_string(),
            &Fields::default(),
        );
    }

    fn flush(&self) {}
}

static LOGGER: OnceLock<Logger> = OnceLock::new();

/// Installs the global logger. Call once, after the config is read.
pub fn init(level: LevelFilter, format: LogFormat) -> LogControl {
    let rust_log = std::env::var("RUST_LOG")
        .ok()
        .filter(|v| !v.trim().is_empty());
    let filter = rust_log
        .as_ref()
        .map(|filters| env_logger::Builder::new().parse_filters(filters).build());
    if let Some(f) = &filter {
        log::set_max_level(f.filter());
    }
    let logger = Logger {
        filter,
        output: Output::choose(format),
    };
    // A second init (tests) keeps the first logger; that is harmless.
    if LOGGER.set(logger).is_ok()
        && let Some(logger) = LOGGER.get()
    {
        let _ = log::set_logger(logger);
    }
    let control = LogControl { rust_log };
    control.set_level(level);
    control
}

/// Logs a line with structured fields (decision lines), through the same filter and output as
/// every other line; before [`init`] (tests), through `log` without the fields.
pub(crate) fn log_with_fields(level: Level, message: &str, fields: &Fields<'_>) {
    if level > log::max_level() {
        return;
    }
    let Some(logger) = LOGGER.get() else {
        log::log!(level, "{message}");
        return;
    };
    let metadata = Metadata::builder()
        .level(level)
        .target(concat!(env!("CARGO_CRATE_NAME"), "::decisions"))
        .build();
    if logger.enabled(&metadata) {
        logger.output.write(level, None, message, fields);
    }
}

/// For the few lines printed before the logger exists (a bad config): same shape, error priority.
pub fn early_error(message: &str) {
    let prefix = line_prefix(stderr_is_journal(), Level::Error, wall_clock_now());
    eprintln!("{prefix}{message}");
}

/// `<3>` under journald, else `2026-11-22T10:00:00.123Z ERROR `.
pub(crate) fn line_prefix(journald: bool, level: Level, now: Time) -> String {
    if journald {
        format!("<{}>", syslog_priority(level))
    } else {
        format!("{now:?} {level:<5} ")
    }
}

/// sd-daemon(3) priorities: err 3, warning 4, info 6, debug 7 (notice 5 is unused by `log`).
pub(crate) fn syslog_priority(level: Level) -> u8 {
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
pub(crate) fn stderr_is_journal() -> bool {
    let Ok(value) = std::env::var("JOURNAL_STREAM") else {
        return false;
    };
    match stderr_dev_ino() {
        Some((dev, ino)) => journal_stream_matches(&value, dev, ino),
        None => false,
    }
}

/// `JOURNAL_STREAM` is `<device>:<inode>` in decimal.
pub(crate) fn journal_stream_matches(value: &str, dev: u64, ino: u64) -> bool {
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

    /// Under systemd, a decision line reaches journald as one datagram with its fields, so
    /// `journalctl NODE=worker-3` finds it. A local datagram socket stands in.
    #[test]
    fn the_native_journal_path_sends_message_priority_and_decision_fields() {
        let dir = std::env::temp_dir().join(format!("nl-journal-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("socket");
        let _ = std::fs::remove_file(&path);
        let journald = std::os::unix::net::UnixDatagram::bind(&path).unwrap();
        let output = Output::Journal(JournalSocket::connect(&path).unwrap());
        let fields = Fields {
            node: Some("worker-3"),
            pod: None,
            zone: Some("eu/a"),
            decision: Some("node-unknown"),
        };
        output.write(Level::Info, None, "node worker-3 judged Unknown", &fields);
        output.write(
            Level::Warn,
            Some("rustls"),
            "two\nlines",
            &Fields::default(),
        );
        let mut buf = vec![0u8; 4096];
        let n = journald.recv(&mut buf).unwrap();
        let got = journal::parse_fields(&buf[..n]).unwrap();
        let want = [
            ("MESSAGE", "node worker-3 judged Unknown"),
            ("PRIORITY", "6"),
            ("SYSLOG_IDENTIFIER", "node-lifecycled"),
            ("NODE", "worker-3"),
            ("ZONE", "eu/a"),
            ("DECISION", "node-unknown"),
        ];
        let want: Vec<(String, String)> = want
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        assert_eq!(got, want);
        let n = journald.recv(&mut buf).unwrap();
        let got = journal::parse_fields(&buf[..n]).unwrap();
        assert_eq!(
            got[0],
            ("MESSAGE".to_string(), "[rustls] two\nlines".to_string())
        );
        assert_eq!(got[1], ("PRIORITY".to_string(), "4".to_string()));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn json_lines_carry_the_fields_in_lower_case() {
        let now = Time::parse_rfc3339("2026-11-22T10:00:00.123Z").unwrap();
        let fields = Fields {
            pod: Some("ns/p"),
            decision: Some("pod-deletion"),
            ..Fields::default()
        };
        let line = json_line(Level::Info, now, "deleting pod ns/p", &fields);
        assert!(line.ends_with('\n'));
        let v: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(
            v,
            serde_json::json!({
                "ts": "2026-11-22T10:00:00.123Z",
                "level": "INFO",
                "msg": "deleting pod ns/p",
                "pod": "ns/p",
                "decision": "pod-deletion",
            })
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
