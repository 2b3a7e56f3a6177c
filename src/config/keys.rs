//! The top-level keys of the file, one line each: the key, its kind (`kinds.rs`: how it is read,
//! checked and printed) and, after `in`, the settings that hold it (`controller`: the
//! controllers' `Settings`, whose `Default` is the key's default; none: `Config` itself).
//!
//! From this table come the key's field in `RawConfig` (what serde reads), its check (in table
//! order, before the sections') and its line in the printed configuration (in table order),
//! so a key is declared in its settings struct, named here and documented in conf/config.toml.

use serde::Deserialize;
use toml::Spanned;

use super::kinds::*;
use super::raw::{Field, RawApi, RawConditionTaint, RawFencing, RawLeaderElection, RawPool};
use super::{Config, ConfigError, Validator};

macro_rules! top_level_keys {
    (
        keys { $( $key:ident : $kind:ident $(in $owner:ident)? , )* }
        sections { $( $section:ident : $raw:ty , )* }
    ) => {
        /// The file as written: every key optional, every value with its position.
        #[derive(Deserialize, Default)]
        #[serde(deny_unknown_fields)]
        pub(super) struct RawConfig {
            $( pub $key: Field<<$kind as Kind>::Raw>, )*
            $( #[serde(default)] pub $section: $raw, )*
        }

        impl Validator<'_> {
            /// Sets each top-level key the file gives into `c`, checked.
            pub(super) fn top_level(&self, raw: &RawConfig, c: &mut Config) -> Result<(), ConfigError> {
                $(
                    if let Some(value) = <$kind as Kind>::check(self, &raw.$key, stringify!($key))? {
                        c $(.$owner)? .$key = value;
                    }
                )*
                Ok(())
            }
        }

        /// Each top-level key with its TOML spelling (`None`: unset), in table order.
        pub(super) fn top_level_entries(c: &Config) -> Vec<(&'static str, Option<String>)> {
            vec![ $( (stringify!($key), <$kind as Kind>::render(&c $(.$owner)? .$key)), )* ]
        }
    };
}

top_level_keys! {
    keys {
        node_monitor_period: Period in controller,
        node_monitor_grace_period: Period in controller,
        node_startup_grace_period: Period in controller,
        node_eviction_rate: PerSecond in controller,
        secondary_node_eviction_rate: PerSecond in controller,
        large_cluster_size_threshold: NodeCount in controller,
        unhealthy_zone_threshold: Fraction in controller,
        taint_based_eviction: Flag in controller,
        pod_eviction_timeout: Delay in controller,
        dry_run: Flag,
        log_level: Level,
        dump_format: DumpText,
        metrics_address: LoopbackAddress,
        log_format: LogText,
        control_socket: SocketPath,
        autonomy: Flag in controller,
        disruption_cooldown: Delay in controller,
        early_suspects: Flag in controller,
        max_unhealthy: Brake in controller,
        admission_default_toleration_seconds: Seconds in controller,
        default_toleration_seconds: MaybeSeconds in controller,
        mark_pods_not_ready: PodsMode in controller,
        disruption_domain: DomainKeys in controller,
        full_disruption: Disruption in controller,
        hold_max: Limit in controller,
    }
    sections {
        api: RawApi,
        leader_election: RawLeaderElection,
        pool: Vec<Spanned<RawPool>>,
        condition_taint: Vec<Spanned<RawConditionTaint>>,
        fencing: RawFencing,
    }
}
