//! A tiny HTTP/1.1 (optionally HTTPS, optionally requiring client certificates) server with
//! canned answers, and a throwaway PKI, for the client tests. Threads and locks are fine here:
//! this is test code, not the daemon.
#![allow(dead_code)] // shared by several test groups: each uses its own part

use std::cell::Cell;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use node_lifecycled::time::Time;
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

pub const RSA_PKCS8: &str = include_str!("../fixtures/rsa-pkcs8.key");
pub const RSA_PKCS1: &str = include_str!("../fixtures/rsa-pkcs1.key");
pub const EC_SEC1: &str = include_str!("../fixtures/ec-sec1.key");
pub const EC_PKCS8: &str = include_str!("../fixtures/ec-pkcs8.key");

/// A certificate authority that issues server and client certificates.
pub struct TestCa {
    pub cert_pem: String,
    issuer: Issuer<'static, KeyPair>,
}

/// A certificate and the PEM of its private key.
pub struct Issued {
    pub cert_pem: String,
    pub key_pem: String,
}

impl TestCa {
    pub fn new(name: &str) -> TestCa {
        let key = KeyPair::generate().expect("CA key");
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
        params.distinguished_name.push(DnType::CommonName, name);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let cert = params.self_signed(&key).expect("CA certificate");
        TestCa {
            cert_pem: cert.pem(),
            issuer: Issuer::new(params, key),
        }
    }

    /// A server certificate for these SANs (IP literals become IP SANs), with a fresh EC key.
    pub fn server(&self, sans: &[&str]) -> Issued {
        let key = KeyPair::generate().expect("server key");
        let key_pem = key.serialize_pem();
        self.issue(
            sans,
            "kube-apiserver",
            ExtendedKeyUsagePurpose::ServerAuth,
            &key,
            key_pem,
        )
    }

    /// A client certificate for `key_pkcs8` (given as PKCS#8, for rcgen); `key_pem` is the
    /// form written into the kubeconfig (PKCS#1, SEC1, PKCS#8: the same key).
    pub fn client(&self, common_name: &str, key_pkcs8: &str, key_pem: &str) -> Issued {
        let key = KeyPair::from_pem(key_pkcs8).expect("client key");
        self.issue(
            &[],
            common_name,
            ExtendedKeyUsagePurpose::ClientAuth,
            &key,
            key_pem.to_string(),
        )
    }

    fn issue(
        &self,
        sans: &[&str],
        common_name: &str,
        usage: ExtendedKeyUsagePurpose,
        key: &KeyPair,
        key_pem: String,
    ) -> Issued {
        let sans: Vec<String> = sans.iter().map(|s| s.to_string()).collect();
        let mut params = CertificateParams::new(sans).expect("params");
        params
            .distinguished_name
            .push(DnType::CommonName, common_name);
        params.extended_key_usages = vec![usage];
        let cert = params.signed_by(key, &self.issuer).expect("sign");
        Issued {
            cert_pem: cert.pem(),
            key_pem,
        }
    }

    pub fn cert_der(&self) -> CertificateDer<'static> {
        CertificateDer::from_pem_slice(self.cert_pem.as_bytes()).expect("CA der")
    }
}

/// What the server saw of one request.
#[derive(Clone, Debug)]
pub struct SeenRequest {
    pub method: String,
    pub path: String,
    /// Header names lower-cased.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    pub connection: usize,
    pub client_certificate: bool,
}

impl SeenRequest {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == &name.to_ascii_lowercase())
            .map(|(_, v)| v.as_str())
    }

    /// The decoded query parameters (`+` is not special: the client percent-encodes it).
    pub fn query(&self, key: &str) -> Option<String> {
        let (_, query) = self.path.split_once('?')?;
        query.split('&').find_map(|pair| {
            let (k, v) = pair.split_once('=')?;
            (k == key).then(|| percent_decode(v))
        })
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).expect("request body is JSON")
    }
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap();
            out.push(u8::from_str_radix(hex, 16).unwrap());
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).unwrap()
}

