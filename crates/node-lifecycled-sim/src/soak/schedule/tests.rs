//! The plan's properties, checked on plans drawn from fixed seeds.

use super::*;

fn shape(duration: Duration) -> PlanShape {
    PlanShape {
        zones: (1..=3)
            .map(|z| (1..=8).map(|n| format!("z{z}-n{n:03}")).collect())
            .collect(),
        duration,
        warmup: Duration::from_secs(10),
        cooldown: Duration::from_secs(40),
        max_single_down: 6,
        grace: Duration::from_secs(5),
        tolerations: Vec::new(),
        sites: Vec::new(),
        fence_nodes: Vec::new(),
        fence_after: Duration::from_secs(2),
        shadow: false,
    }
}

/// `--partitions --fencing`: site s1 = zones 1 and 2 (hold 8 s), s2 = zone 3 (hold 20 s); two
/// fence nodes per zone.
fn shape_with_sites_and_fencing(duration: Duration) -> PlanShape {
    PlanShape {
        sites: vec![
            Site {
                nodes: (0..16).collect(),
                hold_max: Some(Duration::from_secs(8)),
            },
            Site {
                nodes: (16..24).collect(),
                hold_max: Some(Duration::from_secs(20)),
            },
        ],
        fence_nodes: vec![2, 5, 10, 13, 18, 21],
        ..shape(duration)
    }
}

/// Each node's silences: (stop, resume), from the plan's kubelet steps.
fn silences(steps: &[Step], node: &str) -> Vec<(Duration, Duration)> {
    let mut out = Vec::new();
    let mut stopped = None;
    for st in steps {
        match &st.fault {
            Fault::KubeletStop(n) if n == node => stopped = Some(st.at),
            Fault::KubeletResume(n) if n == node => {
                if let Some(s) = stopped.take() {
                    out.push((s, st.at));
                }
            }
            _ => {}
        }
    }
    out
}

#[test]
fn without_sites_or_fencing_no_new_episode_is_drawn() {
    // The new episodes are drawn only when the cluster has sites or fence nodes: a plain
    // soak's seed replays the same faults as before they existed.
    let steps = plan(11, &shape(Duration::from_secs(1800)));
    assert!(steps.iter().all(|s| !matches!(
        s.kind,
        "site-dark-failover" | "hold-across-takeover" | "fence-escalation-pause"
    )));
    assert!(
        steps
            .iter()
            .all(|s| !matches!(s.fault, Fault::PauseFencing(_) | Fault::ResumeFencing))
    );
}

#[test]
fn without_shadow_no_restart_is_drawn() {
    // `daemon-restart` is drawn only under --shadow, and `burst-409` is left out only there:
    // the other plans' seeds replay the same faults as before --shadow existed.
    for s in [
        shape(Duration::from_secs(1800)),
        shape_with_sites_and_fencing(Duration::from_secs(1800)),
    ] {
        let steps = plan(11, &s);
        assert!(steps.iter().all(|s| s.kind != "daemon-restart"));
        assert!(
            steps
                .iter()
                .all(|s| !matches!(s.fault, Fault::RestartDaemon { .. }))
        );
        assert!(steps.iter().any(|s| s.kind == "burst-409"));
    }
}

#[test]
fn a_shadow_plan_restarts_both_daemons_keeps_the_kills_and_draws_no_409() {
    let s = PlanShape {
        shadow: true,
        ..shape(Duration::from_secs(1800))
    };
    let steps = plan(41, &s);
    let count = |kind: &str| steps.iter().filter(|s| s.kind == kind).count();
    assert_eq!(count("burst-409"), 0);
    assert!(count("daemon-restart") >= 10, "{}", count("daemon-restart"));
    assert!(count("kill-leader") >= 3 && count("kill-leader-in-outage") >= 3);
    let restarts = |leader: bool| {
        steps
            .iter()
            .filter(|s| matches!(s.fault, Fault::RestartDaemon { leader: l, .. } if l == leader))
            .count()
    };
    assert!(restarts(true) > restarts(false) && restarts(false) > 0);
    for st in &steps {
        if let Fault::RestartDaemon { after, .. } = st.fault {
            assert!(after >= Duration::from_millis(500) && after <= Duration::from_secs(3));
        }
    }
}

