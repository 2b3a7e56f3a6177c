//! Unit tests of the reflector, a module per concern, and the fixtures they share.

use std::collections::BTreeMap;
use std::time::Duration;

use super::*;
use crate::decode::{Bookmark, ListPage, Status, WatchEvent};
use crate::model::{Lease, Node, Pod};
use crate::time::Rng;
use crate::watch::StreamEnd;

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

mod convergence;
mod full_state;
mod watch_end;
