//! The fleet pause: an operator's `node-lifecycled pause fencing|tainting|all --for
//! 1h --reason …` stops, cluster-wide and across failovers, what could hurt during planned work.
//! It lives in the cluster (an annotation on the daemon's leader Lease, read by the shell and
//! fed as [`super::Input::FleetPause`]), so every instance knows it and a new leader honours it.
//!
//! This module is THE gate: what a pause holds is asked here and nowhere else.
//! - `tainting`: new NoExecute taints and taint eviction's pod deletions are held, exactly as
//!   for stale caches (`cache_currency.rs`): nothing is dropped, queued nodes and countdowns keep
//!   their deadlines and act when the pause ends. Untainting and the Unknown verdict go on.
//! - `fencing`: no fence command starts (the fencing machine blocks and rechecks).
//! - `all`: both.
//!
//! A pause ends by itself at its `until` (a timer of the core, virtual clock), or when the
//! shell feeds `None` (a `resume`). Both ends and the start are one decision line each. An
//! unreadable annotation is a pause of everything that ends only when another value is fed
//! (`until = next-valid-write`, `leader/pause.rs`).

use crate::time::Time;

use super::decisions::Decision;

/// The annotation on the leader Lease that carries the pause, as JSON
/// `{"what":"fencing","until":"<RFC 3339>","reason":"…","by":"…"}`.
pub const PAUSE_ANNOTATION: &str = "node-lifecycled.io/pause";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PauseScope {
    Fencing,
    Tainting,
    All,
}

impl PauseScope {
    pub fn parse(s: &str) -> Option<PauseScope> {
        match s {
            "fencing" => Some(PauseScope::Fencing),
            "tainting" => Some(PauseScope::Tainting),
            "all" => Some(PauseScope::All),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            PauseScope::Fencing => "fencing",
            PauseScope::Tainting => "tainting",
            PauseScope::All => "all",
        }
    }

    pub fn fencing(self) -> bool {
        matches!(self, PauseScope::Fencing | PauseScope::All)
    }

    pub fn tainting(self) -> bool {
        matches!(self, PauseScope::Tainting | PauseScope::All)
    }
}

/// A pause as it stands on the Lease.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FleetPause {
    pub what: PauseScope,
    pub until: Time,
    pub reason: String,
    /// Who set it (user and host of the CLI).
    pub by: String,
}

impl FleetPause {
    /// `what=… until=… by=… reason="…"`, for decision lines, `status` and `explain`.
    pub fn describe(&self) -> String {
        format!(
            "what={} until={} by={} reason={:?}",
            self.what.as_str(),
            self.until_text(),
            self.by,
            self.reason
        )
    }

    /// The pause an unreadable annotation stands for (`leader/pause.rs`): everything, until
    /// the annotation's next valid write (`pause` or `resume`), with no time of its own, so
    /// every instance that reads it, whenever, holds the same pause.
    pub fn unreadable(why: &str) -> FleetPause {
        FleetPause {
            what: PauseScope::All,
            until: Time::MAX,
            reason: format!("unreadable {PAUSE_ANNOTATION} annotation ({why})"),
            by: "?".into(),
        }
    }

    /// Whether it holds until the annotation's next valid write ([`FleetPause::unreadable`]).
    pub fn until_next_write(&self) -> bool {
        self.until == Time::MAX
    }

    /// Its end as shown: the RFC 3339 time, or `next-valid-write`.
    pub fn until_text(&self) -> String {
        if self.until_next_write() {
            "next-valid-write".to_string()
        } else {
            self.until.to_rfc3339()
        }
    }
}

/// The pause the core honours.
#[derive(Clone, Debug, Default)]
pub(crate) struct PauseGate {
    /// The pause last fed, expired or not (an expired one is not fed again as new).
    fed: Option<FleetPause>,
    /// Whether `fed` holds now: started and not yet ended.
    active: bool,
    decisions: Vec<Decision>,
}

impl PauseGate {
    /// The pause read from the cluster (`None`: there is none). The same pause fed again is
    /// nothing new; one that is already over when fed is not started.
    pub(crate) fn set(&mut self, pause: Option<FleetPause>, now: Time) {
        if pause == self.fed {
            return;
        }
        if self.active {
            let old = self
                .fed
                .as_ref()
                .map(FleetPause::describe)
                .unwrap_or_default();
            let why = if pause.is_some() {
                "replaced"
            } else {
                "resumed"
            };
            self.line(format!("pause: decision=end {old} ended={why}"));
            self.active = false;
        }
        self.fed = pause;
        if let Some(p) = &self.fed
            && now < p.until
        {
            self.active = true;
            let line = format!("pause: decision=start {}", p.describe());
            self.line(line);
        }
    }

    /// Ends an expired pause; true when one ended now.
    pub(crate) fn tick(&mut self, now: Time) -> bool {
        let expired = self.active && self.fed.as_ref().is_some_and(|p| now >= p.until);
        if expired {
            self.active = false;
            let old = self
                .fed
                .as_ref()
                .map(FleetPause::describe)
                .unwrap_or_default();
            self.line(format!("pause: decision=end {old} ended=expired"));
        }
        expired
    }

    fn line(&mut self, detail: String) {
        self.decisions.push(Decision::Pause { detail });
    }

    /// The pause in force at `now`, if any.
    pub(crate) fn current(&self, now: Time) -> Option<&FleetPause> {
        self.fed.as_ref().filter(|p| self.active && now < p.until)
    }

    /// Whether new NoExecute taints and pod deletions are held.
    pub(crate) fn holds_tainting(&self, now: Time) -> bool {
        self.current(now).is_some_and(|p| p.what.tainting())
    }

    /// The pause that holds fencing, if one does.
    pub(crate) fn holds_fencing(&self, now: Time) -> Option<&FleetPause> {
        self.current(now).filter(|p| p.what.fencing())
    }

    /// When the pause in force ends by itself (never, for one that holds until the next valid
    /// write).
    pub(crate) fn next_deadline(&self) -> Option<Time> {
        self.fed
            .as_ref()
            .filter(|p| self.active && !p.until_next_write())
            .map(|p| p.until)
    }

    /// Whether the pause in force has no end of its own (until the next valid write).
    pub(crate) fn open_ended(&self) -> bool {
        self.active && self.fed.as_ref().is_some_and(FleetPause::until_next_write)
    }

    pub(crate) fn take_decisions(&mut self) -> Vec<Decision> {
        std::mem::take(&mut self.decisions)
    }
}
