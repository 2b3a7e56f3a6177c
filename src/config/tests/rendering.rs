//! The effective configuration printed (it reads back the same), the differences a reload
//! logs, and what is chosen at start.

use super::*;

#[test]
fn effective_config_reads_back_to_the_same_config() {
    let samples = [
        "",
        "node_eviction_rate = 0.3\nsecondary_node_eviction_rate = 0\nmetrics_address = \"[::1]:9184\"\nlog_level = \"debug\"\ndump_format = \"json\"\nnode_monitor_period = \"1m30s\"\nnode_monitor_grace_period = \"3m\"\nnode_startup_grace_period = \"3m\"",
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
