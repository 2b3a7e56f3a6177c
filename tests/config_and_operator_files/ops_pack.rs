//! What an operator installs besides the daemon, checked as they will use it.
//!
//! - `conf/monitoring/alerts.yaml`: valid rules whose `promtool test rules` suite
//!   (`alerts_test.yaml`) sees every alert fire and stay quiet, each with a runbook line;
//! - `conf/monitoring/dashboard.json`: Grafana JSON on a `${datasource}` variable whose queries
//!   are valid PromQL;
//! - both read only metrics a live daemon exports (scraped from one run against the simulator);
//! - the bash completion: it offers every command and option of `--help`;
//! - the man pages under `man/`: `mandoc -T lint` clean, rendered by `man -l` without a groff
//!   warning, and in step with what they describe (`--help`, conf/config.toml, the simulator's
//!   usage text), the key lists of node-lifecycled.toml(5) exactly what
//!   `scripts/gen-config-man.py` writes from conf/config.toml.
//!
//! promtool, mandoc, man and python3 come from Debian packages `.ci/run` installs: required under
//! `CI=true`, skipped with a message elsewhere (`tests/tool_support`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::Duration;

use crate::e2e_support::{TempDir, http_get, metrics_run, metrics_run_with, wait_until};
use crate::ops_support::promql::metric_names;
use crate::ops_support::read;
use crate::ops_support::texts::{config_page_sections, config_toml_sections, usage_words};
use serde_yaml_ng::Value as Yaml;

const ALERTS: &str = "conf/monitoring/alerts.yaml";
const ALERTS_TEST: &str = "conf/monitoring/alerts_test.yaml";
const DASHBOARD: &str = "conf/monitoring/dashboard.json";

// ---- PromQL -----------------------------------------------------------------------------------

#[test]
fn metric_names_are_told_from_functions_labels_strings_and_variables() {
    let names = metric_names(
        "sum by (verb) (rate(a_total{code=~\"5..|}\"}[5m])) / on() group_left(x) \
         sum without (instance) (b_seconds_bucket{le=\"+Inf\"} offset 1h) > bool 0.5 \
         and histogram_quantile(0.99, c[$__rate_interval]) unless d{instance=~\"$instance\"}",
    );
    let want: BTreeSet<String> = ["a_total", "b_seconds_bucket", "c", "d"]
        .map(String::from)
        .into();
    assert_eq!(names, want);
    assert!(
        metric_names("label_replace(x, \"zone\", \"$1/$2\", \"zone\", \"(.*)\")").contains("x")
    );
}

// ---- the alerts -------------------------------------------------------------------------------

struct Alert {
    name: String,
    expr: String,
    runbook: Option<String>,
}

fn alerts() -> Vec<Alert> {
    let doc: Yaml = serde_yaml_ng::from_str(&read(ALERTS)).expect("alerts.yaml is YAML");
    let groups = doc["groups"].as_sequence().expect("top-level groups:");
    groups
        .iter()
        .flat_map(|g| g["rules"].as_sequence().cloned().unwrap_or_default())
        .map(|rule| Alert {
            name: rule["alert"]
                .as_str()
                .expect("every rule is an alert")
                .to_string(),
            expr: rule["expr"].as_str().expect("expr").to_string(),
            runbook: rule["annotations"]["runbook"].as_str().map(str::to_string),
        })
        .collect()
}

/// For each alert name: `(cases where it fires, cases where it stays quiet)` in the suite.
fn suite_cases() -> BTreeMap<String, (usize, usize)> {
    let doc: Yaml = serde_yaml_ng::from_str(&read(ALERTS_TEST)).expect("alerts_test.yaml");
    let mut cases: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    for test in doc["tests"].as_sequence().expect("tests:") {
        for case in test["alert_rule_test"].as_sequence().into_iter().flatten() {
            let name = case["alertname"].as_str().expect("alertname").to_string();
            let fires = case["exp_alerts"]
                .as_sequence()
                .is_some_and(|a| !a.is_empty());
            let entry = cases.entry(name).or_default();
            if fires {
                entry.0 += 1;
            } else {
                entry.1 += 1;
            }
        }
    }
    cases
}

