//! `[[pool]]` and `[[condition_taint]]`: read, printed and read back, and their errors.

use super::*;

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
            // The node-readiness-controller's gates: a rule of ours would remove them.
            taint("readiness.k8s.io/NetworkReady", "NoSchedule"),
            "conf/test.toml:4: condition_taint.key: \"readiness.k8s.io/NetworkReady\" is under readiness.k8s.io/",
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
