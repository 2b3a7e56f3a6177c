use crate::kube::decode::proto::ContentType;
use std::path::Path;
use std::time::Duration;

use super::*;

fn parse(text: &str) -> Result<Config, ConfigError> {
    Config::from_str(text, Path::new("conf/test.toml"))
}

fn error(text: &str) -> String {
    parse(text).expect_err(text).to_string()
}

#[test]
fn empty_file_gives_upstream_defaults() {
    let c = parse("").unwrap();
    assert_eq!(c.controller.node_monitor_period, Duration::from_secs(5));
    assert_eq!(
        c.controller.node_monitor_grace_period,
        Duration::from_secs(50)
    );
    assert_eq!(
        c.controller.node_startup_grace_period,
        Duration::from_secs(60)
    );
    assert_eq!(
        c.controller.node_eviction_rate,
        Rate::from_f64(0.1).unwrap()
    );
    assert_eq!(
        c.controller.secondary_node_eviction_rate,
        Rate::from_f64(0.01).unwrap()
    );
    assert_eq!(c.controller.large_cluster_size_threshold, 50);
    assert_eq!(c.controller.unhealthy_zone_threshold, 0.55);
    assert!(c.controller.taint_based_eviction);
    assert_eq!(c.controller.pod_eviction_timeout, Duration::from_secs(300));
    assert!(!c.dry_run);
    assert_eq!(c.log_level, LevelFilter::Info);
    assert_eq!(c.dump_format, DumpFormat::Text);
    assert_eq!(c.metrics_address, None);
    assert_eq!(c.log_format, LogFormat::Text);
    assert_eq!(
        c.control_socket.as_deref(),
        Some(Path::new("/run/node-lifecycled/control.sock"))
    );
    let off = parse("control_socket = \"\"\nlog_format = \"json\"\n").unwrap();
    assert_eq!(off.control_socket, None);
    assert_eq!(off.log_format, LogFormat::Json);
    assert_eq!(
        c.api.source,
        ApiSource::Kubeconfig {
            path: PathBuf::from(DEFAULT_KUBECONFIG),
            context: None
        }
    );
    assert_eq!(c.api.qps, Rate::per_second(20));
    assert_eq!(c.api.burst, 30);
    assert_eq!(c.api.request_timeout, Duration::from_secs(5));
    assert_eq!(c.api.content_type, ContentType::Protobuf);
    let le = &c.leader_election;
    assert!(le.enabled);
    assert_eq!(
        (le.namespace.as_str(), le.name.as_str()),
        ("kube-system", "node-lifecycled")
    );
    assert_eq!(
        (le.lease_duration, le.renew_deadline, le.retry_period),
        (
            Duration::from_secs(15),
            Duration::from_secs(10),
            Duration::from_secs(2)
        )
    );
    assert_eq!(c, Config::default());
}

#[test]
fn the_four_bad_configs_of_the_issue_name_key_and_line() {
    assert_eq!(
        error("dry_run = true\nnode_monitor_perod = \"5s\"\n"),
        "conf/test.toml:2: node_monitor_perod: unknown key"
    );
    assert_eq!(
        error("\n\nnode_eviction_rate = -0.1\n"),
        "conf/test.toml:3: node_eviction_rate: must be a finite number >= 0, got -0.1"
    );
    assert_eq!(
        error("# zones\n\nunhealthy_zone_threshold = 1.5\n"),
        "conf/test.toml:3: unhealthy_zone_threshold: must be in (0, 1], got 1.5"
    );
    assert_eq!(
        error("node_monitor_grace_period = \"5 parsecs\"\n"),
        "conf/test.toml:1: node_monitor_grace_period: invalid duration \"5 parsecs\": unknown unit (use h, m, s, ms, us, ns)"
    );
}

#[test]
fn unknown_keys_in_sections_and_unknown_sections_are_errors() {
    assert_eq!(
        error("[api]\nqps = 5.0\nqsp = 5.0\n"),
        "conf/test.toml:3: api.qsp: unknown key"
    );
    assert_eq!(
        error("[leader_election]\nenabled = false\n[leader_elektion]\nenabled = true\n"),
        "conf/test.toml:3: leader_elektion: unknown key"
    );
}

