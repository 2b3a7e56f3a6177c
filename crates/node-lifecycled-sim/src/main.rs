//! node-lifecycled-sim: a simulated Kubernetes cluster (API server + kubelets) for trying,
//! demonstrating and testing node-lifecycled without a real cluster.

use std::ffi::OsString;
use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use node_lifecycled::config::parse_duration;
use node_lifecycled_sim::bench::{self, BenchOptions, BenchSize, InitialList};
use node_lifecycled_sim::kubelets::{KubeletConfig, Kubelets};
use node_lifecycled_sim::population::Population;
use node_lifecycled_sim::scenario::{self, BUILTIN, RunOptions, Scenario};
use node_lifecycled_sim::soak;
use node_lifecycled_sim::timeline::{FactReader, Timeline};
use node_lifecycled_sim::{SimConfig, SimServer};

const EXIT_FAILED: u8 = 1;
const EXIT_ERROR: u8 = 2;
const EX_USAGE: u8 = 64;

const USAGE: &str = "\
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
  node-lifecycled-sim bench [--sizes small,large] [--quick] [--nodes N] [--pods-per-node P]
                            [--zones Z] [--victims N] [--burst-events N] [--qps Q] [--burst B]
                            [--initial-list watch-list|watch-cache] [--wire protobuf|json]
                            [--daemon PATH] [--dir DIR]
      The scale benchmark: for each size (small = 500 nodes, large = 5,000 nodes, 30 pods per
      node, 3 zones; or one size from --nodes/--pods-per-node/--zones) the simulated cluster runs
      in this process and the release daemon as a child: initial sync time, RSS, CPU at 500 lease
      renewals/s, idle wake-ups, watch events/s absorbed, heartbeat-loss detection latency over
      --victims killed nodes (default 100) and taint-to-DELETE latency. About 6 minutes per size;
      --quick shortens the measuring windows (steady CPU from 15 s instead of 60 s).
        --qps/--burst  the daemon's api.qps/api.burst (default: its own, upstream 20/30)
        --initial-list how the daemon fetches its first full state: watch-list (default; the
                       simulator reports 1.32) or watch-cache (one resourceVersion=0 LIST per
                       kind, read as a stream; the simulator reports 1.31)
        --wire         what the simulator answers the daemon's protobuf requests (watches, the
                       watch-cache LIST) in: protobuf (default, as kube-apiserver does for
                       nodes, pods and leases) or json (the daemon then reads JSON)
  node-lifecycled-sim soak [--duration D] [--seed S] [--nodes N] [--zones Z] [--partitions]
                           [--daemon PATH] [--dir DIR]
      The randomized fault soak: two daemons with leader election against the simulated
      cluster (24 nodes in 3 zones by default) for --duration (default 30m) while a plan drawn
      from --seed (default 1) stops, reboots and flaps kubelets, drops, stalls, corrupts and
      expires watches, restarts the API server, injects 409/429/500 bursts and slow responses,
      kills the leader and reloads good and bad configs. Safety and liveness invariants are
      checked all along; prints faults by kind, decisions, violations and the replay command.
      Exit 1 on any violation. --partitions: the daemons group nodes into disruption domains
      by a site label (across zones), keep pods Ready while a site is disrupted, hold a dark
      site until hold_max, with a pool; the invariants are judged per domain.
  node-lifecycled-sim --help | --version

exit codes: 0 success, 1 an expectation failed, 2 the run could not happen, 64 usage error
";

#[derive(Debug, PartialEq)]
enum Command {
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
    Help,
    Version,
}

#[derive(Debug, PartialEq)]
struct BenchArgs {
    sizes: Vec<BenchSize>,
    quick: bool,
    victims: Option<usize>,
    burst_events: Option<usize>,
    qps: Option<f64>,
    burst: Option<u32>,
    initial_list: Option<InitialList>,
    /// `--wire json`: the simulator answers JSON only.
    json_only: bool,
    daemon: Option<PathBuf>,
    dir: Option<PathBuf>,
}

#[derive(Debug, PartialEq)]
struct SoakArgs {
    duration: Duration,
    seed: u64,
    nodes: usize,
    zones: usize,
    partitions: bool,
    daemon: Option<PathBuf>,
    dir: Option<PathBuf>,
}

#[derive(Debug, PartialEq)]
struct ServeOptions {
    population: Population,
    listen: SocketAddr,
    dir: Option<PathBuf>,
    renew_interval: Duration,
}

