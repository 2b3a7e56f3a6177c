//! The fuzz targets: every parser that takes bytes from outside the process, each with its seed
//! corpus, a dictionary and the properties checked on every input beyond "does not panic".

use std::path::{Path, PathBuf};

use node_lifecycled::config::Config;
use node_lifecycled::kube::Connection;
use node_lifecycled::kube::decode::{
    DecodeContext, decode_list, decode_object, decode_watch_event,
};
use node_lifecycled::kube::watch::chunked::{ChunkedDecoder, encode_chunks};
use node_lifecycled::kube::watch::http_head::{HeadParser, MAX_HEAD_BYTES};
use node_lifecycled::kube::watch::lines::{LineError, LineSplitter};
use node_lifecycled::kube::watch::{ResponseDecoder, WatchItem};
use node_lifecycled::model::{Lease, Node, Pod};
use node_lifecycled_sim::testing::Rng;

use super::engine::{ALLOC_PER_INPUT_BYTE, Target, input_hash};

pub const NODE_JSON: &str =
    include_str!("../../crates/kube/src/decode/fixtures/node_kubeadm_control_plane.json");
pub const POD_JSON: &str =
    include_str!("../../crates/kube/src/decode/fixtures/pod_deployment_20k.json");
pub const LEASE_JSON: &str = r#"{"kind":"Lease","apiVersion":"coordination.k8s.io/v1","metadata":{"name":"worker-1","namespace":"kube-node-lease","resourceVersion":"77","uid":"0b7c"},"spec":{"holderIdentity":"worker-1","leaseDurationSeconds":40,"renewTime":"2024-03-12T10:02:19.731204Z"}}"#;
const SMALL_POD: &str = r#"{"metadata":{"name":"fluentbit-x","namespace":"logging","uid":"u","resourceVersion":"9","deletionTimestamp":"2024-01-01T00:00:00Z","ownerReferences":[{"kind":"DaemonSet","name":"fluentbit","controller":true}]},"spec":{"nodeName":"n1","tolerations":[{"operator":"Exists"},{"key":"node.kubernetes.io/unreachable","operator":"Exists","effect":"NoExecute","tolerationSeconds":300}]},"status":{"conditions":[{"type":"Ready","status":"False"}]}}"#;
const SMALL_NODE: &str = r#"{"metadata":{"name":"n1","uid":"u1","resourceVersion":"5","creationTimestamp":"2024-01-01T00:00:00Z","labels":{"topology.kubernetes.io/zone":"z1"}},"spec":{"unschedulable":true,"taints":[{"key":"node.kubernetes.io/unreachable","effect":"NoExecute","timeAdded":"2024-01-01T00:00:01Z"}]},"status":{"conditions":[{"type":"Ready","status":"Unknown","lastHeartbeatTime":"2024-01-01T00:00:00Z","lastTransitionTime":"2024-01-01T00:00:00Z","reason":"NodeStatusUnknown","message":"Kubelet stopped posting node status."}]}}"#;

