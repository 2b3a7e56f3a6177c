//! A Lease: the one conversion of its fields, for the JSON wire shape and for protobuf's
//! direct read (`proto/objects.rs`, `lease`), so both paths judge a renewal alike.

use super::{Decode, DecodeContext, DecodeError, wire};
use crate::model::{Lease, LeaseName, Version};

impl Decode for Lease {
    const KIND: &'static str = "Lease";
    type Wire<'de> = wire::Lease<'de>;

    fn from_wire(w: wire::Lease<'_>, _: &mut DecodeContext) -> Result<Lease, DecodeError> {
        let meta = w.metadata.unwrap_or_default();
        let (renew, duration) = w
            .spec
            .map_or((None, None), |s| (s.renew_time, s.lease_duration_seconds));
        lease_from_fields(
            wire::text(&meta.name),
            wire::text(&meta.resource_version),
            renew.as_ref(),
            duration,
        )
    }
}

/// The one conversion of a Lease's fields, for JSON's wire shape and protobuf's direct read
/// (`proto/objects.rs`, `lease`); an absent string is empty.
pub(crate) fn lease_from_fields(
    name: &str,
    resource_version: &str,
    renew_time: Option<&wire::Stamp<'_>>,
    duration: Option<i32>,
) -> Result<Lease, DecodeError> {
    if name.is_empty() {
        return Err(DecodeError::new("Lease", "missing metadata.name"));
    }
    let renew_time = match renew_time {
        None => None,
        Some(s) => s.time().map_err(|s| {
            DecodeError::new("Lease", format!("spec.renewTime: bad timestamp {s:?}"))
        })?,
    };
    Ok(Lease {
        // Not interned (`inline_text.rs`): the store finds the Lease by this text.
        name: LeaseName::new(name),
        renew_time,
        // A zero or negative duration is no cadence to judge a kubelet by.
        duration_seconds: duration
            .and_then(|d| u32::try_from(d).ok())
            .filter(|d| *d > 0),
        resource_version: Version::new(resource_version),
    })
}