#[test]
fn every_alert_has_a_runbook_and_is_tested_firing_and_quiet_by_promtool() {
    let alerts = alerts();
    assert!(alerts.len() >= 10, "{} alerts", alerts.len());
    let cases = suite_cases();
    for a in &alerts {
        let runbook = a.runbook.as_deref().unwrap_or_default();
        assert!(
            runbook.contains("node-lifecycled") && !runbook.contains('\n'),
            "{}: a one-line runbook naming what to run: {runbook:?}",
            a.name
        );
        let (firing, quiet) = cases.get(&a.name).copied().unwrap_or_default();
        assert!(
            firing > 0 && quiet > 0,
            "{}: alerts_test.yaml has {firing} firing and {quiet} quiet cases",
            a.name
        );
    }
    let names: BTreeSet<&str> = alerts.iter().map(|a| a.name.as_str()).collect();
    for tested in cases.keys() {
        assert!(
            names.contains(tested.as_str()),
            "{tested} is not in alerts.yaml"
        );
    }

    if !crate::tool_support::available("promtool", "prometheus", "promtool test rules") {
        return;
    }
    let root = env!("CARGO_MANIFEST_DIR");
    let out =
        crate::tool_support::run("promtool", &["check", "rules", &format!("{root}/{ALERTS}")]);
    assert!(out.status.success(), "{}", crate::tool_support::text(&out));
    let out = crate::tool_support::run(
        "promtool",
        &["test", "rules", &format!("{root}/{ALERTS_TEST}")],
    );
    assert!(out.status.success(), "{}", crate::tool_support::text(&out));
}

// ---- the dashboard ----------------------------------------------------------------------------

/// Every query of the dashboard: panel targets (rows' nested panels too) and the metric of each
/// `label_values(METRIC, LABEL)` template variable.
fn dashboard_queries(dashboard: &serde_json::Value) -> (Vec<String>, BTreeSet<String>) {
    fn walk(panels: &serde_json::Value, exprs: &mut Vec<String>) {
        for p in panels.as_array().into_iter().flatten() {
            for t in p["targets"].as_array().into_iter().flatten() {
                if let Some(e) = t["expr"].as_str() {
                    exprs.push(e.to_string());
                }
            }
            walk(&p["panels"], exprs);
        }
    }
    let mut exprs = Vec::new();
    walk(&dashboard["panels"], &mut exprs);
    let mut variable_metrics = BTreeSet::new();
    for v in dashboard["templating"]["list"]
        .as_array()
        .into_iter()
        .flatten()
    {
        let query = v["query"]["query"].as_str().or(v["query"].as_str());
        if let Some(args) = query.and_then(|q| q.strip_prefix("label_values(")) {
            if let Some((metric, _label)) = args.split_once(',') {
                variable_metrics.insert(metric.trim().to_string());
            }
        }
    }
    (exprs, variable_metrics)
}

fn dashboard() -> serde_json::Value {
    serde_json::from_str(&read(DASHBOARD)).expect("dashboard.json is JSON")
}

