//! The API vocabulary the simulator serves: which resources exist, where they live, and the verbs
//! a request can carry (Kubernetes' RBAC verb names, so fault rules and the write log read like an
//! audit log).

use std::fmt;

/// The resources the node lifecycle controller touches (core/v1 and coordination.k8s.io/v1).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Resource {
    Nodes,
    Pods,
    Leases,
    Events,
}

impl Resource {
    pub const ALL: [Resource; 4] = [
        Resource::Nodes,
        Resource::Pods,
        Resource::Leases,
        Resource::Events,
    ];

    pub fn plural(self) -> &'static str {
        match self {
            Resource::Nodes => "nodes",
            Resource::Pods => "pods",
            Resource::Leases => "leases",
            Resource::Events => "events",
        }
    }

    pub fn kind(self) -> &'static str {
        match self {
            Resource::Nodes => "Node",
            Resource::Pods => "Pod",
            Resource::Leases => "Lease",
            Resource::Events => "Event",
        }
    }

    pub fn list_kind(self) -> &'static str {
        match self {
            Resource::Nodes => "NodeList",
            Resource::Pods => "PodList",
            Resource::Leases => "LeaseList",
            Resource::Events => "EventList",
        }
    }

    pub fn api_version(self) -> &'static str {
        match self {
            Resource::Leases => "coordination.k8s.io/v1",
            _ => "v1",
        }
    }

    /// API group ("" is core).
    pub fn group(self) -> &'static str {
        match self {
            Resource::Leases => "coordination.k8s.io",
            _ => "",
        }
    }

    pub fn namespaced(self) -> bool {
        !matches!(self, Resource::Nodes)
    }

    /// Nodes and pods have a `status` subresource: writes to the main resource keep the stored
    /// status, writes to `/status` change nothing else (as the real registry strategies do).
    pub fn has_status(self) -> bool {
        matches!(self, Resource::Nodes | Resource::Pods)
    }

    pub fn from_plural(group: &str, plural: &str) -> Option<Resource> {
        Resource::ALL
            .into_iter()
            .find(|r| r.group() == group && r.plural() == plural)
    }

    pub(crate) fn index(self) -> usize {
        self as usize
    }
}

impl fmt::Display for Resource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.plural())
    }
}

impl std::str::FromStr for Resource {
    type Err = String;

    /// Accepts the plural names ("nodes", "pods", "leases", "events").
    fn from_str(s: &str) -> Result<Resource, String> {
        Resource::ALL
            .into_iter()
            .find(|r| r.plural() == s)
            .ok_or_else(|| format!("unknown resource {s:?} (nodes, pods, leases, events)"))
    }
}

/// What a request does, named as the API server's authorizer names it.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Verb {
    Get,
    List,
    Watch,
    Create,
    Update,
    Patch,
    Delete,
}

impl Verb {
    pub fn as_str(self) -> &'static str {
        match self {
            Verb::Get => "get",
            Verb::List => "list",
            Verb::Watch => "watch",
            Verb::Create => "create",
            Verb::Update => "update",
            Verb::Patch => "patch",
            Verb::Delete => "delete",
        }
    }

    pub fn is_write(self) -> bool {
        matches!(
            self,
            Verb::Create | Verb::Update | Verb::Patch | Verb::Delete
        )
    }
}

impl fmt::Display for Verb {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
