//! The executor's action queue: FIFO within a class, classes in priority order.
//!
//! When many nodes fall silent at once, every verdict brings about 30 pod writes (NotReady
//! marks, later evictions) behind it, all paced by the client throttle (qps 20 by default). In
//! one FIFO the 100th node's Ready=Unknown write would wait behind 3,000 pod writes, a minute
//! or more at qps 20; upstream has the same problem (#114295). Verdicts therefore go first: the
//! live Lease read that confirms a node is dead and its status write; then node taints and
//! labels; then pod deletions (a deleted pod leaves its Service endpoints anyway, and its
//! replacement is scheduled at once); then pod status writes (NotReady marks, NodeLost), which
//! would otherwise hold the evictions back by minutes. A later action is only ever submitted after the result of the one it
//! depends on, so reordering between classes cannot reorder a causal chain.
//!
//! Order alone would still leave a verdict waiting for a token of the client budget that the
//! pod writes keep spent: the live Lease reads spend a budget of their own (`kube::Budget`),
//! and the status write waits at most one token.

use std::collections::VecDeque;

use crate::controller::Action;
use crate::kube::Budget;

use super::Job;

/// Priority classes, most urgent first. The live Lease reads come first in a class of their
/// own: they spend their own budget, so a status write waiting for a shared token at the head
/// never holds one back.
const CLASSES: usize = 5;

fn class(action: &Action) -> usize {
    match action {
        Action::ReadLease { .. } => 0,
        Action::UpdateNodeConditions { .. } => 1,
        // Fencing is not urgent: its live read and patch wait with the other node patches.
        Action::PatchNodeTaints { .. }
        | Action::PatchNodeLabels { .. }
        | Action::ReadFenceTarget { .. }
        | Action::PatchNodeFencing { .. } => 2,
        Action::EvictPod { .. } | Action::DeletePod { .. } => 3,
        Action::MarkPodNotReady { .. }
        | Action::SetPodStatusNodeLost { .. }
        | Action::RecordEvent(_)
        | Action::RunFenceCommand { .. } => 4,
    }
}

/// The client budget an action spends (see `kube::Budget`): live Lease reads their own, status
/// writes the shared one, everything else the shared one leaving a reserve (which the executor
/// applies only while verdicts are being made).
pub(super) fn budget(action: &Action) -> Budget {
    match class(action) {
        0 => Budget::LiveReads,
        1 => Budget::Shared,
        _ => Budget::SharedLeavingReserve,
    }
}

#[derive(Default)]
pub(super) struct ActionQueue {
    classes: [VecDeque<Job>; CLASSES],
}

impl ActionQueue {
    pub(crate) fn push_back(&mut self, job: Job) {
        self.classes[class(&job.action)].push_back(job);
    }

    /// Back to the head of its class (a job that must be retried before newer ones).
    pub(crate) fn push_front(&mut self, job: Job) {
        self.classes[class(&job.action)].push_front(job);
    }

    #[cfg(test)]
    pub(crate) fn pop_front(&mut self) -> Option<Job> {
        self.classes.iter_mut().find_map(VecDeque::pop_front)
    }

    /// The client budget of the job `pop_front` would return.
    pub(crate) fn head_budget(&self) -> Option<Budget> {
        self.classes
            .iter()
            .find_map(|c| c.front())
            .map(|job| budget(&job.action))
    }

