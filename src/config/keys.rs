//! The keys of the file, one line each in the table of their section: the key, its kind
//! (`kinds.rs`: how it is read, checked and printed) and, after `in`, the field of the settings
//! that hold it (top level: `controller` is the controllers' `Settings`; none: `Config` itself).
//! The settings' `Default` is the key's default.
//!
//! From a table come the key's field in the raw struct serde reads, its check (in table order;
//! the top level before the sections) and its line in the printed configuration (in table
//! order). So a key is declared in its settings struct, named in a table here and documented in
//! conf/config.toml; rules between keys stay with the section's validation.

use serde::Deserialize;
use toml::Spanned;

use super::fencing::{Argv, FenceConcurrency, FenceLabels, FenceModeText, FenceSteps};
use super::kinds::*;
use std::collections::BTreeMap;

use crate::controller::pools::Pool;

use super::raw::{Field, RawConditionTaint, RawRequirement};
use super::validate_api::{Burst, ContentTypeText, Qps};
use super::{ApiConfig, Config, ConfigError, FencingConfig, LeaderElectionConfig, Validator};

/// One table: `Raw => Target` names the struct serde reads and the settings it fills in,
/// `prefix` goes before a key in errors (`"api."`), `check` and `entries` name the functions
/// made; `own` are further fields of the raw struct that the section's validation reads
/// itself (a section's table, keys that together make one value).
macro_rules! key_table {
    (
        $(#[$doc:meta])*
        $raw:ident => $target:ty, prefix $prefix:literal, $check:ident, $entries:ident;
        keys { $( $key:ident : $kind:ident $(in $owner:ident)? $(as $field:ident)? , )* }
        $( own { $( $(#[$fmeta:meta])* $own:ident : $oraw:ty , )* } )?
    ) => {
        $(#[$doc])*
        #[derive(Deserialize, Default)]
        #[serde(deny_unknown_fields)]
        pub(super) struct $raw {
            $( pub $key: Field<<$kind as Kind>::Raw>, )*
            $( $( $(#[$fmeta])* pub $own: $oraw, )* )?
        }

        impl Validator<'_> {
            /// Sets each key the file gives into `c`, checked, in table order.
            pub(super) fn $check(&self, raw: &$raw, c: &mut $target) -> Result<(), ConfigError> {
                $(
                    let key = concat!($prefix, stringify!($key));
                    if let Some(value) = <$kind as Kind>::check(self, &raw.$key, key)? {
                        field!(c $(.$owner)?; $key $(, $field)?) = value;
                    }
                )*
                Ok(())
            }
        }

        /// Each key with its TOML spelling (`None`: unset), in table order.
        pub(super) fn $entries(c: &$target) -> Vec<(&'static str, Option<String>)> {
            vec![ $( (
                stringify!($key),
                <$kind as Kind>::render(&field!(c $(.$owner)?; $key $(, $field)?)),
            ), )* ]
        }
    };
}

/// The field holding a key: named like the key, or as `as` says.
macro_rules! field {
    ($c:ident $(.$owner:ident)?; $key:ident) => { $c $(.$owner)? .$key };
    ($c:ident $(.$owner:ident)?; $key:ident, $field:ident) => { $c $(.$owner)? .$field };
}

/// Like `key_table!`, for the keys a table overrides (`Override`: unset inherits).
macro_rules! override_table {
    (
        $(#[$doc:meta])*
        $raw:ident => $target:ty, prefix $prefix:literal, $check:ident, $entries:ident;
        overrides { $( $key:ident : $kind:ident , )* }
        own { $( $(#[$fmeta:meta])* $field:ident : $fraw:ty , )* }
    ) => {
        $(#[$doc])*
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        pub(super) struct $raw {
            $( $(#[$fmeta])* pub $field: $fraw, )*
            $( pub $key: Field<<$kind as Kind>::Raw>, )*
        }

        impl Validator<'_> {
            /// Sets each override the table gives into `c`, checked, in table order.
            pub(super) fn $check(&self, raw: &$raw, c: &mut $target) -> Result<(), ConfigError> {
                $(
                    let key = concat!($prefix, stringify!($key));
                    if let Some(value) = <$kind as Kind>::check(self, &raw.$key, key)? {
                        c.$key = <$kind as Override>::field(value);
                    }
                )*
                Ok(())
            }
        }

        /// Each override with its TOML spelling (`None`: inherited), in table order.
        pub(super) fn $entries(c: &$target) -> Vec<(&'static str, Option<String>)> {
            vec![ $( (stringify!($key), <$kind as Override>::render_field(&c.$key)), )* ]
        }
    };
}

key_table! {
    /// The file as written: every key optional, every value with its position.
    RawConfig => Config, prefix "", top_level, top_level_entries;
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
        shadow: Flag,
        shadow_file: FilePath,
        log_level: Level,
        dump_format: DumpText,
        metrics_address: LoopbackAddress,
        log_format: LogText,
        control_socket: SocketPath,
        autonomy: Flag in controller,
        disruption_cooldown: Delay in controller,
        early_suspects: Flag in controller,
        lifecycle_conditions: Flag in controller,
        max_unhealthy: Brake in controller,
        admission_default_toleration_seconds: Seconds in controller,
        default_toleration_seconds: MaybeSeconds in controller,
        mark_pods_not_ready: PodsMode in controller,
        disruption_domain: DomainKeys in controller,
        full_disruption: Disruption in controller,
        hold_max: Limit in controller,
    }
    own {
        #[serde(default)]
        api: RawApi,
        #[serde(default)]
        leader_election: RawLeaderElection,
        #[serde(default)]
        pool: Vec<Spanned<RawPool>>,
        #[serde(default)]
        condition_taint: Vec<Spanned<RawConditionTaint>>,
        #[serde(default)]
        fencing: RawFencing,
    }
}

key_table! {
    /// `[leader_election]` (`leader/settings.rs`).
    RawLeaderElection => LeaderElectionConfig, prefix "leader_election.", leader_election_keys,
        leader_election_entries;
    keys {
        enabled: Flag,
        namespace: ObjectName,
        name: ObjectName,
        lease_duration: Period,
        renew_deadline: Period,
        retry_period: Period,
        identity: Identity,
    }
}

override_table! {
    /// One `[[pool]]`: a selector and the settings it overrides (`controller/pools.rs`); the
    /// name and the selector are checked in `policies.rs`.
    RawPool => Pool, prefix "pool.", pool_keys, pool_entries;
    overrides {
        node_monitor_grace_period: Period,
        node_startup_grace_period: Period,
        mark_pods_not_ready: PodsMode,
        node_eviction_rate: PerSecond,
        secondary_node_eviction_rate: PerSecond,
        max_unhealthy: Brake,
        default_toleration_seconds: MaybeSeconds,
        disruption_domain: DomainKeys,
        full_disruption: Disruption,
        hold_max: Limit,
    }
    own {
        name: Field<String>,
        match_labels: Field<BTreeMap<String, String>>,
        #[serde(default)]
        match_expressions: Vec<Spanned<RawRequirement>>,
    }
}

key_table! {
    /// `[fencing]` (`fencing.rs`; the controllers' part is `FencingConfig::policy`).
    RawFencing => FencingConfig, prefix "fencing.", fencing_keys, fencing_entries;
    keys {
        enabled: Flag,
        command: Argv,
        after: Period,
        timeout: Period,
        max_concurrent: FenceConcurrency,
        match_labels: FenceLabels,
        retry_backoff: Period,
        retry_backoff_max: Period,
        remove_out_of_service_on_recovery: Flag,
        skip_cordoned: Flag,
        max_pause: Period,
        mode: FenceModeText,
        on_command: Argv,
        recover_timeout: Period,
        step: FenceSteps as steps,
        status_command: Argv,
        status_interval: Delay,
    }
}

key_table! {
    /// `[api]`: where the API server is (`api.kubeconfig`, `api.in_cluster` or `api.server`
    /// and its credentials make one `ApiSource`, checked in `validate_api.rs`) and how it is
    /// asked.
    RawApi => ApiConfig, prefix "api.", api_keys, api_entries;
    keys {
        allow_insecure_skip_tls_verify: Flag,
        qps: Qps,
        burst: Burst,
        request_timeout: Period,
        watch_idle_timeout: Period,
        content_type: ContentTypeText,
    }
    own {
        kubeconfig: Field<String>,
        context: Field<String>,
        in_cluster: Field<bool>,
        server: Field<String>,
        certificate_authority: Field<String>,
        client_certificate: Field<String>,
        client_key: Field<String>,
        token_file: Field<String>,
    }
}
