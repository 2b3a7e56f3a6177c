//! A controller's decisions, read from the real server's audit log, and the diff of two runs.
//!
//! Every write to nodes, pods and events is in the log with the object it produced
//! (`audit::DECISIONS_POLICY`). Replaying them in order gives each object's state before each
//! write; what a write of the controller's user changed is its decision: Ready and its reason,
//! a taint added or removed, a label set, a pod marked NotReady, a pod deleted, an event.
//! Times are the server's receipt of the write, relative to the scenario's start.
//!
//! The diff pairs the n-th occurrence of a decision on one side with the n-th on the other.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::time::Duration;

use node_lifecycled::time::Time;
use serde_json::Value;

use super::audit::Request;
use super::fleet::taints_of;

/// One decision: what, on which object, when (ms from the scenario's start; negative before).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Decision {
    pub object: String,
    pub what: String,
    pub at_ms: i64,
}

/// What one object looked like after its last write (the parts decisions are made of).
#[derive(Default)]
struct Seen {
    ready: Option<(String, String)>,
    taints: BTreeSet<String>,
    labels: BTreeMap<String, String>,
    pod_ready: Option<String>,
}

fn ready_of(node: &Value) -> Option<(String, String)> {
    node["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == "Ready")
        .map(|c| {
            (
                c["status"].as_str().unwrap_or("").to_string(),
                c["reason"].as_str().unwrap_or("").to_string(),
            )
        })
}

fn labels_of(object: &Value) -> BTreeMap<String, String> {
    object["metadata"]["labels"]
        .as_object()
        .map(|m| {
            m.iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap_or("").to_string()))
                .collect()
        })
        .unwrap_or_default()
}

fn pod_ready_of(pod: &Value) -> Option<String> {
    pod["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == "Ready")
        .map(|c| c["status"].as_str().unwrap_or("").to_string())
}

/// The decisions of `user` among `requests`, timed from `start`.
pub fn decisions(requests: &[Request], user: &str, start: Time) -> Vec<Decision> {
    let mut seen: BTreeMap<String, Seen> = BTreeMap::new();
    let mut out = Vec::new();
    let ms = |t: Time| t.as_unix_millis() as i64 - start.as_unix_millis() as i64;
    for r in requests {
        if !(200..300).contains(&r.code) {
            continue;
        }
        let mine = r.user == user;
        let at_ms = ms(r.received);
        let mut decide = |object: String, what: String| {
            if mine {
                out.push(Decision {
                    object,
                    what,
                    at_ms,
                });
            }
        };
        match (r.resource.as_str(), r.verb.as_str()) {
            ("nodes", "create" | "update" | "patch") if r.response.is_object() => {
                let key = format!("node/{}", r.name);
                let before = seen.entry(key.clone()).or_default();
                let ready = ready_of(&r.response);
                if ready != before.ready
                    && let Some((status, reason)) = &ready
                {
                    decide(key.clone(), format!("Ready={status} ({reason})"));
                }
                let taints = taints_of(&r.response);
                for t in taints.difference(&before.taints) {
                    decide(key.clone(), format!("taint+ {t}"));
                }
                for t in before.taints.difference(&taints) {
                    decide(key.clone(), format!("taint- {t}"));
                }
                let labels = labels_of(&r.response);
                for (k, v) in &labels {
                    if before.labels.get(k) != Some(v) {
                        decide(key.clone(), format!("label {k}={v}"));
                    }
                }
                *before = Seen {
                    ready,
                    taints,
                    labels,
                    pod_ready: None,
                };
            }
            ("nodes", "delete") => {
                seen.remove(&format!("node/{}", r.name));
            }
            ("pods", "create" | "update" | "patch") if r.response.is_object() => {
                let key = format!("pod/{}/{}", r.namespace, r.name);
                let before = seen.entry(key.clone()).or_default();
                let ready = pod_ready_of(&r.response);
                if ready != before.pod_ready
                    && let Some(status) = &ready
                {
                    decide(key.clone(), format!("Ready={status}"));
                }
                before.pod_ready = ready;
            }
            ("pods", "delete") => {
                decide(format!("pod/{}/{}", r.namespace, r.name), "deleted".into());
            }
            ("events", "create") => {
                let object = if r.response["involvedObject"].is_object() {
                    &r.response["involvedObject"]
                } else {
                    &r.response["regarding"]
                };
                let kind = object["kind"].as_str().unwrap_or("").to_lowercase();
                let name = object["name"].as_str().unwrap_or("");
                let reason = r.response["reason"].as_str().unwrap_or("");
                let key = match object["namespace"].as_str() {
                    Some(namespace) if !namespace.is_empty() => {
                        format!("{kind}/{namespace}/{name}")
                    }
                    _ => format!("{kind}/{name}"),
                };
                decide(key, format!("event {reason}"));
            }
            _ => {}
        }
    }
    out
}

/// How one decision of upstream's compares with ours.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Pairing {
    /// Both made it: ours minus upstream's, in ms (negative: ours earlier).
    Both {
        gap_ms: i64,
    },
    OnlyUpstream,
    OnlyOurs,
}

