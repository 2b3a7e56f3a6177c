//! The clocks a leader leaves for the next one (`controller/clocks.rs`) as they live on the
//! leader Lease: one annotation, [`CLOCKS_ANNOTATION`], holding
//! `{"full_since":{"<domain>":<unix ms>},"cooldown_until":{…},"brakes":{"fleet":[<ms>,<ms>|null]}}`.
//! The leader sets it in the metadata its renewals write (the elector keeps the metadata whole,
//! as for the pause); the next leader reads it with the Lease it acquires.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

pub use crate::controller::clocks::Clocks;
use crate::time::Time;

/// The annotation holding the clocks.
pub const CLOCKS_ANNOTATION: &str = "node-lifecycled.io/clocks";

#[derive(Serialize, Deserialize, Default)]
struct Wire {
    #[serde(default)]
    full_since: BTreeMap<String, u64>,
    #[serde(default)]
    cooldown_until: BTreeMap<String, u64>,
    #[serde(default)]
    brakes: BTreeMap<String, (u64, Option<u64>)>,
}

/// The annotation's value for `clocks`.
pub(crate) fn encode(clocks: &Clocks) -> String {
    let ms = |t: &Time| t.as_unix_millis();
    serde_json::to_string(&Wire {
        full_since: clocks
            .full_since
            .iter()
            .map(|(k, t)| (k.clone(), ms(t)))
            .collect(),
        cooldown_until: clocks
            .cooldown_until
            .iter()
            .map(|(k, t)| (k.clone(), ms(t)))
            .collect(),
        brakes: clocks
            .brakes
            .iter()
            .map(|(k, (e, w))| (k.clone(), (ms(e), w.as_ref().map(ms))))
            .collect(),
    })
    .unwrap_or_default()
}

/// The clocks an annotation value says, or why it cannot be read (then none are honoured:
/// the new leader starts them over, as before they were kept).
pub(crate) fn decode(value: &str) -> Result<Clocks, String> {
    let wire: Wire =
        serde_json::from_str(value).map_err(|e| format!("not the clocks JSON: {e}"))?;
    let t = Time::from_unix_millis;
    Ok(Clocks {
        full_since: wire
            .full_since
            .into_iter()
            .map(|(k, v)| (k, t(v)))
            .collect(),
        cooldown_until: wire
            .cooldown_until
            .into_iter()
            .map(|(k, v)| (k, t(v)))
            .collect(),
        brakes: wire
            .brakes
            .into_iter()
            .map(|(k, (e, w))| (k, (t(e), w.map(t))))
            .collect(),
        after_outage: false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clocks_round_trip_and_bad_values_are_named() {
        let at = |ms| Time::from_unix_millis(ms);
        let mut clocks = Clocks::default();
        clocks
            .full_since
            .insert("example.com/site=s1".into(), at(1_000));
        clocks.cooldown_until.insert("r\0:\0a".into(), at(2_500));
        clocks.brakes.insert("fleet".into(), (at(3_000), None));
        clocks
            .brakes
            .insert("pool:edge".into(), (at(3_000), Some(at(4_000))));
        assert_eq!(decode(&encode(&clocks)), Ok(clocks));
        assert_eq!(decode("{}"), Ok(Clocks::default()));
        assert!(decode("nope").unwrap_err().contains("not the clocks JSON"));
    }
}
