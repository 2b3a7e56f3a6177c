//! Protobuf, as the API server writes it for `Accept: application/vnd.kubernetes.protobuf`.
//!
//! A hand-written reader over borrowed bytes: no generated code, no schema, only the fields
//! the controllers need (numbers in [`fields`]). A field we do not read is skipped by its length
//! prefix, which is the point: a Node heartbeat is mostly managedFields and images. Every length
//! is checked against the bytes that hold it before use, so a malformed or truncated message is
//! an error naming the field and the byte offset, never a panic and never an allocation sized
//! by what the peer claims.

pub(crate) mod fields;
pub mod list;
mod objects;

use std::fmt;

pub use objects::ProtoWire;

use super::{DecodeContext, DecodeError, WatchEvent};

/// The four bytes before every protobuf-encoded object (`k8s\0`).
pub(crate) const MAGIC: &[u8; 4] = b"k8s\0";

/// The media type to ask for and the one answers carry (a watch adds `;stream=watch`).
pub(crate) const MEDIA_TYPE: &str = "application/vnd.kubernetes.protobuf";

/// What the daemon asks the API server for (upstream `--kube-api-content-type`). Either way a
/// JSON answer is read as JSON: only the LIST from the watch cache and the watch streams are
/// asked in protobuf; paginated LISTs and unary calls stay JSON.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ContentType {
    #[default]
    Protobuf,
    Json,
}

impl ContentType {
    /// The Accept header: protobuf first, JSON as the fallback (as client-go asks).
    pub fn accept(self) -> &'static str {
        match self {
            ContentType::Protobuf => "application/vnd.kubernetes.protobuf, application/json",
            ContentType::Json => "application/json",
        }
    }

    /// As written in the configuration.
    pub fn as_str(self) -> &'static str {
        match self {
            ContentType::Protobuf => "protobuf",
            ContentType::Json => "json",
        }
    }
}

/// Whether a Content-Type header names the protobuf media type (parameters ignored).
pub fn is_protobuf(content_type: &str) -> bool {
    content_type
        .split(';')
        .next()
        .is_some_and(|t| t.trim().eq_ignore_ascii_case(MEDIA_TYPE))
}

/// Why a message could not be read: the field (a path such as `metadata.name`), the byte offset
/// from the start of the object, and what was wrong.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProtoError {
    pub(crate) field: &'static str,
    pub(crate) offset: usize,
    pub(crate) reason: String,
}

impl fmt::Display for ProtoError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "protobuf {} at byte {}: {}",
            self.field, self.offset, self.reason
        )
    }
}

impl ProtoError {
    pub(crate) fn new(field: &'static str, offset: usize, reason: impl Into<String>) -> ProtoError {
        ProtoError {
            field,
            offset,
            reason: reason.into(),
        }
    }
}

/// A protobuf wire type (the low three bits of a tag).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Value<'a> {
    Varint(u64),
    Fixed64(u64),
    Fixed32(u32),
    /// Length-delimited: strings, bytes, embedded messages, packed repeated fields.
    Bytes(&'a [u8]),
}

/// One field of a message.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Field<'a> {
    pub(crate) number: u32,
    pub(crate) value: Value<'a>,
    /// Offset of the field's value (for a length-delimited one, of its first byte of content)
    /// from the start of the outermost object.
    pub(crate) offset: usize,
}

/// The fields of one message, in order.
#[derive(Clone, Debug)]
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
    /// Offset of `buf[0]` in the outermost object, for errors.
    base: usize,
    /// The message being read, for errors about its framing.
    what: &'static str,
}

/// Reads a base-128 varint at `buf[pos..]`: `Ok(None)` when the bytes end inside it.
#[inline]
pub(crate) fn varint(buf: &[u8], pos: usize) -> Result<Option<(u64, usize)>, &'static str> {
    // Tags, lengths of names and small integers: one byte, most fields of a Lease.
    if let Some(&byte) = buf.get(pos)
        && byte < 0x80
    {
        return Ok(Some((u64::from(byte), pos + 1)));
    }
    varint_long(buf, pos)
}

fn varint_long(buf: &[u8], pos: usize) -> Result<Option<(u64, usize)>, &'static str> {
    let mut value = 0u64;
    for i in 0..10 {
        let Some(&byte) = buf.get(pos + i) else {
            return Ok(None);
        };
        if i == 9 && byte > 1 {
            return Err("varint longer than 64 bits");
        }
        value |= u64::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            return Ok(Some((value, pos + i + 1)));
        }
    }
    Err("varint longer than 10 bytes")
}

