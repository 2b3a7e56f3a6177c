//! Eviction timing per pool (`default_toleration_seconds`).
//!
//! kube-apiserver's DefaultTolerationSeconds admission plugin gives every pod that tolerates
//! neither `node.kubernetes.io/not-ready` nor `node.kubernetes.io/unreachable` a NoExecute
//! toleration of each, operator Exists, for 300 s (`--default-not-ready-toleration-seconds`,
//! `--default-unreachable-toleration-seconds`). Changing that is a flag of the whole cluster
//! (k3s#1264, kubeadm#718, kubernetes#74651, OpenShift's `workerLatencyProfile`): a small site
//! that must fail over in 30 s, or a flaky-link pool that should wait an hour, cannot say so.
//!
//! Here a pool (or the whole fleet) may set `default_toleration_seconds`: for a pod whose two
//! tolerations are **exactly** the admission default (those two, operator Exists, effect
//! NoExecute, no value, `tolerationSeconds` = `admission_default_toleration_seconds`, and no
//! other toleration matching either taint), the pool's value stands in when its node's
//! not-ready/unreachable taints are judged. A pod that chose its own tolerations (another
//! number, forever, a wildcard toleration, only one of the two) is judged on its own, as
//! upstream. Countdowns still start at the taint's `timeAdded` (`tolerations::countdown`), so a
//! restart does not give the pool's pods a new full period.
//!
//! The value is read when a countdown starts (the node's NoExecute taints change, or the pod
//! arrives under them); a reload changes the countdowns started after it.

use std::borrow::Cow;

use crate::model::{Name, Node, TaintEffect, Toleration, TolerationOperator, taint_keys};

use super::pools::{Pool, pool_of};
use super::settings::{DEFAULT_ADMISSION_TOLERATION_SECONDS, Settings};

/// What taint eviction needs of the settings to time the pods of a node.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct PoolTiming {
    pub(crate) admission_default: u64,
    pub(crate) global: Option<u64>,
    /// Only the pools that set a value, in file order, with the rest (a node belongs to the
    /// first pool matching it, whether or not that one sets a value).
    pools: Vec<Pool>,
}

/// Which value a pod's not-ready/unreachable tolerations count with, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TimingSource {
    /// The pod's own tolerations: it chose them, or nothing stands in on its node.
    Own,
    /// The admission default, replaced by this many seconds from the node's pool (`None`: the
    /// global `default_toleration_seconds`).
    Replaced { seconds: u64, pool: Option<Name> },
}

impl PoolTiming {
    /// `None` when no `default_toleration_seconds` is set anywhere: pods keep their own.
    pub(crate) fn of(settings: &Settings) -> Option<PoolTiming> {
        let any = settings.default_toleration_seconds.is_some()
            || settings
                .pools
                .iter()
                .any(|p| p.default_toleration_seconds.is_some());
        any.then(|| PoolTiming {
            admission_default: settings.admission_default_toleration_seconds,
            global: settings.default_toleration_seconds,
            pools: settings.pools.clone(),
        })
    }

    /// The seconds standing in on `node`, and the pool that sets them.
    fn for_node(&self, node: &Node) -> Option<(u64, Option<Name>)> {
        let pool = pool_of(&self.pools, node);
        match pool.and_then(|p| p.default_toleration_seconds) {
            Some(s) => Some((s, pool.map(|p| p.name.clone()))),
            None => self.global.map(|s| (s, None)),
        }
    }

    /// Where the pod's timing on `node` comes from.
    pub(crate) fn source(&self, node: &Node, tolerations: &[Toleration]) -> TimingSource {
        match self.for_node(node) {
            Some((seconds, pool)) if is_admission_default(tolerations, self.admission_default) => {
                TimingSource::Replaced { seconds, pool }
            }
            _ => TimingSource::Own,
        }
    }

    /// The tolerations the pod is judged with on `node`.
    pub(crate) fn tolerations<'a>(
        &self,
        node: &Node,
        tolerations: &'a [Toleration],
    ) -> Cow<'a, [Toleration]> {
        match self.source(node, tolerations) {
            TimingSource::Own => Cow::Borrowed(tolerations),
            TimingSource::Replaced { seconds, .. } => Cow::Owned(
                tolerations
                    .iter()
                    .map(|t| {
                        let mut t = t.clone();
                        if is_node_condition_key(&t.key) {
                            t.toleration_seconds = Some(seconds as i64);
                        }
                        t
                    })
                    .collect(),
            ),
        }
    }
}

fn is_node_condition_key(key: &str) -> bool {
    key == taint_keys::NOT_READY || key == taint_keys::UNREACHABLE
}

/// The pod's not-ready/unreachable NoExecute tolerations are exactly what admission adds: one
/// of each, operator Exists, no value, effect NoExecute, `seconds`; and no other toleration
/// (a wildcard) could match either taint.
pub(crate) fn is_admission_default(tolerations: &[Toleration], seconds: u64) -> bool {
    let (mut not_ready, mut unreachable) = (0, 0);
    for t in tolerations {
        let may_match_no_execute = t
            .effect
            .as_ref()
            .is_none_or(|e| *e == TaintEffect::NoExecute);
        if t.key.is_empty() {
            if may_match_no_execute {
                return false;
            }
            continue;
        }
        if !is_node_condition_key(&t.key) || !may_match_no_execute {
            continue;
        }
        let exact = t.operator == TolerationOperator::Exists
            && t.value.is_empty()
            && t.effect == Some(TaintEffect::NoExecute)
            && t.toleration_seconds == i64::try_from(seconds).ok();
        if !exact {
            return false;
        }
        if &*t.key == taint_keys::NOT_READY {
            not_ready += 1;
        } else {
            unreachable += 1;
        }
    }
    not_ready == 1 && unreachable == 1
}

impl Default for PoolTiming {
    fn default() -> PoolTiming {
        PoolTiming {
            admission_default: DEFAULT_ADMISSION_TOLERATION_SECONDS,
            global: None,
            pools: Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::rc::Rc;

    fn tol(key: &str, seconds: Option<i64>) -> Toleration {
        Toleration {
            key: Rc::from(key),
            operator: TolerationOperator::Exists,
            value: Rc::from(""),
            effect: Some(TaintEffect::NoExecute),
            toleration_seconds: seconds,
        }
    }

    fn admitted(seconds: i64) -> Vec<Toleration> {
        vec![
            tol(taint_keys::NOT_READY, Some(seconds)),
            tol(taint_keys::UNREACHABLE, Some(seconds)),
        ]
    }

    #[test]
    fn only_the_exact_admission_default_counts_as_no_choice() {
        assert!(is_admission_default(&admitted(300), 300));
        assert!(
            !is_admission_default(&admitted(300), 120),
            "another cluster default"
        );
        assert!(!is_admission_default(&admitted(299), 300), "chose 299 s");
        assert!(
            !is_admission_default(&admitted(300)[..1], 300),
            "only one of the two"
        );
        let mut forever = admitted(300);
        forever[1].toleration_seconds = None;
        assert!(!is_admission_default(&forever, 300));
        let mut wildcard = admitted(300);
        wildcard.push(tol("", None));
        assert!(
            !is_admission_default(&wildcard, 300),
            "tolerates everything"
        );
        let mut other = admitted(300);
        other.push(tol("example.com/gpu", None));
        assert!(
            is_admission_default(&other, 300),
            "other keys are its own business"
        );
        let mut equal = admitted(300);
        equal[0].operator = TolerationOperator::Equal;
        assert!(!is_admission_default(&equal, 300));
        assert!(
            !is_admission_default(&[], 300),
            "no tolerations: not admitted"
        );
    }
}
