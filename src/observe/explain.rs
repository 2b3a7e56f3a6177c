//! What `node-lifecycled status` and `explain` answer: pure functions of the state dump's data
//! (the same the SIGUSR1 dump renders), a few facts read on request, and the decision history.

use std::fmt::Write as _;
use std::time::Duration;

use crate::controller::explain::{PodEviction, QueuedTaint};
use crate::controller::{NodeDump, ZoneDump, ZoneState};
use crate::model::ConditionStatus;
use crate::time::Time;

use super::decision_line::status as status_word;
use super::history::Entry;
use super::snapshot::DaemonSnapshot;

/// Everything `explain NODE` tells.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct NodeFacts {
    pub(crate) node: NodeDump,
    pub(crate) zone: Option<ZoneDump>,
    pub(crate) queued: Option<QueuedTaint>,
    pub(crate) pods: usize,
    /// Pods of the node with an eviction pending or running.
    pub(crate) evictions: usize,
    pub(crate) history: Vec<Entry>,
}

/// Everything `explain NAMESPACE/POD` tells.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct PodFacts {
    /// `namespace/name`.
    pub(crate) pod: String,
    pub(crate) node: Option<String>,
    pub(crate) node_ready: Option<ConditionStatus>,
    /// `key:Effect` of the node's NoExecute taints.
    pub(crate) node_no_execute: Vec<String>,
    pub(crate) ready: Option<ConditionStatus>,
    pub(crate) deleting: bool,
    pub(crate) eviction: PodEviction,
    pub(crate) history: Vec<Entry>,
}

/// Whether this instance decides anything (a follower or an unsynced daemon does not).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Acting {
    Yes,
    NotSynced,
    Follower,
}

/// `12s`, `3m4s`, `1h2m`.
pub(crate) fn short(d: Duration) -> String {
    let s = d.as_secs();
    if s < 60 {
        format!("{:.0}s", d.as_secs_f64().ceil())
    } else if s < 3600 {
        format!("{}m{}s", s / 60, s % 60)
    } else {
        format!("{}h{}m", s / 3600, (s % 3600) / 60)
    }
}

fn zone_line(z: &ZoneDump) -> String {
    let rate = if z.rate.is_never() {
        "tainting stopped".to_string()
    } else {
        format!("rate {}", z.rate)
    };
    let cooldown = match z.cooldown_until {
        Some(until) => format!(
            ", no NoExecute taint before {} (cooldown)",
            until.to_rfc3339()
        ),
        None => String::new(),
    };
    format!(
        "{} ({}, {} nodes, {} not ready, {rate}{cooldown})",
        z.display,
        z.state.map_or("not counted yet", ZoneState::as_str),
        z.size,
        z.unhealthy
    )
}

fn history_lines(out: &mut String, history: &[Entry]) {
    if history.is_empty() {
        out.push_str("recent decisions: none kept\n");
        return;
    }
    out.push_str("recent decisions:\n");
    for e in history {
        let _ = writeln!(out, "  {}  {}", e.at.to_rfc3339(), e.text);
    }
}

fn not_acting(acting: Acting) -> Option<&'static str> {
    match acting {
        Acting::Yes => None,
        Acting::NotSynced => Some("this daemon is not synced yet: it decides nothing"),
        Acting::Follower => Some("this daemon is a follower: the leader decides"),
    }
}

pub(crate) fn explain_node(f: &NodeFacts, acting: Acting, now: Time) -> String {
    let n = &f.node;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "node {}: Ready {}, last heard from {} ago, grace {}",
        n.name,
        status_word(n.ready),
        short(n.probe_age),
        short(n.grace)
    );
    match &f.zone {
        Some(z) => {
            let _ = writeln!(out, "zone: {}", zone_line(z));
        }
        None => {
            let _ = writeln!(out, "zone: {}", n.zone);
        }
    }
    if let Some(policy) = policy_line(n) {
        let _ = writeln!(out, "policy: {policy}");
    }
    let taints = if n.taints.is_empty() {
        "none".to_string()
    } else {
        n.taints.join(", ")
    };
    let _ = writeln!(out, "taints: {taints}");
    let _ = writeln!(
        out,
        "pods: {} ({} with an eviction pending or running){}{}",
        f.pods,
        f.evictions,
        if n.excluded_from_disruption {
            "; excluded from disruption checks"
        } else {
            ""
        },
        if n.planned_maintenance {
            "; in planned maintenance (MaintenanceInProgress=True): no failure of its zone, the \
             brake or fencing"
        } else {
            ""
        }
    );
    let next = match not_acting(acting) {
        Some(why) => why.to_string(),
        None => node_next(f, now),
    };
    let _ = writeln!(out, "next: {next}");
    history_lines(&mut out, &f.history);
    out
}

