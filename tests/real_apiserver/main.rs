//! Against real kube-apiservers of three releases (`real_apiserver_support/versions.rs`), two
//! servers at a time: the client, protobuf, watches, the daemon, doctor, the requests as the
//! server saw them, never being less safe than upstream, and the differential tier against
//! kube-controller-manager.
//!
//! One test binary; each module was its own before (one link step per group, not per file).

#[path = "../e2e_support/mod.rs"]
mod e2e_support;
#[path = "../informer_support/mod.rs"]
mod informer_support;
#[path = "../kube_client_support/mod.rs"]
mod kube_client_support;
#[path = "../real_apiserver_support/mod.rs"]
mod real_apiserver_support;

mod brake;
mod client;
mod daemon;
mod differential;
mod doctor;
mod fencing_lifecycle;
mod partitions;
mod protobuf;
mod protocol;
mod shadow;
mod sim_protobuf;
mod upstream_safety;
mod watch;
