//! The shapes only a pod's decode reads, and the strings it reads without keeping: what is
//! only compared is not checked as UTF-8 ([`Bytes`]), tolerations only when converted
//! ([`LazyStr`]), and lists searched for one answer are folded as read ([`PodConditions`],
//! [`Owners`]).

use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;

use serde::de::{SeqAccess, Visitor};
use serde::{Deserialize, Deserializer};

use super::{Meta, Str};
use crate::decode::DecodeError;
use crate::decode::proto::ProtoError;
use crate::model::{ConditionStatus, disruption};

/// A string the model never keeps, only compares with text it knows (a pod condition's type,
/// an owner reference's kind): protobuf's bytes are not checked as UTF-8, since a byte that is
/// not UTF-8 cannot equal the known text. JSON's are read as [`Str`] (serde_json checks them).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Bytes<'a>(pub Cow<'a, [u8]>);

impl<'de: 'a, 'a> Deserialize<'de> for Bytes<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Str::deserialize(d).map(|s| {
            Bytes(match s.0 {
                Cow::Borrowed(s) => Cow::Borrowed(s.as_bytes()),
                Cow::Owned(s) => Cow::Owned(s.into_bytes()),
            })
        })
    }
}

/// The bytes of a [`Bytes`] field, empty when absent (as [`text`] reads a [`Str`]).
pub(crate) fn bytes<'a>(b: &'a Option<Bytes<'_>>) -> &'a [u8] {
    b.as_ref().map(|b| &*b.0).unwrap_or(b"")
}

/// A string the model keeps only when it is not already held: a pod's toleration, compared
/// byte for byte with the lists the last pods carried (`recent_tolerations.rs`, which hold
/// checked text, so an equal one is UTF-8 too) and checked as UTF-8 only when converted
/// (`Pod::from_wire`, with the error protobuf's reader would have given).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum LazyStr<'a> {
    /// Checked already (JSON's strings are).
    Text(Cow<'a, str>),
    /// Protobuf's bytes, unchecked, and their offset in the object (for the error).
    Unchecked { bytes: &'a [u8], offset: usize },
}

impl<'de: 'a, 'a> Deserialize<'de> for LazyStr<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Str::deserialize(d).map(|s| LazyStr::Text(s.0))
    }
}

impl LazyStr<'_> {
    pub(crate) fn as_bytes(&self) -> &[u8] {
        match self {
            LazyStr::Text(s) => s.as_bytes(),
            LazyStr::Unchecked { bytes, .. } => bytes,
        }
    }

    /// The text; when it is not UTF-8, the byte offset in the object where it stops being so.
    pub(crate) fn text(&self) -> Result<&str, usize> {
        match self {
            LazyStr::Text(s) => Ok(s),
            LazyStr::Unchecked { bytes, offset } => {
                crate::decode::proto::utf8(bytes).map_err(|e| offset + e.valid_up_to())
            }
        }
    }
}

/// The bytes of a [`LazyStr`] field, empty when absent.
pub(crate) fn lazy_bytes<'a>(s: &'a Option<LazyStr<'_>>) -> &'a [u8] {
    s.as_ref().map_or(b"", LazyStr::as_bytes)
}

/// A pod's toleration field as text, empty when absent: one that is not UTF-8 refuses the pod
/// with the error protobuf's reader gives for any string (`proto::Field::str`).
pub(crate) fn lazy_text<'a>(
    v: &'a Option<LazyStr<'_>>,
    field: &'static str,
) -> Result<&'a str, DecodeError> {
    lazy_text_of("Pod", v, field)
}

/// [`lazy_text`] for a field of the kind `what` (a node condition's texts: `Node`).
pub(crate) fn lazy_text_of<'a>(
    what: &'static str,
    v: &'a Option<LazyStr<'_>>,
    field: &'static str,
) -> Result<&'a str, DecodeError> {
    match v {
        None => Ok(""),
        Some(s) => s.text().map_err(|at| {
            DecodeError::new(
                what,
                ProtoError::new(field, at, "a string that is not UTF-8").to_string(),
            )
        }),
    }
}

#[derive(Deserialize)]
pub(crate) struct OwnerReference<'a> {
    #[serde(borrow)]
    pub(crate) kind: Option<Bytes<'a>>,
    pub(crate) controller: Option<bool>,
}

