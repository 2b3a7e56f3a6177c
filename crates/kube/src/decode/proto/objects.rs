//! Protobuf messages read into the same wire shapes the JSON path fills, so one conversion
//! (`Decode::from_wire`) turns both into the model, with the same required and lenient fields.
//! A repeated occurrence of a singular field replaces the earlier one (the API server never
//! writes one twice).

use std::borrow::Cow;

use super::fields::*;
use super::{Field, ProtoError, Reader, Value};
use crate::decode::wire::{self, Bytes, KeptMap, KeyFilter, LazyStr, Stamp, Str};
use crate::decode::{Bookmark, Decode, DecodeContext, DecodeError, INITIAL_EVENTS_END};
use crate::model::{Lease, Node, Pod};

/// A kind readable from protobuf: its message (the bytes inside the envelope or a list item)
/// into the model, through the wire shape the JSON path fills (one conversion for both) or,
/// for a Lease, straight from the fields (see `lease`).
pub trait ProtoWire: Decode {
    fn from_proto(object: Reader<'_>, ctx: &mut DecodeContext) -> Result<Self, DecodeError>;
}

/// A field of `T` that cannot be read, as the error `T`'s decode returns.
fn bad<T: Decode>(e: ProtoError) -> DecodeError {
    DecodeError::new(T::KIND, e.to_string())
}

fn str<'a>(f: &Field<'a>, field: &'static str) -> Result<Option<Str<'a>>, ProtoError> {
    Ok(Some(Str(Cow::Borrowed(f.str(field)?))))
}

/// A string only compared, never kept: not checked as UTF-8 (`wire::Bytes`).
fn bytes<'a>(f: &Field<'a>, field: &'static str) -> Result<Option<Bytes<'a>>, ProtoError> {
    Ok(Some(Bytes(Cow::Borrowed(f.bytes(field)?))))
}

/// A string checked as UTF-8 only if it is kept (`wire::LazyStr`).
fn lazy<'a>(f: &Field<'a>, field: &'static str) -> Result<Option<LazyStr<'a>>, ProtoError> {
    Ok(Some(LazyStr::Unchecked {
        bytes: f.bytes(field)?,
        offset: f.offset,
    }))
}

/// A metav1.Time or MicroTime; an empty message is Go's zero time, which JSON writes as null.
pub(super) fn stamp<'a>(
    f: &Field<'a>,
    field: &'static str,
) -> Result<Option<Stamp<'a>>, ProtoError> {
    // What the API server writes for a node's heartbeat and transition times: the seconds
    // (tag 0x08, a varint), then the nanos (tag 0x10) in one byte, `10 00` for a whole
    // second; or the seconds alone. Read here as the loop below reads them (`int64` of the
    // seconds, `int32` of the nanos); any other shape, and every error, takes the loop.
    if let Value::Bytes([0x08, rest @ ..]) = f.value
        && let Ok(Some((seconds, end))) = super::varint(rest, 0)
    {
        let nanos = match rest.get(end..) {
            Some([]) => Some(0),
            Some([0x10, n]) if *n < 0x80 => Some(i32::from(*n)),
            _ => None,
        };
        if let Some(nanos) = nanos {
            return Ok(Some(Stamp::Unix {
                seconds: seconds as i64,
                nanos,
            }));
        }
    }
    stamp_fields(f, field)
}

/// [`stamp`] for any shape: the message's fields read one by one.
pub(super) fn stamp_fields<'a>(
    f: &Field<'a>,
    field: &'static str,
) -> Result<Option<Stamp<'a>>, ProtoError> {
    let mut r = f.message(field)?;
    let (mut seconds, mut nanos, mut any) = (0, 0, false);
    while let Some(t) = r.next_field()? {
        match t.number {
            TIME_SECONDS => seconds = t.int64(field)?,
            TIME_NANOS => nanos = t.int32(field)?,
            _ => continue,
        }
        any = true;
    }
    Ok(any.then_some(Stamp::Unix { seconds, nanos }))
}

