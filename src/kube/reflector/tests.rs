use std::collections::BTreeMap;
use std::time::Duration;

use super::*;
use crate::kube::decode::{Bookmark, Status};
use crate::model::{Lease, Node, Pod};
use crate::time::Rng;

const T0: Time = Time::from_unix_millis(1_700_000_000_000);

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn lease(name: &str, rv: u64) -> Lease {
    Lease {
        name: name.into(),
        renew_time: None,
        duration_seconds: None,
        resource_version: rv.to_string().into(),
    }
}

fn page(items: Vec<Lease>, rv: u64, cont: Option<&str>) -> ListPage<Lease> {
    ListPage {
        items,
        resource_version: rv.to_string(),
        continue_token: cont.map(String::from),
        skipped: Vec::new(),
    }
}

fn names(deltas: &[Delta<Lease>]) -> Vec<String> {
    deltas
        .iter()
        .map(|d| match d {
            Delta::Begin => "begin".into(),
            Delta::Upsert(l) => format!("+{}@{}", l.name, l.resource_version),
            Delta::Delete(k) => format!("-{k}"),
            Delta::Synced => "synced".into(),
        })
        .collect()
}

fn expect_watch(r: &mut Reflector<Lease>, now: Time) -> WatchRequest {
    match r.poll(now) {
        Step::Watch(w) => w,
        other => panic!("expected a watch, got {other:?}"),
    }
}

fn expect_list(r: &mut Reflector<Lease>, now: Time) -> ListRequest {
    match r.poll(now) {
        Step::List(l) => l,
        other => panic!("expected a list, got {other:?}"),
    }
}

/// A reflector that listed a, b, c at rv 100 and is watching.
fn synced() -> Reflector<Lease> {
    let mut r = Reflector::new(ReflectorConfig::default(), 7);
    expect_list(&mut r, T0);
    let mut out = Vec::new();
    r.list_page_received(
        T0,
        page(vec![lease("a", 1), lease("b", 2), lease("c", 3)], 100, None),
        &mut out,
    );
    expect_watch(&mut r, T0);
    r.watch_opened(T0);
    r
}

#[test]
fn list_in_pages_then_watch_from_the_lists_resource_version() {
    let mut r: Reflector<Lease> = Reflector::new(ReflectorConfig::default(), 1);
    let first = expect_list(&mut r, T0);
    assert_eq!(
        first,
        ListRequest {
            continue_token: None,
            limit: 500,
            from_watch_cache: false,
        }
    );
    assert_eq!(r.poll(T0), Step::InFlight);
    let mut out = Vec::new();
    r.list_page_received(T0, page(vec![lease("a", 1)], 100, Some("tok/=+")), &mut out);
    assert_eq!(names(&out), ["begin", "+a@1"]);
    assert!(!r.is_synced());
    let second = expect_list(&mut r, T0);
    assert_eq!(
        second.path_and_query::<Lease>(),
        "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases?limit=500&continue=tok%2F%3D%2B"
    );
    r.list_page_received(T0, page(vec![lease("b", 2)], 100, None), &mut out);
    assert_eq!(names(&out), ["begin", "+a@1", "+b@2", "synced"]);
    let w = expect_watch(&mut r, T0);
    assert_eq!(w.resource_version.as_deref(), Some("100"));
    assert!(w.allow_bookmarks && !w.send_initial_events);
    assert_eq!(
        w.path_and_query::<Lease>(),
        format!(
            "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases?watch=true&timeoutSeconds={}&allowWatchBookmarks=true&resourceVersion=100",
            w.timeout_seconds
        )
    );
    let s = r.stats();
    assert!(s.synced);
    assert_eq!((s.objects, s.relists, s.reconnects), (2, 0, 0));
}

