//! The JSON shapes we read: only the fields the controllers need, strings borrowed where possible.
//! Every field is optional at this level; `mod.rs` decides what is required.

use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;

use serde::de::{IgnoredAny, MapAccess, Visitor};
use serde::{Deserialize, Deserializer};

use crate::model::labels;
use crate::time::Time;

mod pod;
pub(crate) use pod::*;

/// A JSON string, borrowed from the input unless it holds escapes.
#[derive(Deserialize, Debug, Clone, Default, PartialEq, Eq)]
#[serde(transparent)]
pub(crate) struct Str<'a>(#[serde(borrow)] pub Cow<'a, str>);

/// A `metav1.Time` or `MicroTime`: RFC 3339 text in JSON, seconds and nanoseconds in protobuf.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Stamp<'a> {
    Text(Cow<'a, str>),
    Unix { seconds: i64, nanos: i32 },
}

impl<'de: 'a, 'a> Deserialize<'de> for Stamp<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Str::deserialize(d).map(|s| Stamp::Text(s.0))
    }
}

impl Stamp<'_> {
    /// The time, `Ok(None)` when empty, `Err` with the value as shown in logs when unreadable.
    /// Times before 1970 clamp to the epoch, as [`Time::parse_rfc3339`] does.
    pub(crate) fn time(&self) -> Result<Option<Time>, String> {
        match self {
            Stamp::Text(s) if s.is_empty() => Ok(None),
            Stamp::Text(s) => Time::parse_rfc3339(s)
                .map(Some)
                .ok_or_else(|| s.to_string()),
            Stamp::Unix { seconds, nanos } => {
                if !(0..1_000_000_000).contains(nanos) {
                    return Err(format!("{seconds}s {nanos}ns"));
                }
                let ms = seconds
                    .max(&0)
                    .saturating_mul(1000)
                    .saturating_add(i64::from(*nanos / 1_000_000));
                Ok(Some(Time::from_unix_millis(ms as u64)))
            }
        }
    }

    /// Whether a value is present (JSON `""` reads as absent).
    pub(crate) fn is_set(&self) -> bool {
        !matches!(self, Stamp::Text(s) if s.is_empty())
    }
}

pub(crate) fn text<'a>(s: &'a Option<Str<'_>>) -> &'a str {
    s.as_ref().map(|s| &*s.0).unwrap_or("")
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Meta<'a> {
    #[serde(borrow)]
    pub(crate) name: Option<Str<'a>>,
    #[serde(borrow)]
    pub(crate) namespace: Option<Str<'a>>,
    #[serde(borrow)]
    pub(crate) uid: Option<Str<'a>>,
    #[serde(borrow)]
    pub(crate) resource_version: Option<Str<'a>>,
    #[serde(borrow)]
    pub(crate) creation_timestamp: Option<Stamp<'a>>,
    #[serde(borrow)]
    pub(crate) deletion_timestamp: Option<Stamp<'a>>,
    #[serde(borrow)]
    #[expect(
        dead_code,
        reason = "never read: a pod's labels are decoded and dropped (a candidate for the decode path to stop decoding)"
    )]
    pub(crate) labels: Option<KeptLabels<'a>>,
    /// Folded as read: whether a DaemonSet controls the pod.
    pub(crate) owner_references: Option<Owners>,
}

/// Which keys of a string map are worth keeping; the others are skipped without allocating.
pub(crate) trait KeyFilter {
    const EXPECTING: &'static str;
    fn keep(key: &str) -> bool;
}

/// The labels in [`labels::KEPT`] (pods: nothing of theirs is read beyond these).
pub(crate) struct KeptLabelKeys;
impl KeyFilter for KeptLabelKeys {
    const EXPECTING: &'static str = "a map of labels";
    fn keep(key: &str) -> bool {
        labels::is_kept(key)
    }
}

/// Every node label, borrowed: which ones are kept depends on the configured pool selectors,
/// so `mod.rs` filters them with the decode context.
pub(crate) struct AllLabelKeys;
impl KeyFilter for AllLabelKeys {
    const EXPECTING: &'static str = "a map of labels";
    fn keep(_: &str) -> bool {
        true
    }
}

/// The OpenYurt autonomy annotations and the maintenance one, the only annotations read.
pub(crate) struct AutonomyKeys;
impl KeyFilter for AutonomyKeys {
    const EXPECTING: &'static str = "a map of annotations";
    fn keep(key: &str) -> bool {
        crate::model::autonomy_annotations::is_kept(key)
            || key == crate::model::maintenance::ANNOTATION
    }
}

/// The entries of a string map whose keys `F` keeps.
pub(crate) struct KeptMap<'a, F>(pub(crate) Vec<(Cow<'a, str>, Cow<'a, str>)>, PhantomData<F>);

impl<'a, F> KeptMap<'a, F> {
    pub(crate) fn new(kept: Vec<(Cow<'a, str>, Cow<'a, str>)>) -> Self {
        KeptMap(kept, PhantomData)
    }
}