impl<'a> Reader<'a> {
    pub fn new(buf: &'a [u8], what: &'static str) -> Reader<'a> {
        Reader {
            buf,
            pos: 0,
            base: 0,
            what,
        }
    }

    /// The next field, `None` at the end of the message. Always inlined: a call per field
    /// costs more than the fast path itself (callgrind, `examples/pod_sync_decode.rs`).
    #[inline(always)]
    pub(crate) fn next_field(&mut self) -> Result<Option<Field<'a>>, ProtoError> {
        // Most fields of the objects we read: a one-byte tag (fields 1 to 15) or a two-byte
        // one (16 to 2047: a pod's tolerations, most of its spec past the containers, its
        // managedFields), then a varint, or a length that fits in what is left. Anything
        // else, and every error, takes `next_field_long`, which reads any field (so this path
        // only saves instructions, it decides nothing).
        let pos = self.pos;
        if pos == self.buf.len() {
            return Ok(None);
        }
        let Some(&b0) = self.buf.get(pos) else {
            return self.next_field_long();
        };
        let (tag, value_at) = if b0 < 0x80 {
            (u32::from(b0), pos + 1)
        } else if let Some(&b1) = self.buf.get(pos + 1)
            && b1 < 0x80
        {
            (u32::from(b0 & 0x7f) | (u32::from(b1) << 7), pos + 2)
        } else {
            return self.next_field_long();
        };
        if tag >= 8
            && let Ok(Some((v, after))) = varint(self.buf, value_at)
        {
            let number = tag >> 3;
            match tag & 7 {
                0 => {
                    self.pos = after;
                    return Ok(Some(Field {
                        number,
                        value: Value::Varint(v),
                        offset: self.base + value_at,
                    }));
                }
                2 => {
                    if let Some(end) = usize::try_from(v).ok().and_then(|n| after.checked_add(n))
                        && let Some(bytes) = self.buf.get(after..end)
                    {
                        self.pos = end;
                        return Ok(Some(Field {
                            number,
                            value: Value::Bytes(bytes),
                            offset: self.base + after,
                        }));
                    }
                }
                _ => {}
            }
        }
        self.next_field_long()
    }

    /// [`Reader::next_field`] for any field (and its errors).
    #[inline(never)]
    fn next_field_long(&mut self) -> Result<Option<Field<'a>>, ProtoError> {
        if self.pos == self.buf.len() {
            return Ok(None);
        }
        let at = self.base + self.pos;
        let err = |reason: &str| ProtoError::new(self.what, at, reason);
        let (tag, pos) = varint(self.buf, self.pos)
            .map_err(err)?
            .ok_or_else(|| err("truncated tag"))?;
        let number = u32::try_from(tag >> 3).map_err(|_| err("field number too large"))?;
        if number == 0 {
            return Err(err("field number 0"));
        }
        let value_at = self.base + pos;
        let truncated = || {
            ProtoError::new(
                self.what,
                value_at,
                format!(
                    "field {number} truncated ({} bytes left)",
                    self.buf.len() - pos
                ),
            )
        };
        let (value, end) = match tag & 7 {
            0 => {
                let (v, end) = varint(self.buf, pos).map_err(err)?.ok_or_else(truncated)?;
                (Value::Varint(v), end)
            }
            1 => {
                let bytes = self.buf.get(pos..pos + 8).ok_or_else(truncated)?;
                let v = u64::from_le_bytes(bytes.try_into().unwrap_or_default());
                (Value::Fixed64(v), pos + 8)
            }
            2 => {
                let (len, start) = varint(self.buf, pos).map_err(err)?.ok_or_else(truncated)?;
                let left = self.buf.len() - start;
                if len > left as u64 {
                    return Err(ProtoError::new(
                        self.what,
                        value_at,
                        format!("field {number}: length {len} past the end ({left} bytes left)"),
                    ));
                }
                let end = start + len as usize;
                return {
                    self.pos = end;
                    Ok(Some(Field {
                        number,
                        value: Value::Bytes(&self.buf[start..end]),
                        offset: self.base + start,
                    }))
                };
            }
            5 => {
                let bytes = self.buf.get(pos..pos + 4).ok_or_else(truncated)?;
                let v = u32::from_le_bytes(bytes.try_into().unwrap_or_default());
                (Value::Fixed32(v), pos + 4)
            }
            t => {
                return Err(err(&format!("field {number}: unsupported wire type {t}")));
            }
        };
        self.pos = end;
        Ok(Some(Field {
            number,
            value,
            offset: value_at,
        }))
    }
}