#[test]
fn the_dashboard_is_grafana_json_on_a_datasource_variable_with_valid_promql() {
    let d = dashboard();
    let schema = d["schemaVersion"].as_u64().unwrap_or(0);
    assert!((36..=41).contains(&schema), "schemaVersion {schema}");
    assert!(d["uid"].is_string() && d["title"] == "node-lifecycled");
    let variables = d["templating"]["list"].as_array().expect("templating");
    assert!(
        variables.iter().any(|v| v["name"] == "datasource"
            && v["type"] == "datasource"
            && v["query"] == "prometheus"),
        "a datasource variable"
    );
    // Every panel and target reads from the variable, none from a fixed data source.
    let text = read(DASHBOARD);
    let fixed = text.matches("\"uid\": \"").count();
    let variable = text.matches("\"uid\": \"${datasource}\"").count();
    assert_eq!(fixed, variable + 1, "only the dashboard's own uid is fixed");
    let (exprs, _) = dashboard_queries(&d);
    for wanted in [
        "node_lifecycled_zone_state",
        "node_lifecycled_nodes",
        "node_lifecycled_zone_taint_queue",
        "node_lifecycled_pending_pod_evictions",
        "node_lifecycled_decisions_total",
        "taint_eviction_controller_pod_deletions_total",
        "node_lifecycled_fencing_attempts_total",
        "node_lifecycled_api_requests_total",
        "node_lifecycled_api_request_duration_seconds_bucket",
        "node_lifecycled_store_bytes",
        "node_lifecycled_loop_wakeups_total",
    ] {
        assert!(
            exprs.iter().any(|e| metric_names(e).contains(wanted)),
            "no panel shows {wanted}"
        );
    }

    if !crate::tool_support::available("promtool", "prometheus", "the dashboard's PromQL") {
        return;
    }
    // Grafana's variables as Grafana would fill them, each query as a recording rule.
    let mut rules = String::from("groups:\n  - name: dashboard\n    rules:\n");
    for (i, e) in exprs.iter().enumerate() {
        let e = e
            .replace("$__rate_interval", "5m")
            .replace("$instance", ".*");
        rules.push_str(&format!(
            "      - record: dashboard_query_{i}\n        expr: {}\n",
            serde_json::to_string(&e).unwrap()
        ));
    }
    let dir = TempDir::new("dashboard-promql");
    let file = dir.write("dashboard-rules.yaml", &rules);
    let out = crate::tool_support::run("promtool", &["check", "rules", file.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}\n{rules}",
        crate::tool_support::text(&out)
    );
}

// ---- against a live daemon --------------------------------------------------------------------

/// `# TYPE` families of a scrape; a histogram's samples carry `_bucket`, `_sum`, `_count`.
fn exported(body: &str) -> BTreeMap<String, String> {
    body.lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split_once(' '))
        .map(|(name, kind)| (name.to_string(), kind.to_string()))
        .collect()
}

fn is_exported(families: &BTreeMap<String, String>, name: &str) -> bool {
    families.contains_key(name)
        || ["_bucket", "_sum", "_count"].iter().any(|suffix| {
            name.strip_suffix(suffix)
                .is_some_and(|base| families.get(base).is_some_and(|k| k == "histogram"))
        })
}

/// The value of the sample `name{labels}` (labels as written, `""` for none).
fn sample(body: &str, name: &str, labels: &str) -> Option<f64> {
    let head = if labels.is_empty() {
        format!("{name} ")
    } else {
        format!("{name}{{{labels}}} ")
    };
    body.lines()
        .find_map(|l| l.strip_prefix(&head))
        .and_then(|v| v.trim().parse().ok())
}

const TOKEN: &str = "ops-pack";

