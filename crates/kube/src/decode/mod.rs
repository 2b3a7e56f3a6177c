//! JSON or protobuf ([`proto`]) → compact model projections ([`crate::model`]), without ever
//! building a full API object. Both fill the same wire shapes, so one `from_wire` decides.
//!
//! The wire structs mirror only the fields the controllers need; serde skips the rest (no
//! `deny_unknown_fields`: newer servers add fields). Strings are borrowed from the input where
//! JSON allows it and interned once (a Lease's name is copied inline instead:
//! `model/inline_text.rs`); unknown enum strings never fail decoding. Pods with identical
//! tolerations share one `Rc<[Toleration]>`.

mod condition_text;
mod lease;
pub mod list_stream;
mod node_annotations;
pub mod proto;
mod recent_tolerations;
mod shared_text;
mod wire;

use std::borrow::Cow;
use std::collections::HashSet;
use std::fmt;
use std::rc::Rc;

use serde::Deserialize;

use crate::model::{
    ConditionStatus, Interner, Name, Node, NodeCondition, NodeConditionType, NodeLabels, Pod,
    PodKey, Taint, TaintEffect, Toleration, TolerationOperator,
};
use crate::time::Time;

pub(crate) use wire::Status;

/// Annotation on the bookmark that ends a watch-list's initial events.
pub(crate) const INITIAL_EVENTS_END: &str = "k8s.io/initial-events-end";

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DecodeError {
    /// The kind or part being decoded ("Pod", "watch event", "NodeList").
    pub(crate) what: &'static str,
    pub(crate) reason: String,
}

impl DecodeError {
    pub fn new(what: &'static str, reason: impl Into<String>) -> DecodeError {
        DecodeError {
            what,
            reason: reason.into(),
        }
    }
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "cannot decode {}: {}", self.what, self.reason)
    }
}

impl std::error::Error for DecodeError {}

/// Shared decoding state: the interner (names shared by nodes, leases and pods) and the tables
/// of distinct toleration lists and node label sets. One per process, owned by the loop.
#[derive(Debug)]
pub struct DecodeContext {
    pub(crate) interner: Interner,
    tolerations: HashSet<Rc<[Toleration]>>,
    /// The lists the last pods carried, matched on the wire before converting.
    recent_tolerations: recent_tolerations::RecentTolerations,
    /// The last pod's namespace: a LIST delivers pods by namespace, so most pods are compared
    /// with it instead of hashed into the interner.
    last_namespace: Option<Rc<str>>,
    /// Nodes' kept label sets: the nodes of a zone (with one os and arch) share one.
    label_sets: shared_text::SharedByText<[(Name, Name)]>,
    /// Node conditions' reason and message pairs (`condition_text.rs`).
    condition_texts: shared_text::SharedByText<(Option<Name>, Option<Name>)>,
    /// Bad fields already logged ("Node/name: field"), so an object re-sent every few seconds
    /// with the same bad field is logged once.
    warned: HashSet<String>,
    /// Node label keys kept beside [`crate::model::labels::KEPT`]: the ones pool selectors read.
    pool_label_keys: Vec<Box<str>>,
    /// Read nodes' managedFields (shadow mode).
    read_writers: bool,
}

/// Bad fields remembered for log-once; past this, further ones are logged every time.
const WARNED_MAX: usize = 10_000;

impl Default for DecodeContext {
    fn default() -> Self {
        DecodeContext::new()
    }
}

impl DecodeContext {
    pub fn new() -> DecodeContext {
        DecodeContext {
            interner: Interner::new(),
            tolerations: HashSet::new(),
            recent_tolerations: Default::default(),
            last_namespace: None,
            label_sets: Default::default(),
            condition_texts: Default::default(),
            warned: HashSet::new(),
            pool_label_keys: Vec::new(),
            read_writers: false,
        }
    }

    /// Shadow mode: read nodes' managedFields for who wrote their Ready and taints
    /// (`model::Writers`; protobuf only).
    pub fn read_writers(&mut self, on: bool) {
        self.read_writers = on;
    }

    pub(crate) fn reads_writers(&self) -> bool {
        self.read_writers
    }

    /// Node labels with these keys are kept too (pool selectors read them). Nodes decoded
    /// earlier keep what they had until their next update.
    pub fn keep_node_labels(&mut self, keys: impl IntoIterator<Item = String>) {
        self.pool_label_keys = keys.into_iter().map(String::into_boxed_str).collect();
    }

