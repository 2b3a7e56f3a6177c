//! Edge autonomy: a node carrying OpenYurt's autonomy annotations keeps its pods when its link
//! drops. The node itself is marked Unknown and tainted exactly as upstream (so
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
use super::tolerations::{Countdown, countdown, countdown_start};

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

/// The countdown for a pod on a node with `autonomy`: upstream's over the taints autonomy does
/// not cover, combined with, for the covered ones, the later of the pod's own deadline and
/// `timeAdded + duration` (each counted from its taint's start, `countdown_start`).
pub(crate) fn autonomous_countdown(
    autonomy: Autonomy,
    taints: &[Taint],
    tolerations: &[Toleration],
    now: Time,
    floor: Time,
) -> Countdown {
    if autonomy == Autonomy::None || !taints.iter().any(covered) {
        return countdown(taints, tolerations, now, floor);
    }
    let hold_until = |t: &Taint| -> Option<Time> {
        match autonomy {
            Autonomy::None => Some(now),
            Autonomy::Forever => None,
            Autonomy::For(d) => Some(countdown_start(t, now) + d),
        }
    };
    let (mine, others): (Vec<Taint>, Vec<Taint>) = taints.iter().cloned().partition(covered);
    // `(from, at)` of a countdown; `None` is never.
    let ends = |c: Countdown| -> Option<(Time, Time)> {
        match c {
            Countdown::NotTolerated => Some((now, now)),
            Countdown::Until { from, at } => Some((from, at)),
            Countdown::Forever => None,
        }
    };
    let others_countdown = countdown(&others, tolerations, now, floor);
    let others_end = ends(others_countdown);
    let own = ends(countdown(&mine, tolerations, now, floor));
    // The latest hold among the covered taints (both kinds at once only during a swap).
    let hold = mine
        .iter()
        .map(hold_until)
        .try_fold(now, |acc, h| h.map(|h| acc.max(h)));
    let mine_end = match (own, hold) {
        (Some((from, at)), Some(hold)) => Some((from, at.max(hold))),
        _ => None,
    };
    let end = match (others_end, mine_end) {
        (Some(a), Some(b)) => Some(if a.1 <= b.1 { a } else { b }),
        (a, b) => a.or(b),
    };
    match end {
        None => Countdown::Forever,
        Some((_, at)) if at <= now && others_countdown == Countdown::NotTolerated => {
            Countdown::NotTolerated
        }
        Some((from, at)) => Countdown::Until { from, at },
    }
}
