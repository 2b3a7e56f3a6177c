//! Node conditions' reason and message, one shared pair per distinct text (see
//! `model::ConditionText`), as `DecodeContext::share_labels` does for label sets.

use std::rc::Rc;

use super::{DecodeContext, opt_interned, wire};
use crate::model::ConditionText;

/// The pair of `reason` and `message`, interned, from the context's table.
pub(super) fn shared(
    ctx: &mut DecodeContext,
    reason: &Option<wire::Str<'_>>,
    message: &Option<wire::Str<'_>>,
) -> ConditionText {
    let pair = (opt_interned(ctx, reason), opt_interned(ctx, message));
    if pair.0.is_none() && pair.1.is_none() {
        return ConditionText::default();
    }
    if let Some(existing) = ctx.condition_texts.get(&pair) {
        return ConditionText::from_pair(Some(existing.clone()));
    }
    let rc = Rc::new(pair);
    ctx.condition_texts.insert(rc.clone());
    ConditionText::from_pair(Some(rc))
}

/// Drops the pairs no condition holds any more; how many.
pub(super) fn prune(ctx: &mut DecodeContext) -> usize {
    let before = ctx.condition_texts.len();
    ctx.condition_texts.retain(|c| Rc::strong_count(c) > 1);
    before - ctx.condition_texts.len()
}
