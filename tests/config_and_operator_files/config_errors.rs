//! The real binary judges config files: every mistake is one line naming file, line and key,
//! with exit code 78 (EX_CONFIG), from `check-config` and from the daemon itself.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_node-lifecycled");

/// A config file in the temp dir, removed when dropped.
struct TempConfig(PathBuf);

impl TempConfig {
    fn new(name: &str, text: &str) -> TempConfig {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos();
        let path = std::env::temp_dir().join(format!(
            "nlc-config-{name}-{}-{nanos}.toml",
            std::process::id()
        ));
        std::fs::write(&path, text).unwrap();
        TempConfig(path)
    }

    fn path(&self) -> &Path {
        &self.0
    }

    fn display(&self) -> String {
        self.0.display().to_string()
    }
}

impl Drop for TempConfig {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn node_lifecycled(args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .env_remove("RUST_LOG")
        .env_remove("JOURNAL_STREAM")
        .env_remove("NOTIFY_SOCKET")
        .output()
        .unwrap()
}

fn check_config(path: &Path) -> Output {
    node_lifecycled(&["check-config", "--config", path.to_str().unwrap()])
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Asserts exit 78 and exactly one line `<path>:<line>: <key>: ...`; returns the line.
fn assert_config_error(out: &Output, path: &str, line: usize, key: &str) -> String {
    let err = stderr(out);
    assert_eq!(out.status.code(), Some(78), "stderr: {err}");
    assert_eq!(err.lines().count(), 1, "not one line: {err}");
    let want = format!("{path}:{line}: {key}: ");
    assert!(err.contains(&want), "{err:?} lacks {want:?}");
    err.trim_end().to_string()
}

#[test]
fn unknown_key_exits_78_naming_key_and_line() {
    let cfg = TempConfig::new("unknown", "dry_run = false\nnode_monitor_perod = \"5s\"\n");
    let out = check_config(cfg.path());
    let line = assert_config_error(&out, &cfg.display(), 2, "node_monitor_perod");
    assert!(line.ends_with("unknown key"), "{line}");
}

#[test]
fn negative_rate_exits_78_naming_key_and_line() {
    let cfg = TempConfig::new("negative", "# rates\n\nnode_eviction_rate = -0.5\n");
    let line = assert_config_error(
        &check_config(cfg.path()),
        &cfg.display(),
        3,
        "node_eviction_rate",
    );
    assert!(
        line.ends_with("must be a finite number >= 0, got -0.5"),
        "{line}"
    );
}

#[test]
fn zone_threshold_above_one_exits_78_naming_key_and_line() {
    let cfg = TempConfig::new("threshold", "unhealthy_zone_threshold = 1.5\n");
    let line = assert_config_error(
        &check_config(cfg.path()),
        &cfg.display(),
        1,
        "unhealthy_zone_threshold",
    );
    assert!(line.ends_with("must be in (0, 1], got 1.5"), "{line}");
}

/// A monitor period at or above the grace would make every healthy node a suspect (nothing
/// ever tainted or fenced): the binary refuses it, exit 78, one line naming both keys.
#[test]
fn a_monitor_period_not_well_below_the_grace_exits_78_naming_both_keys() {
    let cfg = TempConfig::new(
        "monitor-period",
        "node_monitor_grace_period = \"50s\"\nnode_monitor_period = \"50s\"\n",
    );
    let line = assert_config_error(
        &check_config(cfg.path()),
        &cfg.display(),
        2,
        "node_monitor_period",
    );
    assert!(
        line.contains(
            "node_monitor_period (50s) must be at most half of node_monitor_grace_period (50s)"
        ),
        "{line}"
    );
}

#[test]
fn duration_in_parsecs_exits_78_naming_key_and_line() {
    let cfg = TempConfig::new(
        "parsecs",
        "[leader_election]\nenabled = true\nlease_duration = \"5 parsecs\"\n",
    );
    let line = assert_config_error(
        &check_config(cfg.path()),
        &cfg.display(),
        3,
        "leader_election.lease_duration",
    );
    assert!(line.contains("invalid duration \"5 parsecs\""), "{line}");
}

/// The partition keys: an unknown mode, a label that is not a label key, a bad duration, globally
/// and in a pool, each one line naming file, line and key.
#[test]
fn partition_keys_bad_input_exits_78_naming_key_and_line() {
    let cases = [
        (
            "mark_pods_not_ready = \"sometimes\"\n",
            1,
            "mark_pods_not_ready",
        ),
        ("\nfull_disruption = \"wait\"\n", 2, "full_disruption"),
        (
            "disruption_domain = [\"example.com/site\", \"bad key!\"]\n",
            1,
            "disruption_domain",
        ),
        ("disruption_domain = []\n", 1, "disruption_domain"),
        ("hold_max = \"10 parsecs\"\n", 1, "hold_max"),
        ("hold_max = \"0s\"\n", 1, "hold_max"),
        (
            "[[pool]]\nname = \"e\"\nmatch_labels = { a = \"b\" }\nmark_pods_not_ready = \"no\"\n",
            4,
            "pool.mark_pods_not_ready",
        ),
        (
            "[[pool]]\nname = \"e\"\nmatch_labels = { a = \"b\" }\ndisruption_domain = \"-x\"\n",
            4,
            "pool.disruption_domain",
        ),
        (
            "[[pool]]\nname = \"e\"\nmatch_labels = { a = \"b\" }\nfull_disruption = \"Hold\"\n",
            4,
            "pool.full_disruption",
        ),
        (
            "[[pool]]\nname = \"e\"\nmatch_labels = { a = \"b\" }\nhold_max = \"soon\"\n",
            4,
            "pool.hold_max",
        ),
    ];
    for (i, (text, line, key)) in cases.into_iter().enumerate() {
        let cfg = TempConfig::new(&format!("partition-{i}"), text);
        let out = check_config(cfg.path());
        assert_config_error(&out, &cfg.display(), line, key);
    }
    // The old boolean still reads, in a pool.
    let old = TempConfig::new(
        "partition-old",
        "[[pool]]\nname = \"e\"\nmatch_labels = { a = \"b\" }\nmark_pods_not_ready = false\n",
    );
    let out = check_config(old.path());
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let printed = String::from_utf8(out.stdout).unwrap();
    assert!(
        printed.contains("mark_pods_not_ready = \"never\""),
        "{printed}"
    );
}

#[test]
fn the_daemon_itself_exits_78_on_a_bad_config_before_doing_anything() {
    let cfg = TempConfig::new(
        "daemon",
        "[api]\nserver = \"https://127.0.0.1:9\"\nqps = -1.0\n",
    );
    let started = Instant::now();
    let out = node_lifecycled(&["--config", cfg.path().to_str().unwrap()]);
    assert!(started.elapsed() < Duration::from_secs(5));
    let line = assert_config_error(&out, &cfg.display(), 3, "api.qps");
    assert!(line.contains("ERROR"), "an error-level line: {line}");
    assert!(!stderr(&out).contains("starting"), "{}", stderr(&out));
}

#[test]
fn missing_file_exits_78_naming_the_path() {
    let path = std::env::temp_dir().join(format!("nlc-config-absent-{}.toml", std::process::id()));
    let out = check_config(&path);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(78), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with(&format!("{}: cannot read config file: ", path.display())),
        "{err}"
    );
}

#[test]
fn example_config_passes_and_prints_every_key() {
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("conf/config.toml");
    let out = check_config(&example);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let printed = String::from_utf8(out.stdout).unwrap();
    let keys = [
        "node_monitor_period = \"5s\"",
        "node_monitor_grace_period = \"50s\"",
        "node_startup_grace_period = \"1m\"",
        "node_eviction_rate = 0.1",
        "secondary_node_eviction_rate = 0.01",
        "large_cluster_size_threshold = 50",
        "unhealthy_zone_threshold = 0.55",
        "taint_based_eviction = true",
        "pod_eviction_timeout = \"5m\"",
        "dry_run = false",
        "log_level = \"info\"",
        "dump_format = \"text\"",
        "metrics_address",
        "[api]",
        "kubeconfig = ",
        "context",
        "in_cluster = false",
        "server",
        "certificate_authority",
        "client_certificate",
        "client_key",
        "token_file",
        "allow_insecure_skip_tls_verify = false",
        "qps = 20.0",
        "burst = 30",
        "request_timeout = \"5s\"",
        "watch_idle_timeout = \"30s\"",
        "[leader_election]",
        "enabled = true",
        "namespace = \"kube-system\"",
        "name = \"node-lifecycled\"",
        "lease_duration = \"15s\"",
        "renew_deadline = \"10s\"",
        "retry_period = \"2s\"",
        "identity",
    ];
    for key in keys {
        assert!(printed.contains(key), "{key} missing from\n{printed}");
    }
    // The printed configuration is itself a valid config file.
    let reprinted = TempConfig::new("reprinted", &printed);
    let again = check_config(reprinted.path());
    assert_eq!(again.status.code(), Some(0), "{}", stderr(&again));
}

#[test]
fn example_config_documents_every_key_it_accepts() {
    let example_path = Path::new(env!("CARGO_MANIFEST_DIR")).join("conf/config.toml");
    let example = std::fs::read_to_string(&example_path).unwrap();
    let printed = String::from_utf8(check_config(&example_path).stdout).unwrap();
    let mut checked = 0;
    for line in printed
        .lines()
        .filter(|l| !l.starts_with("# node-lifecycled"))
    {
        let key = line
            .trim_start_matches("# ")
            .split([' ', '='])
            .next()
            .unwrap();
        if key.is_empty() || key.starts_with('[') {
            continue;
        }
        // Set (`key = `) or shown commented out (`# key = `) at the start of a line.
        let shown =
            example.contains(&format!("\n{key} = ")) || example.contains(&format!("\n# {key} = "));
        assert!(shown, "conf/config.toml does not show {key}");
        checked += 1;
    }
    // Then 1: lifecycle_conditions (Node Lifecycle Conditions, KEP-5683); the last 2: shadow
    // and shadow_file.
    assert_eq!(checked, 18 + 4 + 14 + 7 + 17 + 3 + 1 + 2);
}

#[test]
fn unknown_arguments_exit_64_and_help_documents_exit_codes() {
    let out = node_lifecycled(&["--frobnicate"]);
    assert_eq!(out.status.code(), Some(64));
    assert!(stderr(&out).contains("unknown argument \"--frobnicate\""));
    let help = node_lifecycled(&["--help"]);
    assert_eq!(help.status.code(), Some(0));
    let text = String::from_utf8(help.stdout).unwrap();
    for code in ["0 ", "1 ", "64 ", "78 "] {
        assert!(
            text.contains(&format!("  {code}")),
            "--help lacks exit code {code}\n{text}"
        );
    }
    let version = node_lifecycled(&["--version"]);
    // The commit the binary was built from, as build.rs read it (this test runs in a checkout).
    let head = std::process::Command::new("git")
        .args(["rev-parse", "--short", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_else(|| "unknown".into());
    assert_eq!(
        String::from_utf8(version.stdout).unwrap().trim(),
        format!(
            "node-lifecycled {} (commit {head})",
            env!("CARGO_PKG_VERSION")
        )
    );
}

/// The usage text as `src/main.rs` writes it (its `USAGE` string literal, unescaped).
fn usage_in_source() -> String {
    let main = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("src/main.rs"))
        .expect("src/main.rs");
    let start = main
        .find("const USAGE: &str = \"\\\n")
        .expect("the USAGE literal in src/main.rs");
    let body = &main[start..];
    let body = &body[body.find('\n').unwrap() + 1..];
    let end = body.find("\n\";\n").expect("the USAGE literal's end");
    format!("{}\n", &body[..end]).replace("\\\"", "\"")
}

/// `--help` and `-h` print the usage whole on stdout, nothing on stderr, exit 0, wherever they
/// stand after the words before them were read.
#[test]
fn help_prints_the_usage_on_stdout_and_exits_0() {
    let usage = usage_in_source();
    assert!(usage.starts_with("node-lifecycled: ") && usage.contains("\nexit codes:\n"));
    for args in [
        &["--help"][..],
        &["-h"],
        &["check-config", "--help"],
        &["explain", "-h"],
    ] {
        let out = node_lifecycled(args);
        assert_eq!(out.status.code(), Some(0), "{args:?}");
        assert_eq!(String::from_utf8_lossy(&out.stdout), usage, "{args:?}");
        assert_eq!(stderr(&out), "", "{args:?}");
    }
}

/// A usage error is one line naming the word, the hint to `--help`, and exit 64 (EX_USAGE):
/// an unknown option, a missing value, an option of another command, a form the usage does
/// not show.
#[test]
fn usage_errors_name_the_word_and_exit_64() {
    for (args, line) in [
        (&["--frobnicate"][..], "unknown argument \"--frobnicate\""),
        (&["-x"], "unknown argument \"-x\""),
        (&["--config"], "--config needs a PATH"),
        (&["--config="], "--config needs a PATH"),
        (&["status", "--socket"], "--socket needs a PATH"),
        (&["doctor", "--output"], "--output needs a value"),
        (&["pause", "all", "--for"], "--for needs a DURATION"),
        (&["run", "--output", "json"], "--output is a doctor option"),
        (
            &["status", "--socket=/run/s"],
            "unknown argument \"--socket=/run/s\"",
        ),
        (&["-hV"], "unknown argument \"-hV\""),
        (&["run", "--"], "unknown argument \"--\""),
    ] {
        let out = node_lifecycled(args);
        assert_eq!(out.status.code(), Some(64), "{args:?}");
        assert_eq!(
            stderr(&out),
            format!("node-lifecycled: {line}\nTry 'node-lifecycled --help'.\n"),
            "{args:?}"
        );
        assert!(out.stdout.is_empty(), "{args:?}");
    }
}

/// A note about what could not be checked (here: in-cluster settings outside a pod) comes after
/// the effective configuration, on a line of its own, when both streams go to one terminal.
#[test]
fn check_config_notes_stay_on_their_own_line() {
    let dir = std::env::temp_dir().join(format!("nlc-check-note-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("in-cluster.toml");
    std::fs::write(&path, "[api]\nin_cluster = true\n").unwrap();
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "'{BIN}' check-config --config '{}' 2>&1",
            path.display()
        ))
        .env_remove("KUBERNETES_SERVICE_HOST")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(out.status.code(), Some(0), "{text}");
    let notes: Vec<&str> = text.lines().filter(|l| l.contains("note:")).collect();
    assert_eq!(notes.len(), 1, "{text}");
    assert!(
        notes[0].starts_with("note: "),
        "shares a line: {:?}",
        notes[0]
    );
    assert!(text.ends_with('\n'));
    let _ = std::fs::remove_dir_all(&dir);
}

/// The brake and pool timing keys: each bad value is one line naming file, line and key, exit 78.
#[test]
fn brake_and_pool_timing_bad_input_exits_78_naming_key_and_line() {
    let cases: [(&str, usize, &str, &str); 8] = [
        (
            "max_unhealthy = 0.4\n",
            1,
            "max_unhealthy",
            "a percentage in quotes",
        ),
        (
            "max_unhealthy = \"140%\"\n",
            1,
            "max_unhealthy",
            "between 0% and 100%",
        ),
        (
            "\nmax_unhealthy = \"-1%\"\n",
            2,
            "max_unhealthy",
            "between 0% and 100%",
        ),
        (
            "max_unhealthy = -3\n",
            1,
            "max_unhealthy",
            "node count >= 0",
        ),
        (
            "max_unhealthy = \"many\"\n",
            1,
            "max_unhealthy",
            "a percentage",
        ),
        (
            "default_toleration_seconds = -30\n",
            1,
            "default_toleration_seconds",
            "must be seconds between 0",
        ),
        (
            "[[pool]]\nname = \"edge\"\nmatch_labels = { site = \"e\" }\nmax_unhealthy = \"101%\"\n",
            4,
            "pool.max_unhealthy",
            "between 0% and 100%",
        ),
        (
            "[[pool]]\nname = \"edge\"\nmatch_labels = { site = \"e\" }\n\
             admission_default_toleration_seconds = 30\n",
            4,
            "pool.admission_default_toleration_seconds",
            "a [[pool]] cannot override admission_default_toleration_seconds",
        ),
    ];
    for (i, (text, line, key, why)) in cases.iter().enumerate() {
        let cfg = TempConfig::new(&format!("brake-{i}"), text);
        let err = assert_config_error(&check_config(cfg.path()), &cfg.display(), *line, key);
        assert!(err.contains(why), "{err}");
    }
}

/// The brake and pool timing keys read back as written: check-config prints them, and what it
/// prints is a config that means the same.
#[test]
fn brake_and_pool_timing_keys_round_trip_through_check_config() {
    let text = "max_unhealthy = \"12.5%\"\nadmission_default_toleration_seconds = 120\n\
                default_toleration_seconds = 600\n\
                [[pool]]\nname = \"edge\"\nmatch_labels = { site = \"e\" }\n\
                max_unhealthy = 2\ndefault_toleration_seconds = 30\n";
    let cfg = TempConfig::new("brake-round-trip", text);
    let out = check_config(cfg.path());
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let printed = String::from_utf8(out.stdout).unwrap();
    for want in [
        "max_unhealthy = \"12.5%\"",
        "admission_default_toleration_seconds = 120",
        "default_toleration_seconds = 600",
        "max_unhealthy = 2",
        "default_toleration_seconds = 30",
    ] {
        assert!(printed.contains(want), "{want} missing from\n{printed}");
    }
    let again = TempConfig::new("brake-round-trip-2", &printed);
    let reprinted = check_config(again.path());
    assert_eq!(reprinted.status.code(), Some(0), "{}", stderr(&reprinted));
    // The same, but for the header naming the file.
    let body = |s: &str| s.split_once('\n').map(|(_, b)| b.to_string());
    assert_eq!(
        body(&String::from_utf8(reprinted.stdout).unwrap()),
        body(&printed)
    );
}

/// Shadow mode writes nothing: with fencing on it is refused, exit 78, one line.
#[test]
fn shadow_mode_with_fencing_exits_78_in_one_line() {
    let cfg = TempConfig::new(
        "shadow-fencing",
        "shadow = true\n[fencing]\nenabled = true\ncommand = [\"/bin/true\"]\n",
    );
    let line = assert_config_error(
        &check_config(cfg.path()),
        &cfg.display(),
        3,
        "fencing.enabled",
    );
    assert!(
        line.contains("shadow = true cannot run with fencing.enabled = true"),
        "{line}"
    );
}
