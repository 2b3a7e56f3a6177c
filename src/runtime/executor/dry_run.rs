//! Dry-run: what each write would have done, said in one line, and its effect on our own view.
//!
//! Nothing is sent, so the cluster does not change and the watches keep showing the old
//! objects. To keep the controllers deciding as they would for real (and not re-issue the same
//! write every pass, nor miss what follows from it: taint eviction only learns of a NoExecute
//! taint from a node update), the executor reads the object live (a read, which dry-run
//! allows), checks the write's preconditions against it as the API server would, and feeds the
//! controllers the object as the write would have left it, as the watch would have.
//!
//! Successive dry-run writes to one object build on each other: the object as dry-run left it
//! (its shadow) is kept as long as the server's copy stays at the version it was built on. The
//! shell passes watched objects through [`Shadows::overlay`], so a relist or a resumed watch
//! delivering that same version does not undo what dry-run "wrote"; a newer version (a real
//! change by someone else) drops the shadow and the controllers decide on the real object.

use std::collections::{HashMap, VecDeque};

use crate::controller::Input;
use crate::controller::events::{Event, EventObject};
use crate::model::{ConditionStatus, Name, Node, NodeCondition, Pod, PodKey, Taint};
use crate::observe::shadow::mask;

/// Most recent "would" lines kept for the dump and for tests.
pub(crate) const RECENT_WOULD: usize = 1000;

/// What kind of write a "would" line stands for (the counters' label).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum WriteKind {
    NodeStatus,
    Taints,
    Labels,
    PodNotReady,
    PodNodeLost,
    PodDelete,
    PodEviction,
    Event,
}

impl WriteKind {
    pub(crate) const ALL: [WriteKind; 8] = [
        WriteKind::NodeStatus,
        WriteKind::Taints,
        WriteKind::Labels,
        WriteKind::PodNotReady,
        WriteKind::PodNodeLost,
        WriteKind::PodDelete,
        WriteKind::PodEviction,
        WriteKind::Event,
    ];

    pub(crate) fn as_str(self) -> &'static str {
        match self {
            WriteKind::NodeStatus => "node_status",
            WriteKind::Taints => "taints",
            WriteKind::Labels => "labels",
            WriteKind::PodNotReady => "pod_not_ready",
            WriteKind::PodNodeLost => "pod_node_lost",
            WriteKind::PodDelete => "pod_delete",
            WriteKind::PodEviction => "pod_eviction",
            WriteKind::Event => "event",
        }
    }
}

/// The dry-run record: counts per kind and the latest lines.
#[derive(Clone, Debug, Default)]
pub struct DryRunLog {
    counts: [u64; WriteKind::ALL.len()],
    recent: VecDeque<String>,
}

impl DryRunLog {
    /// Nothing recorded (what a daemon that is not in dry-run shows).
    pub(crate) const EMPTY: DryRunLog = DryRunLog {
        counts: [0; WriteKind::ALL.len()],
        recent: VecDeque::new(),
    };

    /// Logs `would …` at info, counts it, keeps the line.
    pub(crate) fn record(&mut self, kind: WriteKind, line: String) {
        log::info!("{line}");
        self.counts[kind as usize] += 1;
        if self.recent.len() == RECENT_WOULD {
            self.recent.pop_front();
        }
        self.recent.push_back(line);
    }

    pub fn count(&self, kind: WriteKind) -> u64 {
        self.counts[kind as usize]
    }

    pub(crate) fn counts(&self) -> impl Iterator<Item = (WriteKind, u64)> + '_ {
        WriteKind::ALL.into_iter().map(|k| (k, self.count(k)))
    }

    pub fn total(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// The latest lines, oldest first (at most [`RECENT_WOULD`]).
    pub fn recent(&self) -> impl Iterator<Item = &str> {
        self.recent.iter().map(String::as_str)
    }
}

/// The objects as dry-run left them, keyed by name, each valid while the server's copy is at
/// the same uid and resourceVersion.
///
/// In shadow mode a newer version is someone else's change, the incumbent's among them: it is
/// taken without what the incumbent wrote of what is compared, the shadow giving those fields
/// (`observe/shadow/mask.rs`), and kept as the new shadow.
#[derive(Debug, Default)]
pub struct Shadows {
    nodes: HashMap<Name, Node>,
    pods: HashMap<PodKey, Pod>,
    shadow_mode: bool,
}

impl Shadows {
    pub(crate) fn set_shadow_mode(&mut self, on: bool) {
        self.shadow_mode = on;
    }

