//! Toleration matching exactly as Kubernetes does it (`v1.Toleration.ToleratesTaint`,
//! `v1helper.GetMatchingTolerations`, taint eviction's `getMinTolerationTime`).
//!
//! The quirks are upstream's and deliberate: an empty key matches every key (API validation
//! only allows that with `Exists`, but the matcher itself does not check, so neither do we);
//! only the *first* toleration matching a taint is "used", so a forever toleration listed before
//! a 60 s one for the same taint means forever.
//!
//! One deliberate difference, in [`countdown`]: a toleration's seconds are counted from its
//! taint's `timeAdded`, not from when the taint was first seen (see [`countdown_start`]).

use std::time::Duration;

use crate::model::{Taint, Toleration, TolerationOperator};
use crate::time::Time;

/// Whether `toleration` tolerates `taint`.
pub(crate) fn tolerates(toleration: &Toleration, taint: &Taint) -> bool {
    if toleration
        .effect
        .as_ref()
        .is_some_and(|e| *e != taint.effect)
    {
        return false;
    }
    if !toleration.key.is_empty() && toleration.key != taint.key {
        return false;
    }
    match &toleration.operator {
        TolerationOperator::Equal => toleration.value == taint.value,
        TolerationOperator::Exists => true,
        // `Lt` / `Gt` (KEP-5471, feature-gated in the API server: pods carrying them exist only
        // where the cluster enabled it) compare the values as base-10 int64; unparsable → no match.
        TolerationOperator::Other(op) => match &**op {
            "Lt" => compare_numeric(&toleration.value, &taint.value, |taint, tol| taint < tol),
            "Gt" => compare_numeric(&toleration.value, &taint.value, |taint, tol| taint > tol),
            _ => false,
        },
    }
}

fn compare_numeric(toleration: &str, taint: &str, op: impl Fn(i64, i64) -> bool) -> bool {
    match (toleration.parse::<i64>(), taint.parse::<i64>()) {
        (Ok(tol), Ok(taint)) => op(taint, tol),
        _ => false,
    }
}

/// `GetMatchingTolerations`: `None` when some taint is not tolerated, else the toleration used
/// for each taint (the first that matches it), in taint order. No taints: `Some(empty)`.
pub(crate) fn matching_tolerations<'a>(
    taints: &[Taint],
    tolerations: &'a [Toleration],
) -> Option<Vec<&'a Toleration>> {
    let mut used = Vec::with_capacity(taints.len());
    for taint in taints {
        used.push(tolerations.iter().find(|t| tolerates(t, taint))?);
    }
    Some(used)
}

/// `getMinTolerationTime`: the smallest `tolerationSeconds` among `used`; zero or negative
/// means evict now; `None` means none of them has a limit (tolerated forever).
/// An empty list gives zero, as upstream (the caller never asks with no taints).
pub(crate) fn min_toleration_time<'a>(
    used: impl IntoIterator<Item = &'a Toleration>,
) -> Option<Duration> {
    let mut used = used.into_iter().peekable();
    if used.peek().is_none() {
        return Some(Duration::ZERO);
    }
    let mut min: Option<i64> = None;
    for toleration in used {
        match toleration.toleration_seconds {
            Some(secs) if secs <= 0 => return Some(Duration::ZERO),
            Some(secs) => min = Some(min.map_or(secs, |m| m.min(secs))),
            None => {}
        }
    }
    min.map(|secs| Duration::from_secs(secs.unsigned_abs()))
}

/// What the NoExecute taints of a node mean for one pod.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Some taint is not tolerated: evict now.
    NotTolerated,
    /// Every taint is tolerated, the tightest for this long (zero: evict now).
    TolerateFor(Duration),
    /// Every taint is tolerated without a time limit (or there are no taints).
    TolerateForever,
}

/// The verdict for a pod with `tolerations` on a node with the NoExecute `taints`.
pub(crate) fn verdict(taints: &[Taint], tolerations: &[Toleration]) -> Verdict {
    if taints.is_empty() {
        return Verdict::TolerateForever;
    }
    match matching_tolerations(taints, tolerations) {
        None => Verdict::NotTolerated,
        Some(used) => match min_toleration_time(used) {
            Some(d) => Verdict::TolerateFor(d),
            None => Verdict::TolerateForever,
        },
    }
}

/// When a pod's NoExecute countdown ends: [`verdict`] with each toleration counted from its
/// taint's start ([`countdown_start`]) instead of from now.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) enum Countdown {
    /// Some taint is not tolerated: evict now.
    NotTolerated,
    /// Every taint is tolerated; the first toleration to run out does so at `at`, counted
    /// from `from` (its taint's start).
    Until { from: Time, at: Time },
    /// Every taint is tolerated without a time limit (or there are no taints).
    Forever,
}