    fn keeps_node_label(&self, key: &str) -> bool {
        crate::model::labels::is_kept(key) || self.pool_label_keys.iter().any(|k| &**k == key)
    }

    /// An annotation that cannot be read is ignored: logged once per object and annotation.
    fn bad_annotation(&mut self, name: &str, key: &str, value: &str, why: &str) {
        let warned = format!("Node/{name}: annotation {key}");
        if self.warned.contains(&warned) {
            return;
        }
        log::warn!("{warned}: {value:?} ignored ({why}): the node is not autonomous");
        if self.warned.len() < WARNED_MAX {
            self.warned.insert(warned);
        }
    }

    fn intern(&mut self, s: &str) -> Rc<str> {
        self.interner.intern(s)
    }

    /// [`DecodeContext::intern`] for a pod's namespace, the last one compared first.
    fn intern_namespace(&mut self, s: &str) -> Rc<str> {
        if let Some(last) = &self.last_namespace
            && **last == *s
        {
            return last.clone();
        }
        let interned = self.intern(s);
        self.last_namespace = Some(interned.clone());
        interned
    }

    /// The shared copy of a toleration list.
    fn share_tolerations(&mut self, list: Vec<Toleration>) -> Rc<[Toleration]> {
        if let Some(existing) = self.tolerations.get(list.as_slice()) {
            return existing.clone();
        }
        let rc: Rc<[Toleration]> = Rc::from(list);
        self.tolerations.insert(rc.clone());
        rc
    }

    /// The shared copy of a node's kept label set, found by the wire's text: a set already
    /// shared (the node's own at every heartbeat) is neither interned nor built again.
    fn share_labels(&mut self, kept: &[(Cow<'_, str>, Cow<'_, str>)]) -> NodeLabels {
        let hash = self
            .label_sets
            .hash(kept.iter().flat_map(|(k, v)| [k.as_bytes(), v.as_bytes()]));
        let same = |set: &[(Name, Name)]| {
            set.len() == kept.len()
                && set
                    .iter()
                    .zip(kept)
                    .all(|((k, v), (wk, wv))| **k == **wk && **v == **wv)
        };
        if let Some(existing) = self.label_sets.find(hash, same) {
            return NodeLabels::from(existing.clone());
        }
        let list: Vec<(Name, Name)> = kept
            .iter()
            .map(|(k, v)| (self.intern(k), self.intern(v)))
            .collect();
        let rc: Rc<[(Name, Name)]> = Rc::from(list);
        self.label_sets.insert(hash, rc.clone());
        NodeLabels::from(rc)
    }

    /// A field that cannot be read is dropped, not the object: logged once per object and field.
    fn bad_field(&mut self, what: &'static str, name: &str, field: &'static str, value: &str) {
        let key = format!("{what}/{name}: {field}");
        if self.warned.contains(&key) {
            return;
        }
        log::warn!("{key}: bad timestamp {value:?} ignored (the {what} is kept without it)");
        if self.warned.len() < WARNED_MAX {
            self.warned.insert(key);
        }
    }

    /// Bad fields logged so far (each once).
    #[cfg(test)]
    pub(crate) fn bad_fields_logged(&self) -> usize {
        self.warned.len()
    }

    /// Distinct toleration lists currently shared.
    #[cfg(test)]
    pub(crate) fn distinct_toleration_lists(&self) -> usize {
        self.tolerations.len()
    }

    /// Drops names, toleration lists, label sets and condition texts no object refers to any
    /// more (e.g. after a relist).
    pub fn prune(&mut self) -> usize {
        // The recent lists' and namespace's references would keep them shared.
        self.recent_tolerations.clear();
        self.last_namespace = None;
        let before = self.tolerations.len();
        self.tolerations.retain(|t| Rc::strong_count(t) > 1);
        let pruned_lists = before - self.tolerations.len() + self.label_sets.prune();
        // Toleration lists, label sets and texts go first: they hold interned names.
        pruned_lists + condition_text::prune(self) + self.interner.prune()
    }
}

