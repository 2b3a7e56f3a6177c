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

/// The requests sent and not answered yet, with what each one is about (`P`).
#[derive(Debug)]
pub(crate) struct InFlight<P> {
    ids: ActionIds,
    requests: HashMap<ActionId, P>,
}

impl<P> InFlight<P> {
    pub(crate) fn starting_after(base: u64) -> InFlight<P> {
        InFlight {
            ids: ActionIds::starting_after(base),
            requests: HashMap::new(),
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
        self.requests.insert(id, about);
        out.push(action(id));
        id
    }

    /// The request `id` answered, forgotten from now on (`None`: unknown or answered before).
    pub(crate) fn answered(&mut self, id: ActionId) -> Option<P> {
        self.requests.remove(&id)
    }

    /// What the request `id` is about, while it is not answered.
    pub fn get(&self, id: ActionId) -> Option<&P> {
        self.requests.get(&id)
    }

    pub fn len(&self) -> usize {
        self.requests.len()
    }

    pub(crate) fn values(&self) -> impl Iterator<Item = &P> {
        self.requests.values()
    }
}