/// A canned answer.
#[derive(Clone, Debug)]
pub struct Reply {
    pub code: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// Wait this long before answering (timeout tests).
    pub delay: Duration,
}

impl Reply {
    pub fn json(code: u16, body: serde_json::Value) -> Reply {
        Reply {
            code,
            headers: vec![],
            body: body.to_string().into_bytes(),
            delay: Duration::ZERO,
        }
    }

    /// A `metav1.Status` failure as the API server writes it.
    pub fn status(code: u16, reason: &str, message: &str) -> Reply {
        Reply::json(
            code,
            serde_json::json!({
                "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                "message": message, "reason": reason, "code": code
            }),
        )
    }

    pub fn with_header(mut self, name: &str, value: &str) -> Reply {
        self.headers.push((name.to_string(), value.to_string()));
        self
    }

    pub fn with_delay(mut self, delay: Duration) -> Reply {
        self.delay = delay;
        self
    }
}

pub type Handler = Arc<dyn Fn(&SeenRequest) -> Reply + Send + Sync>;

/// TLS settings of the test server.
pub struct ServerTls {
    pub cert_pem: String,
    pub key_pem: String,
    /// Require a client certificate issued by this CA.
    pub client_ca: Option<CertificateDer<'static>>,
}

pub struct TestServer {
    pub port: u16,
    seen: Arc<Mutex<Vec<SeenRequest>>>,
    connections: Arc<AtomicUsize>,
}

impl TestServer {
    pub fn start(tls: Option<ServerTls>, handler: Handler) -> TestServer {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().unwrap().port();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let connections = Arc::new(AtomicUsize::new(0));
        let tls_config = tls.map(server_config);
        {
            let seen = seen.clone();
            let connections = connections.clone();
            std::thread::spawn(move || {
                for stream in listener.incoming() {
                    let Ok(stream) = stream else { continue };
                    let n = connections.fetch_add(1, Ordering::SeqCst);
                    let (seen, handler, tls_config) =
                        (seen.clone(), handler.clone(), tls_config.clone());
                    std::thread::spawn(move || serve(stream, n, tls_config, handler, seen));
                }
            });
        }
        TestServer {
            port,
            seen,
            connections,
        }
    }

    pub fn requests(&self) -> Vec<SeenRequest> {
        self.seen.lock().unwrap().clone()
    }

    /// TCP connections accepted so far.
    pub fn connections(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }

    pub fn https_url(&self) -> String {
        format!("https://127.0.0.1:{}", self.port)
    }

    pub fn http_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }
}

fn server_config(tls: ServerTls) -> Arc<rustls::ServerConfig> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let chain: Vec<CertificateDer<'static>> =
        CertificateDer::pem_slice_iter(tls.cert_pem.as_bytes())
            .collect::<Result<_, _>>()
            .unwrap();
    let key = PrivateKeyDer::from_pem_slice(tls.key_pem.as_bytes()).unwrap();
    let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .unwrap();
    let builder = match tls.client_ca {
        None => builder.with_no_client_auth(),
        Some(ca) => {
            let mut roots = rustls::RootCertStore::empty();
            roots.add(ca).unwrap();
            let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
                Arc::new(roots),
                provider,
            )
            .build()
            .unwrap();
            builder.with_client_cert_verifier(verifier)
        }
    };
    Arc::new(builder.with_single_cert(chain, key).unwrap())
}

trait Stream: Read + Write {
    fn client_certificate(&self) -> bool;
}

impl Stream for TcpStream {
    fn client_certificate(&self) -> bool {
        false
    }
}

impl Stream for rustls::StreamOwned<rustls::ServerConnection, TcpStream> {
    fn client_certificate(&self) -> bool {
        self.conn.peer_certificates().is_some_and(|c| !c.is_empty())
    }
}