#[test]
fn the_alerts_and_the_dashboard_read_only_metrics_a_live_daemon_exports() {
    // Fencing on (its metrics exist only then), for no node; a pool's brake no pool reaches
    // (its metrics exist only with max_unhealthy).
    let run = metrics_run(
        "ops-pack",
        TOKEN,
        "[[pool]]\nname = \"ops\"\nmatch_labels = { \"node-lifecycled.io/pool\" = \"none\" }\n\
         max_unhealthy = 1000\n\
         [fencing]\nenabled = true\ncommand = [\"/bin/true\"]\n\
         match_labels = { \"node-lifecycled.io/fencing\" = \"never\" }\n",
    );
    let (sim, d, port) = (&run.sim, &run.daemon, run.port);
    let (code, body) = http_get(port, "/metrics");
    assert_eq!(code, 200, "{body}");
    let families = exported(&body);

    let mut used: BTreeMap<String, &str> = BTreeMap::new();
    for a in alerts() {
        for name in metric_names(&a.expr) {
            used.insert(name, ALERTS);
        }
    }
    let (exprs, variable_metrics) = dashboard_queries(&dashboard());
    for name in exprs
        .iter()
        .flat_map(|e| metric_names(e))
        .chain(variable_metrics)
    {
        used.insert(name, DASHBOARD);
    }
    assert!(used.len() >= 20, "{used:?}");
    // Shadow mode's metrics exist only in shadow mode, which fencing excludes: asked of a
    // second daemon.
    let shadow_body = {
        let run = metrics_run_with(
            "ops-pack-shadow",
            TOKEN,
            "shadow = true\nshadow_file = \"\"\n",
            "",
        );
        let (code, body) = http_get(run.port, "/metrics");
        assert_eq!(code, 200, "{body}");
        body
    };
    let shadow_families = exported(&shadow_body);
    let missing: Vec<String> = used
        .iter()
        .filter(|(name, _)| {
            let shadow_only =
                name.starts_with("node_lifecycled_shadow_") && is_exported(&shadow_families, name);
            !is_exported(&families, name) && !shadow_only
        })
        .map(|(name, file)| format!("{name} ({file})"))
        .collect();
    assert!(
        missing.is_empty(),
        "not exported by the daemon: {missing:?}\n{body}"
    );

    // NodeLifecycledWatchDown's comparison, live: the API server goes away for longer than the
    // 3 s grace period, then comes back.
    let grace = sample(
        &body,
        "node_lifecycled_node_monitor_grace_period_seconds",
        "",
    );
    assert_eq!(grace, Some(3.0));
    assert_eq!(
        sample(&body, "node_lifecycled_watch_up", "resource=\"pods\""),
        Some(1.0)
    );
    sim.handle.faults().restart(Duration::from_secs(5));
    let pods_down = || {
        let (_, body) = http_get(port, "/metrics");
        (
            sample(&body, "node_lifecycled_watch_up", "resource=\"pods\""),
            sample(
                &body,
                "node_lifecycled_watch_down_seconds",
                "resource=\"pods\"",
            )
            .unwrap_or(0.0),
        )
    };
    wait_until(
        "the pods watch down for longer than the grace period",
        Duration::from_secs(15),
        || matches!(pods_down(), (Some(0.0), down) if down > 3.0),
        || d.log(),
    );
    wait_until(
        "every watch following the server again",
        Duration::from_secs(30),
        || {
            let (_, body) = http_get(port, "/metrics");
            ["nodes", "leases", "pods"].iter().all(|r| {
                let labels = format!("resource=\"{r}\"");
                sample(&body, "node_lifecycled_watch_up", &labels) == Some(1.0)
                    && sample(&body, "node_lifecycled_watch_down_seconds", &labels) == Some(0.0)
            })
        },
        || d.log(),
    );
}

// ---- the man pages ----------------------------------------------------------------------------

const PAGES: [&str; 3] = [
    "man/node-lifecycled.8",
    "man/node-lifecycled.toml.5",
    "man/node-lifecycled-sim.1",
];

#[test]
fn the_man_pages_are_lint_clean_and_render() {
    let root = env!("CARGO_MANIFEST_DIR");
    if crate::tool_support::available("mandoc", "mandoc", "mandoc -T lint of man/") {
        for page in PAGES {
            let out =
                crate::tool_support::run("mandoc", &["-T", "lint", &format!("{root}/{page}")]);
            // Whether a page named in SEE ALSO is installed on this machine says nothing about
            // ours (ours are not installed while testing).
            let findings: Vec<String> = crate::tool_support::text(&out)
                .lines()
                .filter(|l| !l.contains("referenced manual not found") && !l.contains("mandoc.db"))
                .map(str::to_string)
                .collect();
            assert!(findings.is_empty(), "{page}:\n{}", findings.join("\n"));
        }
    }
    if crate::tool_support::available("man", "man-db", "man -l of man/") {
        for page in PAGES {
            let out = std::process::Command::new("man")
                .args(["--warnings", "-P", "cat", "-l", &format!("{root}/{page}")])
                .env("MANWIDTH", "80")
                .output()
                .expect("man runs");
            let text = String::from_utf8_lossy(&out.stdout);
            let name = Path::new(page).file_stem().unwrap().to_str().unwrap();
            assert!(
                out.status.success(),
                "{page}: {}",
                crate::tool_support::text(&out)
            );
            assert!(
                out.stderr.is_empty(),
                "{page}: {}",
                crate::tool_support::text(&out)
            );
            assert!(
                text.contains("NAME") && text.contains(&format!("{name} ")),
                "{page} renders:\n{text}"
            );
        }
    }
}