/// What `Pod::from_wire` reads of the owner references, folded as they are read (no list).
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Owners {
    /// A controller reference of kind DaemonSet (legacy eviction skips these pods).
    pub(crate) daemonset: bool,
}

impl Owners {
    pub(crate) fn add(&mut self, o: &OwnerReference<'_>) {
        self.daemonset |= o.controller == Some(true) && bytes(&o.kind) == b"DaemonSet";
    }
}

impl<'de> Folded<'de> for Owners {
    type Item = OwnerReference<'de>;
    fn add(&mut self, item: &OwnerReference<'de>) {
        Owners::add(self, item);
    }
}

impl<'de> Deserialize<'de> for Owners {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        deserialize_folded(d)
    }
}

#[derive(Deserialize)]
pub struct Pod<'a> {
    #[serde(borrow)]
    pub(crate) metadata: Option<Meta<'a>>,
    #[serde(borrow)]
    pub(crate) spec: Option<PodSpec<'a>>,
    pub(crate) status: Option<PodStatus>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub(crate) struct PodSpec<'a> {
    #[serde(borrow)]
    pub(crate) node_name: Option<Str<'a>>,
    #[serde(borrow)]
    pub(crate) tolerations: Option<Vec<Toleration<'a>>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Toleration<'a> {
    #[serde(borrow)]
    pub key: Option<LazyStr<'a>>,
    #[serde(borrow)]
    pub operator: Option<LazyStr<'a>>,
    #[serde(borrow)]
    pub value: Option<LazyStr<'a>>,
    #[serde(borrow)]
    pub effect: Option<LazyStr<'a>>,
    pub toleration_seconds: Option<i64>,
}

#[derive(Deserialize)]
pub(crate) struct PodStatus {
    /// Folded as read.
    pub(crate) conditions: Option<PodConditions>,
}

/// What `Pod::from_wire` reads of a pod's conditions, folded one condition at a time as they
/// are read (no list: a pod's decode allocated one only to search it).
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct PodConditions {
    /// The status of the first `Ready` condition.
    pub(crate) ready: Option<ConditionStatus>,
    /// One carries taint eviction's `DisruptionTarget` status, reason and message.
    pub(crate) disruption_target: bool,
}

impl PodConditions {
    /// Compared as bytes: none of it is kept (`Bytes`).
    pub(crate) fn add(&mut self, c: &PodCondition<'_>) {
        let kind = bytes(&c.kind);
        if self.ready.is_none() && kind == b"Ready" {
            self.ready = Some(ConditionStatus::parse_bytes(bytes(&c.status)));
        }
        self.disruption_target |= kind == disruption::CONDITION.as_bytes()
            && bytes(&c.status) == b"True"
            && bytes(&c.reason) == disruption::REASON.as_bytes()
            && bytes(&c.message) == disruption::MESSAGE.as_bytes();
    }
}

impl<'de> Folded<'de> for PodConditions {
    type Item = PodCondition<'de>;
    fn add(&mut self, item: &PodCondition<'de>) {
        PodConditions::add(self, item);
    }
}

impl<'de> Deserialize<'de> for PodConditions {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        deserialize_folded(d)
    }
}

#[derive(Deserialize)]
pub(crate) struct PodCondition<'a> {
    #[serde(borrow, rename = "type")]
    pub(crate) kind: Option<Bytes<'a>>,
    #[serde(borrow)]
    pub(crate) status: Option<Bytes<'a>>,
    #[serde(borrow)]
    pub(crate) reason: Option<Bytes<'a>>,
    #[serde(borrow)]
    pub(crate) message: Option<Bytes<'a>>,
}

/// A list searched for one answer, folded item by item as it is read: no list is kept.
trait Folded<'de>: Default {
    type Item: Deserialize<'de>;
    fn add(&mut self, item: &Self::Item);
}

/// A JSON sequence read into a [`Folded`].
fn deserialize_folded<'de, D: Deserializer<'de>, F: Folded<'de>>(d: D) -> Result<F, D::Error> {
    struct V<F>(PhantomData<F>);
    impl<'de, F: Folded<'de>> Visitor<'de> for V<F> {
        type Value = F;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a sequence")
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<F, A::Error> {
            let mut folded = F::default();
            while let Some(item) = seq.next_element::<F::Item>()? {
                folded.add(&item);
            }
            Ok(folded)
        }
    }
    d.deserialize_seq(V(PhantomData))
}
