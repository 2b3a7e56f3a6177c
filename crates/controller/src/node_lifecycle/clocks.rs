//! The clocks a leader leaves for the next one (`controller/clocks.rs`), as the node lifecycle
//! keeps them: read from its zones and brakes, and put back at a takeover once every node is
//! counted and the zone states computed (`on_initial_sync`).

use crate::time::Time;
use crate::zones::ZoneState;

use super::NodeLifecycle;
use crate::brake::{BrakeScope, BrakeState};
use crate::clocks::Clocks;

impl NodeLifecycle {
    /// The clocks now: fully disrupted domains' starts, cooldowns not over, engaged brakes.
    pub(crate) fn clocks(&self, now: Time) -> Clocks {
        let mut clocks = Clocks::default();
        for (key, z) in self.zones.iter() {
            if let Some(since) = z.hold.full_since().filter(|_| z.state.is_some()) {
                clocks.full_since.insert(key.to_string(), since);
            }
            if let Some(until) = z.hold.cooldown_until().filter(|u| *u > now) {
                clocks.cooldown_until.insert(key.to_string(), until);
            }
        }
        for (scope, state) in &self.brakes.scopes {
            if let Some(engaged) = state.engaged_since {
                clocks
                    .brakes
                    .insert(scope_name(scope), (engaged, state.within_since));
            }
        }
        clocks
    }

    /// Clocks a previous leader left, honoured at the initial sync.
    pub(crate) fn inherit_clocks(&mut self, clocks: Clocks) {
        self.inherited_clocks = (!clocks.is_empty()).then_some(clocks);
    }

    /// Puts the inherited clocks back (`on_initial_sync`, after the first zone states): a
    /// domain still fully disrupted keeps the start it had (never a later one), a cooldown not
    /// over goes on, a brake engaged keeps its start and release window (its count decides
    /// from there, `update_brakes`). After an outage that cost the lease, every zone starts a
    /// `disruption_cooldown`.
    pub(super) fn apply_inherited_clocks(&mut self, now: Time) {
        let Some(clocks) = self.inherited_clocks.take() else {
            return;
        };
        for (key, z) in self.zones.iter_mut() {
            if z.state == Some(ZoneState::FullDisruption)
                && let Some(since) = clocks.full_since.get(&**key)
            {
                z.hold.inherit_full_since(*since);
            }
            if let Some(until) = clocks.cooldown_until.get(&**key).filter(|u| **u > now) {
                z.hold.inherit_cooldown(*until);
            }
            if clocks.after_outage {
                let cooldown = self.settings.disruption_cooldown;
                if !cooldown.is_zero()
                    && z.hold
                        .cooldown_until()
                        .is_none_or(|own| own < now + cooldown)
                {
                    z.hold.start_cooldown(cooldown, now);
                }
            }
        }
        let mut wanted = Vec::new();
        if let Some(limit) = self.settings.max_unhealthy {
            wanted.push((BrakeScope::Fleet, limit));
        }
        for p in &self.settings.pools {
            if let Some(limit) = p.max_unhealthy {
                wanted.push((BrakeScope::Pool(p.name.clone()), limit));
            }
        }
        for (scope, limit) in wanted {
            let Some((engaged, within)) = clocks.brakes.get(&scope_name(&scope)) else {
                continue;
            };
            let state = self
                .brakes
                .scopes
                .entry(scope)
                .or_insert_with(|| BrakeState::new(limit));
            state.engaged_since = Some(*engaged);
            state.within_since = *within;
            self.brakes.pool_cover = None;
        }
    }
}

/// A brake scope as the clocks name it.
fn scope_name(scope: &BrakeScope) -> String {
    match scope {
        BrakeScope::Fleet => String::from("fleet"),
        BrakeScope::Pool(p) => format!("pool:{p}"),
    }
}
