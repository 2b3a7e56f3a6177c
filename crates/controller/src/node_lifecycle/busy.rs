//! What a node's entry keeps only while work on it is under way, in a box a settled node does
//! not have.

use super::{EvictionJob, LeaseEvidence, TaintOp, TaintWrite, Verdict};
use crate::actions::ActionId;
use crate::time::Time;

/// What a node keeps only while work on it is under way (a verdict, a taint or label write, a
/// legacy eviction) or after a live Lease read gave evidence. Most nodes of a fleet have none
/// of it, most of the time: it lives in a box that a settled node does not have (`BusySlot`),
/// so the entry every node has stays small.
#[derive(Debug)]
pub(super) struct Busy {
    pub(crate) verdict: Verdict,
    pub(crate) verdict_tries: u32,
    /// The probe time a live Lease read confirmed as stale (evidence for the verdict).
    pub(crate) lease_confirmed_for: Option<Time>,
    /// What that read found, for the decision log.
    pub(crate) lease_evidence: Option<LeaseEvidence>,
    pub(crate) taint_write: Option<TaintWrite>,
    pub(crate) taint_ops: Vec<TaintOp>,
    pub(crate) taint_tries: u32,
    /// A conflicted taint write waits for its retry timer.
    pub(crate) taint_retry_pending: bool,
    pub(crate) label_write: Option<ActionId>,
    pub(crate) legacy_job: Option<EvictionJob>,
}

/// A settled node's `Busy`: what reading a node without a box finds.
const SETTLED: &Busy = &Busy::settled();

impl Busy {
    const fn settled() -> Busy {
        Busy {
            verdict: Verdict::Idle,
            verdict_tries: 0,
            lease_confirmed_for: None,
            lease_evidence: None,
            taint_write: None,
            taint_ops: Vec::new(),
            taint_tries: 0,
            taint_retry_pending: false,
            label_write: None,
            legacy_job: None,
        }
    }

    fn is_settled(&self) -> bool {
        self.verdict == Verdict::Idle
            && self.verdict_tries == 0
            && self.lease_confirmed_for.is_none()
            && self.lease_evidence.is_none()
            && self.taint_write.is_none()
            && self.taint_ops.is_empty()
            && self.taint_tries == 0
            && !self.taint_retry_pending
            && self.label_write.is_none()
            && self.legacy_job.is_none()
    }
}

/// A node's [`Busy`], boxed while it is not settled.
#[derive(Debug, Default)]
pub(super) struct BusySlot(Option<Box<Busy>>);

impl BusySlot {
    pub(super) fn get(&self) -> &Busy {
        self.0.as_deref().unwrap_or(SETTLED)
    }

    /// For a change: the box is made on the first write, and dropped when the change leaves
    /// the node settled (see `BusyMut`'s `Drop`).
    pub(super) fn get_mut(&mut self) -> BusyMut<'_> {
        BusyMut(&mut self.0)
    }
}

pub(super) struct BusyMut<'a>(&'a mut Option<Box<Busy>>);

impl std::ops::Deref for BusyMut<'_> {
    type Target = Busy;
    fn deref(&self) -> &Busy {
        self.0.as_deref().unwrap_or(SETTLED)
    }
}

impl std::ops::DerefMut for BusyMut<'_> {
    fn deref_mut(&mut self) -> &mut Busy {
        self.0.get_or_insert_with(|| Box::new(Busy::settled()))
    }
}

impl Drop for BusyMut<'_> {
    fn drop(&mut self) {
        if self.0.as_deref().is_some_and(Busy::is_settled) {
            *self.0 = None;
        }
    }
}
