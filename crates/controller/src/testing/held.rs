//! The held-answers mode of the fake API (`FakeApi::hold_answers`): actions wait, and the test
//! answers the one it picks, when it picks, executed or failed.

use std::collections::VecDeque;

use crate::inputs::{EvictionResult, FenceTargetOutcome};
use crate::{Action, Input, LeaseReadOutcome, Outcome};

use super::FakeApi;

/// How [`FakeApi::answer_held`] answers a held action.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HeldAnswer {
    /// Executed as any action is (a 409 on a stale resourceVersion included).
    Execute,
    /// Failed: a 500 for a write or an eviction, a refused connection for a live read.
    Fail,
}

impl FakeApi {
    /// Answers held action `i` (see `hold_answers`); what the controllers return meanwhile
    /// is held in turn. Nothing happens when there is no action `i`.
    pub fn answer_held(&mut self, i: usize, how: HeldAnswer) {
        if i >= self.held.len() {
            return;
        }
        let action = self.held.remove(i);
        let mut inputs = VecDeque::new();
        match how {
            HeldAnswer::Fail => {
                let fail = || String::from("fake 500");
                let input = match action {
                    Action::ReadLease { id, .. } => Input::LeaseRead {
                        id,
                        outcome: LeaseReadOutcome::Failed(String::from("connection refused")),
                    },
                    Action::ReadFenceTarget { id, .. } => Input::FenceTargetRead {
                        id,
                        outcome: FenceTargetOutcome::Failed(fail()),
                    },
                    Action::EvictPod { id, .. } => Input::EvictionResult {
                        id,
                        result: EvictionResult::Error(fail()),
                    },
                    other => match other.id() {
                        Some(id) => Input::Result {
                            id,
                            outcome: Outcome::Failed(fail()),
                        },
                        None => return,
                    },
                };
                inputs.push_back(input);
            }
            HeldAnswer::Execute => {
                // Logged when it was held: executed without logging it again.
                let logged = self.log.len();
                self.execute(action, &mut inputs);
                self.log.truncate(logged);
            }
        }
        while let Some(input) = inputs.pop_front() {
            self.feed(input);
        }
    }
}