#[test]
fn pods_are_listed_and_watched_with_the_bound_to_a_node_selector() {
    let l = ListRequest {
        continue_token: None,
        limit: 500,
        from_watch_cache: false,
    };
    assert_eq!(
        l.path_and_query::<Pod>(),
        "/api/v1/pods?limit=500&fieldSelector=spec.nodeName%21%3D"
    );
    let w = WatchRequest {
        resource_version: None,
        allow_bookmarks: true,
        timeout_seconds: 20,
        send_initial_events: true,
        idle_timeout: ms(30_000),
    };
    assert_eq!(
        w.path_and_query::<Node>(),
        "/api/v1/nodes?watch=true&timeoutSeconds=20&allowWatchBookmarks=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan"
    );
}

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

#[test]
fn list_failure_retries_the_same_page_and_an_expired_continue_restarts() {
    let mut r: Reflector<Lease> = Reflector::new(ReflectorConfig::default(), 1);
    expect_list(&mut r, T0);
    let mut out = Vec::new();
    r.list_page_received(T0, page(vec![lease("a", 1)], 100, Some("p2")), &mut out);
    expect_list(&mut r, T0);
    r.list_failed(
        T0,
        ListFailure {
            gone: false,
            message: "timeout".into(),
        },
    );
    assert!(matches!(r.poll(T0), Step::Wait { .. }));
    let retry = expect_list(&mut r, T0 + ms(1000));
    assert_eq!(retry.continue_token.as_deref(), Some("p2"));
    r.list_failed(
        T0 + ms(1000),
        ListFailure {
            gone: true,
            message: "continue expired".into(),
        },
    );
    let restart = expect_list(&mut r, T0 + ms(1000));
    assert_eq!(restart.continue_token, None);
    // The restarted list is a new full state (the store forgets the first attempt's marks).
    out.clear();
    r.list_page_received(T0, page(vec![lease("a", 1)], 300, None), &mut out);
    assert_eq!(names(&out), ["begin", "+a@1", "synced"]);
}

#[test]
fn watch_list_initial_events_end_at_the_bookmark_then_plain_watches_follow() {
    let config = ReflectorConfig {
        watch_list: true,
        ..ReflectorConfig::default()
    };
    let mut r: Reflector<Lease> = Reflector::new(config, 1);
    let w = expect_watch(&mut r, T0);
    assert!(w.send_initial_events && w.resource_version.is_none());
    let mut out = Vec::new();
    r.watch_event(T0, WatchEvent::Added(lease("a", 1)), &mut out);
    r.watch_event(T0, WatchEvent::Added(lease("b", 2)), &mut out);
    assert!(!r.is_synced());
    let end = Bookmark {
        resource_version: "100".into(),
        initial_events_end: true,
    };
    r.watch_event(T0, WatchEvent::Bookmark(end), &mut out);
    assert_eq!(names(&out), ["begin", "+a@1", "+b@2", "synced"]);
    r.watch_ended(T0, &StreamEnd::Clean);
    let w = expect_watch(&mut r, T0);
    assert!(!w.send_initial_events);
    assert_eq!(w.resource_version.as_deref(), Some("100"));
    // 410 later: a new watch-list, a full state (the store removes a: not delivered).
    r.watch_ended(
        T0,
        &StreamEnd::Rejected {
            status: 410,
            message: "Gone".into(),
        },
    );
    let w = expect_watch(&mut r, T0);
    assert!(w.send_initial_events);
    out.clear();
    r.watch_event(T0, WatchEvent::Added(lease("b", 2)), &mut out);
    let end = Bookmark {
        resource_version: "400".into(),
        initial_events_end: true,
    };
    r.watch_event(T0, WatchEvent::Bookmark(end), &mut out);
    assert_eq!(names(&out), ["begin", "+b@2", "synced"]);
    assert_eq!(r.stats().relists, 1);
}

#[test]
fn watch_list_refused_by_the_server_falls_back_to_list_and_watch() {
    let config = ReflectorConfig {
        watch_list: true,
        ..ReflectorConfig::default()
    };
    let mut r: Reflector<Lease> = Reflector::new(config, 1);
    expect_watch(&mut r, T0);
    r.watch_ended(
        T0,
        &StreamEnd::Rejected {
            status: 422,
            message: "sendInitialEvents is forbidden".into(),
        },
    );
    expect_list(&mut r, T0);
    assert!(!r.stats().watch_list);
}

