//! The world a script drives: the one fake API (`controller::testing::FakeApi`, holding every
//! action until the script answers it) and the invariant bookkeeping kept beside it.

use std::collections::BTreeMap;
use std::rc::Rc;

use node_lifecycled::controller::testing::{FakeApi, HeldAnswer};
use node_lifecycled::controller::{Action, Input};
use node_lifecycled::model::{
    ConditionStatus, ConditionText, Lease, Name, Node, NodeCondition, NodeConditionType, Pod,
    PodKey, TaintEffect, Toleration, TolerationOperator,
};
use node_lifecycled::time::Time;

use super::{Coverage, NOT_READY, UNREACHABLE};

/// What the invariants need to know of a node beyond what the API holds.
#[derive(Clone, Debug)]
pub(super) struct Book {
    /// Last time the controller was given evidence the node is alive.
    pub heard_at: Time,
    /// Since when the node has carried some NoExecute taint without a break (the earliest
    /// `timeAdded`): upstream counts a pod's toleration from when its eviction was first
    /// scheduled, not from the `timeAdded` of a taint that replaced another.
    pub no_execute_since: Option<Time>,
}

pub(super) struct World {
    pub api: FakeApi,
    pub books: BTreeMap<String, Book>,
    pub synced: bool,
    pub uid_counter: u64,
    pub seen: Coverage,
    /// Every action and decision with its instant, when recorded (the differential test).
    pub record: Option<Vec<String>>,
}

impl World {
    pub fn now(&self) -> Time {
        self.api.now
    }

    /// Checks what the controllers returned since the last call, and forgets it (a long script
    /// would otherwise pile up every action: the allocation check reported decisions piling up
    /// so, fuzz-findings controller-seed3-40066 and -345618).
    pub fn settle(&mut self) -> Result<(), String> {
        let log = std::mem::take(&mut self.api.log);
        let decisions = self
            .api
            .decisions
            .as_mut()
            .map(std::mem::take)
            .unwrap_or_default();
        let mut decisions = decisions.into_iter().peekable();
        for (i, (at, action)) in log.iter().enumerate() {
            while let Some((_, now, d)) = decisions.next_if(|(k, _, _)| *k <= i) {
                if let Some(record) = self.record.as_mut() {
                    record.push(format!("{now:?} {d:?}"));
                }
            }
            if let Some(record) = self.record.as_mut() {
                record.push(format!("{at:?} {action:?}"));
            }
            self.check(*at, action)?;
        }
        for (_, now, d) in decisions {
            if let Some(record) = self.record.as_mut() {
                record.push(format!("{now:?} {d:?}"));
            }
        }
        Ok(())
    }

    pub fn feed(&mut self, input: Input) -> Result<(), String> {
        self.api.feed(input);
        self.settle()
    }

    /// Fires every timer due up to `until`, each at its own deadline.
    pub fn run_until(&mut self, until: Time) -> Result<(), String> {
        let mut fired = 0;
        while let Some(t) = self.api.ctl.next_deadline() {
            if t > until {
                break;
            }
            self.api.now = self.api.now.max(t);
            self.feed(Input::Tick)?;
            fired += 1;
            if fired > 100_000 {
                return Err(format!("timers busy-loop at {:?}", self.api.now));
            }
        }
        self.api.now = self.api.now.max(until);
        Ok(())
    }

    pub fn renew_lease(&mut self, name: &str) -> Result<(), String> {
        let now = self.now();
        if let Some(book) = self.books.get_mut(name) {
            book.heard_at = now;
        }
        self.api.put_lease(Lease {
            name: name.into(),
            renew_time: Some(now),
            duration_seconds: Some(40),
            resource_version: "0".into(),
        });
        self.settle()
    }

    /// The kubelet posts its status: every condition heartbeats at `now`.
    pub fn post_status(&mut self, name: &str, ready: bool) -> Result<(), String> {
        let Some(node) = self.api.nodes.get(name).cloned() else {
            return Ok(());
        };
        self.post_status_of(node, ready)
    }

    fn post_status_of(&mut self, mut n: Node, ready: bool) -> Result<(), String> {
        let now = self.now();
        let status = if ready {
            ConditionStatus::True
        } else {
            ConditionStatus::False
        };
        let reason = if ready {
            "KubeletReady"
        } else {
            "KubeletNotReady"
        };
        let mut conditions = vec![condition(NodeConditionType::Ready, status, Some(reason))];
        for kind in [
            NodeConditionType::MemoryPressure,
            NodeConditionType::DiskPressure,
            NodeConditionType::PIDPressure,
        ] {
            conditions.push(condition(kind, ConditionStatus::False, None));
        }
        for c in &mut conditions {
            c.last_heartbeat_time = Some(now);
            let old = n.conditions.iter().find(|o| o.kind == c.kind);
            c.last_transition_time = match old {
                Some(o) if o.status == c.status => o.last_transition_time,
                _ => Some(now),
            };
        }
        // A heartbeat is news only if it reads differently: whole seconds on the wire.
        let previous = n.ready().and_then(|c| c.last_heartbeat_time);
        if previous.map(Time::to_rfc3339) != Some(now.to_rfc3339()) {
            if let Some(book) = self.books.get_mut(&*n.name) {
                book.heard_at = now;
            }
        }
        n.conditions = conditions;
        self.api.put_node(n);
        self.settle()
    }

