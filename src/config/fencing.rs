//! `[fencing]`: powering off a node that stopped heartbeating, through the operator's command,
//! then releasing its stateful pods with the out-of-service taint (issue #17). Off by default:
//! the command is site-specific (IPMI, Redfish, a PDU) and a wrong one powers off a live node.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Duration;

use super::raw::{Field, RawFencing};
use super::{ConfigError, Validator, flag};

#[derive(Clone, Debug, PartialEq)]
pub struct FencingConfig {
    pub enabled: bool,
    /// argv, run without a shell; `command[0]` is an absolute path to an executable file.
    pub command: Vec<String>,
    /// How long a node must be Ready=Unknown before it is fenced.
    pub after: Duration,
    /// A command still running after this is killed and counts as a failure.
    pub timeout: Duration,
    pub max_concurrent: u32,
    /// Only nodes carrying all these labels are fenced; empty: every node.
    pub match_labels: Vec<(String, String)>,
    /// Wait before the next try after a failure; doubled per failure up to `retry_backoff_max`.
    pub retry_backoff: Duration,
    pub retry_backoff_max: Duration,
    pub remove_out_of_service_on_recovery: bool,
    /// A cordoned node (`spec.unschedulable`) is not fenced (issue #27).
    pub skip_cordoned: bool,
    /// The longest `node-lifecycled pause … --for` accepted (every kind of pause, not only
    /// fencing's; issue #27).
    pub max_pause: Duration,
}

/// The defaults, fencing off (what an empty `[fencing]` gives).
impl Default for FencingConfig {
    fn default() -> FencingConfig {
        FencingConfig {
            enabled: false,
            command: Vec::new(),
            after: Duration::from_secs(300),
            timeout: Duration::from_secs(120),
            max_concurrent: 1,
            match_labels: Vec::new(),
            retry_backoff: Duration::from_secs(60),
            retry_backoff_max: Duration::from_secs(1800),
            remove_out_of_service_on_recovery: true,
            skip_cordoned: true,
            max_pause: Duration::from_secs(24 * 3600),
        }
    }
}

/// Largest `max_concurrent`: each fence is a child process of this single-threaded daemon.
const MAX_CONCURRENT: i64 = 64;

impl Validator<'_> {
    pub(super) fn fencing(&self, raw: &RawFencing) -> Result<FencingConfig, ConfigError> {
        let enabled = flag(&raw.enabled, false);
        let command = match &raw.command {
            None => Vec::new(),
            Some(v) => {
                let argv = v.get_ref();
                let err = |why: String| self.error(Some(v.span()), "fencing.command", why);
                let Some(program) = argv.first() else {
                    return Err(err(
                        "must name a program: an argv like [\"/usr/local/sbin/fence-ipmi\"]".into(),
                    ));
                };
                check_program(program).map_err(err)?;
                if argv.iter().any(|a| a.contains('\0')) {
                    return Err(err("an argument contains a NUL byte".into()));
                }
                argv.clone()
            }
        };
        if enabled && command.is_empty() {
            let span = raw.enabled.as_ref().map(|v| v.span());
            return Err(self.error(
                span,
                "fencing.command",
                "must be set when fencing.enabled = true".into(),
            ));
        }
        let after = self.duration(&raw.after, "fencing.after", "5m", false)?;
        let timeout = self.duration(&raw.timeout, "fencing.timeout", "2m", false)?;
        let retry_backoff =
            self.duration(&raw.retry_backoff, "fencing.retry_backoff", "1m", false)?;
        let retry_backoff_max = self.duration(
            &raw.retry_backoff_max,
            "fencing.retry_backoff_max",
            "30m",
            false,
        )?;
        if retry_backoff_max < retry_backoff {
            let span = raw
                .retry_backoff_max
                .as_ref()
                .or(raw.retry_backoff.as_ref())
                .map(|v| v.span());
            return Err(self.error(
                span,
                "fencing.retry_backoff_max",
                "must not be shorter than fencing.retry_backoff".into(),
            ));
        }
        let max_concurrent = match &raw.max_concurrent {
            None => 1,
            Some(v) => match *v.get_ref() {
                n @ 1..=MAX_CONCURRENT => n as u32,
                n => {
                    return Err(self.error(
                        Some(v.span()),
                        "fencing.max_concurrent",
                        format!("must be in 1..={MAX_CONCURRENT}, got {n}"),
                    ));
                }
            },
        };
        Ok(FencingConfig {
            enabled,
            command,
            after,
            timeout,
            max_concurrent,
            match_labels: self.match_labels(&raw.match_labels)?,
            retry_backoff,
            retry_backoff_max,
            remove_out_of_service_on_recovery: flag(&raw.remove_out_of_service_on_recovery, true),
            skip_cordoned: flag(&raw.skip_cordoned, true),
            max_pause: self.duration(&raw.max_pause, "fencing.max_pause", "24h", false)?,
        })
    }

    fn match_labels(
        &self,
        field: &Field<std::collections::BTreeMap<String, String>>,
    ) -> Result<Vec<(String, String)>, ConfigError> {
        let Some(v) = field else {
            return Ok(Vec::new());
        };
        for (key, value) in v.get_ref() {
            let bad = |why: String| {
                self.error(Some(v.span()), &format!("fencing.match_labels.{key}"), why)
            };
            if key.is_empty() || key.len() > 317 || key.chars().any(char::is_whitespace) {
                return Err(bad("is not a label key".into()));
            }
            if value.len() > 63
                || value
                    .chars()
                    .any(|c| !(c.is_ascii_alphanumeric() || "-_.".contains(c)))
            {
                return Err(bad(format!("{value:?} is not a label value")));
            }
        }
        Ok(v.get_ref()
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect())
    }
}

/// The program must be there when the config is loaded, not discovered missing when a node has
/// already been dead for `after`.
fn check_program(program: &str) -> Result<(), String> {
    let path = Path::new(program);
    if !path.is_absolute() {
        return Err(format!(
            "{program:?} must be an absolute path (no PATH lookup, no shell)"
        ));
    }
    let meta = std::fs::metadata(path).map_err(|e| format!("{program}: {e}"))?;
    if !meta.is_file() {
        return Err(format!("{program} is not a file"));
    }
    if meta.permissions().mode() & 0o111 == 0 {
        return Err(format!("{program} is not executable"));
    }
    Ok(())
}
