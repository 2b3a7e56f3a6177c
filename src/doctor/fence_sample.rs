//! `node-lifecycled doctor --fence-sample N`: the fence agent's credentials checked before an
//! outage needs them. `[fencing] status_command` runs against up to N nodes that `match_labels`
//! selects, one at a time, with the fence command's environment (`FENCE_STEP=status`) and
//! `timeout`; each answer is one line of the report.

use k8s_openapi::api::core::v1 as core;

use crate::config::Config;
use crate::controller::fencing::{FenceCommand, FenceOutcome, FenceStep};
use crate::kube::ApiClient;
use crate::model::Name;
use crate::runtime::fencing::run_blocking;

use super::{Check, Report};

const GROUP: &str = "fencing";

#[derive(serde::Deserialize)]
struct NodeList {
    #[serde(default)]
    items: Vec<core::Node>,
}

/// The node as the status command is told about it (every label, the addresses).
pub(crate) fn command_for(node: &core::Node) -> FenceCommand {
    let meta = &node.metadata;
    FenceCommand {
        step: FenceStep::Status,
        node: Name::from(meta.name.clone().unwrap_or_default()),
        uid: Name::from(meta.uid.clone().unwrap_or_default()),
        addresses: node
            .status
            .as_ref()
            .and_then(|s| s.addresses.clone())
            .unwrap_or_default()
            .into_iter()
            .map(|a| (a.type_, a.address))
            .collect(),
        labels: meta
            .labels
            .clone()
            .unwrap_or_default()
            .into_iter()
            .collect(),
    }
}

/// One check per sampled node (ok, or fail with the answer), or why none ran.
pub(crate) fn check(client: &mut ApiClient, config: &Config, sample: usize, report: &mut Report) {
    let f = &config.fencing;
    if f.status_command.is_empty() {
        report.push(
            Check::warn(
                GROUP,
                "status command",
                "fencing.status_command is not set: the fence agent's credentials cannot be checked",
            )
            .action("set [fencing] status_command (e.g. the IPMI script with `status`)"),
        );
        return;
    }
    let list: NodeList = match client.get_json("/api/v1/nodes?limit=500") {
        Ok(l) => l,
        Err(e) => {
            report.push(Check::fail(
                GROUP,
                "status command",
                format!("nodes cannot be listed: {e}"),
            ));
            return;
        }
    };
    let selected: Vec<FenceCommand> = list
        .items
        .iter()
        .map(command_for)
        .filter(|c| {
            f.match_labels
                .iter()
                .all(|(k, v)| c.labels.iter().any(|(lk, lv)| lk == k && lv == v))
        })
        .take(sample)
        .collect();
    if selected.is_empty() {
        report.push(Check::warn(
            GROUP,
            "status command",
            "no node matches fencing.match_labels: nothing to check",
        ));
        return;
    }
    for command in selected {
        let (outcome, output) = run_blocking(&f.status_command, f.timeout, &command);
        let name = format!("status command {}", command.node);
        let said = if output.is_empty() {
            String::new()
        } else {
            format!(": {output}")
        };
        report.push(match outcome {
            FenceOutcome::Exited(0) => Check::ok(GROUP, name, format!("exit 0{said}")),
            other => Check::fail(GROUP, name, format!("{other}{said}")).action(
                "fix the fence agent's address or credentials for this node before it has to be fenced",
            ),
        });
    }
}
