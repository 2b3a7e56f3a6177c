//! A LIST response decoded as it arrives, one item at a time.
//!
//! A `resourceVersion=0` LIST is served from the API server's watch cache in one response, with
//! no pages: hundreds of megabytes for a large cluster's pods. [`ListSplitter`] cuts
//! `{"kind":…,"metadata":{…},"items":[{…},{…},…]}` into its items as bytes come in, so what is
//! held is the item being read (plus one read's worth of bytes), never the response; each item
//! is decoded with the same wire types as a page's (borrowing from the buffer). A protobuf
//! answer is cut the same way by [`super::proto::list::ProtoListSplitter`].

use std::io::Read;

use super::proto::{self, ProtoWire, list::ProtoListSplitter};
use super::{DecodeContext, DecodeError, ListPage, wire};

/// Largest single item accepted (a Node or Pod is a few KiB; the API server's own limit on an
/// object is about 1.5 MiB in etcd). Past this the response is refused, not buffered.
pub(crate) const MAX_ITEM_BYTES: usize = 16 << 20;

/// Bytes asked of the reader at a time.
const READ_CHUNK: usize = 64 << 10;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// Before the opening `{`.
    Start,
    /// Inside the top-level object, before a key or its closing `}`.
    Key,
    /// After a top-level value, before `,` or `}`.
    AfterValue,
    /// Inside `items`, before an item or the closing `]`.
    Item,
    /// After an item, before `,` or `]`.
    AfterItem,
    Done,
}

/// What [`ListSplitter::next_item`] found.
#[derive(Debug, PartialEq, Eq)]
pub enum Next<'a> {
    /// One item's JSON.
    Item(&'a [u8]),
    /// The buffer ends inside a token: push more bytes.
    NeedMore,
    /// The list object is complete.
    End,
}

/// Incremental splitter of one LIST response body (sans-IO: [`ListSplitter::push`] bytes,
/// [`ListSplitter::next_item`] items).
#[derive(Debug)]
pub(crate) struct ListSplitter {
    buf: Vec<u8>,
    /// Where the next token starts; everything before it has been consumed.
    pos: usize,
    state: State,
    resource_version: String,
    continue_token: Option<String>,
}

impl Default for ListSplitter {
    fn default() -> Self {
        ListSplitter::new()
    }
}

impl ListSplitter {
    pub(crate) fn new() -> ListSplitter {
        ListSplitter {
            buf: Vec::new(),
            pos: 0,
            state: State::Start,
            resource_version: String::new(),
            continue_token: None,
        }
    }

    /// Appends bytes, first dropping what has been consumed (the buffer holds one token's worth).
    pub(crate) fn push(&mut self, bytes: &[u8]) {
        if self.pos > 0 {
            self.buf.drain(..self.pos);
            self.pos = 0;
        }
        self.buf.extend_from_slice(bytes);
    }

    /// Bytes buffered and not yet consumed.
    #[cfg(test)]
    pub(crate) fn pending(&self) -> usize {
        self.buf.len() - self.pos
    }

    /// `metadata.resourceVersion` of the list (known once the metadata has been read: the API
    /// server writes it before the items).
    pub(crate) fn resource_version(&self) -> &str {
        &self.resource_version
    }

    #[cfg(test)]
    pub(crate) fn continue_token(&self) -> Option<&str> {
        self.continue_token.as_deref()
    }

