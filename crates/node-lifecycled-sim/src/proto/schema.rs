//! The protobuf field numbers of what the simulator stores, from upstream `generated.proto`
//! (`k8s.io/api/core/v1`, `k8s.io/api/coordination/v1`, `k8s.io/apimachinery/.../meta/v1`).
//!
//! `Always` marks a Go non-pointer field: the real server writes it even when empty (an empty
//! string, a zero, an empty message), so we do too; `Optional` a pointer (written when set);
//! `Repeated` a slice or map (written per element). Only the fields the simulator's objects
//! carry, or could be given by a client, are listed; any other JSON field is left out of the
//! protobuf encoding (the real server would have dropped an unknown one on create).

use super::{Field, Rule::*, Ty::*};

const fn f(json: &'static str, number: u32, ty: super::Ty, rule: super::Rule) -> Field {
    Field {
        json,
        number,
        ty,
        rule,
    }
}

pub(super) const OWNER_REFERENCE: &[Field] = &[
    f("kind", 1, Str, Always),
    f("name", 3, Str, Always),
    f("uid", 4, Str, Always),
    f("apiVersion", 5, Str, Always),
    f("controller", 6, Bool, Optional),
    f("blockOwnerDeletion", 7, Bool, Optional),
];

pub(super) const OBJECT_META: &[Field] = &[
    f("name", 1, Str, Always),
    f("generateName", 2, Str, Always),
    f("namespace", 3, Str, Always),
    f("selfLink", 4, Str, Always),
    f("uid", 5, Str, Always),
    f("resourceVersion", 6, Str, Always),
    f("generation", 7, Int, Always),
    f("creationTimestamp", 8, Time, Always),
    f("deletionTimestamp", 9, Time, Optional),
    f("deletionGracePeriodSeconds", 10, Int, Optional),
    f("labels", 11, StrMap, Repeated),
    f("annotations", 12, StrMap, Repeated),
    f("ownerReferences", 13, Msg(OWNER_REFERENCE), Repeated),
    f("finalizers", 14, Str, Repeated),
];

pub(super) const LIST_META: &[Field] = &[
    f("selfLink", 1, Str, Always),
    f("resourceVersion", 2, Str, Always),
    f("continue", 3, Str, Always),
    f("remainingItemCount", 4, Int, Optional),
];

const RESOURCES: &[Field] = &[
    f("limits", 1, QuantityMap, Repeated),
    f("requests", 2, QuantityMap, Repeated),
];

const CONTAINER: &[Field] = &[
    f("name", 1, Str, Always),
    f("image", 2, Str, Always),
    f("command", 3, Str, Repeated),
    f("args", 4, Str, Repeated),
    f("workingDir", 5, Str, Always),
    f("resources", 8, Msg(RESOURCES), Always),
    f("terminationMessagePath", 13, Str, Always),
    f("imagePullPolicy", 14, Str, Always),
    f("stdin", 16, Bool, Always),
    f("stdinOnce", 17, Bool, Always),
    f("tty", 18, Bool, Always),
    f("terminationMessagePolicy", 20, Str, Always),
];

const TOLERATION: &[Field] = &[
    f("key", 1, Str, Always),
    f("operator", 2, Str, Always),
    f("value", 3, Str, Always),
    f("effect", 4, Str, Always),
    f("tolerationSeconds", 5, Int, Optional),
];

const POD_SPEC: &[Field] = &[
    f("containers", 2, Msg(CONTAINER), Repeated),
    f("restartPolicy", 3, Str, Always),
    f("terminationGracePeriodSeconds", 4, Int, Optional),
    f("activeDeadlineSeconds", 5, Int, Optional),
    f("dnsPolicy", 6, Str, Always),
    f("nodeSelector", 7, StrMap, Repeated),
    f("serviceAccountName", 8, Str, Always),
    f("serviceAccount", 9, Str, Always),
    f("nodeName", 10, Str, Always),
    f("hostNetwork", 11, Bool, Always),
    f("hostPID", 12, Bool, Always),
    f("hostIPC", 13, Bool, Always),
    f("hostname", 16, Str, Always),
    f("subdomain", 17, Str, Always),
    f("schedulerName", 19, Str, Always),
    f("automountServiceAccountToken", 21, Bool, Optional),
    f("tolerations", 22, Msg(TOLERATION), Repeated),
    f("priorityClassName", 24, Str, Always),
    f("priority", 25, Int, Optional),
    f("enableServiceLinks", 30, Bool, Optional),
    f("preemptionPolicy", 31, Str, Optional),
];

const POD_CONDITION: &[Field] = &[
    f("type", 1, Str, Always),
    f("status", 2, Str, Always),
    f("lastProbeTime", 3, Time, Always),
    f("lastTransitionTime", 4, Time, Always),
    f("reason", 5, Str, Always),
    f("message", 6, Str, Always),
];

