//! Support for `tests/config_and_operator_files/ops_pack.rs`: reading the operator files it checks.
//!
//! - [`promql`]: the metric names a PromQL expression reads;
//! - [`texts`]: the keys of conf/config.toml and of node-lifecycled.toml(5) by section, and the
//!   commands and options a usage text names.

pub mod promql;
pub mod texts;

use std::path::Path;

/// A file of the repository.
pub fn read(path: &str) -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(path))
        .unwrap_or_else(|e| panic!("{path}: {e}"))
}
