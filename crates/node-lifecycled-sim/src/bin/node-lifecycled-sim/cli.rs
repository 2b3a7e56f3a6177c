//! The simulator's command line: the usage text, the commands and their options. lexopt splits
//! the words; each subcommand then takes the options it knows, so a misplaced one is an error
//! that names it.

use std::ffi::OsString;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use node_lifecycled_sim::bench::floor_reader::{FloorWatch, GRID};
use node_lifecycled_sim::bench::{BenchSize, InitialList, Profile};
use node_lifecycled_sim::population::Population;

mod bench_args;
mod options;
use bench_args::bench_args;
use options::Options;

pub const EXIT_FAILED: u8 = 1;
pub const EXIT_ERROR: u8 = 2;
pub const EX_USAGE: u8 = 64;

pub const USAGE: &str = "\
node-lifecycled-sim: a simulated Kubernetes cluster for node-lifecycled

usage:
  node-lifecycled-sim [run] [--scenario NAME|FILE] [--config FILE] [--daemon PATH] [--dir DIR]
      Start the simulated cluster, start node-lifecycled against it, play the scenario
      (default: \"default\", under a minute), print the daemon's writes as a timeline, a
      summary per zone and each expectation. Exit 0 when every expectation holds.
        --scenario  a built-in scenario (see `scenarios`) or a scenario TOML file
        --config    a node-lifecycled config file whose settings override the demo's
                    (its [api] connection is replaced by the simulator's)
        --daemon    the node-lifecycled binary (default: next to this one; under `cargo run`
                    it is built first)
        --dir       where the kubeconfig, the daemon config and its log go (default: a new
                    directory under $TMPDIR)
  node-lifecycled-sim serve [--nodes N] [--zones Z] [--pods-per-node P] [--listen IP:PORT]
                            [--dir DIR] [--renew-interval D] [--default-toleration D]
      Run the simulated cluster until Ctrl-C: API server and kubelets (Lease renewed every
      --renew-interval, default 10s). Writes a kubeconfig and a config.toml for node-lifecycled
      into DIR and prints every write made over the API.
  node-lifecycled-sim scenarios       list the built-in scenarios
  node-lifecycled-sim check FILE      parse a scenario file and report its first error
  node-lifecycled-sim bench [--sizes small,large|curve|N,...] [--quick] [--nodes N]
                            [--pods-per-node P] [--zones Z] [--victims N] [--burst-events N]
                            [--qps Q] [--burst B] [--initial-list watch-list|watch-cache]
                            [--wire protobuf|json] [--profile plain|every-feature] [--csv FILE]
                            [--mass-failure [--mass-failure-window D]] [--daemon PATH] [--dir DIR]
      The scale benchmark: for each size (small = 500 nodes, large = 5,000 nodes, curve = 500,
      2,000, 5,000, 15,000 and 30,000 nodes, or node counts; 30 pods per node, 3 zones; or one size
      from --nodes/--pods-per-node/--zones) the simulated cluster runs
      in this process and the release daemon as a child: initial sync time, RSS, CPU at 500 lease
      renewals/s and its floor (a bare reader of the same watch, in a window as long), idle
      wake-ups, watch events/s absorbed, heartbeat-loss detection latency over --victims killed
      nodes (default 100) and taint-to-DELETE latency. About 7 minutes per size; --quick
      shortens the measuring windows (steady CPU from 15 s instead of 60 s).
        --qps/--burst  the daemon's api.qps/api.burst (default: its own, upstream 20/30)
        --initial-list how the daemon fetches its first full state: watch-list (default; the
                       simulator reports 1.32) or watch-cache (one resourceVersion=0 LIST per
                       kind, read as a stream; the simulator reports 1.31)
        --csv          also write every size's figures to FILE as CSV; with two sizes or
                       more the report ends with the fitted growth (bytes per pod, µs per
                       event, sync seconds per 10,000 pods); scripts/plot-bench-curve.py
                       draws the curve from the CSV
        --wire         what the simulator answers the daemon's protobuf requests (watches, the
                       watch-cache LIST) in: protobuf (default, as kube-apiserver does for
                       nodes, pods and leases) or json (the daemon then reads JSON)
        --profile      the daemon's defaults (plain), or every feature with a per-node or
                       per-zone cost at once: sites, holds, brakes, pools, autonomy, condition
                       taints, fencing armed (BENCHMARKS.md)
        --mass-failure after the steady window the first zone's kubelets stop at once (a third
                       of the fleet at 3 zones): the last node marked Unknown, its pods marked
                       NotReady per second, every write counted (window: default 300s)
  node-lifecycled-sim soak [--duration D] [--seed S] [--nodes N] [--zones Z] [--daemon PATH]
                           [--dir DIR] [--brake N] [--pools | --partitions] [--fencing]
                           [--shadow]
      The randomized fault soak: two daemons with leader election against the simulated
      cluster (24 nodes in 3 zones by default) for --duration (default 30m) while a plan drawn
      from --seed (default 1) stops, reboots and flaps kubelets, drops, stalls, corrupts and
      expires watches, restarts the API server, injects 409/429/500 bursts and slow responses,
      kills the leader and reloads good and bad configs. Safety and liveness invariants are
      checked all along; prints faults by kind, decisions, violations and the replay command.
      Exit 1 on any violation.
        --brake     the daemons run with max_unhealthy = N (a 2s disruption_cooldown): no
                    NoExecute taint or deletion may land while more than N nodes are not Ready
        --pools     the daemons' config has pools (zone z1 with its own 50% brake and
                    default_toleration_seconds, zone z2 with mark_pods_not_ready = false)
        --partitions  the daemons group nodes into disruption domains by a site label
                    (across zones), keep pods Ready while a site is disrupted, hold a dark
                    site until hold_max, with a pool of their own; the invariants are judged
                    per domain (with --brake: pools, domains and a brake together)
        --fencing   the daemons fence a quarter of the nodes through an agent that escalates
                    and never succeeds, and fencing is paused around fence steps: no step
                    may start while paused, for a node that renews, or in a disrupted zone
        --shadow    the simulator's incumbent (upstream's batch rules) writes; the daemons run
                    in shadow mode with a history file each, are also restarted with SIGTERM,
                    and must write nothing and lose no divergence across restarts (alone:
                    not with --brake, --pools, --partitions or --fencing)
  node-lifecycled-sim floor-reader --kubeconfig FILE [--watch leases,nodes] [--grid D]
                                   [--warmup D] [--duration D]
      The floor of the daemon's CPU per watch event on any API server (the real one too): a
      bare reader of the same watches (frames found, each object's name read, one slot
      written), over the kubeconfig's TLS and credentials, read on the daemon's 45 ms grid.
      After --warmup (default 10s: the current state's ADDED events) it measures --duration
      (default 60s) and prints one JSON line: events, objects, reads, wake-ups and its own
      CPU (µs per event). scripts/bench-real-apiserver.py runs it beside the daemon.
        --watch     the watches to read, comma-separated (default: leases,nodes)
        --grid      the read grid before widening (default 45ms, the daemon's): a wide one
                    spreads the wake-ups over more events, leaving the cost of each event
  node-lifecycled-sim --help | --version

exit codes: 0 success, 1 an expectation failed, 2 the run could not happen, 64 usage error
";

#[derive(Debug, PartialEq)]
pub enum Command {
    Run {
        scenario: String,
        config: Option<PathBuf>,
        daemon: Option<PathBuf>,
        dir: Option<PathBuf>,
    },
    Serve(ServeOptions),
    Scenarios,
    Check(String),
    Bench(BenchArgs),
    Soak(SoakArgs),
    FloorReader(FloorReaderArgs),
    Help,
    Version,
}

#[derive(Debug, PartialEq)]
pub struct FloorReaderArgs {
    pub kubeconfig: PathBuf,
    pub watches: Vec<FloorWatch>,
    pub grid: Duration,
    pub warmup: Duration,
    pub duration: Duration,
}

#[derive(Debug, PartialEq)]
pub struct BenchArgs {
    pub sizes: Vec<BenchSize>,
    pub quick: bool,
    pub victims: Option<usize>,
    pub burst_events: Option<usize>,
    pub qps: Option<f64>,
    pub burst: Option<u32>,
    pub initial_list: Option<InitialList>,
    /// `--wire json`: the simulator answers JSON only.
    pub json_only: bool,
    pub profile: Profile,
    /// `--csv FILE`: every size's figures as CSV, for scripts/plot-bench-curve.py.
    pub csv: Option<PathBuf>,
    /// `--mass-failure [--mass-failure-window D]`: a zone dark at once after the steady window.
    pub mass_failure: Option<Duration>,
    pub daemon: Option<PathBuf>,
    pub dir: Option<PathBuf>,
}

#[derive(Debug, PartialEq)]
pub struct SoakArgs {
    pub duration: Duration,
    pub seed: u64,
    pub nodes: usize,
    pub zones: usize,
    pub daemon: Option<PathBuf>,
    pub dir: Option<PathBuf>,
    /// `--brake N`: the daemons' max_unhealthy.
    pub brake: Option<usize>,
    /// `--pools`: the daemons' config has pools.
    pub pools: bool,
    /// `--partitions`: disruption domains by site, unless-disrupted, a hold, a site pool.
    pub partitions: bool,
    /// `--fencing`: fencing in two failing steps, paused around them.
    pub fencing: bool,
    /// `--shadow`: an incumbent writes, the daemons shadow it.
    pub shadow: bool,
}

#[derive(Debug, PartialEq)]
pub struct ServeOptions {
    pub population: Population,
    pub listen: SocketAddr,
    pub dir: Option<PathBuf>,
    pub renew_interval: Duration,
}

pub fn parse_args(args: impl IntoIterator<Item = OsString>) -> Result<Command, String> {
    let args: Vec<OsString> = args.into_iter().collect();
    if args.iter().any(|a| a == "--help" || a == "-h") {
        return Ok(Command::Help);
    }
    if args.iter().any(|a| a == "--version" || a == "-V") {
        return Ok(Command::Version);
    }
    let sub = match args.first().and_then(|a| a.to_str()) {
        Some(s @ ("run" | "serve" | "scenarios" | "check" | "bench" | "soak" | "floor-reader")) => {
            s.to_string()
        }
        _ => "run".to_string(),
    };
    let skip = usize::from(args.first().and_then(|a| a.to_str()) == Some(sub.as_str()));
    let mut options = Options::read(args.into_iter().skip(skip))?;
    let sub = sub.as_str();
    let command = match sub {
        "run" => {
            let scenario = options
                .value("--scenario")?
                .unwrap_or_else(|| "default".into());
            Command::Run {
                scenario,
                config: options.value("--config")?.map(PathBuf::from),
                daemon: options.value("--daemon")?.map(PathBuf::from),
                dir: options.value("--dir")?.map(PathBuf::from),
            }
        }
        "serve" => {
            let mut population = Population::default();
            if let Some(n) = options.number("--nodes")? {
                population.nodes = n.max(1);
            }
            if let Some(z) = options.number("--zones")? {
                population.zones = z.max(1);
            }
            if let Some(p) = options.number("--pods-per-node")? {
                population.pods_per_node = p;
            }
            if let Some(d) = options.duration("--default-toleration")? {
                population.default_toleration = d;
            }
            let listen = match options.value("--listen")? {
                None => SocketAddr::from(([127, 0, 0, 1], 0)),
                Some(text) => text
                    .parse()
                    .map_err(|_| format!("--listen: {text:?} is not IP:PORT"))?,
            };
            let renew_interval = options
                .duration("--renew-interval")?
                .unwrap_or(Duration::from_secs(10));
            if renew_interval.is_zero() {
                return Err("--renew-interval: must be > 0".into());
            }
            Command::Serve(ServeOptions {
                population,
                listen,
                dir: options.value("--dir")?.map(PathBuf::from),
                renew_interval,
            })
        }
        "scenarios" => Command::Scenarios,
        "bench" => Command::Bench(bench_args(&mut options)?),
        "soak" => {
            let duration = options
                .duration("--duration")?
                .unwrap_or(Duration::from_secs(1800));
            if duration < Duration::from_secs(20) {
                return Err("--duration: at least 20s (the daemons need time to start)".into());
            }
            let seed = options
                .value("--seed")?
                .map(|v| {
                    v.parse::<u64>()
                        .map_err(|_| format!("--seed: {v:?} is not a whole number"))
                })
                .transpose()?
                .unwrap_or(1);
            let nodes = options.number("--nodes")?.unwrap_or(24);
            let zones = options.number("--zones")?.unwrap_or(3);
            if nodes == 0 || zones == 0 || zones > nodes {
                return Err("--nodes and --zones: at least one node per zone".into());
            }
            let (pools, partitions) = (options.flag("--pools"), options.flag("--partitions"));
            if pools && partitions {
                // Both put nodes of zones z1 and z2 in pools of their own; first match wins,
                // and the checker knows one layout at a time.
                return Err("--pools and --partitions exclude each other".into());
            }
            let (fencing, shadow) = (options.flag("--fencing"), options.flag("--shadow"));
            let brake = options.number("--brake")?;
            if shadow && (fencing || pools || partitions || brake.is_some()) {
                // Shadow mode refuses [fencing]; the policies' rules judge the daemons'
                // writes, of which shadow mode makes none.
                return Err(
                    "--shadow runs alone: not with --brake, --pools, --partitions or \
                            --fencing"
                        .into(),
                );
            }
            Command::Soak(SoakArgs {
                duration,
                seed,
                nodes,
                zones,
                daemon: options.value("--daemon")?.map(PathBuf::from),
                dir: options.value("--dir")?.map(PathBuf::from),
                brake,
                pools,
                partitions,
                fencing,
                shadow,
            })
        }
        "check" => Command::Check(options.positional().ok_or("check needs a FILE")?),
        "floor-reader" => {
            let kubeconfig = options
                .value("--kubeconfig")?
                .map(PathBuf::from)
                .ok_or("floor-reader needs --kubeconfig FILE")?;
            let watches = options
                .value("--watch")?
                .unwrap_or_else(|| "leases,nodes".into())
                .split(',')
                .map(|w| match w.trim() {
                    "leases" => Ok(FloorWatch::Leases),
                    "nodes" => Ok(FloorWatch::Nodes),
                    other => Err(format!("--watch: {other:?} is not leases or nodes")),
                })
                .collect::<Result<Vec<_>, _>>()?;
            let duration = options
                .duration("--duration")?
                .unwrap_or(Duration::from_secs(60));
            if duration.is_zero() {
                return Err("--duration: must be > 0".into());
            }
            let grid = options.duration("--grid")?.unwrap_or(GRID);
            if grid.is_zero() {
                return Err("--grid: must be > 0".into());
            }
            Command::FloorReader(FloorReaderArgs {
                kubeconfig,
                watches,
                grid,
                warmup: options
                    .duration("--warmup")?
                    .unwrap_or(Duration::from_secs(10)),
                duration,
            })
        }
        _ => unreachable!("matched above"),
    };
    options.finish()?;
    Ok(command)
}

#[cfg(test)]
mod tests {
    use super::options::{FLAGS, VALUED};
    use super::*;

    fn parse(args: &[&str]) -> Result<Command, String> {
        parse_args(args.iter().map(OsString::from))
    }

    #[test]
    fn without_arguments_it_runs_the_default_scenario() {
        assert_eq!(
            parse(&[]),
            Ok(Command::Run {
                scenario: "default".into(),
                config: None,
                daemon: None,
                dir: None
            })
        );
        assert_eq!(
            parse(&["--scenario=zone-outage", "--config", "x.toml"]),
            Ok(Command::Run {
                scenario: "zone-outage".into(),
                config: Some("x.toml".into()),
                daemon: None,
                dir: None
            })
        );
    }

    #[test]
    fn serve_takes_the_cluster_shape() {
        let Ok(Command::Serve(o)) = parse(&[
            "serve",
            "--nodes",
            "5000",
            "--zones=5",
            "--pods-per-node",
            "30",
            "--listen",
            "127.0.0.1:6443",
        ]) else {
            panic!("not serve");
        };
        assert_eq!(
            (
                o.population.nodes,
                o.population.zones,
                o.population.pods_per_node
            ),
            (5000, 5, 30)
        );
        assert_eq!(o.listen.port(), 6443);
    }

    #[test]
    fn the_floor_reader_takes_a_kubeconfig_and_reads_both_watches_unless_told() {
        assert_eq!(
            parse(&["floor-reader", "--kubeconfig", "k.yaml"]),
            Ok(Command::FloorReader(FloorReaderArgs {
                kubeconfig: "k.yaml".into(),
                watches: vec![FloorWatch::Leases, FloorWatch::Nodes],
                grid: GRID,
                warmup: Duration::from_secs(10),
                duration: Duration::from_secs(60),
            }))
        );
        assert_eq!(
            parse(&[
                "floor-reader",
                "--kubeconfig",
                "k.yaml",
                "--watch",
                "leases",
                "--warmup",
                "0s",
                "--grid",
                "1s",
                "--duration",
                "1500ms"
            ]),
            Ok(Command::FloorReader(FloorReaderArgs {
                kubeconfig: "k.yaml".into(),
                watches: vec![FloorWatch::Leases],
                grid: Duration::from_secs(1),
                warmup: Duration::ZERO,
                duration: Duration::from_millis(1500),
            }))
        );
        assert_eq!(
            parse(&["floor-reader"]),
            Err("floor-reader needs --kubeconfig FILE".to_string())
        );
        assert_eq!(
            parse(&["floor-reader", "--kubeconfig", "k", "--watch", "pods"]),
            Err("--watch: \"pods\" is not leases or nodes".to_string())
        );
        assert!(parse(&["floor-reader", "--kubeconfig", "k", "--duration", "0s"]).is_err());
        assert!(parse(&["floor-reader", "--kubeconfig", "k", "--grid", "0s"]).is_err());
        assert!(parse(&["serve", "--kubeconfig", "k"]).is_err());
    }

    #[test]
    fn bad_arguments_are_usage_errors() {
        assert!(parse(&["run", "--nodes", "3"]).is_err());
        assert!(parse(&["serve", "--nodes", "many"]).is_err());
        assert!(parse(&["serve", "--listen", "nowhere"]).is_err());
        assert!(parse(&["run", "--scenario"]).is_err());
        assert!(parse(&["run", "--scenario", "a", "--scenario", "b"]).is_err());
        assert!(parse(&["check"]).is_err());
        assert!(parse(&["check", "a.toml", "b.toml"]).is_err());
        assert!(parse(&["run", "-x"]).is_err());
        assert_eq!(
            parse(&["bench", "--nope", "1"]),
            Err("unknown argument \"--nope\"".to_string())
        );
        assert!(parse(&["run", "--dir="]).is_err());
        assert!(parse(&["run", "stray"]).is_err());
        assert!(parse(&["bench", "--quick", "--quick"]).is_err());
        assert!(parse(&["serve", "--quick"]).is_err());
        assert!(parse(&["soak", "--pools", "--partitions"]).is_err());
        assert!(matches!(parse(&["soak", "--shadow"]), Ok(Command::Soak(a)) if a.shadow));
        for with in ["--fencing", "--partitions", "--pools"] {
            assert!(parse(&["soak", "--shadow", with]).is_err(), "{with}");
        }
        assert!(parse(&["soak", "--shadow", "--brake", "4"]).is_err());
        assert_eq!(
            parse(&["check", "a.toml"]),
            Ok(Command::Check("a.toml".into()))
        );
        assert_eq!(parse(&["soak", "-h"]), Ok(Command::Help));
    }

    #[test]
    fn every_option_of_the_usage_is_known_to_the_parser() {
        let words = USAGE
            .split(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
            .filter_map(|w| w.strip_prefix("--"))
            .filter(|w| !w.is_empty() && !["help", "version"].contains(w));
        for word in words {
            assert!(
                FLAGS.contains(&word) || VALUED.contains(&word),
                "--{word} is in the usage but not in FLAGS or VALUED"
            );
        }
    }

    #[test]
    fn bench_defaults_to_both_sizes_and_takes_one_custom_size() {
        let Ok(Command::Bench(b)) = parse(&["bench"]) else {
            panic!("not bench");
        };
        assert_eq!(b.sizes, [BenchSize::SMALL, BenchSize::LARGE]);
        assert!(!b.quick);
        let Ok(Command::Bench(b)) = parse(&["bench", "--quick", "--nodes", "40", "--zones=2"])
        else {
            panic!("not bench");
        };
        assert!(b.quick);
        assert_eq!(
            b.sizes,
            [BenchSize {
                nodes: 40,
                pods_per_node: 30,
                zones: 2
            }]
        );
        let Ok(Command::Bench(b)) = parse(&["bench", "--sizes", "large", "--qps", "50"]) else {
            panic!("not bench");
        };
        assert_eq!((b.sizes, b.qps), (vec![BenchSize::LARGE], Some(50.0)));
        assert!(parse(&["bench", "--sizes", "huge"]).is_err());
        assert!(parse(&["bench", "--sizes", "1"]).is_err());
        let Ok(Command::Bench(b)) = parse(&["bench", "--sizes", "curve", "--csv", "c.csv"]) else {
            panic!("not bench");
        };
        let nodes: Vec<usize> = b.sizes.iter().map(|s| s.nodes).collect();
        assert_eq!(nodes, [500, 2000, 5000, 15_000, 30_000]);
        assert_eq!(b.csv, Some(PathBuf::from("c.csv")));
        let Ok(Command::Bench(b)) = parse(&["bench", "--sizes", "small,2000"]) else {
            panic!("not bench");
        };
        assert_eq!(b.sizes[1].nodes, 2000);
        assert_eq!(b.sizes[1].pods_per_node, 30);
        assert!(parse(&["bench", "--nodes", "10", "--sizes", "small"]).is_err());
        assert!(parse(&["bench", "--zones", "2"]).is_err());
        assert!(parse(&["bench", "--qps", "-1"]).is_err());
    }

    #[test]
    fn bench_takes_a_mass_failure_with_its_window() {
        let Ok(Command::Bench(b)) = parse(&["bench", "--nodes", "15000", "--mass-failure"]) else {
            panic!("not bench");
        };
        assert_eq!(b.mass_failure, Some(Duration::from_secs(300)));
        let Ok(Command::Bench(b)) =
            parse(&["bench", "--mass-failure", "--mass-failure-window", "2m"])
        else {
            panic!("not bench");
        };
        assert_eq!(b.mass_failure, Some(Duration::from_secs(120)));
        let Ok(Command::Bench(b)) = parse(&["bench"]) else {
            panic!("not bench");
        };
        assert_eq!(b.mass_failure, None);
        assert!(parse(&["bench", "--mass-failure-window", "2m"]).is_err());
        assert!(parse(&["serve", "--mass-failure"]).is_err());
    }
}
