//! Long fuzz runs of the parsers (the short fixed-seed pass runs in `cargo test`, from
//! `tests/randomized/fuzz_parsers.rs`). See FUZZING.md.
//!
//! ```sh
//! cargo run --release --example fuzz -- --target chunked --seconds 600 --seed 1
//! cargo run --release --example fuzz -- --target all --seconds 60
//! cargo run --release --example fuzz -- --target lines --replay fuzz-findings/lines-seed1-77.bin
//! ```
//!
//! The run is supervised: a worker process fuzzes and reports a checkpoint every 256 inputs; if
//! it dies without unwinding (an abort, a stack overflow, a refused huge allocation), the
//! supervisor replays from the last checkpoint with every input written to disk first, saves
//! the input that killed it, and carries on after it. Panics and broken properties are caught
//! in the worker and saved directly. Findings go to `--findings DIR` (default `fuzz-findings`).

#[path = "../tests/fuzz_support/mod.rs"]
mod fuzz_support;

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use fuzz_support::engine::{self, Budget, CountingAlloc};
use fuzz_support::targets;

#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc::refusing_above(engine::ALLOC_REFUSE);

struct Args {
    target: String,
    seconds: f64,
    seed: u64,
    findings: PathBuf,
    worker: bool,
    start: u64,
    trace: Option<PathBuf>,
    replay: Option<PathBuf>,
}

const USAGE: &str = "usage: fuzz --target NAME|all [--seconds N] [--seed N] [--findings DIR] \
                     [--replay FILE]\ntargets: ";

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        target: String::new(),
        seconds: 60.0,
        seed: 1,
        findings: PathBuf::from("fuzz-findings"),
        worker: false,
        start: 0,
        trace: None,
        replay: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--target" => args.target = value()?,
            "--seconds" => {
                args.seconds = value()?.parse().map_err(|e| format!("--seconds: {e}"))?;
            }
            "--seed" => args.seed = value()?.parse().map_err(|e| format!("--seed: {e}"))?,
            "--findings" => args.findings = PathBuf::from(value()?),
            "--replay" => args.replay = Some(PathBuf::from(value()?)),
            "--worker" => args.worker = true,
            "--start" => args.start = value()?.parse().map_err(|e| format!("--start: {e}"))?,
            "--trace" => args.trace = Some(PathBuf::from(value()?)),
            "-h" | "--help" => return Err(String::new()),
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    if args.target.is_empty() {
        return Err("--target is required".to_string());
    }
    Ok(args)
}

fn main() -> ExitCode {
    let names: Vec<&str> = targets::all().iter().map(|t| t.name).collect();
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            if !e.is_empty() {
                eprintln!("fuzz: {e}");
            }
            eprintln!("{USAGE}{}", names.join(", "));
            return ExitCode::from(64);
        }
    };
    if let Some(file) = &args.replay {
        return replay(&args.target, file);
    }
    if args.worker {
        return worker(&args);
    }
    let chosen: Vec<String> = if args.target == "all" {
        names.iter().map(|n| n.to_string()).collect()
    } else if names.contains(&args.target.as_str()) {
        vec![args.target.clone()]
    } else {
        eprintln!(
            "fuzz: no target {:?}; targets: {}",
            args.target,
            names.join(", ")
        );
        return ExitCode::from(64);
    };
    let mut any = false;
    for name in chosen {
        match supervise(&args, &name) {
            Ok(found) => any |= found,
            Err(e) => {
                eprintln!("fuzz: {name}: {e}");
                return ExitCode::FAILURE;
            }
        }
    }
    if any {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

/// Runs one saved input and prints what it does.
fn replay(target: &str, file: &Path) -> ExitCode {
    let Some(t) = targets::by_name(target) else {
        eprintln!("fuzz: no target {target:?}");
        return ExitCode::from(64);
    };
    let input = match std::fs::read(file) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("fuzz: {}: {e}", file.display());
            return ExitCode::from(64);
        }
    };
    match t.execute(&input) {
        Ok(()) => {
            println!("{target}: {} ({} bytes): ok", file.display(), input.len());
            ExitCode::SUCCESS
        }
        Err(v) => {
            println!("{target}: {} ({} bytes): {v}", file.display(), input.len());
            ExitCode::FAILURE
        }
    }
}