#[test]
fn wrong_types_name_key_and_line() {
    let e = error("dry_run = \"yes\"\n");
    assert!(e.starts_with("conf/test.toml:1: dry_run: "), "{e}");
    let e = error("[api]\nburst = 2.5\n");
    assert!(e.starts_with("conf/test.toml:2: api.burst: "), "{e}");
    assert!(e.ends_with("expected an integer"), "{e}");
    let e = error("node_monitor_period = 5\n");
    assert_eq!(
        e,
        "conf/test.toml:1: node_monitor_period: invalid type: integer `5`, expected a duration in quotes, like \"5s\" or \"1m30s\""
    );
    let e = error("api = 5\n");
    assert_eq!(
        e,
        "conf/test.toml:1: api: invalid type: integer `5`, expected a table"
    );
    assert!(!e.contains('\n'), "{e}");
}

#[test]
fn syntax_errors_are_one_line_with_the_line_number() {
    let e = error("dry_run = true\nlog_level = \n");
    assert!(e.starts_with("conf/test.toml:2: "), "{e}");
    assert!(!e.contains('\n'), "{e}");
    let e = error("a = 1\na = 2\n");
    assert!(e.starts_with("conf/test.toml:2: "), "{e}");
}

#[test]
fn value_ranges_are_checked() {
    for (text, needle) in [
        (
            "unhealthy_zone_threshold = 0.0",
            "unhealthy_zone_threshold: must be in (0, 1]",
        ),
        (
            "unhealthy_zone_threshold = nan",
            "unhealthy_zone_threshold: must be in (0, 1]",
        ),
        (
            "secondary_node_eviction_rate = inf",
            "secondary_node_eviction_rate: must be a finite",
        ),
        (
            "large_cluster_size_threshold = -1",
            "large_cluster_size_threshold: must be a node count",
        ),
        (
            "node_monitor_period = \"0s\"",
            "node_monitor_period: must be greater than 0",
        ),
        (
            "node_monitor_period = \"-1s\"",
            "node_monitor_period: invalid duration \"-1s\": must not be negative",
        ),
        (
            "node_monitor_period = \"\"",
            "node_monitor_period: invalid duration \"\": empty",
        ),
        ("log_level = \"verbose\"", "log_level: must be one of"),
        (
            "dump_format = \"xml\"",
            "dump_format: must be \"text\" or \"json\"",
        ),
        (
            "metrics_address = \"0.0.0.0:9184\"",
            "metrics_address: must be a loopback address",
        ),
        (
            "metrics_address = \"localhost\"",
            "metrics_address: must be ip:port",
        ),
        (
            "log_format = \"logfmt\"",
            "log_format: must be \"text\" or \"json\"",
        ),
        (
            "control_socket = \"control.sock\"",
            "control_socket: must be an absolute path",
        ),
        (
            "control_socket = \"/run/node-lifecycled/\"",
            "control_socket: must name a socket",
        ),
        ("[api]\nqps = 0.0", "api.qps: must be greater than 0"),
        ("[api]\nqps = -3.0", "api.qps: must be a finite number >= 0"),
        ("[api]\nburst = 0", "api.burst: must be in 1..=1000000"),
        (
            "[api]\ncontent_type = \"yaml\"",
            "api.content_type: must be \"protobuf\" or \"json\", got \"yaml\"",
        ),
        (
            "[api]\nserver = \"ftp://x\"",
            "api.server: must be an https://",
        ),
        (
            "[leader_election]\nname = \"Node_Lifecycled\"",
            "leader_election.name: must be a Kubernetes object name",
        ),
        (
            "[leader_election]\nidentity = \" \"",
            "leader_election.identity: must not be empty",
        ),
    ] {
        let e = error(text);
        assert!(e.contains(needle), "{text}: {e}");
        assert!(e.starts_with("conf/test.toml:"), "{e}");
    }
    // Zero is meaningful for the legacy eviction timeout (evict at once).
    assert_eq!(
        parse("pod_eviction_timeout = \"0s\"")
            .unwrap()
            .controller
            .pod_eviction_timeout,
        Duration::ZERO
    );
    assert_eq!(
        parse("node_eviction_rate = 0")
            .unwrap()
            .controller
            .node_eviction_rate,
        Rate::NEVER
    );
}