    /// The next item, or what is needed to get one.
    pub(crate) fn next_item(&mut self) -> Result<Next<'_>, DecodeError> {
        loop {
            let Some(at) = skip_ws(&self.buf, self.pos) else {
                return Ok(if self.state == State::Done {
                    Next::End
                } else {
                    Next::NeedMore
                });
            };
            let byte = self.buf[at];
            match self.state {
                State::Done => return Err(bad("bytes after the end of the list")),
                State::Start => {
                    if byte != b'{' {
                        return Err(bad("the body is not a JSON object"));
                    }
                    self.pos = at + 1;
                    self.state = State::Key;
                }
                State::Key | State::AfterValue => {
                    if byte == b'}' {
                        self.pos = at + 1;
                        self.state = State::Done;
                        continue;
                    }
                    if self.state == State::AfterValue {
                        if byte != b',' {
                            return Err(bad("expected ',' or '}' in the list object"));
                        }
                        self.pos = at + 1;
                        self.state = State::Key;
                        continue;
                    }
                    if !self.key_value(at)? {
                        return Ok(Next::NeedMore);
                    }
                }
                State::Item | State::AfterItem => {
                    if byte == b']' {
                        self.pos = at + 1;
                        self.state = State::AfterValue;
                        continue;
                    }
                    if self.state == State::AfterItem {
                        if byte != b',' {
                            return Err(bad("expected ',' or ']' between items"));
                        }
                        self.pos = at + 1;
                        self.state = State::Item;
                        continue;
                    }
                    match value_end(&self.buf, at)? {
                        Some(end) => {
                            self.pos = end;
                            self.state = State::AfterItem;
                            return Ok(Next::Item(&self.buf[at..end]));
                        }
                        None if self.buf.len() - at > MAX_ITEM_BYTES => {
                            return Err(bad(format!("an item larger than {MAX_ITEM_BYTES} bytes")));
                        }
                        None => return Ok(Next::NeedMore),
                    }
                }
            }
        }
    }

    /// One top-level `"key": value` from `at`; `false` when it is not all in the buffer yet
    /// (nothing consumed). `items` opens the item array instead of being read whole.
    fn key_value(&mut self, at: usize) -> Result<bool, DecodeError> {
        let Some(key_end) = value_end(&self.buf, at)? else {
            return Ok(false);
        };
        if self.buf[at] != b'"' {
            return Err(bad("expected a key in the list object"));
        }
        let Some(colon) = skip_ws(&self.buf, key_end) else {
            return Ok(false);
        };
        if self.buf[colon] != b':' {
            return Err(bad("expected ':' after a key"));
        }
        let Some(value) = skip_ws(&self.buf, colon + 1) else {
            return Ok(false);
        };
        let key = &self.buf[at + 1..key_end - 1];
        if key == b"items" && self.buf[value] == b'[' {
            self.pos = value + 1;
            self.state = State::Item;
            return Ok(true);
        }
        let Some(end) = value_end(&self.buf, value)? else {
            if self.buf.len() - at > MAX_ITEM_BYTES {
                return Err(bad("a list field too large"));
            }
            return Ok(false);
        };
        if key == b"metadata" {
            let meta: Option<wire::ListMeta<'_>> = serde_json::from_slice(&self.buf[value..end])
                .map_err(|e| DecodeError::new("list", e.to_string()))?;
            let meta = meta.unwrap_or_default();
            self.resource_version = wire::text(&meta.resource_version).to_string();
            self.continue_token = meta
                .continue_token
                .map(|c| c.0.into_owned())
                .filter(|c| !c.is_empty());
        }
        self.pos = end;
        self.state = State::AfterValue;
        Ok(true)
    }
}

fn bad(reason: impl Into<String>) -> DecodeError {
    DecodeError::new("list", reason)
}

/// The first non-whitespace byte at or after `from`, if the buffer has one.
fn skip_ws(buf: &[u8], from: usize) -> Option<usize> {
    (from..buf.len()).find(|&i| !matches!(buf[i], b' ' | b'\t' | b'\n' | b'\r'))
}

/// The end (exclusive) of the JSON value starting at `start`, or `None` when the buffer ends
/// first. Only the structure is checked (strings, nesting); serde checks the rest.
fn value_end(buf: &[u8], start: usize) -> Result<Option<usize>, DecodeError> {
    let mut depth = 0usize;
    let mut i = start;
    while i < buf.len() {
        match buf[i] {
            b'"' => {
                i += 1;
                loop {
                    match buf.get(i) {
                        None => return Ok(None),
                        Some(b'\\') => i += 2,
                        Some(b'"') => break,
                        Some(_) => i += 1,
                    }
                }
                if depth == 0 {
                    return Ok(Some(i + 1));
                }
            }
            b'{' | b'[' => depth += 1,
            b'}' | b']' => {
                if depth == 0 {
                    // The end of the enclosing object or array closes a bare value.
                    return if i == start {
                        Err(bad("unbalanced brackets"))
                    } else {
                        Ok(Some(i))
                    };
                }
                depth -= 1;
                if depth == 0 {
                    return Ok(Some(i + 1));
                }
            }
            b',' | b' ' | b'\t' | b'\n' | b'\r' if depth == 0 => {
                return if i == start {
                    Err(bad("expected a value"))
                } else {
                    Ok(Some(i))
                };
            }
            _ => {}
        }
        i += 1;
    }
    // A bare number or literal may continue in the next read.
    Ok(None)
}

