//! The reflector's full states: paged lists, watch-lists, the watch cache's streamed first list,
//! and the lists it abandons.

use super::*;

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
