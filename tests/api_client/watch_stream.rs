//! Watch streams over real sockets, driven by a real `mio::Poll`: plain HTTP and TLS, clean
//! ends, TLS shutdown without close_notify, a stalled server caught by the idle timeout and
//! resumed from the last resourceVersion, and timers firing on time while 10,000 events stream.
//! The servers are std threads in the test (threads are allowed in tests).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::Arc;
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use mio::{Events, Poll, Token};
use node_lifecycled::kube::decode::{DecodeContext, ListPage, WatchEvent, decode_watch_event};
use node_lifecycled::kube::reflector::{Delta, Reflector, ReflectorConfig, Step};
use node_lifecycled::kube::watch::chunked::encode_chunks;
use node_lifecycled::kube::watch::{Drain, StreamEnd, WatchItem, WatchOptions, WatchStream};
use node_lifecycled::kube::{Connection, Credentials, Scheme};
use node_lifecycled::model::{Lease, Pod};
use node_lifecycled::time::Time;
use node_lifecycled_testkit::runqueue_wait;

const TOKEN: Token = Token(7);
/// No test waits longer than this for anything.
const SAFETY: Duration = Duration::from_secs(20);

/// The loop's clock: wall time at start plus monotonic time since.
struct Clock {
    start: Instant,
    base: Time,
}

impl Clock {
    fn new() -> Clock {
        Clock {
            start: Instant::now(),
            base: Time::from_unix_millis(1_700_000_000_000),
        }
    }
    fn now(&self) -> Time {
        self.base + self.start.elapsed()
    }
}

fn plain(port: u16) -> Connection {
    Connection {
        scheme: Scheme::Http,
        host: "127.0.0.1".into(),
        port,
        base_path: String::new(),
        tls: None,
        credentials: Credentials::None,
    }
}

/// Reads a request head; returns its request line.
fn read_request(stream: &mut dyn Read) -> String {
    let mut reader = BufReader::new(stream);
    let mut first = String::new();
    reader.read_line(&mut first).unwrap();
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap() == 0 || line == "\r\n" {
            break;
        }
    }
    first.trim_end().to_string()
}

const HEAD: &str =
    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n";

fn chunk(line: &str) -> Vec<u8> {
    let mut out = Vec::new();
    encode_chunks(format!("{line}\n").as_bytes(), usize::MAX, &mut out);
    out
}

fn lease_event(kind: &str, name: &str, rv: u64) -> String {
    format!(
        r#"{{"type":"{kind}","object":{{"kind":"Lease","apiVersion":"coordination.k8s.io/v1","metadata":{{"name":"{name}","namespace":"kube-node-lease","resourceVersion":"{rv}"}},"spec":{{"holderIdentity":"{name}","leaseDurationSeconds":40,"renewTime":"2024-03-12T10:02:19.731204Z"}}}}}}"#
    )
}

fn bookmark(rv: u64) -> String {
    format!(
        r#"{{"type":"BOOKMARK","object":{{"kind":"Lease","apiVersion":"coordination.k8s.io/v1","metadata":{{"resourceVersion":"{rv}","creationTimestamp":null}},"spec":{{}}}}}}"#
    )
}

/// Polls one stream until it ends (or `stop` says so); returns everything it produced.
fn drive(poll: &mut Poll, stream: &mut WatchStream, clock: &Clock) -> Vec<WatchItem> {
    let mut events = Events::with_capacity(16);
    let mut out = Vec::new();
    let started = Instant::now();
    while !stream.is_ended() {
        assert!(started.elapsed() < SAFETY, "stream did not end");
        let wait = stream
            .idle_deadline()
            .since(clock.now())
            .min(Duration::from_millis(100));
        poll.poll(&mut events, Some(wait)).unwrap();
        for _ in events.iter() {
            while stream.on_ready(clock.now(), &mut out) == Drain::MoreToRead {}
        }
        stream.check_idle(clock.now(), &mut out);
    }
    out
}