/// `bytes` as text, if they are UTF-8 (`std::str::from_utf8`'s answer). Names, uids and
/// versions are short and ASCII: `is_ascii` reads them a word at a time, where `from_utf8`
/// goes a byte at a time through a string this short (a hand-written word loop does no better
/// than `is_ascii`).
#[inline]
pub(crate) fn utf8(bytes: &[u8]) -> Result<&str, std::str::Utf8Error> {
    if bytes.is_ascii() {
        // SAFETY: every byte is below 0x80, and ASCII is UTF-8.
        return Ok(unsafe { std::str::from_utf8_unchecked(bytes) });
    }
    std::str::from_utf8(bytes)
}

impl<'a> Field<'a> {
    fn wrong(&self, field: &'static str, expected: &str) -> ProtoError {
        let got = match self.value {
            Value::Varint(_) => "a varint",
            Value::Fixed64(_) => "a fixed64",
            Value::Fixed32(_) => "a fixed32",
            Value::Bytes(_) => "length-delimited",
        };
        ProtoError::new(
            field,
            self.offset,
            format!("{got} where {expected} belongs"),
        )
    }

    pub(crate) fn bytes(&self, field: &'static str) -> Result<&'a [u8], ProtoError> {
        match self.value {
            Value::Bytes(b) => Ok(b),
            _ => Err(self.wrong(field, "a length-delimited value")),
        }
    }

    /// A string field, borrowed; it must be UTF-8 (as JSON strings are).
    pub(crate) fn str(&self, field: &'static str) -> Result<&'a str, ProtoError> {
        utf8(self.bytes(field)?).map_err(|e| {
            ProtoError::new(
                field,
                self.offset + e.valid_up_to(),
                "a string that is not UTF-8",
            )
        })
    }

    /// An embedded message: its fields, with offsets still counted from the outermost object.
    pub(crate) fn message(&self, field: &'static str) -> Result<Reader<'a>, ProtoError> {
        Ok(Reader {
            buf: self.bytes(field)?,
            pos: 0,
            base: self.offset,
            what: field,
        })
    }

    pub(crate) fn varint(&self, field: &'static str) -> Result<u64, ProtoError> {
        match self.value {
            Value::Varint(v) => Ok(v),
            _ => Err(self.wrong(field, "a varint")),
        }
    }

    pub(crate) fn bool(&self, field: &'static str) -> Result<bool, ProtoError> {
        self.varint(field).map(|v| v != 0)
    }

    /// An `int64` (two's complement in ten bytes when negative).
    pub(crate) fn int64(&self, field: &'static str) -> Result<i64, ProtoError> {
        self.varint(field).map(|v| v as i64)
    }

    /// An `int32`: negative ones are sign-extended to 64 bits on the wire; the value must fit.
    pub(crate) fn int32(&self, field: &'static str) -> Result<i32, ProtoError> {
        let v = self.int64(field)?;
        i32::try_from(v)
            .map_err(|_| ProtoError::new(field, self.offset, format!("{v} is not an int32")))
    }
}

/// The object inside the `k8s\0` + `runtime.Unknown` envelope of a whole body or a watch
/// event's object (offsets in errors count from the envelope's start). The kind it names is
/// checked (a string) but not returned: the caller knows what it asked for.
pub(crate) fn unwrap_envelope(body: &[u8]) -> Result<Reader<'_>, ProtoError> {
    if body.len() < MAGIC.len() || &body[..MAGIC.len()] != MAGIC {
        return Err(ProtoError::new(
            "envelope",
            0,
            "the body does not start with the k8s protobuf magic",
        ));
    }
    let mut unknown = Reader {
        buf: &body[MAGIC.len()..],
        pos: 0,
        base: MAGIC.len(),
        what: "runtime.Unknown",
    };
    let mut raw = None;
    while let Some(f) = unknown.next_field()? {
        match f.number {
            fields::UNKNOWN_TYPE_META => {
                let mut type_meta = f.message("runtime.Unknown.typeMeta")?;
                while let Some(t) = type_meta.next_field()? {
                    // ASCII is UTF-8: the common case needs no further look.
                    if t.number == fields::TYPE_META_KIND
                        && !t.bytes("runtime.Unknown.typeMeta.kind")?.is_ascii()
                    {
                        t.str("runtime.Unknown.typeMeta.kind")?;
                    }
                }
            }
            fields::UNKNOWN_RAW => raw = Some(f.message("runtime.Unknown.raw")?),
            // Empty, as the API server writes it: nothing to read as a string.
            fields::UNKNOWN_CONTENT_ENCODING
                if !f.bytes("runtime.Unknown.contentEncoding")?.is_empty() =>
            {
                let encoding = f.str("runtime.Unknown.contentEncoding")?;
                return Err(ProtoError::new(
                    "runtime.Unknown.contentEncoding",
                    f.offset,
                    format!("unsupported content encoding {encoding:?}"),
                ));
            }
            _ => {}
        }
    }
    raw.ok_or_else(|| ProtoError::new("runtime.Unknown.raw", body.len(), "missing"))
}

/// One object (a whole response body, envelope included).
pub fn decode_object<T: ProtoWire>(body: &[u8], ctx: &mut DecodeContext) -> Result<T, DecodeError> {
    let raw = unwrap_envelope(body).map_err(|e| DecodeError::new(T::KIND, e.to_string()))?;
    decode_item(raw, ctx)
}

/// One object's own message (a list item, or what an envelope holds).
pub fn decode_item<T: ProtoWire>(
    object: Reader<'_>,
    ctx: &mut DecodeContext,
) -> Result<T, DecodeError> {
    T::from_proto(object, ctx)
}

/// A metav1.Status body (a refused request's answer, in protobuf).
pub(crate) fn decode_status(body: &[u8]) -> Result<super::Status, DecodeError> {
    let bad = |e: ProtoError| DecodeError::new("Status", e.to_string());
    let raw = unwrap_envelope(body).map_err(bad)?;
    objects::status(raw).map_err(bad)
}

/// One frame of a protobuf watch stream (the 4-byte length already taken off): a
/// metav1.WatchEvent whose object is a RawExtension holding an enveloped object.
pub fn decode_watch_event<T: ProtoWire>(
    frame: &[u8],
    ctx: &mut DecodeContext,
) -> Result<WatchEvent<T>, DecodeError> {
    let bad = |e: ProtoError| DecodeError::new("watch event", e.to_string());
    let mut event = Reader::new(frame, "metav1.WatchEvent");
    let (mut kind, mut raw) = (None, None);
    while let Some(f) = event.next_field().map_err(bad)? {
        match f.number {
            fields::WATCH_EVENT_TYPE => {
                let bytes = f.bytes("WatchEvent.type").map_err(bad)?;
                // The five types are ASCII: any other is read as a string (an error if it is
                // not one) for the error that names it.
                if EventType::of(bytes).is_none() {
                    f.str("WatchEvent.type").map_err(bad)?;
                }
                kind = Some(bytes);
            }
            fields::WATCH_EVENT_OBJECT => {
                let mut extension = f.message("WatchEvent.object").map_err(bad)?;
                while let Some(g) = extension.next_field().map_err(bad)? {
                    if g.number == fields::RAW_EXTENSION_RAW {
                        raw = Some(g.bytes("WatchEvent.object.raw").map_err(bad)?);
                    }
                }
            }
            _ => {}
        }
    }
    let (Some(kind), Some(raw)) = (kind, raw) else {
        return Err(DecodeError::new("watch event", "no type or no object"));
    };
    let object = || unwrap_envelope(raw).map_err(bad);
    Ok(match EventType::of(kind) {
        Some(EventType::Added) => WatchEvent::Added(decode_item(object()?, ctx)?),
        Some(EventType::Modified) => WatchEvent::Modified(decode_item(object()?, ctx)?),
        Some(EventType::Deleted) => WatchEvent::Deleted(decode_item(object()?, ctx)?),
        Some(EventType::Bookmark) => {
            WatchEvent::Bookmark(objects::bookmark(object()?).map_err(bad)?)
        }
        Some(EventType::Error) => WatchEvent::Error(objects::status(object()?).map_err(bad)?),
        None => {
            return Err(DecodeError::new(
                "watch event",
                format!("unknown event type {:?}", String::from_utf8_lossy(kind)),
            ));
        }
    })
}

/// A watch event's `type`.
#[derive(Clone, Copy)]
enum EventType {
    Added,
    Modified,
    Deleted,
    Bookmark,
    Error,
}

impl EventType {
    fn of(bytes: &[u8]) -> Option<EventType> {
        Some(match bytes {
            b"ADDED" => EventType::Added,
            b"MODIFIED" => EventType::Modified,
            b"DELETED" => EventType::Deleted,
            b"BOOKMARK" => EventType::Bookmark,
            b"ERROR" => EventType::Error,
            _ => return None,
        })
    }
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_node;
#[cfg(test)]
mod tests_utf8;
#[cfg(test)]
mod tests_writers;
