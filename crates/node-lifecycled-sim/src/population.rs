//! The simulated cluster's inhabitants: nodes spread over zones, each with a heartbeat Lease, and
//! pods bound to them the way a scheduler and the admission plugins would leave them.
//!
//! Names are predictable so scenarios can name them: node `z2-n007` is the 7th node of zone `z2`
//! (zone label `z2`, region `sim`); web pods are `default/web-<i>`, numbered node by node; every
//! node also runs one DaemonSet pod, `kube-system/node-agent-<node>`.

use std::time::Duration;

use serde_json::{Value, json};

use super::cluster::Cluster;
use super::fixtures;
use super::resource::Resource;
use super::status::ApiError;

/// Where DaemonSet pods live, as kube-proxy and CNI agents do.
pub const DAEMONSET_NAMESPACE: &str = "kube-system";
/// Where web pods live.
pub const WEB_NAMESPACE: &str = "default";

/// What kind of workload a pod is: it decides its NoExecute tolerations.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum PodKind {
    /// A Deployment pod with the tolerations the DefaultTolerationSeconds admission plugin adds
    /// (not-ready and unreachable, `default_toleration`, upstream 300 s).
    Web,
    /// Every 10th web pod: a workload that asked to ride out longer outages
    /// (`patient_toleration`).
    Patient,
    /// One per node, owned by a DaemonSet: tolerates not-ready and unreachable forever (what the
    /// DaemonSet controller adds), so taint eviction never removes it.
    DaemonSet,
    /// Added by a scenario step, with the step's tolerations.
    Added,
}

impl PodKind {
    pub fn as_str(self) -> &'static str {
        match self {
            PodKind::Web => "web",
            PodKind::Patient => "patient",
            PodKind::DaemonSet => "daemonset",
            PodKind::Added => "added",
        }
    }

    pub fn parse(text: &str) -> Option<PodKind> {
        [
            PodKind::Web,
            PodKind::Patient,
            PodKind::DaemonSet,
            PodKind::Added,
        ]
        .into_iter()
        .find(|k| k.as_str() == text)
    }
}

/// How long a pod tolerates the not-ready / unreachable NoExecute taints.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Toleration {
    /// No NoExecute toleration: evicted as soon as the node is tainted.
    None,
    Seconds(u64),
    Forever,
}

/// One pod of the population (or added later by a scenario).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodPlan {
    pub namespace: String,
    pub name: String,
    pub node: String,
    pub kind: PodKind,
    pub toleration: Toleration,
}

impl PodPlan {
    /// `namespace/name`.
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    /// The pod object as the API server would hold it once bound and running.
    pub fn object(&self) -> Value {
        let mut pod = fixtures::running_pod(&self.namespace, &self.name, Some(&self.node));
        let tolerations: Vec<Value> = match self.toleration {
            Toleration::None => Vec::new(),
            Toleration::Seconds(s) => ["not-ready", "unreachable"]
                .iter()
                .map(|k| {
                    json!({"key": format!("node.kubernetes.io/{k}"), "operator": "Exists",
                           "effect": "NoExecute", "tolerationSeconds": s})
                })
                .collect(),
            Toleration::Forever => ["not-ready", "unreachable"]
                .iter()
                .map(|k| {
                    json!({"key": format!("node.kubernetes.io/{k}"), "operator": "Exists",
                           "effect": "NoExecute"})
                })
                .collect(),
        };
        pod["spec"]["tolerations"] = Value::Array(tolerations);
        pod["metadata"]["labels"] = json!({"app": self.kind.as_str()});
        if self.kind == PodKind::DaemonSet {
            pod["metadata"]["ownerReferences"] = json!([{
                "apiVersion": "apps/v1", "kind": "DaemonSet", "name": "node-agent",
                "uid": "00000000-0000-4000-8000-00000000da7a", "controller": true,
                "blockOwnerDeletion": true
            }]);
        }
        pod
    }
}

/// The shape of the simulated cluster (`serve --nodes --zones --pods-per-node`, a scenario's
/// `[cluster]`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Population {
    pub nodes: usize,
    pub zones: usize,
    /// Web pods per node (DaemonSet pods come on top, one per node).
    pub pods_per_node: usize,
    /// One DaemonSet pod per node.
    pub daemonset: bool,
    /// DefaultTolerationSeconds (upstream admission default: 300 s).
    pub default_toleration: Duration,
    /// Tolerations of every 10th web pod.
    pub patient_toleration: Duration,
}

impl Default for Population {
    fn default() -> Population {
        Population {
            nodes: 30,
            zones: 3,
            pods_per_node: 2,
            daemonset: true,
            default_toleration: Duration::from_secs(300),
            patient_toleration: Duration::from_secs(3600),
        }
    }
}