/// Where the countdown of a toleration of `taint` starts. Beyond upstream, whose taint manager
/// counts from when it first sees the taint (so each restart or new leader gives every pod
/// another full `tolerationSeconds`): from the taint's `timeAdded`, which is what
/// `tolerationSeconds` documents and what survives on the node. `now` when it has none, and
/// never later than `now`: a `timeAdded` in the future is the writer's clock running ahead.
///
/// `timeAdded` has whole seconds (the API truncates): the taint was written within the second
/// that follows, and which instant of it the daemon cannot know, so it takes the later one,
/// the next second. A pod is then never deleted before its `tolerationSeconds` have passed
/// since the write (a restart saw a 20 s toleration end 19.6 s after it), at the cost of up to
/// a second more than upstream's running count.
pub(crate) fn countdown_start(taint: &Taint, now: Time) -> Time {
    taint
        .time_added
        .map_or(now, |added| next_second(added).min(now))
}

/// The first whole second after `t`.
fn next_second(t: Time) -> Time {
    let ms = t.as_unix_millis();
    Time::from_unix_millis((ms / 1000).saturating_add(1).saturating_mul(1000))
}

/// The countdown for a pod with `tolerations` on a node with the NoExecute `taints`, at `now`:
/// the earliest of `start(taint) + tolerationSeconds` over the taints, no start before
/// `floor`. With every start at `now` this is upstream's `now + getMinTolerationTime` (zero or
/// negative seconds: now).
///
/// `floor` is when the pod came under the taints as this machine saw it happen: a taint that
/// appears while it watches, or a pod bound to (or moved onto) a node already tainted, counts
/// from then, as upstream's. The pods found under a taint at a start or a takeover count from
/// its `timeAdded`, or from their creation if later (`floor` = the pod's `creationTimestamp`,
/// [`Time::ZERO`] when it has none).
pub(crate) fn countdown(
    taints: &[Taint],
    tolerations: &[Toleration],
    now: Time,
    floor: Time,
) -> Countdown {
    if taints.is_empty() {
        return Countdown::Forever;
    }
    let Some(used) = matching_tolerations(taints, tolerations) else {
        return Countdown::NotTolerated;
    };
    let mut first: Option<(Time, Time)> = None;
    for (taint, toleration) in taints.iter().zip(used) {
        let Some(secs) = toleration.toleration_seconds else {
            continue;
        };
        let from = countdown_start(taint, now).max(floor.min(now));
        let at = from + Duration::from_secs(secs.max(0).unsigned_abs());
        if first.is_none_or(|(_, earliest)| at < earliest) {
            first = Some((from, at));
        }
    }
    match first {
        Some((from, at)) => Countdown::Until { from, at },
        None => Countdown::Forever,
    }
}

