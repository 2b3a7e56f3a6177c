//! Test support, not part of the product: the one fake API server the controller suites run
//! against ([`FakeApi`]), reachable from the integration tests too. Nothing outside tests uses
//! it; it is public only so that `tests/` can link it, and hidden from the docs.
//!
//! [`FakeApi`] holds nodes, leases and pods with resourceVersions, drives [`Controllers`]
//! (always: the cache hold, the brakes and the routing to taint eviction and fencing are on
//! every suite's path), executes every [`Action`] they return and feeds the results back until
//! nothing is left. A write carrying a stale resourceVersion is answered `Conflict`, after the
//! node as it now is (the executor's re-read, `runtime/executor/live.rs`).
//!
//! How a write's answer and its watch echo reach the controllers is the [`EchoOrder`]:
//!
//! - [`EchoOrder::EchoFirst`] (the default): the written object, then the answer. What the live
//!   executor does (it feeds the answer's body before the result: `absorb_answer` in
//!   `runtime/executor/live.rs`), and what the node lifecycle suites were written against.
//! - [`EchoOrder::AnswerFirst`]: the answer, then the echo (an answer whose body is not
//!   absorbed, the watch right behind it).
//! - [`EchoOrder::AnswerOnly`]: the answer alone; the echoes wait in [`FakeApi::late`] until
//!   [`FakeApi::deliver_late`] (a lagging or broken watch).
//!
//! Its other knobs, each what a suite relies on: [`Faults`] (writes failing or answered 409,
//! live reads failing or lagging), `alive` (kubelets that renew their Lease and post status
//! every 10 s while time runs), `evictions_remove` (an eviction deletes the pod at once, or
//! leaves it terminating: a dead kubelet), `eviction_answer` (the test answers evictions
//! itself, or not at all), `standby` (a second daemon fed every watch event, which must decide
//! nothing); `conflicts` counts the 409s.
//!
//! For scripts that pick the order of everything (the randomized runs, `tests/fuzz_support/
//! controller/`): `hold_answers` holds every action until [`FakeApi::answer_held`] answers the
//! one picked, executed or failed ([`HeldAnswer`]); `wire` passes every input through the test's
//! hands first (rendered to JSON and decoded, as a watch delivers it); `decisions` takes the
//! controllers' decisions after every turn, in order with `log`; `trace` prints the run.
//!
//! A suite that tests one machine alone still goes through [`Controllers`] and says why in its
//! header: [`Controllers::without_taint_eviction`] (the node lifecycle suites, as upstream's
//! `node_lifecycle_controller_test.go`) or [`Controllers::taint_eviction_alone`] (upstream's
//! `taint_eviction_test.go`).
//!
//! [`Controllers`]: crate::Controllers
//! [`Controllers::without_taint_eviction`]: crate::Controllers::without_taint_eviction
//! [`Controllers::taint_eviction_alone`]: crate::Controllers::taint_eviction_alone
//! [`Action`]: crate::Action

mod fake_api;
mod faults;
mod held;
mod live_reads;
mod reads;

pub use fake_api::{EchoOrder, EvictionAnswer, FakeApi, Faults, Wire};
pub use held::HeldAnswer;
