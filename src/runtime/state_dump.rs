//! What SIGUSR1 logs: enough to tell, without a debugger, whether the daemon is alive, what it
//! runs with and what it is waiting for. Text for people reading a terminal or the journal;
//! one JSON line (`dump_format = "json"`) for log pipelines.
//!
//! Later parts of the daemon (API client, controller) add their sections here.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::json;

use super::event_loop::LoopStats;
use crate::config::{ApiSource, Config, format_duration};
use crate::time::Time;

#[derive(Clone, Debug)]
pub struct StateDump {
    pub version: &'static str,
    pub pid: u32,
    pub started_at: Time,
    pub uptime: Duration,
    pub rss_bytes: Option<u64>,
    pub loop_stats: LoopStats,
    pub sources: usize,
    pub timers_pending: usize,
    /// Time to the earliest deadline, `None` with no timer armed.
    pub next_timer_in: Option<Duration>,
    pub config_path: PathBuf,
    pub config: Config,
    /// What the daemon is doing or waiting for, as in `STATUS=`.
    pub status: String,
}

impl StateDump {
    /// One entry per log line, so journald keeps each as its own record.
    pub fn to_text_lines(&self) -> Vec<String> {
        let c = &self.config;
        let rss = self.rss_bytes.map_or_else(
            || "unknown".to_string(),
            |b| format!("{:.1} MiB", b as f64 / 1048576.0),
        );
        let next = self
            .next_timer_in
            .map_or_else(|| "none".to_string(), format_duration);
        let le = &c.leader_election;
        vec![
            format!(
                "state dump: node-lifecycled {} pid {}, up {} (since {}), rss {rss}, status: {}",
                self.version,
                self.pid,
                format_duration(round_to_millis(self.uptime)),
                self.started_at,
                self.status
            ),
            format!(
                "state dump: loop: wakeups {}, io events {}, stale events {}, timers fired {}, sources {}, timers pending {}, next timer in {next}",
                self.loop_stats.wakeups,
                self.loop_stats.io_events,
                self.loop_stats.stale_events,
                self.loop_stats.timers_fired,
                self.sources,
                self.timers_pending,
            ),
            format!(
                "state dump: config {}: api {}, qps {} burst {}, leader election {}, taint_based_eviction {}, dry_run {}, log_level {}",
                self.config_path.display(),
                api_source(&c.api.source),
                c.api.qps.as_f64(),
                c.api.burst,
                if le.enabled {
                    format!("{}/{}", le.namespace, le.name)
                } else {
                    "off".to_string()
                },
                c.taint_based_eviction,
                c.dry_run,
                c.log_level.as_str().to_ascii_lowercase(),
            ),
        ]
    }

    pub fn to_json(&self) -> String {
        let c = &self.config;
        let le = &c.leader_election;
        json!({
            "dump": "node-lifecycled",
            "version": self.version,
            "pid": self.pid,
            "started_at": self.started_at.to_rfc3339(),
            "uptime_ms": self.uptime.as_millis() as u64,
            "rss_bytes": self.rss_bytes,
            "status": self.status,
            "loop": {
                "wakeups": self.loop_stats.wakeups,
                "io_events": self.loop_stats.io_events,
                "stale_events": self.loop_stats.stale_events,
                "timers_fired": self.loop_stats.timers_fired,
                "sources": self.sources,
                "timers_pending": self.timers_pending,
                "next_timer_in_ms": self.next_timer_in.map(|d| d.as_millis() as u64),
            },
            "config": {
                "path": self.config_path.display().to_string(),
                "api": api_source(&c.api.source),
                "qps": c.api.qps.as_f64(),
                "burst": c.api.burst,
                "leader_election": le.enabled.then(|| format!("{}/{}", le.namespace, le.name)),
                "taint_based_eviction": c.taint_based_eviction,
                "dry_run": c.dry_run,
                "log_level": c.log_level.as_str().to_ascii_lowercase(),
            },
        })
        .to_string()
    }
}