fn serve(
    tcp: TcpStream,
    connection: usize,
    tls: Option<Arc<rustls::ServerConfig>>,
    handler: Handler,
    seen: Arc<Mutex<Vec<SeenRequest>>>,
) {
    let _ = tcp.set_nodelay(true);
    let mut stream: Box<dyn Stream> = match tls {
        None => Box::new(tcp),
        Some(config) => {
            let conn = rustls::ServerConnection::new(config).unwrap();
            Box::new(rustls::StreamOwned::new(conn, tcp))
        }
    };
    let mut buffer = Vec::new();
    loop {
        let Some(request) = read_request(&mut *stream, &mut buffer, connection) else {
            return;
        };
        seen.lock().unwrap().push(request.clone());
        let reply = handler(&request);
        if !reply.delay.is_zero() {
            std::thread::sleep(reply.delay);
        }
        let mut head = format!(
            "HTTP/1.1 {} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\n",
            reply.code,
            reply.body.len()
        );
        for (name, value) in &reply.headers {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        head.push_str("\r\n");
        // One write: head and body in separate segments meet Nagle and delayed ACK (40 ms).
        let mut bytes = head.into_bytes();
        bytes.extend_from_slice(&reply.body);
        if stream.write_all(&bytes).is_err() || stream.flush().is_err() {
            return;
        }
    }
}

fn read_request(
    stream: &mut dyn Stream,
    buffer: &mut Vec<u8>,
    connection: usize,
) -> Option<SeenRequest> {
    let mut chunk = [0u8; 16 * 1024];
    loop {
        let mut headers = [httparse::EMPTY_HEADER; 64];
        let mut parsed = httparse::Request::new(&mut headers);
        if let Ok(httparse::Status::Complete(head_len)) = parsed.parse(buffer) {
            let headers: Vec<(String, String)> = parsed
                .headers
                .iter()
                .map(|h| {
                    (
                        h.name.to_ascii_lowercase(),
                        String::from_utf8_lossy(h.value).into_owned(),
                    )
                })
                .collect();
            let length: usize = headers
                .iter()
                .find(|(n, _)| n == "content-length")
                .and_then(|(_, v)| v.parse().ok())
                .unwrap_or(0);
            let method = parsed.method.unwrap_or("").to_string();
            let path = parsed.path.unwrap_or("").to_string();
            while buffer.len() < head_len + length {
                let n = stream.read(&mut chunk).ok()?;
                if n == 0 {
                    return None;
                }
                buffer.extend_from_slice(&chunk[..n]);
            }
            let body = buffer[head_len..head_len + length].to_vec();
            buffer.drain(..head_len + length);
            return Some(SeenRequest {
                method,
                path,
                headers,
                body,
                connection,
                client_certificate: stream.client_certificate(),
            });
        }
        let n = stream.read(&mut chunk).ok()?;
        if n == 0 {
            return None;
        }
        buffer.extend_from_slice(&chunk[..n]);
    }
}

/// A virtual controller clock the test moves by hand.
#[derive(Clone)]
pub struct VirtualClock(Rc<Cell<Time>>);

impl VirtualClock {
    pub fn new() -> VirtualClock {
        VirtualClock(Rc::new(Cell::new(Time::from_unix_millis(
            1_700_000_000_000,
        ))))
    }

    pub fn now(&self) -> Time {
        self.0.get()
    }

    pub fn set(&self, t: Time) {
        self.0.set(t);
    }

    pub fn advance(&self, d: Duration) {
        self.0.set(self.0.get() + d);
    }

    pub fn boxed(&self) -> Box<dyn Fn() -> Time> {
        let cell = self.0.clone();
        Box::new(move || cell.get())
    }
}

/// A scratch directory, removed on drop.
pub struct TempDir(PathBuf);

impl TempDir {
    pub fn new(name: &str) -> TempDir {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let path = std::env::temp_dir().join(format!(
            "node-lifecycled-{name}-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).unwrap();
        TempDir(path)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }

    pub fn write(&self, name: &str, contents: impl AsRef<[u8]>) -> PathBuf {
        let path = self.0.join(name);
        std::fs::write(&path, contents).unwrap();
        path
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

pub fn b64(s: &str) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(s)
}
