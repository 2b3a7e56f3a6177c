//! The parsers that read bytes from outside the process, fuzzed: a short fixed-seed pass of
//! every target (`examples/fuzz.rs` runs them for as long as asked; FUZZING.md), crafted inputs
//! whose length fields announce far more than is sent, and the findings of long runs kept as
//! regression tests.

use std::path::Path;
use std::time::Duration;

use crate::fuzz_support::engine::{self, Budget, CountingAlloc, take_largest_allocation};
use crate::fuzz_support::targets;
use node_lifecycled::kube::watch::chunked::{ChunkedDecoder, ChunkedError};
use node_lifecycled::kube::watch::http_head::{BodyFraming, HeadParser};
use node_lifecycled::kube::watch::lines::{DEFAULT_MAX_LINE, LineError, LineSplitter};
use node_lifecycled::kube::watch::{ResponseDecoder, StreamEnd, WatchItem};

#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc::refusing_above(engine::ALLOC_REFUSE);

/// Inputs per target in the CI pass (debug build): a few seconds for all of them together.
const CI_EXECUTIONS: u64 = 1500;
const CI_SEED: u64 = 20_261_123;

fn ci_pass(name: &str) {
    ci_pass_of(name, CI_EXECUTIONS);
}

fn ci_pass_of(name: &str, executions: u64) {
    let target = targets::by_name(name).expect("target");
    let stats = engine::fuzz(
        &target,
        CI_SEED,
        0,
        Budget {
            max_executions: executions,
            max_time: Duration::from_secs(60),
            max_findings: 5,
        },
        None,
        &mut |_| {},
        &mut |_, _| {},
    );
    targets::remove_scratch();
    let report: Vec<String> = stats
        .findings
        .iter()
        .map(|f| {
            format!(
                "input {}: {}\n  {:?}",
                f.index,
                f.violation,
                String::from_utf8_lossy(&f.input[..f.input.len().min(2000)])
            )
        })
        .collect();
    assert!(
        report.is_empty(),
        "{name}, seed {CI_SEED}: {} findings (replay one with `cargo run --example fuzz -- \
         --target {name} --seed {CI_SEED}`):\n{}",
        report.len(),
        report.join("\n")
    );
    assert_eq!(stats.executions, executions, "{name}: ran short");
}

#[test]
fn fuzz_http_head() {
    ci_pass("http_head");
}

#[test]
fn fuzz_response() {
    ci_pass("response");
}

#[test]
fn fuzz_chunked() {
    ci_pass("chunked");
}

#[test]
fn fuzz_lines() {
    ci_pass("lines");
}

#[test]
fn fuzz_decode_object() {
    ci_pass("decode_object");
}

#[test]
fn fuzz_decode_list() {
    ci_pass("decode_list");
}

#[test]
fn fuzz_decode_watch_event() {
    ci_pass("decode_watch_event");
}

#[test]
fn fuzz_kubeconfig() {
    ci_pass("kubeconfig");
}

#[test]
fn fuzz_config() {
    ci_pass("config");
}

/// Each controller script runs a whole cluster's story: fewer of them.
#[test]
fn fuzz_controller() {
    ci_pass_of("controller", 300);
}

#[test]
fn controller_seed_scripts_reach_verdicts_taints_and_evictions() {
    // The invariants are about Unknown verdicts, NoExecute taints and evictions: the seeds
    // must make the controller produce each, or the fuzzer checks nothing.
    let mut total = crate::fuzz_support::controller::Coverage::default();
    for script in crate::fuzz_support::controller::corpus() {
        let c = crate::fuzz_support::controller::run_controller_counting(&script).unwrap();
        total.unknown_verdicts += c.unknown_verdicts;
        total.no_execute_taints += c.no_execute_taints;
        total.evictions += c.evictions;
        total.lease_reads += c.lease_reads;
    }
    assert!(
        total.unknown_verdicts > 0
            && total.no_execute_taints > 0
            && total.evictions > 0
            && total.lease_reads > 0,
        "{total:?}"
    );
}