#[test]
fn a_site_episode_darkens_the_whole_site_and_kills_the_leader_while_it_is_dark() {
    let s = shape_with_sites_and_fencing(Duration::from_secs(1800));
    for seed in 0..10 {
        for kind in ["site-dark-failover", "hold-across-takeover"] {
            let mut planner = Planner::new(seed, &s);
            let at = Duration::from_secs(30);
            planner.episode(kind, at, 6);
            planner.steps.sort_by_key(|st| st.at);
            let stops: Vec<&Step> = planner
                .steps
                .iter()
                .filter(|st| matches!(st.fault, Fault::KubeletStop(_)))
                .collect();
            assert!(stops.len() == 16 || stops.len() == 8, "{kind}: {stops:?}");
            let site = if stops.len() == 16 {
                &s.sites[0]
            } else {
                &s.sites[1]
            };
            let hold = site.hold_max.unwrap();
            let kill = planner
                .steps
                .iter()
                .find(|st| matches!(st.fault, Fault::KillLeader(_)))
                .expect("a leader kill");
            let last_stop = stops.iter().map(|st| st.at).max().unwrap();
            let names: Vec<String> = site
                .nodes
                .iter()
                .map(|&i| s.zones[i / 8][i % 8].clone())
                .collect();
            let first_resume = names
                .iter()
                .flat_map(|n| silences(&planner.steps, n))
                .map(|(_, resume)| resume)
                .min()
                .unwrap();
            // Killed while every node of the site is silent, past the grace period.
            assert!(
                kill.at >= last_stop + s.grace,
                "{kind} seed {seed}: {kill:?}"
            );
            assert!(kill.at < first_resume, "{kind} seed {seed}: {kill:?}");
            if kind == "hold-across-takeover" {
                // In the middle of the hold, and the site still dark when it ends.
                let dark = at + s.grace + Duration::from_secs(1);
                assert!(kill.at >= dark + hold.mul_f64(0.3), "{kill:?}");
                assert!(kill.at <= dark + hold.mul_f64(0.71), "{kill:?}");
                assert!(first_resume >= dark + hold + Duration::from_secs(8));
                assert!(
                    planner
                        .quiet
                        .iter()
                        .any(|&(from, to)| from < dark + hold && dark + hold < to)
                );
            }
        }
    }
}

#[test]
fn a_site_episode_waits_until_every_node_of_its_site_is_free() {
    let s = shape_with_sites_and_fencing(Duration::from_secs(1800));
    let mut planner = Planner::new(3, &s);
    planner.busy_until[17] = Duration::from_secs(50);
    planner.sites.truncate(0);
    planner.sites.push(s.sites[1].clone());
    planner.episode("site-dark-failover", Duration::from_secs(30), 6);
    let first = planner
        .steps
        .iter()
        .filter(|st| matches!(st.fault, Fault::KubeletStop(_)))
        .map(|st| st.at)
        .min()
        .unwrap();
    assert!(first >= Duration::from_secs(50), "{first:?}");
}

