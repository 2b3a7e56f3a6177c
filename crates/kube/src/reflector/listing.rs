//! The LIST answers fed back by the shell: consistent pages, a streamed `resourceVersion=0` list's
//! items, and list failures (a compacted continue token starts over at once).

use super::{Delta, ListFailure, Phase, Reflector, Watched};
use crate::decode::ListPage;
use crate::time::Time;

impl<T: Watched> Reflector<T> {
    /// Part of a streamed LIST (`from_watch_cache`): the items read so far. The rest of the
    /// same response follows; its last part comes through `list_page_received`.
    pub fn list_items_received(&mut self, page: ListPage<T>, out: &mut Vec<Delta<T>>) {
        let Phase::Listing {
            listed,
            begun,
            from_cache: true,
            ..
        } = &mut self.phase
        else {
            return; // a late answer to a list we abandoned
        };
        if !*begun {
            *begun = true;
            out.push(Delta::Begin);
        }
        *listed += page.items.len();
        out.extend(page.items.into_iter().map(Delta::Upsert));
        self.skipped_events += page.skipped.len() as u64;
    }

    pub fn list_page_received(&mut self, now: Time, page: ListPage<T>, out: &mut Vec<Delta<T>>) {
        let Phase::Listing { listed, begun, .. } = &mut self.phase else {
            return; // a late answer to a list we abandoned
        };
        if !*begun {
            // The first page of a full state.
            *begun = true;
            out.push(Delta::Begin);
        }
        *listed += page.items.len();
        out.extend(page.items.into_iter().map(Delta::Upsert));
        self.skipped_events += page.skipped.len() as u64;
        if let Some(token) = page.continue_token {
            self.phase = match std::mem::replace(&mut self.phase, Phase::ToList) {
                Phase::Listing { listed, .. } => Phase::Listing {
                    continue_token: Some(token),
                    listed,
                    outstanding: false,
                    begun: true,
                    from_cache: false,
                },
                other => other,
            };
            return;
        }
        let Phase::Listing { listed, .. } = std::mem::replace(&mut self.phase, Phase::ToWatch)
        else {
            return;
        };
        self.full_state_complete(listed, out);
        self.resource_version = Some(page.resource_version).filter(|rv| !rv.is_empty());
        self.ready_at = now;
    }

    pub fn list_failed(&mut self, now: Time, failure: ListFailure) {
        let Phase::Listing {
            outstanding,
            from_cache,
            ..
        } = &mut self.phase
        else {
            return;
        };
        if *from_cache {
            // Refused, too large for the call's time, or broken off: consistent pages next,
            // a full state from the start (a new `Delta::Begin`).
            self.cache_list_failed = true;
            self.phase = Phase::ToList;
        } else {
            // The continue token stays: a transient failure need not restart a long list.
            *outstanding = false;
        }
        if failure.gone {
            // The snapshot behind the continue token was compacted: start over at once.
            self.phase = Phase::ToList;
            self.ready_at = now;
            self.last_error = Some(failure.message);
            return;
        }
        self.fail(now, failure.message);
    }
}
