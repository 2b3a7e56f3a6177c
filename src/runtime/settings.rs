//! The one place where the configuration file's values become the settings of each part: the
//! controllers, the executor, the API clients and the informers. A reload goes through the same
//! functions, so a value means the same thing at start and after SIGHUP.

use std::time::Duration;

use crate::config::{ApiConfig, Config};
use crate::controller::Settings;
use crate::kube::ClientSettings;
use crate::kube::reflector::ReflectorConfig;
use crate::kube::watch::WatchOptions;

use super::executor::ExecutorSettings;
use super::informer::InformerConfig;

/// What the controllers decide with (docs/upstream.md, "Settings and their defaults"): the
/// file's, and the daemon's own `monitor_pass_early`.
pub(crate) fn controller_settings(config: &Config) -> Settings {
    Settings {
        monitor_pass_early: monitor_pass_early(config.controller.node_monitor_period),
        ..config.controller.clone()
    }
}

/// The executor: dry-run from the file, the rest its own defaults; `seed` spreads label retry
/// jitter across instances.
pub(crate) fn executor_settings(config: &Config, seed: u64) -> ExecutorSettings {
    ExecutorSettings {
        dry_run: config.writes_nothing(),
        seed,
        ..ExecutorSettings::default()
    }
}

/// Every API client gets the same hard timeout and the configured qps/burst. Each client has
/// its own token bucket (as every controller's client in kube-controller-manager does), so the
/// informers' LIST pages, the executor's writes and the leader's renewals never wait for each
/// other.
pub(crate) fn client_settings(api: &ApiConfig) -> ClientSettings {
    ClientSettings {
        timeout: api.request_timeout,
        qps: Some(api.qps),
        burst: u64::from(api.burst),
        ..ClientSettings::default()
    }
}

/// The informers' reflector and watch settings. `watch_list` comes from probing the server.
/// Watches ask the server to end them at 70–90 % of the idle timeout (see `ReflectorConfig`).
/// The reconnect backoff is bounded by the grace period (`watch_backoff_max`); a rotated watch
/// is read by the next controller pass at the latest (`rotated_watch_read_within`).
pub(crate) fn informer_config(
    api: &ApiConfig,
    grace: Duration,
    monitor_period: Duration,
    watch_list: bool,
) -> InformerConfig {
    let defaults = ReflectorConfig::default();
    InformerConfig {
        reflector: ReflectorConfig {
            idle_timeout: api.watch_idle_timeout,
            watch_list,
            initial_list_from_cache: true,
            backoff_max: watch_backoff_max(grace, &defaults),
            ..defaults
        },
        watch: WatchOptions {
            idle_timeout: api.watch_idle_timeout,
            ..WatchOptions::default()
        },
        watch_coalesce: WATCH_COALESCE,
        content_type: api.content_type,
        rotated_watch_read_within: rotated_watch_read_within(monitor_period),
    }
}

/// How long before its tick the periodic pass may run, riding a wake-up the loop makes
/// anyway (`Settings::monitor_pass_early`): 2 s at the default 5 s period, never more than
/// two fifths of it. The pass is a safety net (every verdict has its own deadline, which fires
/// on its own), so running it up to that much early changes no verdict's time; it never runs
/// later than its tick, and its grid stays a period apart.
pub(crate) fn monitor_pass_early(monitor_period: Duration) -> Duration {
    (monitor_period * 2 / 5).min(MONITOR_PASS_EARLY_MAX)
}

const MONITOR_PASS_EARLY_MAX: Duration = Duration::from_secs(2);

/// Where a quiet watch's end is aimed in the pass's window `early` long (see
/// `kube/reflector/watch_end.rs`): between `early / 8` and `7 · early / 8` before the tick, so
/// an end a quarter of a second late (at 2 s) still arrives before the tick, and the target
/// (1.5 s wide at 2 s) holds one of the whole seconds `timeoutSeconds` can be.
pub(crate) fn watch_end_leads(early: Duration) -> (Duration, Duration) {
    (early / 8, early * 7 / 8)
}

/// How late a rotated watch's first read may be (see `Informer::read_rotated_watch_lazily`):
/// the controller's pass fires every `node_monitor_period` and wakes the loop anyway, so an
/// idle daemon reads the new watch's head then; the margin keeps the informer's own deadline
/// behind the pass's, so the two do not become a wake-up each. What it delays is only the
/// events that arrive right after a rotation of a watch that carried none for its whole life
/// (a busy watch's successor is read on the coalescing grid), by up to one pass: a heartbeat
/// seen that much later moves its node's deadline as much later, nothing against a grace
/// period of tens of seconds, and every verdict reads the Lease live first anyway. Taken at
/// start: a reloaded period applies from the next restart.
pub(crate) fn rotated_watch_read_within(monitor_period: Duration) -> Duration {
    monitor_period + ROTATED_WATCH_READ_MARGIN
}

/// See `rotated_watch_read_within`.
pub(crate) const ROTATED_WATCH_READ_MARGIN: Duration = Duration::from_secs(1);

