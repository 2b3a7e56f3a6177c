//! The property test: a random mix of events, drops and relists always leaves the consumer's store
//! equal to the server's objects.

use super::*;

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
