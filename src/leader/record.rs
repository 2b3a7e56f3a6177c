//! The leader election record as it lives in a coordination.k8s.io/v1 Lease's `spec`
//! (client-go `resourcelock.LeaderElectionRecord` and `LeaseLock`).

use std::time::Duration;

use k8s_openapi::api::coordination::v1 as coordination;
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;
use k8s_openapi::jiff::Timestamp;
use serde::Deserialize;
use serde_json::Value;

use crate::kube::body::to_json;

/// Who holds the lease and for how long, in the Lease's own field names.
///
/// Times are kept as the text the server returned: the elector never reads them (they come from
/// another host's clock), it only notices that they changed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LeaseRecord {
    /// Empty: nobody holds the lease (never taken, or released).
    pub(crate) holder_identity: String,
    pub(crate) lease_duration_seconds: i32,
    pub(crate) acquire_time: Option<String>,
    pub(crate) renew_time: Option<String>,
    pub(crate) lease_transitions: i32,
}

impl LeaseRecord {
    pub(crate) fn is_held(&self) -> bool {
        !self.holder_identity.is_empty()
    }

    /// How long, from when a change of this record was observed, others must leave it alone. A
    /// negative value (never written by a sane client) counts as zero, as upstream's
    /// `time.Duration` arithmetic would make it already expired.
    pub(crate) fn lease_duration(&self) -> Duration {
        Duration::from_secs(u64::try_from(self.lease_duration_seconds).unwrap_or(0))
    }

    /// The Lease `spec` this record is written as (client-go `LeaderElectionRecordToLeaseSpec`:
    /// every field present, `holderIdentity` an empty string after a release). Fails only on a
    /// time that is not RFC 3339 (ours never are; a foreign holder's come normalised by the
    /// server).
    pub(crate) fn to_spec(&self) -> Result<coordination::LeaseSpec, String> {
        Ok(coordination::LeaseSpec {
            holder_identity: Some(self.holder_identity.clone()),
            lease_duration_seconds: Some(self.lease_duration_seconds),
            acquire_time: self.acquire_time.as_deref().map(micro_time).transpose()?,
            renew_time: self.renew_time.as_deref().map(micro_time).transpose()?,
            lease_transitions: Some(self.lease_transitions),
            ..Default::default()
        })
    }
}

fn micro_time(text: &str) -> Result<meta::MicroTime, String> {
    text.parse::<Timestamp>()
        .map(meta::MicroTime)
        .map_err(|e| format!("lease time {text:?} is not RFC 3339: {e}"))
}

/// A Lease as the server returned it: the record, its resourceVersion (the precondition of the
/// next update) and its metadata kept whole, so that an update (a PUT replaces the object) does
/// not drop labels, annotations or owner references someone else put there.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct LeaseObject {
    pub(crate) record: LeaseRecord,
    pub(crate) resource_version: String,
    pub(crate) metadata: meta::ObjectMeta,
}

impl LeaseObject {
    /// The body of a create (`resource_version` `None`) or of an update with `resource_version`
    /// as its precondition.
    pub(crate) fn body(
        metadata: meta::ObjectMeta,
        record: &LeaseRecord,
        resource_version: Option<&str>,
    ) -> Result<Value, String> {
        let lease = coordination::Lease {
            metadata: meta::ObjectMeta {
                resource_version: resource_version.map(str::to_string),
                ..metadata
            },
            spec: Some(record.to_spec()?),
        };
        Ok(to_json(&lease))
    }
}