#[test]
fn watch_list_without_initial_events_end_twice_falls_back_to_list_and_watch() {
    let config = ReflectorConfig {
        watch_list: true,
        ..ReflectorConfig::default()
    };
    let mut r: Reflector<Lease> = Reflector::new(config, 1);
    let mut now = T0;
    expect_watch(&mut r, now);
    r.watch_ended(now, &StreamEnd::Clean);
    now += ms(1000);
    assert!(expect_watch(&mut r, now).send_initial_events);
    r.watch_ended(now, &StreamEnd::Clean);
    now += ms(2000);
    expect_list(&mut r, now);
}

#[test]
fn watch_list_is_used_from_kubernetes_1_32() {
    assert!(supports_watch_list("1", "32"));
    assert!(supports_watch_list("1", "33+"));
    assert!(!supports_watch_list("1", "31"));
    assert!(!supports_watch_list("1", "20"));
    assert!(!supports_watch_list("", "x"));
}

/// The shape of the integration test with the simulated server: a random mix of watch events,
/// stream drops, clean ends and forced 410 relists; the consumer's store always converges to
/// the server's objects.
#[test]
fn property_store_equals_server_after_mixed_events_drops_and_relists() {
    for seed in 0..40 {
        let mut rng = Rng::new(seed);
        let mut server: BTreeMap<String, u64> = BTreeMap::new();
        let mut rv = 1u64;
        for i in 0..50 {
            rv += 1;
            server.insert(format!("n{i}"), rv);
        }
        let mut r: Reflector<Lease> = Reflector::new(ReflectorConfig::default(), seed);
        // A store as the daemon's: a full state removes what it did not deliver.
        let mut store: BTreeMap<String, String> = BTreeMap::new();
        let mut seen: Option<std::collections::BTreeSet<String>> = None;
        let mut apply = |store: &mut BTreeMap<String, String>, out: Vec<Delta<Lease>>| {
            for d in out {
                match d {
                    Delta::Begin => seen = Some(Default::default()),
                    Delta::Upsert(l) => {
                        if let Some(seen) = &mut seen {
                            seen.insert(l.name.to_string());
                        }
                        store.insert(l.name.to_string(), l.resource_version.to_string());
                    }
                    Delta::Delete(k) => {
                        store.remove(&*k);
                    }
                    Delta::Synced => {
                        let seen = seen.take().unwrap_or_default();
                        store.retain(|k, _| seen.contains(k));
                    }
                }
            }
        };
        let mut now = T0;
        let mut watching_from: Option<u64> = None;
        // Events the server committed while no watch was open are replayed on resume.
        let mut log: Vec<(u64, String, Option<u64>)> = Vec::new();
        let mut compacted_below = 0u64;
        let mut snapshot: (BTreeMap<String, u64>, u64) = (BTreeMap::new(), 0);
        for _ in 0..600 {
            now += ms(10);
            match r.poll(now) {
                Step::List(req) => {
                    // Two pages of one snapshot, as the API server pages a list.
                    if req.continue_token.is_none() {
                        snapshot = (server.clone(), rv);
                    }
                    let all: Vec<_> = snapshot.0.iter().collect();
                    let half = all.len() / 2;
                    let (items, cont) = if req.continue_token.is_none() {
                        (&all[..half], Some("p2"))
                    } else {
                        (&all[half..], None)
                    };
                    let items = items.iter().map(|(k, v)| lease(k, **v)).collect();
                    let mut out = Vec::new();
                    r.list_page_received(now, page(items, snapshot.1, cont), &mut out);
                    apply(&mut store, out);
                }
                Step::Watch(w) => {
                    let from: u64 = w.resource_version.unwrap().parse().unwrap();
                    if from < compacted_below {
                        r.watch_ended(
                            now,
                            &StreamEnd::Rejected {
                                status: 410,
                                message: "Gone".into(),
                            },
                        );
                    } else {
                        // Replay what happened since `from`.
                        let mut out = Vec::new();
                        for (at, name, new_rv) in log.iter().filter(|(at, ..)| *at > from) {
                            let ev = match new_rv {
                                Some(v) => WatchEvent::Modified(lease(name, *v)),
                                None => WatchEvent::Deleted(lease(name, *at)),
                            };
                            r.watch_event(now, ev, &mut out);
                        }
                        apply(&mut store, out);
                        watching_from = Some(rv);
                    }
                }
                Step::Wait { .. } | Step::InFlight => {}
            }
            // The server changes.
            rv += 1;
            let name = format!("n{}", rng.below(70));
            let change = if rng.chance(20) && server.contains_key(&name) {
                server.remove(&name);
                None
            } else {
                server.insert(name.clone(), rv);
                Some(rv)
            };
            log.push((rv, name.clone(), change));
            if watching_from.is_some() {
                let ev = match change {
                    Some(v) => WatchEvent::Modified(lease(&name, v)),
                    None => WatchEvent::Deleted(lease(&name, rv)),
                };
                let mut out = Vec::new();
                if r.watch_event(now, ev, &mut out) == WatchFlow::Close {
                    watching_from = None;
                }
                apply(&mut store, out);
            }
            // Trouble.
            if watching_from.is_some() && rng.chance(5) {
                watching_from = None;
                let end = match rng.below(3) {
                    0 => StreamEnd::Clean,
                    1 => StreamEnd::Broken("reset".into()),
                    _ => {
                        compacted_below = rv;
                        StreamEnd::Rejected {
                            status: 410,
                            message: "Gone".into(),
                        }
                    }
                };
                r.watch_ended(now, &end);
            }
        }
        // Let it settle: keep serving until it watches again.
        for _ in 0..100 {
            now += ms(1000);
            match r.poll(now) {
                Step::List(req) => {
                    let all: Vec<_> = server.iter().map(|(k, v)| lease(k, *v)).collect();
                    let mut out = Vec::new();
                    let _ = req;
                    r.list_page_received(now, page(all, rv, None), &mut out);
                    apply(&mut store, out);
                }
                Step::Watch(w) => {
                    let from: u64 = w.resource_version.unwrap().parse().unwrap();
                    if from < compacted_below {
                        r.watch_ended(
                            now,
                            &StreamEnd::Rejected {
                                status: 410,
                                message: "Gone".into(),
                            },
                        );
                        continue;
                    }
                    let mut out = Vec::new();
                    for (at, name, new_rv) in log.iter().filter(|(at, ..)| *at > from) {
                        let ev = match new_rv {
                            Some(v) => WatchEvent::Modified(lease(name, *v)),
                            None => WatchEvent::Deleted(lease(name, *at)),
                        };
                        r.watch_event(now, ev, &mut out);
                    }
                    apply(&mut store, out);
                    break;
                }
                _ => {}
            }
        }
        let expected: BTreeMap<String, String> = server
            .iter()
            .map(|(k, v)| (k.clone(), v.to_string()))
            .collect();
        assert_eq!(store, expected, "seed {seed}");
    }
}

