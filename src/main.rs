//! Command line, wiring and exit codes. Everything else lives in the library.

use std::ffi::{OsStr, OsString};
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use node_lifecycled::config::{Config, DEFAULT_CONFIG_PATH};
use node_lifecycled::doctor::{self, HostFiles, Output};
use node_lifecycled::runtime::api::ConnectionCheck;
use node_lifecycled::runtime::daemon::DaemonError;
use node_lifecycled::{logging, runtime};

/// sysexits(3) codes, so systemd's `RestartPreventExitStatus=64 78` can tell "fix the
/// invocation or the file" from a crash worth restarting.
const EXIT_RUNTIME: u8 = 1;
const EX_USAGE: u8 = 64;
const EX_UNAVAILABLE: u8 = 69;
const EX_NOPERM: u8 = 77;
const EX_CONFIG: u8 = 78;
/// How long `status` / `explain` wait for the daemon's answer.
const ASK_TIMEOUT: Duration = Duration::from_secs(5);

const USAGE: &str = "\
node-lifecycled: Kubernetes' node lifecycle and NoExecute taint eviction controllers as one daemon

usage:
  node-lifecycled [run] [--config PATH]       run the daemon
  node-lifecycled check-config [--config PATH]
                                              print the effective configuration and exit
  node-lifecycled doctor [--config PATH] [--output text|json] [--kubeconfig PATH]
                         [--kcm-manifest PATH] [--k3s-config PATH] [--rke2-config PATH]
                         [--k0s-config PATH] [--microk8s-args PATH] [--fence-sample N]
                                              check a host and cluster before and after the
                                              switch from kube-controller-manager: one line per
                                              check (ok / warn / fail, and what to do)
  node-lifecycled status [--config PATH] [--socket PATH]
                                              ask the running daemon: leader, sync, watches,
                                              zones, queued taints, pending evictions, API use
  node-lifecycled explain NODE|NAMESPACE/POD [--config PATH] [--socket PATH]
                                              ask the running daemon why a node or pod is as it
                                              is, its recent decisions and what happens next
  node-lifecycled shadow report [--since DURATION] [--format text|json|markdown]
                         [--config PATH] [--socket PATH]
                                              ask the daemon in shadow mode how its decisions
                                              compared with kube-controller-manager's writes
  node-lifecycled pause fencing|tainting|all --for DURATION --reason TEXT [--config PATH]
                                              pause the whole fleet's fences, new NoExecute
                                              taints and taint evictions, or both, for planned
                                              work: written on the leader Lease, honoured by
                                              every instance and the next leader; ends by itself
  node-lifecycled resume [fencing|tainting|all] [--config PATH]
                                              end the pause (or the part named; default all)
  node-lifecycled --version | --help

options:
  --config PATH   configuration file (default /etc/node-lifecycled/config.toml)

status / explain / shadow report options:
  --socket PATH        the daemon's control socket (default: control_socket from the
                       configuration, /run/node-lifecycled/control.sock)

doctor options:
  --output FORMAT      text (default) or json
  --kubeconfig PATH    use this kubeconfig instead of the configuration's [api]
  --kcm-manifest PATH  kubeadm's kube-controller-manager static pod
                       (default /etc/kubernetes/manifests/kube-controller-manager.yaml)
  --k3s-config PATH    default /etc/rancher/k3s/config.yaml
  --rke2-config PATH   default /etc/rancher/rke2/config.yaml
  --k0s-config PATH    default /etc/k0s/k0s.yaml
  --microk8s-args PATH default /var/snap/microk8s/current/args/kube-controller-manager
                       (a file that is not the kind its option names: exit 78)
  --fence-sample N     run [fencing] status_command against up to N nodes fencing would
                       select and report each answer (a failure fails the doctor)

signals:
  SIGTERM, SIGINT  finish the action in hand and exit 0
  SIGHUP           re-read the configuration file
  SIGUSR1          log a state dump

