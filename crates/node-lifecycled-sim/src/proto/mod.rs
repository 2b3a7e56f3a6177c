//! Protobuf answers, as the real API server writes them for
//! `Accept: application/vnd.kubernetes.protobuf`: an object is `k8s\0` + `runtime.Unknown`
//! {typeMeta, raw = the object's message}, a list the same around `{metadata, items}`, and a
//! watch a stream of `metav1.WatchEvent`s each after a 4-byte big-endian length.
//!
//! The stored JSON is encoded once per version (in [`crate::object::StoredObject::seal`]) by
//! walking it along the field tables of [`schema`]: fields in ascending number order, maps by
//! key, non-pointer fields written even when empty, as Go's generated marshallers do, so the
//! bytes are those the real server would write for the same fields (tested against objects
//! fetched from kube-apiserver).

mod schema;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;

use serde_json::Value;

use super::resource::Resource;

/// The media type asked for and answered (a watch adds `;stream=watch`).
pub(crate) const MEDIA_TYPE: &str = "application/vnd.kubernetes.protobuf";
pub(crate) const WATCH_MEDIA_TYPE: &str = "application/vnd.kubernetes.protobuf;stream=watch";
const MAGIC: &[u8; 4] = b"k8s\0";

#[derive(Clone, Copy)]
enum Ty {
    Str,
    Int,
    Bool,
    /// metav1.Time / MicroTime: RFC 3339 text in JSON, {seconds, nanos} in protobuf.
    Time,
    Msg(&'static [Field]),
    /// map<string, string>
    StrMap,
    /// map<string, resource.Quantity> (a Quantity is {string = 1})
    QuantityMap,
}

#[derive(Clone, Copy)]
enum Rule {
    Always,
    Optional,
    Repeated,
}

#[derive(Clone, Copy)]
struct Field {
    json: &'static str,
    number: u32,
    ty: Ty,
    rule: Rule,
}

/// Whether the protobuf answer is the one asked for: the first media type of `Accept` (as
/// client-go orders it, protobuf then JSON), for a kind the real server serves in protobuf.
pub(crate) fn wanted(accept: Option<&str>, resource: Resource) -> bool {
    schema_of(resource).is_some()
        && accept
            .and_then(|a| a.split(',').next())
            .and_then(|t| t.split(';').next())
            .is_some_and(|t| t.trim().eq_ignore_ascii_case(MEDIA_TYPE))
}

fn schema_of(resource: Resource) -> Option<&'static [Field]> {
    match resource {
        Resource::Nodes => Some(schema::NODE),
        Resource::Pods => Some(schema::POD),
        Resource::Leases => Some(schema::LEASE),
        _ => None,
    }
}

/// The numbers of a dotted JSON path's fields (`spec.nodeName` → `[2, 10]`) in `resource`'s
/// protobuf message, `None` past what the simulator encodes (for the real-server test).
pub fn field_numbers(resource: Resource, path: &str) -> Option<Vec<u32>> {
    let mut fields = schema_of(resource)?;
    let mut numbers = Vec::new();
    let mut parts = path.split('.').peekable();
    while let Some(part) = parts.next() {
        let field = fields.iter().find(|f| f.json == part)?;
        numbers.push(field.number);
        match field.ty {
            Ty::Msg(inner) => fields = inner,
            _ if parts.peek().is_some() => return None,
            _ => {}
        }
    }
    Some(numbers)
}

/// The object's own message (no envelope), or `None` for a kind served in JSON only.
pub fn encode_object(resource: Resource, object: &Value) -> Option<Vec<u8>> {
    let fields = schema_of(resource)?;
    let mut out = Vec::new();
    message(fields, object, &mut out, &mut Skipped::default());
    Some(out)
}

/// `k8s\0` + runtime.Unknown{typeMeta{apiVersion, kind}, raw, contentEncoding "", contentType ""}.
pub(crate) fn envelope(api_version: &str, kind: &str, raw: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(raw.len() + 64);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&envelope_head(api_version, kind, raw.len()));
    out.extend_from_slice(raw);
    out.extend_from_slice(&ENVELOPE_TAIL);
    out
}

/// runtime.Unknown.contentEncoding and contentType, both empty (written: non-pointer strings).
const ENVELOPE_TAIL: [u8; 4] = [0x1a, 0, 0x22, 0];

