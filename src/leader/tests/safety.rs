//! The safety property: never two leaders under latency, lost answers, partitions and dying
//! candidates.

use super::*;

/// One candidate in the randomised run: requests take time, answers can be lost after the
/// server applied the write, candidates are cut off from the server for a while, die (stop) or
/// come back.
struct Candidate {
    elector: LeaderElector,
    /// (request, applied at, answered at, answer once applied, answer lost).
    pending: Option<(LeaseRequest, Time, Time, Option<LeaseResponse>, bool)>,
    alive: bool,
    /// Cut off from the server until then: requests fail without reaching it.
    partitioned_until: Time,
}

#[test]
fn never_two_leaders_under_latency_lost_answers_partitions_and_dying_candidates() {
    for seed in 0..60 {
        let mut rng = Rng::new(seed);
        let mut lease = FakeLease::default();
        let s = ElectionSettings {
            identity: String::new(),
            lease_duration: secs(3),
            // A thin margin to the lease duration: safety must not lean on slack.
            renew_deadline: Duration::from_millis(2700),
            retry_period: Duration::from_millis(400),
        };
        let mut candidates: Vec<Candidate> = (0..3)
            .map(|i| Candidate {
                elector: LeaderElector::new(
                    ElectionSettings {
                        identity: format!("c{i}"),
                        ..s.clone()
                    },
                    seed * 10 + i,
                    at(i * 37),
                ),
                pending: None,
                alive: true,
                partitioned_until: Time::ZERO,
            })
            .collect();
        let mut now = at(0);
        let mut leadership_changes = 0;
        let mut last_leader: Option<usize> = None;
        let mut stuck = 0;
        while now < at(300_000) {
            // The next event: a candidate's deadline, a request reaching the server, an answer.
            let mut next = now + secs(1);
            for c in candidates.iter().filter(|c| c.alive) {
                match &c.pending {
                    Some((_, apply, answer, applied, _)) => {
                        next = next.min(if applied.is_none() { *apply } else { *answer })
                    }
                    None => {
                        if let Some(d) = c.elector.next_deadline() {
                            next = next.min(d)
                        }
                    }
                }
            }
            if next <= now {
                stuck += 1;
                assert!(stuck < 100, "seed {seed}: no progress at {now:?}");
            } else {
                stuck = 0;
            }
            now = next.max(now);
            for c in candidates.iter_mut() {
                if !c.alive {
                    if rng.chance(5) {
                        c.elector =
                            LeaderElector::new(c.elector.settings().clone(), rng.next_u64(), now);
                        c.alive = true;
                    }
                    continue;
                }
                c.elector.tick(now);
                match c.pending.take() {
                    Some((request, apply, answer, None, lost)) if apply <= now => {
                        let response = if c.partitioned_until > now {
                            LeaseResponse::Failed {
                                error: "connection refused".into(),
                                retry_at: None,
                            }
                        } else {
                            lease.apply(&request)
                        };
                        c.pending = Some((request, apply, answer, Some(response), lost));
                    }
                    Some((_, _, answer, Some(response), lost)) if answer <= now => {
                        let response = if lost {
                            LeaseResponse::Failed {
                                error: "timed out".into(),
                                retry_at: None,
                            }
                        } else {
                            response
                        };
                        c.elector.on_response(response, now);
                    }
                    other => c.pending = other,
                }
                if c.pending.is_none() {
                    if let Some(request) = c.elector.poll(now) {
                        let apply = now + Duration::from_millis(rng.below(300));
                        let answer = apply + Duration::from_millis(rng.below(300));
                        c.pending = Some((request, apply, answer, None, rng.chance(10)));
                    }
                }
                if rng.chance(1) {
                    c.partitioned_until = now + Duration::from_millis(rng.below(6000));
                }
                // Death: kill -9, or a graceful release now and then.
                if rng.below(1000) < 3 {
                    if rng.chance(50) {
                        if let Some(release) = c.elector.release(now) {
                            let r = lease.apply(&release);
                            c.elector.on_response(r, now);
                        }
                    }
                    c.alive = false;
                    c.pending = None;
                }
            }
            let leaders: Vec<usize> = (0..candidates.len())
                .filter(|&i| candidates[i].alive && candidates[i].elector.is_leader(now))
                .collect();
            assert!(
                leaders.len() <= 1,
                "seed {seed}: {leaders:?} lead at {now:?}"
            );
            if let Some(&l) = leaders.first() {
                if last_leader != Some(l) {
                    leadership_changes += 1;
                    last_leader = Some(l);
                }
            }
        }

        assert!(
            leadership_changes >= 2,
            "seed {seed}: the run exercised no takeover"
        );
    }
}
