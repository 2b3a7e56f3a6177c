//! `decision-late`: no eviction later than upstream's time plus an allowance.
//!
//! `pod-not-evicted` (liveness) gives every due pod 10 s and moves its deadline back for every
//! fault that stops the daemons. This rule is tighter and judges only what a healthy daemon
//! owes: a pod whose toleration ran out (due = the first landing of its node's NoExecute taint
//! run, or the pod's creation if later, + tolerationSeconds) is deleted by
//! `due + reconnect + slack`, where a connection reset on a healthy server (watch drop, 410,
//! corrupt line, a short API restart) may push that back to its end + the same (the daemon
//! only has to reconnect: watch backoff + one round trip, or the relist). Any fault that stops
//! or slows a daemon (`FaultClass::Blocking`) between the taint and the deadline excuses the
//! obligation (counted, not judged). A taint removed before the pod was due (+ the zone
//! allowance: the untaint may have been decided before) ends the obligation; one removed
//! later does not (the pod should have been deleted by then).

use std::time::Duration;

use super::invariants::{Checker, FaultClass};
use super::zone_rules::before;
use node_lifecycled::time::Time;

/// A taint run (start, end if it ended) of a pod's node.
type Run = (Time, Option<Time>);

impl Checker {
    /// The deadline of a deletion due at `due` for a taint run that began at `start`, knowing
    /// the faults that began by `upto` (a deletion is not delayed by what came after it);
    /// `Err` names a fault that stopped the daemons meanwhile.
    pub(super) fn decision_deadline(
        &self,
        start: Time,
        due: Time,
        upto: Option<Time>,
    ) -> Result<Time, &'static str> {
        let allowance = self.limits.reconnect_allowance + self.limits.decision_slack;
        let mut deadline = due + allowance;
        loop {
            let pushed = self
                .fault_windows
                .iter()
                .filter(|w| w.0 == FaultClass::Reset)
                .filter(|w| w.1 <= deadline && upto.is_none_or(|u| w.1 <= u))
                .map(|w| w.2 + allowance)
                .max()
                .filter(|&end| end > deadline);
            match pushed {
                Some(end) => deadline = end,
                None => break,
            }
        }
        let end = upto.map_or(deadline, |u| u.min(deadline));
        if let Some(w) = self
            .fault_windows
            .iter()
            .find(|w| w.0 == FaultClass::Blocking && w.1 <= end && w.2 >= start)
        {
            return Err(w.3);
        }
        let waits_from = before(due, Duration::from_secs(3)).max(start);
        Ok(deadline + self.starved(waits_from, deadline))
    }

    /// The connection resets that began between `from` and `to`, relative to `due`.
    fn resets_between(&self, from: Time, to: Time, due: Time) -> String {
        let text: Vec<String> = self
            .fault_windows
            .iter()
            .filter(|w| w.0 == FaultClass::Reset && w.1 >= from && w.1 <= to)
            .map(|w| {
                let offset = if w.1 >= due {
                    format!("+{:.1}", w.1.since(due).as_secs_f64())
                } else {
                    format!("-{:.1}", due.since(w.1).as_secs_f64())
                };
                format!("{} at due{offset}s", w.3)
            })
            .collect();
        if text.is_empty() {
            "no connection reset".into()
        } else {
            text.join(", ")
        }
    }

    /// A pod deleted at `at` (its first deletion): judged when it was due before.
    pub(super) fn check_decision_at_deletion(&mut self, pod: &str, at: Time) {
        let Some(p) = self.pods.get(pod) else {
            return;
        };
        if p.deleted != Some(at) {
            return;
        }
        let (Some(toleration), Some(n)) = (p.toleration, self.nodes.get(&p.node)) else {
            return;
        };
        let run: Run = match (n.noexec_since, n.last_run) {
            (Some(since), _) => (since, None),
            (None, Some((start, end))) => (start, Some(end)),
            _ => return,
        };
        let key = (p.created, run.0);
        if p.decisions_judged.contains(&key) {
            return;
        }
        let due = run.0.max(p.created) + toleration;
        let node = p.node.clone();
        if at <= due {
            self.judged_decision(pod, key);
            self.obligations.decisions_on_time += 1;
            return;
        }
        if run
            .1
            .is_some_and(|end| end <= due + self.limits.zone_allowance)
        {
            return;
        }
        self.judged_decision(pod, key);
        match self.decision_deadline(run.0, due, Some(at)) {
            Err(_) => self.obligations.decisions_excused += 1,
            Ok(deadline) if at <= deadline => {
                self.obligations.decisions_on_time += 1;
                let late = at.since(due);
                let worst = &mut self.obligations.worst_decision_lateness;
                *worst = (*worst).max(late);
            }
            Ok(deadline) => {
                let resets = self.resets_between(before(run.0, Duration::from_secs(5)), at, due);
                self.violation(
                    at,
                    "decision-late",
                    format!(
                        "{pod} on {node} deleted {:.1}s after its {}s toleration ran out, \
                         allowed {:.1}s ({resets})",
                        at.since(due).as_secs_f64(),
                        toleration.as_secs(),
                        deadline.since(due).as_secs_f64()
                    ),
                );
            }
        }
    }

    /// The pods still there past their deadline (called with the liveness checks).
    pub(super) fn check_decisions(&mut self, now: Time) {
        let mut found = Vec::new();
        let mut judged = Vec::new();
        let mut excused = 0;
        for (key, p) in &self.pods {
            let (Some(toleration), Some(n)) = (p.toleration, self.nodes.get(&p.node)) else {
                continue;
            };
            if p.deleted.is_some() {
                continue;
            }
            let runs: [Option<Run>; 2] = [
                n.last_run.map(|(s, e)| (s, Some(e))),
                n.noexec_since.map(|s| (s, None)),
            ];
            for (start, end) in runs.into_iter().flatten() {
                let obligation = (p.created, start);
                if p.decisions_judged.contains(&obligation) || end.is_some_and(|e| e < p.created) {
                    continue;
                }
                let due = start.max(p.created) + toleration;
                if end.is_some_and(|e| e <= due + self.limits.zone_allowance) {
                    judged.push((key.clone(), obligation));
                    continue;
                }
                match self.decision_deadline(start, due, None) {
                    Err(_) => {
                        judged.push((key.clone(), obligation));
                        excused += 1;
                    }
                    Ok(deadline) if now > deadline => {
                        judged.push((key.clone(), obligation));
                        let resets =
                            self.resets_between(before(start, Duration::from_secs(5)), now, due);
                        found.push(format!(
                            "{key} on {} still there {:.1}s after its {}s toleration ran out, \
                             allowed {:.1}s ({resets})",
                            p.node,
                            now.since(due).as_secs_f64(),
                            toleration.as_secs(),
                            deadline.since(due).as_secs_f64()
                        ));
                    }
                    Ok(_) => {}
                }
            }
        }
        self.obligations.decisions_excused += excused;
        for (pod, obligation) in judged {
            self.judged_decision(&pod, obligation);
        }
        for detail in found {
            self.violation(now, "decision-late", detail);
        }
    }

    fn judged_decision(&mut self, pod: &str, obligation: (Time, Time)) {
        if let Some(p) = self.pods.get_mut(pod) {
            p.decisions_judged.push_back(obligation);
            if p.decisions_judged.len() > 4 {
                p.decisions_judged.pop_front();
            }
        }
    }
}
