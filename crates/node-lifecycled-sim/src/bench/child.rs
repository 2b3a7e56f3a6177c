//! The daemon under measurement: a `node-lifecycled` child process with its own config, log and
//! sd_notify socket. READY=1 arrives on a datagram socket the bench listens on (exact, no log
//! scraping); the loop counters come from its SIGUSR1 dump (`dump_format = "json"`), read back
//! from its log.

use std::fs::{self, File};
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

const SIGTERM: i32 = 15;
const SIGUSR1: i32 = 10;
/// How long the daemon gets to stop after SIGTERM before it is killed.
const STOP_GRACE: Duration = Duration::from_secs(10);
/// How long a SIGUSR1 dump may take to appear in the log.
const DUMP_TIMEOUT: Duration = Duration::from_secs(10);

/// The event loop's counters from one state dump.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LoopCounters {
    pub wakeups: u64,
    pub io_events: u64,
    pub timers_fired: u64,
    /// Relists of the pods reflector (a watch that fell behind the server's history relists).
    pub pod_relists: u64,
    pub watch_reconnects: u64,
    /// Time API calls waited for the client-side throttle (qps/burst), ms.
    pub throttle_wait_ms: u64,
    /// API requests by kind: GETs (live Lease reads, re-reads after a conflict) and 409s.
    pub gets: u64,
    pub conflicts: u64,
    /// The cluster store's heap bytes per node and per pod (gauges: `since` keeps the later).
    pub store_bytes_per_node: u64,
    pub store_bytes_per_pod: u64,
}

impl LoopCounters {
    fn from_dump(dump: &Value) -> Option<LoopCounters> {
        let lp = dump.get("loop")?;
        let reflectors = dump.get("reflectors")?.as_array()?;
        let sum = |key: &str| -> u64 {
            reflectors
                .iter()
                .filter_map(|r| r.get(key).and_then(Value::as_u64))
                .sum()
        };
        Some(LoopCounters {
            wakeups: lp.get("wakeups")?.as_u64()?,
            io_events: lp.get("io_events")?.as_u64()?,
            timers_fired: lp.get("timers_fired")?.as_u64()?,
            pod_relists: reflectors
                .iter()
                .find(|r| r.get("resource").and_then(Value::as_str) == Some("pods"))
                .and_then(|r| r.get("relists").and_then(Value::as_u64))
                .unwrap_or(0),
            watch_reconnects: sum("reconnects"),
            throttle_wait_ms: dump
                .pointer("/client/throttle_wait_ms")
                .and_then(Value::as_u64)
                .unwrap_or(0),
            gets: requests(dump, |verb, _| verb.eq_ignore_ascii_case("get")),
            conflicts: requests(dump, |_, code| code == 409),
            store_bytes_per_node: dump
                .pointer("/memory/store/bytes_per_node")
                .and_then(Value::as_u64)
                .unwrap_or(0),
            store_bytes_per_pod: dump
                .pointer("/memory/store/bytes_per_pod")
                .and_then(Value::as_u64)
                .unwrap_or(0),
        })
    }

    /// `self - earlier`, counter by counter.
    pub fn since(&self, earlier: &LoopCounters) -> LoopCounters {
        LoopCounters {
            wakeups: self.wakeups.saturating_sub(earlier.wakeups),
            io_events: self.io_events.saturating_sub(earlier.io_events),
            timers_fired: self.timers_fired.saturating_sub(earlier.timers_fired),
            pod_relists: self.pod_relists.saturating_sub(earlier.pod_relists),
            watch_reconnects: self
                .watch_reconnects
                .saturating_sub(earlier.watch_reconnects),
            throttle_wait_ms: self
                .throttle_wait_ms
                .saturating_sub(earlier.throttle_wait_ms),
            gets: self.gets.saturating_sub(earlier.gets),
            conflicts: self.conflicts.saturating_sub(earlier.conflicts),
            store_bytes_per_node: self.store_bytes_per_node,
            store_bytes_per_pod: self.store_bytes_per_pod,
        }
    }
}

pub struct DaemonChild {
    child: Child,
    pub pid: u32,
    pub started: Instant,
    notify: UnixDatagram,
    notify_path: PathBuf,
    pub log_path: PathBuf,
    log_offset: u64,
}