fn parse_args(args: impl IntoIterator<Item = OsString>) -> Result<Command, String> {
    let args: Vec<String> = args
        .into_iter()
        .map(|a| {
            a.into_string()
                .map_err(|a| format!("unknown argument {a:?}"))
        })
        .collect::<Result<_, _>>()?;
    if args.iter().any(|a| a == "--help" || a == "-h") {
        return Ok(Command::Help);
    }
    if args.iter().any(|a| a == "--version" || a == "-V") {
        return Ok(Command::Version);
    }
    let (sub, rest) = match args.first().map(String::as_str) {
        Some(s @ ("run" | "serve" | "scenarios" | "check" | "bench" | "soak")) => (s, &args[1..]),
        _ => ("run", &args[..]),
    };
    let mut options = Options::new(rest);
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
            Command::Soak(SoakArgs {
                duration,
                seed,
                nodes,
                zones,
                partitions: options.flag("--partitions"),
                daemon: options.value("--daemon")?.map(PathBuf::from),
                dir: options.value("--dir")?.map(PathBuf::from),
            })
        }
        "check" => Command::Check(options.positional().ok_or("check needs a FILE")?),
        _ => unreachable!("matched above"),
    };
    options.finish()?;
    Ok(command)
}

fn bench_args(options: &mut Options) -> Result<BenchArgs, String> {
    let quick = options.flag("--quick");
    let nodes = options.number("--nodes")?;
    let pods_per_node = options.number("--pods-per-node")?;
    let zones = options.number("--zones")?;
    let named = options.value("--sizes")?;
    let sizes = match (nodes, named) {
        (Some(_), Some(_)) => return Err("--nodes and --sizes exclude each other".into()),
        (Some(nodes), None) => vec![BenchSize {
            nodes,
            pods_per_node: pods_per_node.unwrap_or(BenchSize::LARGE.pods_per_node),
            zones: zones.unwrap_or(BenchSize::LARGE.zones),
        }],
        (None, named) => {
            if pods_per_node.is_some() || zones.is_some() {
                return Err("--pods-per-node and --zones go with --nodes".into());
            }
            named
                .as_deref()
                .unwrap_or("small,large")
                .split(',')
                .map(|s| match s.trim() {
                    "small" => Ok(BenchSize::SMALL),
                    "large" => Ok(BenchSize::LARGE),
                    other => Err(format!("--sizes: {other:?} is neither small nor large")),
                })
                .collect::<Result<_, _>>()?
        }
    };
    let qps = options
        .value("--qps")?
        .map(|v| {
            v.parse::<f64>()
                .ok()
                .filter(|q| q.is_finite() && *q > 0.0)
                .ok_or_else(|| format!("--qps: {v:?} is not a positive number"))
        })
        .transpose()?;
    let burst = options
        .number("--burst")?
        .map(|b| u32::try_from(b).map_err(|_| format!("--burst: {b} is too large")))
        .transpose()?;
    let initial_list = options
        .value("--initial-list")?
        .map(|v| {
            InitialList::parse(&v).ok_or_else(|| {
                format!("--initial-list: {v:?} is neither watch-list nor watch-cache")
            })
        })
        .transpose()?;
    let json_only = match options.value("--wire")?.as_deref() {
        None | Some("protobuf") => false,
        Some("json") => true,
        Some(other) => return Err(format!("--wire: {other:?} is neither protobuf nor json")),
    };
    Ok(BenchArgs {
        sizes,
        quick,
        json_only,
        victims: options.number("--victims")?,
        burst_events: options.number("--burst-events")?,
        qps,
        burst,
        initial_list,
        daemon: options.value("--daemon")?.map(PathBuf::from),
        dir: options.value("--dir")?.map(PathBuf::from),
    })
}

/// `--key VALUE` / `--key=VALUE` options, each at most once; anything left over is an error.
struct Options {
    rest: Vec<String>,
}

impl Options {
    fn new(args: &[String]) -> Options {
        Options {
            rest: args.to_vec(),
        }
    }

    fn value(&mut self, key: &str) -> Result<Option<String>, String> {
        let mut found = None;
        let mut i = 0;
        while i < self.rest.len() {
            let arg = &self.rest[i];
            let value = if arg == key {
                if i + 1 >= self.rest.len() {
                    return Err(format!("{key} needs a value"));
                }
                let v = self.rest.remove(i + 1);
                self.rest.remove(i);
                v
            } else if let Some(v) = arg.strip_prefix(&format!("{key}=")) {
                let v = v.to_string();
                self.rest.remove(i);
                v
            } else {
                i += 1;
                continue;
            };
            if value.is_empty() {
                return Err(format!("{key} needs a value"));
            }
            if found.replace(value).is_some() {
                return Err(format!("{key} given twice"));
            }
        }
        Ok(found)
    }

