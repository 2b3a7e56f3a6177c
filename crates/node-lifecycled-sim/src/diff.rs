//! A one-line summary of what a write changed, for the write log: `path: old -> new` per changed
//! leaf. Lists of objects keyed by `type` (conditions, addresses) are compared element by element
//! so a status PUT reads as `status.conditions[Ready].status: "True" -> "Unknown"`; other lists
//! are shown whole. Bookkeeping fields (resourceVersion, managedFields) are skipped.

use serde_json::Value;

/// Summaries longer than this are cut (a log line, not a dump).
const MAX_SUMMARY: usize = 1200;

pub fn summarize(old: &Value, new: &Value) -> String {
    let mut changes = Vec::new();
    diff(&mut String::new(), old, new, &mut changes);
    if changes.is_empty() {
        return "no change".to_string();
    }
    truncate(changes.join("; "))
}

pub fn truncate(mut text: String) -> String {
    if text.len() > MAX_SUMMARY {
        let mut cut = MAX_SUMMARY;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
        text.push_str(" …");
    }
    text
}

fn diff(path: &mut String, old: &Value, new: &Value, out: &mut Vec<String>) {
    if old == new {
        return;
    }
    match (old, new) {
        (Value::Object(a), Value::Object(b)) => {
            for (key, av) in a {
                if skipped(path, key) {
                    continue;
                }
                let len = path.len();
                push_segment(path, key);
                match b.get(key) {
                    Some(bv) => diff(path, av, bv, out),
                    None => out.push(format!("{path}: {} -> (removed)", compact(av))),
                }
                path.truncate(len);
            }
            for (key, bv) in b {
                if a.contains_key(key) || skipped(path, key) {
                    continue;
                }
                let len = path.len();
                push_segment(path, key);
                out.push(format!("{path}: (added) {}", compact(bv)));
                path.truncate(len);
            }
        }
        (Value::Array(a), Value::Array(b)) if keyed_by_type(a) && keyed_by_type(b) => {
            for av in a {
                let t = av["type"].as_str().unwrap_or("");
                let len = path.len();
                path.push_str(&format!("[{t}]"));
                match b.iter().find(|bv| bv["type"] == av["type"]) {
                    Some(bv) => diff(path, av, bv, out),
                    None => out.push(format!("{path}: (removed)")),
                }
                path.truncate(len);
            }
            for bv in b {
                if !a.iter().any(|av| av["type"] == bv["type"]) {
                    let t = bv["type"].as_str().unwrap_or("");
                    out.push(format!("{path}[{t}]: (added) {}", compact(bv)));
                }
            }
        }
        _ => out.push(format!("{path}: {} -> {}", compact(old), compact(new))),
    }
}

fn push_segment(path: &mut String, key: &str) {
    if !path.is_empty() {
        path.push('.');
    }
    path.push_str(key);
}

fn skipped(path: &str, key: &str) -> bool {
    path == "metadata" && matches!(key, "resourceVersion" | "managedFields" | "generation")
}

fn keyed_by_type(items: &[Value]) -> bool {
    !items.is_empty()
        && items
            .iter()
            .all(|i| i.get("type").is_some_and(Value::is_string))
}

fn compact(v: &Value) -> String {
    v.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn condition_changes_are_named_by_type() {
        let old = json!({"metadata": {"resourceVersion": "1"}, "status": {"conditions": [
            {"type": "Ready", "status": "True"}, {"type": "DiskPressure", "status": "False"}]}});
        let new = json!({"metadata": {"resourceVersion": "2"}, "status": {"conditions": [
            {"type": "Ready", "status": "Unknown"}, {"type": "DiskPressure", "status": "False"}]}});
        assert_eq!(
            summarize(&old, &new),
            r#"status.conditions[Ready].status: "True" -> "Unknown""#
        );
        assert_eq!(summarize(&old, &old), "no change");
    }

    #[test]
    fn other_lists_are_shown_whole() {
        let old = json!({"spec": {"taints": []}});
        let new = json!({"spec": {"taints": [{"key": "k", "effect": "NoExecute"}]}, "x": 1});
        assert_eq!(
            summarize(&old, &new),
            r#"spec.taints: [] -> [{"effect":"NoExecute","key":"k"}]; x: (added) 1"#
        );
    }
}
