//! Compact projections of the API objects the controller reads.
//!
//! Only what the controllers need is kept; names are interned `Rc<str>` (one thread, no atomics),
//! so a node name shared by a node, its lease and its 110 pods is stored once. No full API object is
//! kept after decoding (kube-controller-manager's informers cache whole objects: #115699).
//! `kube/` decodes JSON into these; `controller/` consumes them; neither knows the other.

mod compact;
mod inline_text;
mod interner;
mod name_map;
mod node_key;
mod node_labels;
mod pod_table;
mod prefetch;
mod ref_table;
mod store;
mod writers;

pub use inline_text::{LeaseName, Version};
pub use interner::Interner;
pub use name_map::NameMap;
pub use node_key::NodeKey;
pub use node_labels::NodeLabels;
pub use pod_table::{PodBefore, PodChange, PodId, PodTable, PodUpsert, PodView};
pub use prefetch::prefetch;
pub use store::{ClusterStore, Kind, StoreBytes, Upserted, Vanished};
pub use writers::{INCUMBENT_MANAGERS, Writers};

use std::rc::Rc;

use crate::time::Time;

/// An interned string: node names, namespaces, taint keys, label values, uids.
pub type Name = Rc<str>;

/// The labels the controller reads or writes; every other label is dropped at decode time.
pub mod labels {
    pub const ZONE_BETA: &str = "failure-domain.beta.kubernetes.io/zone";
    pub const REGION_BETA: &str = "failure-domain.beta.kubernetes.io/region";
    pub const ZONE: &str = "topology.kubernetes.io/zone";
    pub const REGION: &str = "topology.kubernetes.io/region";
    pub const EXCLUDE_DISRUPTION: &str = "node.kubernetes.io/exclude-disruption";
    pub const OS: &str = "kubernetes.io/os";
    pub const OS_BETA: &str = "beta.kubernetes.io/os";
    pub const ARCH: &str = "kubernetes.io/arch";
    pub const ARCH_BETA: &str = "beta.kubernetes.io/arch";

    pub(crate) const KEPT: [&str; 9] = [
        ZONE_BETA,
        REGION_BETA,
        ZONE,
        REGION,
        EXCLUDE_DISRUPTION,
        OS,
        OS_BETA,
        ARCH,
        ARCH_BETA,
    ];

    pub fn is_kept(key: &str) -> bool {
        KEPT.contains(&key)
    }
}

/// The taint keys the node lifecycle controller owns.
pub mod taint_keys {
    pub const NOT_READY: &str = "node.kubernetes.io/not-ready";
    pub const UNREACHABLE: &str = "node.kubernetes.io/unreachable";
    pub const MEMORY_PRESSURE: &str = "node.kubernetes.io/memory-pressure";
    pub const DISK_PRESSURE: &str = "node.kubernetes.io/disk-pressure";
    pub const NETWORK_UNAVAILABLE: &str = "node.kubernetes.io/network-unavailable";
    pub const PID_PRESSURE: &str = "node.kubernetes.io/pid-pressure";
    pub const UNSCHEDULABLE: &str = "node.kubernetes.io/unschedulable";
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum ConditionStatus {
    True,
    False,
    Unknown,
    /// Any other text (`""`, `"true"`): matches no rule, as upstream's switches have no case
    /// for it — no condition taint, no NoExecute taint — until the grace period overwrites it
    /// with Unknown like any other status.
    Other,
}

impl ConditionStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            ConditionStatus::True => "True",
            ConditionStatus::False => "False",
            ConditionStatus::Unknown => "Unknown",
            // Only ever written inside a verdict, which sets the conditions it owns Unknown;
            // a condition it leaves alone with an unreadable status is written as Unknown too.
            ConditionStatus::Other => "Unknown",
        }
    }

    pub fn parse(s: &str) -> ConditionStatus {
        ConditionStatus::parse_bytes(s.as_bytes())
    }

    /// As [`ConditionStatus::parse`], for text not checked as UTF-8 (any other bytes are
    /// `Other`, as any other text is).
    pub fn parse_bytes(s: &[u8]) -> ConditionStatus {
        match s {
            b"True" => ConditionStatus::True,
            b"False" => ConditionStatus::False,
            b"Unknown" => ConditionStatus::Unknown,
            _ => ConditionStatus::Other,
        }
    }
}