    fn number(&mut self, key: &str) -> Result<Option<usize>, String> {
        self.value(key)?
            .map(|v| {
                v.parse()
                    .map_err(|_| format!("{key}: {v:?} is not a whole number"))
            })
            .transpose()
    }

    fn duration(&mut self, key: &str) -> Result<Option<Duration>, String> {
        self.value(key)?
            .map(|v| parse_duration(&v).map_err(|e| format!("{key}: {e}")))
            .transpose()
    }

    /// A bare `--key`, at most once.
    fn flag(&mut self, key: &str) -> bool {
        let before = self.rest.len();
        self.rest.retain(|a| a != key);
        self.rest.len() < before
    }

    fn positional(&mut self) -> Option<String> {
        let i = self.rest.iter().position(|a| !a.starts_with("--"))?;
        Some(self.rest.remove(i))
    }

    fn finish(self) -> Result<(), String> {
        match self.rest.first() {
            None => Ok(()),
            Some(arg) => Err(format!("unknown argument {arg:?}")),
        }
    }
}

fn main() -> ExitCode {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn")).init();
    let command = match parse_args(std::env::args_os().skip(1)) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("node-lifecycled-sim: {e}\nTry 'node-lifecycled-sim --help'.");
            return ExitCode::from(EX_USAGE);
        }
    };
    match command {
        Command::Help => {
            print!("{USAGE}");
            ExitCode::SUCCESS
        }
        Command::Version => {
            println!("node-lifecycled-sim {}", env!("CARGO_PKG_VERSION"));
            ExitCode::SUCCESS
        }
        Command::Scenarios => {
            for (name, text) in BUILTIN {
                match Scenario::parse(text, &format!("builtin:{name}")) {
                    Ok(s) => println!("{name:<24} {:>4}s  {}", s.duration.as_secs(), s.description),
                    Err(e) => println!("{name:<24} broken: {e}"),
                }
            }
            ExitCode::SUCCESS
        }
        Command::Check(file) => match Scenario::load(&file) {
            Ok(s) => {
                println!(
                    "{file}: scenario {:?}, {} steps, {} expectations, {}s",
                    s.name,
                    s.steps.len(),
                    s.expects.len(),
                    s.duration.as_secs()
                );
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("{e}");
                ExitCode::from(EXIT_ERROR)
            }
        },
        Command::Bench(args) => run_bench(args),
        Command::Soak(args) => run_soak(args),
        Command::Run {
            scenario,
            config,
            daemon,
            dir,
        } => run(&scenario, config, daemon, dir),
        Command::Serve(options) => serve(options),
    }
}

fn run_bench(args: BenchArgs) -> ExitCode {
    let daemon = match args.daemon.map_or_else(find_daemon, Ok) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("node-lifecycled-sim: {e}");
            return ExitCode::from(EXIT_ERROR);
        }
    };
    if !daemon.components().any(|c| c.as_os_str() == "release") {
        eprintln!(
            "node-lifecycled-sim bench: {} is not a release build; figures are only meaningful \
             with `cargo run --release --bin node-lifecycled-sim -- bench`",
            daemon.display()
        );
    }
    let mut options = if args.quick {
        BenchOptions::quick(daemon)
    } else {
        BenchOptions::standard(daemon)
    };
    options.sizes = args.sizes;
    options.victims = args.victims.unwrap_or(options.victims);
    options.burst_events = args.burst_events.unwrap_or(options.burst_events);
    options.qps = args.qps;
    options.burst = args.burst;
    options.initial_list = args.initial_list.unwrap_or(options.initial_list);
    options.protobuf = !args.json_only;
    options.work_dir = args.dir;
    let mut out = std::io::stdout();
    let _ = writeln!(
        out,
        "node-lifecycled-sim bench{}: {} core(s), {}; daemon {}; first list by {}\n",
        if args.quick { " --quick" } else { "" },
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        cpu_model(),
        options.daemon.display(),
        options.initial_list.name()
    );
    let started = Instant::now();
    match bench::run(&options, &mut out) {
        Ok(reports) => {
            if reports.len() > 1 {
                let _ = writeln!(out, "\nall sizes:\n\n{}", bench::table(&reports));
            }
            let _ = writeln!(
                out,
                "benchmark took {:.0}s",
                started.elapsed().as_secs_f64()
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            let _ = out.flush();
            eprintln!("node-lifecycled-sim bench: {e}");
            ExitCode::from(EXIT_ERROR)
        }
    }
}