#[test]
fn leader_election_durations_must_nest() {
    assert_eq!(
        error("[leader_election]\nrenew_deadline = \"20s\"\n"),
        "conf/test.toml:2: leader_election.renew_deadline: renew_deadline (20s) must be shorter than lease_duration (15s)"
    );
    assert_eq!(
        error("[leader_election]\nlease_duration = \"10s\"\n"),
        "conf/test.toml:2: leader_election.lease_duration: renew_deadline (10s) must be shorter than lease_duration (10s)"
    );
    assert!(
        error("[leader_election]\nretry_period = \"10s\"\n")
            .contains("retry_period (10s) must be shorter than renew_deadline (10s)")
    );
    assert!(
        error("[api]\nrequest_timeout = \"10s\"\n")
            .starts_with("conf/test.toml:2: api.request_timeout: ")
    );
    // Without leader election the renew deadline does not bound the request timeout.
    parse("[api]\nrequest_timeout = \"10s\"\n[leader_election]\nenabled = false\n").unwrap();
}

#[test]
fn watch_idle_timeout_must_be_inside_the_grace_period() {
    let e = error("node_monitor_grace_period = \"20s\"\n");
    assert!(
        e.starts_with("conf/test.toml:1: node_monitor_grace_period: api.watch_idle_timeout (30s)"),
        "{e}"
    );
}

#[test]
fn api_sources_are_mutually_exclusive() {
    assert_eq!(
        error("[api]\nkubeconfig = \"/k\"\nserver = \"https://10.0.0.1:6443\"\n"),
        "conf/test.toml:3: api.server: conflicts with api.kubeconfig (line 2): set only one of api.kubeconfig, api.in_cluster, api.server"
    );
    assert!(
        error("[api]\nin_cluster = true\nkubeconfig = \"/k\"\n").starts_with(
            "conf/test.toml:2: api.in_cluster: conflicts with api.kubeconfig (line 3)"
        )
    );
    assert!(
        error("[api]\ntoken_file = \"/t\"\n")
            .contains("api.token_file: only applies with api.server")
    );
    assert!(
        error("[api]\nin_cluster = true\ncontext = \"x\"\n")
            .contains("api.context: only applies to a kubeconfig")
    );
    assert!(
        error("[api]\nserver = \"https://h\"\nclient_key = \"/k\"\n").contains(
            "api.client_key: api.client_certificate and api.client_key must be set together"
        )
    );
    assert!(error("[api]\nserver = \"https://h\"\ncertificate_authority = \"/ca\"\nallow_insecure_skip_tls_verify = true\n").contains("conf/test.toml:3: api.certificate_authority: cannot be combined"));
    // in_cluster = false is the same as leaving it out.
    let c = parse("[api]\nin_cluster = false\nkubeconfig = \"/k\"\ncontext = \"admin\"\n").unwrap();
    assert_eq!(
        c.api.source,
        ApiSource::Kubeconfig {
            path: "/k".into(),
            context: Some("admin".into())
        }
    );
    let c = parse("[api]\nserver = \"https://10.0.0.1:6443\"\ncertificate_authority = \"/ca\"\ntoken_file = \"/t\"\n").unwrap();
    assert_eq!(
        c.api.source,
        ApiSource::Explicit {
            server: "https://10.0.0.1:6443".into(),
            certificate_authority: Some("/ca".into()),
            client_certificate: None,
            client_key: None,
            token_file: Some("/t".into()),
        }
    );
    assert_eq!(
        parse("[api]\nin_cluster = true\n").unwrap().api.source,
        ApiSource::InCluster
    );
}