impl<F> Default for KeptMap<'_, F> {
    fn default() -> Self {
        KeptMap(Vec::new(), PhantomData)
    }
}

pub(crate) type KeptLabels<'a> = KeptMap<'a, KeptLabelKeys>;

impl<'de: 'a, 'a, F: KeyFilter> Deserialize<'de> for KeptMap<'a, F> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<F>(PhantomData<F>);
        impl<'de, F: KeyFilter> Visitor<'de> for V<F> {
            type Value = KeptMap<'de, F>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str(F::EXPECTING)
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut kept = Vec::new();
                while let Some(key) = map.next_key::<Str<'de>>()? {
                    if F::keep(&key.0) {
                        let value: Option<Str<'de>> = map.next_value()?;
                        kept.push((key.0, value.map(|v| v.0).unwrap_or_default()));
                    } else {
                        map.next_value::<IgnoredAny>()?;
                    }
                }
                Ok(KeptMap(kept, PhantomData))
            }
        }
        d.deserialize_map(V(PhantomData))
    }
}

/// A node's metadata: its labels and autonomy annotations besides the identity.
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub(crate) struct NodeMeta<'a> {
    #[serde(borrow)]
    pub(crate) name: Option<Str<'a>>,
    #[serde(borrow)]
    pub(crate) uid: Option<Str<'a>>,
    #[serde(borrow)]
    pub(crate) resource_version: Option<Str<'a>>,
    #[serde(borrow)]
    pub(crate) creation_timestamp: Option<Stamp<'a>>,
    #[serde(borrow)]
    pub(crate) labels: Option<KeptMap<'a, AllLabelKeys>>,
    #[serde(borrow)]
    pub(crate) annotations: Option<KeptMap<'a, AutonomyKeys>>,
    /// From managedFields, read from protobuf in shadow mode only (JSON: unknown).
    #[serde(skip)]
    pub(crate) writers: crate::model::Writers,
}

#[derive(Deserialize)]
pub struct Node<'a> {
    #[serde(borrow)]
    pub(crate) metadata: Option<NodeMeta<'a>>,
    #[serde(borrow)]
    pub(crate) spec: Option<NodeSpec<'a>>,
    #[serde(borrow)]
    pub(crate) status: Option<NodeStatus<'a>>,
}

#[derive(Deserialize, Default)]
pub(crate) struct NodeSpec<'a> {
    #[serde(borrow)]
    pub(crate) taints: Option<Vec<Taint<'a>>>,
    pub(crate) unschedulable: Option<bool>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Taint<'a> {
    #[serde(borrow)]
    pub key: Option<Str<'a>>,
    #[serde(borrow)]
    pub value: Option<Str<'a>>,
    #[serde(borrow)]
    pub effect: Option<Str<'a>>,
    #[serde(borrow)]
    pub time_added: Option<Stamp<'a>>,
}

#[derive(Deserialize)]
pub(crate) struct NodeStatus<'a> {
    #[serde(borrow)]
    pub(crate) conditions: Option<Vec<NodeCondition<'a>>>,
}

/// A node condition. Its four texts are compared with known ones (the condition types and
/// statuses the model names, the reason and message pairs already shared) and checked as
/// UTF-8 only when they match none (`LazyStr`; `Node::from_wire` checks each).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct NodeCondition<'a> {
    #[serde(borrow, rename = "type")]
    pub kind: Option<LazyStr<'a>>,
    #[serde(borrow)]
    pub status: Option<LazyStr<'a>>,
    #[serde(borrow)]
    pub last_heartbeat_time: Option<Stamp<'a>>,
    #[serde(borrow)]
    pub last_transition_time: Option<Stamp<'a>>,
    #[serde(borrow)]
    pub reason: Option<LazyStr<'a>>,
    #[serde(borrow)]
    pub message: Option<LazyStr<'a>>,
}

#[derive(Deserialize)]
pub struct Lease<'a> {
    #[serde(borrow)]
    pub(crate) metadata: Option<Meta<'a>>,
    #[serde(borrow)]
    pub(crate) spec: Option<LeaseSpec<'a>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct LeaseSpec<'a> {
    #[serde(borrow)]
    pub(crate) renew_time: Option<Stamp<'a>>,
    pub(crate) lease_duration_seconds: Option<i32>,
}

/// metav1.Status: the object of an `ERROR` watch event and the body of failed requests.
#[derive(Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(default)]
pub struct Status {
    /// HTTP-like code: 410 means the requested resourceVersion is gone (compacted).
    pub(crate) code: i32,
    pub(crate) reason: String,
    pub(crate) message: String,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ListMeta<'a> {
    #[serde(borrow)]
    pub(crate) resource_version: Option<Str<'a>>,
    #[serde(borrow, rename = "continue")]
    pub(crate) continue_token: Option<Str<'a>>,
}

#[derive(Deserialize)]
#[serde(bound(deserialize = "W: Deserialize<'de>, 'de: 'a"))]
pub(crate) struct List<'a, W> {
    #[serde(borrow)]
    pub(crate) metadata: Option<ListMeta<'a>>,
    pub(crate) items: Option<Vec<W>>,
}