    /// The budgets the class heads spend, most urgent class first.
    pub(crate) fn head_budgets(&self) -> impl Iterator<Item = Budget> + '_ {
        self.classes
            .iter()
            .filter_map(|c| c.front())
            .map(|job| budget(&job.action))
    }

    /// The most urgent job whose budget has a token (`ready`), with that budget. The live Lease
    /// reads spend a budget of their own: when a mass failure queues thousands of them, the
    /// status writes of the verdicts already confirmed go on the shared budget meanwhile, instead
    /// of waiting until every read is made (5,000 nodes at qps 20: 250 s with no node marked).
    /// Classes on the shared budget keep their order: one whose head finds no token leaves none
    /// for those after it.
    pub(crate) fn pop_ready(&mut self, ready: impl Fn(Budget) -> bool) -> Option<(Job, Budget)> {
        for c in &mut self.classes {
            let Some(front) = c.front() else {
                continue;
            };
            let b = budget(&front.action);
            if ready(b) {
                return c.pop_front().map(|job| (job, b));
            }
            if b != Budget::LiveReads {
                return None;
            }
        }
        None
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.classes.iter().all(VecDeque::is_empty)
    }

    pub(crate) fn len(&self) -> usize {
        self.classes.iter().map(VecDeque::len).sum()
    }

    /// Every job, most urgent class first.
    pub(crate) fn drain(&mut self) -> impl Iterator<Item = Job> + '_ {
        self.classes.iter_mut().flat_map(|c| c.drain(..))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::ActionId;
    use crate::model::PodKey;
    use crate::runtime::executor::Stage;
    use crate::time::Time;

    fn job(action: Action) -> Job {
        Job {
            action,
            stage: Stage::Write,
            label_conflicts: 0,
            not_before: Time::ZERO,
        }
    }

    fn mark(i: u64) -> Action {
        Action::MarkPodNotReady {
            id: ActionId(i),
            pod: PodKey {
                namespace: "ns".into(),
                name: format!("p{i}").into(),
            },
            uid: "u".into(),
            node: "n1".into(),
        }
    }

    fn id(job: &Job) -> u64 {
        job.action.id().map_or(0, |id| id.0)
    }

    /// 100 nodes die at once: the 100th verdict must not wait behind 3,000 pod writes, nor an
    /// eviction behind the NotReady marks.
    #[test]
    fn verdicts_overtake_pod_writes_and_each_class_stays_fifo() {
        let mut q = ActionQueue::default();
        for i in 1..=30 {
            q.push_back(job(mark(i)));
        }
        q.push_back(job(Action::ReadLease {
            id: ActionId(100),
            node: "n2".into(),
        }));
        q.push_back(job(Action::PatchNodeTaints {
            id: ActionId(200),
            node: "n1".into(),
            uid: "u".into(),
            resource_version: "1".into(),
            taints: Vec::new(),
        }));
        q.push_back(job(Action::UpdateNodeConditions {
            id: ActionId(101),
            node: "n2".into(),
            uid: "u".into(),
            resource_version: "1".into(),
            conditions: Vec::new(),
        }));
        q.push_back(job(Action::DeletePod {
            id: ActionId(300),
            pod: PodKey {
                namespace: "ns".into(),
                name: "gone".into(),
            },
            uid: "u".into(),
        }));
        assert_eq!(q.len(), 34);
        let order: Vec<u64> = std::iter::from_fn(|| q.pop_front())
            .map(|j| id(&j))
            .collect();
        let mut expected = vec![100, 101, 200, 300];
        expected.extend(1..=30);
        assert_eq!(order, expected);
        assert!(q.is_empty());
    }

    #[test]
    fn a_job_put_back_is_next_within_its_class_only() {
        let mut q = ActionQueue::default();
        q.push_back(job(mark(1)));
        q.push_back(job(mark(2)));
        let first = q.pop_front().unwrap();
        q.push_back(job(Action::ReadLease {
            id: ActionId(9),
            node: "n".into(),
        }));
        q.push_front(first);
        let order: Vec<u64> = std::iter::from_fn(|| q.pop_front())
            .map(|j| id(&j))
            .collect();
        assert_eq!(order, [9, 1, 2]);
    }

    fn status(i: u64) -> Action {
        Action::UpdateNodeConditions {
            id: ActionId(i),
            node: "n0".into(),
            uid: "u".into(),
            resource_version: "1".into(),
            conditions: Vec::new(),
        }
    }

    fn read(i: u64) -> Action {
        Action::ReadLease {
            id: ActionId(i),
            node: format!("n{i}").into(),
        }
    }

    /// 5,000 nodes die at once: their live Lease reads wait for their own budget, and the
    /// status writes of the verdicts already confirmed go on the shared one meanwhile; pod
    /// writes behind a status write that finds no token wait.
    #[test]
    fn status_writes_go_on_the_shared_budget_while_live_reads_wait_for_theirs() {
        let mut q = ActionQueue::default();
        for i in 1..=3 {
            q.push_back(job(read(i)));
        }
        q.push_back(job(mark(10)));
        q.push_back(job(status(20)));
        let shared_only = |b: Budget| b != Budget::LiveReads;
        let (first, b) = q.pop_ready(shared_only).expect("the status write");
        assert_eq!((id(&first), b), (20, Budget::Shared));
        let (next, b) = q.pop_ready(shared_only).expect("the mark");
        assert_eq!((id(&next), b), (10, Budget::SharedLeavingReserve));
        assert!(q.pop_ready(shared_only).is_none(), "only reads are left");
        let (read, b) = q.pop_ready(|_| true).expect("a read");
        assert_eq!((id(&read), b), (1, Budget::LiveReads));
        // A status write that finds no token holds the pod writes behind it.
        q.push_back(job(mark(11)));
        q.push_back(job(status(21)));
        assert!(q.pop_ready(|b| b == Budget::SharedLeavingReserve).is_none());
        assert_eq!(
            q.head_budgets().collect::<Vec<_>>(),
            [
                Budget::LiveReads,
                Budget::Shared,
                Budget::SharedLeavingReserve
            ]
        );
    }
}
