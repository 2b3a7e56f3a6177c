//! The imperative shell's machinery: the event loop, timers, rate limits, signals, sd_notify.

pub mod timer_heap;
pub mod token_bucket;

pub use timer_heap::TimerHeap;
pub use token_bucket::{Rate, TokenBucket};
