//! Node conditions' reason and message, one shared pair per distinct text (see
//! `model::ConditionText`), as `DecodeContext::share_labels` does for label sets.

use std::rc::Rc;

use super::wire::{self, LazyStr};
use super::{DecodeContext, DecodeError};
use crate::model::{ConditionText, Name};

const REASON: &str = "status.conditions.reason";
const MESSAGE: &str = "status.conditions.message";

/// The pair of `reason` and `message`, interned, from the context's table: found by the
/// wire's bytes, so a pair already shared (the kubelet's text, the same at every heartbeat) is
/// neither checked, interned nor built again (its text is UTF-8, so bytes equal to it are
/// too). A text not found is checked as UTF-8 (not: the node is refused, as the reader's
/// check did) and interned.
pub(super) fn shared(
    ctx: &mut DecodeContext,
    reason: &Option<LazyStr<'_>>,
    message: &Option<LazyStr<'_>>,
) -> Result<ConditionText, DecodeError> {
    // An empty text is an absent one, as `opt_interned` reads it.
    let (r, m) = (wire::lazy_bytes(reason), wire::lazy_bytes(message));
    if r.is_empty() && m.is_empty() {
        return Ok(ConditionText::default());
    }
    let hash = ctx.condition_texts.hash([r, m]);
    if let Some(existing) = ctx
        .condition_texts
        .find(hash, |pair| bytes(&pair.0) == r && bytes(&pair.1) == m)
    {
        return Ok(ConditionText::from_pair(Some(existing.clone())));
    }
    let (reason, message) = check(reason, message)?;
    let mut intern = |s: &str| (!s.is_empty()).then(|| ctx.intern(s));
    let rc = Rc::new((intern(reason), intern(message)));
    ctx.condition_texts.insert(hash, rc.clone());
    Ok(ConditionText::from_pair(Some(rc)))
}

/// The texts of a condition that is not kept (a duplicate, or a type the model does not
/// name), checked as the reader checked every string: one that is not UTF-8 refuses the node.
pub(super) fn check<'a>(
    reason: &'a Option<LazyStr<'_>>,
    message: &'a Option<LazyStr<'_>>,
) -> Result<(&'a str, &'a str), DecodeError> {
    Ok((
        wire::lazy_text_of("Node", reason, REASON)?,
        wire::lazy_text_of("Node", message, MESSAGE)?,
    ))
}

/// Drops the pairs no condition holds any more; how many.
pub(super) fn prune(ctx: &mut DecodeContext) -> usize {
    ctx.condition_texts.prune()
}

fn bytes(n: &Option<Name>) -> &[u8] {
    n.as_deref().unwrap_or("").as_bytes()
}