/// Reads one stream on its readiness events until its first watch event (the set-up of the
/// tests that count socket reads afterwards).
fn until_first_event(poll: &mut Poll, stream: &mut WatchStream, clock: &Clock) {
    let mut events = Events::with_capacity(16);
    let mut out = Vec::new();
    let started = Instant::now();
    while event_lines(&out).is_empty() {
        assert!(started.elapsed() < SAFETY, "no first event");
        poll.poll(&mut events, Some(Duration::from_millis(100)))
            .unwrap();
        while stream.on_ready(clock.now(), &mut out) == Drain::MoreToRead {}
    }
}

fn event_lines(items: &[WatchItem]) -> Vec<String> {
    items
        .iter()
        .filter_map(|i| match i {
            WatchItem::Event(l) => Some(String::from_utf8(l.clone()).unwrap()),
            _ => None,
        })
        .collect()
}

#[test]
fn plain_watch_split_into_tiny_writes_delivers_every_event_then_ends_cleanly() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let events: Vec<String> = (0..20)
        .map(|i| lease_event("MODIFIED", &format!("n{i}"), 10 + i))
        .collect();
    let sent = events.clone();
    let server = thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        s.set_nodelay(true).unwrap();
        let request = read_request(&mut s);
        let mut body = HEAD.as_bytes().to_vec();
        for (i, e) in sent.iter().enumerate() {
            body.extend(chunk(e));
            if i == 5 {
                body.extend(chunk("this line is not JSON"));
            }
        }
        body.extend_from_slice(b"0\r\n\r\n");
        // Odd-sized writes so heads, chunk sizes and lines straddle reads.
        for piece in body.chunks(97) {
            s.write_all(piece).unwrap();
            s.flush().unwrap();
        }
        request
    });
    let clock = Clock::new();
    let mut poll = Poll::new().unwrap();
    let mut stream = WatchStream::open(
        &plain(port),
        "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases?watch=true&resourceVersion=9",
        Some("Bearer t0ken"),
        poll.registry(),
        TOKEN,
        clock.now(),
        &WatchOptions::default(),
    )
    .unwrap();
    let out = drive(&mut poll, &mut stream, &clock);
    stream.close(poll.registry());
    let request = server.join().unwrap();
    assert_eq!(
        request,
        "GET /apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases?watch=true&resourceVersion=9 HTTP/1.1"
    );
    assert_eq!(out.last(), Some(&WatchItem::Ended(StreamEnd::Clean)));
    // The corrupt line is skipped by the decoder; every later event still arrives.
    let mut ctx = DecodeContext::new();
    let mut decoded = Vec::new();
    let mut errors = 0;
    for line in event_lines(&out) {
        match decode_watch_event::<Lease>(line.as_bytes(), &mut ctx) {
            Ok(WatchEvent::Modified(l)) => decoded.push(l.name.to_string()),
            Ok(other) => panic!("{other:?}"),
            Err(_) => errors += 1,
        }
    }
    assert_eq!(errors, 1);
    assert_eq!(
        decoded,
        (0..20).map(|i| format!("n{i}")).collect::<Vec<_>>()
    );
}