impl DaemonChild {
    /// Starts `daemon --config config`, stdout and stderr into `dir/node-lifecycled.log`,
    /// `NOTIFY_SOCKET` pointing at a socket in `dir`.
    pub fn spawn(daemon: &Path, config: &Path, dir: &Path) -> Result<DaemonChild, String> {
        let notify_path = dir.join("notify.sock");
        let _ = fs::remove_file(&notify_path);
        let notify = UnixDatagram::bind(&notify_path)
            .map_err(|e| format!("cannot bind {}: {e}", notify_path.display()))?;
        let log_path = dir.join("node-lifecycled.log");
        let log = File::create(&log_path)
            .map_err(|e| format!("cannot create {}: {e}", log_path.display()))?;
        let stdout = log
            .try_clone()
            .map_err(|e| format!("cannot share the daemon log: {e}"))?;
        let started = Instant::now();
        let child = Command::new(daemon)
            .arg("--config")
            .arg(config)
            .stdin(Stdio::null())
            .stdout(stdout)
            .stderr(log)
            .env("NOTIFY_SOCKET", &notify_path)
            .env_remove("WATCHDOG_USEC")
            .env_remove("WATCHDOG_PID")
            .env_remove("RUST_LOG")
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", daemon.display()))?;
        Ok(DaemonChild {
            pid: child.id(),
            child,
            started,
            notify,
            notify_path,
            log_path,
            log_offset: 0,
        })
    }

    /// Waits for `READY=1`; returns the time since spawn. Fails if the daemon exits first.
    pub fn wait_ready(&mut self, timeout: Duration) -> Result<Duration, String> {
        let deadline = self.started + timeout;
        let mut buf = vec![0u8; 4096];
        loop {
            let now = Instant::now();
            if now >= deadline {
                return Err(format!(
                    "node-lifecycled sent no READY=1 within {}s; its log: {}",
                    timeout.as_secs(),
                    self.log_path.display()
                ));
            }
            self.exited_early()?;
            let wait = (deadline - now).min(Duration::from_millis(100));
            self.notify
                .set_read_timeout(Some(wait))
                .map_err(|e| format!("notify socket: {e}"))?;
            match self.notify.recv(&mut buf) {
                Ok(n) => {
                    let at = self.started.elapsed();
                    let text = String::from_utf8_lossy(&buf[..n]);
                    if text.lines().any(|l| l == "READY=1") {
                        return Ok(at);
                    }
                }
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) => {}
                Err(e) => return Err(format!("notify socket: {e}")),
            }
        }
    }

    /// Err when the daemon is no longer running.
    pub fn exited_early(&mut self) -> Result<(), String> {
        match self.child.try_wait() {
            Ok(Some(status)) => Err(format!(
                "node-lifecycled exited ({status}); last lines of {}:\n{}",
                self.log_path.display(),
                crate::log_tail(&self.log_path, 10)
            )),
            _ => Ok(()),
        }
    }

    fn signal(&self, sig: i32) {
        unsafe extern "C" {
            fn kill(pid: i32, sig: i32) -> i32;
        }
        if let Ok(pid) = i32::try_from(self.pid) {
            // SAFETY: kill(2) on our own child, not reaped yet (we only reap in `stop`), so the
            // pid cannot have been reused.
            unsafe {
                kill(pid, sig);
            }
        }
    }

    /// Asks for a state dump (SIGUSR1) and reads its loop counters from the log. The dump itself
    /// costs the daemon one wake-up, counted in the returned figures.
    pub fn loop_counters(&mut self) -> Result<LoopCounters, String> {
        self.exited_early()?;
        self.signal(SIGUSR1);
        let deadline = Instant::now() + DUMP_TIMEOUT;
        let mut pending = String::new();
        loop {
            let mut file = File::open(&self.log_path)
                .map_err(|e| format!("cannot read {}: {e}", self.log_path.display()))?;
            file.seek(SeekFrom::Start(self.log_offset))
                .map_err(|e| format!("cannot read {}: {e}", self.log_path.display()))?;
            let mut bytes = Vec::new();
            file.read_to_end(&mut bytes)
                .map_err(|e| format!("cannot read {}: {e}", self.log_path.display()))?;
            self.log_offset += bytes.len() as u64;
            pending.push_str(&String::from_utf8_lossy(&bytes));
            while let Some(end) = pending.find('\n') {
                let line: String = pending.drain(..=end).collect();
                if let Some(counters) = parse_dump_line(&line) {
                    // Whatever follows on later lines is read by the next call.
                    self.log_offset = self.log_offset.saturating_sub(pending.len() as u64);
                    return Ok(counters);
                }
            }
            if Instant::now() >= deadline {
                return Err(format!(
                    "no state dump in {} within {}s of SIGUSR1 (dump_format must be \"json\")",
                    self.log_path.display(),
                    DUMP_TIMEOUT.as_secs()
                ));
            }
            // A half-written line stays in `pending` and is completed next time round.
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// SIGTERM, then SIGKILL after a grace; true when it stopped by itself.
    pub fn stop(&mut self) -> bool {
        if let Ok(Some(_)) = self.child.try_wait() {
            return false;
        }
        self.signal(SIGTERM);
        let deadline = Instant::now() + STOP_GRACE;
        while Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                return status.success();
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        false
    }
}

impl Drop for DaemonChild {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        let _ = fs::remove_file(&self.notify_path);
    }
}

