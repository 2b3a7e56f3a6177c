//! How the executor's calls reach the cluster: for real ([`Live`]) or not at all ([`DryRun`]).
//! The queue, the priority classes, the budgets, the backoff and the retries are the
//! executor's and the same for both; a transport only carries out one stage of one job, and
//! says how events go.

use super::*;

pub(super) trait Transport {
    /// Carries out `job`'s current stage, spending `budget`; what became of the job.
    fn step(
        &mut self,
        wire: &mut Wire,
        job: Job,
        budget: Budget,
        now: Time,
        ctx: &mut DecodeContext,
        out: &mut Vec<Input>,
    ) -> Next;

    /// Whether the head event may be delivered now, one call of the run's budget.
    fn may_deliver_event(&self, wire: &Wire, now: Time) -> bool;

    /// When the head event can go, with no action waiting (at or before now: at once).
    fn next_event_at(&self, wire: &Wire) -> Time;

    /// Delivers the head event; `false`: held, end this run.
    fn deliver_event(&mut self, wire: &mut Wire, events: &mut VecDeque<Event>, now: Time) -> bool;

    /// Events that cost no call, delivered while no action waits before them.
    fn deliver_free_events(&mut self, _events: &mut VecDeque<Event>) {}

    /// A watched object on its way to the controllers (see [`DryRun`]'s shadows).
    fn overlay(&mut self, input: Input) -> Input {
        input
    }

    /// Keeps `input`'s object as the one dry-run builds on while the server's copy stays at its
    /// version (shadow mode: the object without the incumbent's writes).
    fn keep_as_shadow(&mut self, _input: &Input) {}

    /// Shadow mode on or off (see [`DryRun`]'s shadows).
    fn set_shadow_mode(&mut self, _on: bool) {}

    /// Adds what this transport counts to the executor's stats.
    fn report(&self, _stats: &mut ExecutorStats) {}

    /// The dry-run record, when this is the dry-run transport.
    fn dry_run(&self) -> Option<&DryRun> {
        None
    }
}