fn event(kind: &str, object: &str) -> Vec<u8> {
    format!(r#"{{"type":"{kind}","object":{object}}}"#).into_bytes()
}

fn objects() -> [&'static str; 5] {
    [NODE_JSON, POD_JSON, LEASE_JSON, SMALL_POD, SMALL_NODE]
}

const WATCH_HEAD: &[u8] = b"HTTP/1.1 200 OK\r\nCache-Control: no-cache, private\r\nContent-Type: application/json\r\nDate: Mon, 01 Jan 2024 00:00:00 GMT\r\nTransfer-Encoding: chunked\r\n\r\n";

fn heads() -> Vec<Vec<u8>> {
    vec![
        WATCH_HEAD.to_vec(),
        b"HTTP/1.1 403 Forbidden\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}".to_vec(),
        b"HTTP/1.1 500 Internal Server Error\r\n\r\n".to_vec(),
        b"HTTP/1.1 410 Gone\r\nContent-Length: 0\r\n\r\n".to_vec(),
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: identity, chunked\r\nContent-Length: 12\r\n\r\n0\r\n\r\n".to_vec(),
        b"HTTP/1.0 204 No Content\r\nX-A: b\r\n\r\nNEXT".to_vec(),
        b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\n\r\n".to_vec(),
    ]
}

const HTTP_DICT: &[&[u8]] = &[
    b"\r\n",
    b"\r\n\r\n",
    b"HTTP/1.1 ",
    b"HTTP/1.0 ",
    b"Transfer-Encoding: ",
    b"Content-Length: ",
    b"chunked",
    b"identity",
    b"gzip",
    b", ",
    b": ",
    b"200 OK",
    b"101",
    b"304",
    b"\x00",
    b"\t",
];

const CHUNK_DICT: &[&[u8]] = &[
    b"\r\n",
    b"0\r\n\r\n",
    b";ext=val",
    b";",
    b" ",
    b"\n",
    b"Expires: never\r\n",
    b"fffffffffffffff",
    b"1000000000000000",
];

const JSON_DICT: &[&[u8]] = &[
    b"{",
    b"}",
    b"[",
    b"]",
    b"\"\"",
    b"null",
    b"true",
    b"false",
    b"\\u0000",
    b"\\ud800",
    b"\\\"",
    b"\"type\":\"ADDED\"",
    b"\"type\":\"MODIFIED\"",
    b"\"type\":\"DELETED\"",
    b"\"type\":\"BOOKMARK\"",
    b"\"type\":\"ERROR\"",
    b"\"object\":",
    b"\"metadata\":",
    b"\"items\":",
    b"\"name\":",
    b"\"resourceVersion\":",
    b"\"continue\":",
    b"\"annotations\":{\"k8s.io/initial-events-end\":\"true\"}",
    b"\"tolerationSeconds\":",
    b"\"renewTime\":",
    b"\"2024-02-30T25:61:61.9999999999Z\"",
    b"\"0000-01-01T00:00:00Z\"",
    b"\"9999-12-31T23:59:59+23:59\"",
    b"1e400",
    b"-9223372036854775809",
    b"[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[",
    b"{\"a\":{\"a\":{\"a\":{\"a\":{\"a\":{\"a\":",
];

const KUBECONFIG_DICT: &[&[u8]] = &[
    b"\n",
    b"\n  ",
    b"- ",
    b": ",
    b"&a ",
    b"*a",
    b"<<: *a",
    b"!!binary ",
    b"!!str ",
    b"? ",
    b"|\n  ",
    b">-\n  ",
    b"{",
    b"}",
    b"[",
    b"]",
    b"'",
    b"\"",
    b"~",
    b"current-context: ",
    b"certificate-authority: ca.crt",
    b"certificate-authority-data: ",
    b"client-certificate-data: ",
    b"client-key-data: ",
    b"client-key: client.key",
    b"tokenFile: token",
    b"token: ",
    b"insecure-skip-tls-verify: true",
    b"https://127.0.0.1:6443",
    b"http://[::1]:8080/base",
    b"https://[fe80::1%25eth0]:99999",
    b"exec: {command: x}",
];

const TOML_DICT: &[&[u8]] = &[
    b"\n",
    b" = ",
    b"\"",
    b"'''",
    b"\"\"\"",
    b"[api]\n",
    b"[leader_election]\n",
    b"[[x]]\n",
    b"{ a = 1 }",
    b"[1, 2]",
    b"inf",
    b"nan",
    b"-0.0",
    b"1e309",
    b"0x7fffffffffffffff",
    b"1979-05-27T07:32:00Z",
    b"\"0s\"",
    b"\"1.5h\"",
    b"\"18446744073709551616s\"",
    b"\"9999999999999h\"",
    b"\"1ns\"",
    b"\"-1s\"",
    b"node_monitor_grace_period",
    b"node_eviction_rate",
    b"unhealthy_zone_threshold",
    b"kubeconfig = \"/x\"",
    b"in_cluster = true",
    b"metrics_address",
    b"\"[::1]:0\"",
    b"dry_run = true",
];

// ---------------------------------------------------------------------------------------------
// HTTP response head

fn head_corpus() -> Vec<Vec<u8>> {
    heads()
}

/// The head parser: one feed or two at a split point must agree, the bytes after the head are
/// exactly the input's tail, and only an input longer than the limit may be `TooLarge`.
fn run_head(input: &[u8]) -> Result<(), String> {
    let whole = HeadParser::new().feed(input);
    let split = (input_hash(input) % (input.len() as u64 + 1)) as usize;
    let mut p = HeadParser::new();
    let pieces = match p.feed(&input[..split]) {
        Ok(Some((head, mut rest))) => {
            rest.extend_from_slice(&input[split..]);
            Ok(Some((head, rest)))
        }
        Ok(None) => p.feed(&input[split..]),
        Err(e) => Err(e),
    };
    if whole != pieces {
        return Err(format!(
            "one feed gave {whole:?}, a split at {split} gave {pieces:?}"
        ));
    }
    match whole {
        Ok(Some((_, rest)))
            if !input.ends_with(&rest) || rest.len() > input.len().saturating_sub(4) =>
        {
            return Err(format!(
                "rest of {} bytes is not the input's tail",
                rest.len()
            ));
        }
        Err(node_lifecycled::kube::watch::http_head::HeadError::TooLarge)
            if input.len() <= MAX_HEAD_BYTES =>
        {
            return Err(format!("TooLarge for {} bytes", input.len()));
        }
        _ => {}
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Whole watch responses (head + framing + chunks + lines)

fn response_corpus() -> Vec<Vec<u8>> {
    let mut corpus = heads();
    for (i, object) in objects().iter().enumerate() {
        let mut lines = event("ADDED", object);
        lines.push(b'\n');
        lines.extend_from_slice(&event("MODIFIED", SMALL_NODE));
        lines.extend_from_slice(b"\r\n");
        let mut body = WATCH_HEAD.to_vec();
        encode_chunks(&lines, 17 + i * 500, &mut body);
        body.extend_from_slice(b"0\r\n\r\n");
        corpus.push(body);
    }
    let status = br#"{"kind":"Status","apiVersion":"v1","status":"Failure","message":"pods is forbidden","reason":"Forbidden","code":403}"#;
    let mut forbidden = format!(
        "HTTP/1.1 403 Forbidden\r\nContent-Length: {}\r\n\r\n",
        status.len()
    )
    .into_bytes();
    forbidden.extend_from_slice(status);
    corpus.push(forbidden);
    let mut until_close = b"HTTP/1.1 200 OK\r\n\r\n".to_vec();
    until_close.extend_from_slice(&event(
        "BOOKMARK",
        r#"{"metadata":{"resourceVersion":"12"}}"#,
    ));
    corpus.push(until_close);
    corpus
}

/// Feeds `input` in pieces cut at the given points, then EOF; returns the items.
fn response_items(input: &[u8], cuts: &[usize], max_line: usize) -> Result<Vec<WatchItem>, String> {
    let mut d = ResponseDecoder::new(max_line);
    let mut out = Vec::new();
    let mut from = 0;
    for &cut in cuts.iter().chain(std::iter::once(&input.len())) {
        let cut = cut.clamp(from, input.len());
        let before = out.len();
        let ended = d.is_ended();
        d.feed(&input[from..cut], &mut out);
        if ended && out.len() != before {
            return Err("items after the end of the stream".to_string());
        }
        from = cut;
    }
    d.eof(&mut out);
    if !d.is_ended() {
        return Err("EOF did not end the stream".to_string());
    }
    Ok(out)
}

/// A whole watch response: one feed or many pieces must give the same items; exactly one
/// `Ended`, last; no event line longer than the limit or containing a newline.
fn run_response(input: &[u8]) -> Result<(), String> {
    const MAX_LINE: usize = 256;
    let whole = response_items(input, &[], MAX_LINE)?;
    let mut rng = Rng::new(input_hash(input));
    let mut cuts: Vec<usize> = (0..rng.below(8))
        .map(|_| rng.below(input.len() as u64 + 1) as usize)
        .collect();
    cuts.sort_unstable();
    let pieces = response_items(input, &cuts, MAX_LINE)?;
    if whole != pieces {
        return Err(format!(
            "one feed and pieces cut at {cuts:?} disagree:\n{whole:?}\n{pieces:?}"
        ));
    }
    let ends = whole
        .iter()
        .filter(|i| matches!(i, WatchItem::Ended(_)))
        .count();
    if ends != 1 || !matches!(whole.last(), Some(WatchItem::Ended(_))) {
        return Err(format!("{ends} ends, or the end is not last: {whole:?}"));
    }
    for item in &whole {
        if let WatchItem::Event(line) = item {
            if line.len() > MAX_LINE || line.contains(&b'\n') || line.is_empty() {
                return Err(format!("bad event line of {} bytes", line.len()));
            }
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Chunked transfer decoding

fn chunked_corpus() -> Vec<Vec<u8>> {
    let mut corpus = vec![
        b"4;name=val\r\nWiki\r\n5\r\npedia\r\nE\r\n in\r\n\r\nchunks.\r\n0\r\nExpires: never\r\n\r\nNEXT".to_vec(),
        b"1a\r\nabcdefghijklmnopqrstuvwxyz\r\n3 ; x=\"y\"\r\n123\r\n0\r\n\r\n".to_vec(),
        b"fffffffffffffff\r\nabc".to_vec(),
        b"0\n\n".to_vec(),
    ];
    let mut body = Vec::new();
    encode_chunks(SMALL_POD.as_bytes(), 64, &mut body);
    body.extend_from_slice(b"0\r\n\r\n");
    corpus.push(body);
    corpus
}

/// Output, bytes consumed and whether the body ended; or the decoder's error.
type ChunkResult = Result<(Vec<u8>, usize, bool), String>;

/// Feeds `input` in pieces cut at `cuts`; `Err` is a broken property (the decoder stopped
/// consuming without having ended).
fn chunked_decode(input: &[u8], cuts: &[usize]) -> Result<ChunkResult, String> {
    let mut d = ChunkedDecoder::new();
    let mut out = Vec::new();
    let mut from = 0;
    let mut consumed = 0;
    for &cut in cuts.iter().chain(std::iter::once(&input.len())) {
        let cut = cut.clamp(from, input.len());
        let piece = &input[from..cut];
        let n = match d.feed(piece, &mut out) {
            Ok(n) => n,
            Err(e) => return Ok(Err(e.to_string())),
        };
        consumed += n;
        if d.is_done() {
            break;
        }
        if n != piece.len() {
            return Err(format!(
                "consumed {n} of a {}-byte piece without ending",
                piece.len()
            ));
        }
        from = cut;
    }
    Ok(Ok((out, consumed, d.is_done())))
}

/// Chunked decoding: split-invariant, never more output than input, everything consumed unless
/// the body ended (and then exactly up to its end).
fn run_chunked(input: &[u8]) -> Result<(), String> {
    let whole = chunked_decode(input, &[])?;
    let mut rng = Rng::new(input_hash(input));
    let mut cuts: Vec<usize> = if rng.chance(30) {
        (1..input.len()).collect() // byte at a time
    } else {
        (0..rng.below(8))
            .map(|_| rng.below(input.len() as u64 + 1) as usize)
            .collect()
    };
    cuts.sort_unstable();
    let pieces = chunked_decode(input, &cuts)?;
    if whole != pieces {
        return Err(format!("one feed gave {whole:?}, pieces gave {pieces:?}"));
    }
    if let Ok((out, consumed, done)) = &whole {
        if *consumed > input.len() || (!done && *consumed != input.len()) {
            return Err(format!("consumed {consumed} of {} bytes", input.len()));
        }
        if out.len() > input.len() {
            return Err("more output than input".to_string());
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Watch line splitting

fn lines_corpus() -> Vec<Vec<u8>> {
    let mut corpus = vec![
        b"\x10{\"a\":1}\n{\"b\":2}\r\n\n{\"c\":3}\n".to_vec(),
        b"\x0ashort\n0123456789ABCDEFmore of the long line\nnext\n".to_vec(),
        b"\x40{\"x\":1}\n{\"y\"".to_vec(),
    ];
    let mut many = vec![0x20];
    for i in 0..20 {
        many.extend_from_slice(
            format!("{{\"n\":{i},\"pad\":\"{}\"}}\r\n", "x".repeat(i)).as_bytes(),
        );
    }
    corpus.push(many);
    corpus
}

/// The lines pushed out, then what `finish` returned.
type SplitLines = (Vec<Result<Vec<u8>, LineError>>, Option<Vec<u8>>);

fn split_lines(max: usize, input: &[u8], cuts: &[usize]) -> Result<SplitLines, String> {
    let mut s = LineSplitter::new(max);
    let mut out = Vec::new();
    let mut from = 0;
    for &cut in cuts.iter().chain(std::iter::once(&input.len())) {
        let cut = cut.clamp(from, input.len());
        s.push(&input[from..cut], &mut out);
        if s.buffered() > max + 1 {
            return Err(format!(
                "{} bytes buffered over a limit of {max}",
                s.buffered()
            ));
        }
        from = cut;
    }
    let last = s.finish();
    Ok((out, last))
}

/// Line splitting, with a limit taken from the first byte (1..=64): split-invariant, no line
/// over the limit, none empty or containing a newline, never more buffered than the limit.
fn run_lines(input: &[u8]) -> Result<(), String> {
    let Some((&first, stream)) = input.split_first() else {
        return Ok(());
    };
    let max = 1 + usize::from(first % 64);
    let whole = split_lines(max, stream, &[])?;
    let mut rng = Rng::new(input_hash(input));
    let mut cuts: Vec<usize> = if rng.chance(30) {
        (1..stream.len()).collect()
    } else {
        (0..rng.below(8))
            .map(|_| rng.below(stream.len() as u64 + 1) as usize)
            .collect()
    };
    cuts.sort_unstable();
    let pieces = split_lines(max, stream, &cuts)?;
    if whole != pieces {
        return Err(format!(
            "limit {max}: one push gave {whole:?}, pieces cut at {cuts:?} gave {pieces:?}"
        ));
    }
    for line in whole
        .0
        .iter()
        .filter_map(|l| l.as_ref().ok())
        .chain(whole.1.iter())
    {
        if line.len() > max || line.is_empty() || line.contains(&b'\n') {
            return Err(format!("bad line {line:?} (limit {max})"));
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// JSON decoding of objects, lists and watch events

fn object_corpus() -> Vec<Vec<u8>> {
    objects().iter().map(|o| o.as_bytes().to_vec()).collect()
}

fn list_corpus() -> Vec<Vec<u8>> {
    let mut corpus = Vec::new();
    for (i, o) in objects().iter().enumerate() {
        corpus.push(
            format!(
                r#"{{"kind":"List","apiVersion":"v1","metadata":{{"resourceVersion":"{i}","continue":"tok{i}"}},"items":[{o},{o},{{"metadata":{{}}}}]}}"#
            )
            .into_bytes(),
        );
    }
    corpus.push(br#"{"metadata":{"resourceVersion":"7"},"items":[]}"#.to_vec());
    corpus
}

fn event_corpus() -> Vec<Vec<u8>> {
    let mut corpus: Vec<Vec<u8>> = objects()
        .iter()
        .zip(["ADDED", "MODIFIED", "DELETED", "ADDED", "MODIFIED"])
        .map(|(o, kind)| event(kind, o))
        .collect();
    corpus.push(event(
        "BOOKMARK",
        r#"{"kind":"Node","metadata":{"resourceVersion":"12","annotations":{"k8s.io/initial-events-end":"true"}}}"#,
    ));
    corpus.push(event(
        "ERROR",
        r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"too old resource version: 1 (5)","reason":"Expired","code":410}"#,
    ));
    corpus.push(format!(r#"{{"object":{SMALL_NODE},"type":"MODIFIED"}}"#).into_bytes());
    corpus
}

/// Every kind we decode, so one input exercises Node, Pod and Lease projections; the context
/// is pruned afterwards as the informers do after a relist.
fn run_object(input: &[u8]) -> Result<(), String> {
    let mut ctx = DecodeContext::new();
    let _ = decode_object::<Node>(input, &mut ctx);
    let _ = decode_object::<Pod>(input, &mut ctx);
    let _ = decode_object::<Lease>(input, &mut ctx);
    ctx.prune();
    Ok(())
}

fn run_list(input: &[u8]) -> Result<(), String> {
    let mut ctx = DecodeContext::new();
    if let Ok(page) = decode_list::<Node>(input, &mut ctx) {
        if page.continue_token.as_deref() == Some("") {
            return Err("an empty continue token was kept".to_string());
        }
    }
    let _ = decode_list::<Pod>(input, &mut ctx);
    let _ = decode_list::<Lease>(input, &mut ctx);
    ctx.prune();
    Ok(())
}

fn run_event(input: &[u8]) -> Result<(), String> {
    let mut ctx = DecodeContext::new();
    let _ = decode_watch_event::<Node>(input, &mut ctx);
    let _ = decode_watch_event::<Pod>(input, &mut ctx);
    let _ = decode_watch_event::<Lease>(input, &mut ctx);
    ctx.prune();
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// kubeconfig files

/// The YAML loader materialises every event of a document before deserialising it: about 125
/// bytes per input byte for deeply nested flow sequences (`[[[[…`), proportional to the file
/// (bounded to 1 MiB), not to any length field.
pub const KUBECONFIG_ALLOC_PER_BYTE: usize = 160;

/// A scratch directory per thread with the files the seed kubeconfigs refer to (made again
/// after [`remove_scratch`]).
fn kubeconfig_dir() -> PathBuf {
    let dir = scratch_path();
    if !dir.join("token").is_file() {
        std::fs::create_dir_all(&dir).expect("fuzz scratch dir");
        let (ca, cert, key) = pems();
        std::fs::write(dir.join("ca.crt"), ca).expect("ca.crt");
        std::fs::write(dir.join("client.crt"), cert).expect("client.crt");
        std::fs::write(dir.join("client.key"), key).expect("client.key");
        std::fs::write(dir.join("token"), "abc\n").expect("token");
    }
    dir
}

/// This thread's scratch directory: on tmpfs where there is one (rewriting a file on ext4
/// flushes it at every close).
fn scratch_path() -> PathBuf {
    let shm = Path::new("/dev/shm");
    let base = if shm.is_dir() {
        shm.to_path_buf()
    } else {
        std::env::temp_dir()
    };
    base.join(
        format!(
            "node-lifecycled-fuzz-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        )
        .replace(['(', ')'], ""),
    )
}

/// Removes this thread's kubeconfig scratch directory (if it made one).
pub fn remove_scratch() {
    let _ = std::fs::remove_dir_all(scratch_path());
}

/// A CA certificate, a client certificate and its key, PEM (generated once per process).
fn pems() -> (String, String, String) {
    use std::sync::OnceLock;
    static PEMS: OnceLock<(String, String, String)> = OnceLock::new();
    PEMS.get_or_init(|| {
        let ca = rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_string()]).unwrap();
        let client = rcgen::generate_simple_self_signed(vec!["client".to_string()]).unwrap();
        (
            ca.cert.pem(),
            client.cert.pem(),
            client.signing_key.serialize_pem(),
        )
    })
    .clone()
}

fn b64(data: &str) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(data)
}

fn kubeconfig_corpus() -> Vec<Vec<u8>> {
    let (ca, cert, key) = pems();
    let two_contexts = "apiVersion: v1
kind: Config
clusters:
- name: a
  cluster:
    server: http://127.0.0.1:8080
- name: b
  cluster:
    server: http://127.0.0.1:9090/prefix
users:
- name: tok
  user:
    token: abc
contexts:
- name: ca
  context: {cluster: a, user: tok}
- name: cb
  context: {cluster: b}
current-context: cb
";
    let embedded = format!(
        "apiVersion: v1
clusters:
- cluster:
    certificate-authority-data: {}
    server: https://10.0.0.1:6443
  name: kubernetes
contexts:
- context:
    cluster: kubernetes
    user: kubernetes-admin
  name: kubernetes-admin@kubernetes
current-context: kubernetes-admin@kubernetes
kind: Config
preferences: {{}}
users:
- name: kubernetes-admin
  user:
    client-certificate-data: {}
    client-key-data: {}
",
        b64(&ca),
        b64(&cert),
        b64(&key)
    );
    let files = "clusters:
- name: c
  cluster: {server: 'https://[::1]:6443/k8s', certificate-authority: ca.crt}
users:
- name: u
  user: {client-certificate: client.crt, client-key: client.key}
- name: t
  user: {tokenFile: token, token: ignored}
contexts:
- {name: x, context: {cluster: c, user: u}}
- {name: ca, context: {cluster: c, user: t}}
current-context: x
";
    let anchors = "clusters:
- name: &n a
  cluster: &c {server: 'http://localhost:1', insecure-skip-tls-verify: true}
- name: b
  cluster: *c
contexts:
- {name: *n, context: {cluster: *n}}
current-context: a
";
    vec![
        two_contexts.as_bytes().to_vec(),
        embedded.into_bytes(),
        files.as_bytes().to_vec(),
        anchors.as_bytes().to_vec(),
        b"{}".to_vec(),
    ]
}

/// The kubeconfig loader, through its public entry point (a file): with the current context,
/// with a named one and with insecure TLS allowed. Errors are values; nothing else is checked.
fn run_kubeconfig(input: &[u8]) -> Result<(), String> {
    let dir = kubeconfig_dir();
    let path = dir.join("config");
    std::fs::write(&path, input).map_err(|e| format!("scratch write: {e}"))?;
    let _ = Connection::from_kubeconfig(&path, None, false);
    let _ = Connection::from_kubeconfig(&path, Some("ca"), true);
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// The daemon's TOML configuration

/// Deeply nested inline tables cost the TOML parser about 48 bytes per input byte, proportional
/// to the file (bounded to 1 MiB).
pub const CONFIG_ALLOC_PER_BYTE: usize = 64;

fn config_corpus() -> Vec<Vec<u8>> {
    vec![
        include_bytes!("../../conf/config.toml").to_vec(),
        b"node_monitor_grace_period = \"40s\"\nnode_eviction_rate = 0.5\n[api]\nkubeconfig = \"/etc/kubernetes/admin.conf\"\nqps = 50\n".to_vec(),
        b"dry_run = true\nlog_level = \"debug\"\nmetrics_address = \"127.0.0.1:9184\"\n[leader_election]\nenabled = false\n".to_vec(),
        b"unhealthy_zone_threshold = 1.5\n".to_vec(),
        b"[api]\nin_cluster = true\nserver = \"https://x\"\n".to_vec(),
        Vec::new(),
    ]
}

/// The configuration loader: errors are values naming a line, and a valid configuration
/// printed with `to_toml` reads back to itself.
fn run_config(input: &[u8]) -> Result<(), String> {
    let text = String::from_utf8_lossy(input);
    let path = Path::new("fuzz.toml");
    match Config::from_str(&text, path) {
        Ok(config) => {
            let printed = config.to_toml();
            let back = Config::from_str(&printed, Path::new("<printed>"))
                .map_err(|e| format!("printed config does not read back: {e}\n{printed}"))?;
            if back != config {
                return Err(format!(
                    "printed config reads back different:\n{printed}\n{:?}",
                    back.changes_since(&config)
                ));
            }
        }
        Err(e) => {
            let _ = e.to_string();
        }
    }
    Ok(())
}

pub fn all() -> Vec<Target> {
    vec![
        Target {
            name: "http_head",
            corpus: head_corpus,
            dict: HTTP_DICT,
            run: run_head,
            alloc_per_byte: ALLOC_PER_INPUT_BYTE,
        },
        Target {
            name: "response",
            corpus: response_corpus,
            dict: HTTP_DICT,
            run: run_response,
            alloc_per_byte: ALLOC_PER_INPUT_BYTE,
        },
        Target {
            name: "chunked",
            corpus: chunked_corpus,
            dict: CHUNK_DICT,
            run: run_chunked,
            alloc_per_byte: ALLOC_PER_INPUT_BYTE,
        },
        Target {
            name: "lines",
            corpus: lines_corpus,
            dict: CHUNK_DICT,
            run: run_lines,
            alloc_per_byte: ALLOC_PER_INPUT_BYTE,
        },
        Target {
            name: "decode_object",
            corpus: object_corpus,
            dict: JSON_DICT,
            run: run_object,
            alloc_per_byte: ALLOC_PER_INPUT_BYTE,
        },
        Target {
            name: "decode_list",
            corpus: list_corpus,
            dict: JSON_DICT,
            run: run_list,
            alloc_per_byte: ALLOC_PER_INPUT_BYTE,
        },
        Target {
            name: "decode_watch_event",
            corpus: event_corpus,
            dict: JSON_DICT,
            run: run_event,
            alloc_per_byte: ALLOC_PER_INPUT_BYTE,
        },
        Target {
            name: "kubeconfig",
            corpus: kubeconfig_corpus,
            dict: KUBECONFIG_DICT,
            run: run_kubeconfig,
            alloc_per_byte: KUBECONFIG_ALLOC_PER_BYTE,
        },
        Target {
            name: "config",
            corpus: config_corpus,
            dict: TOML_DICT,
            run: run_config,
            alloc_per_byte: CONFIG_ALLOC_PER_BYTE,
        },
        Target {
            name: "controller",
            corpus: super::controller::corpus,
            dict: &[],
            run: super::controller::run_controller,
            alloc_per_byte: ALLOC_PER_INPUT_BYTE,
        },
    ]
}

pub fn by_name(name: &str) -> Option<Target> {
    all().into_iter().find(|t| t.name == name)
}