/// The JSON state dump inside one log line (after the logger's prefix).
/// The dump's `client.requests` counts whose verb and code pass `pick`, added up.
fn requests(dump: &Value, pick: impl Fn(&str, u64) -> bool) -> u64 {
    dump.pointer("/client/requests")
        .and_then(Value::as_array)
        .map(|rs| {
            rs.iter()
                .filter(|r| {
                    let verb = r.get("verb").and_then(Value::as_str).unwrap_or("");
                    // The dump writes codes as text ("409", "no_answer").
                    let code = r.get("code").and_then(|c| {
                        c.as_u64()
                            .or_else(|| c.as_str().and_then(|s| s.parse().ok()))
                    });
                    let code = code.unwrap_or(0);
                    pick(verb, code)
                })
                .filter_map(|r| r.get("count").and_then(Value::as_u64))
                .sum()
        })
        .unwrap_or(0)
}

fn parse_dump_line(line: &str) -> Option<LoopCounters> {
    if !line.contains("\"dump\":\"node-lifecycled\"") {
        return None;
    }
    let json: Value = serde_json::from_str(line[line.find('{')?..].trim_end()).ok()?;
    LoopCounters::from_dump(&json)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loop_counters_come_from_the_json_dump_line_after_the_log_prefix() {
        let line = "[2025-01-01T00:00:00Z INFO  node_lifecycled] {\"dump\":\"node-lifecycled\",\
                    \"reflectors\":[{\"resource\":\"nodes\",\"relists\":0,\"reconnects\":2},\
                    {\"resource\":\"pods\",\"relists\":1,\"reconnects\":3}],\
                    \"client\":{\"requests\":[{\"verb\":\"GET\",\"code\":\"200\",\"count\":7},\
                    {\"verb\":\"PATCH\",\"code\":\"409\",\"count\":2},\
                    {\"verb\":\"PATCH\",\"code\":\"no_answer\",\"count\":1}]},\
                    \"memory\":{\"store\":{\"bytes_per_node\":1100,\"bytes_per_pod\":150}},\
                    \"loop\":{\"wakeups\":120,\"io_events\":90,\"timers_fired\":40}}\n";
        let c = parse_dump_line(line).expect("a dump");
        assert_eq!(
            c,
            LoopCounters {
                wakeups: 120,
                io_events: 90,
                timers_fired: 40,
                pod_relists: 1,
                watch_reconnects: 5,
                throttle_wait_ms: 0,
                gets: 7,
                conflicts: 2,
                store_bytes_per_node: 1100,
                store_bytes_per_pod: 150,
            }
        );
        assert_eq!(
            parse_dump_line("[..] acting (leader election disabled)"),
            None
        );
        let later = LoopCounters { wakeups: 130, ..c };
        assert_eq!(later.since(&c).wakeups, 10);
    }
}
