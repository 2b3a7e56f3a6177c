//! The configuration's errors and RBAC, the layers of src/, the size of source files, the
//! operator files (alerts, dashboard, man pages, completion), the Debian package, and that no
//! file refers outside the repository.
//!
//! One test binary; each module was its own before (one link step per group, not per file).

#[path = "../e2e_support/mod.rs"]
mod e2e_support;
#[path = "../ops_support/mod.rs"]
mod ops_support;
#[path = "../tool_support/mod.rs"]
mod tool_support;

mod config_errors;
mod config_rbac;
mod debian_package;
mod file_sizes;
mod layering;
mod ops_pack;
mod outside_references;
mod tree;
