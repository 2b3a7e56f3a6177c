//! The bench's options: the cluster sizes, the timings, the daemon's throttle and profile.

use std::path::PathBuf;
use std::time::Duration;

use super::Profile;
use node_lifecycled::config::format_duration;

/// How the daemon fetches its first full state, chosen by the version the simulator reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InitialList {
    /// Watch-list streaming (`sendInitialEvents`): the simulator reports 1.32.
    WatchList,
    /// One `resourceVersion=0` LIST per kind, read as a stream (what runs against servers
    /// before 1.32): the simulator reports 1.31.
    WatchCache,
}

impl InitialList {
    pub fn parse(s: &str) -> Option<InitialList> {
        match s {
            "watch-list" => Some(InitialList::WatchList),
            "watch-cache" => Some(InitialList::WatchCache),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            InitialList::WatchList => "watch-list",
            InitialList::WatchCache => "watch-cache",
        }
    }

    pub(super) fn minor_version(self) -> u32 {
        match self {
            InitialList::WatchList => 32,
            InitialList::WatchCache => 31,
        }
    }
}

/// One cluster shape.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BenchSize {
    pub nodes: usize,
    /// Pods per node, the DaemonSet pod included.
    pub pods_per_node: usize,
    pub zones: usize,
}

impl BenchSize {
    pub const SMALL: BenchSize = BenchSize {
        nodes: 500,
        pods_per_node: 30,
        zones: 3,
    };
    pub const LARGE: BenchSize = BenchSize {
        nodes: 5000,
        pods_per_node: 30,
        zones: 3,
    };
}

#[derive(Clone, Debug)]
pub struct BenchOptions {
    pub daemon: PathBuf,
    pub sizes: Vec<BenchSize>,
    /// Nodes killed at once in the detection phase.
    pub victims: usize,
    /// Pod status updates in the absorb burst.
    pub burst_events: usize,
    pub renew_interval: Duration,
    /// The daemon's node_monitor_grace_period.
    pub grace: Duration,
    pub monitor_period: Duration,
    /// The daemon's node_eviction_rate (nodes/s per zone).
    pub eviction_rate: f64,
    /// The daemon's api.qps / api.burst; `None`: its defaults (upstream 20 / 30).
    pub qps: Option<f64>,
    pub burst: Option<u32>,
    /// After READY=1, and after the kubelets resume, before measuring.
    pub settle: Duration,
    pub steady_window: Duration,
    pub idle_window: Duration,
    /// Idle windows measured one after another (the kubelets renew in between): the figures
    /// add up over all of them, so watch rotations (every 21–27 s per watch at the default
    /// idle timeout) are in the average rather than in it by luck.
    pub idle_rounds: u32,
    pub sync_timeout: Duration,
    /// How long the detection phase may take beyond grace + one renew interval.
    pub detection_timeout: Duration,
    pub work_dir: Option<PathBuf>,
    pub seed: u64,
    pub initial_list: InitialList,
    /// The simulator answers the daemon's protobuf requests in protobuf (as the real server
    /// does); `false`: JSON to everything (`--wire json`, the figures before protobuf).
    pub protobuf: bool,
    /// The daemon's features (`profile.rs`): its defaults, or every feature with a per-node or
    /// per-zone cost.
    pub profile: Profile,
    /// After the steady window, the first zone goes dark at once (`mass_failure.rs`) instead of
    /// the idle, absorb and detection phases; how long to watch it.
    pub mass_failure: bool,
    pub mass_failure_window: Duration,
}

impl BenchOptions {
    /// The documented benchmark: both sizes, upstream timings, a minute of steady state.
    pub fn standard(daemon: PathBuf) -> BenchOptions {
        BenchOptions {
            daemon,
            sizes: vec![BenchSize::SMALL, BenchSize::LARGE],
            victims: 100,
            burst_events: 50_000,
            renew_interval: Duration::from_secs(10),
            grace: Duration::from_secs(50),
            monitor_period: Duration::from_secs(5),
            eviction_rate: 1.0,
            qps: None,
            burst: None,
            settle: Duration::from_secs(10),
            steady_window: Duration::from_secs(60),
            idle_window: Duration::from_secs(20),
            idle_rounds: 3,
            sync_timeout: Duration::from_secs(180),
            detection_timeout: Duration::from_secs(300),
            work_dir: None,
            seed: 7,
            initial_list: InitialList::WatchList,
            protobuf: true,
            profile: Profile::Plain,
            mass_failure: false,
            mass_failure_window: Duration::from_secs(300),
        }
    }

    /// Shorter windows and a smaller burst (figures extrapolated from 15 s of steady state).
    pub fn quick(daemon: PathBuf) -> BenchOptions {
        BenchOptions {
            burst_events: 10_000,
            settle: Duration::from_secs(5),
            steady_window: Duration::from_secs(15),
            idle_window: Duration::from_secs(20),
            idle_rounds: 2,
            ..BenchOptions::standard(daemon)
        }
    }

    /// The longest any node is silent in the idle phase; must stay well under grace.
    fn idle_silence(&self) -> Duration {
        self.renew_interval.mul_f64(1.05)
            + Duration::from_secs(1)
            + self.idle_window
            + self.renew_interval
    }

    pub fn validate(&self) -> Result<(), String> {
        if self.sizes.is_empty() {
            return Err("no cluster size to measure".into());
        }
        for s in &self.sizes {
            if s.nodes < 2 || s.pods_per_node == 0 || s.zones == 0 {
                return Err(format!(
                    "size {} nodes / {} pods per node / {} zones: need ≥ 2 nodes, ≥ 1 pod per \
                     node, ≥ 1 zone",
                    s.nodes, s.pods_per_node, s.zones
                ));
            }
            if self.victims == 0 || self.victims * 2 > s.nodes {
                return Err(format!(
                    "{} victims out of {} nodes: must be at least 1 and at most half, so no zone \
                     counts as disrupted",
                    self.victims, s.nodes
                ));
            }
        }
        if self.idle_silence() * 10 >= self.grace * 9 {
            return Err(format!(
                "the idle window ({}) leaves nodes silent for up to {}: too close to the grace \
                 period ({})",
                format_duration(self.idle_window),
                format_duration(self.idle_silence()),
                format_duration(self.grace)
            ));
        }
        Ok(())
    }
}
