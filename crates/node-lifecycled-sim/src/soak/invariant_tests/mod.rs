//! The soak's invariant checkers on synthetic write logs: each rule fires on a history that
//! breaks it, and stays quiet on the same history played correctly (a checker that cannot fail
//! would prove nothing).

use std::time::Duration;

use serde_json::json;

use super::invariants::{Checker, FaultClass, KUBELET, Violation};
use super::limits::Limits;
use crate::resource::{Resource, Verb};
use crate::write_log::{Identity, WriteRecord};
use node_lifecycled::time::Time;

pub(super) const A: &str = "token-a";
pub(super) const B: &str = "token-b";
const T0: u64 = 1_700_000_000_000;

pub(super) fn at(seconds: f64) -> Time {
    Time::from_unix_millis(T0 + (seconds * 1000.0) as u64)
}

fn nodes() -> Vec<String> {
    (1..=3)
        .flat_map(|z| (1..=8).map(move |n| format!("z{z}-n{n:03}")))
        .collect()
}

fn limits() -> Limits {
    Limits::for_soak(Duration::from_secs(5), 1.0, Duration::from_millis(400))
}

/// A log under construction: records numbered in order.
pub(super) struct Log {
    pub(super) checker: Checker,
    seq: u64,
}

impl Log {
    pub(super) fn new() -> Log {
        let mut checker = Checker::new(
            limits(),
            &[(A, "daemon-a"), (B, "daemon-b")],
            &nodes(),
            at(0.0),
        );
        checker.add_pod("default/web-0", "z1-n001", Some(Duration::ZERO), at(0.0));
        checker.add_pod(
            "default/web-1",
            "z1-n001",
            Some(Duration::from_secs(6)),
            at(0.0),
        );
        checker.add_pod("kube-system/node-agent-z1-n001", "z1-n001", None, at(0.0));
        Log { checker, seq: 0 }
    }

    #[allow(clippy::too_many_arguments)]
    fn write(
        &mut self,
        t: f64,
        identity: Identity,
        verb: Verb,
        resource: Resource,
        subresource: Option<&str>,
        namespace: Option<&str>,
        name: &str,
        summary: String,
    ) {
        self.seq += 1;
        let record = WriteRecord {
            seq: self.seq,
            elapsed: Duration::from_secs_f64(t),
            wall: at(t),
            identity,
            verb,
            resource,
            subresource: subresource.map(str::to_string),
            namespace: namespace.map(str::to_string),
            name: name.to_string(),
            code: 200,
            resource_version: Some(self.seq),
            summary,
        };
        self.checker.on_writes(&[record]);
    }

    fn daemon(token: &str) -> Identity {
        Identity {
            token: Some(token.to_string()),
            user_agent: Some("node-lifecycled".into()),
            client_cn: None,
        }
    }

    /// The kubelet of `node` renews its Lease every second over `[from, to]`.
    pub(super) fn renewals(&mut self, node: &str, from: f64, to: f64) {
        let mut t = from;
        while t <= to {
            self.write(
                t,
                Identity::direct(KUBELET),
                Verb::Update,
                Resource::Leases,
                None,
                Some("kube-node-lease"),
                node,
                "spec.renewTime: \"…\" -> \"…\"".into(),
            );
            t += 1.0;
        }
    }

    pub(super) fn unknown(&mut self, t: f64, token: &str, node: &str) {
        self.write(
            t,
            Log::daemon(token),
            Verb::Update,
            Resource::Nodes,
            Some("status"),
            None,
            node,
            "status.conditions[Ready].status: \"True\" -> \"Unknown\"; \
             status.conditions[Ready].reason: \"KubeletReady\" -> \"NodeStatusUnknown\""
                .into(),
        );
    }

    pub(super) fn taints(&mut self, t: f64, token: &str, node: &str, keys: &[&str]) {
        let list: Vec<_> = keys
            .iter()
            .map(|k| json!({"key": format!("node.kubernetes.io/{k}"), "effect": "NoExecute"}))
            .collect();
        let body = json!({"spec": {"taints": list}});
        self.write(
            t,
            Log::daemon(token),
            Verb::Patch,
            Resource::Nodes,
            None,
            None,
            node,
            format!("strategic {body}"),
        );
    }

    fn delete_pod(&mut self, t: f64, key: &str) {
        let (ns, name) = key.split_once('/').unwrap();
        self.write(
            t,
            Log::daemon(A),
            Verb::Delete,
            Resource::Pods,
            None,
            Some(ns),
            name,
            "graceful deletion, grace period 30s".into(),
        );
    }

    /// `token` marks pod `key` NotReady.
    pub(in super::super) fn mark_pod_not_ready(&mut self, t: f64, token: &str, key: &str) {
        let (ns, name) = key.split_once('/').unwrap();
        let body = json!({"status": {"conditions": [{"type": "Ready", "status": "False"}]}});
        self.write(
            t,
            Log::daemon(token),
            Verb::Patch,
            Resource::Pods,
            Some("status"),
            Some(ns),
            name,
            format!("strategic {body}"),
        );
    }

    /// `token` writes the leader Lease (after a kill: the leader acting again, a restarted daemon
    /// of the same identity by renewing it).
    pub(in super::super) fn lease_taken(&mut self, t: f64, token: &str, holder: &str) {
        self.write(
            t,
            Log::daemon(token),
            Verb::Update,
            Resource::Leases,
            None,
            Some("kube-system"),
            "node-lifecycled",
            format!("spec.holderIdentity: \"old\" -> \"{holder}\""),
        );
    }

    /// `token` records the attempt of fence step `step` (from 1) on `node`.
    pub(in super::super) fn fence_attempt(&mut self, t: f64, token: &str, node: &str, step: usize) {
        let mut record = "outage=2026-01-01T00:00:00Z,started=2026-01-01T00:00:05Z".to_string();
        if step > 1 {
            record.push_str(&format!(",step={}", step - 1));
        }
        let body =
            json!({"metadata": {"annotations": {"node-lifecycled.io/fence-attempt": record}}});
        self.write(
            t,
            Log::daemon(token),
            Verb::Patch,
            Resource::Nodes,
            None,
            None,
            node,
            format!("merge {body}"),
        );
    }

    pub(super) fn rules(&self) -> Vec<&'static str> {
        self.checker.violations.iter().map(|v| v.rule).collect()
    }

    pub(super) fn violations(&self) -> &[Violation] {
        &self.checker.violations
    }
}

/// The kubelets of `nodes` renew every second until `last` (their last heartbeat) and are
/// silent from `last + 0.5` on (ground truth).
pub(in super::super) fn die(log: &mut Log, nodes: &[String], last: f64) {
    for node in nodes {
        log.renewals(node, last, last);
        log.checker.kubelet(node, false, at(last + 0.5));
    }
}

pub(in super::super) fn zone(z: u32, range: std::ops::RangeInclusive<u32>) -> Vec<String> {
    range.map(|n| format!("z{z}-n{n:03}")).collect()
}

/// `node`'s kubelet posts Ready=True.
pub(super) fn ready_post(log: &mut Log, t: f64, node: &str) {
    log.write(
        t,
        Identity::direct(KUBELET),
        Verb::Update,
        Resource::Nodes,
        None,
        None,
        node,
        "status.conditions[Ready].status: \"Unknown\" -> \"True\"".into(),
    );
}

mod decision_deadline;
mod fencing;
mod liveness;
mod safety;
mod shadow;
mod untaint;
mod zone_rules;
