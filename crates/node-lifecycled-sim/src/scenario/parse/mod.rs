//! Scenario TOML -> `Scenario`. Unknown keys, bad durations, node patterns that match no node and
//! steps or expectations that say too much or too little are errors naming the line.

use std::fmt;
use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;

use super::Scenario;
use crate::kubelets::KubeletConfig;
use crate::population::Population;
use node_lifecycled::config::parse_duration;

mod expect;
mod step;

use expect::parse_expect;
use step::parse_step;

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
    incumbent: Option<bool>,
    #[serde(default)]
    shadow_expect: Vec<Spanned<RawShadowExpect>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawShadowExpect {
    class: String,
    kind: Option<String>,
    rule: Option<String>,
    at_least: Option<usize>,
    at_most: Option<usize>,
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
        incumbent: raw.incumbent.unwrap_or(false),
        shadow_expects: shadow_expects(&ctx, &raw)?,
    })
}

fn shadow_expects(ctx: &Ctx, raw: &RawScenario) -> Result<Vec<super::ShadowExpect>, ScenarioError> {
    use super::shadow::{SHADOW_CLASSES as CLASSES, SHADOW_KINDS as KINDS};
    let mut out = Vec::new();
    for e in &raw.shadow_expect {
        let offset = e.span().start;
        let r = e.get_ref();
        if !CLASSES.contains(&r.class.as_str()) {
            return Err(ctx.err(
                Some(offset),
                format!(
                    "shadow_expect.class: one of {}, not {:?}",
                    CLASSES.join(", "),
                    r.class
                ),
            ));
        }
        if let Some(k) = r.kind.as_deref().filter(|k| !KINDS.contains(k)) {
            return Err(ctx.err(
                Some(offset),
                format!("shadow_expect.kind: one of {}, not {k:?}", KINDS.join(", ")),
            ));
        }
        if raw.incumbent != Some(true) {
            return Err(ctx.err(Some(offset), "shadow_expect needs incumbent = true"));
        }
        out.push(super::ShadowExpect {
            class: r.class.clone(),
            kind: r.kind.clone(),
            rule: r.rule.clone(),
            at_least: r.at_least.unwrap_or(0),
            at_most: r.at_most,
            line: ctx.line(offset),
        });
    }
    Ok(out)
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