fn run_soak(args: SoakArgs) -> ExitCode {
    let daemon = match args.daemon.map_or_else(find_daemon, Ok) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("node-lifecycled-sim: {e}");
            return ExitCode::from(EXIT_ERROR);
        }
    };
    let mut options = soak::SoakOptions::new(args.duration, args.seed, daemon);
    options.nodes = args.nodes;
    options.zones = args.zones;
    options.partitions = args.partitions;
    options.dir = args.dir;
    // Interrupted, the soak stops its daemons before it exits (none is left running).
    let stop = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        if let Err(e) = signal_hook::flag::register(signal, stop.clone()) {
            eprintln!("node-lifecycled-sim soak: cannot handle signal {signal}: {e}");
            return ExitCode::from(EXIT_ERROR);
        }
    }
    options.stop = Some(stop);
    let mut out = std::io::stdout();
    match soak::run(&options, &mut out) {
        Ok(report) => {
            let _ = writeln!(out, "{report}");
            if report.passed() {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(EXIT_FAILED)
            }
        }
        Err(e) => {
            let _ = out.flush();
            eprintln!("node-lifecycled-sim soak: {e}");
            ExitCode::from(EXIT_ERROR)
        }
    }
}

/// `model name` from /proc/cpuinfo, for the record.
fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|text| {
            text.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".to_string())
}

fn run(
    name: &str,
    config: Option<PathBuf>,
    daemon: Option<PathBuf>,
    dir: Option<PathBuf>,
) -> ExitCode {
    let scenario = match Scenario::load(name) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("node-lifecycled-sim: {e}");
            return ExitCode::from(EXIT_ERROR);
        }
    };
    let daemon = match daemon.map_or_else(find_daemon, Ok) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("node-lifecycled-sim: {e}");
            return ExitCode::from(EXIT_ERROR);
        }
    };
    let options = RunOptions {
        daemon,
        config,
        work_dir: dir,
    };
    let mut out = std::io::stdout();
    match scenario::run(&scenario, &options, &mut out) {
        Ok(report) if report.passed => ExitCode::SUCCESS,
        Ok(_) => ExitCode::from(EXIT_FAILED),
        Err(e) => {
            let _ = out.flush();
            eprintln!("node-lifecycled-sim: {e}");
            ExitCode::from(EXIT_ERROR)
        }
    }
}

/// The daemon binary: `$NODE_LIFECYCLED_BIN`, else `node-lifecycled` next to this executable.
/// Under `cargo run` (which builds only the binary asked for) it is built first, with the same
/// profile, so a fresh clone works and an edited tree never runs a stale daemon.
fn find_daemon() -> Result<PathBuf, String> {
    if let Some(path) = std::env::var_os("NODE_LIFECYCLED_BIN") {
        return Ok(PathBuf::from(path));
    }
    let exe = std::env::current_exe().map_err(|e| format!("cannot locate this executable: {e}"))?;
    let daemon = exe.with_file_name("node-lifecycled");
    if let (Some(cargo), Some(manifest)) = (
        std::env::var_os("CARGO"),
        std::env::var_os("CARGO_MANIFEST_DIR"),
    ) {
        build_daemon(Path::new(&cargo), Path::new(&manifest), &exe)?;
    }
    if daemon.is_file() {
        Ok(daemon)
    } else {
        Err(format!(
            "{} not found: build it with `cargo build --release --bin node-lifecycled` (or pass \
             --daemon PATH)",
            daemon.display()
        ))
    }
}

fn build_daemon(cargo: &Path, manifest_dir: &Path, exe: &Path) -> Result<(), String> {
    let profile = exe
        .parent()
        .and_then(Path::file_name)
        .and_then(|p| p.to_str())
        .unwrap_or("debug");
    // `-p`: under `cargo run` the directory is this crate's, and the daemon is another package of
    // the workspace (the product at its root).
    let mut command = std::process::Command::new(cargo);
    command.current_dir(manifest_dir).args([
        "build",
        "--quiet",
        "-p",
        "node-lifecycled",
        "--bin",
        "node-lifecycled",
    ]);
    match profile {
        "debug" => {}
        "release" => {
            command.arg("--release");
        }
        other => {
            command.args(["--profile", other]);
        }
    }
    eprintln!(
        "node-lifecycled-sim: building the daemon (cargo build{} -p node-lifecycled --bin node-lifecycled)…",
        if profile == "debug" {
            String::new()
        } else {
            format!(" --{profile}")
        }
    );
    let status = command
        .status()
        .map_err(|e| format!("cannot run {}: {e}", cargo.display()))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("building node-lifecycled failed ({status})"))
    }
}

