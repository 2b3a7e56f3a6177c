//! Ports of upstream's status and Lease cases: `TestMonitorNodeHealthUpdateStatus`,
//! `TestMonitorNodeHealthUpdateNodeAndPodStatusWithLease`.

use super::*;

use crate::model::ConditionStatus::{False, True, Unknown};
use crate::model::{ConditionText, NodeCondition, NodeConditionType};
use crate::time::Time;

#[test]
fn test_monitor_node_health_update_status_old_node_without_status() {
    let h = update_status_case(node("node0").created(old()).build(), None, None);
    let writes = h.status_writes();
    assert_eq!(writes.len(), 1);
    assert_eq!(writes[0].2, four_never_updated(old(), fake_now()));
    assert_eq!(h.pod_status_updates(), 0, "pod was never scheduled");
}

#[test]
fn test_monitor_node_health_update_status_new_node_without_status() {
    let h = update_status_case(node("node0").created(fake_now()).build(), None, None);
    assert!(
        h.status_writes().is_empty(),
        "within the startup grace period"
    );
    assert_eq!(h.pod_status_updates(), 0);
}

#[test]
fn test_monitor_node_health_update_status_stale_status_posts_unknown() {
    let stale = || ready(True, fake_now(), fake_now());
    let n0 = node("node0")
        .created(old())
        .ready(True, fake_now(), fake_now())
        .build();
    let h = update_status_case(n0, None, Some((secs(3600), Some(stale()), None)));
    let writes = h.status_writes();
    assert_eq!(writes.len(), 1);
    let later = fake_now() + secs(3600);
    let mut expected = vec![NodeCondition {
        kind: NodeConditionType::Ready,
        status: Unknown,
        last_heartbeat_time: Some(fake_now()),
        last_transition_time: Some(later),
        text: ConditionText::new(
            Some(n("NodeStatusUnknown")),
            Some(n("Kubelet stopped posting node status.")),
        ),
    }];
    expected.extend(four_never_updated(old(), later).into_iter().skip(1));
    assert_eq!(writes[0].2, expected);
    assert_eq!(h.pod_status_updates(), 1);
}

#[test]
fn test_monitor_node_health_update_status_fresh_status_no_action() {
    let n0 = node("node0")
        .created(old())
        .ready(True, fake_now(), fake_now())
        .build();
    let h = update_status_case(n0, None, None);
    assert!(h.status_writes().is_empty());
    assert_eq!(h.pod_status_updates(), 0);
}

#[test]
fn test_with_lease_node_created_recently_without_status_lease_missing() {
    let h = update_status_case(node("node0").created(fake_now()).build(), None, None);
    assert!(h.status_writes().is_empty());
}

#[test]
fn test_with_lease_node_created_recently_without_status_lease_renewed() {
    let h = update_status_case(
        node("node0").created(fake_now()).build(),
        Some(fake_now()),
        None,
    );
    assert!(h.status_writes().is_empty());
    assert_eq!(h.pod_status_updates(), 0);
}

#[test]
fn test_with_lease_old_node_without_status_lease_missing() {
    let h = update_status_case(node("node0").created(old()).build(), None, None);
    let writes = h.status_writes();
    assert_eq!(writes.len(), 1);
    assert_eq!(writes[0].2, four_never_updated(old(), fake_now()));
    assert_eq!(h.pod_status_updates(), 0);
}

#[test]
fn test_with_lease_old_node_without_status_lease_renewed_recently() {
    let later = fake_now() + secs(3600);
    let h = update_status_case(
        node("node0").created(old()).build(),
        Some(fake_now()),
        Some((secs(3600), None, Some(later))),
    );
    assert!(
        h.status_writes().is_empty(),
        "a renewing Lease keeps the node healthy"
    );
    assert_eq!(h.pod_status_updates(), 0);
}

#[test]
fn test_with_lease_old_node_without_status_lease_expired() {
    let later = fake_now() + secs(3600);
    let h = update_status_case(
        node("node0").created(old()).build(),
        Some(fake_now()),
        Some((secs(3600), None, Some(fake_now()))),
    );
    let writes = h.status_writes();
    assert_eq!(writes.len(), 1);
    assert_eq!(writes[0].2, four_never_updated(old(), later));
    assert_eq!(h.pod_status_updates(), 0);
    assert_eq!(
        h.lease_reads(),
        1,
        "the verdict was confirmed by one live Lease read"
    );
}

fn ready_and_disk(hb: Time) -> Vec<NodeCondition> {
    vec![
        cond(NodeConditionType::Ready, True, hb, fake_now()),
        cond(NodeConditionType::DiskPressure, False, hb, fake_now()),
    ]
}

#[test]
fn test_with_lease_stale_status_but_lease_renewed() {
    let mut n0 = node("node0").created(old()).build();
    n0.conditions = ready_and_disk(fake_now());
    let later = fake_now() + secs(3600);
    let h = update_status_case(
        n0,
        Some(fake_now()),
        Some((secs(3600), Some(ready_and_disk(fake_now())), Some(later))),
    );
    assert!(h.status_writes().is_empty());
    assert_eq!(h.pod_status_updates(), 0);
}

#[test]
fn test_with_lease_fresh_status_but_lease_expired() {
    let mut n0 = node("node0").created(old()).build();
    n0.conditions = ready_and_disk(fake_now());
    let later = fake_now() + secs(3600);
    let h = update_status_case(
        n0,
        Some(fake_now()),
        Some((secs(3600), Some(ready_and_disk(later)), Some(fake_now()))),
    );
    assert!(h.status_writes().is_empty());
    assert_eq!(h.pod_status_updates(), 0);
}

#[test]
fn test_with_lease_stale_status_and_lease_expired() {
    let n0 = node("node0")
        .created(old())
        .ready(True, fake_now(), fake_now())
        .build();
    let later = fake_now() + secs(3600);
    let h = update_status_case(
        n0,
        Some(fake_now()),
        Some((
            secs(3600),
            Some(ready(True, fake_now(), fake_now())),
            Some(fake_now()),
        )),
    );
    let writes = h.status_writes();
    assert_eq!(writes.len(), 1);
    let mut expected = vec![NodeCondition {
        kind: NodeConditionType::Ready,
        status: Unknown,
        last_heartbeat_time: Some(fake_now()),
        last_transition_time: Some(later),
        text: ConditionText::new(
            Some(n("NodeStatusUnknown")),
            Some(n("Kubelet stopped posting node status.")),
        ),
    }];
    expected.extend(four_never_updated(old(), later).into_iter().skip(1));
    assert_eq!(writes[0].2, expected);
    assert_eq!(h.pod_status_updates(), 1);
}
