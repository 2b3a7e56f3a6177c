//! The fleet pause as it lives on the leader Lease: one annotation,
//! [`PAUSE_ANNOTATION`], holding `{"what":"fencing|tainting|all","until":"<RFC 3339>",
//! "reason":"…","by":"…"}`. The elector keeps the Lease's metadata whole on every write (a
//! PUT of the metadata last read, with its resourceVersion: a pause written in between makes
//! the renewal conflict, re-read and carry it), so the pause survives renewals and takeovers.

use serde::{Deserialize, Serialize};

pub use crate::controller::fleet_pause::{FleetPause, PAUSE_ANNOTATION, PauseScope};
use crate::time::Time;

#[derive(Serialize, Deserialize)]
struct Wire {
    what: String,
    until: String,
    #[serde(default)]
    reason: String,
    #[serde(default)]
    by: String,
}

/// The annotation's value for `pause`.
pub(crate) fn encode(pause: &FleetPause) -> String {
    serde_json::to_string(&Wire {
        what: pause.what.as_str().to_string(),
        until: pause.until.to_rfc3339(),
        reason: pause.reason.clone(),
        by: pause.by.clone(),
    })
    .unwrap_or_default()
}

/// The pause an annotation value says, or why it cannot be read.
pub(crate) fn decode(value: &str) -> Result<FleetPause, String> {
    let wire: Wire = serde_json::from_str(value).map_err(|e| format!("not the pause JSON: {e}"))?;
    let what = PauseScope::parse(&wire.what)
        .ok_or_else(|| format!("what={:?}: not fencing, tainting or all", wire.what))?;
    let until = Time::parse_rfc3339(&wire.until)
        .ok_or_else(|| format!("until={:?}: not an RFC 3339 time", wire.until))?;
    Ok(FleetPause {
        what,
        until,
        reason: wire.reason,
        by: wire.by,
    })
}

/// What the daemon makes of the annotation (`None`: absent). An unreadable value is a pause of
/// everything until the next valid write of the annotation (a `pause` or a `resume`), never
/// acting on a guess: it has no end of its own, so it is the same pause whenever and by
/// whichever instance it is read (a failover does not start it over), and it is named so in
/// `status`, `explain` and the decision log ([`FleetPause::until_next_write`]); the caller warns.
pub(crate) fn interpret(value: Option<&str>) -> Option<Result<FleetPause, (FleetPause, String)>> {
    let value = value?;
    Some(decode(value).map_err(|why| (FleetPause::unreadable(&why), why)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pause_round_trips_and_bad_values_are_named() {
        let p = FleetPause {
            what: PauseScope::Tainting,
            until: Time::parse_rfc3339("2026-03-01T10:00:00Z").unwrap(),
            reason: "switch \"core-2\" upgrade".into(),
            by: "alice@bastion".into(),
        };
        assert_eq!(decode(&encode(&p)), Ok(p));
        assert!(
            decode(r#"{"what":"everything","until":"2026-03-01T10:00:00Z"}"#)
                .unwrap_err()
                .contains("what=\"everything\"")
        );
        assert!(
            decode(r#"{"what":"all","until":"soon"}"#)
                .unwrap_err()
                .contains("until=\"soon\"")
        );
        let (held, _) = interpret(Some("{")).unwrap().unwrap_err();
        assert_eq!(held.what, PauseScope::All);
        assert!(held.until_next_write());
        // Read again later (another instance, after a failover): the same pause.
        assert_eq!(interpret(Some("{")).unwrap().unwrap_err().0, held);
        assert!(interpret(None).is_none());
    }
}
