//! The real transport: each stage of a job is one API call, its answer fed back.

use super::*;

pub(super) struct Live;

impl Transport for Live {
    fn step(
        &mut self,
        wire: &mut Wire,
        job: Job,
        budget: Budget,
        now: Time,
        ctx: &mut DecodeContext,
        out: &mut Vec<Input>,
    ) -> Next {
        let health_write = matches!(job.action, Action::UpdateNodeConditions { .. });
        let started = std::time::Instant::now();
        let next = wire.with_budget(budget, |wire| live_step(wire, job, now, ctx, out));
        if health_write {
            wire.node_health_writes.push(started.elapsed());
        }
        next
    }

    fn may_deliver_event(&self, wire: &Wire, now: Time) -> bool {
        wire.gate(Budget::SharedLeavingReserve) <= now && wire.event_bucket.has_token(now)
    }

    fn next_event_at(&self, wire: &Wire) -> Time {
        let gate = wire.gate(Budget::SharedLeavingReserve);
        wire.event_bucket.next_available(gate).unwrap_or(Time::MAX)
    }

    fn deliver_event(&mut self, wire: &mut Wire, events: &mut VecDeque<Event>, now: Time) -> bool {
        wire.with_budget(Budget::SharedLeavingReserve, |wire| {
            send_event(wire, events, now)
        })
    }
}

fn send_event(wire: &mut Wire, events: &mut VecDeque<Event>, now: Time) -> bool {
    let Some(event) = events.pop_front() else {
        return false;
    };
    wire.event_seq += 1;
    let (namespace, body) = request::event_body(&event_record(&event), now, wire.event_seq);
    let path = match request::events_path(&namespace) {
        Ok(p) => p,
        Err(e) => {
            debug!("event {} not recorded: {e}", event.reason);
            wire.stats.events_failed += 1;
            return true;
        }
    };
    let bytes = body.to_string().into_bytes();
    match wire.call(Verb::Create, now, |c| c.post::<IgnoredAny>(&path, &bytes)) {
        Ok(_) => {
            wire.event_bucket.try_take(now);
            wire.stats.events_sent += 1;
            true
        }
        Err(ApiError::Throttled { .. }) => {
            events.push_front(event);
            false
        }
        Err(e) => {
            wire.event_bucket.try_take(now);
            debug!("event {} {} not recorded: {e}", event.reason, event.message);
            wire.stats.events_failed += 1;
            true
        }
    }
}

/// A successful write's answer is the object as it now is: it goes to the controllers
/// (and so into the store) ahead of the write's result, so the next write of the same
/// object carries its new resourceVersion instead of meeting a 409, and a late watch
/// event of the old version is recognised as older. An answer that does not decode (a
/// Status for a pod deleted at once) is left to the watch.
fn absorb_answer(action: &Action, bytes: &[u8], ctx: &mut DecodeContext, out: &mut Vec<Input>) {
    match action {
        Action::UpdateNodeConditions { .. }
        | Action::PatchNodeTaints { .. }
        | Action::PatchNodeLabels { .. }
        | Action::PatchNodeFencing { .. } => match decode_object::<Node>(bytes, ctx) {
            Ok(node) => out.push(Input::NodeUpsert(node)),
            Err(e) => debug!("{}: answer not absorbed: {e}", describe(action)),
        },
        Action::MarkPodNotReady { .. }
        | Action::SetPodStatusNodeLost { .. }
        | Action::DeletePod { .. }
        | Action::EvictPod { .. } => match decode_object::<Pod>(bytes, ctx) {
            // A pod's answer without a node (never the case for the pods we write) is
            // not one of the bound pods the store holds.
            Ok(pod) if pod.node_name.is_some() => out.push(Input::PodUpsert(pod)),
            Ok(_) => {}
            Err(e) => debug!("{}: answer not absorbed: {e}", describe(action)),
        },
        Action::ReadLease { .. }
        | Action::ReadFenceTarget { .. }
        | Action::RunFenceCommand { .. }
        | Action::RecordEvent(_) => {}
    }
}

/// One call of a job, for real.
fn live_step(
    wire: &mut Wire,
    mut job: Job,
    now: Time,
    ctx: &mut DecodeContext,
    out: &mut Vec<Input>,
) -> Next {
    let planned = match plan(&job, now) {
        Ok(p) => p,
        Err(e) => return finish(&job, Outcome::Failed(e), out),
    };
    match planned {
        Plan::Patch(path, body) => match wire.patch(now, &path, &body) {
            Ok(answer) => {
                absorb_answer(&job.action, &answer, ctx, out);
                match job.action {
                    Action::EvictPod { .. } => {
                        job.stage = Stage::Delete;
                        Next::Continue(job)
                    }
                    _ => finish(&job, Outcome::Ok, out),
                }
            }
            Err(e) => match after_write_error(classify(e), &mut job) {
                AfterError::Reread => {
                    job.stage = Stage::Reread;
                    Next::Continue(job)
                }
                AfterError::RetryLabels => {
                    wire.stats.conflict_retries += 1;
                    job.not_before = now.max(wire.client.now()) + wire.jittered(LABEL_RETRY_DELAY);
                    Next::Delay(job)
                }
                AfterError::End(failure) => fail(job, failure, out),
            },
        },
        Plan::Delete(path, uid) => match wire.delete_pod(now, &path, &uid) {
            Ok(answer) => {
                absorb_answer(&job.action, &answer, ctx, out);
                finish(&job, Outcome::Ok, out)
            }
            Err(e) => fail(job, classify(e), out),
        },
        Plan::RereadNode(path) => match wire.get::<Node>(now, &path, ctx) {
            Ok(node) => {
                // The fresh node first: the controller decides again on it.
                out.push(Input::NodeUpsert(node));
                finish(&job, Outcome::Conflict, out)
            }
            Err(e) => match reread_failure(classify(e)) {
                Some(outcome) => finish(&job, outcome, out),
                None => Next::Hold(job),
            },
        },
        Plan::ReadLease(path) => read_lease(wire, job, now, &path, ctx, out),
        Plan::ReadFenceTarget(node, lease) => {
            read_fence_target(wire, None, job, now, &node, &lease, ctx, out)
        }
    }
}