/// Everything of an envelope (after the magic) before `raw`'s bytes.
fn envelope_head(api_version: &str, kind: &str, raw_len: usize) -> Vec<u8> {
    let mut type_meta = Vec::new();
    bytes_field(1, api_version.as_bytes(), &mut type_meta);
    bytes_field(2, kind.as_bytes(), &mut type_meta);
    let mut out = Vec::new();
    bytes_field(1, &type_meta, &mut out);
    key(2, 2, &mut out);
    varint(raw_len as u64, &mut out);
    out
}

/// A stored object, enveloped: what a watch event's RawExtension carries.
pub(crate) fn enveloped_object(resource: Resource, raw: &[u8]) -> Vec<u8> {
    envelope(resource.api_version(), resource.kind(), raw)
}

/// One watch frame: the 4-byte length, then metav1.WatchEvent{type, object{raw = enveloped}}.
pub(crate) fn watch_frame(event_type: &str, enveloped: &[u8]) -> Vec<u8> {
    let mut extension = Vec::with_capacity(enveloped.len() + 8);
    bytes_field(1, enveloped, &mut extension);
    let mut event = Vec::with_capacity(extension.len() + 24);
    bytes_field(1, event_type.as_bytes(), &mut event);
    bytes_field(2, &extension, &mut event);
    let mut frame = Vec::with_capacity(event.len() + 4);
    frame.extend_from_slice(&(event.len() as u32).to_be_bytes());
    frame.extend_from_slice(&event);
    frame
}

/// A BOOKMARK's object: an object of the kind with only its metadata (version and, ending a
/// watch-list's initial events, the annotation), encoded from the JSON bookmark's object.
pub(crate) fn bookmark_object(resource: Resource, object: &Value) -> Option<Vec<u8>> {
    let raw = encode_object(resource, object)?;
    Some(enveloped_object(resource, &raw))
}

/// An ERROR event's object or a refusal's body: metav1.Status, enveloped.
pub(crate) fn status(status: &Value) -> Vec<u8> {
    let mut raw = Vec::new();
    message(schema::STATUS, status, &mut raw, &mut Skipped::default());
    envelope("v1", "Status", &raw)
}

/// A list answer's bytes before its items and the framing of each item: the envelope and the
/// list message's metadata are written first, so the items can follow as they are sent.
pub(crate) struct ListFrame {
    pub prefix: Vec<u8>,
}

impl ListFrame {
    /// `items` are the objects' own messages; the envelope needs the list's total length first.
    pub fn new(list_kind: &str, api_version: &str, list_meta: &Value, items: &[&[u8]]) -> Self {
        let mut meta = Vec::new();
        message(
            schema::LIST_META,
            list_meta,
            &mut meta,
            &mut Skipped::default(),
        );
        let mut list_head = Vec::new();
        bytes_field(1, &meta, &mut list_head);
        let items_len: usize = items.iter().map(|i| item_overhead(i.len()) + i.len()).sum();
        let raw_len = list_head.len() + items_len;
        let mut prefix = MAGIC.to_vec();
        prefix.extend_from_slice(&envelope_head(api_version, list_kind, raw_len));
        prefix.extend_from_slice(&list_head);
        ListFrame { prefix }
    }

    /// One item as it goes into the list (field 2, length-delimited).
    pub fn push_item(item: &[u8], out: &mut Vec<u8>) {
        bytes_field(2, item, out);
    }

    /// What follows the last item.
    pub fn suffix() -> &'static [u8] {
        &ENVELOPE_TAIL
    }
}

fn item_overhead(len: usize) -> usize {
    1 + varint_len(len as u64)
}

fn varint_len(mut v: u64) -> usize {
    let mut n = 1;
    while v >= 0x80 {
        v >>= 7;
        n += 1;
    }
    n
}

fn varint(mut v: u64, out: &mut Vec<u8>) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn key(number: u32, wire_type: u8, out: &mut Vec<u8>) {
    varint(u64::from(number) << 3 | u64::from(wire_type), out);
}

fn bytes_field(number: u32, bytes: &[u8], out: &mut Vec<u8>) {
    key(number, 2, out);
    varint(bytes.len() as u64, out);
    out.extend_from_slice(bytes);
}

fn varint_field(number: u32, v: u64, out: &mut Vec<u8>) {
    key(number, 0, out);
    varint(v, out);
}