/// The server's version could not be read at start (it was down), so the reflector lists; once
/// the daemon learns the server streams watch-lists, the next full state is a watch-list.
#[test]
fn watch_list_enabled_later_is_used_by_the_next_full_state() {
    let mut r = synced();
    r.enable_watch_list();
    let mut out = Vec::new();
    let status = Status {
        code: 410,
        reason: "Expired".into(),
        message: "too old resource version".into(),
    };
    assert_eq!(
        r.watch_event(T0, WatchEvent::Error(status), &mut out),
        WatchFlow::Close
    );
    let w = expect_watch(&mut r, T0);
    assert!(
        w.send_initial_events && w.resource_version.is_none(),
        "{w:?}"
    );
    assert!(r.stats().watch_list);
}

fn from_cache_config() -> ReflectorConfig {
    ReflectorConfig {
        initial_list_from_cache: true,
        ..ReflectorConfig::default()
    }
}

#[test]
fn the_first_list_comes_from_the_watch_cache_in_one_streamed_response_then_the_watch_resumes_from_it()
 {
    let mut r: Reflector<Lease> = Reflector::new(from_cache_config(), 1);
    let first = expect_list(&mut r, T0);
    assert!(first.from_watch_cache);
    assert_eq!(
        first.path_and_query::<Pod>(),
        "/api/v1/pods?resourceVersion=0&fieldSelector=spec.nodeName%21%3D"
    );
    let mut out = Vec::new();
    // Items handed on as they are read: one Begin, the request stays in flight.
    r.list_items_received(page(vec![lease("a", 1)], 0, Some("")), &mut out);
    assert_eq!(r.poll(T0), Step::InFlight);
    r.list_items_received(page(vec![lease("b", 2)], 0, Some("")), &mut out);
    assert!(!r.is_synced());
    r.list_page_received(T0, page(vec![lease("c", 3)], 90, None), &mut out);
    assert_eq!(names(&out), ["begin", "+a@1", "+b@2", "+c@3", "synced"]);
    assert_eq!(r.stats().objects, 3);
    let w = expect_watch(&mut r, T0);
    assert_eq!(w.resource_version.as_deref(), Some("90"));
}