exit codes:
  0   success (doctor: no check failed)
  1   runtime failure (doctor: a check failed)
  64  usage error (unknown argument)
  78  configuration error (the message names the file, line and key), including a
      kubeconfig, certificate, key or token file that cannot be read or parsed, and
      for doctor a host file that is not the kind its option names
  pause / resume: 0 written, 64 --for 0, 69 the API server did not answer or refused,
      77 forbidden (RBAC), 78 configuration error (--for longer than fencing.max_pause;
      leader_election.enabled = false: the pause lives on the leader Lease)
  status / explain / shadow report: 0 answered, 1 the daemon refused (unknown node or pod), 69 no daemon
      answers on the socket, 77 permission denied on the socket (run as root)

environment:
  RUST_LOG        log filter; overrides log_level from the configuration
  JOURNAL_STREAM  set by systemd: when it names stderr, lines go to the journal's native
                  socket with NODE=, POD=, ZONE=, DECISION= fields (log_format = \"text\")
  NODE_LIFECYCLED_JOURNAL_SOCKET
                  send journal entries to this datagram socket instead (tests, or a
                  journald listening elsewhere)
  NOTIFY_SOCKET, WATCHDOG_USEC
                  set by systemd (Type=notify, WatchdogSec=)
";

#[derive(Debug, PartialEq, Eq)]
enum Command {
    Run {
        config: PathBuf,
    },
    CheckConfig {
        config: PathBuf,
    },
    Doctor(doctor::Options),
    /// `doctor --fence-sample N`: the doctor, then the status command against N nodes.
    DoctorFenceSample(doctor::Options, usize),
    /// `status` or `explain …`: one request to the running daemon's control socket.
    Ask {
        config: PathBuf,
        socket: Option<PathBuf>,
        request: String,
    },
    /// `pause WHAT --for D --reason R`.
    Pause {
        options: doctor::Options,
        what: node_lifecycled::leader::pause::PauseScope,
        duration: Duration,
        reason: String,
    },
    /// `resume [WHAT]`.
    Resume {
        options: doctor::Options,
        what: node_lifecycled::leader::pause::PauseScope,
    },
    Version,
    Help,
}

/// `0.1.0 (commit 1a2b3c4)`: the commit from build.rs, "unknown" outside a git checkout.
fn version() -> String {
    format!(
        "{} (commit {})",
        env!("CARGO_PKG_VERSION"),
        env!("NODE_LIFECYCLED_GIT_COMMIT")
    )
}

/// A word the daemon never took as an option, named as its error: lexopt would split `-hV`,
/// take `--socket=PATH` and end the options at `--`; the command line keeps to the separate
/// words its usage shows (and `--config=PATH`).
fn refused_form(word: &OsStr) -> Option<String> {
    let Some(text) = word.to_str() else {
        return Some(format!("unknown argument {word:?}"));
    };
    let refused = text == "--"
        || (text.starts_with("--") && text.contains('=') && !text.starts_with("--config="))
        || (!text.starts_with("--") && text.starts_with('-') && text.len() > 2);
    refused.then(|| format!("unknown argument {text:?}"))
}

/// The command line, split by lexopt (the workspace's command-line parser: the simulator's
/// uses it too). An option's value is the next word, whatever it looks like.
fn parse_args(args: impl IntoIterator<Item = OsString>) -> Result<Command, String> {
    use lexopt::Arg;
    let mut parser = lexopt::Parser::from_args(args);
    let mut subcommand: Option<String> = None;
    let mut config: Option<PathBuf> = None;
    let mut output: Option<Output> = None;
    let mut kubeconfig: Option<PathBuf> = None;
    let mut host = HostFiles::default();
    let mut doctor_flags: Vec<&'static str> = Vec::new();
    let mut socket: Option<PathBuf> = None;
    let mut subject: Option<String> = None;
    let mut pause_for: Option<Duration> = None;
    let mut fence_sample: Option<usize> = None;
    let mut reason: Option<String> = None;
    let mut shadow_options: Vec<(String, String)> = Vec::new();
    loop {
        if let Some(why) = parser
            .try_raw_args()
            .and_then(|words| words.peek().and_then(refused_form))
        {
            return Err(why);
        }
        let Some(arg) = parser.next().map_err(|e| e.to_string())? else {
            break;
        };
        let text = match arg {
            Arg::Long("help") | Arg::Short('h') => return Ok(Command::Help),
            Arg::Long("version") | Arg::Short('V') => return Ok(Command::Version),
            Arg::Long("config") | Arg::Short('c') => {
                let path = match parser.optional_value() {
                    // `--config=PATH`
                    Some(path) if path.is_empty() => return Err("--config needs a PATH".into()),
                    Some(path) => path,
                    None => parser.value().map_err(|_| "--config needs a PATH")?,
                };
                if config.replace(PathBuf::from(path)).is_some() {
                    return Err("--config given twice".to_string());
                }
                continue;
            }
            Arg::Long(name) => format!("--{name}"),
            Arg::Short(c) => format!("-{c}"),
            Arg::Value(word) => word
                .into_string()
                .map_err(|word| format!("unknown argument {word:?}"))?,
        };
        match text.as_str() {
            "run" | "check-config" | "doctor" | "status" | "explain" | "pause" | "resume"
            | "shadow"
                if subcommand.is_none() && config.is_none() =>
            {
                subcommand = Some(text);
            }
            "--socket" => {
                let path = parser.value().map_err(|_| "--socket needs a PATH")?;
                if socket.replace(PathBuf::from(path)).is_some() {
                    return Err("--socket given twice".to_string());
                }
            }
            "--fence-sample" if subcommand.as_deref() == Some("doctor") => {
                let value = parser
                    .value()
                    .map_err(|_| "--fence-sample needs a number N")?;
                let n = value
                    .to_str()
                    .and_then(|v| v.parse::<usize>().ok())
                    .filter(|n| *n > 0)
                    .ok_or(format!("--fence-sample: {value:?} is not a number above 0"))?;
                if fence_sample.replace(n).is_some() {
                    return Err("--fence-sample given twice".to_string());
                }
            }
            "--for" if subcommand.as_deref() == Some("pause") => {
                let value = parser.value().map_err(|_| "--for needs a DURATION")?;
                let value = value.to_str().ok_or("--for: not a duration")?;
                let d = node_lifecycled::time::parse_duration(value)
                    .map_err(|e| format!("--for {value:?}: {e}"))?;
                if pause_for.replace(d).is_some() {
                    return Err("--for given twice".to_string());
                }
            }
            "--reason" if subcommand.as_deref() == Some("pause") => {
                let value = parser.value().map_err(|_| "--reason needs a TEXT")?;
                let value = value.to_str().ok_or("--reason: not UTF-8")?;
                if reason.replace(value.to_string()).is_some() {
                    return Err("--reason given twice".to_string());
                }
            }
            "--since" | "--format" if subcommand.as_deref() == Some("shadow") => {
                let value = parser
                    .value()
                    .map_err(|_| format!("{text} needs a value"))?;
                shadow_options.push((text, value.to_string_lossy().into_owned()));
            }
            _ if matches!(
                subcommand.as_deref(),
                Some("explain" | "pause" | "resume" | "shadow")
            ) && subject.is_none()
                && !text.starts_with('-') =>
            {
                subject = Some(text);
            }
            "--output" | "--kubeconfig" | "--kcm-manifest" | "--k3s-config" | "--rke2-config"
            | "--k0s-config" | "--microk8s-args" => {
                let flag: &'static str = match text.as_str() {
                    "--output" => "--output",
                    "--kubeconfig" => "--kubeconfig",
                    "--kcm-manifest" => "--kcm-manifest",
                    "--k3s-config" => "--k3s-config",
                    "--rke2-config" => "--rke2-config",
                    "--k0s-config" => "--k0s-config",
                    _ => "--microk8s-args",
                };
                if doctor_flags.contains(&flag) {
                    return Err(format!("{flag} given twice"));
                }
                doctor_flags.push(flag);
                let value = parser
                    .value()
                    .map_err(|_| format!("{flag} needs a value"))?;
                match flag {
                    "--output" => {
                        output = Some(match value.to_str() {
                            Some("text") => Output::Text,
                            Some("json") => Output::Json,
                            _ => return Err(format!("--output: text or json, not {value:?}")),
                        })
                    }
                    "--kubeconfig" => kubeconfig = Some(PathBuf::from(value)),
                    "--kcm-manifest" => host.kubeadm_manifest = PathBuf::from(value),
                    "--k3s-config" => host.k3s_config = PathBuf::from(value),
                    "--rke2-config" => host.rke2_config = PathBuf::from(value),
                    "--k0s-config" => host.k0s_config = PathBuf::from(value),
                    _ => host.microk8s_args = PathBuf::from(value),
                }
            }
            _ => return Err(format!("unknown argument {text:?}")),
        }
    }
    let config = config.unwrap_or_else(|| PathBuf::from(DEFAULT_CONFIG_PATH));
    if subcommand.as_deref() != Some("doctor") {
        if let Some(flag) = doctor_flags.first() {
            return Err(format!("{flag} is a doctor option"));
        }
    }
    let asks = matches!(subcommand.as_deref(), Some("status" | "explain" | "shadow"));
    if socket.is_some() && !asks {
        return Err("--socket is a status / explain option".to_string());
    }
    Ok(match subcommand.as_deref() {
        Some("status") => Command::Ask {
            config,
            socket,
            request: "status".to_string(),
        },
        Some("explain") => Command::Ask {
            config,
            socket,
            request: format!(
                "explain {}",
                subject.ok_or("explain needs a NODE or NAMESPACE/POD")?
            ),
        },
        Some("shadow") => Command::Ask {
            config,
            socket,
            request: shadow_args::request(subject.as_deref(), &shadow_options)?,
        },
        Some(verb @ ("pause" | "resume")) => {
            use node_lifecycled::leader::pause::PauseScope;
            let what = match subject.as_deref() {
                None if verb == "resume" => PauseScope::All,
                None => return Err("pause needs fencing, tainting or all".to_string()),
                Some(w) => PauseScope::parse(w)
                    .ok_or(format!("{verb}: {w:?} is not fencing, tainting or all"))?,
            };
            let options = doctor::Options {
                config,
                kubeconfig: None,
                output: Output::Text,
                host: HostFiles::default(),
            };
            if verb == "resume" {
                Command::Resume { options, what }
            } else {
                Command::Pause {
                    options,
                    what,
                    duration: pause_for.ok_or("pause needs --for DURATION")?,
                    reason: reason.ok_or("pause needs --reason TEXT")?,
                }
            }
        }
        Some("check-config") => Command::CheckConfig { config },
        Some("doctor") => {
            let options = doctor::Options {
                config,
                kubeconfig,
                output: output.unwrap_or(Output::Text),
                host,
            };
            match fence_sample {
                Some(n) => Command::DoctorFenceSample(options, n),
                None => Command::Doctor(options),
            }
        }
        _ => Command::Run { config },
    })
}

