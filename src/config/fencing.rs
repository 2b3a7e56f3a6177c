//! `[fencing]`: powering off a node that stopped heartbeating, through the operator's command,
//! then releasing its stateful pods with the out-of-service taint. Off by default: the command is
//! site-specific (IPMI, Redfish, a PDU) and a wrong one powers off a live node.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Duration;

use crate::controller::fencing::FencingPolicy;

use super::keys::RawFencing;
use super::kinds::Kind;
use super::raw::{Field, RawFenceStep};
use super::render::{dur, string};
use super::{ConfigError, Validator};

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
    /// What the controllers decide fencing with: `None` while it is off.
    pub fn policy(&self) -> Option<FencingPolicy> {
        self.enabled.then(|| FencingPolicy {
            after: self.after,
            max_concurrent: self.max_concurrent as usize,
            match_labels: self.match_labels.clone(),
            retry_backoff: self.retry_backoff,
            retry_backoff_max: self.retry_backoff_max,
            remove_out_of_service_on_recovery: self.remove_out_of_service_on_recovery,
            skip_cordoned: self.skip_cordoned,
            steps: self.effective_steps().len().max(1),
            power_cycle: self.mode == FenceMode::PowerCycle,
            recover_timeout: self.recover_timeout,
        })
    }

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
        let mut f = FencingConfig::default();
        self.fencing_keys(raw, &mut f)?;
        // Rules between keys; the error goes to the key that must change.
        if !f.steps.is_empty() && !f.command.is_empty() {
            let span = raw.command.as_ref().map(|v| v.span());
            return Err(self.error(
                span,
                "fencing.command",
                "set either fencing.command or [[fencing.step]], not both".into(),
            ));
        }
        if f.mode == FenceMode::PowerCycle && f.on_command.is_empty() {
            let span = raw.mode.as_ref().map(|v| v.span());
            return Err(self.error(
                span,
                "fencing.on_command",
                "must be set when fencing.mode = \"power-cycle\"".into(),
            ));
        }
        if f.enabled && f.command.is_empty() && f.steps.is_empty() {
            let span = raw.enabled.as_ref().map(|v| v.span());
            return Err(self.error(
                span,
                "fencing.command",
                "must be set when fencing.enabled = true".into(),
            ));
        }
        if f.retry_backoff_max < f.retry_backoff {
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
        Ok(f)
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
        field: &Field<BTreeMap<String, String>>,
        prefix: &str,
    ) -> Result<Vec<(String, String)>, ConfigError> {
        let Some(v) = field else {
            return Ok(Vec::new());
        };
        for (key, value) in v.get_ref() {
            let bad = |why: String| self.error(Some(v.span()), &format!("{prefix}.{key}"), why);
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

/// A command: an argv whose program is an absolute path to an executable file (empty: none).
pub(super) struct Argv;
/// `max_concurrent`: 1 to `MAX_CONCURRENT`.
pub(super) struct FenceConcurrency;
/// `match_labels`: label key = value pairs (empty: every node).
pub(super) struct FenceLabels;
/// `mode`: `power-off` or `power-cycle`.
pub(super) struct FenceModeText;
/// `[[fencing.step]]`: each a command with a timeout.
pub(super) struct FenceSteps;

fn argv_text(argv: &[String]) -> Option<String> {
    let quoted: Vec<String> = argv.iter().map(|a| string(a)).collect();
    (!quoted.is_empty()).then(|| format!("[{}]", quoted.join(", ")))
}

impl Kind for Argv {
    type Raw = Vec<String>;
    type Value = Vec<String>;
    fn check(
        v: &Validator<'_>,
        f: &Field<Vec<String>>,
        key: &str,
    ) -> Result<Option<Vec<String>>, ConfigError> {
        f.as_ref().map(|_| v.argv(f, key)).transpose()
    }
    fn render(argv: &Vec<String>) -> Option<String> {
        argv_text(argv)
    }
}

impl Kind for FenceConcurrency {
    type Raw = i64;
    type Value = u32;
    fn check(v: &Validator<'_>, f: &Field<i64>, key: &str) -> Result<Option<u32>, ConfigError> {
        let Some(x) = f else { return Ok(None) };
        match *x.get_ref() {
            n @ 1..=MAX_CONCURRENT => Ok(Some(n as u32)),
            n => Err(v.error(
                Some(x.span()),
                key,
                format!("must be in 1..={MAX_CONCURRENT}, got {n}"),
            )),
        }
    }
    fn render(n: &u32) -> Option<String> {
        Some(n.to_string())
    }
}

impl Kind for FenceLabels {
    type Raw = BTreeMap<String, String>;
    type Value = Vec<(String, String)>;
    fn check(
        v: &Validator<'_>,
        f: &Field<BTreeMap<String, String>>,
        key: &str,
    ) -> Result<Option<Vec<(String, String)>>, ConfigError> {
        f.as_ref().map(|_| v.match_labels(f, key)).transpose()
    }
    fn render(labels: &Vec<(String, String)>) -> Option<String> {
        let pairs: Vec<String> = labels
            .iter()
            .map(|(k, v)| format!("{} = {}", string(k), string(v)))
            .collect();
        Some(format!("{{ {} }}", pairs.join(", ")))
    }
}

impl Kind for FenceModeText {
    type Raw = String;
    type Value = FenceMode;
    fn check(
        v: &Validator<'_>,
        f: &Field<String>,
        key: &str,
    ) -> Result<Option<FenceMode>, ConfigError> {
        let Some(x) = f else { return Ok(None) };
        match x.get_ref().as_str() {
            "power-off" => Ok(Some(FenceMode::PowerOff)),
            "power-cycle" => Ok(Some(FenceMode::PowerCycle)),
            other => Err(v.error(
                Some(x.span()),
                key,
                format!("{other:?}: must be \"power-off\" or \"power-cycle\""),
            )),
        }
    }
    fn render(m: &FenceMode) -> Option<String> {
        Some(string(m.as_str()))
    }
}

impl Kind for FenceSteps {
    type Raw = Vec<toml::Spanned<RawFenceStep>>;
    type Value = Vec<FenceStepConfig>;
    fn check(
        v: &Validator<'_>,
        f: &Field<Self::Raw>,
        _key: &str,
    ) -> Result<Option<Vec<FenceStepConfig>>, ConfigError> {
        f.as_ref().map(|_| v.steps(f)).transpose()
    }
    fn render(steps: &Vec<FenceStepConfig>) -> Option<String> {
        let tables: Vec<String> = steps
            .iter()
            .map(|s| {
                format!(
                    "{{ command = {}, timeout = {} }}",
                    argv_text(&s.command).unwrap_or_else(|| "[]".to_string()),
                    dur(s.timeout)
                )
            })
            .collect();
        (!tables.is_empty()).then(|| format!("[{}]", tables.join(", ")))
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