/// The `[[pool]]` and edge autonomy that change how this node is treated, if any.
fn policy_line(n: &NodeDump) -> Option<String> {
    let mut parts = Vec::new();
    if let Some(pool) = &n.pool {
        parts.push(format!("pool {pool}"));
    }
    if n.autonomous {
        parts.push(
            "edge autonomy (pods stay Ready; not-ready/unreachable evictions wait for the \
             autonomy duration)"
                .to_string(),
        );
    }
    (!parts.is_empty()).then(|| parts.join("; "))
}

fn node_next(f: &NodeFacts, now: Time) -> String {
    let n = &f.node;
    let no_execute = n
        .taints
        .iter()
        .find(|t| t.starts_with("node.kubernetes.io/") && t.ends_with(":NoExecute"));
    match n.verdict {
        "reading-lease" => {
            return "its grace period ran out: its Lease is being read live before any verdict"
                .into();
        }
        "writing-status" => return "being marked Unknown (the status write is in flight)".into(),
        _ => {}
    }
    if n.ready == Some(ConditionStatus::True) {
        return match n.pending_deadline {
            Some(at) => format!(
                "healthy; judged Unknown at {} (in {}) unless heard from",
                at.to_rfc3339(),
                short(at.since(now))
            ),
            None => "healthy".into(),
        };
    }
    if let Some(q) = &f.queued {
        if q.waits_for_suspects {
            return format!(
                "NoExecute taint waits ({} ahead): nodes of its zone are about to be judged, and counted not ready they would stop or slow its tainting (the zone seen whole, as upstream's pass sees it)",
                q.position
            );
        }
        return match q.eta {
            Some(eta) => format!(
                "NoExecute taint waits for the zone's token: {} ahead of it, about {} (at {})",
                q.position,
                short(eta.since(now)),
                eta.to_rfc3339()
            ),
            None => format!(
                "NoExecute taint waits in the zone's queue ({} ahead), but tainting is stopped in the zone",
                q.position
            ),
        };
    }
    if let Some(t) = no_execute {
        return format!(
            "tainted {t}: pods that do not tolerate it are deleted ({} pending or running)",
            f.evictions
        );
    }
    if f.zone.as_ref().is_some_and(|z| z.rate.is_never()) {
        return "not Ready, not tainted NoExecute: tainting is stopped in its zone".into();
    }
    "not Ready; its NoExecute taint follows when its zone's queue takes it".into()
}

pub(crate) fn explain_pod(f: &PodFacts, acting: Acting, now: Time) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "pod {}: Ready {}, on node {} (Ready {})",
        f.pod,
        status_word(f.ready),
        f.node.as_deref().unwrap_or("(none)"),
        status_word(f.node_ready)
    );
    let taints = if f.node_no_execute.is_empty() {
        "none".to_string()
    } else {
        f.node_no_execute.join(", ")
    };
    let _ = writeln!(out, "node's NoExecute taints: {taints}");
    let next = match not_acting(acting) {
        Some(why) => why.to_string(),
        None if f.deleting => "already being deleted (deletionTimestamp set)".to_string(),
        None => match &f.eviction {
            PodEviction::Scheduled { since, fire_at } => format!(
                "deleted at {} (in {}) unless the taint goes: tolerationSeconds {} from {}",
                fire_at.to_rfc3339(),
                short(fire_at.since(now)),
                fire_at.since(*since).as_secs(),
                since.to_rfc3339()
            ),
            PodEviction::Running { fire_at, attempt } => format!(
                "being deleted since {} (attempt {attempt})",
                fire_at.to_rfc3339()
            ),
            PodEviction::None if f.node_no_execute.is_empty() => {
                "nothing pending: its node has no NoExecute taint".to_string()
            }
            PodEviction::None => "stays: it tolerates its node's NoExecute taints".to_string(),
        },
    };
    let _ = writeln!(out, "next: {next}");
    history_lines(&mut out, &f.history);
    out
}