/// `doctor` (with `--fence-sample N`: and the status command against N nodes).
fn doctor_command(options: &doctor::Options, fence_sample: Option<usize>) -> ExitCode {
    let config = match Config::load(&options.config) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(EX_CONFIG);
        }
    };
    let report = match doctor::run_sampled(options, &config, fence_sample) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(EX_CONFIG);
        }
    };
    match options.output {
        Output::Text => print!("{}", report.to_text()),
        Output::Json => println!("{}", report.to_json()),
    }
    if report.worst() == doctor::Level::Fail {
        ExitCode::from(EXIT_RUNTIME)
    } else {
        ExitCode::SUCCESS
    }
}

/// Loads the configuration, runs `act`, prints its line or its one-line error with its exit code.
fn pause_or_resume(
    options: &doctor::Options,
    act: impl FnOnce(&Config) -> Result<String, doctor::pause::PauseFailure>,
) -> ExitCode {
    use doctor::pause::PauseFailure;
    let config = match Config::load(&options.config) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(EX_CONFIG);
        }
    };
    match act(&config) {
        Ok(line) => {
            println!("{line}");
            ExitCode::SUCCESS
        }
        Err(failure) => {
            let (code, line) = match failure {
                PauseFailure::Usage(l) => (EX_USAGE, l),
                PauseFailure::Config(l) => (EX_CONFIG, l),
                PauseFailure::Api(l) => (EX_UNAVAILABLE, l),
                PauseFailure::Forbidden(l) => (EX_NOPERM, l),
            };
            eprintln!("node-lifecycled: {line}");
            ExitCode::from(code)
        }
    }
}