/// A kind we decode: the wire shape and its conversion into the model.
pub trait Decode: Sized {
    const KIND: &'static str;
    type Wire<'de>: Deserialize<'de>;
    fn from_wire(wire: Self::Wire<'_>, ctx: &mut DecodeContext) -> Result<Self, DecodeError>;
}

/// A decoded watch event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WatchEvent<T> {
    Added(T),
    Modified(T),
    Deleted(T),
    Bookmark(Bookmark),
    /// The object of an `ERROR` event: a metav1.Status (`code` 410 = resourceVersion too old).
    Error(Status),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Bookmark {
    pub(crate) resource_version: String,
    /// Carries `k8s.io/initial-events-end: "true"`: a watch-list's initial state is complete.
    pub(crate) initial_events_end: bool,
}

/// One page of a paginated LIST.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListPage<T> {
    pub items: Vec<T>,
    pub resource_version: String,
    /// Present when more pages follow.
    pub continue_token: Option<String>,
    /// Items that could not be decoded, with the reason (logged by the caller, never fatal).
    pub skipped: Vec<DecodeError>,
}

/// One object (e.g. a live GET of a Lease).
pub fn decode_object<T: Decode>(json: &[u8], ctx: &mut DecodeContext) -> Result<T, DecodeError> {
    let wire: T::Wire<'_> =
        serde_json::from_slice(json).map_err(|e| DecodeError::new(T::KIND, e.to_string()))?;
    T::from_wire(wire, ctx)
}

/// One LIST response page.
pub fn decode_list<T: Decode>(
    json: &[u8],
    ctx: &mut DecodeContext,
) -> Result<ListPage<T>, DecodeError> {
    let list: wire::List<'_, T::Wire<'_>> =
        serde_json::from_slice(json).map_err(|e| DecodeError::new("list", e.to_string()))?;
    let meta = list.metadata.unwrap_or_default();
    let mut page = ListPage {
        items: Vec::new(),
        resource_version: wire::text(&meta.resource_version).to_string(),
        continue_token: meta
            .continue_token
            .map(|c| c.0.into_owned())
            .filter(|c| !c.is_empty()),
        skipped: Vec::new(),
    };
    for item in list.items.unwrap_or_default() {
        match T::from_wire(item, ctx) {
            Ok(obj) => page.items.push(obj),
            Err(e) => page.skipped.push(e),
        }
    }
    Ok(page)
}

/// One line of a watch stream.
pub fn decode_watch_event<T: Decode>(
    line: &[u8],
    ctx: &mut DecodeContext,
) -> Result<WatchEvent<T>, DecodeError> {
    match serde_json::from_slice::<wire::Event<'_, T::Wire<'_>>>(line) {
        Ok(wire::Event::ObjectBeforeType) => {
            // Not how the API server writes events; parse again the slow way.
            let loose: wire::LooseEvent<'_> = serde_json::from_slice(line)
                .map_err(|e| DecodeError::new("watch event", e.to_string()))?;
            let event = wire::Event::<T::Wire<'_>>::from_loose(&loose)
                .map_err(|e| DecodeError::new("watch event", e.to_string()))?;
            convert_event(event, ctx)
        }
        Ok(event) => convert_event(event, ctx),
        Err(e) => Err(DecodeError::new("watch event", e.to_string())),
    }
}

fn convert_event<T: Decode>(
    event: wire::Event<'_, T::Wire<'_>>,
    ctx: &mut DecodeContext,
) -> Result<WatchEvent<T>, DecodeError> {
    Ok(match event {
        wire::Event::Added(w) => WatchEvent::Added(T::from_wire(w, ctx)?),
        wire::Event::Modified(w) => WatchEvent::Modified(T::from_wire(w, ctx)?),
        wire::Event::Deleted(w) => WatchEvent::Deleted(T::from_wire(w, ctx)?),
        wire::Event::Bookmark(b) => {
            let meta = b.metadata.unwrap_or_default();
            WatchEvent::Bookmark(Bookmark {
                resource_version: wire::text(&meta.resource_version).to_string(),
                initial_events_end: meta.initial_events_end,
            })
        }
        wire::Event::Error(status) => WatchEvent::Error(status),
        wire::Event::Unknown(kind) => {
            return Err(DecodeError::new(
                "watch event",
                format!("unknown event type {kind:?}"),
            ));
        }
        wire::Event::ObjectBeforeType | wire::Event::Missing => {
            return Err(DecodeError::new("watch event", "no type or no object"));
        }
    })
}

