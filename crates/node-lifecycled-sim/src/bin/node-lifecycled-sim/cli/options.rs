//! The words after the subcommand, as lexopt splits them: the options that take a value, the
//! flags, and the positional words, each taken by the subcommand that knows it.

use std::ffi::OsString;
use std::time::Duration;

use node_lifecycled::config::parse_duration;

/// The words after the subcommand, split by lexopt: `--key VALUE` and `--key=VALUE` options,
/// each at most once, the flags in [`FLAGS`], and positional words. Each subcommand takes what it
/// knows; anything left over is an error.
pub(super) struct Options {
    values: Vec<(String, String)>,
    flags: Vec<String>,
    positionals: Vec<String>,
}

/// The options that take no value.
pub(super) const FLAGS: &[&str] = &[
    "quick",
    "pools",
    "partitions",
    "fencing",
    "shadow",
    "mass-failure",
];

/// The options that take a value (which subcommand takes which is checked by the subcommand).
pub(super) const VALUED: &[&str] = &[
    "scenario",
    "config",
    "daemon",
    "dir",
    "nodes",
    "zones",
    "pods-per-node",
    "listen",
    "profile",
    "renew-interval",
    "default-toleration",
    "sizes",
    "victims",
    "burst-events",
    "qps",
    "burst",
    "initial-list",
    "wire",
    "mass-failure-window",
    "duration",
    "seed",
    "csv",
    "brake",
    "kubeconfig",
    "watch",
    "warmup",
    "grid",
];

impl Options {
    pub(super) fn read(args: impl IntoIterator<Item = OsString>) -> Result<Options, String> {
        use lexopt::Arg;
        let mut parser = lexopt::Parser::from_args(args);
        let mut options = Options {
            values: Vec::new(),
            flags: Vec::new(),
            positionals: Vec::new(),
        };
        while let Some(arg) = parser.next().map_err(|e| e.to_string())? {
            match arg {
                Arg::Long(name) if FLAGS.contains(&name) => {
                    let name = name.to_string();
                    if options.flags.contains(&name) {
                        return Err(format!("--{name} given twice"));
                    }
                    options.flags.push(name);
                }
                Arg::Long(name) if VALUED.contains(&name) => {
                    let key = format!("--{name}");
                    let value = parser
                        .value()
                        .map_err(|_| format!("{key} needs a value"))?
                        .into_string()
                        .map_err(|v| format!("{key}: {v:?} is not UTF-8"))?;
                    if value.is_empty() {
                        return Err(format!("{key} needs a value"));
                    }
                    if options.values.iter().any(|(k, _)| *k == key) {
                        return Err(format!("{key} given twice"));
                    }
                    options.values.push((key, value));
                }
                Arg::Long(name) => return Err(format!("unknown argument \"--{name}\"")),
                Arg::Short(c) => return Err(format!("unknown argument \"-{c}\"")),
                Arg::Value(v) => options.positionals.push(
                    v.into_string()
                        .map_err(|a| format!("unknown argument {a:?}"))?,
                ),
            }
        }
        Ok(options)
    }

    pub(super) fn value(&mut self, key: &str) -> Result<Option<String>, String> {
        let found = self.values.iter().position(|(k, _)| k == key);
        Ok(found.map(|i| self.values.remove(i).1))
    }

    pub(super) fn number(&mut self, key: &str) -> Result<Option<usize>, String> {
        self.value(key)?
            .map(|v| {
                v.parse()
                    .map_err(|_| format!("{key}: {v:?} is not a whole number"))
            })
            .transpose()
    }

    pub(super) fn duration(&mut self, key: &str) -> Result<Option<Duration>, String> {
        self.value(key)?
            .map(|v| parse_duration(&v).map_err(|e| format!("{key}: {e}")))
            .transpose()
    }

    /// A bare `--key`.
    pub(super) fn flag(&mut self, key: &str) -> bool {
        let name = key.trim_start_matches("--");
        let before = self.flags.len();
        self.flags.retain(|f| f != name);
        self.flags.len() < before
    }

    pub(super) fn positional(&mut self) -> Option<String> {
        (!self.positionals.is_empty()).then(|| self.positionals.remove(0))
    }

    pub(super) fn finish(self) -> Result<(), String> {
        if let Some((key, _)) = self.values.first() {
            return Err(format!("unknown argument {key:?}"));
        }
        if let Some(flag) = self.flags.first() {
            return Err(format!("unknown argument \"--{flag}\""));
        }
        match self.positionals.first() {
            None => Ok(()),
            Some(arg) => Err(format!("unknown argument {arg:?}")),
        }
    }
}