/// The node condition types the controller reads or writes; others are dropped at decode time.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum NodeConditionType {
    Ready,
    MemoryPressure,
    DiskPressure,
    PIDPressure,
    NetworkUnavailable,
}

impl NodeConditionType {
    pub(crate) const ALL: [NodeConditionType; 5] = [
        NodeConditionType::Ready,
        NodeConditionType::MemoryPressure,
        NodeConditionType::DiskPressure,
        NodeConditionType::PIDPressure,
        NodeConditionType::NetworkUnavailable,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            NodeConditionType::Ready => "Ready",
            NodeConditionType::MemoryPressure => "MemoryPressure",
            NodeConditionType::DiskPressure => "DiskPressure",
            NodeConditionType::PIDPressure => "PIDPressure",
            NodeConditionType::NetworkUnavailable => "NetworkUnavailable",
        }
    }

    pub(crate) fn parse(s: &str) -> Option<NodeConditionType> {
        NodeConditionType::parse_bytes(s.as_bytes())
    }

    /// As [`NodeConditionType::parse`], for text not checked as UTF-8 (the types it names are
    /// ASCII, so any other bytes are `None`, as any other text is).
    pub fn parse_bytes(s: &[u8]) -> Option<NodeConditionType> {
        NodeConditionType::ALL
            .into_iter()
            .find(|t| t.as_str().as_bytes() == s)
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeCondition {
    pub kind: NodeConditionType,
    pub status: ConditionStatus,
    pub last_heartbeat_time: Option<Time>,
    pub last_transition_time: Option<Time>,
    /// Reason and message.
    pub text: ConditionText,
}

/// A condition's reason and message as one pair, shared by every condition with the same two:
/// the kubelet writes the same text on every node, so the decoder keeps one pair per distinct
/// text (`DecodeContext`) and a condition holds one pointer (8 bytes, not two 16-byte names).
/// Both are kept as read: the status write sends them back unchanged.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct ConditionText(Option<Rc<(Option<Name>, Option<Name>)>>);

impl ConditionText {
    /// A pair of its own (the decoder shares them instead: `kube/decode/condition_text.rs`).
    pub fn new(reason: Option<Name>, message: Option<Name>) -> ConditionText {
        if reason.is_none() && message.is_none() {
            return ConditionText(None);
        }
        ConditionText(Some(Rc::new((reason, message))))
    }

    pub fn reason(&self) -> Option<&Name> {
        self.0.as_ref().and_then(|pair| pair.0.as_ref())
    }

    pub fn message(&self) -> Option<&Name> {
        self.0.as_ref().and_then(|pair| pair.1.as_ref())
    }

    /// The shared pair, for the store's accounting and the decoder's table.
    pub fn pair(&self) -> Option<&Rc<(Option<Name>, Option<Name>)>> {
        self.0.as_ref()
    }

    pub fn from_pair(pair: Option<Rc<(Option<Name>, Option<Name>)>>) -> ConditionText {
        ConditionText(pair)
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum TaintEffect {
    NoSchedule,
    PreferNoSchedule,
    NoExecute,
    /// An effect this version does not know; kept so a full-list taint patch preserves it.
    Other(Name),
}

impl TaintEffect {
    pub fn as_str(&self) -> &str {
        match self {
            TaintEffect::NoSchedule => "NoSchedule",
            TaintEffect::PreferNoSchedule => "PreferNoSchedule",
            TaintEffect::NoExecute => "NoExecute",
            TaintEffect::Other(s) => s,
        }
    }

    pub fn parse(s: &str, interner: &mut Interner) -> TaintEffect {
        match s {
            "NoSchedule" => TaintEffect::NoSchedule,
            "PreferNoSchedule" => TaintEffect::PreferNoSchedule,
            "NoExecute" => TaintEffect::NoExecute,
            other => TaintEffect::Other(interner.intern(other)),
        }
    }
}

/// A node taint. All of a node's taints are kept (not only ours): a taint patch replaces the
/// whole list, so another writer's taints must be sent back unchanged.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Taint {
    pub key: Name,
    /// Empty when the taint has no value.
    pub value: Name,
    pub effect: TaintEffect,
    /// `timeAdded`, second precision as the API stores it; set on NoExecute taints.
    pub time_added: Option<Time>,
}

impl Taint {
    /// Same key and effect: what `MatchTaint` compares when adding or removing.
    pub fn matches(&self, other: &Taint) -> bool {
        self.key == other.key && self.effect == other.effect
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Node {
    pub name: Name,
    pub uid: Name,
    pub resource_version: Name,
    pub creation_timestamp: Time,
    /// Only the keys in [`labels::KEPT`] (and the pools' selector keys), in any order; shared
    /// with the nodes that have the same set.
    pub labels: NodeLabels,
    pub taints: Vec<Taint>,
    pub unschedulable: bool,
    /// Only the types in [`NodeConditionType`]; at most one of each.
    pub conditions: Vec<NodeCondition>,
    /// Type and status of every other condition (node-problem-detector's `KernelDeadlock`, …),
    /// for custom condition taints; nothing else of them is kept, and they are never written.
    pub other_conditions: Vec<(Name, ConditionStatus)>,
    /// What the node's OpenYurt autonomy annotations say.
    pub autonomy: Autonomy,
    /// What the node's [`maintenance::ANNOTATION`] says (with autonomy's, the only annotations
    /// kept): fencing leaves a node in maintenance alone.
    pub maintenance: Maintenance,
    /// Who last wrote its Ready condition and taints (read in shadow mode only).
    pub writers: Writers,
}

/// Planned work on a node: `node-lifecycled.io/maintenance`, empty or an RFC 3339 time until which
/// it holds.
pub mod maintenance {
    pub const ANNOTATION: &str = "node-lifecycled.io/maintenance";
}

/// Node Lifecycle Conditions (KEP-5683, alpha in Kubernetes 1.37 behind the
/// `NodeLifecycleConditions` gate): well-known condition types an admin, or a maintenance
/// controller the admin authorised, sets on a node. Like any other condition they are kept as
/// type and status in [`Node::other_conditions`] on every server version.
pub mod lifecycle_conditions {
    /// "This Node is actively undergoing maintenance": what the KEP offers to tell a node an
    /// admin controls from an unexpected failure. The only one our decisions read.
    pub const MAINTENANCE_IN_PROGRESS: &str = "MaintenanceInProgress";
}

/// A node's maintenance annotation, read at decode time.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Maintenance {
    /// No annotation.
    #[default]
    None,
    /// Present with an empty value: until it is removed.
    Indefinite,
    /// Present with an RFC 3339 time: until then.
    Until(Time),
    /// Present with a value that is neither: counted as maintenance (never fence on a guess);
    /// the value is kept for the warning and `explain`.
    Unreadable(Rc<str>),
}

impl Maintenance {
    /// The annotation's value as maintenance.
    pub fn parse(value: &str) -> Maintenance {
        let value = value.trim();
        if value.is_empty() {
            return Maintenance::Indefinite;
        }
        match Time::parse_rfc3339(value) {
            Some(t) => Maintenance::Until(t),
            None => Maintenance::Unreadable(Rc::from(value)),
        }
    }

    /// Whether it holds at `now`.
    pub fn holds(&self, now: Time) -> bool {
        match self {
            Maintenance::None => false,
            Maintenance::Until(t) => now < *t,
            Maintenance::Indefinite | Maintenance::Unreadable(_) => true,
        }
    }

    /// For a decision line: what the annotation says.
    pub fn describe(&self) -> String {
        match self {
            Maintenance::None => "none".into(),
            Maintenance::Indefinite => "until the annotation is removed".into(),
            Maintenance::Until(t) => format!("until {}", t.to_rfc3339()),
            Maintenance::Unreadable(v) => {
                format!("unreadable value {v:?}, counted as maintenance")
            }
        }
    }
}

/// The OpenYurt edge autonomy annotations of a node, interpreted at decode time.
pub mod autonomy_annotations {
    /// A duration (Go syntax, `"1h"`); `"0"` means forever.
    pub const DURATION: &str = "node.openyurt.io/autonomy-duration";
    /// Deprecated; `"true"` means forever.
    pub const LEGACY: &str = "node.beta.openyurt.io/autonomy";
    /// `"true"`: the node's pods are bound to it, forever.
    pub const BINDING: &str = "apps.openyurt.io/binding";

    pub fn is_kept(key: &str) -> bool {
        key == DURATION || key == LEGACY || key == BINDING
    }
}

/// How long a node's pods stay put after it drops off (edge autonomy).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub enum Autonomy {
    /// No (valid) annotation: upstream behaviour.
    #[default]
    None,
    /// Evictions for not-ready/unreachable wait at least this long after the taint was added.
    For(std::time::Duration),
    /// Never evicted for not-ready/unreachable.
    Forever,
}

impl Node {
    pub fn label(&self, key: &str) -> Option<&Name> {
        self.labels
            .iter()
            .find(|(k, _)| &**k == key)
            .map(|(_, v)| v)
    }

    pub fn condition(&self, kind: NodeConditionType) -> Option<&NodeCondition> {
        self.conditions.iter().find(|c| c.kind == kind)
    }

    /// The status of the condition of type `kind`, whichever list keeps it.
    pub fn condition_status(&self, kind: &str) -> Option<ConditionStatus> {
        match NodeConditionType::parse(kind) {
            Some(known) => self.condition(known).map(|c| c.status),
            None => self
                .other_conditions
                .iter()
                .find(|(k, _)| &**k == kind)
                .map(|(_, s)| *s),
        }
    }

    pub fn ready(&self) -> Option<&NodeCondition> {
        self.condition(NodeConditionType::Ready)
    }

    /// Not Ready, as the status line and upstream's zone counts see it: a Ready condition that
    /// is not True, or none.
    pub fn is_not_ready(&self) -> bool {
        self.ready().map(|c| c.status) != Some(ConditionStatus::True)
    }

    /// The zone key (`component-helpers/node/topology.GetZoneKey`): a beta failure-domain
    /// label wins over the topology one whenever its key is present, even with an empty value;
    /// `region + ":\x00:" + zone`; empty when both are empty.
    pub fn zone_key(&self) -> String {
        let (region, zone) = self.region_and_zone();
        if region.is_empty() && zone.is_empty() {
            return String::new();
        }
        format!("{region}:\x00:{zone}")
    }

    /// Whether [`Node::zone_key`] is `key`, without building it (the controller asks on every
    /// node status event).
    pub fn has_zone_key(&self, key: &str) -> bool {
        let (region, zone) = self.region_and_zone();
        if region.is_empty() && zone.is_empty() {
            return key.is_empty();
        }
        key.strip_prefix(region)
            .and_then(|rest| rest.strip_prefix(":\x00:"))
            .is_some_and(|rest| rest == zone)
    }

    fn region_and_zone(&self) -> (&str, &str) {
        let pick = |beta: &str, ga: &str| -> &str {
            match self.label(beta) {
                Some(v) => v,
                None => self.label(ga).map(|v| &**v).unwrap_or(""),
            }
        };
        (
            pick(labels::REGION_BETA, labels::REGION),
            pick(labels::ZONE_BETA, labels::ZONE),
        )
    }

    /// KEP-5683's `MaintenanceInProgress` condition is True: the node is in planned
    /// maintenance. (Not one of the modelled types: it is among the other conditions, which
    /// the zone counts ask after on every node status event, so no parse on the way.)
    pub fn in_planned_maintenance(&self) -> bool {
        self.other_conditions.iter().any(|(kind, status)| {
            *status == ConditionStatus::True
                && &**kind == lifecycle_conditions::MAINTENANCE_IN_PROGRESS
        })
    }

    /// `node.kubernetes.io/exclude-disruption` present with any value.
    pub fn excluded_from_disruption(&self) -> bool {
        self.label(labels::EXCLUDE_DISRUPTION).is_some()
    }

    pub fn has_taint(&self, key: &str, effect: &TaintEffect) -> bool {
        self.taints
            .iter()
            .any(|t| &*t.key == key && &t.effect == effect)
    }

    pub fn no_execute_taints(&self) -> impl Iterator<Item = &Taint> {
        self.taints
            .iter()
            .filter(|t| t.effect == TaintEffect::NoExecute)
    }
}

/// A node's heartbeat in `kube-node-lease` (the Lease has the node's name).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lease {
    /// Copied from the wire, not interned (`inline_text.rs`); the store keeps the Lease under
    /// its node's interned name.
    pub name: LeaseName,
    pub renew_time: Option<Time>,
    /// `spec.leaseDurationSeconds`: the kubelet renews at a quarter of it.
    pub duration_seconds: Option<u32>,
    /// Inline when short (`version.rs`): a renewal's decode allocates nothing for it.
    pub resource_version: Version,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PodKey {
    pub namespace: Name,
    pub name: Name,
}

impl std::fmt::Display for PodKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum TolerationOperator {
    /// The default when `operator` is empty.
    Equal,
    Exists,
    /// An operator this version does not know: matches nothing.
    Other(Name),
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Toleration {
    /// Empty matches every key (with `Exists`).
    pub key: Name,
    pub operator: TolerationOperator,
    pub value: Name,
    /// `None` matches every effect.
    pub effect: Option<TaintEffect>,
    /// `None`: tolerated forever.
    pub toleration_seconds: Option<i64>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pod {
    pub key: PodKey,
    pub uid: Name,
    pub resource_version: Name,
    /// `spec.nodeName`; pods without one are not watched.
    pub node_name: Option<Name>,
    /// The pod's `Ready` condition, if it has one.
    pub ready: Option<ConditionStatus>,
    /// Shared between pods with identical tolerations (most pods of a workload).
    pub tolerations: Rc<[Toleration]>,
    /// `metadata.deletionTimestamp` is set: already being deleted.
    pub deleting: bool,
    /// Has a controller owner reference of kind DaemonSet (legacy eviction skips these).
    pub daemonset_owned: bool,
    /// Carries taint eviction's `DisruptionTarget` condition already (status, reason and message
    /// as [`disruption`] names them): upstream does not write it again before the DELETE.
    pub disruption_target: bool,
    /// `metadata.creationTimestamp` (the API server's clock; whole seconds, as the API keeps
    /// it): a pod cannot have been under a taint since before it existed (taint eviction's
    /// countdowns at a start or a takeover). `None` when absent or unreadable.
    pub creation_timestamp: Option<Time>,
}

/// The pod condition taint eviction adds before deleting a pod (upstream
/// `addConditionAndDeletePod`).
pub mod disruption {
    pub const CONDITION: &str = "DisruptionTarget";
    pub const REASON: &str = "DeletionByTaintManager";
    pub const MESSAGE: &str = "Taint manager: deleting due to NoExecute taint";
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `has_zone_key` answers what comparing with `zone_key` would, for every mix of beta and
    /// topology labels (present, empty, absent) and for keys that are near misses.
    #[test]
    fn a_node_has_the_zone_key_it_would_build_and_no_other() {
        let values = [None, Some(""), Some("a"), Some("b:\x00:c")];
        let keys = [
            labels::REGION_BETA,
            labels::REGION,
            labels::ZONE_BETA,
            labels::ZONE,
        ];
        let mut others = vec![
            String::new(),
            ":\x00:".into(),
            "a:\x00:".into(),
            ":\x00:a".into(),
        ];
        others.push("a:\x00:a".into());
        for mix in 0..values.len().pow(keys.len() as u32) {
            let mut node = Node {
                name: Rc::from("n"),
                uid: Rc::from("u"),
                resource_version: Rc::from("1"),
                creation_timestamp: Time::ZERO,
                labels: NodeLabels::default(),
                taints: Vec::new(),
                unschedulable: false,
                conditions: Vec::new(),
                other_conditions: Vec::new(),
                autonomy: Default::default(),
                maintenance: Default::default(),
                writers: Default::default(),
            };
            let mut m = mix;
            for key in keys {
                if let Some(v) = values[m % values.len()] {
                    node.labels.push((Rc::from(key), Rc::from(v)));
                }
                m /= values.len();
            }
            let own = node.zone_key();
            assert!(node.has_zone_key(&own), "{:?}", node.labels);
            for other in others.iter().filter(|o| **o != own) {
                assert!(!node.has_zone_key(other), "{:?} {other:?}", node.labels);
            }
        }
    }
}