/// A paused (coalesced) stream read on its timer stops at a short read, which left the socket
/// empty: one `recv` per read, not a second one that would block. A stream on readiness events
/// still reads until `WouldBlock` (mio's edge-triggered rule).
#[test]
fn a_paused_stream_stops_at_a_short_read_and_a_registered_one_reads_until_it_would_block() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let (next_tx, next) = mpsc::channel::<u64>();
    let server = thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        s.set_nodelay(true).unwrap();
        read_request(&mut s);
        s.write_all(HEAD.as_bytes()).unwrap();
        s.write_all(&chunk(&lease_event("ADDED", "a", 1))).unwrap();
        // Each batch in one write: it arrives whole.
        for rv in next {
            let mut batch = Vec::new();
            for i in 0..3 {
                batch.extend(chunk(&lease_event("MODIFIED", "a", rv + i)));
            }
            s.write_all(&batch).unwrap();
        }
    });
    let clock = Clock::new();
    let mut poll = Poll::new().unwrap();
    let mut stream = WatchStream::open(
        &plain(port),
        "/w",
        None,
        poll.registry(),
        TOKEN,
        clock.now(),
        &WatchOptions::default(),
    )
    .unwrap();
    until_first_event(&mut poll, &mut stream, &clock);
    let (mut events, started) = (Events::with_capacity(16), Instant::now());
    // Paused: read on a "timer" until the batch is there.
    stream.pause(poll.registry()).unwrap();
    next_tx.send(10).unwrap();
    let paused_reads = loop {
        assert!(started.elapsed() < SAFETY, "the paused batch never arrived");
        let before = stream.socket_reads();
        let mut batch = Vec::new();
        assert_eq!(stream.on_ready(clock.now(), &mut batch), Drain::Done);
        if !batch.is_empty() {
            assert_eq!(event_lines(&batch).len(), 3);
            break stream.socket_reads() - before;
        }
        std::thread::yield_now();
    };
    assert_eq!(paused_reads, 1, "a short read on a paused stream drains it");
    // Registered again: woken by the next batch, read until the socket would block.
    stream.resume(poll.registry()).unwrap();
    next_tx.send(20).unwrap();
    let registered_reads = loop {
        assert!(
            started.elapsed() < SAFETY,
            "the registered batch never arrived"
        );
        poll.poll(&mut events, Some(Duration::from_millis(100)))
            .unwrap();
        if events.is_empty() {
            continue;
        }
        let before = stream.socket_reads();
        let mut batch = Vec::new();
        assert_eq!(stream.on_ready(clock.now(), &mut batch), Drain::Done);
        if !batch.is_empty() {
            break stream.socket_reads() - before;
        }
    };
    assert!(registered_reads >= 2, "{registered_reads} reads");
    drop(next_tx);
    stream.close(poll.registry());
    server.join().unwrap();
}

#[test]
fn forbidden_watch_is_rejected_with_the_status_message() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let server = thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        read_request(&mut s);
        let body = r#"{"kind":"Status","apiVersion":"v1","status":"Failure","message":"leases.coordination.k8s.io is forbidden","reason":"Forbidden","code":403}"#;
        write!(s, "HTTP/1.1 403 Forbidden\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}", body.len()).unwrap();
        // Keep the connection open: the Content-Length alone must end the response.
        let mut sink = [0u8; 16];
        let _ = s.read(&mut sink);
    });
    let clock = Clock::new();
    let mut poll = Poll::new().unwrap();
    let mut stream = WatchStream::open(
        &plain(port),
        "/x",
        None,
        poll.registry(),
        TOKEN,
        clock.now(),
        &WatchOptions::default(),
    )
    .unwrap();
    let out = drive(&mut poll, &mut stream, &clock);
    assert_eq!(
        out,
        [WatchItem::Ended(StreamEnd::Rejected {
            status: 403,
            message: "leases.coordination.k8s.io is forbidden".into()
        })]
    );
    stream.close(poll.registry());
    server.join().unwrap();
}

#[test]
fn connection_refused_ends_the_stream_as_broken() {
    let port = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let clock = Clock::new();
    let mut poll = Poll::new().unwrap();
    match WatchStream::open(
        &plain(port),
        "/x",
        None,
        poll.registry(),
        TOKEN,
        clock.now(),
        &WatchOptions::default(),
    ) {
        Err(e) => assert!(e.to_string().starts_with("cannot open watch"), "{e}"),
        Ok(mut stream) => {
            let out = drive(&mut poll, &mut stream, &clock);
            assert!(
                matches!(&out[..], [WatchItem::Ended(StreamEnd::Broken(_))]),
                "{out:?}"
            );
        }
    }
}

mod tls {
    use super::*;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

    fn provider() -> Arc<rustls::crypto::CryptoProvider> {
        Arc::new(rustls::crypto::ring::default_provider())
    }

