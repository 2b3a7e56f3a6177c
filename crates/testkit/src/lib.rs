//! What the product's tests, its examples and the simulator share, in one place instead of
//! copies included by `#[path]`:
//! - [`CountingAlloc`]: the one counting allocator a test or example binary installs
//!   (`counting_alloc.rs`);
//! - [`runqueue_wait`] and [`runqueue_wait_of`]: how long a thread waited for a CPU, which the
//!   wall-clock bounds of the I/O tests subtract so they hold on a busy machine (`runqueue.rs`).
//!
//! The fake API server the controller suites share is the controller crate's own
//! (`node_lifecycled_controller::testing::FakeApi`, behind its `testing` feature). Dev-only: the
//! daemon never links this crate.

mod counting_alloc;
mod runqueue;

pub use counting_alloc::{
    CountingAlloc, allocations_made, live_blocks, live_bytes, take_largest_allocation,
};
pub use runqueue::{runqueue_wait, runqueue_wait_of};
