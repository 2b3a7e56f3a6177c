//! A scenario's `[[expect]]`: the subject, the check and the quantity an expectation states.

use std::time::Duration;

use super::{Ctx, RawExpect, ScenarioError, parse_taint};
use crate::population::PodKind;
use crate::scenario::{Check, Expect, Quantity, Subject};

pub(super) fn parse_expect(
    ctx: &Ctx,
    offset: usize,
    e: &RawExpect,
) -> Result<Expect, ScenarioError> {
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