    /// A server config for 127.0.0.1 (offering h2 too, as the API server does) and a client
    /// config trusting it (offering h2 too, as ureq's might: the stream must drop it).
    fn configs() -> (Arc<rustls::ServerConfig>, Arc<rustls::ClientConfig>) {
        let ck = rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_string()]).unwrap();
        let cert: CertificateDer<'static> = ck.cert.der().clone();
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(ck.signing_key.serialize_der()));
        let mut server = rustls::ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(vec![cert.clone()], key)
            .unwrap();
        server.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        let mut roots = rustls::RootCertStore::empty();
        roots.add(cert).unwrap();
        let mut client = rustls::ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
        client.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        (Arc::new(server), Arc::new(client))
    }

    fn https(port: u16, tls: Arc<rustls::ClientConfig>) -> Connection {
        Connection {
            scheme: Scheme::Https,
            tls: Some(tls),
            ..plain(port)
        }
    }

    /// Serves one TLS connection: `events`, then a clean end (with close_notify) or a TCP drop.
    fn serve(
        events: Vec<String>,
        clean: bool,
    ) -> (
        u16,
        Arc<rustls::ClientConfig>,
        thread::JoinHandle<Option<Vec<u8>>>,
    ) {
        let (server_config, client_config) = configs();
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let handle = thread::spawn(move || {
            let (tcp, _) = listener.accept().unwrap();
            let conn = rustls::ServerConnection::new(server_config).unwrap();
            let mut tls = rustls::StreamOwned::new(conn, tcp);
            read_request(&mut tls);
            let alpn = tls.conn.alpn_protocol().map(|p| p.to_vec());
            tls.write_all(HEAD.as_bytes()).unwrap();
            for e in &events {
                tls.write_all(&chunk(e)).unwrap();
            }
            if clean {
                tls.write_all(b"0\r\n\r\n").unwrap();
                tls.conn.send_close_notify();
                tls.flush().unwrap();
            } else {
                tls.flush().unwrap();
                // API server shutdown: the TCP connection goes, no close_notify.
                tls.sock.shutdown(std::net::Shutdown::Both).unwrap();
            }
            alpn
        });
        (port, client_config, handle)
    }

    #[test]
    fn tls_watch_speaks_http1_and_ends_cleanly() {
        // A 200 KB object: one event far larger than a TLS record and a read.
        let big = format!(
            r#"{{"type":"ADDED","object":{{"metadata":{{"name":"big","resourceVersion":"3","annotations":{{"x":"{}"}}}}}}}}"#,
            "y".repeat(200_000)
        );
        let events = vec![
            lease_event("ADDED", "a", 1),
            big,
            lease_event("MODIFIED", "a", 4),
        ];
        let (port, client, server) = serve(events.clone(), true);
        let clock = Clock::new();
        let mut poll = Poll::new().unwrap();
        let mut stream = WatchStream::open(
            &https(port, client),
            "/w",
            None,
            poll.registry(),
            TOKEN,
            clock.now(),
            &WatchOptions::default(),
        )
        .unwrap();
        let out = drive(&mut poll, &mut stream, &clock);
        assert_eq!(event_lines(&out), events);
        assert_eq!(out.last(), Some(&WatchItem::Ended(StreamEnd::Clean)));
        assert_eq!(
            server.join().unwrap(),
            Some(b"http/1.1".to_vec()),
            "never h2"
        );
    }

    /// The next watch goes out on the connection the last one left idle, without a new TCP
    /// connection or TLS handshake; a kept connection the server closed as the request
    /// went out is reported as such (the informer then opens a new one at once).
    #[test]
    fn the_next_watch_rides_the_kept_tls_connection_and_a_closed_one_is_recognised() {
        let (server_config, client_config) = configs();
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let server = thread::spawn(move || {
            let (tcp, _) = listener.accept().unwrap();
            let conn = rustls::ServerConnection::new(server_config).unwrap();
            let mut tls = rustls::StreamOwned::new(conn, tcp);
            let mut requests = Vec::new();
            for rv in [1, 2] {
                requests.push(read_request(&mut tls));
                tls.write_all(HEAD.as_bytes()).unwrap();
                tls.write_all(&chunk(&lease_event("MODIFIED", "a", rv)))
                    .unwrap();
                tls.write_all(b"0\r\n\r\n").unwrap();
                tls.flush().unwrap();
            }
            // The third request: the server closes the idle connection instead of answering.
            requests.push(read_request(&mut tls));
            tls.conn.send_close_notify();
            tls.flush().unwrap();
            drop(tls);
            listener.set_nonblocking(true).unwrap();
            (requests, listener.accept().is_ok())
        });
        let clock = Clock::new();
        let mut poll = Poll::new().unwrap();
        let connection = https(port, client_config);
        let mut stream = WatchStream::open(
            &connection,
            "/w?resourceVersion=0",
            None,
            poll.registry(),
            TOKEN,
            clock.now(),
            &WatchOptions::default(),
        )
        .unwrap();
        let first = drive(&mut poll, &mut stream, &clock);
        assert_eq!(first.last(), Some(&WatchItem::Ended(StreamEnd::Clean)));
        assert!(stream.is_reusable());
        let options = WatchOptions::default();
        stream
            .rewatch(
                &connection,
                "/w?resourceVersion=1",
                None,
                poll.registry(),
                clock.now(),
                &options,
            )
            .unwrap();
        let second = drive(&mut poll, &mut stream, &clock);
        assert_eq!(
            event_lines(&second),
            vec![lease_event("MODIFIED", "a", 2)],
            "the second watch's events, on the same connection"
        );
        assert_eq!(second.last(), Some(&WatchItem::Ended(StreamEnd::Clean)));
        assert!(!stream.lost_kept_connection());
        stream
            .rewatch(
                &connection,
                "/w?resourceVersion=2",
                None,
                poll.registry(),
                clock.now(),
                &options,
            )
            .unwrap();
        let third = drive(&mut poll, &mut stream, &clock);
        assert!(
            matches!(&third[..], [WatchItem::Ended(StreamEnd::Broken(_))]),
            "{third:?}"
        );
        assert!(stream.lost_kept_connection());
        assert!(!stream.is_reusable());
        stream.close(poll.registry());
        let (requests, reconnected) = server.join().unwrap();
        assert_eq!(
            requests,
            [
                "GET /w?resourceVersion=0 HTTP/1.1",
                "GET /w?resourceVersion=1 HTTP/1.1",
                "GET /w?resourceVersion=2 HTTP/1.1"
            ]
        );
        assert!(
            !reconnected,
            "one TCP connection (and handshake) for all three"
        );
    }

    /// A wake-up's worth of small TLS records (the API server writes each event as its own record)
    /// is taken from the socket in one large read and handed to rustls from
    /// memory, not in rustls' own 4 KiB socket reads: 60 renewals of 0.8 KB, about 48 KB with
    /// the TLS framing (before: 12 reads and more, then the one that would block).
    #[test]
    fn a_burst_of_small_tls_records_is_read_from_the_socket_in_one_large_read() {
        let (server_config, client_config) = configs();
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let (go_tx, go) = mpsc::channel::<()>();
        let burst: Vec<String> = (0..60)
            .map(|rv| {
                let pad = "x".repeat(250);
                lease_event("MODIFIED", &format!("node-{rv:03}-{pad}"), rv + 2)
            })
            .collect();
        let sent = burst.clone();
        let server = thread::spawn(move || {
            let (tcp, _) = listener.accept().unwrap();
            let conn = rustls::ServerConnection::new(server_config).unwrap();
            let mut tls = rustls::StreamOwned::new(conn, tcp);
            read_request(&mut tls);
            tls.write_all(HEAD.as_bytes()).unwrap();
            tls.write_all(&chunk(&lease_event("ADDED", "a", 1)))
                .unwrap();
            tls.flush().unwrap();
            go.recv().unwrap();
            for e in &sent {
                // One record per event, as the API server's writes come.
                tls.write_all(&chunk(e)).unwrap();
                tls.flush().unwrap();
            }
            tls.write_all(b"0\r\n\r\n").unwrap();
            tls.conn.send_close_notify();
            tls.flush().unwrap();
            // The FIN follows every byte: once the client sees it, all of them are there.
            tls.sock.shutdown(std::net::Shutdown::Write).unwrap();
            tls.sock
        });
        let clock = Clock::new();
        let mut poll = Poll::new().unwrap();
        let mut stream = WatchStream::open(
            &https(port, client_config),
            "/w",
            None,
            poll.registry(),
            TOKEN,
            clock.now(),
            &WatchOptions::default(),
        )
        .unwrap();
        // The handshake, the head and the first event, read as they come.
        until_first_event(&mut poll, &mut stream, &clock);
        let (mut events, started) = (Events::with_capacity(16), Instant::now());
        let reads_before = stream.socket_reads();
        go_tx.send(()).unwrap();
        // Not read until every byte of the burst has arrived.
        let mut closed = false;
        while !closed {
            assert!(started.elapsed() < SAFETY, "the burst never arrived");
            poll.poll(&mut events, Some(Duration::from_millis(100)))
                .unwrap();
            closed = events.iter().any(|e| e.is_read_closed());
        }
        let mut burst_out = Vec::new();
        assert_eq!(stream.on_ready(clock.now(), &mut burst_out), Drain::Done);
        assert_eq!(event_lines(&burst_out), burst);
        assert_eq!(burst_out.last(), Some(&WatchItem::Ended(StreamEnd::Clean)));
        let reads = stream.socket_reads() - reads_before;
        assert_eq!(reads, 1, "48 KB of records in one socket read");
        drop(server.join().unwrap());
    }

    #[test]
    fn tls_shutdown_without_close_notify_is_a_broken_stream_after_its_events() {
        let events = vec![
            lease_event("ADDED", "a", 1),
            lease_event("MODIFIED", "a", 2),
        ];
        let (port, client, server) = serve(events.clone(), false);
        let clock = Clock::new();
        let mut poll = Poll::new().unwrap();
        let mut stream = WatchStream::open(
            &https(port, client),
            "/w",
            None,
            poll.registry(),
            TOKEN,
            clock.now(),
            &WatchOptions::default(),
        )
        .unwrap();
        let out = drive(&mut poll, &mut stream, &clock);
        server.join().unwrap();
        assert_eq!(event_lines(&out), events);
        assert!(
            matches!(out.last(), Some(WatchItem::Ended(StreamEnd::Broken(_)))),
            "{out:?}"
        );
    }
}

