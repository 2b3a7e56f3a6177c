//! A node's annotations, read into the model: maintenance and OpenYurt autonomy (the only
//! annotations kept, `wire::AutonomyKeys`).

use super::{DecodeContext, WARNED_MAX};
use crate::model::{Autonomy, Maintenance};

/// What the maintenance annotation says. A value that is neither empty nor an RFC 3339 time still
/// counts as maintenance (fencing never acts on a guess), with a warning
/// naming the node and the value, once.
pub(super) fn maintenance(
    ctx: &mut DecodeContext,
    name: &str,
    annotations: &[(std::borrow::Cow<'_, str>, std::borrow::Cow<'_, str>)],
) -> Maintenance {
    use crate::model::maintenance::ANNOTATION;
    let Some((_, value)) = annotations.iter().find(|(k, _)| k == ANNOTATION) else {
        return Maintenance::None;
    };
    let parsed = Maintenance::parse(value);
    if let Maintenance::Unreadable(_) = parsed {
        let warned = format!("Node/{name}: annotation {ANNOTATION}");
        if !ctx.warned.contains(&warned) {
            log::warn!(
                "{warned}: {value:?} is neither empty nor an RFC 3339 time: counted as \
                 maintenance (the node is not fenced) until it is fixed or removed"
            );
            if ctx.warned.len() < WARNED_MAX {
                ctx.warned.insert(warned);
            }
        }
    }
    parsed
}

/// What the OpenYurt annotations say. Any "forever" marker wins; a duration that cannot be
/// read is ignored with a warning (the node is then not autonomous, as upstream would treat
/// it: a guess could keep pods on a dead node forever). Go's duration syntax, as OpenYurt's.
pub(super) fn autonomy(
    ctx: &mut DecodeContext,
    name: &str,
    annotations: &[(std::borrow::Cow<'_, str>, std::borrow::Cow<'_, str>)],
) -> Autonomy {
    use crate::model::autonomy_annotations::{BINDING, DURATION, LEGACY};
    let mut duration = None;
    for (key, value) in annotations {
        match &**key {
            LEGACY | BINDING if value == "true" => return Autonomy::Forever,
            DURATION => duration = Some(value),
            _ => {}
        }
    }
    let Some(value) = duration else {
        return Autonomy::None;
    };
    // The config's parser is Go's grammar without the sign: the same words mean the same here.
    match crate::time::parse_duration(value) {
        Ok(d) if d.is_zero() => Autonomy::Forever,
        Ok(d) => Autonomy::For(d),
        Err(why) => {
            ctx.bad_annotation(name, DURATION, value, &why);
            Autonomy::None
        }
    }
}