/// client-go's reflector backs off up to 30 s between failed watches; a daemon that deferred
/// to a watch that long would be blind for most of a 50 s grace period (and for six grace
/// periods of 5 s), and while a watch is down zone tainting and evictions wait
/// (`controller/cache_currency.rs`). So the backoff stops at a fifth of the grace period
/// (10 s at the default 50 s), never below its first step nor above client-go's 30 s. The
/// value is taken at start: a reload of the grace period applies from the next restart.
pub(crate) fn watch_backoff_max(grace: Duration, defaults: &ReflectorConfig) -> Duration {
    (grace / 5).clamp(defaults.backoff_initial, defaults.backoff_max)
}

/// Watch events arriving within this of each other are read in one wake-up (at 2,000 nodes,
/// 200 Lease renewals a second would otherwise be 200 wake-ups). A watch whose reads find few
/// events is read up to four times less often (`informer/watch_pause.rs`: 200 renewals a
/// second every 90 ms, node status patches every 180 ms; 500 renewals a second stay on this
/// period). A heartbeat seen that much later moves its node's deadline as much later: nothing
/// against a grace period of tens of seconds, and every verdict reads the Lease live first
/// anyway. 45 ms, not 50: with the live read and the status write (a few ms), a node that
/// stops heartbeating among 5,000 is judged within 50 ms of its grace at p99 (the benchmark's
/// target), for a tenth more wake-ups on the Lease watch; a shorter period costs more
/// wake-ups and CPU per event than it gains.
pub const WATCH_COALESCE: Duration = Duration::from_millis(45);

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::time::Duration;

    use super::*;

    #[test]
    fn the_files_values_reach_the_controller_and_the_clients() {
        let text = "node_monitor_period = \"1s\"\nnode_monitor_grace_period = \"3s\"\nnode_eviction_rate = 2.5\n\
                    taint_based_eviction = false\ndry_run = true\n\
                    [api]\nqps = 7.0\nburst = 9\nrequest_timeout = \"2s\"\nwatch_idle_timeout = \"2s\"\n";
        let config = Config::from_str(text, Path::new("t.toml")).unwrap();
        let s = controller_settings(&config);
        assert_eq!(s.node_monitor_grace_period, Duration::from_secs(3));
        assert_eq!(s.node_eviction_rate.as_f64(), 2.5);
        assert!(!s.taint_based_eviction);
        assert!(executor_settings(&config, 1).dry_run);
        let c = client_settings(&config.api);
        assert_eq!(c.timeout, Duration::from_secs(2));
        assert_eq!(c.qps.map(|q| q.as_f64()), Some(7.0));
        assert_eq!(c.burst, 9);
        let i = informer_config(
            &config.api,
            s.node_monitor_grace_period,
            s.node_monitor_period,
            true,
        );
        assert_eq!(i.reflector.idle_timeout, Duration::from_secs(2));
        assert_eq!(i.watch.idle_timeout, Duration::from_secs(2));
        assert!(i.reflector.watch_list);
        assert_eq!(i.reflector.backoff_max, Duration::from_millis(600));
        assert_eq!(
            i.rotated_watch_read_within,
            s.node_monitor_period + ROTATED_WATCH_READ_MARGIN,
            "a rotated watch is read by the next pass"
        );
    }

    #[test]
    fn the_watch_backoff_stops_at_a_fifth_of_the_grace_period() {
        let d = ReflectorConfig::default();
        let max = |s| watch_backoff_max(Duration::from_secs(s), &d);
        assert_eq!(max(50), Duration::from_secs(10));
        assert_eq!(max(5), Duration::from_secs(1));
        assert_eq!(
            max(1),
            Duration::from_millis(500),
            "never below the first step"
        );
        assert_eq!(max(600), Duration::from_secs(30), "never above client-go's");
    }

    #[test]
    fn defaults_are_the_controllers_defaults() {
        // But one: the daemon lets the pass ride a wake-up up to 2 s before its tick.
        let daemon = controller_settings(&Config::default());
        assert_eq!(daemon.monitor_pass_early, Duration::from_secs(2));
        assert_eq!(
            daemon,
            Settings {
                monitor_pass_early: Duration::from_secs(2),
                ..Settings::default()
            }
        );
    }

    #[test]
    fn the_pass_runs_at_most_two_fifths_of_a_period_and_two_seconds_early() {
        let early = |ms| monitor_pass_early(Duration::from_millis(ms));
        assert_eq!(early(5_000), Duration::from_secs(2));
        assert_eq!(early(60_000), Duration::from_secs(2));
        assert_eq!(early(1_000), Duration::from_millis(400));
        let (min, max) = watch_end_leads(Duration::from_secs(2));
        assert_eq!(
            (min, max),
            (Duration::from_millis(250), Duration::from_millis(1_750))
        );
        assert!(max - min >= Duration::from_secs(1), "one whole second fits");
    }
}