    /// The node as dry-run sees it: its shadow if built on this very version, else the
    /// server's (and a shadow of an older version is dropped, or in shadow mode rebased).
    pub(crate) fn node(&mut self, server: Node) -> Node {
        match self.nodes.get(&server.name) {
            Some(s) if s.uid == server.uid && s.resource_version == server.resource_version => {
                s.clone()
            }
            Some(s) if self.shadow_mode && s.uid == server.uid => {
                let rebased = mask::node(server, Some(s));
                self.nodes.insert(rebased.name.clone(), rebased.clone());
                rebased
            }
            Some(_) => {
                self.nodes.remove(&server.name);
                server
            }
            None => server,
        }
    }

    pub(crate) fn pod(&mut self, server: Pod) -> Pod {
        match self.pods.get(&server.key) {
            Some(s) if s.uid == server.uid && s.resource_version == server.resource_version => {
                s.clone()
            }
            Some(s) if self.shadow_mode && s.uid == server.uid => {
                let ours = mask::PodView {
                    ready: s.ready,
                    deleting: s.deleting,
                    disruption_target: s.disruption_target,
                };
                let rebased = mask::pod(server, Some(ours), true);
                self.pods.insert(rebased.key.clone(), rebased.clone());
                rebased
            }
            Some(_) => {
                self.pods.remove(&server.key);
                server
            }
            None => server,
        }
    }

    /// The shadow of this very version of a node, if dry-run changed it (read-only: fencing's
    /// live read decodes the node its own way and only needs what dry-run "wrote").
    pub(crate) fn node_version(
        &self,
        name: &str,
        uid: &str,
        resource_version: &str,
    ) -> Option<&Node> {
        self.nodes
            .get(name)
            .filter(|s| &*s.uid == uid && &*s.resource_version == resource_version)
    }

    /// Whether `input` is dry-run's own answer (an object as a write of ours left it, kept as
    /// its shadow), not the server's object read back.
    pub(crate) fn holds(&self, input: &Input) -> bool {
        match input {
            Input::NodeUpsert(n) => self.nodes.get(&n.name) == Some(n),
            Input::PodUpsert(p) => self.pods.get(&p.key) == Some(p),
            _ => false,
        }
    }

    pub(crate) fn remember_node(&mut self, node: Node) {
        self.nodes.insert(node.name.clone(), node);
    }

    pub(crate) fn remember_pod(&mut self, pod: Pod) {
        self.pods.insert(pod.key.clone(), pod);
    }

