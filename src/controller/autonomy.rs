//! Edge autonomy (issue #16): a node carrying OpenYurt's autonomy annotations keeps its pods
//! when its link drops. The node itself is marked Unknown and tainted exactly as upstream (so
//! the scheduler avoids it), but its pods are not marked NotReady (their endpoints stay) and
//! the not-ready/unreachable NoExecute taints evict them no sooner than the autonomy duration
//! after the taint was added (never, for "forever"), even when their own `tolerationSeconds`
//! is shorter. Any other NoExecute taint (a user's, a custom condition taint) evicts as usual.
//!
//! The annotations are read at decode time (`model::Autonomy`); `autonomy = false` in the
//! config ignores them.

use crate::model::{Autonomy, Node, Taint, TaintEffect, Toleration, taint_keys};
use crate::time::Time;

use super::settings::Settings;
use super::tolerations::{Verdict, verdict};

impl Settings {
    pub fn is_autonomous(&self, node: &Node) -> bool {
        self.autonomy && node.autonomy != Autonomy::None
    }
}

/// The taints autonomy stretches: the node lifecycle's own NoExecute taints.
fn covered(taint: &Taint) -> bool {
    taint.effect == TaintEffect::NoExecute
        && (&*taint.key == taint_keys::NOT_READY || &*taint.key == taint_keys::UNREACHABLE)
}

/// The verdict for a pod on a node with `autonomy`: upstream's verdict over the taints autonomy
/// does not cover, combined with, for the covered ones, the later of the pod's own deadline and
/// `timeAdded + duration` (the moment the taint was seen when it has no `timeAdded`).
pub fn autonomous_verdict(
    autonomy: Autonomy,
    taints: &[Taint],
    tolerations: &[Toleration],
    now: Time,
) -> Verdict {
    let upstream = verdict(taints, tolerations);
    let hold_until = |t: &Taint| -> Option<Time> {
        match autonomy {
            Autonomy::None => Some(now),
            Autonomy::Forever => None,
            Autonomy::For(d) => Some(t.time_added.unwrap_or(now) + d),
        }
    };
    if autonomy == Autonomy::None || !taints.iter().any(covered) {
        return upstream;
    }
    let (mine, others): (Vec<Taint>, Vec<Taint>) = taints.iter().cloned().partition(covered);
    // Deadlines as instants; `None` is never.
    let deadline = |v: Verdict| -> Option<Time> {
        match v {
            Verdict::NotTolerated => Some(now),
            Verdict::TolerateFor(d) => Some(now + d),
            Verdict::TolerateForever => None,
        }
    };
    let others_deadline = deadline(verdict(&others, tolerations));
    let own = deadline(verdict(&mine, tolerations));
    // The latest hold among the covered taints (both kinds at once only during a swap).
    let hold = mine
        .iter()
        .map(hold_until)
        .try_fold(now, |acc, h| h.map(|h| acc.max(h)));
    let mine_deadline = match (own, hold) {
        (Some(a), Some(b)) => Some(a.max(b)),
        _ => None,
    };
    let at = match (others_deadline, mine_deadline) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
    match at {
        None => Verdict::TolerateForever,
        Some(at) if at <= now && verdict(&others, tolerations) == Verdict::NotTolerated => {
            Verdict::NotTolerated
        }
        Some(at) => Verdict::TolerateFor(at.since(now)),
    }
}
