//! The imperative shell's machinery: the event loop, timers, rate limits, signals, sd_notify.

pub mod api;
pub mod clock;
pub mod daemon;
pub mod event_loop;
pub mod executor;
pub mod fencing;
pub mod informer;
pub mod memory;
pub mod sd_notify;
pub mod settings;
pub mod signals;
pub mod state_dump;
pub mod timer_heap;
pub mod token_bucket;

pub use clock::Clock;
pub use event_loop::{EventLoop, Handler, LoopControl, LoopStats};
pub use timer_heap::TimerHeap;
pub use token_bucket::{Rate, TokenBucket};
