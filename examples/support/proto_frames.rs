//! Protobuf watch events as kube-apiserver writes them, built by hand for the examples that
//! time the decoder (included with `#[path]`: an example is a crate of its own).

/// A length-delimited field: the tag (wire type 2), the length as a varint, the bytes.
pub fn len_field(number: u8, content: &[u8], out: &mut Vec<u8>) {
    out.push(number << 3 | 2);
    put_varint(content.len() as u64, out);
    out.extend_from_slice(content);
}

/// `v` as a protobuf varint: seven bits a byte, the lowest first.
pub fn put_varint(mut v: u64, out: &mut Vec<u8>) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// `k8s\0` + `runtime.Unknown {typeMeta {apiVersion, kind}, raw, contentEncoding, contentType}`:
/// an object as kube-apiserver writes it in protobuf.
pub fn envelope(api_version: &[u8], kind: &[u8], message: &[u8]) -> Vec<u8> {
    let (mut type_meta, mut unknown) = (Vec::new(), Vec::new());
    len_field(1, api_version, &mut type_meta);
    len_field(2, kind, &mut type_meta);
    len_field(1, &type_meta, &mut unknown);
    len_field(2, message, &mut unknown);
    len_field(3, b"", &mut unknown);
    len_field(4, b"", &mut unknown);
    let mut out = b"k8s\0".to_vec();
    out.extend_from_slice(&unknown);
    out
}

/// `WatchEvent {type, object: RawExtension {raw: the enveloped object}}` (without the stream's
/// 4-byte length).
pub fn watch_event(kind: &[u8], enveloped: &[u8]) -> Vec<u8> {
    let (mut raw, mut event) = (Vec::new(), Vec::new());
    len_field(1, enveloped, &mut raw);
    len_field(1, kind, &mut event);
    len_field(2, &raw, &mut event);
    event
}
