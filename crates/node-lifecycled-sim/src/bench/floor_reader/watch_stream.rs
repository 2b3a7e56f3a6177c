//! What the floor reader reads of a watch stream, and nothing more: the response's head, its
//! chunks, each frame found by its length, and by their field paths a Lease's name and
//! renewTime or a Node's name.

/// The watch response as it arrives: the head, then chunks, each frame a 4-byte big-endian
/// length and a `WatchEvent`.
#[derive(Default)]
pub(super) struct Response {
    head_done: bool,
    /// Bytes not yet parsed: the head, or a chunk-size line cut by a read (and what followed).
    pending: Vec<u8>,
    /// Bytes left in the current chunk's data, then its CRLF.
    chunk_left: usize,
    crlf_left: usize,
    /// The chunks' data not yet cut into frames.
    body: Vec<u8>,
}

impl Response {
    pub(super) fn feed(
        &mut self,
        mut bytes: &[u8],
        frame: &mut dyn FnMut(&[u8]),
    ) -> Result<(), String> {
        if !self.head_done {
            self.pending.extend_from_slice(bytes);
            let mut headers = [httparse::EMPTY_HEADER; 64];
            let mut head = httparse::Response::new(&mut headers);
            let end = match head.parse(&self.pending) {
                Ok(httparse::Status::Complete(end)) => end,
                Ok(httparse::Status::Partial) => return Ok(()),
                Err(e) => return Err(format!("the watch's response head: {e}")),
            };
            if head.code != Some(200) {
                return Err(format!(
                    "the watch was answered {} {}",
                    head.code.unwrap_or_default(),
                    head.reason.unwrap_or_default()
                ));
            }
            self.head_done = true;
            let rest = self.pending.split_off(end);
            self.pending.clear();
            return self.feed(&rest, frame);
        }
        while !bytes.is_empty() {
            if self.crlf_left > 0 {
                let n = self.crlf_left.min(bytes.len());
                self.crlf_left -= n;
                bytes = &bytes[n..];
            } else if self.chunk_left > 0 {
                let n = self.chunk_left.min(bytes.len());
                self.body.extend_from_slice(&bytes[..n]);
                self.chunk_left -= n;
                bytes = &bytes[n..];
                if self.chunk_left == 0 {
                    self.crlf_left = 2;
                }
            } else if !self.pending.is_empty() {
                // A chunk-size line a read cut: gathered until it is whole.
                self.pending.extend_from_slice(bytes);
                let Some((used, size)) = chunk_line(&self.pending)? else {
                    break;
                };
                let rest = self.pending.split_off(used);
                self.pending.clear();
                if size > 0 {
                    self.chunk_left = size;
                    self.feed(&rest, frame)?;
                }
                return Ok(());
            } else {
                let Some((used, size)) = chunk_line(bytes)? else {
                    self.pending.extend_from_slice(bytes);
                    break;
                };
                if size == 0 {
                    // The last chunk: the server ends the stream (the next read sees the close).
                    break;
                }
                bytes = &bytes[used..];
                self.chunk_left = size;
            }
        }
        self.frames(frame);
        Ok(())
    }

    /// Hands over every complete frame of the body, keeping a cut one for the next read.
    fn frames(&mut self, frame: &mut dyn FnMut(&[u8])) {
        let mut at = 0;
        while let Some(len) = self.body.get(at..at + 4) {
            let len = u32::from_be_bytes([len[0], len[1], len[2], len[3]]) as usize;
            let Some(message) = self.body.get(at + 4..at + 4 + len) else {
                break;
            };
            frame(message);
            at += 4 + len;
        }
        self.body.drain(..at);
    }
}

/// A chunk-size line (httparse's parser): the bytes it took and the size, `None` while cut.
fn chunk_line(bytes: &[u8]) -> Result<Option<(usize, usize)>, String> {
    match httparse::parse_chunk_size(bytes) {
        Ok(httparse::Status::Complete((used, size))) => usize::try_from(size)
            .map(|size| Some((used, size)))
            .map_err(|_| format!("chunk size {size} too large")),
        Ok(httparse::Status::Partial) => Ok(None),
        Err(_) => {
            let line = bytes.split(|b| *b == b'\r').next().unwrap_or_default();
            Err(format!(
                "bad chunk size {:?}",
                String::from_utf8_lossy(line)
            ))
        }
    }
}

/// A protobuf message's fields: number, bytes (length-delimited) or value (varint).
fn fields(mut b: &[u8]) -> impl Iterator<Item = (u64, &[u8], u64)> {
    std::iter::from_fn(move || {
        let (key, rest) = varint(b)?;
        b = rest;
        match key & 7 {
            0 => {
                let (v, rest) = varint(b)?;
                b = rest;
                Some((key >> 3, &[][..], v))
            }
            2 => {
                let (len, rest) = varint(b)?;
                let (field, rest) = rest.split_at_checked(len as usize)?;
                b = rest;
                Some((key >> 3, field, 0))
            }
            _ => None,
        }
    })
}

fn varint(b: &[u8]) -> Option<(u64, &[u8])> {
    let mut v = 0u64;
    for (i, byte) in b.iter().enumerate().take(10) {
        v |= u64::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            return Some((v, &b[i + 1..]));
        }
    }
    None
}

fn field(message: &[u8], number: u64) -> Option<&[u8]> {
    fields(message).find(|f| f.0 == number).map(|f| f.1)
}

/// A floor's reading of one watch frame (after its length prefix): the Lease's name and its
/// renewTime seconds, by the field paths of `WatchEvent.object.raw` → `Unknown.raw` →
/// `Lease{metadata.name, spec.renewTime.seconds}`. `None` for anything else (a bookmark).
pub fn name_and_renewal(event: &[u8]) -> Option<(&[u8], u64)> {
    let raw = field(field(event, 2)?, 1)?;
    // The envelope: 4 magic bytes, then `runtime.Unknown` whose field 2 is the object.
    let lease = field(raw.get(4..)?, 2)?;
    let name = field(field(lease, 1)?, 1)?;
    let renew = field(field(lease, 2)?, 4)?;
    let seconds = fields(renew).find(|f| f.0 == 1).map(|f| f.2)?;
    Some((name, seconds))
}

/// The name of a Node a watch frame carries (`WatchEvent.object.raw` → `Unknown.raw` →
/// `Node.metadata.name`).
pub(super) fn node_name(event: &[u8]) -> Option<&[u8]> {
    let raw = field(field(event, 2)?, 1)?;
    let node = field(raw.get(4..)?, 2)?;
    field(field(node, 1)?, 1)
}