#[test]
fn effective_config_reads_back_to_the_same_config() {
    let samples = [
        "",
        "node_eviction_rate = 0.3\nsecondary_node_eviction_rate = 0\nmetrics_address = \"[::1]:9184\"\nlog_level = \"debug\"\ndump_format = \"json\"\nnode_monitor_period = \"1m30s\"",
        "[api]\nserver = \"https://10.0.0.1:6443\"\nclient_certificate = \"/c\"\nclient_key = \"/k\"\nqps = 7.5\nburst = 1",
        "[api]\nin_cluster = true\n[leader_election]\nenabled = false\nidentity = \"a \\\"quoted\\\" id\"",
        "[api]\nkubeconfig = \"/etc/k.conf\"\ncontext = \"ctx\"",
    ];
    for text in samples {
        let c = parse(text).unwrap();
        let printed = c.to_toml();
        let back = Config::from_str(&printed, Path::new("<printed>"))
            .unwrap_or_else(|e| panic!("{e}\n{printed}"));
        assert_eq!(back, c, "{printed}");
    }
}

#[test]
fn effective_config_names_every_key() {
    let printed = Config::default().to_toml();
    for key in [
        "node_monitor_period",
        "node_monitor_grace_period",
        "node_startup_grace_period",
        "node_eviction_rate",
        "secondary_node_eviction_rate",
        "large_cluster_size_threshold",
        "unhealthy_zone_threshold",
        "taint_based_eviction",
        "pod_eviction_timeout",
        "dry_run",
        "log_level",
        "dump_format",
        "metrics_address",
        "log_format",
        "control_socket",
        "[api]",
        "kubeconfig",
        "context",
        "in_cluster",
        "server",
        "certificate_authority",
        "client_certificate",
        "client_key",
        "token_file",
        "allow_insecure_skip_tls_verify",
        "qps",
        "burst",
        "request_timeout",
        "watch_idle_timeout",
        "[leader_election]",
        "enabled",
        "namespace",
        "name",
        "lease_duration",
        "renew_deadline",
        "retry_period",
        "identity",
    ] {
        assert!(printed.contains(key), "{key} missing from\n{printed}");
    }
    assert!(printed.contains("node_monitor_grace_period = \"50s\""));
    assert!(printed.contains("pod_eviction_timeout = \"5m\""));
    assert!(printed.contains("qps = 20.0"));
}

#[test]
fn changes_list_each_differing_key_and_which_need_a_restart() {
    let old = parse("").unwrap();
    let new = parse("log_level = \"debug\"\n[api]\nqps = 50.0\n").unwrap();
    let changes = new.changes_since(&old);
    let shown: Vec<String> = changes.iter().map(|c| c.to_string()).collect();
    assert_eq!(
        shown,
        ["log_level \"info\" -> \"debug\"", "api.qps 20.0 -> 50.0"]
    );
    assert!(!changes[0].needs_restart());
    assert!(changes[1].needs_restart());
    assert!(new.changes_since(&new).is_empty());
}

#[test]
fn missing_file_names_the_path() {
    let e = Config::load(Path::new("/nonexistent/node-lifecycled.toml")).unwrap_err();
    assert_eq!(e.line, None);
    assert!(
        e.to_string()
            .starts_with("/nonexistent/node-lifecycled.toml: cannot read config file: "),
        "{e}"
    );
}

#[test]
fn default_identity_is_hostname_and_random_suffix() {
    let le = &Config::default().leader_election;
    let (a, b) = (le.identity_or_default(), le.identity_or_default());
    assert_ne!(a, b);
    let (host, suffix) = a.rsplit_once('_').unwrap();
    assert!(!host.is_empty());
    assert_eq!(suffix.len(), 12);
}

const POLICIES: &str = r#"autonomy = false
disruption_cooldown = "2m"
early_suspects = false

[[pool]]
name = "control-plane"
match_expressions = [{ key = "node-role.kubernetes.io/control-plane", operator = "Exists" }]
node_monitor_grace_period = "40s"

