//! The one way a machine asks the shell for something it wants answered: allocate an
//! [`ActionId`], remember what the request was about, push the [`Action`]. The answer comes
//! back as an input carrying the same id and finds its request again through
//! [`InFlight::answered`]; an id never handed out, or answered already, finds nothing.

use std::collections::HashMap;

use super::actions::{Action, ActionId};

/// Where each machine's ids start. Every machine numbers its own requests; the ranges keep the
/// ids unique across the one action stream, so a log line or a trace names one request.
pub(crate) const NODE_LIFECYCLE_IDS: u64 = 0;
pub(crate) const TAINT_EVICTION_IDS: u64 = 1 << 61;
pub(crate) const FENCING_IDS: u64 = 1 << 62;

/// Hands out a machine's ids: its range's start + 1, + 2, ...
#[derive(Debug)]
pub(crate) struct ActionIds {
    last: u64,
}

impl ActionIds {
    pub(crate) fn starting_after(base: u64) -> ActionIds {
        ActionIds { last: base }
    }

    pub(crate) fn allocate(&mut self) -> ActionId {
        self.last += 1;
        ActionId(self.last)
    }
}

/// The requests sent and not answered yet, with what each one is about (`P`), and how many of
/// them are of the one kind the machine asks about while deciding (the node lifecycle: its
/// verdicts). That count is kept as requests come and go, never found by a walk: a mass failure
/// keeps hundreds of thousands of pod writes in flight, and a walk of them at every node change
/// held a 65,000-node cluster's taint writes to 90 a second.
#[derive(Debug)]
pub(crate) struct InFlight<P> {
    ids: ActionIds,
    requests: HashMap<ActionId, P>,
    /// Which requests `counted` counts.
    kind: fn(&P) -> bool,
    counted: usize,
}

impl<P> InFlight<P> {
    /// Ids after `base`, counting no kind.
    pub(crate) fn starting_after(base: u64) -> InFlight<P> {
        InFlight::counting(base, |_| false)
    }

    /// Ids after `base`, counting the requests `kind` says are of it.
    pub(crate) fn counting(base: u64, kind: fn(&P) -> bool) -> InFlight<P> {
        InFlight {
            ids: ActionIds::starting_after(base),
            requests: HashMap::new(),
            kind,
            counted: 0,
        }
    }

    /// Allocates the id, records `about` under it and pushes `action(id)` to `out`.
    pub(crate) fn send(
        &mut self,
        about: P,
        action: impl FnOnce(ActionId) -> Action,
        out: &mut Vec<Action>,
    ) -> ActionId {
        let id = self.ids.allocate();
        self.counted += usize::from((self.kind)(&about));
        self.requests.insert(id, about);
        out.push(action(id));
        id
    }

    /// The request `id` answered, forgotten from now on (`None`: unknown or answered before).
    pub(crate) fn answered(&mut self, id: ActionId) -> Option<P> {
        let about = self.requests.remove(&id)?;
        self.counted -= usize::from((self.kind)(&about));
        Some(about)
    }

    /// What the request `id` is about, while it is not answered.
    pub fn get(&self, id: ActionId) -> Option<&P> {
        self.requests.get(&id)
    }

    pub fn len(&self) -> usize {
        self.requests.len()
    }

    /// How many requests in flight are of the counted kind (test builds check it against a
    /// walk of every request).
    pub(crate) fn counted(&self) -> usize {
        debug_assert_eq!(
            self.counted,
            self.requests.values().filter(|p| (self.kind)(p)).count(),
            "the count of requests of the counted kind"
        );
        self.counted
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Name;

    fn ask(f: &mut InFlight<&'static str>, about: &'static str) -> ActionId {
        f.send(
            about,
            |id| Action::ReadLease {
                id,
                node: Name::from("n"),
            },
            &mut Vec::new(),
        )
    }

    #[test]
    fn the_counted_kind_follows_sends_and_answers_and_ignores_the_rest() {
        let mut f = InFlight::counting(0, |p: &&str| *p == "verdict");
        let v1 = ask(&mut f, "verdict");
        let p1 = ask(&mut f, "pod");
        let v2 = ask(&mut f, "verdict");
        assert_eq!((f.len(), f.counted()), (3, 2));
        assert_eq!(f.answered(p1), Some("pod"));
        assert_eq!(f.counted(), 2);
        assert_eq!(f.answered(v1), Some("verdict"));
        // Answered twice, or never asked: nothing found, nothing counted down.
        assert_eq!(f.answered(v1), None);
        assert_eq!(f.answered(ActionId(99)), None);
        assert_eq!((f.len(), f.counted()), (1, 1));
        assert_eq!(f.answered(v2), Some("verdict"));
        assert_eq!((f.len(), f.counted()), (0, 0));
    }
}