#[test]
fn the_config_page_describes_every_key_of_conf_config_toml_and_no_other() {
    let file = config_toml_sections();
    let page = config_page_sections();
    let sections: BTreeSet<&String> = file.keys().chain(page.keys()).collect();
    assert_eq!(
        sections.into_iter().cloned().collect::<Vec<_>>(),
        [
            "",
            "api",
            "condition_taint",
            "fencing",
            "leader_election",
            "pool"
        ]
    );
    for (section, (keys, text)) in &file {
        let described = page.get(section).cloned().unwrap_or_default();
        for key in keys {
            assert!(
                described.contains_key(key),
                "conf/config.toml [{section}] {key} is not in node-lifecycled.toml(5)"
            );
        }
        for (key, item) in &described {
            let word = |w: &str| {
                text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                    .any(|t| t == w)
            };
            assert!(
                word(key),
                "node-lifecycled.toml(5) [{section}] {key} is not in conf/config.toml"
            );
            assert!(
                item.contains("Default") && item.contains("Upstream"),
                "[{section}] {key}: its default and the upstream flag it replaces:\n{item}"
            );
        }
    }
}

/// The page's key lists are written from conf/config.toml's comments by
/// scripts/gen-config-man.py, so a key is documented once, there; the committed page (which the
/// package and `man` read) must be what the script writes today.
#[test]
fn the_config_page_is_what_scripts_gen_config_man_writes_from_conf_config_toml() {
    if !crate::tool_support::available(
        "python3",
        "python3",
        "man/node-lifecycled.toml.5 against scripts/gen-config-man.py",
    ) {
        return;
    }
    let root = env!("CARGO_MANIFEST_DIR");
    let out = crate::tool_support::run(
        "python3",
        &[&format!("{root}/scripts/gen-config-man.py"), "--stdout"],
    );
    assert!(
        out.status.success(),
        "scripts/gen-config-man.py --stdout failed:\n{}",
        crate::tool_support::text(&out)
    );
    let generated = String::from_utf8_lossy(&out.stdout);
    let committed = read("man/node-lifecycled.toml.5");
    let first_difference = generated
        .lines()
        .zip(committed.lines())
        .position(|(g, c)| g != c)
        .unwrap_or(generated.lines().count().min(committed.lines().count()));
    assert!(
        generated == committed,
        "man/node-lifecycled.toml.5 is not what conf/config.toml generates (first difference \
         at line {}: {:?} generated, {:?} committed): run scripts/gen-config-man.py and commit \
         the page",
        first_difference + 1,
        generated.lines().nth(first_difference),
        committed.lines().nth(first_difference),
    );
}

fn daemon_help() -> String {
    let out = crate::tool_support::run(crate::e2e_support::BIN, &["--help"]);
    assert!(out.status.success());
    String::from_utf8_lossy(&out.stdout).to_string()
}

#[test]
fn the_daemon_page_names_every_command_option_exit_code_and_variable_of_its_help() {
    let help = daemon_help();
    let page = read("man/node-lifecycled.8");
    let (commands, flags) = usage_words(&help);
    assert!(
        commands.contains("doctor") && commands.contains("explain"),
        "{commands:?}"
    );
    for c in &commands {
        assert!(
            page.contains(&format!("Cm {c}")),
            "node-lifecycled.8: no command {c}"
        );
    }
    for f in &flags {
        assert!(
            page.contains(&format!("Fl {}", &f[1..])),
            "node-lifecycled.8: no option {f}"
        );
    }
    let codes = help
        .split("exit codes:")
        .nth(1)
        .expect("exit codes in --help");
    for code in codes
        .split(|c: char| !c.is_ascii_digit())
        .filter(|w| w.len() == 2 || w == &"0" || w == &"1")
    {
        assert!(
            page.contains(&format!(".It {code}\n")),
            "node-lifecycled.8: exit {code}"
        );
    }
    let env = help
        .split("environment:")
        .nth(1)
        .expect("environment in --help");
    // The names start their lines (indented by two); deeper lines explain them.
    let names = env
        .lines()
        .filter(|l| l.starts_with("  ") && !l.starts_with("   "))
        .flat_map(|l| {
            l.split([' ', ','])
                .filter(|w| !w.is_empty())
                .take_while(|w| w.chars().all(|c| c.is_ascii_uppercase() || c == '_'))
        });
    for var in names {
        assert!(
            page.contains(&format!("Ev {var}")),
            "node-lifecycled.8: no {var}"
        );
    }
    for signal in ["SIGTERM", "SIGINT", "SIGHUP", "SIGUSR1"] {
        assert!(page.contains(&format!("Dv {signal}")), "{signal}");
    }
}