#[derive(Clone, Debug)]
pub struct Compared {
    pub object: String,
    pub what: String,
    pub upstream_ms: Option<i64>,
    pub ours_ms: Option<i64>,
    pub pairing: Pairing,
}

/// Pairs the n-th (object, what) of upstream with our n-th. Decisions before the scenario's
/// start (registration, at each controller's own start) are paired without their times.
pub fn compare(upstream: &[Decision], ours: &[Decision]) -> Vec<Compared> {
    type Key = (String, String);
    let group = |ds: &[Decision]| {
        let mut g: BTreeMap<Key, Vec<i64>> = BTreeMap::new();
        for d in ds {
            g.entry((d.object.clone(), d.what.clone()))
                .or_default()
                .push(d.at_ms);
        }
        g
    };
    let (theirs, mine) = (group(upstream), group(ours));
    let keys: BTreeSet<&Key> = theirs.keys().chain(mine.keys()).collect();
    let mut out = Vec::new();
    for key in keys {
        let t = theirs.get(key).map(Vec::as_slice).unwrap_or(&[]);
        let m = mine.get(key).map(Vec::as_slice).unwrap_or(&[]);
        for i in 0..t.len().max(m.len()) {
            let (u, o) = (t.get(i).copied(), m.get(i).copied());
            let pairing = match (u, o) {
                (Some(u), Some(o)) if u < 0 && o < 0 => Pairing::Both { gap_ms: 0 },
                (Some(u), Some(o)) => Pairing::Both { gap_ms: o - u },
                (Some(_), None) => Pairing::OnlyUpstream,
                _ => Pairing::OnlyOurs,
            };
            out.push(Compared {
                object: key.0.clone(),
                what: key.1.clone(),
                upstream_ms: u,
                ours_ms: o,
                pairing,
            });
        }
    }
    out.sort_by_key(|c| c.upstream_ms.or(c.ours_ms));
    out
}

/// The differences of a comparison under the tier's rules: a decision only one side made, or
/// ours later than upstream's by more than `pass` (one `node_monitor_period`, plus `slack` for
/// two runs on two servers). Earlier is not a difference: upstream's batch pass decides up to a
/// pass after the evidence, ours at the evidence.
pub fn differences(compared: &[Compared], pass: Duration, slack: Duration) -> Vec<&Compared> {
    let limit = (pass + slack).as_millis() as i64;
    compared
        .iter()
        .filter(|c| match c.pairing {
            Pairing::Both { gap_ms } => gap_ms > limit,
            _ => true,
        })
        .collect()
}

/// The largest gap each way: (ours earlier by, ours later by), in ms.
pub fn largest_gaps(compared: &[Compared]) -> (i64, i64) {
    compared
        .iter()
        .fold((0, 0), |(early, late), c| match c.pairing {
            Pairing::Both { gap_ms } => (early.max(-gap_ms), late.max(gap_ms)),
            _ => (early, late),
        })
}

fn seconds(ms: Option<i64>) -> String {
    ms.map(|m| format!("{:.2}", m as f64 / 1000.0))
        .unwrap_or_else(|| "-".into())
}

/// The comparison as a table (one line per decision).
pub fn table(compared: &[Compared]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<28} {:<52} {:>9} {:>9}  gap",
        "object", "decision", "upstream", "ours"
    );
    for c in compared {
        let gap = match c.pairing {
            Pairing::Both { gap_ms } => format!("{:+.2}", gap_ms as f64 / 1000.0),
            Pairing::OnlyUpstream => "ONLY UPSTREAM".into(),
            Pairing::OnlyOurs => "ONLY OURS".into(),
        };
        let _ = writeln!(
            out,
            "{:<28} {:<52} {:>9} {:>9}  {gap}",
            c.object,
            c.what,
            seconds(c.upstream_ms),
            seconds(c.ours_ms)
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(object: &str, what: &str, at_ms: i64) -> Decision {
        Decision {
            object: object.into(),
            what: what.into(),
            at_ms,
        }
    }

    #[test]
    fn pairs_by_occurrence_and_flags_later_and_one_sided_decisions() {
        let upstream = [
            d("node/a", "taint+ x", 1000),
            d("node/a", "taint+ x", 9000),
            d("pod/e2e/p", "deleted", 5000),
        ];
        let ours = [
            d("node/a", "taint+ x", 400),
            d("node/a", "taint+ x", 11000),
            d("node/b", "taint+ x", 3000),
        ];
        let compared = compare(&upstream, &ours);
        let diffs = differences(&compared, Duration::from_secs(1), Duration::ZERO);
        let kinds: Vec<(&str, &Pairing)> = diffs
            .iter()
            .map(|c| (c.object.as_str(), &c.pairing))
            .collect();
        assert_eq!(
            kinds,
            vec![
                ("node/b", &Pairing::OnlyOurs),
                ("pod/e2e/p", &Pairing::OnlyUpstream),
                ("node/a", &Pairing::Both { gap_ms: 2000 }),
            ]
        );
        assert_eq!(largest_gaps(&compared), (600, 2000));
    }
}