const POD_STATUS: &[Field] = &[
    f("phase", 1, Str, Always),
    f("conditions", 2, Msg(POD_CONDITION), Repeated),
    f("message", 3, Str, Always),
    f("reason", 4, Str, Always),
    f("hostIP", 5, Str, Always),
    f("podIP", 6, Str, Always),
    f("startTime", 7, Time, Optional),
    f("qosClass", 9, Str, Always),
    f("nominatedNodeName", 11, Str, Always),
];

pub(super) const POD: &[Field] = &[
    f("metadata", 1, Msg(OBJECT_META), Always),
    f("spec", 2, Msg(POD_SPEC), Always),
    f("status", 3, Msg(POD_STATUS), Always),
];

const TAINT: &[Field] = &[
    f("key", 1, Str, Always),
    f("value", 2, Str, Always),
    f("effect", 3, Str, Always),
    f("timeAdded", 4, Time, Optional),
];

const NODE_SPEC: &[Field] = &[
    f("podCIDR", 1, Str, Always),
    f("externalID", 2, Str, Always),
    f("providerID", 3, Str, Always),
    f("unschedulable", 4, Bool, Always),
    f("taints", 5, Msg(TAINT), Repeated),
    f("podCIDRs", 7, Str, Repeated),
];

const NODE_CONDITION: &[Field] = &[
    f("type", 1, Str, Always),
    f("status", 2, Str, Always),
    f("lastHeartbeatTime", 3, Time, Always),
    f("lastTransitionTime", 4, Time, Always),
    f("reason", 5, Str, Always),
    f("message", 6, Str, Always),
];

const NODE_ADDRESS: &[Field] = &[f("type", 1, Str, Always), f("address", 2, Str, Always)];

const DAEMON_ENDPOINT: &[Field] = &[f("Port", 1, Int, Always)];

const NODE_DAEMON_ENDPOINTS: &[Field] = &[f("kubeletEndpoint", 1, Msg(DAEMON_ENDPOINT), Always)];

const NODE_SYSTEM_INFO: &[Field] = &[
    f("machineID", 1, Str, Always),
    f("systemUUID", 2, Str, Always),
    f("bootID", 3, Str, Always),
    f("kernelVersion", 4, Str, Always),
    f("osImage", 5, Str, Always),
    f("containerRuntimeVersion", 6, Str, Always),
    f("kubeletVersion", 7, Str, Always),
    f("kubeProxyVersion", 8, Str, Always),
    f("operatingSystem", 9, Str, Always),
    f("architecture", 10, Str, Always),
];

const NODE_STATUS: &[Field] = &[
    f("capacity", 1, QuantityMap, Repeated),
    f("allocatable", 2, QuantityMap, Repeated),
    f("phase", 3, Str, Always),
    f("conditions", 4, Msg(NODE_CONDITION), Repeated),
    f("addresses", 5, Msg(NODE_ADDRESS), Repeated),
    f("daemonEndpoints", 6, Msg(NODE_DAEMON_ENDPOINTS), Always),
    f("nodeInfo", 7, Msg(NODE_SYSTEM_INFO), Always),
];

pub(super) const NODE: &[Field] = &[
    f("metadata", 1, Msg(OBJECT_META), Always),
    f("spec", 2, Msg(NODE_SPEC), Always),
    f("status", 3, Msg(NODE_STATUS), Always),
];

const LEASE_SPEC: &[Field] = &[
    f("holderIdentity", 1, Str, Optional),
    f("leaseDurationSeconds", 2, Int, Optional),
    f("acquireTime", 3, Time, Optional),
    f("renewTime", 4, Time, Optional),
    f("leaseTransitions", 5, Int, Optional),
];

pub(super) const LEASE: &[Field] = &[
    f("metadata", 1, Msg(OBJECT_META), Always),
    f("spec", 2, Msg(LEASE_SPEC), Always),
];

const STATUS_CAUSE: &[Field] = &[
    f("reason", 1, Str, Always),
    f("message", 2, Str, Always),
    f("field", 3, Str, Always),
];

const STATUS_DETAILS: &[Field] = &[
    f("name", 1, Str, Always),
    f("group", 2, Str, Always),
    f("kind", 3, Str, Always),
    f("causes", 4, Msg(STATUS_CAUSE), Repeated),
    f("retryAfterSeconds", 5, Int, Always),
    f("uid", 6, Str, Always),
];

pub(super) const STATUS: &[Field] = &[
    f("metadata", 1, Msg(LIST_META), Always),
    f("status", 2, Str, Always),
    f("message", 3, Str, Always),
    f("reason", 4, Str, Always),
    f("details", 5, Msg(STATUS_DETAILS), Optional),
    f("code", 6, Int, Always),
];
