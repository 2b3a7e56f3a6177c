//! node-lifecycled: Kubernetes' node lifecycle and NoExecute taint eviction controllers as one
//! single-threaded daemon. See DESIGN.md in the project's shared notes for the layering:
//! `main -> runtime -> {kube, controller} -> model -> time`; `controller` never imports `kube` or
//! `runtime`. Time (instants, the timer heap, the token bucket) is pure data at the bottom.

pub mod config;
pub mod controller;
pub mod doctor;
pub mod kube;
pub mod leader;
pub mod logging;
pub mod model;
pub mod observe;
pub mod runtime;
pub mod sim;
pub mod time;

#[doc(hidden)]
pub mod testing;