/// The decision log's and control socket's own figures, for `status`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LogFigures {
    pub(crate) lines: u64,
    pub(crate) folded: u64,
    pub(crate) history_bytes: usize,
}

/// `node-lifecycled status`.
pub fn status(s: &DaemonSnapshot, log: LogFigures) -> String {
    let mut out = String::new();
    let l = &s.leadership;
    let role = if !l.enabled {
        "leader (leader election off)".to_string()
    } else if l.is_leader {
        format!("leader ({})", l.identity)
    } else {
        format!(
            "follower (leader: {})",
            l.holder.as_deref().unwrap_or("nobody yet")
        )
    };
    let _ = writeln!(
        out,
        "node-lifecycled {} (pid {}), up {}: {}",
        s.build.version,
        s.build.pid,
        short(s.build.uptime),
        s.status
    );
    let _ = writeln!(
        out,
        "role: {role}{}",
        if s.config.dry_run { ", dry-run" } else { "" }
    );
    let synced = s.reflectors.iter().all(|r| r.synced);
    let _ = writeln!(
        out,
        "sync: {}",
        if synced {
            "complete"
        } else {
            "waiting for the initial lists"
        }
    );
    for r in &s.reflectors {
        let _ = writeln!(
            out,
            "  watch {:<7} {} objects, {}, last event {}, {} reconnects, {} relists",
            r.resource,
            r.objects,
            if r.synced { "synced" } else { "not synced" },
            r.last_event_age
                .map_or("never".to_string(), |a| format!("{} ago", short(a))),
            r.reconnects,
            r.relists
        );
    }
    if let Some(p) = &s.pause {
        let until = if p.until_next_write() {
            "its next valid write (node-lifecycled pause or resume)".to_string()
        } else {
            format!(
                "{} ({} left)",
                p.until.to_rfc3339(),
                short(p.until.since(s.now))
            )
        };
        let _ = writeln!(
            out,
            "pause: {} paused until {until} by {}: {}",
            p.what.as_str(),
            p.by,
            p.reason
        );
    }
    let c = &s.controller;
    if c.all_zones_fully_disrupted {
        out.push_str("every zone is fully disrupted: tainting and eviction are stopped\n");
    }
    let _ = writeln!(out, "zones: {}", c.zones.len());
    for z in &c.zones {
        let _ = writeln!(
            out,
            "  {}; {} queued for a NoExecute taint",
            zone_line(z),
            z.queue_len
        );
    }
    let queued: usize = c.zones.iter().map(|z| z.queue_len).sum();
    let _ = writeln!(out, "queued taints: {queued}");
    match &s.evictions {
        Some(e) => {
            let _ = writeln!(
                out,
                "pending evictions: {} ({} running, {} deleted, {} given up)",
                e.pending, e.running, e.pod_deletions_total, e.gave_up_total
            );
            for p in e.next.iter().take(5) {
                let _ = writeln!(
                    out,
                    "  {} at {} (in {})",
                    p.pod,
                    p.deadline.to_rfc3339(),
                    short(p.remaining)
                );
            }
        }
        None => out.push_str("pending evictions: none (legacy mode)\n"),
    }
    let requests: u64 = s.client.requests.iter().map(|r| r.count).sum();
    let api = &s.config.api;
    let _ = writeln!(
        out,
        "API: {requests} requests, {} waiting for the client budget (qps {}, burst {}), {} writes in flight",
        short(s.client.throttle_wait),
        api.qps.as_f64(),
        api.burst,
        c.writes_in_flight
    );
    let _ = writeln!(
        out,
        "decision log: {} lines, {} folded; history {} bytes",
        log.lines, log.folded, log.history_bytes
    );
    out
}

#[cfg(test)]
#[path = "explain_tests.rs"]
mod tests;