#[test]
fn a_failed_watch_cache_list_falls_back_to_consistent_pages_and_starts_the_full_state_again() {
    let mut r: Reflector<Lease> = Reflector::new(from_cache_config(), 1);
    assert!(expect_list(&mut r, T0).from_watch_cache);
    let mut out = Vec::new();
    r.list_items_received(page(vec![lease("a", 1)], 0, Some("")), &mut out);
    r.list_failed(
        T0,
        ListFailure {
            gone: false,
            message: "the body ended inside the list".into(),
        },
    );
    assert!(matches!(r.poll(T0), Step::Wait { .. }), "backs off first");
    let retry = expect_list(&mut r, T0 + ms(60_000));
    assert_eq!(
        retry,
        ListRequest {
            continue_token: None,
            limit: 500,
            from_watch_cache: false,
        }
    );
    r.list_page_received(T0, page(vec![lease("b", 2)], 100, None), &mut out);
    // A second Begin: what the broken list delivered and this one does not is removed.
    assert_eq!(names(&out), ["begin", "+a@1", "begin", "+b@2", "synced"]);
    assert_eq!(r.stats().objects, 1);
}

#[test]
fn relists_after_gone_use_consistent_pages_not_the_watch_cache() {
    let mut r: Reflector<Lease> = Reflector::new(from_cache_config(), 1);
    assert!(expect_list(&mut r, T0).from_watch_cache);
    let mut out = Vec::new();
    r.list_page_received(T0, page(vec![lease("a", 1)], 100, None), &mut out);
    expect_watch(&mut r, T0);
    r.watch_ended(
        T0,
        &StreamEnd::Rejected {
            status: 410,
            message: "Gone".into(),
        },
    );
    let relist = expect_list(&mut r, T0);
    assert!(!relist.from_watch_cache);
    assert_eq!(
        relist.path_and_query::<Lease>(),
        "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases?limit=500"
    );
}

#[test]
fn items_of_a_list_already_abandoned_are_ignored() {
    let mut r = synced();
    let mut out = Vec::new();
    r.list_items_received(page(vec![lease("z", 9)], 0, Some("")), &mut out);
    assert!(out.is_empty());
}

#[test]
fn a_full_state_in_delivery_is_known_so_the_shell_does_not_slow_it() {
    let mut r: Reflector<Lease> = Reflector::new(ReflectorConfig::default(), 1);
    expect_list(&mut r, T0);
    assert!(r.delivering_full_state());
    let mut out = Vec::new();
    r.list_page_received(T0, page(vec![lease("a", 1)], 100, None), &mut out);
    expect_watch(&mut r, T0);
    assert!(!r.delivering_full_state(), "a plain watch after the list");
    let config = ReflectorConfig {
        watch_list: true,
        ..ReflectorConfig::default()
    };
    let mut r: Reflector<Lease> = Reflector::new(config, 1);
    expect_watch(&mut r, T0);
    assert!(r.delivering_full_state(), "a watch-list's initial events");
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
