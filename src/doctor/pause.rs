//! `node-lifecycled pause fencing|tainting|all --for D --reason R` and `resume [WHAT]` (issue
//! #27): the fleet pause written on the daemon's leader Lease (`[leader_election]`
//! namespace/name), with the daemon's own config and credentials, as `doctor` connects. Every
//! instance reads it from there (`leader/pause.rs`); the leader honours it within one
//! `retry_period`.

use std::time::Duration;

use serde_json::json;

use crate::config::Config;
use crate::kube::{ApiClient, ApiError, PatchType};
use crate::leader::pause::{FleetPause, PAUSE_ANNOTATION, PauseScope, decode, encode};
use crate::time::{Time, format_duration};

use super::Options;

/// Why a pause or resume was not written; each maps to an exit code in `main.rs`.
#[derive(Debug, PartialEq, Eq)]
pub enum PauseFailure {
    /// `--for` zero (exit 64, a usage error).
    Usage(String),
    /// The configuration does not allow it, or cannot be used (exit 78).
    Config(String),
    /// The API server refused or did not answer (exit 69; 77 when forbidden).
    Api(String),
    Forbidden(String),
}

/// Checks `--for` against the configured maximum (before any network).
pub(crate) fn check_duration(config: &Config, path: &str, d: Duration) -> Result<(), PauseFailure> {
    if d.is_zero() {
        return Err(PauseFailure::Usage(
            "--for must be longer than 0s".to_string(),
        ));
    }
    if d > config.fencing.max_pause {
        // The configured maximum is what refuses it: a configuration error (exit 78), like
        // every other value that breaks a key's limit.
        // `file:line:` of the key when the file sets it, else the file (the default applies).
        let at = std::fs::read_to_string(path)
            .ok()
            .and_then(|text| {
                text.lines()
                    .position(|l| l.trim_start().starts_with("max_pause"))
                    .map(|i| format!("{path}:{}", i + 1))
            })
            .unwrap_or_else(|| path.to_string());
        return Err(PauseFailure::Config(format!(
            "{at}: fencing.max_pause: --for {} is longer than the maximum, \"{}\"",
            format_duration(d),
            format_duration(config.fencing.max_pause)
        )));
    }
    Ok(())
}

fn lease_path(config: &Config) -> String {
    format!(
        "/apis/coordination.k8s.io/v1/namespaces/{}/leases/{}",
        config.leader_election.namespace, config.leader_election.name
    )
}

/// `e` with the request it answers: a server's answer names it already; a timeout or a broken
/// connection does not.
fn said(what: &str, e: &ApiError) -> String {
    match e.code() {
        Some(_) => e.to_string(),
        None => format!("{what}: {e}"),
    }
}

fn api_failure(what: &str, e: ApiError) -> PauseFailure {
    match e {
        ApiError::Forbidden(_) | ApiError::Unauthorized(_) => PauseFailure::Forbidden(format!(
            "{} (conf/rbac.yaml grants get and patch on the leader Lease)",
            said(what, &e)
        )),
        e => PauseFailure::Api(said(what, &e)),
    }
}

fn client(options: &Options, config: &Config) -> Result<ApiClient, PauseFailure> {
    if !config.leader_election.enabled {
        return Err(PauseFailure::Config(format!(
            "{}: leader_election.enabled: the fleet pause lives on the leader Lease; \
             it must be true",
            options.config.display()
        )));
    }
    super::cluster::connect(options, config)
        .map(|(client, _)| client)
        .map_err(PauseFailure::Config)
}

/// `user@host` of whoever runs the command.
pub(crate) fn who() -> String {
    let user = ["SUDO_USER", "USER", "LOGNAME"]
        .iter()
        .find_map(|k| std::env::var(k).ok().filter(|v| !v.is_empty()))
        .unwrap_or_else(|| "unknown".into());
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_default();
    if host.is_empty() {
        user
    } else {
        format!("{user}@{host}")
    }
}

