//! Node and Lease wire shapes read member by member: the members we keep are decoded (by serde
//! where they are structured), everything else is jumped over by the [`Scanner`].
//!
//! Why not serde for the whole object: every Lease renewal and Node status heartbeat arrives as
//! the whole object, and most of a Node's ~6 KB is `managedFields`, `images` and `nodeInfo`,
//! which serde's `IgnoredAny` validates token by token (9.5 % of the daemon's CPU at 2,000
//! nodes, BENCHMARKS "Where the CPU per event goes"). The result is the same wire struct the
//! serde path builds, so the conversion into the model is shared.

use serde::Deserialize;

use super::scan::Scanner;
use super::wire::{self, Str};

/// A reason for the caller to put in its `DecodeError`.
pub type WireError = String;

/// A member decoded by serde from its exact bytes.
fn serde_value<'a, T: Deserialize<'a>>(s: &mut Scanner<'a>, field: &str) -> Result<T, WireError> {
    let bytes = s.value().map_err(|e| e.to_string())?;
    serde_json::from_slice(bytes).map_err(|e| format!("{field}: {e}"))
}

/// A string member; `null` reads as absent.
fn opt_str<'a>(s: &mut Scanner<'a>, field: &str) -> Result<Option<Str<'a>>, WireError> {
    if s.null() {
        return Ok(None);
    }
    s.string()
        .map(|v| Some(Str(v)))
        .map_err(|e| format!("{field}: {e}"))
}

/// Walks the object at the scanner (or `null`), handing each key to `member`, which must
/// consume the value; `None` for `null`.
fn object<'a>(
    s: &mut Scanner<'a>,
    what: &str,
    mut member: impl FnMut(&mut Scanner<'a>, &str) -> Result<(), WireError>,
) -> Result<Option<()>, WireError> {
    if s.null() {
        return Ok(None);
    }
    let mut members = s.object().map_err(|e| format!("{what}: {e}"))?;
    while let Some(key) = s.next_key(&mut members).map_err(|e| e.to_string())? {
        member(s, &key)?;
    }
    Ok(Some(()))
}

fn skip(s: &mut Scanner<'_>) -> Result<(), WireError> {
    s.skip_value().map_err(|e| e.to_string())
}

pub fn node<'a>(s: &mut Scanner<'a>) -> Result<wire::Node<'a>, WireError> {
    let mut node = wire::Node {
        metadata: None,
        spec: None,
        status: None,
    };
    if s.null() {
        return Err("expected a Node object, found null".into());
    }
    object(s, "Node", |s, key| {
        match key {
            "metadata" => node.metadata = node_meta(s)?,
            "spec" => node.spec = serde_value(s, "spec")?,
            "status" => node.status = node_status(s)?,
            _ => skip(s)?,
        }
        Ok(())
    })?;
    Ok(node)
}

fn node_meta<'a>(s: &mut Scanner<'a>) -> Result<Option<wire::NodeMeta<'a>>, WireError> {
    let mut meta = wire::NodeMeta::default();
    let found = object(s, "metadata", |s, key| {
        match key {
            "name" => meta.name = opt_str(s, "metadata.name")?,
            "uid" => meta.uid = opt_str(s, "metadata.uid")?,
            "resourceVersion" => {
                meta.resource_version = opt_str(s, "metadata.resourceVersion")?;
            }
            "creationTimestamp" => {
                meta.creation_timestamp = opt_str(s, "metadata.creationTimestamp")?;
            }
            "labels" => meta.labels = serde_value(s, "metadata.labels")?,
            "annotations" => meta.annotations = serde_value(s, "metadata.annotations")?,
            _ => skip(s)?, // managedFields above all
        }
        Ok(())
    })?;
    Ok(found.map(|()| meta))
}

fn node_status<'a>(s: &mut Scanner<'a>) -> Result<Option<wire::NodeStatus<'a>>, WireError> {
    let mut status = wire::NodeStatus { conditions: None };
    let found = object(s, "status", |s, key| {
        match key {
            "conditions" => status.conditions = serde_value(s, "status.conditions")?,
            _ => skip(s)?, // images, nodeInfo, capacity, addresses, volumes
        }
        Ok(())
    })?;
    Ok(found.map(|()| status))
}