/// What `populate` created.
#[derive(Clone, Debug, Default)]
pub struct Populated {
    pub nodes: Vec<String>,
    pub pods: Vec<PodPlan>,
}

impl Population {
    /// Zones hold `ceil(nodes / zones)` nodes each, the last ones fewer; at least one zone.
    pub fn zone_count(&self) -> usize {
        self.zones.clamp(1, self.nodes.max(1))
    }

    fn per_zone(&self) -> usize {
        self.nodes.div_ceil(self.zone_count())
    }

    /// Node names, zone by zone: `z1-n001`, `z1-n002`, …, `z2-n001`, ….
    pub fn node_names(&self) -> Vec<String> {
        let per_zone = self.per_zone();
        let width = digits(per_zone).max(3);
        (0..self.nodes)
            .map(|i| {
                let zone = i / per_zone + 1;
                let index = i % per_zone + 1;
                format!("z{zone}-n{index:0width$}")
            })
            .collect()
    }

    /// Every pod, node by node.
    pub fn pods(&self) -> Vec<PodPlan> {
        let seconds = |d: Duration| Toleration::Seconds(d.as_secs().max(1));
        let mut pods = Vec::with_capacity(self.nodes * (self.pods_per_node + 1));
        let mut web = 0;
        for node in self.node_names() {
            for _ in 0..self.pods_per_node {
                let (kind, toleration) = if web % 10 == 9 {
                    (PodKind::Patient, seconds(self.patient_toleration))
                } else {
                    (PodKind::Web, seconds(self.default_toleration))
                };
                pods.push(PodPlan {
                    namespace: WEB_NAMESPACE.into(),
                    name: format!("web-{web}"),
                    node: node.clone(),
                    kind,
                    toleration,
                });
                web += 1;
            }
            if self.daemonset {
                pods.push(PodPlan {
                    namespace: DAEMONSET_NAMESPACE.into(),
                    name: format!("node-agent-{node}"),
                    node: node.clone(),
                    kind: PodKind::DaemonSet,
                    toleration: Toleration::Forever,
                });
            }
        }
        pods
    }

    /// Creates the nodes (Ready, zone and os/arch labels), their Leases and the pods.
    pub fn populate(&self, cluster: &Cluster) -> Result<Populated, ApiError> {
        let nodes = self.node_names();
        let now = cluster.now();
        for name in &nodes {
            cluster.create(
                Resource::Nodes,
                fixtures::ready_node(name, Some(zone_of(name)), now),
            )?;
            cluster.renew_lease(name, now)?;
        }
        let pods = self.pods();
        for pod in &pods {
            cluster.create(Resource::Pods, pod.object())?;
        }
        Ok(Populated { nodes, pods })
    }
}

/// The zone of a node named by `Population` (`z2` for `z2-n007`); the whole name otherwise.
pub fn zone_of(node: &str) -> &str {
    node.split_once('-').map_or(node, |(zone, _)| zone)
}

fn digits(mut n: usize) -> usize {
    let mut d = 1;
    while n >= 10 {
        n /= 10;
        d += 1;
    }
    d
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nodes_are_named_zone_by_zone_with_padded_indexes() {
        let p = Population {
            nodes: 7,
            zones: 3,
            ..Population::default()
        };
        assert_eq!(
            p.node_names(),
            [
                "z1-n001", "z1-n002", "z1-n003", "z2-n001", "z2-n002", "z2-n003", "z3-n001"
            ]
        );
        let big = Population {
            nodes: 5000,
            zones: 2,
            ..Population::default()
        };
        assert_eq!(big.node_names()[2500], "z2-n0001");
        assert_eq!(zone_of("z2-n0001"), "z2");
    }

    #[test]
    fn every_tenth_web_pod_is_patient_and_each_node_runs_one_daemonset_pod() {
        let p = Population {
            nodes: 10,
            zones: 2,
            pods_per_node: 2,
            ..Population::default()
        };
        let pods = p.pods();
        assert_eq!(pods.len(), 30);
        let web9 = pods.iter().find(|x| x.name == "web-9").unwrap();
        assert_eq!(
            (web9.kind, web9.toleration, web9.node.as_str()),
            (PodKind::Patient, Toleration::Seconds(3600), "z1-n005")
        );
        let web0 = &pods[0];
        assert_eq!(web0.toleration, Toleration::Seconds(300));
        let agents: Vec<_> = pods
            .iter()
            .filter(|x| x.kind == PodKind::DaemonSet)
            .collect();
        assert_eq!(agents.len(), 10);
        let object = agents[0].object();
        assert_eq!(
            object["metadata"]["ownerReferences"][0]["kind"],
            "DaemonSet"
        );
        assert!(object["spec"]["tolerations"][0]["tolerationSeconds"].is_null());
    }
}
