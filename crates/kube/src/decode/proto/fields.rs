//! The protobuf field numbers we read, from upstream `generated.proto`
//! (`k8s.io/apimachinery/pkg/runtime`, `.../apis/meta/v1`, `k8s.io/api/core/v1`,
//! `k8s.io/api/coordination/v1`). Each constant names its message and field.

// runtime.Unknown
/// runtime.Unknown.typeMeta (runtime.TypeMeta)
pub(crate) const UNKNOWN_TYPE_META: u32 = 1;
/// runtime.Unknown.raw (the object's own message)
pub(crate) const UNKNOWN_RAW: u32 = 2;
/// runtime.Unknown.contentEncoding
pub(crate) const UNKNOWN_CONTENT_ENCODING: u32 = 3;
/// runtime.TypeMeta.kind (apiVersion = 1)
pub(crate) const TYPE_META_KIND: u32 = 2;
/// runtime.RawExtension.raw
pub(crate) const RAW_EXTENSION_RAW: u32 = 1;

// meta/v1
/// metav1.WatchEvent.type
pub(crate) const WATCH_EVENT_TYPE: u32 = 1;
/// metav1.WatchEvent.object (runtime.RawExtension)
pub(crate) const WATCH_EVENT_OBJECT: u32 = 2;
/// A typed list's metadata (metav1.ListMeta), e.g. core/v1 PodList.metadata
pub(crate) const LIST_METADATA: u32 = 1;
/// A typed list's items, e.g. core/v1 PodList.items
pub(crate) const LIST_ITEMS: u32 = 2;
/// metav1.ListMeta.resourceVersion
pub(crate) const LIST_META_RESOURCE_VERSION: u32 = 2;
/// metav1.ListMeta.continue
pub(crate) const LIST_META_CONTINUE: u32 = 3;
/// metav1.Status.message
pub(crate) const STATUS_MESSAGE: u32 = 3;
/// metav1.Status.reason
pub(crate) const STATUS_REASON: u32 = 4;
/// metav1.Status.code (int32)
pub(crate) const STATUS_CODE: u32 = 6;
/// metav1.Time.seconds and metav1.MicroTime.seconds (int64)
pub(crate) const TIME_SECONDS: u32 = 1;
/// metav1.Time.nanos and metav1.MicroTime.nanos (int32)
pub(crate) const TIME_NANOS: u32 = 2;
/// Every top-level kind's metadata (metav1.ObjectMeta): Node, Pod, Lease.metadata
pub(crate) const OBJECT_METADATA: u32 = 1;
/// Node.spec, Pod.spec, Lease.spec
pub(crate) const OBJECT_SPEC: u32 = 2;
/// Node.status, Pod.status
pub(crate) const OBJECT_STATUS: u32 = 3;
/// metav1.ObjectMeta.name
pub(crate) const META_NAME: u32 = 1;
/// metav1.ObjectMeta.namespace
pub(crate) const META_NAMESPACE: u32 = 3;
/// metav1.ObjectMeta.uid
pub(crate) const META_UID: u32 = 5;
/// metav1.ObjectMeta.resourceVersion
pub(crate) const META_RESOURCE_VERSION: u32 = 6;
/// metav1.ObjectMeta.creationTimestamp (metav1.Time)
pub(crate) const META_CREATION_TIMESTAMP: u32 = 8;
/// metav1.ObjectMeta.deletionTimestamp (metav1.Time)
pub(crate) const META_DELETION_TIMESTAMP: u32 = 9;
/// metav1.ObjectMeta.labels (map<string, string>)
pub(crate) const META_LABELS: u32 = 11;
/// metav1.ObjectMeta.annotations (map<string, string>)
pub(crate) const META_ANNOTATIONS: u32 = 12;
/// metav1.ObjectMeta.ownerReferences
pub(crate) const META_OWNER_REFERENCES: u32 = 13;
/// metav1.ObjectMeta.managedFields (read in shadow mode only)
pub(crate) const META_MANAGED_FIELDS: u32 = 17;
/// metav1.ManagedFieldsEntry.manager
pub(crate) const MANAGED_MANAGER: u32 = 1;
/// metav1.ManagedFieldsEntry.fieldsV1 (metav1.FieldsV1)
pub(crate) const MANAGED_FIELDS_V1: u32 = 7;
/// metav1.FieldsV1.Raw (bytes: JSON)
pub(crate) const FIELDS_V1_RAW: u32 = 1;
/// A map<string, string> entry's key
pub(crate) const MAP_KEY: u32 = 1;
/// A map<string, string> entry's value
pub(crate) const MAP_VALUE: u32 = 2;
/// metav1.OwnerReference.kind
pub(crate) const OWNER_KIND: u32 = 1;
/// metav1.OwnerReference.controller (bool)
pub(crate) const OWNER_CONTROLLER: u32 = 6;

