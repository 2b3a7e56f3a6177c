use std::rc::Rc;

use crate::decode::{DecodeContext, decode_object};
use crate::model::Pod;

/// A pod on node `n1` with `tolerations` (a JSON array's text).
fn pod(name: &str, tolerations: &str) -> String {
    format!(
        r#"{{"metadata":{{"name":"{name}","namespace":"shop","uid":"u-{name}","resourceVersion":"7"}},
            "spec":{{"nodeName":"n1","tolerations":{tolerations}}}}}"#
    )
}

/// Lists that differ from each other in one field each, and one spelled two ways
/// (`operator` empty and `Equal` convert alike).
const LISTS: [&str; 12] = [
    r#"[]"#,
    r#"[{"key":"node.kubernetes.io/not-ready","operator":"Exists","effect":"NoExecute","tolerationSeconds":300}]"#,
    r#"[{"key":"node.kubernetes.io/not-ready","operator":"Exists","effect":"NoExecute","tolerationSeconds":301}]"#,
    r#"[{"key":"node.kubernetes.io/not-ready","operator":"Exists","effect":"NoExecute"}]"#,
    r#"[{"key":"node.kubernetes.io/not-ready","operator":"Exists","effect":"NoSchedule","tolerationSeconds":300}]"#,
    r#"[{"key":"node.kubernetes.io/not-ready","operator":"Exists","tolerationSeconds":300}]"#,
    r#"[{"key":"node.kubernetes.io/not-ready","operator":"Exists","effect":"Custom","tolerationSeconds":300}]"#,
    r#"[{"key":"node.kubernetes.io/unreachable","operator":"Exists","effect":"NoExecute","tolerationSeconds":300}]"#,
    r#"[{"key":"dedicated","operator":"Equal","value":"gpu","effect":"NoExecute"}]"#,
    r#"[{"key":"dedicated","value":"gpu","effect":"NoExecute"}]"#,
    r#"[{"key":"dedicated","operator":"Gt","value":"gpu","effect":"NoExecute"}]"#,
    r#"[{"key":"node.kubernetes.io/not-ready","operator":"Exists","effect":"NoExecute","tolerationSeconds":300},
        {"key":"node.kubernetes.io/unreachable","operator":"Exists","effect":"NoExecute","tolerationSeconds":300}]"#,
];

#[test]
fn a_pod_matched_against_a_remembered_list_decodes_as_one_decoded_afresh() {
    let mut ctx = DecodeContext::new();
    let mut kept: Vec<Pod> = Vec::new();
    // Every list after every other (so each is met while any other is the most recent, and
    // more lists are in play than are remembered).
    for round in 0..3 {
        for (i, a) in LISTS.iter().enumerate() {
            for (j, b) in LISTS.iter().enumerate() {
                for (k, list) in [(i, a), (j, b)] {
                    let json = pod(&format!("p-{round}-{i}-{j}-{k}"), list);
                    let decoded: Pod = decode_object(json.as_bytes(), &mut ctx).unwrap();
                    let afresh: Pod =
                        decode_object(json.as_bytes(), &mut DecodeContext::new()).unwrap();
                    assert_eq!(decoded, afresh, "list {k}: {list}");
                    kept.push(decoded);
                }
            }
        }
    }
    // Equal lists are one shared copy, whichever way they were found; `Equal` and an empty
    // operator are the same list.
    for a in &kept {
        for b in &kept {
            assert_eq!(
                *a.tolerations == *b.tolerations,
                Rc::ptr_eq(&a.tolerations, &b.tolerations)
            );
        }
    }
    assert_eq!(ctx.distinct_toleration_lists(), LISTS.len() - 1);
    drop(kept);
    ctx.prune();
    assert_eq!(
        ctx.distinct_toleration_lists(),
        0,
        "remembered lists are not kept"
    );
}