/// The pause on the Lease now, and the Lease's resourceVersion (`None`: no Lease yet).
fn read(
    client: &mut ApiClient,
    config: &Config,
) -> Result<Option<(Option<String>, String)>, PauseFailure> {
    let path = lease_path(config);
    match client.get_json::<serde_json::Value>(&path) {
        Ok(lease) => {
            let meta = &lease["metadata"];
            let value = meta["annotations"][PAUSE_ANNOTATION]
                .as_str()
                .map(str::to_string);
            let rv = meta["resourceVersion"].as_str().unwrap_or("").to_string();
            Ok(Some((value, rv)))
        }
        Err(ApiError::NotFound(_)) => Ok(None),
        Err(e) => Err(api_failure(&format!("GET {path}"), e)),
    }
}

/// How many times a pause or resume is read and written again after a 409: the leader renews
/// the Lease every `retry_period`, so the Lease can change between `resume`'s read and its
/// write, and a `pause` that creates the Lease can race the daemon creating it. client-go's
/// `retry.RetryOnConflict` with `DefaultRetry` takes the same 5 steps, 10 ms apart.
pub(crate) const CONFLICT_TRIES: u32 = 5;
const CONFLICT_BACKOFF: Duration = Duration::from_millis(10);

/// A write the server answered 409 (the Lease changed, or was created meanwhile): read and
/// decide again. Carries the server's words for the last one.
struct Conflict(String);

/// Runs `attempt` (read, decide, write) until it is not refused with a 409, at most
/// `CONFLICT_TRIES` times.
fn retry_on_conflict(
    mut attempt: impl FnMut() -> Result<Result<String, Conflict>, PauseFailure>,
) -> Result<String, PauseFailure> {
    let mut tries = 0;
    loop {
        tries += 1;
        match attempt()? {
            Ok(line) => return Ok(line),
            Err(Conflict(words)) if tries >= CONFLICT_TRIES => {
                return Err(PauseFailure::Api(format!(
                    "{words} ({tries} times in a row: something else keeps writing the Lease)"
                )));
            }
            Err(Conflict(_)) => std::thread::sleep(CONFLICT_BACKOFF),
        }
    }
}

/// Writes the annotation (`None` removes it) with the Lease's resourceVersion as precondition
/// when given; creates the Lease (no holder: the daemon acquires it as usual) if there is none.
fn write(
    client: &mut ApiClient,
    config: &Config,
    value: Option<String>,
    rv: Option<&str>,
) -> Result<Result<(), Conflict>, PauseFailure> {
    let path = lease_path(config);
    let mut metadata = json!({ "annotations": { PAUSE_ANNOTATION: value } });
    if let Some(rv) = rv {
        metadata["resourceVersion"] = json!(rv);
    }
    let body = json!({ "metadata": metadata }).to_string();
    match client.patch::<serde_json::Value>(&path, PatchType::Merge, body.as_bytes()) {
        Ok(_) => Ok(Ok(())),
        Err(e @ ApiError::Conflict(_)) => Ok(Err(Conflict(e.to_string()))),
        Err(ApiError::NotFound(_)) if value.is_some() => {
            let collection = path.rsplit_once('/').map(|(c, _)| c).unwrap_or(&path);
            let lease = json!({
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {
                    "name": config.leader_election.name,
                    "namespace": config.leader_election.namespace,
                    "annotations": { PAUSE_ANNOTATION: value },
                },
                "spec": {},
            });
            match client.post::<serde_json::Value>(collection, lease.to_string().as_bytes()) {
                Ok(_) => Ok(Ok(())),
                // AlreadyExists: the daemon created it meanwhile; patch it on the next try.
                Err(e @ ApiError::Conflict(_)) => Ok(Err(Conflict(e.to_string()))),
                Err(e) => Err(api_failure(&format!("POST {collection}"), e)),
            }
        }
        Err(ApiError::NotFound(_)) => Ok(Ok(())),
        Err(e) => Err(api_failure(&format!("PATCH {path}"), e)),
    }
}