/// The JSON members left out of an encoding, as paths (`spec.volumes`): what a test compares
/// must have none. Paths are only built when `record` is set.
#[derive(Default)]
struct Skipped {
    record: bool,
    path: String,
    paths: Vec<String>,
}

impl Skipped {
    fn note(&mut self, name: &str) {
        if self.record {
            let path = if self.path.is_empty() {
                name.to_string()
            } else {
                format!("{}.{name}", self.path)
            };
            self.paths.push(path);
        }
    }

    fn enter(&mut self, name: &str) -> usize {
        let depth = self.path.len();
        if self.record {
            if !self.path.is_empty() {
                self.path.push('.');
            }
            self.path.push_str(name);
        }
        depth
    }

    fn leave(&mut self, depth: usize) {
        self.path.truncate(depth);
    }
}

/// Encodes `object` (a JSON object, or anything else read as empty) along `fields`; `skipped`
/// is told the JSON key of every member left out (no protobuf field here, or the wrong type).
fn message(fields: &[Field], object: &Value, out: &mut Vec<u8>, skipped: &mut Skipped) {
    let members = object.as_object();
    if let Some(members) = members {
        for name in members.keys() {
            if !fields.iter().any(|f| f.json == name) {
                skipped.note(name);
            }
        }
    }
    for field in fields {
        let value = members
            .and_then(|m| m.get(field.json))
            .filter(|v| !v.is_null());
        match (field.rule, value) {
            (Rule::Repeated, Some(Value::Array(items))) => {
                for item in items {
                    if !single(field, Some(item), out, skipped) {
                        skipped.note(field.json);
                    }
                }
            }
            (Rule::Repeated, Some(Value::Object(map))) => {
                if !map_field(field, map, out) {
                    skipped.note(field.json);
                }
            }
            (Rule::Repeated, Some(_)) => skipped.note(field.json),
            (Rule::Repeated, None) | (Rule::Optional, None) => {}
            (Rule::Optional, Some(v)) => {
                if !single(field, Some(v), out, skipped) {
                    skipped.note(field.json);
                }
            }
            (Rule::Always, v) => {
                if !single(field, v, out, skipped) {
                    skipped.note(field.json);
                    single(field, None, out, skipped);
                }
            }
        }
    }
}

/// One value of `field` (its zero value when `None`); `false` when the JSON has another type.
fn single(field: &Field, value: Option<&Value>, out: &mut Vec<u8>, skipped: &mut Skipped) -> bool {
    match field.ty {
        Ty::Str => match value {
            None => bytes_field(field.number, b"", out),
            Some(Value::String(s)) => bytes_field(field.number, s.as_bytes(), out),
            Some(_) => return false,
        },
        Ty::Int => match value {
            None => varint_field(field.number, 0, out),
            Some(v) => match v.as_i64() {
                Some(n) => varint_field(field.number, n as u64, out),
                None => return false,
            },
        },
        Ty::Bool => match value {
            None => varint_field(field.number, 0, out),
            Some(Value::Bool(b)) => varint_field(field.number, u64::from(*b), out),
            Some(_) => return false,
        },
        Ty::Time => match value {
            None => bytes_field(field.number, b"", out),
            Some(Value::String(s)) => match parse_rfc3339(s) {
                Some((seconds, nanos)) => {
                    let mut t = Vec::with_capacity(12);
                    varint_field(1, seconds as u64, &mut t);
                    varint_field(2, u64::from(nanos), &mut t);
                    bytes_field(field.number, &t, out);
                }
                None => return false,
            },
            Some(_) => return false,
        },
        Ty::Msg(fields) => {
            if value.is_some_and(|v| !v.is_object()) {
                return false;
            }
            let mut inner = Vec::new();
            let depth = skipped.enter(field.json);
            message(fields, value.unwrap_or(&Value::Null), &mut inner, skipped);
            skipped.leave(depth);
            bytes_field(field.number, &inner, out);
        }
        Ty::StrMap | Ty::QuantityMap => return value.is_none(),
    }
    true
}