/// The `floor` of [`countdown`] for a pod on a node whose NoExecute taints taint eviction
/// judges (`node_changed`): no countdown starts before it. A taint seen arriving
/// (`seen_from` set): from then, as upstream's. A taint found at a start or a takeover
/// (`seen_from` zero) counts from its `timeAdded`, but a pod created after that cannot have
/// been under it so long (re-created, bound, while the previous leader ran or while nobody led:
/// soak seed 26 saw pods deleted 3.3 s after their creation with a 6 s toleration): from its
/// creation then, the later of the two ([`countdown`] takes the max with the taint's start,
/// and never counts from later than now). A pod with no creation time counts from
/// `timeAdded`, as before.
///
/// Clocks: `creationTimestamp` is stamped by the API server, `timeAdded` by whoever wrote the
/// taint, `now` is this host's; all are wall clocks of one cluster, kept close by NTP (the
/// node lifecycle's own `timeAdded` and Lease judgement assume as much). An API server clock
/// ahead of ours makes the creation later than now: counted from now (first sight, upstream's
/// count, the longest). One behind ours makes the creation look earlier than it was, by the
/// skew: the count is then at worst the one from `timeAdded` it replaces (it is a max), never
/// shorter. Both stamps are whole seconds (the API truncates), so as with `timeAdded` the count
/// may start up to 1 s before the pod's real creation.
pub(crate) fn found_under_taint_since(seen_from: Time, created: Option<Time>) -> Time {
    if seen_from == Time::ZERO {
        created.unwrap_or(Time::ZERO)
    } else {
        seen_from
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Name, TaintEffect};

    fn name(s: &str) -> Name {
        Name::from(s)
    }

    fn taint(key: &str, value: &str, effect: TaintEffect) -> Taint {
        Taint {
            key: name(key),
            value: name(value),
            effect,
            time_added: None,
        }
    }

    fn tol(
        key: &str,
        operator: TolerationOperator,
        value: &str,
        effect: Option<TaintEffect>,
        seconds: Option<i64>,
    ) -> Toleration {
        Toleration {
            key: name(key),
            operator,
            value: name(value),
            effect,
            toleration_seconds: seconds,
        }
    }

    fn secs(tolerations: &[Option<i64>]) -> Vec<Toleration> {
        tolerations
            .iter()
            .map(|s| tol("k", TolerationOperator::Exists, "", None, *s))
            .collect()
    }

    use TaintEffect::{NoExecute, NoSchedule};
    use TolerationOperator::{Equal, Exists};

    /// The rules listed on `ToleratesTaint`, one assertion per rule and its negation.
    #[test]
    fn tolerates_taint_follows_upstream_rules() {
        let t = taint("foo", "bar", NoExecute);
        // Equal compares values; an empty operator decodes to Equal.
        assert!(tolerates(
            &tol("foo", Equal, "bar", Some(NoExecute), None),
            &t
        ));
        assert!(!tolerates(
            &tol("foo", Equal, "baz", Some(NoExecute), None),
            &t
        ));
        // Exists ignores the value.
        assert!(tolerates(
            &tol("foo", Exists, "whatever", Some(NoExecute), None),
            &t
        ));
        // Key must match when set.
        assert!(!tolerates(
            &tol("other", Exists, "", Some(NoExecute), None),
            &t
        ));
        // Empty key with Exists matches every key (and, with no effect, everything).
        assert!(tolerates(&tol("", Exists, "", None, None), &t));
        assert!(tolerates(
            &tol("", Exists, "", None, None),
            &taint("x", "", NoSchedule)
        ));
        // Empty key with Equal is not validated by the matcher: matches any key with that value.
        assert!(tolerates(&tol("", Equal, "bar", None, None), &t));
        assert!(!tolerates(&tol("", Equal, "", None, None), &t));
        // Empty effect matches every effect; a set effect must be equal.
        assert!(tolerates(&tol("foo", Equal, "bar", None, None), &t));
        assert!(!tolerates(
            &tol("foo", Equal, "bar", Some(NoSchedule), None),
            &t
        ));
        // An unknown effect is compared by name.
        let custom = TaintEffect::Other(name("Custom"));
        let ct = taint("foo", "bar", custom.clone());
        assert!(tolerates(&tol("foo", Exists, "", Some(custom), None), &ct));
        assert!(!tolerates(
            &tol("foo", Exists, "", Some(NoExecute), None),
            &ct
        ));
        // An unknown operator matches nothing.
        let weird = TolerationOperator::Other(name("Sometimes"));
        assert!(!tolerates(
            &tol("foo", weird.clone(), "bar", None, None),
            &t
        ));
        assert!(!tolerates(&tol("", weird, "", None, None), &t));
    }

    #[test]
    fn numeric_operators_compare_taint_value_against_toleration_value() {
        let lt = TolerationOperator::Other(name("Lt"));
        let gt = TolerationOperator::Other(name("Gt"));
        let t = taint("slo", "950", NoExecute);
        assert!(tolerates(&tol("slo", lt.clone(), "1000", None, None), &t));
        assert!(!tolerates(&tol("slo", lt.clone(), "950", None, None), &t));
        assert!(tolerates(&tol("slo", gt.clone(), "-3", None, None), &t));
        assert!(!tolerates(&tol("slo", gt.clone(), "2000", None, None), &t));
        // Unparsable on either side: no match (never a panic).
        assert!(!tolerates(&tol("slo", lt.clone(), "x", None, None), &t));
        assert!(!tolerates(
            &tol("slo", gt, "1", None, None),
            &taint("slo", "99999999999999999999", NoExecute)
        ));
        assert!(!tolerates(
            &tol("slo", lt, "1", None, None),
            &taint("slo", "", NoExecute)
        ));
    }

    #[test]
    fn matching_tolerations_uses_the_first_match_per_taint() {
        let taints = [taint("a", "1", NoExecute), taint("b", "2", NoExecute)];
        let forever_a = tol("a", Exists, "", None, None);
        let sixty_a = tol("a", Exists, "", None, Some(60));
        let b = tol("b", Equal, "2", Some(NoExecute), Some(10));
        let tolerations = [forever_a.clone(), sixty_a, b.clone()];
        let used = matching_tolerations(&taints, &tolerations).expect("all tolerated");
        assert_eq!(used, vec![&forever_a, &b]);
        // One taint left untolerated: none.
        assert_eq!(matching_tolerations(&taints, &tolerations[..1]), None);
        assert_eq!(matching_tolerations(&taints, &[]), None);
        // No taints: everything tolerated with nothing used.
        assert_eq!(matching_tolerations(&[], &[]), Some(vec![]));
    }

    /// TestGetMinTolerationTime, its 5 cases.
    #[test]
    fn get_min_toleration_time() {
        let cases: [(&[Option<i64>], Option<Duration>); 5] = [
            (&[], Some(Duration::ZERO)),
            (&[None], None),
            (&[Some(1), Some(2)], Some(Duration::from_secs(1))),
            (&[Some(1), None], Some(Duration::from_secs(1))),
            (&[None, Some(1)], Some(Duration::from_secs(1))),
        ];
        for (input, expected) in cases {
            assert_eq!(min_toleration_time(&secs(input)), expected, "{input:?}");
        }
    }

    #[test]
    fn zero_or_negative_toleration_seconds_mean_now() {
        for s in [0, -1, i64::MIN] {
            assert_eq!(
                min_toleration_time(&secs(&[Some(300), Some(s), None])),
                Some(Duration::ZERO)
            );
        }
        assert_eq!(
            min_toleration_time(&secs(&[Some(i64::MAX)])),
            Some(Duration::from_secs(i64::MAX as u64))
        );
    }

    #[test]
    fn verdict_combines_matching_and_min_time() {
        let taints = [taint("node.kubernetes.io/unreachable", "", NoExecute)];
        let default_300 = [tol(
            "node.kubernetes.io/unreachable",
            Exists,
            "",
            Some(NoExecute),
            Some(300),
        )];
        assert_eq!(
            verdict(&taints, &default_300),
            Verdict::TolerateFor(Duration::from_secs(300))
        );
        assert_eq!(verdict(&taints, &[]), Verdict::NotTolerated);
        assert_eq!(verdict(&taints, &secs(&[None])), Verdict::NotTolerated);
        assert_eq!(
            verdict(&taints, &[tol("", Exists, "", None, None)]),
            Verdict::TolerateForever
        );
        assert_eq!(verdict(&[], &[]), Verdict::TolerateForever);
    }

    /// With every taint starting now, `countdown` is `verdict` as a deadline (upstream's);
    /// a taint's `timeAdded` moves its toleration's start back, never forward.
    #[test]
    fn countdown_counts_each_toleration_from_its_taints_time_added() {
        let now = Time::from_unix_millis(1_700_000_000_000);
        let s = Duration::from_secs;
        let ago = |secs: u64| Time::from_unix_millis(now.as_unix_millis() - secs * 1000);
        let since = |key: &str, added: Option<Time>| Taint {
            time_added: added,
            ..taint(key, "", NoExecute)
        };
        let tolerations = [
            tol("a", Exists, "", None, Some(100)),
            tol("b", Exists, "", None, Some(60)),
            tol("forever", Exists, "", None, None),
            tol("zero", Exists, "", None, Some(-5)),
        ];
        let until = |from: Time, secs: u64| Countdown::Until {
            from,
            at: from + s(secs),
        };
        let cases = [
            (vec![since("a", None), since("b", None)], until(now, 60)),
            // `timeAdded` has whole seconds: counted from the next one.
            (
                vec![since("a", Some(ago(50))), since("b", None)],
                until(ago(49), 100),
            ),
            (
                vec![since("a", Some(ago(30))), since("b", None)],
                until(now, 60),
            ),
            (vec![since("b", Some(now + s(30)))], until(now, 60)),
            (vec![since("zero", Some(ago(5)))], until(ago(4), 0)),
            (vec![since("forever", Some(ago(5)))], Countdown::Forever),
            (
                vec![since("a", None), since("other", None)],
                Countdown::NotTolerated,
            ),
            (vec![], Countdown::Forever),
        ];
        for (taints, expected) in cases {
            assert_eq!(
                countdown(&taints, &tolerations, now, Time::ZERO),
                expected,
                "{taints:?}"
            );
            let upstream = match verdict(&taints, &tolerations) {
                Verdict::NotTolerated => Countdown::NotTolerated,
                Verdict::TolerateFor(d) => until(now, d.as_secs()),
                Verdict::TolerateForever => Countdown::Forever,
            };
            if taints.iter().all(|t| t.time_added.is_none()) {
                assert_eq!(expected, upstream, "{taints:?}");
            }
        }
    }
}
