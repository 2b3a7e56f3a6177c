//! The metric names a PromQL expression reads, for checking them against what the daemon
//! exports.

use std::collections::BTreeSet;

/// Operators and aggregations (`sum by (x) (…)` puts no `(` right after `sum`).
const KEYWORDS: [&str; 20] = [
    "and",
    "or",
    "unless",
    "bool",
    "offset",
    "inf",
    "nan",
    "atan2",
    "sum",
    "min",
    "max",
    "avg",
    "group",
    "stddev",
    "stdvar",
    "count",
    "count_values",
    "bottomk",
    "topk",
    "quantile",
];
/// Followed by a list of label names in parentheses.
const LABEL_LISTS: [&str; 6] = [
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
];

/// The metric names a PromQL expression reads: identifiers that are not functions (followed
/// by `(`) or keywords, outside string literals, label matchers (`{…}`), label lists
/// (`by (…)`, `on (…)`, …), ranges (`[5m]`) and Grafana variables (`$name`, `${name}`).
pub fn metric_names(expr: &str) -> BTreeSet<String> {
    let chars: Vec<char> = expr.chars().collect();
    let mut names = BTreeSet::new();
    let mut i = 0;
    let skip_to = |mut i: usize, close: char| {
        while i < chars.len() && chars[i] != close {
            if chars[i] == '"' || chars[i] == '\'' {
                let quote = chars[i];
                i += 1;
                while i < chars.len() && chars[i] != quote {
                    i += if chars[i] == '\\' { 2 } else { 1 };
                }
            }
            i += 1;
        }
        i + 1
    };
    let ident = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == ':';
    while i < chars.len() {
        let c = chars[i];
        match c {
            '"' | '\'' => i = skip_to(i + 1, c),
            '{' => i = skip_to(i + 1, '}'),
            '[' => i = skip_to(i + 1, ']'),
            '$' => {
                i += 1;
                if chars.get(i) == Some(&'{') {
                    i = skip_to(i + 1, '}');
                }
                while i < chars.len() && ident(chars[i]) {
                    i += 1;
                }
            }
            c if c.is_ascii_digit() || c == '.' => {
                while i < chars.len() && (ident(chars[i]) || chars[i] == '.') {
                    i += 1;
                }
            }
            c if ident(c) => {
                let start = i;
                while i < chars.len() && ident(chars[i]) {
                    i += 1;
                }
                let word: String = chars[start..i].iter().collect();
                let mut next = i;
                while chars.get(next).is_some_and(|c| c.is_whitespace()) {
                    next += 1;
                }
                let call = chars.get(next) == Some(&'(');
                if LABEL_LISTS.contains(&word.as_str()) {
                    if call {
                        i = skip_to(next + 1, ')');
                    }
                } else if !call && !KEYWORDS.contains(&word.to_ascii_lowercase().as_str()) {
                    names.insert(word);
                }
            }
            _ => i += 1,
        }
    }
    names
}