/// The entries of a map<string, string> whose keys `F` keeps (the others are not even
/// checked for UTF-8, as JSON skips them unread).
fn kept_map<'a, F: KeyFilter>(
    f: &Field<'a>,
    field: &'static str,
    map: &mut Vec<(Cow<'a, str>, Cow<'a, str>)>,
) -> Result<(), ProtoError> {
    let mut entry = f.message(field)?;
    let (mut key, mut value) = ("", "");
    while let Some(e) = entry.next_field()? {
        match e.number {
            MAP_KEY => key = e.str(field)?,
            MAP_VALUE => value = e.str(field)?,
            _ => {}
        }
    }
    if F::keep(key) {
        map.push((Cow::Borrowed(key), Cow::Borrowed(value)));
    }
    Ok(())
}

fn meta(mut r: Reader<'_>) -> Result<wire::Meta<'_>, ProtoError> {
    let mut m = wire::Meta::default();
    let mut owners = wire::Owners::default();
    while let Some(f) = r.next_field()? {
        match f.number {
            META_NAME => m.name = str(&f, "metadata.name")?,
            META_NAMESPACE => m.namespace = str(&f, "metadata.namespace")?,
            META_UID => m.uid = str(&f, "metadata.uid")?,
            META_RESOURCE_VERSION => m.resource_version = str(&f, "metadata.resourceVersion")?,
            META_CREATION_TIMESTAMP => {
                m.creation_timestamp = stamp(&f, "metadata.creationTimestamp")?
            }
            META_DELETION_TIMESTAMP => {
                m.deletion_timestamp = stamp(&f, "metadata.deletionTimestamp")?
            }
            META_OWNER_REFERENCES => {
                let mut o = f.message("metadata.ownerReferences")?;
                let mut owner = wire::OwnerReference {
                    kind: None,
                    controller: None,
                };
                while let Some(g) = o.next_field()? {
                    match g.number {
                        OWNER_KIND => owner.kind = bytes(&g, "metadata.ownerReferences.kind")?,
                        OWNER_CONTROLLER => {
                            owner.controller = Some(g.bool("metadata.ownerReferences.controller")?)
                        }
                        _ => {}
                    }
                }
                owners.add(&owner);
            }
            // Labels of pods and leases are not read (the model keeps none of theirs).
            _ => {}
        }
    }
    m.owner_references = Some(owners);
    Ok(m)
}

/// One managedFields entry, its manager and owned fields into `writers`.
fn managed_entry(f: &Field<'_>, writers: &mut crate::model::Writers) -> Result<(), ProtoError> {
    let mut r = f.message("metadata.managedFields")?;
    let (mut manager, mut fields): (&str, &[u8]) = ("", &[]);
    while let Some(g) = r.next_field()? {
        match g.number {
            MANAGED_MANAGER => manager = g.str("metadata.managedFields.manager")?,
            MANAGED_FIELDS_V1 => {
                let mut raw = g.message("metadata.managedFields.fieldsV1")?;
                while let Some(h) = raw.next_field()? {
                    if h.number == FIELDS_V1_RAW {
                        fields = h.bytes("metadata.managedFields.fieldsV1.Raw")?;
                    }
                }
            }
            _ => {}
        }
    }
    writers.add_entry(manager, fields);
    Ok(())
}

fn node_meta(mut r: Reader<'_>, read_writers: bool) -> Result<wire::NodeMeta<'_>, ProtoError> {
    let mut m = wire::NodeMeta::default();
    // Room for a kubelet's labels (11 on a cloud node, more with a node pool's): one
    // allocation, not three as the vector grows from 4 to 16.
    let (mut labels, mut annotations) = (Vec::with_capacity(16), Vec::new());
    while let Some(f) = r.next_field()? {
        match f.number {
            META_NAME => m.name = str(&f, "metadata.name")?,
            META_UID => m.uid = str(&f, "metadata.uid")?,
            META_RESOURCE_VERSION => m.resource_version = str(&f, "metadata.resourceVersion")?,
            META_CREATION_TIMESTAMP => {
                m.creation_timestamp = stamp(&f, "metadata.creationTimestamp")?
            }
            META_LABELS => kept_map::<wire::AllLabelKeys>(&f, "metadata.labels", &mut labels)?,
            META_ANNOTATIONS => {
                kept_map::<wire::AutonomyKeys>(&f, "metadata.annotations", &mut annotations)?
            }
            META_MANAGED_FIELDS if read_writers => managed_entry(&f, &mut m.writers)?,
            _ => {}
        }
    }
    m.labels = Some(KeptMap::new(labels));
    m.annotations = Some(KeptMap::new(annotations));
    Ok(m)
}

fn node(mut r: Reader<'_>, read_writers: bool) -> Result<wire::Node<'_>, ProtoError> {
    let mut n = wire::Node {
        metadata: None,
        spec: None,
        status: None,
    };
    while let Some(f) = r.next_field()? {
        match f.number {
            OBJECT_METADATA => n.metadata = Some(node_meta(f.message("metadata")?, read_writers)?),
            OBJECT_SPEC => n.spec = Some(node_spec(f.message("spec")?)?),
            OBJECT_STATUS => n.status = Some(node_status(f.message("status")?)?),
            _ => {}
        }
    }
    Ok(n)
}

fn node_spec(mut r: Reader<'_>) -> Result<wire::NodeSpec<'_>, ProtoError> {
    let mut spec = wire::NodeSpec::default();
    let mut taints = Vec::new();
    while let Some(f) = r.next_field()? {
        match f.number {
            NODE_SPEC_UNSCHEDULABLE => spec.unschedulable = Some(f.bool("spec.unschedulable")?),
            NODE_SPEC_TAINTS => {
                let mut t = f.message("spec.taints")?;
                let mut taint = wire::Taint {
                    key: None,
                    value: None,
                    effect: None,
                    time_added: None,
                };
                while let Some(g) = t.next_field()? {
                    match g.number {
                        TAINT_KEY => taint.key = str(&g, "spec.taints.key")?,
                        TAINT_VALUE => taint.value = str(&g, "spec.taints.value")?,
                        TAINT_EFFECT => taint.effect = str(&g, "spec.taints.effect")?,
                        TAINT_TIME_ADDED => taint.time_added = stamp(&g, "spec.taints.timeAdded")?,
                        _ => {}
                    }
                }
                taints.push(taint);
            }
            _ => {}
        }
    }
    spec.taints = Some(taints);
    Ok(spec)
}

fn node_status(mut r: Reader<'_>) -> Result<wire::NodeStatus<'_>, ProtoError> {
    let mut conditions = Vec::new();
    while let Some(f) = r.next_field()? {
        if f.number != NODE_STATUS_CONDITIONS {
            continue;
        }
        let mut c = f.message("status.conditions")?;
        let mut cond = wire::NodeCondition {
            kind: None,
            status: None,
            last_heartbeat_time: None,
            last_transition_time: None,
            reason: None,
            message: None,
        };
        while let Some(g) = c.next_field()? {
            match g.number {
                CONDITION_TYPE => cond.kind = lazy(&g, "status.conditions.type")?,
                CONDITION_STATUS => cond.status = lazy(&g, "status.conditions.status")?,
                NODE_CONDITION_LAST_HEARTBEAT_TIME => {
                    cond.last_heartbeat_time = stamp(&g, "status.conditions.lastHeartbeatTime")?
                }
                NODE_CONDITION_LAST_TRANSITION_TIME => {
                    cond.last_transition_time = stamp(&g, "status.conditions.lastTransitionTime")?
                }
                CONDITION_REASON => cond.reason = lazy(&g, "status.conditions.reason")?,
                CONDITION_MESSAGE => cond.message = lazy(&g, "status.conditions.message")?,
                _ => {}
            }
        }
        conditions.push(cond);
    }
    Ok(wire::NodeStatus {
        conditions: Some(conditions),
    })
}

/// A Lease, straight into the model: one arrives from every kubelet every 10 s, the busiest
/// path of the daemon (`examples/lease_event_floor.rs`). Of the metadata only the name and the
/// resourceVersion are read; the rest (uid, ownerReferences, managedFields, ...) is skipped by
/// its length, unchecked, as the JSON path's serde skips what the wire shape does not name.
/// The conversion is `lease_from_fields`, the JSON path's own; a repeated metadata or spec
/// replaces the earlier one whole, as in the wire shape. Framing errors are the outer ones.
fn lease(mut r: Reader<'_>) -> Result<Result<Lease, DecodeError>, ProtoError> {
    let (mut name, mut resource_version) = ("", "");
    let (mut renew_time, mut duration) = (None, None);
    while let Some(f) = r.next_field()? {
        match f.number {
            OBJECT_METADATA => {
                (name, resource_version) = ("", "");
                let mut m = f.message("metadata")?;
                while let Some(g) = m.next_field()? {
                    match g.number {
                        META_NAME => name = g.str("metadata.name")?,
                        META_RESOURCE_VERSION => {
                            resource_version = g.str("metadata.resourceVersion")?
                        }
                        _ => {}
                    }
                }
            }
            OBJECT_SPEC => {
                (renew_time, duration) = (None, None);
                let mut s = f.message("spec")?;
                while let Some(g) = s.next_field()? {
                    match g.number {
                        LEASE_SPEC_RENEW_TIME => renew_time = stamp(&g, "spec.renewTime")?,
                        LEASE_SPEC_LEASE_DURATION_SECONDS => {
                            duration = Some(g.int32("spec.leaseDurationSeconds")?)
                        }
                        _ => {}
                    }
                }
            }
            _ => {}
        }
    }
    Ok(super::super::lease::lease_from_fields(
        name,
        resource_version,
        renew_time.as_ref(),
        duration,
    ))
}

fn pod(mut r: Reader<'_>) -> Result<wire::Pod<'_>, ProtoError> {
    let mut p = wire::Pod {
        metadata: None,
        spec: None,
        status: None,
    };
    while let Some(f) = r.next_field()? {
        match f.number {
            OBJECT_METADATA => p.metadata = Some(meta(f.message("metadata")?)?),
            OBJECT_SPEC => p.spec = Some(pod_spec(f.message("spec")?)?),
            OBJECT_STATUS => p.status = Some(pod_status(f.message("status")?)?),
            _ => {}
        }
    }
    Ok(p)
}

fn pod_spec(mut r: Reader<'_>) -> Result<wire::PodSpec<'_>, ProtoError> {
    let mut spec = wire::PodSpec::default();
    let mut tolerations = Vec::new();
    while let Some(f) = r.next_field()? {
        match f.number {
            POD_SPEC_NODE_NAME => spec.node_name = str(&f, "spec.nodeName")?,
            POD_SPEC_TOLERATIONS => {
                let mut t = f.message("spec.tolerations")?;
                let mut tol = wire::Toleration {
                    key: None,
                    operator: None,
                    value: None,
                    effect: None,
                    toleration_seconds: None,
                };
                while let Some(g) = t.next_field()? {
                    match g.number {
                        TOLERATION_KEY => tol.key = lazy(&g, "spec.tolerations.key")?,
                        TOLERATION_OPERATOR => {
                            tol.operator = lazy(&g, "spec.tolerations.operator")?
                        }
                        TOLERATION_VALUE => tol.value = lazy(&g, "spec.tolerations.value")?,
                        TOLERATION_EFFECT => tol.effect = lazy(&g, "spec.tolerations.effect")?,
                        TOLERATION_SECONDS => {
                            tol.toleration_seconds =
                                Some(g.int64("spec.tolerations.tolerationSeconds")?)
                        }
                        _ => {}
                    }
                }
                tolerations.push(tol);
            }
            _ => {}
        }
    }
    spec.tolerations = Some(tolerations);
    Ok(spec)
}

fn pod_status(mut r: Reader<'_>) -> Result<wire::PodStatus, ProtoError> {
    let mut conditions = wire::PodConditions::default();
    while let Some(f) = r.next_field()? {
        if f.number != POD_STATUS_CONDITIONS {
            continue;
        }
        let mut c = f.message("status.conditions")?;
        let mut cond = wire::PodCondition {
            kind: None,
            status: None,
            reason: None,
            message: None,
        };
        while let Some(g) = c.next_field()? {
            match g.number {
                CONDITION_TYPE => cond.kind = bytes(&g, "status.conditions.type")?,
                CONDITION_STATUS => cond.status = bytes(&g, "status.conditions.status")?,
                CONDITION_REASON => cond.reason = bytes(&g, "status.conditions.reason")?,
                CONDITION_MESSAGE => cond.message = bytes(&g, "status.conditions.message")?,
                _ => {}
            }
        }
        conditions.add(&cond);
    }
    Ok(wire::PodStatus {
        conditions: Some(conditions),
    })
}

impl ProtoWire for Node {
    fn from_proto(object: Reader<'_>, ctx: &mut DecodeContext) -> Result<Node, DecodeError> {
        let read_writers = ctx.reads_writers();
        Node::from_wire(node(object, read_writers).map_err(bad::<Node>)?, ctx)
    }
}

impl ProtoWire for Lease {
    fn from_proto(object: Reader<'_>, _: &mut DecodeContext) -> Result<Lease, DecodeError> {
        lease(object).map_err(bad::<Lease>)?
    }
}

impl ProtoWire for Pod {
    fn from_proto(object: Reader<'_>, ctx: &mut DecodeContext) -> Result<Pod, DecodeError> {
        Pod::from_wire(pod(object).map_err(bad::<Pod>)?, ctx)
    }
}

/// A BOOKMARK event's object: any kind whose metadata carries only the resourceVersion and
/// perhaps the initial-events-end annotation.
pub(crate) fn bookmark(mut object: Reader<'_>) -> Result<Bookmark, ProtoError> {
    let mut b = Bookmark {
        resource_version: String::new(),
        initial_events_end: false,
    };
    while let Some(f) = object.next_field()? {
        if f.number != OBJECT_METADATA {
            continue;
        }
        let mut m = f.message("metadata")?;
        while let Some(g) = m.next_field()? {
            match g.number {
                META_RESOURCE_VERSION => {
                    b.resource_version = g.str("metadata.resourceVersion")?.to_string()
                }
                META_ANNOTATIONS => {
                    let mut kept = Vec::new();
                    kept_map::<InitialEventsEnd>(&g, "metadata.annotations", &mut kept)?;
                    if let Some((_, v)) = kept.first() {
                        b.initial_events_end = v == "true";
                    }
                }
                _ => {}
            }
        }
    }
    Ok(b)
}

struct InitialEventsEnd;
impl KeyFilter for InitialEventsEnd {
    const EXPECTING: &'static str = "a map of annotations";
    fn keep(key: &str) -> bool {
        key == INITIAL_EVENTS_END
    }
}

/// An ERROR event's object (metav1.Status).
pub(crate) fn status(mut object: Reader<'_>) -> Result<wire::Status, ProtoError> {
    let mut s = wire::Status::default();
    while let Some(f) = object.next_field()? {
        match f.number {
            STATUS_CODE => s.code = f.int32("Status.code")?,
            STATUS_REASON => s.reason = f.str("Status.reason")?.to_string(),
            STATUS_MESSAGE => s.message = f.str("Status.message")?.to_string(),
            _ => {}
        }
    }
    Ok(s)
}