fn main() -> ExitCode {
    let command = match parse_args(std::env::args_os().skip(1)) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("node-lifecycled: {e}\nTry 'node-lifecycled --help'.");
            return ExitCode::from(EX_USAGE);
        }
    };
    match command {
        Command::Help => {
            print!("{USAGE}");
            ExitCode::SUCCESS
        }
        Command::Version => {
            println!("node-lifecycled {}", version());
            ExitCode::SUCCESS
        }
        Command::CheckConfig { config } => match Config::load(&config) {
            Ok(c) => {
                // The connection's files are part of the configuration: read and parse them.
                let note = match runtime::api::check(&c.api, &config) {
                    Ok(ConnectionCheck::Valid) => None,
                    Ok(ConnectionCheck::NotCheckable(why)) => Some(why),
                    Err(e) => {
                        eprintln!("{e}");
                        return ExitCode::from(EX_CONFIG);
                    }
                };
                let mut text = format!(
                    "# node-lifecycled {}: effective configuration from {}\n{}",
                    env!("CARGO_PKG_VERSION"),
                    config.display(),
                    c.to_toml()
                );
                if !text.ends_with('\n') {
                    text.push('\n');
                }
                // Whole lines, flushed before the note: the two streams never share a line.
                let mut stdout = std::io::stdout().lock();
                let _ = stdout
                    .write_all(text.as_bytes())
                    .and_then(|()| stdout.flush());
                if let Some(why) = note {
                    eprintln!("note: {why}");
                }
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("{e}");
                ExitCode::from(EX_CONFIG)
            }
        },
        Command::Doctor(options) => doctor_command(&options, None),
        Command::DoctorFenceSample(options, n) => doctor_command(&options, Some(n)),
        Command::Ask {
            config,
            socket,
            request,
        } => ask(&config, socket, &request),
        Command::Pause {
            options,
            what,
            duration,
            reason,
        } => pause_or_resume(&options, |config| {
            let now = runtime::Clock::start().now();
            doctor::pause::pause(&options, config, what, duration, &reason, now)
        }),
        Command::Resume { options, what } => pause_or_resume(&options, |config| {
            doctor::pause::resume(&options, config, what)
        }),
        Command::Run { config: path } => {
            // The file is judged before anything else happens, network included.
            let config = match Config::load(&path) {
                Ok(c) => c,
                Err(e) => {
                    logging::early_error(&e.to_string());
                    return ExitCode::from(EX_CONFIG);
                }
            };
            let log = logging::init(config.log_level, config.log_format);
            match runtime::daemon::run(path, config, log) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e @ DaemonError::Config(_)) => {
                    log::error!("{e}");
                    ExitCode::from(EX_CONFIG)
                }
                Err(e) => {
                    log::error!("{e}");
                    ExitCode::from(EXIT_RUNTIME)
                }
            }
        }
    }
}

