//! The systemd notification protocol (sd_notify(3)), spoken directly: one datagram per state
//! change to the socket named by `$NOTIFY_SOCKET`.
//!
//! `READY=1` once the caches are synced (so `systemctl start` returns when the controller can
//! act), `STATUS=` lines for `systemctl status`, `WATCHDOG=1` from a loop timer (a wedged loop
//! stops pinging and systemd restarts us), `STOPPING=1` on shutdown. Without `$NOTIFY_SOCKET`
//! (not under systemd, or `Type=simple`) every call is a no-op.

use std::io;
use std::os::unix::net::{SocketAddr, UnixDatagram};
use std::time::Duration;

pub(crate) struct Notifier {
    target: Option<(UnixDatagram, SocketAddr)>,
    /// As given in `$NOTIFY_SOCKET`, for log lines.
    address: String,
}

impl std::fmt::Debug for Notifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Notifier")
            .field("address", &self.address)
            .field("enabled", &self.target.is_some())
            .finish()
    }
}

impl Notifier {
    /// A notifier that sends nothing.
    pub(crate) fn disabled() -> Notifier {
        Notifier {
            target: None,
            address: String::new(),
        }
    }

    /// From `$NOTIFY_SOCKET`; disabled when it is unset or empty.
    pub(crate) fn from_env() -> io::Result<Notifier> {
        match std::env::var("NOTIFY_SOCKET") {
            Ok(addr) if !addr.is_empty() => Notifier::to_address(&addr),
            _ => Ok(Notifier::disabled()),
        }
    }

    /// `addr` is a filesystem path or, starting with `@`, a Linux abstract socket name.
    pub(crate) fn to_address(addr: &str) -> io::Result<Notifier> {
        let socket_addr = if let Some(name) = addr.strip_prefix('@') {
            use std::os::linux::net::SocketAddrExt as _;
            SocketAddr::from_abstract_name(name.as_bytes())?
        } else if addr.starts_with('/') {
            SocketAddr::from_pathname(addr)?
        } else {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("NOTIFY_SOCKET {addr:?} is neither an absolute path nor @abstract"),
            ));
        };
        let socket = UnixDatagram::unbound()?;
        // The loop must never block on systemd: a full receive queue drops the message instead.
        socket.set_nonblocking(true)?;
        Ok(Notifier {
            target: Some((socket, socket_addr)),
            address: addr.to_string(),
        })
    }

    pub(crate) fn is_enabled(&self) -> bool {
        self.target.is_some()
    }

    pub(crate) fn address(&self) -> &str {
        &self.address
    }

    /// Sends one or more newline-separated `KEY=value` assignments.
    pub(crate) fn notify(&self, state: &str) -> io::Result<()> {
        let Some((socket, addr)) = &self.target else {
            return Ok(());
        };
        socket.send_to_addr(state.as_bytes(), addr).map(|_| ())
    }

    pub(crate) fn ready(&self) -> io::Result<()> {
        self.notify("READY=1")
    }

    /// A one-line status for `systemctl status`; newlines would start new assignments.
    pub(crate) fn status(&self, text: &str) -> io::Result<()> {
        self.notify(&format!("STATUS={}", text.replace('\n', " ")))
    }

    pub(crate) fn watchdog(&self) -> io::Result<()> {
        self.notify("WATCHDOG=1")
    }

    pub(crate) fn stopping(&self) -> io::Result<()> {
        self.notify("STOPPING=1")
    }
}

/// How often to send `WATCHDOG=1`: half of `$WATCHDOG_USEC` as sd_watchdog_enabled(3) advises,
/// or `None` when the watchdog is off or meant for another process (`$WATCHDOG_PID`).
pub(crate) fn watchdog_interval_from_env() -> Option<Duration> {
    let usec = std::env::var("WATCHDOG_USEC").ok()?;
    let pid = std::env::var("WATCHDOG_PID").ok();
    watchdog_interval(&usec, pid.as_deref(), std::process::id())
}

pub(crate) fn watchdog_interval(usec: &str, pid: Option<&str>, our_pid: u32) -> Option<Duration> {
    if let Some(pid) = pid {
        if pid.trim().parse::<u32>().ok()? != our_pid {
            return None;
        }
    }
    let usec: u64 = usec.trim().parse().ok().filter(|&u| u > 0)?;
    Some(Duration::from_micros(usec / 2))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn temp_socket_path(name: &str) -> PathBuf {
        std::env::temp_dir().join(format!(
            "nlc-sdnotify-{}-{name}-{}.sock",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos()
        ))
    }

    fn receive(socket: &UnixDatagram) -> String {
        let mut buf = [0u8; 512];
        let n = socket.recv(&mut buf).unwrap();
        String::from_utf8_lossy(&buf[..n]).into_owned()
    }

    #[test]
    fn states_arrive_as_datagrams_on_a_path_socket() {
        let path = temp_socket_path("path");
        let systemd = UnixDatagram::bind(&path).unwrap();
        systemd
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        let n = Notifier::to_address(path.to_str().unwrap()).unwrap();
        assert!(n.is_enabled());
        n.ready().unwrap();
        n.status("waiting\nfor caches").unwrap();
        n.watchdog().unwrap();
        n.stopping().unwrap();
        assert_eq!(receive(&systemd), "READY=1");
        assert_eq!(receive(&systemd), "STATUS=waiting for caches");
        assert_eq!(receive(&systemd), "WATCHDOG=1");
        assert_eq!(receive(&systemd), "STOPPING=1");
        let _ = std::fs::remove_file(&path);
    }

    #[test]
    fn abstract_socket_names_start_with_at() {
        use std::os::linux::net::SocketAddrExt as _;
        let name = format!("nlc-sdnotify-test-{}", std::process::id());
        let addr = SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
        let systemd = UnixDatagram::bind_addr(&addr).unwrap();
        systemd
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        let n = Notifier::to_address(&format!("@{name}")).unwrap();
        n.ready().unwrap();
        assert_eq!(receive(&systemd), "READY=1");
    }

    #[test]
    fn disabled_notifier_is_a_no_op_and_bad_addresses_are_errors() {
        let n = Notifier::disabled();
        assert!(!n.is_enabled());
        n.ready().unwrap();
        assert!(Notifier::to_address("relative/path").is_err());
    }

    #[test]
    fn watchdog_pings_at_half_the_interval_and_only_for_our_pid() {
        assert_eq!(
            watchdog_interval("30000000", None, 42),
            Some(Duration::from_secs(15))
        );
        assert_eq!(
            watchdog_interval("30000000", Some("42"), 42),
            Some(Duration::from_secs(15))
        );
        assert_eq!(watchdog_interval("30000000", Some("43"), 42), None);
        assert_eq!(watchdog_interval("0", None, 42), None);
        assert_eq!(watchdog_interval("soon", None, 42), None);
    }
}
