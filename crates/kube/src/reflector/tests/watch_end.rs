//! How a watch ends and what follows: bookmarks, clean ends, idle timeouts, 410 Gone, error
//! backoff and the probe watch.

use super::*;

#[test]
fn server_timeout_is_inside_the_idle_timeout_so_a_healthy_stream_never_idles_out() {
    let mut r: Reflector<Lease> = Reflector::new(ReflectorConfig::default(), 3);
    let mut seen = std::collections::BTreeSet::new();
    for _ in 0..200 {
        let t = r.watch_timeout_seconds(Time::ZERO);
        // 30 s idle timeout: at least 3 s for the server's end to arrive before the deadline,
        // and rotations no more often than every 21 s (each costs wake-ups).
        assert!((21..=27).contains(&t), "{t}");
        seen.insert(t);
    }
    assert!(seen.len() >= 5, "jittered: {seen:?}");
}

#[test]
fn bookmarks_advance_the_resource_version_and_a_dropped_stream_resumes_without_relist() {
    let mut r = synced();
    let mut out = Vec::new();
    r.watch_event(T0, WatchEvent::Modified(lease("a", 120)), &mut out);
    let bookmark = Bookmark {
        resource_version: "150".into(),
        initial_events_end: false,
    };
    assert_eq!(
        r.watch_event(T0, WatchEvent::Bookmark(bookmark), &mut out),
        WatchFlow::Continue
    );
    assert_eq!(names(&out), ["+a@120"]);
    r.watch_ended(T0, &StreamEnd::Broken("connection reset".into()));
    let Step::Wait { until } = r.poll(T0) else {
        panic!("backoff expected")
    };
    let delay = until - T0;
    assert!(delay >= ms(400) && delay <= ms(600), "{delay:?}");
    let w = expect_watch(&mut r, until);
    assert_eq!(w.resource_version.as_deref(), Some("150"));
    let s = r.stats();
    assert_eq!((s.relists, s.reconnects), (0, 1));
    assert_eq!(s.resource_version.as_deref(), Some("150"));
}

#[test]
fn clean_end_at_timeout_seconds_resumes_at_once_and_resets_nothing() {
    let mut r = synced();
    r.watch_ended(T0, &StreamEnd::Clean);
    let w = expect_watch(&mut r, T0);
    assert_eq!(w.resource_version.as_deref(), Some("100"));
    assert_eq!(r.stats().consecutive_failures, 0);
}

#[test]
fn idle_timeout_resumes_from_the_last_resource_version() {
    let mut r = synced();
    let mut out = Vec::new();
    r.watch_event(T0, WatchEvent::Added(lease("d", 130)), &mut out);
    r.watch_ended(T0 + ms(30_000), &StreamEnd::IdleTimeout);
    let w = expect_watch(&mut r, T0 + ms(31_000));
    assert_eq!(w.resource_version.as_deref(), Some("130"));
    assert_eq!(r.stats().relists, 0);
}

#[test]
fn gone_as_an_error_event_relists_a_full_state() {
    let mut r = synced();
    let mut out = Vec::new();
    let status = Status {
        code: 410,
        reason: "Expired".into(),
        message: "too old resource version: 100 (200)".into(),
    };
    assert_eq!(
        r.watch_event(T0, WatchEvent::Error(status), &mut out),
        WatchFlow::Close
    );
    // The stream's end, reported after Close, changes nothing.
    r.watch_ended(T0, &StreamEnd::Clean);
    expect_list(&mut r, T0);
    // a unchanged, b changed, c gone, d new: the relist is a full state, delivered whole
    // between Begin and Synced; the store skips a (same version) and removes c (not delivered).
    r.list_page_received(
        T0,
        page(
            vec![lease("a", 1), lease("b", 210), lease("d", 205)],
            220,
            None,
        ),
        &mut out,
    );
    assert_eq!(names(&out), ["begin", "+a@1", "+b@210", "+d@205", "synced"]);
    let w = expect_watch(&mut r, T0);
    assert_eq!(w.resource_version.as_deref(), Some("220"));
    assert_eq!(r.stats().relists, 1);
}

