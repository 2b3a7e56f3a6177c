//! An in-tree mutation fuzzer for the parsers that read bytes from outside the process, on the
//! stable toolchain: `engine` (generation, execution, findings) and `targets` (what is fuzzed
//! and which properties are checked). Used by `tests/randomized/fuzz_parsers.rs` (a short fixed-seed pass
//! in every `cargo test`) and `examples/fuzz.rs` (long runs; see FUZZING.md).
#![allow(dead_code)] // shared by tests/randomized and examples/fuzz.rs: each uses its own part

pub mod controller;
pub mod engine;
pub mod targets;
