//! A fleet pause of tainting holds taint eviction's pod deletions like a stale cache does (the
//! countdown keeps its deadline and acts when the pause ends); a pause of fencing
//! holds none.

use crate::fleet_pause::{FleetPause, PauseScope};
use crate::inputs::Input;
use crate::model::{ConditionStatus, TaintEffect};
use crate::tests::harness::{date, lease, node, pod, secs, test_settings};
use crate::time::Time;

use super::lifecycle_with_eviction::Cluster;

fn cluster_with_a_due_pod(what: Option<PauseScope>, t0: Time, until: Time) -> Cluster {
    let mut c = Cluster::new(test_settings(), t0);
    if let Some(what) = what {
        c.feed(Input::FleetPause(Some(FleetPause {
            what,
            until,
            reason: "maintenance".into(),
            by: "ops".into(),
        })));
    }
    for name in ["n1", "n2"] {
        c.put_lease(lease(name, t0));
        let mut b = node(name).ready(ConditionStatus::True, t0, t0);
        if name == "n2" {
            b = b.taint("user", TaintEffect::NoExecute);
        }
        c.put_node(b.build());
    }
    c.put_pod(pod("due", "n2"));
    c.feed(Input::InitialSyncDone);
    c
}

#[test]
fn a_pause_of_tainting_holds_pod_deletions_until_it_ends() {
    let t0 = date(2026, 1, 1, 12, 0, 0);
    let until = t0 + secs(60);
    for what in [PauseScope::Tainting, PauseScope::All] {
        let mut c = cluster_with_a_due_pod(Some(what), t0, until);
        c.run_until(t0 + secs(59));
        assert_eq!(c.evicted_names(), Vec::<String>::new(), "{what:?}");
        c.run_until(t0 + secs(90));
        assert_eq!(c.evicted_names(), vec!["due"], "{what:?}");
        assert_eq!(c.evicted[0].0, until, "{what:?}: not at the pause's end");
    }
    // A pause of fencing, and none: at once.
    for what in [Some(PauseScope::Fencing), None] {
        let mut c = cluster_with_a_due_pod(what, t0, until);
        c.run_until(t0 + secs(1));
        assert_eq!(c.evicted_names(), vec!["due"], "{what:?}");
    }
}

/// `resume` (the shell feeds `None`) releases at once.
#[test]
fn a_resumed_pause_of_tainting_deletes_at_once() {
    let t0 = date(2026, 1, 1, 12, 0, 0);
    let mut c = cluster_with_a_due_pod(Some(PauseScope::Tainting), t0, t0 + secs(3600));
    c.run_until(t0 + secs(30));
    assert_eq!(c.evicted_names(), Vec::<String>::new());
    c.feed(Input::FleetPause(None));
    c.run_until(t0 + secs(31));
    assert_eq!(c.evicted_names(), vec!["due"]);
    assert!(c.evicted[0].0 <= t0 + secs(30) + secs(1) / 10);
}
