//! The recent decisions about each node and pod, for `explain`: a bounded ring per subject and
//! a bounded number of subjects (the least recently touched is forgotten first).
//!
//! Memory: at most [`MAX_SUBJECTS`] × [`PER_SUBJECT`] entries of at most [`MAX_TEXT`] bytes of
//! text plus about 40 bytes each: under 3 MiB however large the cluster or the outage; a
//! typical entry is 100–200 bytes.

use std::collections::{BTreeMap, HashMap, VecDeque};

use crate::time::Time;

pub(crate) const MAX_SUBJECTS: usize = 2048;
pub(crate) const PER_SUBJECT: usize = 5;
/// Longer texts are cut (at a character boundary) with `…`.
pub(crate) const MAX_TEXT: usize = 256;

/// What a history is about.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Subject {
    Node(String),
    /// `namespace/name`.
    Pod(String),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Entry {
    pub(crate) at: Time,
    pub(crate) text: String,
}

#[derive(Debug, Default)]
pub(crate) struct History {
    /// Each subject's entries (oldest first) and its place in `order`.
    subjects: HashMap<Subject, (u64, VecDeque<Entry>)>,
    /// Subjects by last touch: the first is forgotten when full.
    order: BTreeMap<u64, Subject>,
    next_seq: u64,
}

impl History {
    #[cfg(test)]
    pub(crate) fn new() -> History {
        History::default()
    }

    pub(crate) fn record(&mut self, subject: Subject, at: Time, text: &str) {
        let seq = self.next_seq;
        self.next_seq += 1;
        if !self.subjects.contains_key(&subject)
            && self.subjects.len() >= MAX_SUBJECTS
            && let Some((_, oldest)) = self.order.pop_first()
        {
            self.subjects.remove(&oldest);
        }
        let (old_seq, entries) = self
            .subjects
            .entry(subject.clone())
            .or_insert_with(|| (seq, VecDeque::new()));
        self.order.remove(old_seq);
        *old_seq = seq;
        self.order.insert(seq, subject);
        if entries.len() == PER_SUBJECT {
            entries.pop_front();
        }
        entries.push_back(Entry {
            at,
            text: cut(text),
        });
    }

    /// Oldest first; empty for a subject never seen (or forgotten).
    pub(crate) fn of(&self, subject: &Subject) -> Vec<Entry> {
        self.subjects
            .get(subject)
            .map(|(_, e)| e.iter().cloned().collect())
            .unwrap_or_default()
    }

    #[cfg(test)]
    pub(crate) fn subjects(&self) -> usize {
        self.subjects.len()
    }

    /// Bytes held (entries' text and fixed parts; the maps' own overhead roughly).
    pub(crate) fn heap_bytes(&self) -> usize {
        self.subjects
            .iter()
            .map(|(s, (_, e))| {
                let name = match s {
                    Subject::Node(n) | Subject::Pod(n) => n.len(),
                };
                2 * name
                    + 64
                    + e.iter()
                        .map(|x| x.text.capacity() + std::mem::size_of::<Entry>())
                        .sum::<usize>()
            })
            .sum()
    }
}

fn cut(text: &str) -> String {
    if text.len() <= MAX_TEXT {
        return text.to_string();
    }
    let mut end = MAX_TEXT - '…'.len_utf8();
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_subject_keeps_its_latest_entries_and_the_least_recent_subject_goes_first() {
        let mut h = History::new();
        let t = Time::from_unix_millis(1_000);
        for i in 0..PER_SUBJECT + 2 {
            h.record(Subject::Node("n1".into()), t, &format!("entry {i}"));
        }
        let kept: Vec<String> = h
            .of(&Subject::Node("n1".into()))
            .into_iter()
            .map(|e| e.text)
            .collect();
        assert_eq!(kept.len(), PER_SUBJECT);
        assert_eq!(kept[0], "entry 2");
        for i in 0..MAX_SUBJECTS + 10 {
            h.record(Subject::Pod(format!("ns/p{i}")), t, "x");
            if i == MAX_SUBJECTS - 2 {
                // Touched again: n1 is now more recent than the pods before it.
                h.record(Subject::Node("n1".into()), t, "again");
            }
        }
        assert_eq!(h.subjects(), MAX_SUBJECTS);
        assert!(h.of(&Subject::Pod("ns/p0".into())).is_empty());
        assert!(!h.of(&Subject::Node("n1".into())).is_empty());
        let long = "é".repeat(MAX_TEXT);
        h.record(Subject::Node("n2".into()), t, &long);
        let text = &h.of(&Subject::Node("n2".into()))[0].text;
        assert!(text.len() <= MAX_TEXT && text.ends_with('…'));
        // The bound the module promises.
        assert!(h.heap_bytes() < 3 << 20, "{}", h.heap_bytes());
    }
}
