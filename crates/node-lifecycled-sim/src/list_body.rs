//! A LIST answer written as it is serialized, in chunks, as the real API server writes one:
//! the client reads (and decodes) the first items while the last are still being written, and
//! the simulator never holds a second copy of a 150,000-pod body (building the whole body first
//! delayed the first byte of a `resourceVersion=0` list by the whole serialization).

use std::io::{self, Write};
use std::sync::Arc;

use super::http::{LAST_CHUNK, push_chunk};
use super::object::StoredObject;
use super::proto::{self, ListFrame};

/// How the list is encoded (the `Accept` the client sent; see [`proto::wanted`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Format {
    Json,
    /// `k8s\0` + runtime.Unknown around `{metadata, items}`; `prefix` holds everything before
    /// the first item (the envelope carries the list's length, computed from the items).
    Protobuf,
}

/// Bytes of JSON per chunk: a few TCP segments, small enough that the client starts at once.
const CHUNK_BYTES: usize = 64 * 1024;

/// `{"kind":…,"metadata":{…},"items":[` + the items + `]}`, or its protobuf equivalent.
pub(crate) struct ListBody {
    /// Everything before the first item.
    pub prefix: Vec<u8>,
    pub items: Vec<Arc<StoredObject>>,
    pub format: Format,
}

impl ListBody {
    /// A 200 response with a chunked body; `close` adds `Connection: close`.
    pub fn write_to(&self, out: &mut impl Write, close: bool) -> io::Result<()> {
        let content_type = match self.format {
            Format::Json => "application/json",
            Format::Protobuf => proto::MEDIA_TYPE,
        };
        let mut head = format!(
            "HTTP/1.1 200 OK\r\nContent-Type: {content_type}\r\nCache-Control: no-cache, private\r\nTransfer-Encoding: chunked\r\n",
        );
        if close {
            head.push_str("Connection: close\r\n");
        }
        head.push_str("\r\n");
        out.write_all(head.as_bytes())?;
        let mut data = Vec::with_capacity(CHUNK_BYTES * 2);
        let mut framed = Vec::with_capacity(CHUNK_BYTES * 2 + 16);
        data.extend_from_slice(&self.prefix);
        for (i, item) in self.items.iter().enumerate() {
            match self.format {
                Format::Json => {
                    if i > 0 {
                        data.push(b',');
                    }
                    data.extend_from_slice(item.json.as_bytes());
                }
                Format::Protobuf => {
                    ListFrame::push_item(item.proto.as_deref().unwrap_or_default(), &mut data)
                }
            }
            if data.len() >= CHUNK_BYTES {
                send(out, &mut framed, &mut data)?;
            }
        }
        data.extend_from_slice(match self.format {
            Format::Json => b"]}",
            Format::Protobuf => ListFrame::suffix(),
        });
        send(out, &mut framed, &mut data)?;
        out.write_all(LAST_CHUNK)?;
        out.flush()
    }

    /// The whole body, as one buffer (for tests).
    #[cfg(test)]
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut body = self.prefix.clone();
        for (i, item) in self.items.iter().enumerate() {
            if i > 0 {
                body.push(b',');
            }
            body.extend_from_slice(item.json.as_bytes());
        }
        body.extend_from_slice(b"]}");
        body
    }
}

