//! What the man pages describe, read from their sources: the keys of conf/config.toml and of
//! node-lifecycled.toml(5) by section, and the commands and options of a usage text.

use std::collections::{BTreeMap, BTreeSet};

use super::read;

/// `section -> (keys set in it, its whole text)` of conf/config.toml: keys set (`key = …`) or
/// shown commented out (`# key = …`), under `[api]`, `# [[pool]]` (and its banner) and the
/// like; `""` is the top level.
pub fn config_toml_sections() -> BTreeMap<String, (BTreeSet<String>, String)> {
    let mut sections: BTreeMap<String, (BTreeSet<String>, String)> = BTreeMap::new();
    let mut section = String::new();
    for line in read("conf/config.toml").lines() {
        let bare = line.trim_start_matches('#').trim();
        if let Some(name) = bare.strip_prefix('[').and_then(|s| s.strip_suffix(']')) {
            section = name.trim_matches(['[', ']']).to_string();
        }
        // The commented-out tables start with a banner that explains their keys.
        if bare.starts_with("--- Pools") {
            section = "pool".to_string();
        } else if bare.starts_with("--- Custom condition taints") {
            section = "condition_taint".to_string();
        }
        let entry = sections.entry(section.clone()).or_default();
        entry.1.push_str(line);
        entry.1.push('\n');
        if let Some((key, _)) = bare.split_once(" = ") {
            if !key.is_empty() && key.chars().all(|c| c.is_ascii_lowercase() || c == '_') {
                entry.0.insert(key.to_string());
            }
        }
    }
    sections
}

/// `section -> key -> the item's text` of node-lifecycled.toml(5): `.Ss` titles (`Top level`
/// is `""`, `[api]` is `api`), `.It Ic key` items.
pub fn config_page_sections() -> BTreeMap<String, BTreeMap<String, String>> {
    let mut sections: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    let mut section: Option<String> = None;
    let mut intro = String::new();
    let mut item: Option<String> = None;
    for line in read("man/node-lifecycled.toml.5").lines() {
        if let Some(title) = line.strip_prefix(".Ss ") {
            let title = title.trim_end_matches("\\&");
            section = Some(if title == "Top level" {
                String::new()
            } else {
                title.trim_matches(['[', ']']).to_string()
            });
            intro.clear();
            item = None;
            continue;
        }
        if line.starts_with(".Sh ") {
            section = None;
        }
        let Some(s) = &section else { continue };
        if let Some(rest) = line.strip_prefix(".It Ic ") {
            let key = rest.split_whitespace().next().unwrap().to_string();
            // Said once for a whole section ("Upstream: none, for every key").
            let shared = if intro.replace('\n', " ").contains("for every key") {
                intro.clone()
            } else {
                String::new()
            };
            sections
                .entry(s.clone())
                .or_default()
                .insert(key.clone(), shared);
            item = Some(key);
        } else if line == ".El" {
            item = None;
        } else if let Some(key) = &item {
            let text = sections.get_mut(s).unwrap().get_mut(key).unwrap();
            text.push_str(line);
            text.push('\n');
        } else {
            intro.push_str(line);
            intro.push('\n');
        }
    }
    sections
}

/// `(commands, options)` a usage text names: the word after the program's name at the start
/// of a line, and every `--option`.
pub fn usage_words(usage: &str) -> (BTreeSet<String>, BTreeSet<String>) {
    let words = |prefix: &str| -> BTreeSet<String> {
        usage
            .split(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
            .filter(|w| w.starts_with(prefix) && w.len() > prefix.len())
            .map(str::to_string)
            .collect()
    };
    let flags = words("--");
    // `program COMMAND` at the start of a usage line.
    let commands = usage
        .lines()
        .filter_map(|l| l.trim().split_once(' '))
        .filter(|(program, _)| program.starts_with("node-lifecycled"))
        .filter_map(|(_, rest)| rest.split_whitespace().next())
        .map(|c| c.trim_matches(['[', ']']).to_string())
        .filter(|c| {
            c.starts_with(|ch: char| ch.is_ascii_lowercase())
                && c.chars().all(|ch| ch.is_ascii_lowercase() || ch == '-')
        })
        .collect();
    (commands, flags)
}