[[pool]]
name = "flaky-rack"
match_labels = { "example.com/rack" = "r7" }
match_expressions = [{ key = "example.com/tier", operator = "NotIn", values = ["gold", "silver"] }]
node_monitor_grace_period = "2m"
node_startup_grace_period = "5m"
mark_pods_not_ready = false
node_eviction_rate = 0.02
secondary_node_eviction_rate = 0.0

[[condition_taint]]
condition = "KernelDeadlock"
status = "True"
key = "example.com/kernel-deadlock"
effect = "NoExecute"
"#;

#[test]
fn policies_are_read_printed_and_read_back_the_same() {
    let c = parse(POLICIES).unwrap();
    assert!(!c.controller.autonomy);
    assert_eq!(c.controller.disruption_cooldown, Duration::from_secs(120));
    assert!(!c.controller.early_suspects);
    assert_eq!(c.controller.pools.len(), 2);
    assert_eq!(&*c.controller.pools[1].name, "flaky-rack");
    assert_eq!(
        c.controller.pools[1].mark_pods_not_ready,
        Some(crate::controller::partitions::PodsNotReady::Never)
    );
    assert_eq!(
        c.controller.pools[1].secondary_node_eviction_rate,
        Some(Rate::NEVER)
    );
    assert_eq!(c.controller.pools[0].node_eviction_rate, None);
    assert_eq!(c.controller.condition_taints.len(), 1);
    let printed = c.to_toml();
    assert!(
        printed.contains("[[pool]]\nname = \"control-plane\""),
        "{printed}"
    );
    let back = Config::from_str(&printed, Path::new("<printed>"))
        .unwrap_or_else(|e| panic!("{e}\n{printed}"));
    assert_eq!(back, c, "{printed}");
    // Defaults: autonomy on, no cooldown, no pools, no custom taints.
    let d = Config::default();
    assert!(
        d.controller.autonomy
            && d.controller.disruption_cooldown.is_zero()
            && d.controller.early_suspects
    );
    assert!(d.controller.pools.is_empty() && d.controller.condition_taints.is_empty());
    // A reload names what changed.
    let keys: Vec<String> = c.changes_since(&d).into_iter().map(|ch| ch.key).collect();
    assert_eq!(
        keys,
        [
            "autonomy",
            "disruption_cooldown",
            "early_suspects",
            "pool",
            "condition_taint"
        ]
    );
}