/// The worker: fuzzes, printing `checkpoint I` lines and a final `done` line.
fn worker(args: &Args) -> ExitCode {
    let Some(target) = targets::by_name(&args.target) else {
        return ExitCode::from(64);
    };
    let stdout = std::io::stdout();
    let mut progress = |index: u64| {
        let mut out = stdout.lock();
        let _ = writeln!(out, "checkpoint {index}");
        let _ = out.flush();
    };
    let trace = args.trace.clone();
    let mut before = |index: u64, input: &[u8]| {
        if let Some(path) = &trace {
            let _ = std::fs::write(path, input);
            let _ = std::fs::write(path.with_extension("index"), index.to_string());
        }
    };
    let stats = engine::fuzz(
        &target,
        args.seed,
        args.start,
        Budget {
            max_executions: u64::MAX,
            max_time: Duration::from_secs_f64(args.seconds),
            max_findings: 100,
        },
        Some(&args.findings),
        &mut progress,
        &mut before,
    );
    targets::remove_scratch();
    for f in &stats.findings {
        eprintln!(
            "FINDING {} input {}: {} (saved: {})",
            f.target,
            f.index,
            f.violation,
            f.saved
                .as_ref()
                .map(|p| p.display().to_string())
                .unwrap_or_else(|| "no".to_string())
        );
    }
    println!(
        "done executions={} seconds={:.3} findings={}",
        stats.executions,
        stats.elapsed.as_secs_f64(),
        stats.findings.len()
    );
    ExitCode::SUCCESS
}

struct WorkerRun {
    executions: u64,
    findings: u64,
    /// The last checkpoint, when the worker died instead of finishing.
    died_after: Option<u64>,
}

fn spawn_worker(
    args: &Args,
    target: &str,
    start: u64,
    seconds: f64,
    trace: Option<&Path>,
) -> Result<WorkerRun, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let mut cmd = Command::new(exe);
    cmd.args(["--worker", "--target", target])
        .args(["--seed", &args.seed.to_string()])
        .args(["--start", &start.to_string()])
        .args(["--seconds", &format!("{seconds:.3}")])
        .arg("--findings")
        .arg(&args.findings)
        .stdout(Stdio::piped());
    if let Some(t) = trace {
        cmd.arg("--trace").arg(t);
    }
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("cannot start the worker: {e}"))?;
    let stdout = child.stdout.take().ok_or("no worker stdout")?;
    let mut last = start;
    let mut done = None;
    for line in BufReader::new(stdout).lines() {
        let line = line.map_err(|e| e.to_string())?;
        if let Some(i) = line.strip_prefix("checkpoint ") {
            last = i.parse().unwrap_or(last);
        } else if let Some(rest) = line.strip_prefix("done ") {
            let field = |name: &str| {
                rest.split(' ')
                    .find_map(|kv| kv.strip_prefix(name))
                    .and_then(|v| v.parse::<u64>().ok())
                    .unwrap_or(0)
            };
            done = Some((field("executions="), field("findings=")));
        }
    }
    let status = child.wait().map_err(|e| e.to_string())?;
    match done {
        Some((executions, findings)) if status.success() => Ok(WorkerRun {
            executions,
            findings,
            died_after: None,
        }),
        _ => Ok(WorkerRun {
            executions: last - start,
            findings: 0,
            died_after: Some(last),
        }),
    }
}

/// Fuzzes `target` for `--seconds`, replaying and saving any input that kills the worker.
fn supervise(args: &Args, target: &str) -> Result<bool, String> {
    let began = Instant::now();
    let mut start = args.start;
    let mut executions = 0;
    let mut findings = 0;
    loop {
        let left = args.seconds - began.elapsed().as_secs_f64();
        if left <= 0.0 {
            break;
        }
        let run = spawn_worker(args, target, start, left, None)?;
        executions += run.executions;
        findings += run.findings;
        let Some(checkpoint) = run.died_after else {
            break;
        };
        // Replay from the checkpoint writing every input first: the last one written is it.
        std::fs::create_dir_all(&args.findings).map_err(|e| e.to_string())?;
        let trace = args.findings.join(format!("{target}.current"));
        let replayed = spawn_worker(args, target, checkpoint, 120.0, Some(&trace))?;
        let index: u64 = std::fs::read_to_string(trace.with_extension("index"))
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(checkpoint);
        if replayed.died_after.is_none() {
            return Err(format!(
                "the worker died after checkpoint {checkpoint} but the replay did not \
                 (not deterministic?)"
            ));
        }
        let saved = args
            .findings
            .join(format!("{target}-seed{}-{index}.bin", args.seed));
        std::fs::rename(&trace, &saved).map_err(|e| e.to_string())?;
        std::fs::write(
            saved.with_extension("txt"),
            "the process died (abort, stack overflow or refused allocation)\n",
        )
        .map_err(|e| e.to_string())?;
        eprintln!(
            "FINDING {target} input {index}: the process died (saved: {})",
            saved.display()
        );
        findings += 1;
        executions += index - checkpoint + 1;
        start = index + 1;
    }
    let secs = began.elapsed().as_secs_f64();
    println!(
        "{target}: {executions} executions in {secs:.1} s ({:.0}/s), seed {}, {findings} findings",
        executions as f64 / secs.max(1e-9),
        args.seed
    );
    Ok(findings > 0)
}