#[test]
fn every_target_has_a_ci_pass() {
    let names: Vec<&str> = targets::all().iter().map(|t| t.name).collect();
    let source = include_str!("fuzz_parsers.rs");
    for name in names {
        assert!(
            source.contains(&format!("ci_pass(\"{name}\")"))
                || source.contains(&format!("ci_pass_of(\"{name}\"")),
            "target {name} has no CI pass"
        );
    }
}

#[test]
fn the_engine_reports_panics_broken_properties_and_huge_allocations() {
    fn panics(input: &[u8]) -> Result<(), String> {
        if input.first() == Some(&b'!') {
            panic!("boom");
        }
        Ok(())
    }
    fn allocates(input: &[u8]) -> Result<(), String> {
        let v: Vec<u8> = Vec::with_capacity(64 << 20);
        std::hint::black_box(&v);
        let _ = input;
        Ok(())
    }
    assert_eq!(engine::execute(panics, b"ok"), Ok(()));
    match engine::execute(panics, b"!") {
        Err(engine::Violation::Panic(m)) => assert!(m.starts_with("boom at "), "{m}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        engine::execute(|_| Err("nope".into()), b""),
        Err(engine::Violation::Property("nope".into()))
    );
    assert_eq!(
        engine::execute(allocates, b"x"),
        Err(engine::Violation::Allocation {
            bytes: 64 << 20,
            input: 1
        })
    );
}

#[test]
fn generation_is_deterministic_per_seed_and_index() {
    let corpus = vec![b"HTTP/1.1 200 OK\r\n\r\n".to_vec(), b"0\r\n\r\n".to_vec()];
    for i in 0..200 {
        assert_eq!(
            engine::generate(&corpus, &[b"x"], 7, i),
            engine::generate(&corpus, &[b"x"], 7, i)
        );
    }
    let a: Vec<_> = (0..50)
        .map(|i| engine::generate(&corpus, &[], 1, i))
        .collect();
    let b: Vec<_> = (0..50)
        .map(|i| engine::generate(&corpus, &[], 2, i))
        .collect();
    assert_ne!(a, b, "seeds must matter");
}

// ---------------------------------------------------------------------------------------------
// Length fields that announce more than is sent: nothing is allocated for what never arrives.

/// Peak single allocation while `f` runs.
fn largest_allocation<T>(f: impl FnOnce() -> T) -> (T, usize) {
    take_largest_allocation();
    let value = f();
    (value, take_largest_allocation())
}

#[test]
fn a_chunk_size_of_2_pow_60_allocates_only_what_arrives() {
    // 15 hex digits is the largest size accepted: 2^60 - 1.
    let mut d = ChunkedDecoder::new();
    let mut out = Vec::new();
    let (n, largest) = largest_allocation(|| {
        let mut n = d.feed(b"fffffffffffffff\r\n", &mut out).unwrap();
        for _ in 0..64 {
            n += d.feed(&[b'x'; 1024], &mut out).unwrap();
        }
        n
    });
    assert_eq!(n, 17 + 64 * 1024);
    assert_eq!(out.len(), 64 * 1024, "only the bytes received are output");
    assert!(!d.is_done());
    assert!(largest < 1 << 20, "allocated {largest} bytes at once");
    // 2^60 itself (16 digits) and beyond is refused before any data.
    for size in [&b"1000000000000000\r\n"[..], b"ffffffffffffffffffff\r\n"] {
        assert_eq!(
            ChunkedDecoder::new().feed(size, &mut Vec::new()),
            Err(ChunkedError::SizeTooLarge)
        );
    }
}

#[test]
fn a_content_length_of_2_pow_64_minus_1_allocates_only_what_arrives() {
    for status in [200, 500] {
        let head = format!("HTTP/1.1 {status} X\r\nContent-Length: 18446744073709551615\r\n\r\n");
        let (parsed, _) = HeadParser::new().feed(head.as_bytes()).unwrap().unwrap();
        assert_eq!(parsed.framing, BodyFraming::Length(u64::MAX));
        let mut d = ResponseDecoder::new(DEFAULT_MAX_LINE);
        let mut out = Vec::new();
        let ((), largest) = largest_allocation(|| {
            d.feed(head.as_bytes(), &mut out);
            for _ in 0..256 {
                d.feed(&[b'x'; 4096], &mut out);
            }
        });
        assert!(out.is_empty(), "{status}: {out:?}");
        // The 200's line buffer holds the 1 MiB received (plus growth); the error body is capped.
        assert!(
            largest <= 4 << 20,
            "{status}: allocated {largest} bytes at once"
        );
        d.eof(&mut out);
        match &out[..] {
            [WatchItem::Ended(StreamEnd::Broken(_))] => {}
            other => panic!("{status}: {other:?}"),
        }
    }
}

#[test]
fn a_content_length_beyond_u64_is_an_error() {
    let head = b"HTTP/1.1 200 OK\r\nContent-Length: 18446744073709551616\r\n\r\n";
    assert!(HeadParser::new().feed(head).is_err());
}

#[test]
fn a_line_longer_than_the_limit_is_never_buffered_whole() {
    // 64 MiB of one line, fed 64 KiB at a time, against the daemon's 16 MiB limit: reported
    // once, never more than the limit (plus one read) held, and the next line survives. A 1 GB
    // line behaves the same; it only takes longer to send.
    let mut s = LineSplitter::default();
    let mut out = Vec::new();
    let piece = vec![b'a'; 64 * 1024];
    let mut peak_buffered = 0;
    let ((), largest) = largest_allocation(|| {
        for _ in 0..1024 {
            s.push(&piece, &mut out);
            peak_buffered = peak_buffered.max(s.buffered());
        }
        s.push(b"\n{\"next\":1}\n", &mut out);
    });
    assert_eq!(
        out,
        [
            Err(LineError::TooLong {
                limit: DEFAULT_MAX_LINE
            }),
            Ok(b"{\"next\":1}".to_vec())
        ]
    );
    assert!(peak_buffered <= DEFAULT_MAX_LINE, "{peak_buffered}");
    assert!(
        largest <= 2 * (DEFAULT_MAX_LINE + piece.len()),
        "allocated {largest} bytes at once"
    );
}

#[test]
fn an_endless_error_body_is_capped() {
    let mut d = ResponseDecoder::new(DEFAULT_MAX_LINE);
    let mut out = Vec::new();
    let ((), largest) = largest_allocation(|| {
        d.feed(b"HTTP/1.1 500 Internal Server Error\r\n\r\n", &mut out);
        for _ in 0..1024 {
            d.feed(&[b'e'; 16 * 1024], &mut out);
        }
        d.eof(&mut out);
    });
    match &out[..] {
        [
            WatchItem::Ended(StreamEnd::Rejected {
                status: 500,
                message,
            }),
        ] => {
            assert!(message.len() <= 64 * 1024, "{}", message.len());
        }
        other => panic!("{other:?}"),
    }
    assert!(largest <= 1 << 20, "allocated {largest} bytes at once");
}

// ---------------------------------------------------------------------------------------------
// Regression tests from the long runs (FUZZING.md).

/// Replays a saved finding through its target (and removes the kubeconfig target's scratch
/// directory of this thread, if it made one).
fn replay(target: &str, input: &[u8]) -> Result<(), engine::Violation> {
    let result = targets::by_name(target).expect("target").execute(input);
    targets::remove_scratch();
    result
}

/// Nesting far beyond any real document is an error (a value), not a stack overflow (which
/// would abort the daemon), and costs memory in proportion to the input only.
#[test]
fn deep_nesting_is_an_error_not_a_stack_overflow() {
    let deep_json = [b"[".repeat(10_000), b"{\"metadata\":".repeat(10_000)];
    for input in &deep_json {
        for target in ["decode_object", "decode_list", "decode_watch_event"] {
            assert_eq!(replay(target, input), Ok(()), "{target}");
        }
    }
    let deep_yaml = b"[".repeat(10_000);
    assert_eq!(replay("kubeconfig", &deep_yaml), Ok(()));
    let mut indented = b"clusters:\n".to_vec();
    for i in 0..300 {
        indented.extend_from_slice(&b"  ".repeat(i));
        indented.extend_from_slice(b"- a:\n");
    }
    assert_eq!(replay("kubeconfig", &indented), Ok(()));
    // Nine levels of nine aliases: 387 million strings if expanded.
    let mut bomb = b"a: &a [x, x, x, x, x, x, x, x, x]\n".to_vec();
    for (name, prev) in ["b", "c", "d", "e", "f", "g", "h", "i"]
        .iter()
        .zip(["a", "b", "c", "d", "e", "f", "g", "h"])
    {
        let refs = vec![format!("*{prev}"); 9].join(", ");
        bomb.extend_from_slice(format!("{name}: &{name} [{refs}]\n").as_bytes());
    }
    bomb.extend_from_slice(b"clusters: *i\ncurrent-context: x\n");
    assert_eq!(replay("kubeconfig", &bomb), Ok(()));
    for toml in [
        [b"a = ".to_vec(), b"[".repeat(10_000)].concat(),
        [b"a = ".to_vec(), b"{b = ".repeat(10_000)].concat(),
        [b"[".to_vec(), b"a.".repeat(10_000), b"b]\n".to_vec()].concat(),
    ] {
        assert_eq!(replay("config", &toml), Ok(()));
    }
}

#[test]
fn seeds_pass_every_property() {
    for target in targets::all() {
        for (i, input) in (target.corpus)().iter().enumerate() {
            assert_eq!(
                replay(target.name, input),
                Ok(()),
                "{} seed {i}",
                target.name
            );
        }
    }
}

/// lines, seed 20261123, inputs 3 and 47: a line of exactly the limit whose CR and LF arrive in
/// different reads was dropped as too long; whole, it was kept.
#[test]
fn a_line_of_exactly_the_limit_split_between_cr_and_lf_is_kept() {
    let mut s = LineSplitter::new(5);
    let mut out = Vec::new();
    s.push(b"abcde\r", &mut out);
    assert!(out.is_empty(), "{out:?}");
    s.push(b"\nfghij\r\n", &mut out);
    assert_eq!(out, [Ok(b"abcde".to_vec()), Ok(b"fghij".to_vec())]);
    // One byte more is still too long, whichever way it arrives.
    let mut out = Vec::new();
    s.push(b"abcdef\r", &mut out);
    s.push(b"\nok\n", &mut out);
    assert_eq!(
        out,
        [Err(LineError::TooLong { limit: 5 }), Ok(b"ok".to_vec())]
    );
    assert_eq!(replay("lines", b"\x04abcde\r\n"), Ok(()));
}

/// response, seed 20261123, input 51: events completed before a chunk-framing error were
/// delivered when the error came in a later read, and dropped when it came in the same one.
#[test]
fn events_before_a_chunk_framing_error_are_delivered_whatever_the_reads() {
    let mut stream = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
    stream.extend_from_slice(b"8\r\n{\"a\":1}\n\r\n5\r\n{\"b\":X");
    let expected = [
        WatchItem::Event(b"{\"a\":1}".to_vec()),
        WatchItem::Ended(StreamEnd::Broken(
            "chunked body: expected CRLF after chunk data, got 0x58".to_string(),
        )),
    ];
    for split in 0..=stream.len() {
        let mut d = ResponseDecoder::new(DEFAULT_MAX_LINE);
        let mut out = Vec::new();
        d.feed(&stream[..split], &mut out);
        d.feed(&stream[split..], &mut out);
        assert_eq!(out, expected, "split at {split}");
    }
    assert_eq!(replay("response", &stream), Ok(()));
}

/// A kubeconfig is operator input, but a path in it pointing at a device or a runaway file
/// (`/dev/zero`, `/dev/urandom`) must be an error, not a read until memory runs out.
#[test]
fn kubeconfig_files_that_never_end_are_refused_not_read_into_memory() {
    use node_lifecycled::kube::Connection;
    let dir = std::env::temp_dir().join(format!("node-lifecycled-endless-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("config");
    for (user, field) in [
        ("{}", "certificate-authority"),
        ("{tokenFile: /dev/zero}", "tokenFile"),
        (
            "{client-certificate: /dev/zero, client-key: /dev/zero}",
            "client-certificate",
        ),
    ] {
        let ca = if field == "certificate-authority" {
            "/dev/zero"
        } else {
            "/dev/null"
        };
        let server = if field == "tokenFile" {
            "http://127.0.0.1:1"
        } else {
            "https://127.0.0.1:1"
        };
        std::fs::write(
            &path,
            format!(
                "clusters:\n- {{name: c, cluster: {{server: '{server}', certificate-authority: {ca}}}}}\n\
                 users:\n- {{name: u, user: {user}}}\n\
                 contexts:\n- {{name: x, context: {{cluster: c, user: u}}}}\ncurrent-context: x\n"
            ),
        )
        .unwrap();
        let (result, largest) =
            largest_allocation(|| Connection::from_kubeconfig(&path, None, false));
        let e = result.expect_err(field);
        assert!(e.field.contains(field), "{field}: {e}");
        assert!(e.reason.contains("larger than"), "{field}: {e}");
        assert!(
            largest <= 64 << 20,
            "{field}: allocated {largest} bytes at once"
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_config_file_that_never_ends_is_refused_not_read_into_memory() {
    let (result, largest) =
        largest_allocation(|| node_lifecycled::config::Config::load(Path::new("/dev/zero")));
    let e = result.expect_err("/dev/zero");
    assert!(e.to_string().contains("larger than"), "{e}");
    assert!(largest <= 64 << 20, "allocated {largest} bytes at once");
}

/// config, seed 1, input 446719 (and 38 more of the 10-minute run): `node_eviction_rate =
/// 4294967296.1` printed as `4294967296.100001` read back as `4294967296.100002` (16 significant
/// digits do not survive an f64 at micro precision). Rates are now at most 10^9 per second.
#[test]
fn a_rate_the_printed_config_cannot_carry_is_refused() {
    let path = Path::new("fuzz.toml");
    let e = node_lifecycled::config::Config::from_str("node_eviction_rate = 4294967296.1\n", path)
        .unwrap_err();
    assert!(
        e.to_string().contains("too large, at most 1000000000"),
        "{e}"
    );
    for text in [
        "node_eviction_rate = 999999999.999999\n",
        "secondary_node_eviction_rate = 1000000000\n[api]\nqps = 123456789.123456\n",
    ] {
        let config = node_lifecycled::config::Config::from_str(text, path).unwrap();
        let back =
            node_lifecycled::config::Config::from_str(&config.to_toml(), Path::new("<printed>"))
                .unwrap();
        assert_eq!(back, config, "{text}");
        assert_eq!(replay("config", text.as_bytes()), Ok(()), "{text}");
    }
    assert_eq!(
        replay("config", b"node_eviction_rate = 4294967296.1\n"),
        Ok(())
    );
}

/// A controller script of 5 KB (long run, seed 3) whose decisions the harness never took piled
/// up into one 4.5 MiB Vec. The shell takes them every loop turn; the harness now does too, as
/// the daemon does, and the script stays within the allocation bound.
#[test]
fn a_long_controller_script_stays_within_the_allocation_bound_when_decisions_are_taken() {
    let input = std::fs::read(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/fuzz/controller-decisions-pile-up.bin"),
    )
    .expect("fixture");
    assert_eq!(replay("controller", &input), Ok(()));
}
