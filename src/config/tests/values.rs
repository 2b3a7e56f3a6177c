//! Defaults, and every key's errors: unknown keys, wrong types, syntax, ranges, rules between
//! keys, each one line naming file, line and key.

use super::*;

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

/// An operator who sets `node_monitor_period` to the grace (or above) would get a daemon that
/// counts every healthy node as a suspect and never taints or fences: the file is refused in
/// one line naming both keys (exit 78, as every `ConfigError`), globally and per pool.
#[test]
fn a_monitor_period_not_well_below_every_grace_is_refused_naming_the_keys() {
    let e = error("node_monitor_period = \"50s\"\n");
    assert!(
        e.starts_with(
            "conf/test.toml:1: node_monitor_period: node_monitor_period (50s) must be at most \
             half of node_monitor_grace_period (50s): a node counts as a suspect once silent"
        ),
        "{e}"
    );
    assert!(!e.contains('\n'), "{e}");
    // Both written: the error points at the period.
    let e = error("node_monitor_grace_period = \"40s\"\nnode_monitor_period = \"21s\"\n");
    assert!(
        e.starts_with("conf/test.toml:2: node_monitor_period: node_monitor_period (21s) must be at most half of node_monitor_grace_period (40s)"),
        "{e}"
    );
    // The startup grace is a grace too.
    let e = error(
        "node_monitor_period = \"20s\"\nnode_monitor_grace_period = \"40s\"\nnode_startup_grace_period = \"30s\"\n",
    );
    assert!(e.contains("half of node_startup_grace_period (30s)"), "{e}");
    // Exactly half is accepted.
    parse("node_monitor_period = \"20s\"\nnode_monitor_grace_period = \"40s\"\n").unwrap();
    // A pool's own grace is checked against the (global) period.
    let pool = "node_monitor_period = \"5s\"\n[[pool]]\nname = \"edge\"\nmatch_labels = { tier = \"edge\" }\n";
    let e = error(&format!(
        "{pool}node_monitor_grace_period = \"9s\"\n[api]\nwatch_idle_timeout = \"4s\"\n"
    ));
    assert!(
        e.starts_with("conf/test.toml:5: pool.node_monitor_grace_period: node_monitor_period (5s) must be at most half of pool.node_monitor_grace_period of pool \"edge\" (9s)"),
        "{e}"
    );
    let e = error(&format!("{pool}node_startup_grace_period = \"8s\"\n"));
    assert!(
        e.contains("pool.node_startup_grace_period: node_monitor_period (5s)"),
        "{e}"
    );
    parse(&format!("{pool}node_monitor_grace_period = \"40s\"\n")).unwrap();
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

/// kube-controller-manager's `--kube-api-content-type`: protobuf unless JSON is asked for.
#[test]
fn api_content_type_asks_protobuf_by_default_and_json_on_request() {
    let c = parse("[api]\ncontent_type = \"json\"\n").unwrap();
    assert_eq!(c.api.content_type, ContentType::Json);
    let c = parse("[api]\ncontent_type = \"protobuf\"\n").unwrap();
    assert_eq!(c.api.content_type, ContentType::Protobuf);
}
