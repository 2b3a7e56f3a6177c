//! Node conditions' reason and message, one shared pair per distinct text (see
//! `model::ConditionText`), as `DecodeContext::share_labels` does for label sets.

use std::rc::Rc;

use super::{DecodeContext, opt_interned, wire};
use crate::model::{ConditionText, Name};

/// The pair of `reason` and `message`, interned, from the context's table: found by the
/// wire's text, so a pair already shared (the kubelet's text, the same at every heartbeat) is
/// neither interned nor built again.
pub(super) fn shared(
    ctx: &mut DecodeContext,
    reason: &Option<wire::Str<'_>>,
    message: &Option<wire::Str<'_>>,
) -> ConditionText {
    // An empty text is an absent one, as `opt_interned` reads it.
    let (r, m) = (wire::text(reason), wire::text(message));
    if r.is_empty() && m.is_empty() {
        return ConditionText::default();
    }
    let hash = ctx.condition_texts.hash([r, m]);
    if let Some(existing) = ctx
        .condition_texts
        .find(hash, |pair| text(&pair.0) == r && text(&pair.1) == m)
    {
        return ConditionText::from_pair(Some(existing.clone()));
    }
    let rc = Rc::new((opt_interned(ctx, reason), opt_interned(ctx, message)));
    ctx.condition_texts.insert(hash, rc.clone());
    ConditionText::from_pair(Some(rc))
}

/// Drops the pairs no condition holds any more; how many.
pub(super) fn prune(ctx: &mut DecodeContext) -> usize {
    ctx.condition_texts.prune()
}

fn text(n: &Option<Name>) -> &str {
    n.as_deref().unwrap_or("")
}