#[test]
fn bad_policies_name_file_line_and_key() {
    let taint = |key: &str, effect: &str| {
        format!(
            "[[condition_taint]]\ncondition = \"KernelDeadlock\"\nstatus = \"True\"\nkey = \"{key}\"\neffect = \"{effect}\"\n"
        )
    };
    let cases = [
        (
            "disruption_cooldown = \"soon\"\n".to_string(),
            "conf/test.toml:1: disruption_cooldown: invalid duration",
        ),
        (
            "[[pool]]\nname = \"a\"\n".to_string(),
            "conf/test.toml:1: pool.match_labels: pool \"a\" selects no node",
        ),
        (
            "[[pool]]\nname = \"a\"\nmatch_labels = { x = \"1\" }\n[[pool]]\nname = \"a\"\nmatch_labels = { y = \"1\" }\n".to_string(),
            "conf/test.toml:5: pool.name: \"a\" names two pools",
        ),
        (
            "[[pool]]\nname = \"a\"\nmatch_expressions = [{ key = \"x\", operator = \"Maybe\" }]\n".to_string(),
            "conf/test.toml:3: pool.match_expressions.operator: must be In, NotIn, Exists or DoesNotExist",
        ),
        (
            "[[pool]]\nname = \"a\"\nmatch_expressions = [{ key = \"x\", operator = \"In\" }]\n".to_string(),
            "conf/test.toml:3: pool.match_expressions.values: In needs values",
        ),
        (
            "[[pool]]\nname = \"a\"\nmatch_labels = { x = \"1\" }\nnode_monitor_grace_period = \"10s\"\n".to_string(),
            "conf/test.toml:4: pool.node_monitor_grace_period: must be longer than api.watch_idle_timeout",
        ),
        (
            "[[pool]]\nname = \"a\"\nmatch_labels = { x = \"1\" }\nnode_eviction_rate = -1.0\n".to_string(),
            "conf/test.toml:4: pool.node_eviction_rate: must be a finite number >= 0",
        ),
        (
            "[[pool]]\nname = \"a\"\nmatch_labels = { x = \"1\" }\ngrace = \"1s\"\n".to_string(),
            "conf/test.toml:4: pool.grace: unknown key",
        ),
        (
            taint("node.kubernetes.io/kernel-deadlock", "NoExecute"),
            "conf/test.toml:4: condition_taint.key: \"node.kubernetes.io/kernel-deadlock\" is under node.kubernetes.io/",
        ),
        (
            taint("node-role.kubernetes.io/x", "NoSchedule"),
            "conf/test.toml:4: condition_taint.key: \"node-role.kubernetes.io/x\" is under node-role.kubernetes.io/",
        ),
        (
            taint("node.cloudprovider.kubernetes.io/x", "NoSchedule"),
            "conf/test.toml:4: condition_taint.key: \"node.cloudprovider.kubernetes.io/x\" is under",
        ),
        (
            format!("{}{}", taint("example.com/a", "NoSchedule"), taint("example.com/a", "NoExecute")),
            "conf/test.toml:9: condition_taint.key: \"example.com/a\" is the key of two condition taints",
        ),
        (
            taint("example.com/a", "PreferNoSchedule"),
            "conf/test.toml:5: condition_taint.effect: must be \"NoSchedule\" or \"NoExecute\"",
        ),
        (
            format!("taint_based_eviction = false\n{}", taint("example.com/a", "NoExecute")),
            "conf/test.toml:6: condition_taint.effect: NoExecute needs taint_based_eviction = true",
        ),
        (
            "[[condition_taint]]\ncondition = \"Ready\"\nstatus = \"False\"\nkey = \"example.com/a\"\neffect = \"NoSchedule\"\n".to_string(),
            "conf/test.toml:2: condition_taint.condition: must be a node condition type other than Ready",
        ),
        (
            "[[condition_taint]]\ncondition = \"KernelDeadlock\"\nstatus = \"true\"\nkey = \"example.com/a\"\neffect = \"NoSchedule\"\n".to_string(),
            "conf/test.toml:3: condition_taint.status: must be \"True\", \"False\" or \"Unknown\"",
        ),
        (
            "[[condition_taint]]\ncondition = \"KernelDeadlock\"\nstatus = \"True\"\neffect = \"NoSchedule\"\n".to_string(),
            "conf/test.toml:1: condition_taint.key: missing (required)",
        ),
    ];
    for (text, want) in cases {
        let got = error(&text);
        assert!(got.starts_with(want), "{text}\n got: {got}\nwant: {want}");
        assert!(!got.contains('\n'), "{got}");
    }
}