/// Why a streamed list stopped.
#[derive(Debug)]
pub enum StreamError {
    /// Reading the body failed (reset, timeout, TLS).
    Io(std::io::Error),
    Decode(DecodeError),
}

impl std::fmt::Display for StreamError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StreamError::Io(e) => write!(f, "reading the list: {e}"),
            StreamError::Decode(e) => e.fmt(f),
        }
    }
}

/// How the body is encoded, per its Content-Type.
#[derive(Debug)]
enum Splitter {
    Json(ListSplitter),
    Protobuf(ProtoListSplitter),
}

/// A LIST body being read from `reader`, a batch of items at a time.
pub struct ListStream<R> {
    reader: R,
    splitter: Splitter,
    chunk: Vec<u8>,
    bytes: u64,
}

impl<R: Read> ListStream<R> {
    /// A JSON body.
    pub fn new(reader: R) -> ListStream<R> {
        ListStream::with(reader, Splitter::Json(ListSplitter::new()))
    }

    /// A protobuf body (`application/vnd.kubernetes.protobuf`).
    pub fn protobuf(reader: R) -> ListStream<R> {
        ListStream::with(reader, Splitter::Protobuf(ProtoListSplitter::new()))
    }

    fn with(reader: R, splitter: Splitter) -> ListStream<R> {
        ListStream {
            reader,
            splitter,
            chunk: vec![0; READ_CHUNK],
            bytes: 0,
        }
    }

    /// Bytes buffered and not yet consumed.
    #[cfg(test)]
    pub(crate) fn pending(&self) -> usize {
        match &self.splitter {
            Splitter::Json(s) => s.pending(),
            Splitter::Protobuf(s) => s.pending(),
        }
    }

    /// The reader, e.g. to read what follows the list to the end.
    pub fn into_reader(self) -> R {
        self.reader
    }

    /// Body bytes read so far.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Up to `max` items, reading as needed. The page's `continue_token` is `None` when the list
    /// is complete (its `resource_version` then set), `Some("")` when more items follow in this
    /// same body. Items that cannot be decoded are skipped and reported, as in a page.
    pub fn next_batch<T: ProtoWire>(
        &mut self,
        max: usize,
        ctx: &mut DecodeContext,
    ) -> Result<ListPage<T>, StreamError> {
        let mut page = ListPage {
            items: Vec::new(),
            resource_version: String::new(),
            continue_token: Some(String::new()),
            skipped: Vec::new(),
        };
        loop {
            let is_protobuf = matches!(self.splitter, Splitter::Protobuf(_));
            let next = match &mut self.splitter {
                Splitter::Json(s) => s.next_item(),
                Splitter::Protobuf(s) => s.next_item(),
            };
            match next.map_err(StreamError::Decode)? {
                Next::Item(item) => {
                    let decoded = if is_protobuf {
                        proto::decode_item(proto::Reader::new(item, T::KIND), ctx)
                    } else {
                        serde_json::from_slice::<T::Wire<'_>>(item)
                            .map_err(|e| DecodeError::new(T::KIND, e.to_string()))
                            .and_then(|w| T::from_wire(w, ctx))
                    };
                    match decoded {
                        Ok(item) => page.items.push(item),
                        Err(e) => page.skipped.push(e),
                    }
                    if page.items.len() + page.skipped.len() >= max.max(1) {
                        return Ok(page);
                    }
                }
                Next::End => {
                    page.resource_version = match &self.splitter {
                        Splitter::Json(s) => s.resource_version().to_string(),
                        Splitter::Protobuf(s) => s.resource_version().to_string(),
                    };
                    page.continue_token = None;
                    return Ok(page);
                }
                Next::NeedMore => {
                    let n = loop {
                        match self.reader.read(&mut self.chunk) {
                            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                            other => break other.map_err(StreamError::Io)?,
                        }
                    };
                    if n == 0 {
                        if let Splitter::Protobuf(s) = &self.splitter {
                            // A protobuf list has no closing bracket: the body's end is its end.
                            s.finish().map_err(StreamError::Decode)?;
                            page.resource_version = s.resource_version().to_string();
                            page.continue_token = None;
                            return Ok(page);
                        }
                        return Err(StreamError::Decode(bad(format!(
                            "the body ended after {} bytes, inside the list",
                            self.bytes
                        ))));
                    }
                    self.bytes += n as u64;
                    match &mut self.splitter {
                        Splitter::Json(s) => s.push(&self.chunk[..n]),
                        Splitter::Protobuf(s) => s.push(&self.chunk[..n]),
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;
