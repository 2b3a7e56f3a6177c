//! A scenario's steps played against the simulated cluster while the daemon runs: each action
//! performed on time, and the daemon's writes read back as the timeline.

use std::io::Write;
use std::time::Instant;

use serde_json::{Value, json};

use super::Action;
use super::daemon::DaemonLog;
use crate::kubelets::Kubelets;
use crate::population::{PodKind, PodPlan, WEB_NAMESPACE};
use crate::timeline::{Fact, FactKind, FactReader, Timeline};
use crate::{Cluster, Resource, SimHandle};

pub(super) struct Play<'a> {
    pub(super) sim: &'a SimHandle,
    pub(super) cluster: &'a Cluster,
    pub(super) kubelets: &'a Kubelets,
    pub(super) pods: Vec<PodPlan>,
    pub(super) reader: FactReader,
    pub(super) timeline: Timeline,
    pub(super) facts: Vec<Fact>,
    pub(super) start: Instant,
    pub(super) log: DaemonLog,
}

impl Play<'_> {
    pub(super) fn emit(&mut self, fact: Fact, out: &mut dyn Write) {
        for line in self.timeline.push(&fact) {
            let _ = writeln!(out, "{line}");
        }
        self.facts.push(fact);
    }

    /// New daemon writes into facts and lines; daemon log lines worth showing.
    pub(super) fn catch_up(&mut self, out: &mut dyn Write) {
        let facts = self.reader.read(&self.sim.writes());
        for fact in facts {
            self.emit(fact, out);
        }
        for line in self.timeline.flush(self.start.elapsed()) {
            let _ = writeln!(out, "{line}");
        }
        self.log.forward(out);
    }

    pub(super) fn step(&mut self, action: &Action, out: &mut dyn Write) {
        self.catch_up(out);
        let t = self.start.elapsed();
        let problems = self.perform(action);
        let mut text = action.describe();
        if !problems.is_empty() {
            text.push_str(&format!(" [failed: {}]", problems.join("; ")));
        }
        self.emit(
            Fact {
                t,
                kind: FactKind::Step(text),
            },
            out,
        );
    }

    /// Does the step; returns what went wrong (the run goes on).
    pub(super) fn perform(&mut self, action: &Action) -> Vec<String> {
        let mut problems = Vec::new();
        let mut note = |r: Result<(), String>| {
            if let Err(e) = r {
                problems.push(e);
            }
        };
        let faults = self.sim.faults();
        match action {
            Action::StopHeartbeat(nodes) => {
                for n in nodes {
                    note(self.kubelets.stop_heartbeat(n).map_err(|e| e.to_string()));
                }
            }
            Action::ResumeHeartbeat(nodes) => {
                for n in nodes {
                    note(self.kubelets.resume_heartbeat(n).map_err(|e| e.to_string()));
                }
            }
            Action::Reboot { nodes, down } => {
                for n in nodes {
                    note(self.kubelets.reboot(n, *down).map_err(|e| e.to_string()));
                }
            }
            Action::SetCondition {
                nodes,
                condition,
                status,
            } => {
                for n in nodes {
                    note(
                        self.kubelets
                            .set_condition(n, condition, status)
                            .map_err(|e| e.to_string()),
                    );
                }
            }
            Action::AddTaint {
                nodes,
                key,
                value,
                effect,
            } => {
                let mut taint = json!({"key": key, "effect": effect,
                                       "timeAdded": self.cluster.now().to_rfc3339()});
                if !value.is_empty() {
                    taint["value"] = json!(value);
                }
                for n in nodes {
                    note(edit_taints(self.cluster, n, |list| {
                        list.retain(|t| {
                            !(t["key"] == key.as_str() && t["effect"] == effect.as_str())
                        });
                        list.push(taint.clone());
                    }));
                }
            }
            Action::RemoveTaint { nodes, key, effect } => {
                for n in nodes {
                    note(edit_taints(self.cluster, n, |list| {
                        list.retain(|t| {
                            !(t["key"] == key.as_str() && t["effect"] == effect.as_str())
                        });
                    }));
                }
            }
            Action::SetMetadata {
                nodes,
                annotation,
                key,
                value,
            } => {
                let field = if *annotation { "annotations" } else { "labels" };
                for n in nodes {
                    let set = self.cluster.update(Resource::Nodes, None, n, |v| {
                        if let Some(meta) = v.get_mut("metadata").and_then(Value::as_object_mut) {
                            let map = meta.entry(field).or_insert_with(|| json!({}));
                            if let Some(map) = map.as_object_mut() {
                                map.insert(key.clone(), json!(value));
                            }
                        }
                    });
                    note(set.map(|_| ()).map_err(|e| format!("{n}: {}", e.message)));
                }
            }
            Action::AddPods {
                nodes,
                per_node,
                prefix,
                toleration,
            } => {
                for n in nodes {
                    for i in 0..*per_node {
                        let pod = PodPlan {
                            namespace: WEB_NAMESPACE.into(),
                            name: format!("{prefix}-{n}-{i}"),
                            node: n.clone(),
                            kind: PodKind::Added,
                            toleration: *toleration,
                        };
                        match self.cluster.create(Resource::Pods, pod.object()) {
                            Ok(_) => self.pods.push(pod),
                            Err(e) => problems.push(format!("{}: {}", pod.key(), e.message)),
                        }
                    }
                }
            }
            Action::DropWatches => faults.drop_watches(),
            Action::StallWatches(d) => faults.stall_watches(Some(*d)),
            Action::RestartApi(d) => {
                // Returns once the port refuses; the server listens again after `d` by itself.
                faults.restart(*d);
            }
            Action::Note(_) => {}
        }
        problems
    }
}

fn edit_taints(
    cluster: &Cluster,
    node: &str,
    change: impl FnOnce(&mut Vec<Value>),
) -> Result<(), String> {
    cluster
        .update(Resource::Nodes, None, node, |v| {
            let mut list: Vec<Value> = v
                .pointer("/spec/taints")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            change(&mut list);
            if let Some(spec) = v
                .as_object_mut()
                .map(|o| o.entry("spec").or_insert_with(|| json!({})))
                .and_then(Value::as_object_mut)
            {
                spec.insert("taints".into(), Value::Array(list));
            }
        })
        .map(|_| ())
        .map_err(|e| format!("{node}: {}", e.message))
}
