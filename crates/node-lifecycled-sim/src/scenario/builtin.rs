//! The scenarios `run` knows by name, embedded so that `run` needs no files.

/// (name, TOML), `default` first.
pub const BUILTIN: &[(&str, &str)] = &[
    (
        "default",
        include_str!("../../../../conf/scenarios/default.toml"),
    ),
    (
        "node-failure",
        include_str!("../../../../conf/scenarios/node-failure.toml"),
    ),
    (
        "zone-outage",
        include_str!("../../../../conf/scenarios/zone-outage.toml"),
    ),
    (
        "control-plane-partition",
        include_str!("../../../../conf/scenarios/control-plane-partition.toml"),
    ),
    (
        "flapping-node",
        include_str!("../../../../conf/scenarios/flapping-node.toml"),
    ),
    (
        "rolling-reboot",
        include_str!("../../../../conf/scenarios/rolling-reboot.toml"),
    ),
    (
        "edge-autonomy",
        include_str!("../../../../conf/scenarios/edge-autonomy.toml"),
    ),
    (
        "pools",
        include_str!("../../../../conf/scenarios/pools.toml"),
    ),
    (
        "custom-condition",
        include_str!("../../../../conf/scenarios/custom-condition.toml"),
    ),
    (
        "control-plane-recovery",
        include_str!("../../../../conf/scenarios/control-plane-recovery.toml"),
    ),
    (
        "fencing",
        include_str!("../../../../conf/scenarios/fencing.toml"),
    ),
    (
        "brake",
        include_str!("../../../../conf/scenarios/brake.toml"),
    ),
    (
        "pool-fast-failover",
        include_str!("../../../../conf/scenarios/pool-fast-failover.toml"),
    ),
    (
        "site-cut-off",
        include_str!("../../../../conf/scenarios/site-cut-off.toml"),
    ),
    (
        "site-dark-hold",
        include_str!("../../../../conf/scenarios/site-dark-hold.toml"),
    ),
    (
        "fencing-maintenance",
        include_str!("../../../../conf/scenarios/fencing-maintenance.toml"),
    ),
    (
        "fencing-power-cycle",
        include_str!("../../../../conf/scenarios/fencing-power-cycle.toml"),
    ),
    (
        "planned-maintenance",
        include_str!("../../../../conf/scenarios/planned-maintenance.toml"),
    ),
    (
        "readiness-gates",
        include_str!("../../../../conf/scenarios/readiness-gates.toml"),
    ),
];

/// The TOML of a built-in scenario.
pub fn builtin(name: &str) -> Option<&'static str> {
    BUILTIN.iter().find(|(n, _)| *n == name).map(|(_, t)| *t)
}
