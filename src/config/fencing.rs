//! `[fencing]`: powering off a node that stopped heartbeating, through the operator's command,
//! then releasing its stateful pods with the out-of-service taint. Off by default: the command is
//! site-specific (IPMI, Redfish, a PDU) and a wrong one powers off a live node.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Duration;

use super::raw::{Field, RawFenceStep, RawFencing};
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
    /// A cordoned node (`spec.unschedulable`) is not fenced.
    pub skip_cordoned: bool,
    /// The longest `node-lifecycled pause … --for` accepted (every kind of pause, not only
    /// fencing's).
    pub max_pause: Duration,
    /// `power-off` (today's) or `power-cycle`.
    pub mode: FenceMode,
    /// The power-on command of `power-cycle` (argv like `command`).
    pub on_command: Vec<String>,
    /// `power-cycle`: how long after the power-on the node has to report Ready.
    pub recover_timeout: Duration,
    /// `[[fencing.step]]` as written (empty: the one step is `command` with `timeout`).
    pub steps: Vec<FenceStepConfig>,
    /// Checks the fence agent's credentials for a node (exit 0: reachable and accepted);
    /// `doctor --fence-sample N` and, every `status_interval`, the daemon.
    pub status_command: Vec<String>,
    /// Zero: the daemon does not run `status_command`.
    pub status_interval: Duration,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum FenceMode {
    #[default]
    PowerOff,
    PowerCycle,
}

impl FenceMode {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            FenceMode::PowerOff => "power-off",
            FenceMode::PowerCycle => "power-cycle",
        }
    }
}

/// One fence step: its command and how long it may run before the next step is tried.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FenceStepConfig {
    pub(crate) command: Vec<String>,
    pub(crate) timeout: Duration,
}

impl FencingConfig {
    /// The power-off steps in order: `[[fencing.step]]`, or `command` with `timeout`.
    pub(crate) fn effective_steps(&self) -> Vec<FenceStepConfig> {
        if !self.steps.is_empty() {
            return self.steps.clone();
        }
        if self.command.is_empty() {
            return Vec::new();
        }
        vec![FenceStepConfig {
            command: self.command.clone(),
            timeout: self.timeout,
        }]
    }
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
            mode: FenceMode::PowerOff,
            on_command: Vec::new(),
            recover_timeout: Duration::from_secs(600),
            steps: Vec::new(),
            status_command: Vec::new(),
            status_interval: Duration::ZERO,
        }
    }
}

/// Largest `max_concurrent`: each fence is a child process of this single-threaded daemon.
const MAX_CONCURRENT: i64 = 64;

impl Validator<'_> {
    pub(super) fn fencing(&self, raw: &RawFencing) -> Result<FencingConfig, ConfigError> {
        let enabled = flag(&raw.enabled, false);
        let command = self.argv(&raw.command, "fencing.command")?;
        let steps = self.steps(&raw.step)?;
        if !steps.is_empty() && !command.is_empty() {
            let span = raw.command.as_ref().map(|v| v.span());
            return Err(self.error(
                span,
                "fencing.command",
                "set either fencing.command or [[fencing.step]], not both".into(),
            ));
        }
        let mode = match &raw.mode {
            None => FenceMode::PowerOff,
            Some(v) => match v.get_ref().as_str() {
                "power-off" => FenceMode::PowerOff,
                "power-cycle" => FenceMode::PowerCycle,
                other => {
                    return Err(self.error(
                        Some(v.span()),
                        "fencing.mode",
                        format!("{other:?}: must be \"power-off\" or \"power-cycle\""),
                    ));
                }
            },
        };
        let on_command = self.argv(&raw.on_command, "fencing.on_command")?;
        if mode == FenceMode::PowerCycle && on_command.is_empty() {
            let span = raw.mode.as_ref().map(|v| v.span());
            return Err(self.error(
                span,
                "fencing.on_command",
                "must be set when fencing.mode = \"power-cycle\"".into(),
            ));
        }
        let recover_timeout = self.duration(
            &raw.recover_timeout,
            "fencing.recover_timeout",
            "10m",
            false,
        )?;
        if enabled && command.is_empty() && steps.is_empty() {
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
            mode,
            on_command,
            recover_timeout,
            steps,
            status_command: self.argv(&raw.status_command, "fencing.status_command")?,
            status_interval: self.duration(
                &raw.status_interval,
                "fencing.status_interval",
                "0s",
                true,
            )?,
        })
    }

    /// A command key: an argv whose program is an absolute path to an executable file.
    fn argv(&self, field: &Field<Vec<String>>, key: &str) -> Result<Vec<String>, ConfigError> {
        let Some(v) = field else {
            return Ok(Vec::new());
        };
        let argv = v.get_ref();
        let err = |why: String| self.error(Some(v.span()), key, why);
        let Some(program) = argv.first() else {
            return Err(err(
                "must name a program: an argv like [\"/usr/local/sbin/fence-ipmi\"]".into(),
            ));
        };
        check_program(program).map_err(err)?;
        if argv.iter().any(|a| a.contains('\0')) {
            return Err(err("an argument contains a NUL byte".into()));
        }
        Ok(argv.clone())
    }

    /// `[[fencing.step]]`: each needs a command and a timeout.
    fn steps(
        &self,
        field: &Field<Vec<toml::Spanned<RawFenceStep>>>,
    ) -> Result<Vec<FenceStepConfig>, ConfigError> {
        let Some(v) = field else {
            return Ok(Vec::new());
        };
        let mut out = Vec::new();
        for (i, step) in v.get_ref().iter().enumerate() {
            let key = format!("fencing.step[{i}]");
            let raw = step.get_ref();
            if raw.command.is_none() {
                return Err(self.error(
                    Some(step.span()),
                    &format!("{key}.command"),
                    "every step needs a command".into(),
                ));
            }
            let command = self.argv(&raw.command, &format!("{key}.command"))?;
            if raw.timeout.is_none() {
                return Err(self.error(
                    Some(step.span()),
                    &format!("{key}.timeout"),
                    "every step needs a timeout (after it, the next step is tried)".into(),
                ));
            }
            let timeout = self.duration(&raw.timeout, &format!("{key}.timeout"), "1m", false)?;
            out.push(FenceStepConfig { command, timeout });
        }
        if out.is_empty() {
            return Err(self.error(Some(v.span()), "fencing.step", "lists no step".into()));
        }
        Ok(out)
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