fn serve(options: ServeOptions) -> ExitCode {
    match serve_until_stopped(options) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("node-lifecycled-sim serve: {e}");
            ExitCode::from(EXIT_ERROR)
        }
    }
}

fn serve_until_stopped(options: ServeOptions) -> Result<(), String> {
    let stop = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(signal, stop.clone())
            .map_err(|e| format!("cannot handle signal {signal}: {e}"))?;
    }
    let token = format!("node-lifecycled-{:08x}", std::process::id());
    let sim = SimServer::start(SimConfig {
        listen: options.listen,
        tokens: Some(vec![token.clone()]),
        bookmark_interval: Duration::from_secs(10),
        ..SimConfig::default()
    })
    .map_err(|e| format!("cannot listen on {}: {e}", options.listen))?;
    let cluster = sim.cluster();
    let started = Instant::now();
    let populated = options
        .population
        .populate(&cluster)
        .map_err(|e| format!("cannot populate the cluster: {}", e.message))?;
    let kubelets = Kubelets::start(
        cluster.clone(),
        KubeletConfig {
            renew_interval: options.renew_interval,
            ..KubeletConfig::default()
        },
    )
    .map_err(|e| format!("cannot start the kubelets: {e}"))?;
    for node in &populated.nodes {
        kubelets.add_node(node);
    }
    let dir = options
        .dir
        .unwrap_or_else(|| std::env::temp_dir().join("node-lifecycled-sim"));
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let kubeconfig = dir.join("kubeconfig");
    std::fs::write(&kubeconfig, scenario::kubeconfig_yaml(sim.url(), &token))
        .map_err(|e| format!("cannot write {}: {e}", kubeconfig.display()))?;
    let config = dir.join("config.toml");
    std::fs::write(
        &config,
        format!(
            "# node-lifecycled against node-lifecycled-sim serve; every other key: upstream default\n\
             [api]\nkubeconfig = \"{}\"\n",
            kubeconfig.display()
        ),
    )
    .map_err(|e| format!("cannot write {}: {e}", config.display()))?;
    println!(
        "simulated cluster: {} nodes in {} zones, {} pods, populated in {:.1}s\n\
         API server  {}\n\
         kubeconfig  {}   (bearer token {token})\n\
         daemon      node-lifecycled --config {}\n\
         kubelets renew their Lease every {}; Ctrl-C stops.\n",
        populated.nodes.len(),
        options.population.zone_count(),
        populated.pods.len(),
        started.elapsed().as_secs_f64(),
        sim.url(),
        kubeconfig.display(),
        config.display(),
        node_lifecycled::config::format_duration(options.renew_interval),
    );
    let mut reader = FactReader::new(None, cluster.elapsed());
    let mut timeline = Timeline::default();
    let mut last_stats = Instant::now();
    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(200));
        let now = cluster.elapsed();
        let mut lines = Vec::new();
        for fact in reader.read(&sim.writes()) {
            lines.extend(timeline.push(&fact));
        }
        lines.extend(timeline.flush(now));
        for line in lines {
            println!("{line}");
        }
        if last_stats.elapsed() >= Duration::from_secs(60) {
            last_stats = Instant::now();
            let s = kubelets.stats();
            println!(
                "kubelets: {} of {} alive, {} lease renewals, {} status posts, {} pods finalized",
                s.alive, s.nodes, s.lease_renewals, s.status_posts, s.pods_finalized
            );
        }
    }
    for line in timeline.finish() {
        println!("{line}");
    }
    println!("stopping");
    kubelets.shutdown();
    sim.shutdown();
    Ok(())
}

#[cfg(test)]
mod tests {
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
    fn bad_arguments_are_usage_errors() {
        assert!(parse(&["run", "--nodes", "3"]).is_err());
        assert!(parse(&["serve", "--nodes", "many"]).is_err());
        assert!(parse(&["serve", "--listen", "nowhere"]).is_err());
        assert!(parse(&["run", "--scenario"]).is_err());
        assert!(parse(&["run", "--scenario", "a", "--scenario", "b"]).is_err());
        assert!(parse(&["check"]).is_err());
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
        assert!(parse(&["bench", "--nodes", "10", "--sizes", "small"]).is_err());
        assert!(parse(&["bench", "--zones", "2"]).is_err());
        assert!(parse(&["bench", "--qps", "-1"]).is_err());
    }
}
