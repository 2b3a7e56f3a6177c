//! Scenarios for `node-lifecycled-sim run`: a cluster shape, kubelet and daemon timings short
//! enough for a demo, steps on a timeline (stop a node's heartbeat, set a condition, cut the
//! watches, …) and expectations about what the daemon writes.
//!
//! A scenario is a TOML file; the built-in ones are embedded (`conf/scenarios/*.toml`). As in the
//! daemon's configuration, an unknown key or a bad value is an error naming the line:
//!
//! ```toml
//! description = "one node dies for good"
//! duration = "30s"
//! [cluster]          # nodes, zones, pods_per_node, daemonset, default_toleration, patient_toleration
//! [kubelet]          # renew_interval, status_update_interval, status_report_interval
//! [daemon]           # any key of the daemon's config.toml, e.g. node_monitor_grace_period = "5s"
//! [[step]]
//! at = "5s"
//! stop_heartbeat = ["z1-n005"]
//! [[expect]]
//! nodes = ["z1-n005"]
//! ready = "Unknown"
//! by = "12s"
//! ```

mod builtin;
mod daemon;
mod expect;
mod parse;
mod play;
mod runner;
pub(crate) mod shadow;
mod summary;

use std::time::Duration;

pub use builtin::{BUILTIN, builtin};
pub use daemon::{daemon_config, kubeconfig_yaml};
pub use expect::{Outcome, evaluate};
pub use parse::ScenarioError;
pub use runner::{RunOptions, RunReport, run};
pub use summary::zone_summary;

use super::kubelets::KubeletConfig;
use super::population::{PodKind, Population, Toleration};

#[derive(Clone, Debug)]
pub struct Scenario {
    pub name: String,
    pub description: String,
    /// How long the scenario runs once the daemon has started.
    pub duration: Duration,
    pub population: Population,
    pub kubelet: KubeletConfig,
    /// Overrides of the daemon's configuration (keys of its config.toml), over the demo defaults.
    pub daemon: toml::Table,
    /// In time order.
    pub steps: Vec<Step>,
    pub expects: Vec<Expect>,
    /// Run an incumbent (`incumbent.rs`: kube-controller-manager's batch rules) beside the
    /// daemon, which runs in shadow mode; the shadow report is printed at the end.
    pub incumbent: bool,
    /// What the shadow report must say.
    pub shadow_expects: Vec<ShadowExpect>,
}