/// Sets the pause; returns the line to print.
pub fn pause(
    options: &Options,
    config: &Config,
    what: PauseScope,
    duration: Duration,
    reason: &str,
    now: Time,
) -> Result<String, PauseFailure> {
    check_duration(config, &options.config.display().to_string(), duration)?;
    let mut client = client(options, config)?;
    let pause = FleetPause {
        what,
        until: now.saturating_add(duration),
        reason: reason.to_string(),
        by: who(),
    };
    let line = format!(
        "paused on lease {}/{}: {}",
        config.leader_election.namespace,
        config.leader_election.name,
        pause.describe()
    );
    retry_on_conflict(|| {
        let written = write(&mut client, config, Some(encode(&pause)), None)?;
        Ok(written.map(|()| line.clone()))
    })
}

/// What is left of `current` once `resumed` is resumed (`None`: nothing).
pub(crate) fn remaining(current: PauseScope, resumed: PauseScope) -> Option<PauseScope> {
    match (current, resumed) {
        (_, PauseScope::All) => None,
        (PauseScope::All, PauseScope::Fencing) => Some(PauseScope::Tainting),
        (PauseScope::All, PauseScope::Tainting) => Some(PauseScope::Fencing),
        (c, r) if c == r => None,
        (c, _) => Some(c),
    }
}

/// Ends the pause (or the part `what` names); returns the line to print.
pub fn resume(
    options: &Options,
    config: &Config,
    what: PauseScope,
) -> Result<String, PauseFailure> {
    let mut client = client(options, config)?;
    retry_on_conflict(|| resume_once(&mut client, config, what))
}

/// One read and write of `resume`, the write conditional on the Lease not having changed.
fn resume_once(
    client: &mut ApiClient,
    config: &Config,
    what: PauseScope,
) -> Result<Result<String, Conflict>, PauseFailure> {
    let Some((Some(value), rv)) = read(client, config)? else {
        return Ok(Ok("nothing is paused".to_string()));
    };
    let next = match decode(&value) {
        // An unreadable pause is removed whole.
        Err(_) => None,
        Ok(p) => match remaining(p.what, what) {
            Some(left) if left == p.what => {
                return Ok(Ok(format!(
                    "{} is not paused; the pause in force: {}",
                    what.as_str(),
                    p.describe()
                )));
            }
            Some(left) => Some(FleetPause { what: left, ..p }),
            None => None,
        },
    };
    let line = match &next {
        Some(p) => format!("resumed {}; still paused: {}", what.as_str(), p.describe()),
        None => "resumed: nothing is paused".to_string(),
    };
    let written = write(client, config, next.as_ref().map(encode), Some(&rv))?;
    Ok(written.map(|()| line))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resuming_part_of_a_pause_leaves_the_rest() {
        use PauseScope::*;
        assert_eq!(remaining(All, Fencing), Some(Tainting));
        assert_eq!(remaining(All, Tainting), Some(Fencing));
        assert_eq!(remaining(All, All), None);
        assert_eq!(remaining(Fencing, Fencing), None);
        assert_eq!(remaining(Fencing, All), None);
        assert_eq!(remaining(Fencing, Tainting), Some(Fencing));
    }

    #[test]
    fn a_pause_longer_than_max_pause_is_refused_naming_the_key() {
        let config = Config::from_str(
            "[fencing]\nmax_pause = \"2h\"\n",
            std::path::Path::new("c.toml"),
        )
        .unwrap();
        assert_eq!(
            check_duration(&config, "c.toml", Duration::from_secs(7200)),
            Ok(())
        );
        let Err(PauseFailure::Config(line)) =
            check_duration(&config, "c.toml", Duration::from_secs(7201))
        else {
            panic!("accepted");
        };
        assert_eq!(
            line,
            "c.toml: fencing.max_pause: --for 2h1s is longer than the maximum, \"2h\""
        );
        assert!(matches!(
            check_duration(&config, "c.toml", Duration::ZERO),
            Err(PauseFailure::Usage(_))
        ));
    }
}