#[test]
fn the_simulator_page_names_every_command_and_option_of_its_usage() {
    let source = read("crates/node-lifecycled-sim/src/bin/node-lifecycled-sim/cli.rs");
    let usage = source
        .split("const USAGE: &str = \"\\\n")
        .nth(1)
        .and_then(|s| s.split("\n\";").next())
        .expect("the simulator's USAGE");
    let page = read("man/node-lifecycled-sim.1");
    let (commands, flags) = usage_words(usage);
    assert!(
        commands.len() >= 6 && flags.len() >= 20,
        "{commands:?} {flags:?}"
    );
    for c in &commands {
        assert!(
            page.contains(&format!("Cm {c}")),
            "node-lifecycled-sim.1: no command {c}"
        );
    }
    for f in &flags {
        assert!(
            page.contains(&format!("Fl {}", &f[1..])),
            "node-lifecycled-sim.1: no option {f}"
        );
    }
}

// ---- bash completion --------------------------------------------------------------------------

/// What the completion offers for the command line `words` (the last one being completed).
fn complete(words: &[&str]) -> BTreeSet<String> {
    let script = format!(
        "{}/completions/node-lifecycled.bash",
        env!("CARGO_MANIFEST_DIR")
    );
    let out = std::process::Command::new("bash")
        .args([
            "-c",
            "source \"$1\"; shift; COMP_WORDS=(\"$@\"); COMP_CWORD=$(($# - 1)); \
             _node_lifecycled; printf '%s\\n' \"${COMPREPLY[@]}\"",
            "bash",
            &script,
        ])
        .args(words)
        .output()
        .expect("bash runs");
    assert!(out.status.success(), "{}", crate::tool_support::text(&out));
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| !l.is_empty())
        .map(str::to_string)
        .collect()
}

#[test]
fn bash_completion_offers_every_command_and_option_of_the_help() {
    let (commands, flags) = usage_words(&daemon_help());
    // The commands parse_args accepts: the match arm that sets `subcommand`.
    let main = read("src/main.rs");
    // The arm's patterns, over as many lines as rustfmt gives them.
    let arm = main
        .split("if subcommand.is_none() && config.is_none()")
        .next()
        .and_then(|before| before.rsplit("match text.as_str() {").next())
        .expect("the subcommand arm of parse_args");
    let accepted: BTreeSet<String> = arm
        .split('"')
        .skip(1)
        .step_by(2)
        .map(String::from)
        .collect();
    assert_eq!(
        accepted, commands,
        "--help and parse_args name the same commands"
    );
    let first = complete(&["node-lifecycled", ""]);
    assert!(
        first.is_superset(&commands),
        "{first:?} lacks some of {commands:?}"
    );
    let mut offered = complete(&["node-lifecycled", "--"]);
    for c in &commands {
        offered.extend(complete(&["node-lifecycled", c, "--"]));
    }
    let missing: Vec<&String> = flags.difference(&offered).collect();
    assert!(missing.is_empty(), "options never offered: {missing:?}");
    assert_eq!(
        complete(&["node-lifecycled", "doctor", "--output", ""]),
        ["json", "text"].map(String::from).into()
    );
    assert_eq!(
        complete(&["node-lifecycled", "doctor", "--kc"]),
        ["--kcm-manifest"].map(String::from).into()
    );
}