// core/v1
/// core/v1 NodeSpec.unschedulable (bool)
pub(crate) const NODE_SPEC_UNSCHEDULABLE: u32 = 4;
/// core/v1 NodeSpec.taints
pub(crate) const NODE_SPEC_TAINTS: u32 = 5;
/// core/v1 Taint.key
pub(crate) const TAINT_KEY: u32 = 1;
/// core/v1 Taint.value
pub(crate) const TAINT_VALUE: u32 = 2;
/// core/v1 Taint.effect
pub(crate) const TAINT_EFFECT: u32 = 3;
/// core/v1 Taint.timeAdded (metav1.Time)
pub(crate) const TAINT_TIME_ADDED: u32 = 4;
/// core/v1 NodeStatus.conditions
pub(crate) const NODE_STATUS_CONDITIONS: u32 = 4;
/// core/v1 NodeCondition.type and PodCondition.type
pub(crate) const CONDITION_TYPE: u32 = 1;
/// core/v1 NodeCondition.status and PodCondition.status
pub(crate) const CONDITION_STATUS: u32 = 2;
/// core/v1 NodeCondition.lastHeartbeatTime (metav1.Time)
pub(crate) const NODE_CONDITION_LAST_HEARTBEAT_TIME: u32 = 3;
/// core/v1 NodeCondition.lastTransitionTime (metav1.Time)
pub(crate) const NODE_CONDITION_LAST_TRANSITION_TIME: u32 = 4;
/// core/v1 NodeCondition.reason and PodCondition.reason
pub(crate) const CONDITION_REASON: u32 = 5;
/// core/v1 NodeCondition.message and PodCondition.message
pub(crate) const CONDITION_MESSAGE: u32 = 6;
/// core/v1 PodSpec.nodeName
pub(crate) const POD_SPEC_NODE_NAME: u32 = 10;
/// core/v1 PodSpec.tolerations
pub(crate) const POD_SPEC_TOLERATIONS: u32 = 22;
/// core/v1 Toleration.key
pub(crate) const TOLERATION_KEY: u32 = 1;
/// core/v1 Toleration.operator
pub(crate) const TOLERATION_OPERATOR: u32 = 2;
/// core/v1 Toleration.value
pub(crate) const TOLERATION_VALUE: u32 = 3;
/// core/v1 Toleration.effect
pub(crate) const TOLERATION_EFFECT: u32 = 4;
/// core/v1 Toleration.tolerationSeconds (int64)
pub(crate) const TOLERATION_SECONDS: u32 = 5;
/// core/v1 PodStatus.conditions
pub(crate) const POD_STATUS_CONDITIONS: u32 = 2;

// coordination/v1
/// coordination/v1 LeaseSpec.renewTime (metav1.MicroTime)
pub(crate) const LEASE_SPEC_LEASE_DURATION_SECONDS: u32 = 2;
pub(crate) const LEASE_SPEC_RENEW_TIME: u32 = 4;
