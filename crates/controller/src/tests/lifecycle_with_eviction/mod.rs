//! The two controllers composed ([`Controllers`]): the lifecycle's NoExecute taints reach taint
//! eviction through the watch, nothing is decided before the initial sync, a follower keeps
//! caches but no work, and legacy mode runs no taint eviction (`eviction.rs`); no decision on a
//! stale cache (`cache_hold.rs`). Here: the fake API they share.

use crate::model::{Pod, TaintEffect, Toleration, TolerationOperator, taint_keys};
use crate::tests::harness::n;

/// The composed machine against the one fake API (`controller::testing`): node writes are
/// applied and fed back through the "watch" (that is how the lifecycle's NoExecute taints reach
/// taint eviction), pod evictions delete the pod.
pub(crate) type Cluster = crate::testing::FakeApi;

pub(crate) fn tolerating_unreachable(seconds: Option<i64>) -> Toleration {
    Toleration {
        key: n(taint_keys::UNREACHABLE),
        operator: TolerationOperator::Exists,
        value: n(""),
        effect: Some(TaintEffect::NoExecute),
        toleration_seconds: seconds,
    }
}

pub(crate) fn with_tolerations(mut p: Pod, t: Vec<Toleration>) -> Pod {
    p.tolerations = t.into();
    p
}

mod cache_hold;
mod eviction;