/// The shell in miniature: reflector requests → list answers / watch streams → deltas.
#[test]
fn stalled_stream_is_caught_by_the_idle_timeout_and_resumed_from_the_last_resource_version() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let (requests_tx, requests) = mpsc::channel::<String>();
    let (release_tx, release) = mpsc::channel::<()>();
    let server = thread::spawn(move || {
        // First watch: one event, one bookmark, then silence with the connection open.
        let (mut s, _) = listener.accept().unwrap();
        requests_tx.send(read_request(&mut s)).unwrap();
        s.write_all(HEAD.as_bytes()).unwrap();
        s.write_all(&chunk(&lease_event("ADDED", "b", 5))).unwrap();
        s.write_all(&chunk(&bookmark(7))).unwrap();
        s.flush().unwrap();
        // Second watch: one event and a clean end.
        let (mut s2, _) = listener.accept().unwrap();
        requests_tx.send(read_request(&mut s2)).unwrap();
        s2.write_all(HEAD.as_bytes()).unwrap();
        s2.write_all(&chunk(&lease_event("MODIFIED", "a", 8)))
            .unwrap();
        s2.write_all(b"0\r\n\r\n").unwrap();
        s2.flush().unwrap();
        let _ = release.recv_timeout(SAFETY);
        drop(s);
    });

    let clock = Clock::new();
    let mut poll = Poll::new().unwrap();
    let config = ReflectorConfig {
        idle_timeout: Duration::from_millis(300),
        ..ReflectorConfig::default()
    };
    let mut reflector: Reflector<Lease> = Reflector::new(config, 42);
    let mut ctx = DecodeContext::new();
    let mut deltas = Vec::new();
    let mut stream: Option<WatchStream> = None;
    let mut ended_at = Vec::new();
    let mut last_byte_at = None;
    let mut events = Events::with_capacity(16);
    let started = Instant::now();
    let mut watches = 0;
    while watches < 2 || stream.is_some() {
        assert!(
            started.elapsed() < SAFETY,
            "no progress: {:?}",
            reflector.stats()
        );
        let now = clock.now();
        match reflector.poll(now) {
            Step::List(req) => {
                assert_eq!(req.continue_token, None);
                // The unary client's part, answered inline here.
                let page = ListPage {
                    items: vec![Lease {
                        name: "a".into(),
                        renew_time: None,
                        duration_seconds: None,
                        resource_version: "2".into(),
                    }],
                    resource_version: "3".into(),
                    continue_token: None,
                    skipped: Vec::new(),
                };
                reflector.list_page_received(now, page, &mut deltas);
                continue;
            }
            Step::Watch(req) => {
                watches += 1;
                let options = WatchOptions {
                    idle_timeout: req.idle_timeout,
                    ..WatchOptions::default()
                };
                let s = WatchStream::open(
                    &plain(port),
                    &req.path_and_query::<Lease>(),
                    None,
                    poll.registry(),
                    TOKEN,
                    now,
                    &options,
                )
                .unwrap();
                reflector.watch_opened(now);
                stream = Some(s);
            }
            Step::Wait { .. } | Step::InFlight => {}
        }
        let timeout = match (&stream, reflector.next_wakeup()) {
            (Some(s), _) => s.idle_deadline().since(clock.now()),
            (None, Some(at)) => at.since(clock.now()),
            (None, None) => Duration::from_millis(10),
        };
        poll.poll(&mut events, Some(timeout)).unwrap();
        let Some(s) = stream.as_mut() else { continue };
        let mut out = Vec::new();
        if !events.is_empty() {
            let before = s.bytes_received();
            while s.on_ready(clock.now(), &mut out) == Drain::MoreToRead {}
            if s.bytes_received() > before {
                last_byte_at = Some(Instant::now());
            }
        }
        s.check_idle(clock.now(), &mut out);
        for item in out {
            let now = clock.now();
            match item {
                WatchItem::Event(line) => match decode_watch_event::<Lease>(&line, &mut ctx) {
                    Ok(ev) => {
                        reflector.watch_event(now, ev, &mut deltas);
                    }
                    Err(e) => reflector.event_skipped(now, e.to_string()),
                },
                WatchItem::Skipped(reason) => reflector.event_skipped(now, reason),
                WatchItem::Frame(_) => panic!("the simulator answers JSON"),
                WatchItem::Ended(end) => {
                    ended_at.push((end.clone(), last_byte_at.map(|t| t.elapsed())));
                    reflector.watch_ended(now, &end);
                    stream.take().unwrap().close(poll.registry());
                    break;
                }
            }
        }
    }
    release_tx.send(()).unwrap();
    server.join().unwrap();

    let first = requests.recv().unwrap();
    let second = requests.recv().unwrap();
    assert!(first.contains("&resourceVersion=3"), "{first}");
    assert!(
        second.contains("&resourceVersion=7"),
        "resumed from the bookmark: {second}"
    );
    let (end, silence) = &ended_at[0];
    assert_eq!(end, &StreamEnd::IdleTimeout);
    let silence = silence.unwrap();
    assert!(
        silence >= Duration::from_millis(250) && silence < Duration::from_millis(1000),
        "{silence:?}"
    );
    assert_eq!(ended_at[1].0, StreamEnd::Clean);
    let stats = reflector.stats();
    assert_eq!((stats.relists, stats.reconnects), (0, 1));
    let summary: Vec<String> = deltas
        .iter()
        .map(|d| match d {
            Delta::Begin => "begin".into(),
            Delta::Upsert(l) => format!("+{}@{}", l.name, l.resource_version),
            Delta::Delete(k) => format!("-{k}"),
            Delta::Synced => "synced".into(),
        })
        .collect();
    assert_eq!(summary, ["begin", "+a@2", "synced", "+b@5", "+a@8"]);
}