/// `[fencing]` is off by default, its keys are validated like the others (file, line, key) and the
/// program is checked when the config is loaded.
#[test]
fn fencing_is_off_by_default_and_its_keys_are_validated() {
    let c = parse("").unwrap();
    assert!(!c.fencing.enabled);
    assert_eq!(c.fencing.after, Duration::from_secs(300));
    assert_eq!(c.fencing.timeout, Duration::from_secs(120));
    assert_eq!(c.fencing.max_concurrent, 1);
    assert!(c.fencing.remove_out_of_service_on_recovery);

    let cases = [
        (
            "[fencing]\nenabled = true\n",
            "conf/test.toml:2: fencing.command: must be set when fencing.enabled = true",
        ),
        (
            "[fencing]\ncommand = []\n",
            "conf/test.toml:2: fencing.command: must name a program",
        ),
        (
            "[fencing]\ncommand = [\"fence-ipmi\"]\n",
            "conf/test.toml:2: fencing.command: \"fence-ipmi\" must be an absolute path",
        ),
        (
            "[fencing]\ncommand = [\"/nonexistent/fence\"]\n",
            "conf/test.toml:2: fencing.command: /nonexistent/fence: No such file",
        ),
        (
            "[fencing]\n\nmax_concurrent = 0\n",
            "conf/test.toml:3: fencing.max_concurrent: must be in 1..=64, got 0",
        ),
        (
            "[fencing]\nafter = \"0s\"\n",
            "conf/test.toml:2: fencing.after: must be greater than 0",
        ),
        (
            "[fencing]\nretry_backoff = \"10m\"\nretry_backoff_max = \"1m\"\n",
            "conf/test.toml:3: fencing.retry_backoff_max: must not be shorter",
        ),
        (
            "[fencing]\nmatch_labels = { rack = \"a b\" }\n",
            "conf/test.toml:2: fencing.match_labels.rack: \"a b\" is not a label value",
        ),
        (
            "[fencing]\ncomand = [\"/bin/true\"]\n",
            "conf/test.toml:2: fencing.comand: unknown key",
        ),
    ];
    for (text, want) in cases {
        let got = error(text);
        assert!(got.starts_with(want), "{text:?}\n got: {got}\nwant: {want}");
    }

    let plain = std::env::temp_dir().join(format!("fence-not-executable-{}", std::process::id()));
    std::fs::write(&plain, "#!/bin/sh\n").unwrap();
    let got = error(&format!(
        "[fencing]\ncommand = [{:?}]\n",
        plain.display().to_string()
    ));
    std::fs::remove_file(&plain).unwrap();
    assert!(got.ends_with("is not executable"), "{got}");

    let c = parse(
        "[fencing]\nenabled = true\ncommand = [\"/bin/sh\", \"-c\", \"exit 0\"]\nafter = \"10m\"\n\
         max_concurrent = 3\nmatch_labels = { \"node-role/storage\" = \"\" }\n",
    )
    .unwrap();
    assert_eq!(c.fencing.command, ["/bin/sh", "-c", "exit 0"]);
    assert_eq!(c.fencing.max_concurrent, 3);
    assert_eq!(
        c.fencing.match_labels,
        [("node-role/storage".to_string(), String::new())]
    );
    let printed = c.to_toml();
    assert!(printed.contains("[fencing]\nenabled = true\n"), "{printed}");
    let back = Config::from_str(&printed, Path::new("<printed>")).unwrap();
    assert_eq!(back, c, "{printed}");
}

/// kube-controller-manager's `--kube-api-content-type`: protobuf unless JSON is asked for.
#[test]
fn api_content_type_asks_protobuf_by_default_and_json_on_request() {
    let c = parse("[api]\ncontent_type = \"json\"\n").unwrap();
    assert_eq!(c.api.content_type, ContentType::Json);
    let c = parse("[api]\ncontent_type = \"protobuf\"\n").unwrap();
    assert_eq!(c.api.content_type, ContentType::Protobuf);
}

/// `skip_cordoned` (default on) and `max_pause` (default 24h) are read, rendered back and validated
/// (file, line, key).
#[test]
fn fencing_skip_cordoned_and_max_pause_are_read_rendered_and_validated() {
    let c = parse("").unwrap();
    assert!(c.fencing.skip_cordoned);
    assert_eq!(c.fencing.max_pause, Duration::from_secs(24 * 3600));
    let c = parse("[fencing]\nskip_cordoned = false\nmax_pause = \"2h\"\n").unwrap();
    assert!(!c.fencing.skip_cordoned);
    assert_eq!(c.fencing.max_pause, Duration::from_secs(7200));
    let rendered = super::render::to_toml(&c);
    assert!(rendered.contains("skip_cordoned = false"), "{rendered}");
    assert!(rendered.contains("max_pause = \"2h\""), "{rendered}");
    for (text, want) in [
        (
            "[fencing]\n\nmax_pause = \"0s\"\n",
            "conf/test.toml:3: fencing.max_pause: must be greater than 0",
        ),
        (
            "[fencing]\nskip_cordoned = \"yes\"\n",
            "conf/test.toml:2: fencing.skip_cordoned",
        ),
    ] {
        let got = error(text);
        assert!(got.starts_with(want), "{text:?}\n got: {got}\nwant: {want}");
    }
}