fn send(out: &mut impl Write, framed: &mut Vec<u8>, data: &mut Vec<u8>) -> io::Result<()> {
    framed.clear();
    push_chunk(framed, data);
    data.clear();
    out.write_all(framed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::object::ObjectKey;

    fn object(i: usize) -> Arc<StoredObject> {
        Arc::new(StoredObject {
            key: ObjectKey::new(Some("default"), &format!("p{i}")),
            uid: format!("u{i}"),
            resource_version: i as u64,
            json: format!(
                r#"{{"metadata":{{"name":"p{i}","pad":"{}"}}}}"#,
                "x".repeat(300)
            ),
            proto: None,
            labels: Vec::new(),
            node_name: None,
            terminating: false,
        })
    }

    /// The chunk data of a chunked body, joined, and how many chunks carried it.
    fn dechunk(mut body: &[u8]) -> (Vec<u8>, usize) {
        let mut data = Vec::new();
        let mut chunks = 0;
        loop {
            let line_end = body.windows(2).position(|w| w == b"\r\n").unwrap();
            let size =
                usize::from_str_radix(std::str::from_utf8(&body[..line_end]).unwrap(), 16).unwrap();
            body = &body[line_end + 2..];
            if size == 0 {
                assert_eq!(body, b"\r\n");
                return (data, chunks);
            }
            data.extend_from_slice(&body[..size]);
            assert_eq!(&body[size..size + 2], b"\r\n");
            body = &body[size + 2..];
            chunks += 1;
        }
    }

    #[test]
    fn a_large_list_goes_out_in_chunks_that_join_into_the_same_json() {
        for n in [0, 1, 1000] {
            let list = ListBody {
                prefix: br#"{"kind":"PodList","metadata":{"resourceVersion":"7"},"items":["#
                    .to_vec(),
                items: (0..n).map(object).collect(),
                format: Format::Json,
            };
            let mut out = Vec::new();
            list.write_to(&mut out, false).unwrap();
            let head_end = out.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
            let head = std::str::from_utf8(&out[..head_end]).unwrap();
            assert!(head.contains("Transfer-Encoding: chunked\r\n"), "{head}");
            assert!(!head.contains("Connection: close"));
            let (data, chunks) = dechunk(&out[head_end..]);
            assert_eq!(data, list.to_bytes());
            let value: serde_json::Value = serde_json::from_slice(&data).unwrap();
            assert_eq!(value["items"].as_array().unwrap().len(), n);
            // 1000 objects of ~330 bytes: several chunks, so the client starts before the end.
            if n == 1000 {
                assert!(chunks >= 5, "{chunks} chunks");
            }
        }
    }

    #[test]
    fn a_protobuf_list_is_one_envelope_whose_items_the_daemon_cuts_out_as_they_arrive() {
        use node_lifecycled::kube::decode::DecodeContext;
        use node_lifecycled::kube::decode::list_stream::Next;
        use node_lifecycled::kube::decode::proto::{Reader, decode_item, list::ProtoListSplitter};
        use node_lifecycled::model::Pod;

        use crate::resource::Resource;

        for n in [0, 1, 700] {
            let items: Vec<Arc<StoredObject>> = (0..n)
                .map(|i| {
                    let pod = crate::fixtures::running_pod("default", &format!("p{i}"), Some("n1"));
                    Arc::new(StoredObject::seal(Resource::Pods, pod, 10 + i as u64).unwrap())
                })
                .collect();
            let raws: Vec<&[u8]> = items.iter().map(|o| o.proto.as_deref().unwrap()).collect();
            let metadata = serde_json::json!({"resourceVersion": "99"});
            let frame = ListFrame::new("PodList", "v1", &metadata, &raws);
            let list = ListBody {
                prefix: frame.prefix,
                items,
                format: Format::Protobuf,
            };
            let mut out = Vec::new();
            list.write_to(&mut out, false).unwrap();
            let head_end = out.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
            let head = std::str::from_utf8(&out[..head_end]).unwrap();
            assert!(
                head.contains("Content-Type: application/vnd.kubernetes.protobuf\r\n"),
                "{head}"
            );
            let (data, _) = dechunk(&out[head_end..]);
            // Fed 1,000 bytes at a time, as reads arrive.
            let mut splitter = ProtoListSplitter::new();
            let mut names = Vec::new();
            for piece in data.chunks(1000) {
                splitter.push(piece);
                while let Next::Item(item) = splitter.next_item().unwrap() {
                    let pod: Pod =
                        decode_item(Reader::new(item, "Pod"), &mut DecodeContext::new()).unwrap();
                    names.push(pod.key.to_string());
                }
            }
            splitter.finish().unwrap();
            assert_eq!(splitter.resource_version(), "99");
            let expected: Vec<String> = (0..n).map(|i| format!("default/p{i}")).collect();
            assert_eq!(names, expected);
        }
    }
}