/// A ~1 KB pod as a watch event.
fn pod_event(i: usize) -> String {
    format!(
        r#"{{"type":"MODIFIED","object":{{"kind":"Pod","apiVersion":"v1","metadata":{{"name":"web-{i}","namespace":"shop","uid":"9d1c6a2e-0000-4000-8000-{i:012}","resourceVersion":"{}","creationTimestamp":"2024-03-11T09:14:27Z","labels":{{"app":"web","pod-template-hash":"7d9f8b6c5d"}},"ownerReferences":[{{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"web-7d9f8b6c5d","uid":"a3c2e1f0-1b2c-4d5e-8f90-123456789abc","controller":true,"blockOwnerDeletion":true}}]}},"spec":{{"nodeName":"node-{}","containers":[{{"name":"web","image":"registry.example.com/web:1.2.3","resources":{{"requests":{{"cpu":"100m","memory":"128Mi"}}}}}}],"tolerations":[{{"key":"node.kubernetes.io/not-ready","operator":"Exists","effect":"NoExecute","tolerationSeconds":300}},{{"key":"node.kubernetes.io/unreachable","operator":"Exists","effect":"NoExecute","tolerationSeconds":300}}]}},"status":{{"phase":"Running","conditions":[{{"type":"Ready","status":"True","lastProbeTime":null,"lastTransitionTime":"2024-03-11T09:15:41Z"}}],"podIP":"10.1.2.3","startTime":"2024-03-11T09:14:27Z"}}}}}}"#,
        1000 + i,
        i % 100
    )
}

