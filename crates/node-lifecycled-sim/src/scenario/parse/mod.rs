//! Scenario TOML -> `Scenario`. Unknown keys, bad durations, node patterns that match no node and
//! steps or expectations that say too much or too little are errors naming the line.

use std::fmt;
use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;

use super::{Action, Check, Expect, Quantity, Scenario, Step, Subject};
use crate::kubelets::KubeletConfig;
use crate::population::{PodKind, Population, Toleration};
use node_lifecycled::config::parse_duration;

/// `source:line: message`, one line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScenarioError {
    pub source: String,
    pub line: Option<usize>,
    pub message: String,
}

impl ScenarioError {
    pub(crate) fn plain(message: String) -> ScenarioError {
        ScenarioError {
            source: String::new(),
            line: None,
            message,
        }
    }
}

impl fmt::Display for ScenarioError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.source.is_empty(), self.line) {
            (true, _) => write!(f, "{}", self.message),
            (false, Some(line)) => write!(f, "{}:{line}: {}", self.source, self.message),
            (false, None) => write!(f, "{}: {}", self.source, self.message),
        }
    }
}

impl std::error::Error for ScenarioError {}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawScenario {
    name: Option<String>,
    description: Option<String>,
    duration: Spanned<String>,
    cluster: Option<RawCluster>,
    kubelet: Option<RawKubelet>,
    daemon: Option<toml::Table>,
    #[serde(default)]
    step: Vec<Spanned<RawStep>>,
    #[serde(default)]
    expect: Vec<Spanned<RawExpect>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCluster {
    nodes: Option<Spanned<usize>>,
    zones: Option<Spanned<usize>>,
    pods_per_node: Option<usize>,
    daemonset: Option<bool>,
    default_toleration: Option<Spanned<String>>,
    patient_toleration: Option<Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawKubelet {
    renew_interval: Option<Spanned<String>>,
    status_update_interval: Option<Spanned<String>>,
    status_report_interval: Option<Spanned<String>>,
    jitter: Option<f64>,
    seed: Option<u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawStep {
    at: String,
    stop_heartbeat: Option<Vec<String>>,
    resume_heartbeat: Option<Vec<String>>,
    reboot: Option<Vec<String>>,
    /// With `reboot`.
    down: Option<String>,
    /// `Type=Status`, with `nodes`.
    set_condition: Option<String>,
    /// `key[=value]:Effect`, with `nodes`.
    add_taint: Option<String>,
    /// `key:Effect`, with `nodes`.
    remove_taint: Option<String>,
    /// `key=value`, with `nodes`.
    label: Option<String>,
    /// `key=value`, with `nodes`.
    annotate: Option<String>,
    /// Pods per node, with `nodes`, optional `toleration` and `prefix`.
    add_pods: Option<usize>,
    toleration: Option<String>,
    prefix: Option<String>,
    drop_watches: Option<bool>,
    stall_watches: Option<String>,
    restart_api: Option<String>,
    note: Option<String>,
    nodes: Option<Vec<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawExpect {
    nodes: Option<Vec<String>>,
    except: Option<Vec<String>>,
    pods: Option<Vec<String>>,
    pods_on: Option<Vec<String>>,
    kind: Option<String>,
    ready: Option<String>,
    taint: Option<String>,
    untaint: Option<String>,
    taint_at_end: Option<String>,
    not_ready: Option<bool>,
    deleted: Option<bool>,
    event: Option<String>,
    fence_runs: Option<usize>,
    never: Option<bool>,
    at_least: Option<usize>,
    at_most: Option<usize>,
    after: Option<String>,
    by: Option<String>,
}

struct Ctx<'a> {
    text: &'a str,
    source: &'a str,
    nodes: Vec<String>,
}

impl Ctx<'_> {
    fn line(&self, offset: usize) -> usize {
        self.text[..offset.min(self.text.len())]
            .bytes()
            .filter(|b| *b == b'\n')
            .count()
            + 1
    }

    fn err(&self, offset: Option<usize>, message: impl Into<String>) -> ScenarioError {
        ScenarioError {
            source: self.source.to_string(),
            line: offset.map(|o| self.line(o)),
            message: message.into(),
        }
    }

    fn duration(&self, offset: usize, key: &str, text: &str) -> Result<Duration, ScenarioError> {
        parse_duration(text).map_err(|e| self.err(Some(offset), format!("{key}: {e}")))
    }

    fn spanned_duration(
        &self,
        value: &Option<Spanned<String>>,
        key: &str,
        default: Duration,
    ) -> Result<Duration, ScenarioError> {
        match value {
            None => Ok(default),
            Some(v) => self.duration(v.span().start, key, v.get_ref()),
        }
    }

    /// Node names matching the patterns: a name, `prefix*`, or `*`.
    fn nodes(
        &self,
        offset: usize,
        key: &str,
        patterns: &[String],
    ) -> Result<Vec<String>, ScenarioError> {
        let mut out: Vec<String> = Vec::new();
        for pattern in patterns {
            let matched: Vec<&String> = match pattern.strip_suffix('*') {
                Some(prefix) => self
                    .nodes
                    .iter()
                    .filter(|n| n.starts_with(prefix))
                    .collect(),
                None => self.nodes.iter().filter(|n| *n == pattern).collect(),
            };
            if matched.is_empty() {
                let example = self.nodes.first().map_or("", String::as_str);
                return Err(self.err(
                    Some(offset),
                    format!(
                        "{key}: {pattern:?} matches no node of the cluster ({} nodes, named like {example:?})",
                        self.nodes.len()
                    ),
                ));
            }
            for n in matched {
                if !out.contains(n) {
                    out.push(n.clone());
                }
            }
        }
        if out.is_empty() {
            return Err(self.err(Some(offset), format!("{key}: names no node")));
        }
        Ok(out)
    }
}

pub(super) fn parse(text: &str, source: &str) -> Result<Scenario, ScenarioError> {
    let mut ctx = Ctx {
        text,
        source,
        nodes: Vec::new(),
    };
    let raw: RawScenario = toml::from_str(text).map_err(|e| toml_error(&ctx, &e))?;
    let duration = ctx.duration(
        raw.duration.span().start,
        "duration",
        raw.duration.get_ref(),
    )?;

    let mut population = Population::default();
    if let Some(c) = &raw.cluster {
        if let Some(n) = &c.nodes {
            if *n.get_ref() == 0 {
                return Err(ctx.err(Some(n.span().start), "cluster.nodes: must be at least 1"));
            }
            population.nodes = *n.get_ref();
        }
        if let Some(z) = &c.zones {
            if *z.get_ref() == 0 {
                return Err(ctx.err(Some(z.span().start), "cluster.zones: must be at least 1"));
            }
            population.zones = *z.get_ref();
        }
        population.pods_per_node = c.pods_per_node.unwrap_or(population.pods_per_node);
        population.daemonset = c.daemonset.unwrap_or(population.daemonset);
        population.default_toleration = ctx.spanned_duration(
            &c.default_toleration,
            "cluster.default_toleration",
            population.default_toleration,
        )?;
        population.patient_toleration = ctx.spanned_duration(
            &c.patient_toleration,
            "cluster.patient_toleration",
            population.patient_toleration,
        )?;
    }
    ctx.nodes = population.node_names();

    let mut kubelet = KubeletConfig::default();
    if let Some(k) = &raw.kubelet {
        kubelet.renew_interval = ctx.spanned_duration(
            &k.renew_interval,
            "kubelet.renew_interval",
            kubelet.renew_interval,
        )?;
        kubelet.status_update_interval = ctx.spanned_duration(
            &k.status_update_interval,
            "kubelet.status_update_interval",
            kubelet.status_update_interval,
        )?;
        kubelet.status_report_interval = ctx.spanned_duration(
            &k.status_report_interval,
            "kubelet.status_report_interval",
            kubelet.status_report_interval,
        )?;
        for (value, key) in [
            (&k.renew_interval, "kubelet.renew_interval"),
            (&k.status_update_interval, "kubelet.status_update_interval"),
        ] {
            if let Some(v) = value {
                if ctx.duration(v.span().start, key, v.get_ref())?.is_zero() {
                    return Err(ctx.err(Some(v.span().start), format!("{key}: must be > 0")));
                }
            }
        }
        kubelet.jitter = k.jitter.unwrap_or(kubelet.jitter).clamp(0.0, 1.0);
        kubelet.seed = k.seed.unwrap_or(kubelet.seed);
    }

    let mut steps = Vec::new();
    for step in &raw.step {
        steps.push(parse_step(&ctx, step.span().start, step.get_ref())?);
    }
    steps.sort_by_key(|s| s.at);
    let mut expects = Vec::new();
    for expect in &raw.expect {
        expects.push(parse_expect(&ctx, expect.span().start, expect.get_ref())?);
    }
    let name = raw.name.clone().unwrap_or_else(|| {
        source
            .rsplit('/')
            .next()
            .unwrap_or(source)
            .trim_start_matches("builtin:")
            .trim_end_matches(".toml")
            .to_string()
    });
    Ok(Scenario {
        name,
        description: raw.description.clone().unwrap_or_default(),
        duration,
        population,
        kubelet,
        daemon: raw.daemon.clone().unwrap_or_default(),
        steps,
        expects,
    })
}

fn toml_error(ctx: &Ctx, e: &toml::de::Error) -> ScenarioError {
    let offset = e.span().map(|s| s.start);
    let message = e.message().lines().next().unwrap_or("").to_string();
    // serde's "unknown field `x`, expected one of …": name the key first, as the config does.
    let message = match message
        .strip_prefix("unknown field `")
        .and_then(|m| m.split_once('`'))
    {
        Some((key, rest)) => format!("{key}: unknown key{rest}"),
        None => message,
    };
    ctx.err(offset, message)
}

fn parse_step(ctx: &Ctx, offset: usize, s: &RawStep) -> Result<Step, ScenarioError> {
    let at = ctx.duration(offset, "at", &s.at)?;
    let err = |m: String| ctx.err(Some(offset), m);
    let nodes_for = |key: &str| -> Result<Vec<String>, ScenarioError> {
        match &s.nodes {
            Some(n) => ctx.nodes(offset, "nodes", n),
            None => Err(err(format!("{key} needs nodes = [...]"))),
        }
    };
    let mut actions: Vec<(&str, Action)> = Vec::new();
    if let Some(n) = &s.stop_heartbeat {
        actions.push((
            "stop_heartbeat",
            Action::StopHeartbeat(ctx.nodes(offset, "stop_heartbeat", n)?),
        ));
    }
    if let Some(n) = &s.resume_heartbeat {
        actions.push((
            "resume_heartbeat",
            Action::ResumeHeartbeat(ctx.nodes(offset, "resume_heartbeat", n)?),
        ));
    }
    if let Some(n) = &s.reboot {
        let down = match &s.down {
            Some(d) => ctx.duration(offset, "down", d)?,
            None => return Err(err("reboot needs down = \"<duration>\"".into())),
        };
        actions.push((
            "reboot",
            Action::Reboot {
                nodes: ctx.nodes(offset, "reboot", n)?,
                down,
            },
        ));
    }
    if let Some(c) = &s.set_condition {
        let Some((condition, status)) = c.split_once('=') else {
            return Err(err(format!(
                "set_condition: {c:?} must be Type=Status, e.g. \"Ready=False\""
            )));
        };
        if !matches!(status, "True" | "False" | "Unknown") || condition.is_empty() {
            return Err(err(format!(
                "set_condition: {c:?} must be Type=True|False|Unknown"
            )));
        }
        actions.push((
            "set_condition",
            Action::SetCondition {
                nodes: nodes_for("set_condition")?,
                condition: condition.to_string(),
                status: status.to_string(),
            },
        ));
    }
    if let Some(t) = &s.add_taint {
        let (key, value, effect) = parse_taint(t).ok_or_else(|| {
            err(format!(
                "add_taint: {t:?} must be key[=value]:NoSchedule|PreferNoSchedule|NoExecute"
            ))
        })?;
        actions.push((
            "add_taint",
            Action::AddTaint {
                nodes: nodes_for("add_taint")?,
                key,
                value,
                effect,
            },
        ));
    }
    if let Some(t) = &s.remove_taint {
        let (key, _, effect) = parse_taint(t).ok_or_else(|| {
            err(format!(
                "remove_taint: {t:?} must be key:NoSchedule|PreferNoSchedule|NoExecute"
            ))
        })?;
        actions.push((
            "remove_taint",
            Action::RemoveTaint {
                nodes: nodes_for("remove_taint")?,
                key,
                effect,
            },
        ));
    }
    for (field, annotation, name) in [(&s.label, false, "label"), (&s.annotate, true, "annotate")] {
        let Some(text) = field else {
            continue;
        };
        let Some((key, value)) = text.split_once('=').filter(|(k, _)| !k.is_empty()) else {
            return Err(err(format!("{name}: {text:?} must be key=value")));
        };
        actions.push((
            name,
            Action::SetMetadata {
                nodes: nodes_for(name)?,
                annotation,
                key: key.to_string(),
                value: value.to_string(),
            },
        ));
    }
    if let Some(per_node) = s.add_pods {
        let toleration = match s.toleration.as_deref() {
            None => Toleration::None,
            Some("none") => Toleration::None,
            Some("forever") => Toleration::Forever,
            Some(d) => Toleration::Seconds(ctx.duration(offset, "toleration", d)?.as_secs()),
        };
        actions.push((
            "add_pods",
            Action::AddPods {
                nodes: nodes_for("add_pods")?,
                per_node,
                prefix: s.prefix.clone().unwrap_or_else(|| "added".to_string()),
                toleration,
            },
        ));
    }
    if let Some(drop) = s.drop_watches {
        if !drop {
            return Err(err("drop_watches: only true means something".into()));
        }
        actions.push(("drop_watches", Action::DropWatches));
    }
    if let Some(d) = &s.stall_watches {
        actions.push((
            "stall_watches",
            Action::StallWatches(ctx.duration(offset, "stall_watches", d)?),
        ));
    }
    if let Some(d) = &s.restart_api {
        actions.push((
            "restart_api",
            Action::RestartApi(ctx.duration(offset, "restart_api", d)?),
        ));
    }
    let action = match actions.len() {
        0 => match &s.note {
            Some(note) => Action::Note(note.clone()),
            None => return Err(err(
                "a step needs one action: stop_heartbeat, resume_heartbeat, reboot, set_condition, \
                 add_taint, remove_taint, label, annotate, add_pods, drop_watches, stall_watches, \
                 restart_api or note"
                    .into(),
            )),
        },
        1 => actions.remove(0).1,
        _ => {
            let names: Vec<&str> = actions.iter().map(|(n, _)| *n).collect();
            return Err(err(format!(
                "one action per step, this one has {} (split it into several [[step]]s at the same time)",
                names.join(" and ")
            )));
        }
    };
    let used_nodes = matches!(
        action,
        Action::SetCondition { .. }
            | Action::AddTaint { .. }
            | Action::RemoveTaint { .. }
            | Action::SetMetadata { .. }
            | Action::AddPods { .. }
    );
    if s.nodes.is_some() && !used_nodes {
        return Err(err(
            "nodes: only set_condition, add_taint, remove_taint, label, annotate and add_pods \
             take nodes"
                .into(),
        ));
    }
    if s.down.is_some() && !matches!(action, Action::Reboot { .. }) {
        return Err(err("down: only reboot takes it".into()));
    }
    if (s.toleration.is_some() || s.prefix.is_some()) && !matches!(action, Action::AddPods { .. }) {
        return Err(err("toleration, prefix: only add_pods takes them".into()));
    }
    Ok(Step {
        at,
        action,
        line: ctx.line(offset),
    })
}

/// `key[=value]:Effect`.
fn parse_taint(text: &str) -> Option<(String, String, String)> {
    let (kv, effect) = text.rsplit_once(':')?;
    if !matches!(effect, "NoSchedule" | "PreferNoSchedule" | "NoExecute") {
        return None;
    }
    let (key, value) = kv.split_once('=').unwrap_or((kv, ""));
    if key.is_empty() {
        return None;
    }
    Some((key.to_string(), value.to_string(), effect.to_string()))
}

fn parse_expect(ctx: &Ctx, offset: usize, e: &RawExpect) -> Result<Expect, ScenarioError> {
    let err = |m: String| ctx.err(Some(offset), m);
    let taint_key = |key: &str, t: &String| -> Result<String, ScenarioError> {
        match parse_taint(t) {
            Some(_) => Ok(t.clone()),
            None => Err(err(format!("{key}: {t:?} must be key:Effect"))),
        }
    };
    let mut checks: Vec<Check> = Vec::new();
    if let Some(s) = &e.ready {
        if !matches!(s.as_str(), "True" | "False" | "Unknown") {
            return Err(err(format!("ready: {s:?} must be True, False or Unknown")));
        }
        checks.push(Check::Ready(s.clone()));
    }
    if let Some(t) = &e.taint {
        checks.push(Check::Taint(taint_key("taint", t)?));
    }
    if let Some(t) = &e.untaint {
        checks.push(Check::Untaint(taint_key("untaint", t)?));
    }
    if let Some(t) = &e.taint_at_end {
        checks.push(Check::TaintAtEnd(taint_key("taint_at_end", t)?));
    }
    for (key, value, check) in [
        ("not_ready", e.not_ready, Check::NotReady),
        ("deleted", e.deleted, Check::Deleted),
    ] {
        match value {
            Some(true) => checks.push(check),
            Some(false) => {
                return Err(err(format!(
                    "{key} = false: write {key} = true with never = true"
                )));
            }
            None => {}
        }
    }
    if let Some(reason) = &e.event {
        checks.push(Check::Event(reason.clone()));
    }
    if let Some(n) = e.fence_runs {
        checks.push(Check::FenceRuns(n));
    }
    let check = match checks.len() {
        1 => checks.remove(0),
        0 => {
            return Err(err(
                "an expectation needs one of ready, taint, untaint, taint_at_end, not_ready, deleted, event, fence_runs"
                    .into(),
            ));
        }
        _ => return Err(err("one check per [[expect]]".into())),
    };

    let mut subjects = Vec::new();
    if let Some(patterns) = &e.nodes {
        let mut nodes = ctx.nodes(offset, "nodes", patterns)?;
        if let Some(except) = &e.except {
            let except = ctx.nodes(offset, "except", except)?;
            nodes.retain(|n| !except.contains(n));
        }
        subjects.push(Subject::Nodes(nodes));
    } else if e.except.is_some() {
        return Err(err("except: only with nodes".into()));
    }
    if let Some(pods) = &e.pods {
        if let Some(bad) = pods.iter().find(|p| !p.contains('/')) {
            return Err(err(format!("pods: {bad:?} must be namespace/name")));
        }
        subjects.push(Subject::Pods(pods.clone()));
    }
    if let Some(patterns) = &e.pods_on {
        let kind = match &e.kind {
            None => None,
            Some(k) => Some(PodKind::parse(k).ok_or_else(|| {
                err(format!(
                    "kind: {k:?} must be web, patient, daemonset or added"
                ))
            })?),
        };
        subjects.push(Subject::PodsOn {
            nodes: ctx.nodes(offset, "pods_on", patterns)?,
            kind,
        });
    } else if e.kind.is_some() {
        return Err(err("kind: only with pods_on".into()));
    }
    let subject = match subjects.len() {
        1 => subjects.remove(0),
        0 => return Err(err("an expectation needs nodes, pods or pods_on".into())),
        _ => return Err(err("one of nodes, pods, pods_on per [[expect]]".into())),
    };
    let node_check = matches!(
        check,
        Check::Ready(_)
            | Check::Taint(_)
            | Check::Untaint(_)
            | Check::TaintAtEnd(_)
            | Check::FenceRuns(_)
    );
    let pod_check = matches!(check, Check::NotReady | Check::Deleted);
    match (&subject, node_check, pod_check) {
        (Subject::Nodes(_), _, true) => {
            return Err(err(
                "not_ready and deleted are about pods: use pods or pods_on".into(),
            ));
        }
        (Subject::Pods(_) | Subject::PodsOn { .. }, true, _) => {
            return Err(err(
                "ready, taint, untaint and taint_at_end are about nodes: use nodes".into(),
            ));
        }
        _ => {}
    }
    let quantity = match (e.never, e.at_least, e.at_most) {
        (None | Some(false), None, None) => Quantity::All,
        (Some(true), None, None) => Quantity::Never,
        (None | Some(false), Some(n), None) => Quantity::AtLeast(n),
        (None | Some(false), None, Some(n)) => Quantity::AtMost(n),
        _ => return Err(err("never, at_least, at_most: at most one of them".into())),
    };
    let after = match &e.after {
        Some(d) => ctx.duration(offset, "after", d)?,
        None => Duration::ZERO,
    };
    let by =
        e.by.as_ref()
            .map(|d| ctx.duration(offset, "by", d))
            .transpose()?;
    if by.is_some_and(|b| b < after) {
        return Err(err("by: must not be before after".into()));
    }
    if matches!(check, Check::TaintAtEnd(_) | Check::FenceRuns(_))
        && (e.after.is_some() || by.is_some())
    {
        return Err(err(
            "taint_at_end, fence_runs: judged at the end, after and by do not apply".into(),
        ));
    }
    Ok(Expect {
        subject,
        check,
        quantity,
        after,
        by,
        line: ctx.line(offset),
    })
}
