//! Watch streams polled by the mio loop, never blocking it.
//!
//! Layers, each a pure state machine with its own tests: [`http_head`] (status and body framing)
//! → [`chunked`] (transfer decoding) → [`lines`] (newline-delimited JSON events) or [`frames`]
//! (length-prefixed protobuf events, per the Content-Type), joined by
//! [`response`]; [`stream`] is the only part that touches a socket.

pub mod chunked;
pub(crate) mod frames;
pub mod http_head;
mod keepalive;
pub mod lines;
pub(crate) mod response;
pub(crate) mod stream;

pub use frames::FrameSpan;
pub use response::{ResponseDecoder, StreamEnd, WatchItem};
pub use stream::{Drain, OpenError, WatchOptions, WatchStream};