#[test]
fn a_fence_episode_silences_a_fence_node_and_pauses_fencing_around_its_first_step() {
    let s = shape_with_sites_and_fencing(Duration::from_secs(1800));
    let fence_names: Vec<String> = s
        .fence_nodes
        .iter()
        .map(|&i| s.zones[i / 8][i % 8].clone())
        .collect();
    let mut resumed = 0;
    for seed in 0..20 {
        let mut planner = Planner::new(seed, &s);
        let at = Duration::from_secs(30);
        planner.episode("fence-escalation-pause", at, 6);
        let stop = planner
            .steps
            .iter()
            .find_map(|st| match &st.fault {
                Fault::KubeletStop(n) => Some(n.clone()),
                _ => None,
            })
            .unwrap();
        assert!(fence_names.contains(&stop), "{stop}");
        let (_, back) = silences(&planner.steps, &stop)[0];
        assert!(back >= at + Duration::from_secs(20));
        let pause = planner
            .steps
            .iter()
            .find(|st| matches!(st.fault, Fault::PauseFencing(_)))
            .unwrap();
        // Inside a 5 s step 1 that starts about grace + after past the stop.
        let first_step = at + s.grace + s.fence_after;
        assert!(
            pause.at >= first_step + Duration::from_millis(500),
            "{pause:?}"
        );
        assert!(pause.at <= first_step + Duration::from_secs(2), "{pause:?}");
        // No fault that stops the daemons starts around it.
        assert!(
            planner
                .quiet
                .iter()
                .any(|&(from, to)| from < pause.at && pause.at + Duration::from_secs(5) < to)
        );
        // Ends (by itself or resumed) while the node is still down: the fence goes on after it.
        let end = match planner
            .steps
            .iter()
            .find(|st| st.fault == Fault::ResumeFencing)
        {
            Some(r) => {
                resumed += 1;
                r.at
            }
            None => match pause.fault {
                Fault::PauseFencing(d) => pause.at + d,
                _ => unreachable!(),
            },
        };
        assert!(end < back, "seed {seed}");
        // One pause at a time.
        planner.episode("fence-escalation-pause", at + Duration::from_secs(2), 6);
        assert_eq!(
            planner
                .steps
                .iter()
                .filter(|st| matches!(st.fault, Fault::PauseFencing(_)))
                .count(),
            1
        );
    }
    assert!(
        resumed > 0 && resumed < 20,
        "{resumed} of 20 resumed by hand"
    );
}

#[test]
fn no_fault_that_stops_the_daemons_starts_in_a_quiet_window() {
    let s = shape_with_sites_and_fencing(Duration::from_secs(1800));
    for seed in 1..4 {
        let (steps, quiet) = plan_with_quiet(seed, &s);
        assert!(
            quiet.len() >= 5,
            "seed {seed}: {} quiet windows",
            quiet.len()
        );
        let blocking: Vec<&Step> = steps
            .iter()
            .filter(|st| BLOCKING.contains(&st.kind))
            .collect();
        assert!(blocking.len() > 100, "{} blocking episodes", blocking.len());
        for st in blocking {
            assert!(
                !quiet.iter().any(|&(from, to)| from <= st.at && st.at < to),
                "seed {seed}: {st:?} in a quiet window"
            );
        }
    }
    // Without sites or fencing there is none.
    assert!(
        plan_with_quiet(1, &shape(Duration::from_secs(1800)))
            .1
            .is_empty()
    );
}

#[test]
fn a_thirty_minute_plan_with_sites_and_fencing_has_every_new_kind() {
    let steps = plan(1, &shape_with_sites_and_fencing(Duration::from_secs(1800)));
    for kind in [
        "site-dark-failover",
        "hold-across-takeover",
        "fence-escalation-pause",
    ] {
        let n = steps.iter().filter(|st| st.kind == kind).count();
        assert!(n >= 5, "{n} {kind} episodes in 30 minutes");
    }
}

#[test]
fn the_same_seed_gives_the_same_plan_and_another_seed_another() {
    let s = shape(Duration::from_secs(600));
    assert_eq!(plan(3, &s), plan(3, &s));
    assert_ne!(plan(3, &s), plan(4, &s));
}