/// `mode`, `on_command`, `recover_timeout` and `[[fencing.step]]` are read, rendered back (the
/// rendering parses to the same config) and validated (file, line, key).
#[test]
fn fencing_power_cycle_and_steps_are_read_rendered_and_validated() {
    use super::{FenceMode, FenceStepConfig};
    let c = parse("").unwrap();
    assert_eq!(c.fencing.mode, FenceMode::PowerOff);
    assert_eq!(c.fencing.recover_timeout, Duration::from_secs(600));
    assert!(c.fencing.steps.is_empty());
    let text = "[fencing]\nmode = \"power-cycle\"\non_command = [\"/bin/true\", \"on\"]\n\
                recover_timeout = \"5m\"\n[[fencing.step]]\ncommand = [\"/bin/true\", \"soft\"]\n\
                timeout = \"30s\"\n[[fencing.step]]\ncommand = [\"/bin/false\"]\ntimeout = \"1m\"\n";
    let c = parse(text).unwrap();
    assert_eq!(c.fencing.mode, FenceMode::PowerCycle);
    assert_eq!(c.fencing.on_command, ["/bin/true", "on"]);
    assert_eq!(
        c.fencing.effective_steps(),
        [
            FenceStepConfig {
                command: vec!["/bin/true".into(), "soft".into()],
                timeout: Duration::from_secs(30)
            },
            FenceStepConfig {
                command: vec!["/bin/false".into()],
                timeout: Duration::from_secs(60)
            }
        ]
    );
    let rendered = super::render::to_toml(&c);
    let again = parse(&rendered).unwrap();
    assert_eq!(again.fencing, c.fencing, "{rendered}");
    let one = parse("[fencing]\ncommand = [\"/bin/true\"]\ntimeout = \"7s\"\n").unwrap();
    assert_eq!(one.fencing.effective_steps().len(), 1);
    assert_eq!(
        one.fencing.effective_steps()[0].timeout,
        Duration::from_secs(7)
    );
    for (text, want) in [
        (
            "[fencing]\nmode = \"power-cycle\"\n",
            "conf/test.toml:2: fencing.on_command: must be set when fencing.mode = \"power-cycle\"",
        ),
        (
            "[fencing]\nmode = \"reboot\"\n",
            "conf/test.toml:2: fencing.mode: \"reboot\": must be",
        ),
        (
            "[fencing]\n[[fencing.step]]\ncommand = [\"/bin/true\"]\n",
            "conf/test.toml:2: fencing.step[0].timeout: every step needs a timeout",
        ),
        (
            "[fencing]\n[[fencing.step]]\ntimeout = \"1m\"\n",
            "conf/test.toml:2: fencing.step[0].command: every step needs a command",
        ),
        (
            "[fencing]\n[[fencing.step]]\ncommand = [\"/nonexistent/off\"]\ntimeout = \"1m\"\n",
            "conf/test.toml:3: fencing.step[0].command: /nonexistent/off: No such file",
        ),
        (
            "[fencing]\non_command = [\"relative\"]\n",
            "conf/test.toml:2: fencing.on_command: \"relative\" must be an absolute path",
        ),
        (
            "[fencing]\ncommand = [\"/bin/true\"]\n[[fencing.step]]\ncommand = [\"/bin/true\"]\ntimeout = \"1m\"\n",
            "conf/test.toml:2: fencing.command: set either fencing.command or [[fencing.step]]",
        ),
        (
            "[fencing]\nrecover_timeout = \"0s\"\n",
            "conf/test.toml:2: fencing.recover_timeout: must be greater than 0",
        ),
    ] {
        let got = error(text);
        assert!(got.starts_with(want), "{text:?}\n got: {got}\nwant: {want}");
    }
}