/// Where the API server is found, in one phrase (also used by `observe::dump`).
pub fn api_source(source: &ApiSource) -> String {
    match source {
        ApiSource::Kubeconfig {
            path,
            context: Some(ctx),
        } => format!("kubeconfig {} (context {ctx})", path.display()),
        ApiSource::Kubeconfig {
            path,
            context: None,
        } => format!("kubeconfig {}", path.display()),
        ApiSource::InCluster => "in-cluster".to_string(),
        ApiSource::Explicit { server, .. } => server.clone(),
    }
}

fn round_to_millis(d: Duration) -> Duration {
    Duration::from_millis(d.as_millis() as u64)
}

/// Resident memory from /proc/self/status, `None` where there is no procfs.
pub fn read_rss_bytes() -> Option<u64> {
    parse_vm_rss(&std::fs::read_to_string("/proc/self/status").ok()?)
}

/// The `VmRSS:   1234 kB` line, in bytes.
pub fn parse_vm_rss(status: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let mut parts = line["VmRSS:".len()..].split_whitespace();
    let value: u64 = parts.next()?.parse().ok()?;
    match parts.next() {
        Some("kB") => value.checked_mul(1024),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> StateDump {
        StateDump {
            version: "0.1.0",
            pid: 7,
            started_at: Time::parse_rfc3339("2026-11-22T10:00:00Z").unwrap(),
            uptime: Duration::from_millis(90_500),
            rss_bytes: Some(3 * 1048576),
            loop_stats: LoopStats {
                wakeups: 12,
                io_events: 3,
                timers_fired: 9,
                stale_events: 0,
            },
            sources: 4,
            timers_pending: 1,
            next_timer_in: Some(Duration::from_secs(5)),
            config_path: PathBuf::from("/etc/node-lifecycled/config.toml"),
            config: Config::default(),
            status: "waiting".to_string(),
        }
    }

    #[test]
    fn text_dump_names_version_uptime_memory_loop_and_config() {
        let lines = sample().to_text_lines();
        assert_eq!(lines.len(), 3);
        assert!(
            lines[0].contains("node-lifecycled 0.1.0 pid 7, up 1m30s500ms"),
            "{}",
            lines[0]
        );
        assert!(lines[0].contains("rss 3.0 MiB"), "{}", lines[0]);
        assert!(lines[1].contains("wakeups 12"), "{}", lines[1]);
        assert!(
            lines[1].contains("sources 4, timers pending 1, next timer in 5s"),
            "{}",
            lines[1]
        );
        assert!(
            lines[2].contains("api kubeconfig /etc/kubernetes/node-lifecycled.conf"),
            "{}",
            lines[2]
        );
        assert!(
            lines[2].contains("leader election kube-system/node-lifecycled"),
            "{}",
            lines[2]
        );
    }

    #[test]
    fn json_dump_is_one_parseable_line() {
        let text = sample().to_json();
        assert!(!text.contains('\n'));
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["version"], "0.1.0");
        assert_eq!(v["uptime_ms"], 90_500);
        assert_eq!(v["rss_bytes"], 3 * 1048576);
        assert_eq!(v["loop"]["timers_fired"], 9);
        assert_eq!(v["loop"]["next_timer_in_ms"], 5000);
        assert_eq!(v["config"]["log_level"], "info");
        assert_eq!(v["config"]["qps"], 20.0);
    }

    #[test]
    fn vm_rss_is_read_in_bytes() {
        let status = "Name:\tx\nVmPeak:\t  9999 kB\nVmRSS:\t    2048 kB\nThreads:\t1\n";
        assert_eq!(parse_vm_rss(status), Some(2048 * 1024));
        assert_eq!(parse_vm_rss("VmRSS: lots"), None);
        assert_eq!(parse_vm_rss(""), None);
        assert!(read_rss_bytes().unwrap_or(1) > 0);
    }
}
