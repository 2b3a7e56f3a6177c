//! The invariants, checked on every action the controllers return, against the fake API's
//! objects as they are when the action is returned and the bookkeeping of `world.rs`.

use std::time::Duration;

use node_lifecycled::controller::Action;
use node_lifecycled::model::{ConditionStatus, NodeConditionType, TaintEffect};
use node_lifecycled::time::Time;

use super::world::World;
use super::{GRACE, STARTUP_GRACE};

impl World {
    pub(super) fn check(&mut self, now: Time, action: &Action) -> Result<(), String> {
        match action {
            Action::UpdateNodeConditions { conditions, .. }
                if conditions
                    .iter()
                    .any(|c| c.kind.as_str() == "Ready" && c.status.as_str() == "Unknown") =>
            {
                self.seen.unknown_verdicts += 1
            }
            Action::PatchNodeTaints { taints, .. }
                if taints.iter().any(|t| t.effect.as_str() == "NoExecute") =>
            {
                self.seen.no_execute_taints += 1
            }
            Action::EvictPod { .. } => self.seen.evictions += 1,
            Action::ReadLease { .. } => self.seen.lease_reads += 1,
            _ => {}
        }
        let writes = !matches!(action, Action::RecordEvent(_) | Action::ReadLease { .. });
        if writes && !self.synced {
            return Err(format!("write before the initial sync: {action:?}"));
        }
        match action {
            Action::UpdateNodeConditions {
                node, conditions, ..
            } => {
                let (Some(fake), Some(book)) = (self.api.nodes.get(node), self.books.get(&**node))
                else {
                    return Err(format!("status write for deleted node {node}"));
                };
                let was_unknown = fake
                    .ready()
                    .is_some_and(|c| c.status == ConditionStatus::Unknown);
                let now_unknown = conditions.iter().any(|c| {
                    c.kind == NodeConditionType::Ready && c.status == ConditionStatus::Unknown
                });
                let grace = if fake.ready().is_some() {
                    GRACE
                } else {
                    STARTUP_GRACE
                };
                if now_unknown && !was_unknown && now.since(book.heard_at) < grace {
                    return Err(format!(
                        "{node} declared Unknown {:?} after it was last heard from (grace {grace:?})",
                        now.since(book.heard_at)
                    ));
                }
            }
            Action::PatchNodeTaints { node, .. }
            | Action::PatchNodeLabels { node, .. }
            | Action::ReadLease { node, .. }
                if !self.api.nodes.contains_key(node) =>
            {
                return Err(format!("action for deleted node {node}: {action:?}"));
            }
            Action::EvictPod {
                pod, uid, attempt, ..
            } => {
                let Some(fake) = self.api.pods.get(pod) else {
                    return Err(format!("eviction of unknown pod {pod}"));
                };
                if fake.uid != *uid {
                    return Err(format!("eviction of {pod} with a stale uid"));
                }
                // As upstream's taint manager: deleting a node does not cancel the evictions
                // already scheduled for its pods; and an eviction once started goes on through
                // its retries (upstream's worker cannot be cancelled either): the decision is
                // the first attempt's.
                let on = fake.node_name.as_deref().unwrap_or_default();
                let (Some(node), Some(book)) = (self.api.nodes.get(on), self.books.get(on)) else {
                    return Ok(());
                };
                if *attempt > 1 {
                    return Ok(());
                }
                let due = node
                    .taints
                    .iter()
                    .filter(|t| t.effect == TaintEffect::NoExecute)
                    .any(|t| match fake.tolerations.iter().find(|o| o.key == t.key) {
                        None => true,
                        Some(o) => match o.toleration_seconds {
                            None => false,
                            Some(s) => {
                                book.no_execute_since.or(t.time_added).is_some_and(|added| {
                                    now.since(added) >= Duration::from_secs(s.max(0) as u64)
                                })
                            }
                        },
                    });
                if !due {
                    return Err(format!(
                        "{pod} evicted but no NoExecute taint of {on} is due for it: {:?} vs {:?}",
                        node.taints, fake.tolerations
                    ));
                }
            }
            Action::MarkPodNotReady { pod, .. } | Action::DeletePod { pod, .. }
                if !self.api.pods.contains_key(pod) =>
            {
                return Err(format!("action for unknown pod {pod}: {action:?}"));
            }
            _ => {}
        }
        Ok(())
    }
}
