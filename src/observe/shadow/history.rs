//! What shadow mode has classed, bounded, and its file: counts since the history began, one
//! small entry per classed pair (for counts and time differences over a period), and every
//! divergence in full. The oldest entries rotate out; the file is the JSON of this, written
//! whole (`runtime/daemon/shadow.rs` writes it atomically).

use std::collections::{BTreeMap, VecDeque};

use serde::{Deserialize, Serialize};

use super::{Class, Record, ShadowKind};

/// Classed pairs kept for the period's counts and time differences.
pub(crate) const MAX_ENTRIES: usize = 20_000;
/// Divergences kept in full.
pub(crate) const MAX_DIVERGENCES: usize = 2_000;
/// The file's format.
const VERSION: u32 = 1;

/// One classed pair, small.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Entry {
    pub(crate) at_ms: u64,
    pub(crate) class: Class,
    pub(crate) kind: ShadowKind,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) diff_ms: Option<i64>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct ShadowHistory {
    version: u32,
    /// When the history began (unix milliseconds).
    pub(crate) since_ms: u64,
    /// Every pair classed since it began, by class and kind (`class/kind`).
    pub(crate) totals: BTreeMap<String, u64>,
    pub(crate) entries: VecDeque<Entry>,
    pub(crate) divergences: VecDeque<Record>,
    /// Entries and divergences rotated out.
    pub(crate) rotated: u64,
}

impl ShadowHistory {
    pub(crate) fn new(since_ms: u64) -> ShadowHistory {
        ShadowHistory {
            version: VERSION,
            since_ms,
            totals: BTreeMap::new(),
            entries: VecDeque::new(),
            divergences: VecDeque::new(),
            rotated: 0,
        }
    }

    pub(crate) fn add(&mut self, r: &Record) {
        *self
            .totals
            .entry(format!("{}/{}", r.class.as_str(), r.subject.kind.as_str()))
            .or_default() += 1;
        self.entries.push_back(Entry {
            at_ms: r.classed_ms,
            class: r.class,
            kind: r.subject.kind,
            diff_ms: r.diff_ms,
        });
        if self.entries.len() > MAX_ENTRIES {
            self.entries.pop_front();
            self.rotated += 1;
        }
        if r.is_divergence() {
            self.divergences.push_back(r.clone());
            if self.divergences.len() > MAX_DIVERGENCES {
                self.divergences.pop_front();
                self.rotated += 1;
            }
        }
    }

    /// The count of one class and kind since the history began.
    #[cfg(test)]
    pub(crate) fn total(&self, class: Class, kind: ShadowKind) -> u64 {
        self.totals
            .get(&format!("{}/{}", class.as_str(), kind.as_str()))
            .copied()
            .unwrap_or(0)
    }

    pub(crate) fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|_| "{}".to_string())
    }

    /// The history a file holds, bounded again (a file edited by hand cannot grow us); an
    /// error names what is wrong, in a few words.
    pub(crate) fn from_json(text: &str) -> Result<ShadowHistory, String> {
        let mut h: ShadowHistory = serde_json::from_str(text).map_err(|e| e.to_string())?;
        if h.version != VERSION {
            return Err(format!(
                "format {} (this version reads {VERSION})",
                h.version
            ));
        }
        while h.entries.len() > MAX_ENTRIES {
            h.entries.pop_front();
        }
        while h.divergences.len() > MAX_DIVERGENCES {
            h.divergences.pop_front();
        }
        Ok(h)
    }
}