#[derive(Deserialize, Default)]
pub(crate) struct BookmarkObject<'a> {
    #[serde(borrow)]
    pub(crate) metadata: Option<BookmarkMeta<'a>>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub(crate) struct BookmarkMeta<'a> {
    #[serde(borrow)]
    pub(crate) resource_version: Option<Str<'a>>,
    #[serde(
        default,
        rename = "annotations",
        deserialize_with = "initial_events_end"
    )]
    pub(crate) initial_events_end: bool,
}

fn initial_events_end<'de, D: Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
    struct V;
    impl<'de> Visitor<'de> for V {
        type Value = bool;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a map of annotations")
        }
        fn visit_unit<E>(self) -> Result<bool, E> {
            Ok(false)
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<bool, A::Error> {
            let mut end = false;
            while let Some(key) = map.next_key::<Str<'de>>()? {
                if key.0 == super::INITIAL_EVENTS_END {
                    let v: Option<Str<'de>> = map.next_value()?;
                    end = v.is_some_and(|v| v.0 == "true");
                } else {
                    map.next_value::<IgnoredAny>()?;
                }
            }
            Ok(end)
        }
    }
    d.deserialize_any(V)
}

/// A watch event with its object decoded by the event's type.
pub(crate) enum Event<'a, W> {
    Added(W),
    Modified(W),
    Deleted(W),
    Bookmark(BookmarkObject<'a>),
    Error(Status),
    Unknown(String),
    /// `object` came before `type`: the caller re-parses with [`LooseEvent`].
    ObjectBeforeType,
    /// No `type` or no `object`.
    Missing,
}

#[derive(Clone, Copy)]
enum Kind {
    Added,
    Modified,
    Deleted,
    Bookmark,
    Error,
    Unknown,
}

fn kind_of(s: &str) -> Kind {
    match s {
        "ADDED" => Kind::Added,
        "MODIFIED" => Kind::Modified,
        "DELETED" => Kind::Deleted,
        "BOOKMARK" => Kind::Bookmark,
        "ERROR" => Kind::Error,
        _ => Kind::Unknown,
    }
}

impl<'de, W: Deserialize<'de>> Deserialize<'de> for Event<'de, W> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<W>(PhantomData<W>);
        impl<'de, W: Deserialize<'de>> Visitor<'de> for V<W> {
            type Value = Event<'de, W>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a watch event {\"type\": ..., \"object\": ...}")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut kind: Option<(Kind, Str<'de>)> = None;
                let mut event: Option<Event<'de, W>> = None;
                let mut object_first = false;
                while let Some(key) = map.next_key::<Str<'de>>()? {
                    match &*key.0 {
                        "type" => {
                            let t: Str<'de> = map.next_value()?;
                            kind = Some((kind_of(&t.0), t));
                        }
                        "object" => {
                            event = match &kind {
                                None => {
                                    map.next_value::<IgnoredAny>()?;
                                    object_first = true;
                                    None
                                }
                                Some((k, t)) => Some(match k {
                                    Kind::Added => Event::Added(map.next_value()?),
                                    Kind::Modified => Event::Modified(map.next_value()?),
                                    Kind::Deleted => Event::Deleted(map.next_value()?),
                                    Kind::Bookmark => Event::Bookmark(map.next_value()?),
                                    Kind::Error => Event::Error(map.next_value()?),
                                    Kind::Unknown => {
                                        map.next_value::<IgnoredAny>()?;
                                        Event::Unknown(t.0.to_string())
                                    }
                                }),
                            }
                        }
                        _ => {
                            map.next_value::<IgnoredAny>()?;
                        }
                    }
                }
                Ok(match (event, object_first, kind) {
                    (Some(e), _, _) => e,
                    (None, true, Some(_)) => Event::ObjectBeforeType,
                    _ => Event::Missing,
                })
            }
        }
        d.deserialize_map(V(PhantomData))
    }
}

/// The slow path for an event whose `object` precedes its `type`.
#[derive(Deserialize)]
pub(crate) struct LooseEvent<'a> {
    #[serde(borrow, rename = "type")]
    pub(crate) kind: Option<Str<'a>>,
    pub(crate) object: Option<serde_json::Value>,
}

impl<'a, W: Deserialize<'a>> Event<'a, W> {
    pub(crate) fn from_loose(loose: &'a LooseEvent<'_>) -> Result<Event<'a, W>, serde_json::Error> {
        let (Some(t), Some(object)) = (&loose.kind, &loose.object) else {
            return Ok(Event::Missing);
        };
        Ok(match kind_of(&t.0) {
            Kind::Added => Event::Added(W::deserialize(object)?),
            Kind::Modified => Event::Modified(W::deserialize(object)?),
            Kind::Deleted => Event::Deleted(W::deserialize(object)?),
            Kind::Bookmark => Event::Bookmark(BookmarkObject::deserialize(object)?),
            Kind::Error => Event::Error(Status::deserialize(object)?),
            Kind::Unknown => Event::Unknown(t.0.to_string()),
        })
    }
}