    /// A watched object on its way to the controllers, with dry-run's changes laid over it.
    pub(crate) fn overlay(&mut self, input: Input) -> Input {
        match input {
            Input::NodeUpsert(node) if !self.nodes.is_empty() => Input::NodeUpsert(self.node(node)),
            Input::PodUpsert(pod) if !self.pods.is_empty() => Input::PodUpsert(self.pod(pod)),
            Input::NodeDeleted(name) => {
                self.nodes.remove(&name);
                Input::NodeDeleted(name)
            }
            Input::PodDeleted(key) => {
                self.pods.remove(&key);
                Input::PodDeleted(key)
            }
            other => other,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.nodes.len() + self.pods.len()
    }
}

fn taint_text(t: &Taint) -> String {
    if t.value.is_empty() {
        format!("{}:{}", t.key, t.effect.as_str())
    } else {
        format!("{}={}:{}", t.key, t.value, t.effect.as_str())
    }
}

/// `would taint node n1 node.kubernetes.io/unreachable:NoExecute`, `… untaint …`, or both.
pub(crate) fn taints_line(node: &str, current: &[Taint], desired: &[Taint]) -> String {
    let list = |from: &[Taint], minus: &[Taint]| -> Vec<String> {
        from.iter()
            .filter(|t| !minus.iter().any(|m| m.matches(t)))
            .map(taint_text)
            .collect()
    };
    let added = list(desired, current);
    let removed = list(current, desired);
    match (added.is_empty(), removed.is_empty()) {
        (false, true) => format!("would taint node {node} {}", added.join(", ")),
        (true, false) => format!("would untaint node {node} {}", removed.join(", ")),
        (false, false) => format!(
            "would taint node {node} {} and untaint {}",
            added.join(", "),
            removed.join(", ")
        ),
        (true, true) => format!("would rewrite the taints of node {node} (no key change)"),
    }
}

/// `would set node n1 conditions Ready=Unknown (NodeStatusUnknown), …`: the conditions whose
/// status the write changes.
pub(crate) fn conditions_line(
    node: &str,
    current: &[NodeCondition],
    written: &[NodeCondition],
) -> String {
    let changed: Vec<String> = written
        .iter()
        .filter(|w| {
            current
                .iter()
                .find(|c| c.kind == w.kind)
                .is_none_or(|c| c.status != w.status)
        })
        .map(|w| match w.text.reason() {
            Some(reason) => format!("{}={} ({reason})", w.kind.as_str(), w.status.as_str()),
            None => format!("{}={}", w.kind.as_str(), w.status.as_str()),
        })
        .collect();
    if changed.is_empty() {
        format!("would update node {node} status conditions (no status change)")
    } else {
        format!("would set node {node} conditions {}", changed.join(", "))
    }
}

pub(crate) fn labels_line(node: &str, labels: &[(Name, Name)]) -> String {
    let list: Vec<String> = labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
    format!("would label node {node} {}", list.join(", "))
}

pub(crate) fn event_line(event: &Event) -> String {
    let object = match &event.object {
        EventObject::Node { name, .. } => format!("node {name}"),
        EventObject::Pod {
            namespace, name, ..
        } => format!("pod {namespace}/{name}"),
    };
    format!(
        "would record event {} {} on {object} from {}: {}",
        event.event_type.as_str(),
        event.reason,
        event.component,
        event.message
    )
}

pub(crate) fn pod_line(verb: &str, pod: &PodKey) -> String {
    format!("would {verb} pod {pod}")
}

/// The node as a strategic-merge of these conditions leaves it (merge by type).
pub(crate) fn apply_conditions(node: &mut Node, written: &[NodeCondition]) {
    for w in written {
        match node.conditions.iter_mut().find(|c| c.kind == w.kind) {
            Some(slot) => *slot = w.clone(),
            None => node.conditions.push(w.clone()),
        }
    }
}

pub(crate) fn apply_labels(node: &mut Node, labels: &[(Name, Name)]) {
    for (k, v) in labels {
        node.labels.set(k.clone(), v.clone());
    }
}

pub(crate) fn apply_not_ready(pod: &mut Pod) {
    pod.ready = Some(ConditionStatus::False);
}

/// A graceful DELETE sets the deletionTimestamp; the pod lingers until its kubelet confirms.
pub(crate) fn apply_delete(pod: &mut Pod) {
    pod.deleting = true;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::TaintEffect;
    use std::rc::Rc;

    fn taint(key: &str, effect: TaintEffect) -> Taint {
        Taint {
            key: Rc::from(key),
            value: Rc::from(""),
            effect,
            time_added: None,
        }
    }

    #[test]
    fn taint_lines_name_what_is_added_and_removed() {
        let unreachable = taint("node.kubernetes.io/unreachable", TaintEffect::NoExecute);
        let not_ready = taint("node.kubernetes.io/not-ready", TaintEffect::NoExecute);
        let user = taint("user", TaintEffect::NoSchedule);
        assert_eq!(
            taints_line(
                "n1",
                std::slice::from_ref(&user),
                &[user.clone(), unreachable.clone()]
            ),
            "would taint node n1 node.kubernetes.io/unreachable:NoExecute"
        );
        assert_eq!(
            taints_line(
                "n1",
                &[user.clone(), unreachable.clone()],
                std::slice::from_ref(&user)
            ),
            "would untaint node n1 node.kubernetes.io/unreachable:NoExecute"
        );
        assert_eq!(
            taints_line("n1", std::slice::from_ref(&unreachable), &[not_ready]),
            "would taint node n1 node.kubernetes.io/not-ready:NoExecute and untaint node.kubernetes.io/unreachable:NoExecute"
        );
    }

    #[test]
    fn the_recent_lines_are_bounded_and_counts_are_per_kind() {
        let mut log = DryRunLog::default();
        for i in 0..RECENT_WOULD + 5 {
            log.record(WriteKind::PodEviction, format!("would evict pod ns/p{i}"));
        }
        log.record(WriteKind::Taints, "would taint node n1 x:NoExecute".into());
        assert_eq!(log.count(WriteKind::PodEviction), RECENT_WOULD as u64 + 5);
        assert_eq!(log.count(WriteKind::Taints), 1);
        assert_eq!(log.total(), RECENT_WOULD as u64 + 6);
        assert_eq!(log.recent().count(), RECENT_WOULD);
        assert_eq!(log.recent().next(), Some("would evict pod ns/p6"));
    }
}