pub fn lease<'a>(s: &mut Scanner<'a>) -> Result<wire::Lease<'a>, WireError> {
    let mut lease = wire::Lease {
        metadata: None,
        spec: None,
    };
    if s.null() {
        return Err("expected a Lease object, found null".into());
    }
    object(s, "Lease", |s, key| {
        match key {
            "metadata" => {
                let mut meta = wire::Meta::default();
                let found = object(s, "metadata", |s, key| {
                    match key {
                        "name" => meta.name = opt_str(s, "metadata.name")?,
                        "resourceVersion" => {
                            meta.resource_version = opt_str(s, "metadata.resourceVersion")?;
                        }
                        _ => skip(s)?, // the Lease keeps no other metadata
                    }
                    Ok(())
                })?;
                lease.metadata = found.map(|()| meta);
            }
            "spec" => {
                let mut spec = wire::LeaseSpec { renew_time: None };
                let found = object(s, "spec", |s, key| {
                    match key {
                        "renewTime" => spec.renew_time = opt_str(s, "spec.renewTime")?,
                        _ => skip(s)?,
                    }
                    Ok(())
                })?;
                lease.spec = found.map(|()| spec);
            }
            _ => skip(s)?,
        }
        Ok(())
    })?;
    Ok(lease)
}

#[cfg(test)]
mod tests {
    use crate::kube::decode::{DecodeContext, WatchEvent, decode_watch_event, wire};
    use crate::model::{Lease, Node};
    use crate::testing::Rng;

    use super::super::Decode;

    /// Real watch lines from kube-apiserver 1.20 (2,000 nodes loaded by `load.py create`): a
    /// Node after a kubelet status patch and a Lease after a renewal.
    const NODE_EVENT: &str = include_str!("fixtures/watch_node_status_heartbeat.json");
    const LEASE_EVENT: &str = include_str!("fixtures/watch_lease_renewal.json");
    const PREFIX: &str = r#"{"type":"MODIFIED","object":"#;

    fn object_of(line: &str) -> &str {
        line.trim_end()
            .strip_prefix(PREFIX)
            .and_then(|o| o.strip_suffix('}'))
            .expect("a MODIFIED event line")
    }

    /// What the whole-object serde decode (the path before the scanner) makes of an object.
    fn serde_decoded<T: Decode>(object: &[u8], ctx: &mut DecodeContext) -> Option<T> {
        let wire: T::Wire<'_> = serde_json::from_slice(object).ok()?;
        T::from_wire(wire, ctx).ok()
    }

    fn modified<T: Decode>(line: &[u8], ctx: &mut DecodeContext) -> Option<T> {
        match decode_watch_event::<T>(line, ctx) {
            Ok(WatchEvent::Modified(obj)) => Some(obj),
            _ => None,
        }
    }

    #[test]
    fn a_real_node_status_heartbeat_decodes_as_the_whole_object_serde_path_does() {
        let mut ctx = DecodeContext::new();
        let object = object_of(NODE_EVENT);
        let expected: Node = serde_decoded(object.as_bytes(), &mut ctx).unwrap();
        let node: Node = modified(NODE_EVENT.trim_end().as_bytes(), &mut ctx).unwrap();
        assert_eq!(node, expected);
        assert_eq!(node.conditions.len(), 4);
        assert!(node.ready().unwrap().last_heartbeat_time.is_some());
        assert!(!node.labels.is_empty(), "the kept labels are read");
    }

    #[test]
    fn a_real_lease_renewal_decodes_as_the_whole_object_serde_path_does() {
        let mut ctx = DecodeContext::new();
        let expected: Lease = serde_decoded(object_of(LEASE_EVENT).as_bytes(), &mut ctx).unwrap();
        let lease: Lease = modified(LEASE_EVENT.trim_end().as_bytes(), &mut ctx).unwrap();
        assert_eq!(lease, expected);
        assert!(lease.renew_time.is_some());
    }

