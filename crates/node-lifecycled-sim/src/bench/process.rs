//! The daemon's process as the kernel sees it, read from /proc from outside: resident memory,
//! CPU time, context switches. Nothing here asks the daemon anything, so reading costs it nothing.

use std::fs;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// One reading of `/proc/PID/{status,stat}`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProcReading {
    /// VmRSS, KiB.
    pub rss_kib: u64,
    /// VmHWM (peak RSS since start), KiB.
    pub hwm_kib: u64,
    /// utime + stime, clock ticks.
    pub cpu_ticks: u64,
    /// stime alone (the kernel's share: system calls, TLS socket reads, epoll), clock ticks.
    pub system_ticks: u64,
    /// Time on a CPU in nanoseconds (`/proc/PID/schedstat`'s first field; 0 where the kernel
    /// has no schedstat). A steady window at 1 % of a core is a dozen 10 ms ticks, too coarse
    /// for a per-event figure; this is exact.
    pub cpu_ns: u64,
    pub voluntary_switches: u64,
    pub involuntary_switches: u64,
}

impl ProcReading {
    /// `None` once the process is gone (or /proc is unreadable).
    pub fn of(pid: u32) -> Option<ProcReading> {
        let status = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
        let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        let mut reading = parse_status(&status);
        (reading.cpu_ticks, reading.system_ticks) = parse_stat_cpu_ticks(&stat)?;
        reading.cpu_ns = fs::read_to_string(format!("/proc/{pid}/schedstat"))
            .ok()
            .and_then(|s| s.split_whitespace().next()?.parse().ok())
            .unwrap_or(0);
        Some(reading)
    }

    pub fn context_switches(&self) -> u64 {
        self.voluntary_switches + self.involuntary_switches
    }
}

/// `VmRSS:  1234 kB` and friends; a missing line reads 0.
fn parse_status(text: &str) -> ProcReading {
    let mut r = ProcReading::default();
    for line in text.lines() {
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        let number = value
            .split_whitespace()
            .next()
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0);
        match key {
            "VmRSS" => r.rss_kib = number,
            "VmHWM" => r.hwm_kib = number,
            "voluntary_ctxt_switches" => r.voluntary_switches = number,
            "nonvoluntary_ctxt_switches" => r.involuntary_switches = number,
            _ => {}
        }
    }
    r
}

/// Fields 14 and 15 of `/proc/PID/stat` (utime, stime) as (utime + stime, stime), counted after
/// the `(comm)` field, which may itself hold spaces and parentheses.
fn parse_stat_cpu_ticks(text: &str) -> Option<(u64, u64)> {
    let after_comm = &text[text.rfind(')')? + 1..];
    let fields: Vec<&str> = after_comm.split_whitespace().collect();
    // after_comm starts at field 3 (state): utime is field 14, i.e. index 11 here.
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some((utime + stime, stime))
}

/// Clock ticks per second (`sysconf(_SC_CLK_TCK)`; 100 on every Linux seen).
pub fn clock_ticks_per_second() -> u64 {
    unsafe extern "C" {
        fn sysconf(name: i32) -> i64;
    }
    const SC_CLK_TCK: i32 = 2;
    // SAFETY: sysconf only reads a configuration value.
    let ticks = unsafe { sysconf(SC_CLK_TCK) };
    u64::try_from(ticks).ok().filter(|t| *t > 0).unwrap_or(100)
}

/// VmRSS sampled every `period` on a thread of its own, from the moment the daemon starts.
pub struct RssSampler {
    samples: Arc<Mutex<Vec<(Duration, u64)>>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl RssSampler {
    pub fn start(pid: u32, period: Duration) -> std::io::Result<RssSampler> {
        let samples = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let samples = samples.clone();
            let stop = stop.clone();
            std::thread::Builder::new()
                .name("bench-rss".into())
                .spawn(move || {
                    let started = Instant::now();
                    while !stop.load(Ordering::Relaxed) {
                        let Some(reading) = ProcReading::of(pid) else {
                            return;
                        };
                        if let Ok(mut s) = samples.lock() {
                            s.push((started.elapsed(), reading.rss_kib));
                        }
                        std::thread::sleep(period);
                    }
                })?
        };
        Ok(RssSampler {
            samples,
            stop,
            thread: Some(thread),
        })
    }

    /// Samples taken in `[from, to)` since the daemon started, KiB.
    pub fn between(&self, from: Duration, to: Duration) -> Vec<u64> {
        self.samples
            .lock()
            .map(|s| {
                s.iter()
                    .filter(|(t, _)| *t >= from && *t < to)
                    .map(|(_, kib)| *kib)
                    .collect()
            })
            .unwrap_or_default()
    }

    pub fn stop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for RssSampler {
    fn drop(&mut self) {
        self.stop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_and_stat_fields_are_read_by_name_and_position() {
        let status = "Name:\tnode-lifecycled\nVmHWM:\t   40960 kB\nVmRSS:\t   30720 kB\n\
                      voluntary_ctxt_switches:\t12\nnonvoluntary_ctxt_switches:\t3\n";
        let r = parse_status(status);
        assert_eq!(
            (r.rss_kib, r.hwm_kib, r.context_switches()),
            (30720, 40960, 15)
        );
        // comm with a space and a parenthesis must not shift the fields.
        let stat = "4242 (node (x) d) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 40 0 0 20 0 1 0";
        assert_eq!(parse_stat_cpu_ticks(stat), Some((290, 40)));
        assert_eq!(parse_stat_cpu_ticks("garbage"), None);
    }

    #[test]
    fn this_process_can_be_read() {
        let r = ProcReading::of(std::process::id()).expect("/proc readable");
        assert!(r.rss_kib > 0 && r.hwm_kib >= r.rss_kib);
        // This test has run code, so it has been on a CPU (where the kernel keeps schedstat).
        if std::path::Path::new("/proc/self/schedstat").exists() {
            assert!(r.cpu_ns > 0);
        }
        assert!(clock_ticks_per_second() >= 1);
    }
}