#[test]
fn a_thirty_minute_plan_has_hundreds_of_episodes_of_every_kind_and_resumes_every_node() {
    let s = shape(Duration::from_secs(1800));
    let steps = plan(1, &s);
    let episodes = steps.iter().filter(|s| !s.kind.is_empty()).count();
    assert!(episodes >= 500, "{episodes} episodes");
    for (kind, _) in EPISODES {
        assert!(
            steps.iter().any(|s| s.kind == kind),
            "no {kind} episode in 30 minutes"
        );
    }
    // Each node's last kubelet step leaves it running.
    for node in s.zones.iter().flatten() {
        let last = steps.iter().rev().find(|st| match &st.fault {
            Fault::KubeletStop(n) | Fault::KubeletResume(n) => n == node,
            _ => false,
        });
        if let Some(st) = last {
            assert!(matches!(st.fault, Fault::KubeletResume(_)), "{node}");
        }
    }
    assert!(steps.iter().all(|s| s.at >= Duration::from_secs(10)));
    assert!(steps.windows(2).all(|w| w[0].at <= w[1].at));
}

#[test]
fn a_correlated_zone_failure_silences_most_of_one_zone_at_once_or_within_a_second() {
    let s = shape(Duration::from_secs(600));
    for seed in 0..20 {
        for (kind, spread) in [
            ("zone-partial-sync", Duration::ZERO),
            ("zone-partial-spread", Duration::from_secs(1)),
        ] {
            let mut planner = Planner::new(seed, &s);
            let at = Duration::from_secs(20);
            planner.episode(kind, at, 6);
            let stops: Vec<(&String, Duration)> = planner
                .steps
                .iter()
                .filter_map(|st| match &st.fault {
                    Fault::KubeletStop(n) => Some((n, st.at)),
                    _ => None,
                })
                .collect();
            // 6 of a zone of 8: past the threshold (5), never the whole zone.
            assert_eq!(stops.len(), 6, "{kind} {stops:?}");
            let zone = &stops[0].0[..2];
            assert!(stops.iter().all(|(n, _)| n.starts_with(zone)), "{stops:?}");
            let mut names: Vec<_> = stops.iter().map(|s| s.0).collect();
            names.dedup();
            assert_eq!(names.len(), 6, "{stops:?}");
            assert!(
                stops.iter().all(|s| s.1 >= at && s.1 <= at + spread),
                "{stops:?}"
            );
            let resumes = planner
                .steps
                .iter()
                .filter(|st| matches!(st.fault, Fault::KubeletResume(_)))
                .count();
            assert_eq!(resumes, 6);
        }
    }
}

#[test]
fn some_zone_failures_kill_the_leader_while_their_nodes_are_dead() {
    let s = shape(Duration::from_secs(1800));
    let steps = plan(5, &s);
    let kills: Vec<Duration> = steps
        .iter()
        .filter(|st| st.kind == "kill-leader-in-outage")
        .map(|st| st.at)
        .collect();
    assert!(kills.len() >= 5, "{} kills in outages", kills.len());
    for at in kills {
        // Some node stopped at least the grace period before and not yet resumed.
        let dead = s.zones.iter().flatten().any(|node| {
            let last = steps.iter().rev().find(|st| {
                st.at <= at
                    && matches!(&st.fault, Fault::KubeletStop(n) | Fault::KubeletResume(n) if n == node)
            });
            last.is_some_and(|st| {
                matches!(st.fault, Fault::KubeletStop(_)) && at - st.at >= s.grace
            })
        });
        assert!(
            dead,
            "kill at {at:?} with no node dead past the grace period"
        );
    }
}

#[test]
fn every_plan_opens_with_a_correlated_zone_failure_that_kills_the_leader() {
    let s = shape(Duration::from_secs(60));
    for seed in 0..20 {
        let steps = plan(seed, &s);
        // Its stops begin at the warm-up's end (spread over a second at most).
        let opening = steps.iter().find(|st| st.kind.starts_with("zone-partial-"));
        assert!(
            opening.is_some_and(|st| st.at <= s.warmup + Duration::from_secs(1)),
            "seed {seed}: {opening:?}"
        );
        let kill = steps
            .iter()
            .find(|st| st.kind == "kill-leader-in-outage")
            .unwrap();
        // Nothing else in between.
        let others = steps
            .iter()
            .filter(|st| st.at > s.warmup + Duration::from_secs(1) && st.at < kill.at)
            .count();
        assert_eq!(others, 0, "seed {seed}");
    }
}