fn required<'a>(
    what: &'static str,
    field: &'static str,
    v: &'a Option<wire::Str<'_>>,
) -> Result<&'a str, DecodeError> {
    match v.as_ref().map(|s| &*s.0) {
        Some(s) if !s.is_empty() => Ok(s),
        _ => Err(DecodeError::new(what, format!("missing {field}"))),
    }
}

/// For values unique to one object version (uids, resourceVersions, pod names): interning them
/// would only grow the interner with names that die at the next update.
fn owned(v: &Option<wire::Str<'_>>) -> Rc<str> {
    Rc::from(wire::text(v))
}

/// A timestamp that may be wrong without costing the object: a node with one bad taint or
/// condition time must still be monitored (a failed decode would drop it from a LIST, and it
/// would never be judged). The bad field reads as absent.
fn lenient_timestamp(
    ctx: &mut DecodeContext,
    what: &'static str,
    name: &str,
    field: &'static str,
    v: &Option<wire::Stamp<'_>>,
) -> Option<Time> {
    match v.as_ref().map(wire::Stamp::time) {
        None | Some(Ok(None)) => None,
        Some(Ok(t)) => t,
        Some(Err(s)) => {
            ctx.bad_field(what, name, field, &s);
            None
        }
    }
}

fn interned(ctx: &mut DecodeContext, v: &Option<wire::Str<'_>>) -> Rc<str> {
    ctx.intern(wire::text(v))
}

fn opt_interned(ctx: &mut DecodeContext, v: &Option<wire::Str<'_>>) -> Option<Rc<str>> {
    v.as_ref()
        .filter(|s| !s.0.is_empty())
        .map(|s| ctx.intern(&s.0))
}

impl Decode for Node {
    const KIND: &'static str = "Node";
    type Wire<'de> = wire::Node<'de>;

    fn from_wire(w: wire::Node<'_>, ctx: &mut DecodeContext) -> Result<Node, DecodeError> {
        let meta = w.metadata.unwrap_or_default();
        let writers = meta.writers;
        let name = ctx.intern(required("Node", "metadata.name", &meta.name)?);
        let creation_timestamp = lenient_timestamp(
            ctx,
            "Node",
            &name,
            "metadata.creationTimestamp",
            &meta.creation_timestamp,
        )
        .unwrap_or(Time::ZERO);
        let mut labels = meta.labels.map(|l| l.0).unwrap_or_default();
        labels.retain(|(k, _)| ctx.keeps_node_label(k));
        let annotations = meta.annotations.map(|a| a.0).unwrap_or_default();
        let autonomy = node_annotations::autonomy(ctx, &name, &annotations);
        let maintenance = node_annotations::maintenance(ctx, &name, &annotations);
        let spec = w.spec.unwrap_or_default();
        let mut taints = Vec::new();
        for t in spec.taints.unwrap_or_default() {
            taints.push(Taint {
                key: interned(ctx, &t.key),
                value: interned(ctx, &t.value),
                effect: TaintEffect::parse(wire::text(&t.effect), &mut ctx.interner),
                time_added: lenient_timestamp(
                    ctx,
                    "Node",
                    &name,
                    "spec.taints[].timeAdded",
                    &t.time_added,
                ),
            });
        }
        let mut conditions: Vec<NodeCondition> = Vec::new();
        let mut other_conditions: Vec<(Rc<str>, ConditionStatus)> = Vec::new();
        for c in w.status.and_then(|s| s.conditions).unwrap_or_default() {
            // The texts are read unchecked (`wire::NodeCondition`): a type or status the model
            // names is ASCII; any other is checked here, in the order they are written (type,
            // status, reason, message), so a text that is not UTF-8 refuses the node as the
            // reader's check did.
            let known = NodeConditionType::parse_bytes(wire::lazy_bytes(&c.kind));
            let other_kind = match known {
                Some(_) => "",
                None => wire::lazy_text_of("Node", &c.kind, "status.conditions.type")?,
            };
            let status = ConditionStatus::parse_bytes(wire::lazy_bytes(&c.status));
            if status == ConditionStatus::Other {
                wire::lazy_text_of("Node", &c.status, "status.conditions.status")?;
            }
            let Some(kind) = known else {
                let kind = other_kind;
                condition_text::check(&c.reason, &c.message)?;
                if !kind.is_empty() && !other_conditions.iter().any(|(k, _)| &**k == kind) {
                    other_conditions.push((ctx.intern(kind), status));
                }
                continue;
            };
            if conditions.iter().any(|have| have.kind == kind) {
                condition_text::check(&c.reason, &c.message)?;
                continue; // the API validates uniqueness; keep the first if not
            }
            conditions.push(NodeCondition {
                kind,
                status,
                last_heartbeat_time: lenient_timestamp(
                    ctx,
                    "Node",
                    &name,
                    "status.conditions[].lastHeartbeatTime",
                    &c.last_heartbeat_time,
                ),
                last_transition_time: lenient_timestamp(
                    ctx,
                    "Node",
                    &name,
                    "status.conditions[].lastTransitionTime",
                    &c.last_transition_time,
                ),
                text: condition_text::shared(ctx, &c.reason, &c.message)?,
            });
        }
        // Kept for the node's lifetime: no spare capacity.
        taints.shrink_to_fit();
        conditions.shrink_to_fit();
        other_conditions.shrink_to_fit();
        Ok(Node {
            name,
            uid: owned(&meta.uid),
            resource_version: owned(&meta.resource_version),
            creation_timestamp,
            labels: ctx.share_labels(&labels),
            taints,
            unschedulable: spec.unschedulable.unwrap_or(false),
            conditions,
            other_conditions,
            autonomy,
            maintenance,
            writers,
        })
    }
}