    /// Whenever the whole-object serde path accepts a (mutated, truncated) object, the member
    /// walk decodes the same projection; whatever it is given, it never panics.
    fn property_same_projection_as_serde<T: Decode + PartialEq + std::fmt::Debug>(line: &str) {
        let mut ctx = DecodeContext::new();
        let object = object_of(line).as_bytes();
        let mut agreed = 0;
        for seed in 0..2_000 {
            let mut rng = Rng::new(seed);
            let mut b = object.to_vec();
            if rng.below(4) == 0 {
                b.truncate(rng.below(b.len() as u64 + 1) as usize);
            }
            for _ in 0..=rng.below(3) {
                if !b.is_empty() {
                    let i = rng.below(b.len() as u64) as usize;
                    const BYTES: &[u8] = b":,{}[]\"\\ 0an";
                    b[i] = BYTES[rng.below(BYTES.len() as u64) as usize];
                }
            }
            let mut event = PREFIX.as_bytes().to_vec();
            event.extend_from_slice(&b);
            event.push(b'}');
            let fast = modified::<T>(&event, &mut ctx);
            if let Some(expected) = serde_decoded::<T>(&b, &mut ctx) {
                assert_eq!(fast, Some(expected), "seed {seed}");
                agreed += 1;
            }
        }
        assert!(agreed > 100, "only {agreed} mutants were valid JSON");
    }

    #[test]
    fn property_mutated_node_heartbeats_decode_as_serde_decodes_them() {
        property_same_projection_as_serde::<Node>(NODE_EVENT);
    }

    #[test]
    fn property_mutated_lease_renewals_decode_as_serde_decodes_them() {
        property_same_projection_as_serde::<Lease>(LEASE_EVENT);
    }

    #[test]
    fn skipped_members_with_escapes_brackets_and_nesting_do_not_derail_the_walk() {
        let mut ctx = DecodeContext::new();
        let line = r#"{"type":"MODIFIED","object":{"metadata":{"managedFields":[{"f":"}]\"{[","k:{\"type\":\"Ready\"}":{"a":[[1,[2]],{}]}}],
            "name":"n1","resourceVersion":"9"},"status":{"images":[{"names":["a\\","b]"]}],"conditions":[{"type":"Ready","status":"True"}],"nodeInfo":{}}}}"#;
        let node: Node = modified(line.as_bytes(), &mut ctx).unwrap();
        assert_eq!(&*node.name, "n1");
        assert_eq!(&*node.resource_version, "9");
        assert_eq!(node.conditions.len(), 1);
        let truncated = &line[..line.find("nodeInfo").unwrap()];
        let e = decode_watch_event::<Node>(truncated.as_bytes(), &mut ctx).unwrap_err();
        assert_eq!(e.what, "watch event");
        assert!(e.reason.contains("at byte"), "{e}");
        let mismatched = line.replace("[[1,[2]],{}]", "[[1,[2]},{}]");
        let e = decode_watch_event::<Node>(mismatched.as_bytes(), &mut ctx).unwrap_err();
        assert!(e.reason.contains("mismatched bracket"), "{e}");
    }

    #[test]
    fn a_null_or_non_object_node_is_an_error_and_null_members_read_as_absent() {
        let mut ctx = DecodeContext::new();
        for bad in [
            r#"{"type":"ADDED","object":null}"#,
            r#"{"type":"ADDED","object":[]}"#,
            r#"{"type":"ADDED","object":{"metadata":{"name":5}}}"#,
            r#"{"type":"ADDED","object":{"metadata":{"name":"a\u0001b"}}} x"#,
        ] {
            assert!(
                decode_watch_event::<Node>(bad.as_bytes(), &mut ctx).is_err(),
                "{bad}"
            );
            assert!(
                decode_watch_event::<Lease>(bad.as_bytes(), &mut ctx).is_err(),
                "{bad}"
            );
        }
        let line = r#"{"type":"ADDED","object":{"metadata":{"name":"n","uid":null,"labels":null},"spec":null,"status":null}}"#;
        let node: WatchEvent<Node> = decode_watch_event(line.as_bytes(), &mut ctx).unwrap();
        assert!(matches!(node, WatchEvent::Added(n) if n.conditions.is_empty()));
        let _: wire::Lease<'_> = serde_json::from_str(r#"{"metadata":null}"#).unwrap();
    }
}