/// `[[shadow_expect]]`: how many pairs of a class (and kind, and rule) the report has.
#[derive(Clone, Debug, PartialEq)]
pub struct ShadowExpect {
    /// `same`, `earlier`, `later`, `only_ours`, `only_theirs`.
    pub class: String,
    /// `node_unknown`, `taint_added`, …; `None`: every kind.
    pub kind: Option<String>,
    /// Only divergences this rule explains (`"none"`: those no rule explains).
    pub rule: Option<String>,
    pub at_least: usize,
    pub at_most: Option<usize>,
    pub line: usize,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Step {
    /// Since the daemon started.
    pub at: Duration,
    pub action: Action,
    /// Line in the scenario file.
    pub line: usize,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Action {
    StopHeartbeat(Vec<String>),
    ResumeHeartbeat(Vec<String>),
    Reboot {
        nodes: Vec<String>,
        down: Duration,
    },
    /// The kubelets of `nodes` report `condition` with `status` from now on.
    SetCondition {
        nodes: Vec<String>,
        condition: String,
        status: String,
    },
    /// A taint added by someone else (an operator, another controller).
    AddTaint {
        nodes: Vec<String>,
        key: String,
        value: String,
        effect: String,
    },
    RemoveTaint {
        nodes: Vec<String>,
        key: String,
        effect: String,
    },
    /// Sets a label (`annotation: false`) or an annotation on `nodes`, as an operator would.
    SetMetadata {
        nodes: Vec<String>,
        annotation: bool,
        key: String,
        value: String,
    },
    /// `per_node` pods named `<prefix>-<node>-<i>` in `default` on each node.
    AddPods {
        nodes: Vec<String>,
        per_node: usize,
        prefix: String,
        toleration: Toleration,
    },
    /// Every watch connection is cut (the daemon must resume without losing events).
    DropWatches,
    /// Watches deliver nothing for this long.
    StallWatches(Duration),
    /// The API server goes away for this long (connections closed, new ones refused).
    RestartApi(Duration),
    /// Only printed on the timeline.
    Note(String),
}

impl Action {
    /// One line for the timeline.
    pub fn describe(&self) -> String {
        let list = |nodes: &[String]| short_list(nodes, 6);
        match self {
            Action::StopHeartbeat(n) => format!("stop heartbeat {}", list(n)),
            Action::ResumeHeartbeat(n) => format!("resume heartbeat {}", list(n)),
            Action::Reboot { nodes, down } => format!(
                "reboot {} (silent {})",
                list(nodes),
                node_lifecycled::config::format_duration(*down)
            ),
            Action::SetCondition {
                nodes,
                condition,
                status,
            } => format!("kubelet reports {condition}={status} on {}", list(nodes)),
            Action::AddTaint {
                nodes,
                key,
                value,
                effect,
            } => {
                let v = if value.is_empty() {
                    String::new()
                } else {
                    format!("={value}")
                };
                format!("add taint {key}{v}:{effect} to {}", list(nodes))
            }
            Action::RemoveTaint { nodes, key, effect } => {
                format!("remove taint {key}:{effect} from {}", list(nodes))
            }
            Action::SetMetadata {
                nodes,
                annotation,
                key,
                value,
            } => {
                let what = if *annotation { "annotate" } else { "label" };
                format!("{what} {} with {key}={value}", list(nodes))
            }
            Action::AddPods {
                nodes,
                per_node,
                prefix,
                toleration,
            } => format!(
                "add {per_node} pod(s) {prefix}-* per node on {} ({})",
                list(nodes),
                toleration_text(*toleration)
            ),
            Action::DropWatches => "cut every watch connection".to_string(),
            Action::StallWatches(d) => format!(
                "stall every watch for {}",
                node_lifecycled::config::format_duration(*d)
            ),
            Action::RestartApi(d) => {
                format!(
                    "API server down for {}",
                    node_lifecycled::config::format_duration(*d)
                )
            }
            Action::Note(text) => text.clone(),
        }
    }
}

fn toleration_text(t: Toleration) -> String {
    match t {
        Toleration::None => "no NoExecute toleration".into(),
        Toleration::Forever => "tolerate not-ready/unreachable forever".into(),
        Toleration::Seconds(s) => format!("tolerate not-ready/unreachable {s}s"),
    }
}

/// `a, b, c (+N more)`.
pub(crate) fn short_list(items: &[String], max: usize) -> String {
    let mut text = items[..items.len().min(max)].join(", ");
    if items.len() > max {
        text.push_str(&format!(" (+{} more)", items.len() - max));
    }
    text
}

/// What an expectation is about.
#[derive(Clone, Debug, PartialEq)]
pub enum Subject {
    Nodes(Vec<String>),
    Pods(Vec<String>),
    /// The pods bound to these nodes (population and added pods), optionally of one kind.
    PodsOn {
        nodes: Vec<String>,
        kind: Option<PodKind>,
    },
}

/// What must (or must not) happen to each subject.
#[derive(Clone, Debug, PartialEq)]
pub enum Check {
    /// The daemon set the node's Ready condition to this status.
    Ready(String),
    /// The daemon added this taint (`key:Effect`).
    Taint(String),
    /// The daemon removed this taint.
    Untaint(String),
    /// At the end, the node carries this controller taint (by the daemon's last write).
    TaintAtEnd(String),
    /// The daemon marked the pod NotReady.
    NotReady,
    /// The daemon deleted the pod.
    Deleted,
    /// The daemon recorded an event with this reason about the subject.
    Event(String),
    /// The daemon's fence command ran exactly this many times for the node over the whole run
    /// (lines `NODE_NAME …` the scenario's command appends to
    /// `$NODE_LIFECYCLED_SIM_WORK_DIR/fence-runs`).
    FenceRuns(usize),
}

/// How many subjects must pass the check.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Quantity {
    All,
    Never,
    AtLeast(usize),
    AtMost(usize),
}

#[derive(Clone, Debug, PartialEq)]
pub struct Expect {
    pub subject: Subject,
    pub check: Check,
    pub quantity: Quantity,
    /// The window in which the fact counts (since the daemon started).
    pub after: Duration,
    pub by: Option<Duration>,
    /// Line in the scenario file.
    pub line: usize,
}

impl Scenario {
    /// Parses a scenario; `source` names it in errors (a path, or `builtin:<name>`).
    pub fn parse(text: &str, source: &str) -> Result<Scenario, ScenarioError> {
        parse::parse(text, source)
    }

    /// A built-in scenario by name, or a file.
    pub fn load(name_or_path: &str) -> Result<Scenario, ScenarioError> {
        if let Some(text) = builtin(name_or_path) {
            return Scenario::parse(text, &format!("builtin:{name_or_path}"));
        }
        let path = std::path::Path::new(name_or_path);
        if !path.exists() && !name_or_path.contains(['/', '.']) {
            let names: Vec<&str> = BUILTIN.iter().map(|(n, _)| *n).collect();
            return Err(ScenarioError::plain(format!(
                "no built-in scenario {name_or_path:?} and no such file (built-in: {})",
                names.join(", ")
            )));
        }
        let text = std::fs::read_to_string(path).map_err(|e| {
            ScenarioError::plain(format!("cannot read scenario {name_or_path}: {e}"))
        })?;
        Scenario::parse(&text, name_or_path)
    }
}