/// map<string, string> or map<string, Quantity>, entries by key as Go writes them.
fn map_field(field: &Field, map: &serde_json::Map<String, Value>, out: &mut Vec<u8>) -> bool {
    let mut entries: Vec<(&String, &str)> = Vec::with_capacity(map.len());
    for (k, v) in map {
        match v.as_str() {
            Some(v) => entries.push((k, v)),
            None => return false,
        }
    }
    entries.sort_by(|a, b| a.0.cmp(b.0));
    for (k, v) in entries {
        let mut entry = Vec::with_capacity(k.len() + v.len() + 8);
        bytes_field(1, k.as_bytes(), &mut entry);
        match field.ty {
            Ty::QuantityMap => {
                let mut quantity = Vec::with_capacity(v.len() + 2);
                bytes_field(1, v.as_bytes(), &mut quantity);
                bytes_field(2, &quantity, &mut entry);
            }
            _ => bytes_field(2, v.as_bytes(), &mut entry),
        }
        bytes_field(field.number, &entry, out);
    }
    true
}

/// `YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM)` as Unix seconds and nanoseconds.
fn parse_rfc3339(s: &str) -> Option<(i64, u32)> {
    let b = s.as_bytes();
    if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b'T' | b't') {
        return None;
    }
    if b[13] != b':' || b[16] != b':' {
        return None;
    }
    let num = |range: std::ops::Range<usize>| -> Option<i64> {
        let part = s.get(range)?;
        part.bytes()
            .all(|c| c.is_ascii_digit())
            .then(|| part.parse().ok())?
    };
    let (year, month, day) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (hour, minute, second) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) || hour > 23 || minute > 59 {
        return None;
    }
    if second > 60 {
        return None;
    }
    let mut rest = &s[19..];
    let mut nanos = 0u32;
    if let Some(fraction) = rest.strip_prefix('.') {
        let digits = fraction.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 || digits > 9 {
            return None;
        }
        nanos = fraction[..digits].parse::<u32>().ok()? * 10u32.pow(9 - digits as u32);
        rest = &fraction[digits..];
    }
    let offset = match rest {
        "Z" | "z" => 0,
        _ if rest.len() == 6 && matches!(&rest[..1], "+" | "-") && &rest[3..4] == ":" => {
            let (h, m) = (
                rest[1..3].parse::<i64>().ok()?,
                rest[4..6].parse::<i64>().ok()?,
            );
            let minutes = h * 60 + m;
            if rest.starts_with('-') {
                -minutes
            } else {
                minutes
            }
        }
        _ => return None,
    };
    let days = days_from_civil(year, month, day);
    let seconds = days * 86_400 + hour * 3600 + minute * 60 + second - offset * 60;
    Some((seconds, nanos))
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The object's message and the JSON members it leaves out (for tests).
#[cfg(test)]
fn encode_noting(resource: Resource, object: &Value) -> (Vec<u8>, Vec<String>) {
    let mut skipped = Skipped {
        record: true,
        ..Skipped::default()
    };
    let mut out = Vec::new();
    message(schema_of(resource).unwrap(), object, &mut out, &mut skipped);
    (out, skipped.paths)
}

/// A message's fields by number, the bytes of each occurrence (a varint's own bytes, a
/// length-delimited field's content), for comparing two encodings field by field; `None` for
/// a malformed message or a wire type the API's messages do not use (fixed 32/64 bits).
pub fn message_fields(mut b: &[u8]) -> Option<BTreeMap<u32, Vec<Vec<u8>>>> {
    fn read_varint(b: &mut &[u8]) -> Option<u64> {
        let (mut v, mut shift) = (0u64, 0u32);
        loop {
            let (&byte, rest) = b.split_first()?;
            *b = rest;
            v |= u64::from(byte & 0x7f).checked_shl(shift)?;
            shift += 7;
            if byte < 0x80 {
                return Some(v);
            }
        }
    }
    let mut out: BTreeMap<u32, Vec<Vec<u8>>> = BTreeMap::new();
    while !b.is_empty() {
        let key = read_varint(&mut b)?;
        let value = match key & 7 {
            0 => {
                let start = b;
                read_varint(&mut b)?;
                start[..start.len() - b.len()].to_vec()
            }
            2 => {
                let len = usize::try_from(read_varint(&mut b)?).ok()?;
                let v = b.get(..len)?;
                b = &b[len..];
                v.to_vec()
            }
            _ => return None,
        };
        out.entry(u32::try_from(key >> 3).ok()?)
            .or_default()
            .push(value);
    }
    Some(out)
}