/// What serde reads of a Lease; nulls and absent fields alike become `None`.
#[derive(Deserialize)]
pub(crate) struct RawLease {
    #[serde(default)]
    metadata: Option<meta::ObjectMeta>,
    #[serde(default)]
    spec: Option<RawSpec>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawSpec {
    #[serde(default)]
    holder_identity: Option<String>,
    #[serde(default)]
    lease_duration_seconds: Option<i32>,
    #[serde(default)]
    acquire_time: Option<String>,
    #[serde(default)]
    renew_time: Option<String>,
    #[serde(default)]
    lease_transitions: Option<i32>,
}

impl RawLease {
    /// `what` names the lease in the error (`kube-system/node-lifecycled`).
    pub(crate) fn into_object(self, what: &str) -> Result<LeaseObject, String> {
        let metadata = self.metadata.unwrap_or_default();
        let resource_version = match metadata.resource_version.as_deref() {
            Some(rv) if !rv.is_empty() => rv.to_string(),
            _ => return Err(format!("lease {what} has no metadata.resourceVersion")),
        };
        let record = match self.spec {
            None => LeaseRecord::default(),
            Some(s) => LeaseRecord {
                holder_identity: s.holder_identity.unwrap_or_default(),
                lease_duration_seconds: s.lease_duration_seconds.unwrap_or(0),
                acquire_time: s.acquire_time,
                renew_time: s.renew_time,
                lease_transitions: s.lease_transitions.unwrap_or(0),
            },
        };
        Ok(LeaseObject {
            record,
            resource_version,
            metadata,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn decode(text: &str) -> Result<LeaseObject, String> {
        serde_json::from_str::<RawLease>(text)
            .map_err(|e| e.to_string())?
            .into_object("kube-system/node-lifecycled")
    }

    #[test]
    fn decodes_a_lease_as_the_api_server_returns_it() {
        let lease = decode(
            r#"{"kind":"Lease","apiVersion":"coordination.k8s.io/v1",
            "metadata":{"name":"node-lifecycled","namespace":"kube-system","uid":"u1",
              "resourceVersion":"4242","labels":{"team":"infra"}},
            "spec":{"holderIdentity":"cp-1_0a1b2c","leaseDurationSeconds":15,
              "acquireTime":"2024-03-12T10:00:00.000000Z","renewTime":"2024-03-12T10:02:19.731204Z",
              "leaseTransitions":3}}"#,
        )
        .unwrap();
        assert_eq!(lease.resource_version, "4242");
        assert_eq!(
            lease.record,
            LeaseRecord {
                holder_identity: "cp-1_0a1b2c".into(),
                lease_duration_seconds: 15,
                acquire_time: Some("2024-03-12T10:00:00.000000Z".into()),
                renew_time: Some("2024-03-12T10:02:19.731204Z".into()),
                lease_transitions: 3,
            }
        );
        assert_eq!(lease.record.lease_duration(), Duration::from_secs(15));
    }

    #[test]
    fn a_lease_without_spec_or_with_nulls_is_an_unheld_record() {
        let bare = decode(r#"{"metadata":{"resourceVersion":"7"}}"#).unwrap();
        assert_eq!(bare.record, LeaseRecord::default());
        assert!(!bare.record.is_held());
        let nulls = decode(
            r#"{"metadata":{"resourceVersion":"7"},"spec":{"holderIdentity":null,
            "leaseDurationSeconds":null,"renewTime":null}}"#,
        )
        .unwrap();
        assert_eq!(nulls.record, LeaseRecord::default());
        let negative =
            decode(r#"{"metadata":{"resourceVersion":"7"},"spec":{"leaseDurationSeconds":-5}}"#)
                .unwrap();
        assert_eq!(negative.record.lease_duration(), Duration::ZERO);
    }

    #[test]
    fn a_lease_without_resource_version_cannot_be_updated_safely_and_is_refused() {
        assert_eq!(
            decode(r#"{"metadata":{"name":"x"},"spec":{}}"#).unwrap_err(),
            "lease kube-system/node-lifecycled has no metadata.resourceVersion"
        );
        assert!(
            decode(r#"{"metadata":{"resourceVersion":"1"},"spec":{"leaseTransitions":"many"}}"#)
                .is_err()
        );
    }

    #[test]
    fn update_body_keeps_foreign_metadata_and_sets_the_precondition() {
        let lease = decode(
            r#"{"metadata":{"name":"l","namespace":"ns","resourceVersion":"9",
            "annotations":{"a":"b"}},"spec":{"holderIdentity":"x","preferredHolder":"y"}}"#,
        )
        .unwrap();
        let record = LeaseRecord {
            holder_identity: String::new(),
            lease_duration_seconds: 1,
            acquire_time: Some("2024-01-01T00:00:00.000000Z".into()),
            renew_time: Some("2024-01-01T00:00:00.000000Z".into()),
            lease_transitions: 2,
        };
        let body = LeaseObject::body(lease.metadata, &record, Some("10")).unwrap();
        assert_eq!(
            body,
            json!({
                "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "metadata": {"name": "l", "namespace": "ns", "resourceVersion": "10",
                    "annotations": {"a": "b"}},
                "spec": {"holderIdentity": "", "leaseDurationSeconds": 1,
                    "acquireTime": "2024-01-01T00:00:00.000000Z",
                    "renewTime": "2024-01-01T00:00:00.000000Z", "leaseTransitions": 2}
            })
        );
        let stale = meta::ObjectMeta {
            resource_version: Some("3".into()),
            ..Default::default()
        };
        let create = LeaseObject::body(stale, &record, None).unwrap();
        assert!(create["metadata"].get("resourceVersion").is_none());
        let garbled = LeaseRecord {
            renew_time: Some("yesterday".into()),
            ..record
        };
        assert_eq!(
            LeaseObject::body(meta::ObjectMeta::default(), &garbled, None).unwrap_err(),
            "lease time \"yesterday\" is not RFC 3339: ".to_string()
                + &"yesterday".parse::<Timestamp>().unwrap_err().to_string()
        );
    }
}