#[test]
fn gone_as_a_410_status_relists_immediately() {
    let mut r = synced();
    r.watch_ended(
        T0,
        &StreamEnd::Rejected {
            status: 410,
            message: "Gone".into(),
        },
    );
    expect_list(&mut r, T0);
}

#[test]
fn non_gone_error_event_backs_off_and_resumes_from_the_resource_version() {
    let mut r = synced();
    let mut out = Vec::new();
    let status = Status {
        code: 500,
        reason: "InternalError".into(),
        message: "etcd".into(),
    };
    assert_eq!(
        r.watch_event(T0, WatchEvent::Error(status), &mut out),
        WatchFlow::Close
    );
    assert!(matches!(r.poll(T0), Step::Wait { .. }));
    let w = expect_watch(&mut r, T0 + ms(1000));
    assert_eq!(w.resource_version.as_deref(), Some("100"));
}

#[test]
fn backoff_doubles_to_thirty_seconds_with_jitter_and_resets_after_a_healthy_minute() {
    let mut r = synced();
    let mut now = T0;
    let mut delays = Vec::new();
    for _ in 0..10 {
        r.watch_ended(now, &StreamEnd::Broken("refused".into()));
        let Step::Wait { until } = r.poll(now) else {
            panic!()
        };
        delays.push((until - now).as_millis() as u64);
        now = until;
        expect_watch(&mut r, now);
    }
    let nominal = [
        500u64, 1000, 2000, 4000, 8000, 16000, 30000, 30000, 30000, 30000,
    ];
    for (d, n) in delays.iter().zip(nominal) {
        assert!(
            *d >= n * 8 / 10 && *d <= (n * 12 / 10).min(30_000),
            "{delays:?}"
        );
    }
    assert_eq!(r.stats().consecutive_failures, 10);
    // A healthy minute later, the next failure starts from 0.5 s again.
    now += ms(60_000);
    r.watch_ended(now, &StreamEnd::Broken("refused".into()));
    let Step::Wait { until } = r.poll(now) else {
        panic!()
    };
    assert!(until - now <= ms(600));
}

/// After a broken watch the shell asks for a probe: the next watch resumes from our version
/// and asks the server to end it after `PROBE_TIMEOUT_SECONDS`; later watches (and a
/// watch-list, a full state) ask for the usual 70–90 % of the idle timeout.
#[test]
fn a_probe_watch_asks_the_server_to_end_it_after_a_second() {
    let mut r = synced();
    r.watch_ended(T0, &StreamEnd::Broken("connection reset".into()));
    r.set_probe_next(true);
    let Step::Wait { until } = r.poll(T0) else {
        panic!("backoff expected")
    };
    let probe = expect_watch(&mut r, until);
    assert_eq!(probe.timeout_seconds, PROBE_TIMEOUT_SECONDS);
    assert_eq!(probe.resource_version.as_deref(), Some("100"));
    assert!(
        probe
            .path_and_query::<Lease>()
            .contains("timeoutSeconds=1&")
    );
    assert_eq!(
        r.expected_watch_end(),
        Some(until + Duration::from_secs(PROBE_TIMEOUT_SECONDS))
    );
    r.watch_ended(until + ms(1_000), &StreamEnd::Clean);
    r.set_probe_next(false);
    let next = expect_watch(&mut r, until + ms(1_000));
    assert!((21..=27).contains(&next.timeout_seconds), "{next:?}");

    // A full state due (410) is a watch-list here: never a probe.
    let mut r = Reflector::<Lease>::new(
        ReflectorConfig {
            watch_list: true,
            ..ReflectorConfig::default()
        },
        5,
    );
    r.set_probe_next(true);
    let full = expect_watch(&mut r, T0);
    assert!(full.send_initial_events);
    assert!((21..=27).contains(&full.timeout_seconds), "{full:?}");
}
