//! A scenario's `[[step]]`: when it plays and the one action it performs (nodes stopped or
//! started, taints, pods, API faults, daemon restarts).

use super::{Ctx, RawStep, ScenarioError, parse_taint};
use crate::population::Toleration;
use crate::scenario::{Action, Step};

pub(super) fn parse_step(ctx: &Ctx, offset: usize, s: &RawStep) -> Result<Step, ScenarioError> {
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
