//! The live reads that guard a verdict or a fence: a node's Lease, and a fence target's node
//! and Lease together.

use super::*;

/// Fencing's live read: the node (decoded whole), then its Lease. Sent in dry-run too.
#[allow(clippy::too_many_arguments)]
pub(super) fn read_fence_target(
    wire: &mut Wire,
    shadows: Option<&Shadows>,
    job: Job,
    now: Time,
    node_path: &str,
    lease_path: &str,
    ctx: &mut DecodeContext,
    out: &mut Vec<Input>,
) -> Next {
    let Action::ReadFenceTarget { id, .. } = &job.action else {
        return Next::Done;
    };
    let id = *id;
    let bytes = match wire.call(Verb::Get, now, |c| c.get_bytes(node_path)) {
        Ok(b) => b,
        Err(e) => return fail(job, classify(e), out),
    };
    let mut target = match fencing::decode_target(&bytes) {
        Ok(t) => t,
        Err(e) => {
            return finish(&job, Outcome::Failed(format!("GET {node_path}: {e}")), out);
        }
    };
    if let Some(shadow) = shadows.and_then(|s| {
        s.node_version(
            node_path_name(node_path),
            &target.uid,
            &target.resource_version,
        )
    }) {
        // Dry-run "wrote" Ready=Unknown (and taints) that the server does not have: the
        // decision is checked against what dry-run made of the node, as every other.
        fencing::overlay(&mut target, shadow);
    }
    target.lease = match wire.get::<Lease>(now, lease_path, ctx) {
        Ok(lease) => LeaseReadOutcome::Found(lease),
        Err(e) => match classify(e) {
            Failure::Hold => return Next::Hold(job),
            Failure::NotFound => LeaseReadOutcome::NotFound,
            Failure::Conflict => LeaseReadOutcome::Failed("409 on a read".into()),
            Failure::Failed(m) => LeaseReadOutcome::Failed(m),
        },
    };
    out.push(Input::FenceTargetRead {
        id,
        outcome: FenceTargetOutcome::Found(Box::new(target)),
    });
    Next::Done
}

pub(super) fn read_lease(
    wire: &mut Wire,
    job: Job,
    now: Time,
    path: &str,
    ctx: &mut DecodeContext,
    out: &mut Vec<Input>,
) -> Next {
    let Action::ReadLease { id, .. } = &job.action else {
        return Next::Done;
    };
    let id = *id;
    match wire.get::<Lease>(now, path, ctx) {
        Ok(lease) => {
            out.push(Input::LeaseRead {
                id,
                outcome: LeaseReadOutcome::Found(lease),
            });
            Next::Done
        }
        Err(e) => fail(job, classify(e), out),
    }
}