impl Decode for Pod {
    const KIND: &'static str = "Pod";
    type Wire<'de> = wire::Pod<'de>;

    fn from_wire(w: wire::Pod<'_>, ctx: &mut DecodeContext) -> Result<Pod, DecodeError> {
        let meta = w.metadata.unwrap_or_default();
        let name = Rc::from(required("Pod", "metadata.name", &meta.name)?);
        let namespace =
            ctx.intern_namespace(required("Pod", "metadata.namespace", &meta.namespace)?);
        let spec = w.spec.unwrap_or_default();
        let wire_tolerations = spec.tolerations.unwrap_or_default();
        let tolerations = match ctx.recent_tolerations.find(&wire_tolerations) {
            Some(shared) => shared,
            None => {
                let mut list: Vec<Toleration> = Vec::with_capacity(wire_tolerations.len());
                for t in wire_tolerations {
                    // In the order of the fields' numbers, the order they are written in.
                    let key = wire::lazy_text(&t.key, "spec.tolerations.key")?;
                    let operator = wire::lazy_text(&t.operator, "spec.tolerations.operator")?;
                    let value = wire::lazy_text(&t.value, "spec.tolerations.value")?;
                    let effect = wire::lazy_text(&t.effect, "spec.tolerations.effect")?;
                    list.push(Toleration {
                        key: ctx.intern(key),
                        operator: match operator {
                            "" | "Equal" => TolerationOperator::Equal,
                            "Exists" => TolerationOperator::Exists,
                            other => TolerationOperator::Other(ctx.intern(other)),
                        },
                        value: ctx.intern(value),
                        effect: match effect {
                            "" => None,
                            e => Some(TaintEffect::parse(e, &mut ctx.interner)),
                        },
                        toleration_seconds: t.toleration_seconds,
                    });
                }
                let shared = ctx.share_tolerations(list);
                ctx.recent_tolerations.remember(shared.clone());
                shared
            }
        };
        let conditions = w.status.and_then(|s| s.conditions).unwrap_or_default();
        // Lenient: a bad stamp costs only this field (the pod then counts as it did before
        // pods kept one: from its taint's `timeAdded` at a start or a takeover).
        let creation_timestamp = lenient_timestamp(
            ctx,
            "Pod",
            &name,
            "metadata.creationTimestamp",
            &meta.creation_timestamp,
        )
        .filter(|t| *t > Time::ZERO);
        Ok(Pod {
            key: PodKey { namespace, name },
            uid: owned(&meta.uid),
            resource_version: owned(&meta.resource_version),
            node_name: opt_interned(ctx, &spec.node_name),
            ready: conditions.ready,
            tolerations,
            deleting: meta.deletion_timestamp.is_some_and(|d| d.is_set()),
            daemonset_owned: meta.owner_references.is_some_and(|o| o.daemonset),
            disruption_target: conditions.disruption_target,
            creation_timestamp,
        })
    }
}

#[cfg(test)]
mod tests;