    pub fn add_node(&mut self, name: &str, zone: &str, ready: bool) -> Result<(), String> {
        let now = self.now();
        self.books.insert(
            name.to_string(),
            Book {
                heard_at: now,
                no_execute_since: None,
            },
        );
        let label = |k: &str, v: &str| (Name::from(k), Name::from(v));
        let node = Node {
            name: Name::from(name),
            uid: Name::from(format!("uid-{name}-{}", now.as_unix_millis())),
            resource_version: Name::from("0"),
            creation_timestamp: now,
            labels: vec![
                label("topology.kubernetes.io/zone", zone),
                label("topology.kubernetes.io/region", "r"),
            ]
            .into(),
            taints: Vec::new(),
            unschedulable: false,
            conditions: Vec::new(),
            other_conditions: Vec::new(),
            autonomy: Default::default(),
            maintenance: Default::default(),
            writers: Default::default(),
        };
        if ready {
            self.post_status_of(node, true)
        } else {
            self.api.put_node(node);
            self.settle()
        }
    }

    pub fn delete_node(&mut self, name: &str) -> Result<(), String> {
        self.books.remove(name);
        self.api.delete_node(name);
        self.settle()?;
        self.api.delete_lease(name);
        self.settle()
    }

    pub fn add_pod(&mut self, node: &str, variant: u8) -> Result<(), String> {
        self.uid_counter += 1;
        let name = format!("p{}", self.uid_counter);
        let tolerations = match variant % 5 {
            0 => vec![],
            1 => vec![
                toleration(UNREACHABLE, Some(3)),
                toleration(NOT_READY, Some(3)),
            ],
            2 => vec![toleration(UNREACHABLE, Some(30))],
            3 => vec![toleration(UNREACHABLE, None), toleration(NOT_READY, None)],
            _ => vec![
                toleration(UNREACHABLE, Some(0)),
                toleration(NOT_READY, Some(-5)),
            ],
        };
        self.api.put_pod(Pod {
            key: PodKey {
                namespace: Name::from("default"),
                name: Name::from(name.as_str()),
            },
            uid: Name::from(format!("uid-{name}")),
            resource_version: Name::from("0"),
            node_name: Some(Name::from(node)),
            ready: Some(ConditionStatus::True),
            tolerations: Rc::from(tolerations),
            deleting: false,
            daemonset_owned: false,
            disruption_target: false,
            creation_timestamp: None,
        });
        self.settle()
    }

    /// Answers held action `i` with an outcome picked by `choice`.
    pub fn answer(&mut self, i: usize, choice: u8) -> Result<(), String> {
        let how = if choice % 8 == 7 {
            HeldAnswer::Fail
        } else {
            HeldAnswer::Execute
        };
        // A taint write that lands moves the node's NoExecute bookkeeping (as of the write).
        let taints_of = match self.api.held.get(i) {
            Some(Action::PatchNodeTaints { node, .. }) if how == HeldAnswer::Execute => self
                .api
                .nodes
                .get(node)
                .map(|n| (node.clone(), n.resource_version.clone())),
            _ => None,
        };
        self.api.answer_held(i, how);
        if let Some((name, rv)) = taints_of {
            self.taints_written(&name, &rv);
        }
        self.settle()
    }

    fn taints_written(&mut self, name: &Name, rv_before: &Name) {
        let now = self.now();
        let Some(node) = self.api.nodes.get(name) else {
            return;
        };
        if node.resource_version == *rv_before {
            return; // a 409: nothing written
        }
        let earliest = node
            .taints
            .iter()
            .filter(|t| t.effect == TaintEffect::NoExecute)
            .map(|t| t.time_added.unwrap_or(now))
            .min();
        if let Some(book) = self.books.get_mut(&**name) {
            book.no_execute_since = match (book.no_execute_since, earliest) {
                (_, None) => None,
                (Some(since), Some(_)) => Some(since),
                (None, Some(added)) => Some(added),
            };
        }
    }
}

fn condition(
    kind: NodeConditionType,
    status: ConditionStatus,
    reason: Option<&str>,
) -> NodeCondition {
    NodeCondition {
        kind,
        status,
        last_heartbeat_time: None,
        last_transition_time: None,
        text: ConditionText::new(reason.map(Name::from), None),
    }
}

/// A NoExecute toleration of `key` (operator Exists).
fn toleration(key: &str, seconds: Option<i64>) -> Toleration {
    Toleration {
        key: Name::from(key),
        operator: TolerationOperator::Exists,
        value: Name::from(""),
        effect: Some(TaintEffect::NoExecute),
        toleration_seconds: seconds,
    }
}
