//! node-lifecycled-sim: a simulated Kubernetes cluster (API server + kubelets) for trying,
//! demonstrating and testing node-lifecycled without a real cluster.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use node_lifecycled_sim::bench::floor_reader::{FloorEndpoint, read_watches};
use node_lifecycled_sim::bench::{self, BenchOptions};
use node_lifecycled_sim::kubelets::{KubeletConfig, Kubelets};
use node_lifecycled_sim::scenario::{self, BUILTIN, RunOptions, Scenario};
use node_lifecycled_sim::soak;
use node_lifecycled_sim::timeline::{FactReader, Timeline};
use node_lifecycled_sim::{SimConfig, SimServer};

mod cli;

use cli::{
    BenchArgs, Command, EX_USAGE, EXIT_ERROR, EXIT_FAILED, FloorReaderArgs, ServeOptions, SoakArgs,
    USAGE,
};

fn main() -> ExitCode {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn")).init();
    let command = match cli::parse_args(std::env::args_os().skip(1)) {
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
        Command::FloorReader(args) => floor_reader(args),
    }
}

/// `floor-reader`: the bare reader's figures as one JSON line on stdout.
fn floor_reader(args: FloorReaderArgs) -> ExitCode {
    let figures = FloorEndpoint::from_kubeconfig(&args.kubeconfig).and_then(|endpoint| {
        read_watches(
            &endpoint,
            &args.watches,
            args.grid,
            args.warmup,
            args.duration,
        )
    });
    match figures {
        Ok(f) => {
            println!(
                "{}",
                serde_json::json!({
                    "window_s": f.window.as_secs_f64(),
                    "events": f.events,
                    "objects": f.objects,
                    "reads": f.reads,
                    "wakeups": f.wakeups,
                    "cpu_s": f.cpu.as_secs_f64(),
                    "us_per_event": f.us_per_event(),
                    "events_per_s": f.events_per_s(),
                    "wakeups_per_s": f.wakeups_per_s(),
                })
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("node-lifecycled-sim floor-reader: {e}");
            ExitCode::from(EXIT_ERROR)
        }
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
    options.profile = args.profile;
    options.work_dir = args.dir;
    if let Some(window) = args.mass_failure {
        options.mass_failure = true;
        options.mass_failure_window = window;
    }
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
                let _ = writeln!(out, "fitted growth:\n{}", bench::growth(&reports));
            }
            if let Some(path) = &args.csv {
                if let Err(e) = std::fs::write(path, bench::csv(&reports)) {
                    eprintln!(
                        "node-lifecycled-sim bench: cannot write {}: {e}",
                        path.display()
                    );
                    return ExitCode::from(EXIT_ERROR);
                }
                let _ = writeln!(out, "figures as CSV: {}", path.display());
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
    options.dir = args.dir;
    options.brake = args.brake;
    options.pools = args.pools;
    options.partitions = args.partitions;
    options.fencing = args.fencing;
    options.shadow = args.shadow;
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
