//! A protobuf LIST response cut into its items as bytes arrive (the protobuf twin of
//! [`crate::decode::list_stream::ListSplitter`]).
//!
//! The body is `k8s\0` + runtime.Unknown {typeMeta=1, raw=2, contentEncoding=3, contentType=4}
//! whose `raw` is the typed list {metadata=1 (ListMeta), items=2 (repeated object)}. Only the
//! field headers are read ahead; an item is handed out once its bytes are all in, and a field
//! we do not read is skipped as it streams past. What is held is one item plus one read.

use super::{MAGIC, ProtoError, Reader, fields, varint};
use crate::decode::DecodeError;
use crate::decode::list_stream::{MAX_ITEM_BYTES, Next};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Magic,
    /// Between fields of the envelope; `list_seen` once its `raw` has been read.
    Envelope,
    /// Inside the list, which ends at this body offset.
    List {
        end: u64,
    },
    /// Skipping `left` more bytes of a field nobody reads, then back to `then`.
    Skip {
        left: u64,
        then: Then,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Then {
    Envelope,
    List { end: u64 },
}

#[derive(Debug)]
pub struct ProtoListSplitter {
    buf: Vec<u8>,
    pos: usize,
    /// Body offset of `buf[0]`.
    base: u64,
    state: State,
    list_seen: bool,
    resource_version: String,
    continue_token: Option<String>,
}

impl Default for ProtoListSplitter {
    fn default() -> Self {
        ProtoListSplitter::new()
    }
}

fn bad(reason: impl Into<String>) -> DecodeError {
    DecodeError::new("list", reason)
}

fn proto(e: ProtoError) -> DecodeError {
    bad(e.to_string())
}

impl ProtoListSplitter {
    pub fn new() -> ProtoListSplitter {
        ProtoListSplitter {
            buf: Vec::new(),
            pos: 0,
            base: 0,
            state: State::Magic,
            list_seen: false,
            resource_version: String::new(),
            continue_token: None,
        }
    }

    /// Appends bytes, first dropping what has been consumed.
    pub fn push(&mut self, bytes: &[u8]) {
        if self.pos > 0 {
            self.buf.drain(..self.pos);
            self.base += self.pos as u64;
            self.pos = 0;
        }
        self.buf.extend_from_slice(bytes);
    }

    pub(crate) fn pending(&self) -> usize {
        self.buf.len() - self.pos
    }

    pub fn resource_version(&self) -> &str {
        &self.resource_version
    }

    fn offset(&self) -> u64 {
        self.base + self.pos as u64
    }

    /// The body ended: whether that is where a complete list ends.
    pub fn finish(&self) -> Result<(), DecodeError> {
        if self.state == State::Envelope && self.list_seen && self.pending() == 0 {
            Ok(())
        } else {
            Err(bad(format!(
                "the body ended after {} bytes, inside the list",
                self.offset() + self.pending() as u64
            )))
        }
    }

    /// A field header at `pos`: (number, wire type, length if length-delimited, where the
    /// value starts); `None` when the header is not all in yet.
    fn header(&self) -> Result<Option<(u32, u64, u64, usize)>, DecodeError> {
        let at = self.offset();
        let err = |reason: &str| bad(format!("protobuf list at byte {at}: {reason}"));
        let Some((tag, pos)) = varint(&self.buf, self.pos).map_err(err)? else {
            return Ok(None);
        };
        let number = u32::try_from(tag >> 3).map_err(|_| err("field number too large"))?;
        let wire_type = tag & 7;
        let (len, start) = match wire_type {
            0 => match varint(&self.buf, pos).map_err(err)? {
                // A varint's value is its own bytes: skip them as a zero-length value.
                Some((_, end)) => (0, end),
                None => return Ok(None),
            },
            1 => (8, pos),
            5 => (4, pos),
            2 => match varint(&self.buf, pos).map_err(err)? {
                Some(v) => v,
                None => return Ok(None),
            },
            t => return Err(err(&format!("unsupported wire type {t}"))),
        };
        Ok(Some((number, wire_type, len, start)))
    }

    /// The next item, or what is needed to get one ([`Next::End`] never: a protobuf body has no
    /// closing bracket; the caller calls [`ProtoListSplitter::finish`] at the end of the body).
    pub fn next_item(&mut self) -> Result<Next<'_>, DecodeError> {
        loop {
            match self.state {
                State::Magic => {
                    if self.pending() < MAGIC.len() {
                        return Ok(Next::NeedMore);
                    }
                    if &self.buf[self.pos..self.pos + MAGIC.len()] != MAGIC {
                        return Err(bad("the body does not start with the k8s protobuf magic"));
                    }
                    self.pos += MAGIC.len();
                    self.state = State::Envelope;
                }
                State::Skip { left, then } => {
                    let n = left.min(self.pending() as u64);
                    self.pos += n as usize;
                    if n < left {
                        self.state = State::Skip {
                            left: left - n,
                            then,
                        };
                        return Ok(Next::NeedMore);
                    }
                    self.state = match then {
                        Then::Envelope => State::Envelope,
                        Then::List { end } => State::List { end },
                    };
                }
                State::Envelope => {
                    if self.pending() == 0 {
                        return Ok(Next::NeedMore);
                    }
                    let Some((number, wire_type, len, start)) = self.header()? else {
                        return Ok(Next::NeedMore);
                    };
                    let value_at = self.base + start as u64;
                    self.pos = start;
                    if number == fields::UNKNOWN_RAW && wire_type == 2 {
                        if self.list_seen {
                            return Err(bad(format!(
                                "protobuf list at byte {value_at}: a second list"
                            )));
                        }
                        self.list_seen = true;
                        self.state = State::List {
                            end: value_at + len,
                        };
                    } else {
                        self.state = State::Skip {
                            left: len,
                            then: Then::Envelope,
                        };
                    }
                }
                State::List { end } => {
                    let at = self.offset();
                    if at == end {
                        self.state = State::Envelope;
                        continue;
                    }
                    if self.pending() == 0 {
                        return Ok(Next::NeedMore);
                    }
                    let Some((number, wire_type, len, start)) = self.header()? else {
                        return Ok(Next::NeedMore);
                    };
                    let value_at = self.base + start as u64;
                    if value_at + len > end {
                        return Err(bad(format!(
                            "protobuf list at byte {at}: field {number} of {len} bytes runs past the list's end"
                        )));
                    }
                    let wanted = wire_type == 2
                        && (number == fields::LIST_ITEMS || number == fields::LIST_METADATA);
                    if !wanted {
                        self.pos = start;
                        self.state = State::Skip {
                            left: len,
                            then: Then::List { end },
                        };
                        continue;
                    }
                    if len > MAX_ITEM_BYTES as u64 {
                        return Err(bad(format!(
                            "protobuf list at byte {at}: an item larger than {MAX_ITEM_BYTES} bytes ({len})"
                        )));
                    }
                    let len = len as usize;
                    if self.buf.len() - start < len {
                        return Ok(Next::NeedMore);
                    }
                    self.pos = start + len;
                    if number == fields::LIST_METADATA {
                        self.list_meta(start, len)?;
                        continue;
                    }
                    return Ok(Next::Item(&self.buf[start..start + len]));
                }
            }
        }
    }

    fn list_meta(&mut self, start: usize, len: usize) -> Result<(), DecodeError> {
        let mut meta = Reader::new(&self.buf[start..start + len], "ListMeta");
        while let Some(f) = meta.next_field().map_err(proto)? {
            match f.number {
                fields::LIST_META_RESOURCE_VERSION => {
                    self.resource_version = f
                        .str("ListMeta.resourceVersion")
                        .map_err(proto)?
                        .to_string()
                }
                fields::LIST_META_CONTINUE => {
                    let token = f.str("ListMeta.continue").map_err(proto)?;
                    self.continue_token = (!token.is_empty()).then(|| token.to_string());
                }
                _ => {}
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decode::DecodeContext;
    use crate::decode::list_stream::{ListStream, StreamError};
    use crate::model::{Lease, Node};

    /// `GET /api/v1/nodes?resourceVersion=0&fieldSelector=metadata.name=node-00001` from
    /// kube-apiserver v1.20.2 with `Accept: application/vnd.kubernetes.protobuf, application/json`.
    const NODE_LIST: &[u8] = include_bytes!("../fixtures/proto_node_list.pb");
    const LEASE: &[u8] = include_bytes!("../fixtures/proto_lease.pb");

    fn enc_varint(mut v: u64, out: &mut Vec<u8>) {
        loop {
            let byte = (v & 0x7f) as u8;
            v >>= 7;
            if v == 0 {
                out.push(byte);
                return;
            }
            out.push(byte | 0x80);
        }
    }
    fn len_field(number: u32, content: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        enc_varint(u64::from(number) << 3 | 2, &mut out);
        enc_varint(content.len() as u64, &mut out);
        out.extend_from_slice(content);
        out
    }

    /// A LeaseList of `n` copies of the real Lease, as the API server frames one.
    fn lease_list(n: usize) -> Vec<u8> {
        let lease = super::super::unwrap_envelope(LEASE).unwrap();
        let mut list = len_field(1, &len_field(2, b"4242"));
        for _ in 0..n {
            list.extend(len_field(2, lease.buf));
        }
        let type_meta = len_field(
            1,
            &[
                len_field(1, b"coordination.k8s.io/v1"),
                len_field(2, b"LeaseList"),
            ]
            .concat(),
        );
        [
            MAGIC.to_vec(),
            type_meta,
            len_field(2, &list),
            len_field(3, b""),
            len_field(4, b""),
        ]
        .concat()
    }

    struct Trickle {
        data: Vec<u8>,
        at: usize,
        step: usize,
    }

    impl std::io::Read for Trickle {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let n = self.step.min(buf.len()).min(self.data.len() - self.at);
            buf[..n].copy_from_slice(&self.data[self.at..self.at + n]);
            self.at += n;
            Ok(n)
        }
    }

    fn read_all<T: super::super::ProtoWire>(
        body: Vec<u8>,
        step: usize,
        batch: usize,
    ) -> Result<(Vec<T>, String, usize), StreamError> {
        let mut stream = ListStream::protobuf(Trickle {
            data: body,
            at: 0,
            step,
        });
        let mut ctx = DecodeContext::new();
        let (mut all, mut batches) = (Vec::new(), 0);
        loop {
            let page = stream.next_batch::<T>(batch, &mut ctx)?;
            batches += 1;
            assert!(page.skipped.is_empty(), "{:?}", page.skipped);
            all.extend(page.items);
            if page.continue_token.is_none() {
                return Ok((all, page.resource_version, batches));
            }
        }
    }

    #[test]
    fn a_watch_cache_node_list_from_the_real_server_in_protobuf_yields_its_node_and_version() {
        for step in [1, 3, 100, 64 << 10] {
            let (nodes, rv, _) = read_all::<Node>(NODE_LIST.to_vec(), step, 500).unwrap();
            assert_eq!(nodes.len(), 1, "step {step}");
            assert_eq!(&*nodes[0].name, "node-00001");
            assert_eq!(rv, "489031");
        }
    }

    #[test]
    fn a_protobuf_list_arriving_in_pieces_comes_in_batches_of_the_page_size() {
        for step in [1, 7, 4096] {
            let (leases, rv, batches) = read_all::<Lease>(lease_list(1_001), step, 500).unwrap();
            assert_eq!(leases.len(), 1_001);
            assert_eq!(rv, "4242");
            assert_eq!(batches, 3);
        }
        let (leases, rv, _) = read_all::<Lease>(lease_list(0), 5, 500).unwrap();
        assert!(leases.is_empty());
        assert_eq!(rv, "4242");
    }

    #[test]
    fn the_protobuf_buffer_holds_about_one_read_not_the_response() {
        let body = lease_list(2_000);
        let total = body.len();
        let mut stream = ListStream::protobuf(Trickle {
            data: body,
            at: 0,
            step: 64 << 10,
        });
        let mut ctx = DecodeContext::new();
        let mut most = 0;
        loop {
            let page = stream.next_batch::<Lease>(1, &mut ctx).unwrap();
            most = most.max(stream.pending());
            if page.continue_token.is_none() {
                break;
            }
        }
        assert!(total > 900_000, "{total}");
        assert!(most <= (64 << 10) + 1024, "held {most} bytes of {total}");
    }

    #[test]
    fn a_protobuf_list_cut_at_any_byte_is_an_error_naming_the_list() {
        let body = lease_list(3);
        // The envelope's two trailing empty strings (4 bytes) carry nothing.
        for len in 0..body.len() - 4 {
            let e = read_all::<Lease>(body[..len].to_vec(), 64, 500).unwrap_err();
            assert!(e.to_string().contains("list"), "{len}: {e}");
        }
        let e = read_all::<Node>(b"{\"kind\":\"NodeList\"}".to_vec(), 64, 500).unwrap_err();
        assert!(e.to_string().contains("magic"), "{e}");
    }

    #[test]
    fn a_protobuf_item_claiming_more_than_the_limit_is_refused_before_it_is_buffered() {
        let mut list = Vec::new();
        enc_varint(2 << 3 | 2, &mut list);
        enc_varint(MAX_ITEM_BYTES as u64 + 1, &mut list);
        let mut body = MAGIC.to_vec();
        enc_varint(2 << 3 | 2, &mut body);
        enc_varint(list.len() as u64 + MAX_ITEM_BYTES as u64 + 1, &mut body);
        body.extend(list);
        body.extend([0u8; 100]);
        let e = read_all::<Lease>(body, 64, 500).unwrap_err();
        assert!(e.to_string().contains("larger than"), "{e}");
        // A field claiming to run past the list's own end is refused too.
        let mut body = MAGIC.to_vec();
        body.extend(len_field(2, &[0x12, 0x7f]));
        let e = read_all::<Lease>(body, 64, 500).unwrap_err();
        assert!(e.to_string().contains("past the list's end"), "{e}");
    }
}
