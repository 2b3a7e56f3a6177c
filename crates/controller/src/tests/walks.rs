//! The counts kept as nodes change (`node_lifecycle/suspect_tally.rs`, the pools' brake cover,
//! the domains' hold votes) instead of walks of the fleet at every node change. Each test fails
//! if its walk comes back at every change; every query of these counts in a test build is also
//! checked against the walk it replaced (`tally_check` and the asserts beside the kept cover
//! and votes), in these scenarios and in every other controller test.

use std::time::Duration;

use super::harness::{n, node, secs, test_settings};
use super::lifecycle_with_eviction::Cluster;
use crate::brake::MaxUnhealthy;
use crate::inputs::Input;
use crate::model::{ConditionStatus, Lease};
use crate::partitions::FullDisruption;
use crate::pools::Pool;
use crate::settings::Settings;
use crate::time::Time;

const SITE: &str = "example.com/site";

fn t0() -> Time {
    super::harness::date(2026, 12, 2, 9, 0, 0)
}

/// Sixty nodes in six sites of ten (`s0-0` .. `s5-9`), pool `big` being sites 0 to 2.
fn names() -> Vec<(String, String)> {
    (0..6)
        .flat_map(|s| (0..10).map(move |i| (format!("s{s}-{i}"), format!("s{s}"))))
        .collect()
}

fn lease(name: &str, at: Time) -> Lease {
    Lease {
        name: name.into(),
        renew_time: Some(at),
        duration_seconds: Some(40),
        resource_version: format!("{}", at.as_unix_millis()).into(),
    }
}

fn status(c: &mut Cluster, name: &str, site: &str, at: Time) {
    let mut b = node(name)
        .zone("r", site)
        .label(SITE, site)
        .ready(ConditionStatus::True, at, t0());
    if ["s0", "s1", "s2"].contains(&site) {
        b = b.label("tier", "big");
    }
    c.put_node(b.build());
}

fn fleet(settings: Settings) -> Cluster {
    let mut c = Cluster::new(settings, t0());
    for (name, site) in names() {
        c.put_lease(lease(&name, t0()));
        status(&mut c, &name, &site, t0());
    }
    c.feed(Input::InitialSyncDone);
    c
}

/// Runs to `until`: the kubelets not `silent` renew every 10 s and post status every 2 s (a
/// node change each), each at its own phase.
fn run(c: &mut Cluster, until: Time, silent: impl Fn(&str) -> bool) -> usize {
    let mut changes = 0;
    let mut t = c.now;
    while t < until {
        t = (t + secs(1)).min(until);
        c.run_until(t);
        let second = (t.as_unix_millis() - t0().as_unix_millis()) / 1000;
        for (i, (name, site)) in names().iter().enumerate() {
            if silent(name) {
                continue;
            }
            let i = i as u64;
            if (second + i) % 10 == 0 {
                c.put_lease(lease(name, t));
            }
            if (second + i) % 2 == 0 {
                status(c, name, site, t);
                changes += 1;
            }
        }
    }
    changes
}

/// With the fleet's brake configured, the suspects and the brake are counted as nodes change:
/// the fleet is walked about once per renew interval (a node's instant as a suspect moves
/// with each renewal), not at each node change, as `update_brakes` did.
#[test]
fn the_brake_and_the_suspects_are_counted_without_a_walk_per_node_change() {
    let settings = Settings {
        max_unhealthy: Some(MaxUnhealthy::Percent(40.0)),
        ..test_settings()
    };
    let mut c = fleet(settings);
    let walks = |c: &Cluster| {
        let w = c.ctl.lifecycle().walks();
        (w.tally, w.sorts)
    };
    let (rebuilds, sorts) = walks(&c);
    let changes = run(&mut c, t0() + secs(300), |_| false);
    let (rebuilds, sorts) = (walks(&c).0 - rebuilds, walks(&c).1 - sorts);
    assert!(changes >= 8_000, "{changes} node changes");
    assert_eq!(rebuilds, 0, "every mark recomputed with nothing changed");
    assert!(
        sorts <= 40,
        "{sorts} sorts of the instants for {changes} node changes in 300 s"
    );
}

/// A site going dark is counted suspect by suspect as their instants come, without a walk per
/// suspect: the tally keeps the instants sorted.
#[test]
fn a_site_going_dark_is_counted_suspect_by_suspect_without_a_walk_each() {
    let settings = Settings {
        max_unhealthy: Some(MaxUnhealthy::Percent(40.0)),
        ..test_settings()
    };
    let mut c = fleet(settings);
    run(&mut c, t0() + secs(30), |_| false);
    let walks = |c: &Cluster| {
        let w = c.ctl.lifecycle().walks();
        w.tally + w.sorts
    };
    let before = walks(&c);
    let dark = |name: &str| name.starts_with("s4-");
    run(&mut c, t0() + secs(90), dark);
    let walks = walks(&c) - before;
    assert!(walks <= 12, "{walks} walks in 60 s with a site going dark");
}

/// With a pool's brake engaged, the nodes it covers are taken once when it engages, and again
/// only when a node joins, leaves or changes labels; not at each input as before.
#[test]
fn a_pools_engaged_brake_takes_its_cover_once_not_at_every_input() {
    let big = Pool {
        name: n("big"),
        match_labels: vec![("tier".to_string(), "big".to_string())],
        max_unhealthy: Some(MaxUnhealthy::Count(2)),
        ..Default::default()
    };
    let settings = Settings {
        pools: vec![big],
        ..test_settings()
    };
    let mut c = fleet(settings);
    run(&mut c, t0() + secs(20), |_| false);
    // Site 1 (of pool big) goes dark: the brake engages.
    let dark = |name: &str| name.starts_with("s1-");
    run(&mut c, t0() + secs(120), dark);
    assert!(c.ctl.lifecycle().brakes().any_engaged(), "the pool's brake");
    let before = c.ctl.lifecycle().walks().pool_cover.get();
    let changes = run(&mut c, t0() + secs(180), dark);
    let walks = c.ctl.lifecycle().walks().pool_cover.get() - before;
    assert!(changes >= 1_000, "{changes}");
    assert_eq!(
        walks, 0,
        "the cover taken again while nothing joined or left"
    );
}

/// A held site's vote (`full_disruption = "hold"`) is taken once when it becomes fully
/// disrupted, not at each change of the zones' counts that follows.
#[test]
fn a_held_sites_vote_is_taken_once_not_at_every_zone_change() {
    let settings = Settings {
        disruption_domain: vec![SITE.to_string()],
        full_disruption: FullDisruption::Hold,
        hold_max: Some(Duration::from_secs(600)),
        ..test_settings()
    };
    let mut c = fleet(settings);
    run(&mut c, t0() + secs(20), |_| false);
    // Sites 2 and 3 go dark one after the other: each held.
    run(&mut c, t0() + secs(100), |name| name.starts_with("s2-"));
    let dark = |name: &str| name.starts_with("s2-") || name.starts_with("s3-");
    run(&mut c, t0() + secs(200), dark);
    assert!(
        ["s2", "s3"]
            .iter()
            .all(|s| c.ctl.lifecycle().zone_held(&n(&format!("{SITE}={s}")))),
        "both sites held"
    );
    let votes = c.ctl.lifecycle().walks().hold_votes;
    assert!(votes <= 2, "{votes} votes taken for two sites going dark");
}