/// `status` / `explain`: the socket from `--socket`, else the configuration (the default
/// path when the file is absent), then one request.
fn ask(config: &std::path::Path, socket: Option<PathBuf>, request: &str) -> ExitCode {
    let socket = match socket {
        Some(s) => s,
        None if !config.exists() => PathBuf::from(node_lifecycled::config::DEFAULT_CONTROL_SOCKET),
        None => match Config::load(config) {
            Ok(c) => match c.control_socket {
                Some(s) => s,
                None => {
                    eprintln!(
                        "node-lifecycled: {}: control_socket is \"\" (off); use --socket PATH",
                        config.display()
                    );
                    return ExitCode::from(EX_CONFIG);
                }
            },
            Err(e) => {
                eprintln!("{e}");
                return ExitCode::from(EX_CONFIG);
            }
        },
    };
    match node_lifecycled::runtime::control_socket::ask(&socket, request, ASK_TIMEOUT) {
        Ok(answer) => {
            let refused = answer.starts_with("error:");
            if refused {
                eprint!("{answer}");
                ExitCode::from(EXIT_RUNTIME)
            } else {
                print!("{answer}");
                ExitCode::SUCCESS
            }
        }
        Err(e) => {
            eprintln!("node-lifecycled: control socket {}: {e}", socket.display());
            match e.kind() {
                std::io::ErrorKind::PermissionDenied => ExitCode::from(EX_NOPERM),
                _ => ExitCode::from(EX_UNAVAILABLE),
            }
        }
    }
}

#[path = "main/shadow_args.rs"]
mod shadow_args;

#[cfg(test)]
#[path = "main/tests.rs"]
mod tests;
