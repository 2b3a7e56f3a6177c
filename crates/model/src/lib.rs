//! node-lifecycled's two bottom layers, which every other layer reads and which import nothing
//! of the product's: `time` (instants, durations, the timer heap, deadline lanes, token buckets,
//! the seeded random generator, the name hash) and `model` (the compact Node, Pod and Lease
//! projections, interned names and the cluster store). The layer table is in the product's
//! `src/lib.rs` and ARCHITECTURE.md.

pub mod model;
pub mod time;