#[test]
fn timers_fire_on_time_while_a_watch_delivers_ten_thousand_events() {
    const EVENTS: usize = 10_000;
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let server = thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        read_request(&mut s);
        let mut body = HEAD.as_bytes().to_vec();
        for i in 0..EVENTS {
            body.extend(chunk(&pod_event(i)));
        }
        body.extend_from_slice(b"0\r\n\r\n");
        // As fast as the client reads.
        s.write_all(&body).unwrap();
        body.len()
    });
    let clock = Clock::new();
    let mut poll = Poll::new().unwrap();
    let mut stream = WatchStream::open(
        &plain(port),
        "/api/v1/pods?watch=true",
        None,
        poll.registry(),
        TOKEN,
        clock.now(),
        &WatchOptions::default(),
    )
    .unwrap();
    let mut ctx = DecodeContext::new();
    let mut decoded = 0usize;
    let period = Duration::from_millis(10);
    let mut next_timer = Instant::now() + period;
    let mut lateness: Vec<Duration> = Vec::new();
    let mut events = Events::with_capacity(16);
    let mut more = false;
    let started = Instant::now();
    // Time this thread spent ready but without a CPU (a busy machine) is not the loop's doing:
    // a timer's lateness counts only what the last turn of the loop itself took.
    let mut waited_at_turn = runqueue_wait();
    while !stream.is_ended() {
        assert!(started.elapsed() < SAFETY * 3, "stream did not finish");
        // Timers first, as the loop does: the poll timeout is the next deadline.
        let now = Instant::now();
        let waited = runqueue_wait();
        let preempted = waited.saturating_sub(waited_at_turn);
        waited_at_turn = waited;
        if now >= next_timer {
            lateness.push((now - next_timer).saturating_sub(preempted));
            next_timer += period;
            while next_timer <= now {
                next_timer += period;
            }
        }
        let timeout = if more {
            Duration::ZERO
        } else {
            next_timer.saturating_duration_since(Instant::now())
        };
        poll.poll(&mut events, Some(timeout)).unwrap();
        if events.is_empty() && !more {
            continue;
        }
        let mut out = Vec::new();
        more = stream.on_ready(clock.now(), &mut out) == Drain::MoreToRead;
        for item in out {
            if let WatchItem::Event(line) = item {
                if let Ok(WatchEvent::Modified(_pod)) = decode_watch_event::<Pod>(&line, &mut ctx) {
                    decoded += 1;
                }
            }
        }
    }
    let elapsed = started.elapsed();
    let bytes = server.join().unwrap();
    stream.close(poll.registry());
    let max = lateness.iter().max().copied().unwrap_or_default();
    let mut sorted = lateness.clone();
    sorted.sort();
    let p99 = sorted
        .get(sorted.len() * 99 / 100)
        .copied()
        .unwrap_or_default();
    println!(
        "{EVENTS} pod events, {bytes} bytes in {elapsed:?}; {} timer firings, lateness max {max:?}, p99 {p99:?}",
        lateness.len()
    );
    assert_eq!(decoded, EVENTS);
    assert!(
        lateness.len() >= 3,
        "the stream took long enough for timers to fire"
    );
    // A reader that drained the whole stream in one go would hold a timer for the whole
    // stream (about a second, debug build). One bounded read turn takes ~20 ms on an idle
    // machine; 67 ms was seen at load average 20 beside release builds (CPU waits already
    // subtracted, cache and frequency effects are not), so the bound is generous but still
    // far below starvation.
    let bound = Duration::from_millis(150).min(elapsed / 4);
    assert!(
        max < bound,
        "a timer fired {max:?} late (bound {bound:?}, stream {elapsed:?})"
    );
}
