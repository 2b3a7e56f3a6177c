//! Validation of the edge and bare-metal policies: `[[pool]]` and `[[condition_taint]]` tables.
//! Same rules as the rest of the file: one line naming the file,
//! the line and the key; nothing guessed.

use std::ops::Range;
use std::rc::Rc;
use std::time::Duration;

use toml::Spanned;

use crate::controller::condition_taints::ConditionTaint;
use crate::controller::pools::{LabelRequirement, Pool, SelectorOperator};
use crate::model::{ConditionStatus, TaintEffect};

use super::keys::RawPool;
use super::raw::{Field, RawConditionTaint};
use super::{ConfigError, Validator, format_duration};

/// Taint key prefixes owned by Kubernetes components (the node lifecycle controller, cloud
/// providers, kubeadm, the node-readiness-controller's bootstrap gates): a custom taint there
/// would fight their writers, and a rule whose condition does not hold would remove theirs.
pub(crate) const RESERVED_TAINT_PREFIXES: [&str; 4] = [
    "node.kubernetes.io/",
    "node.cloudprovider.kubernetes.io/",
    "node-role.kubernetes.io/",
    "readiness.k8s.io/",
];

/// A Kubernetes qualified name (`[prefix/]name`, name ≤ 63 of `[A-Za-z0-9._-]`, starting and
/// ending alphanumeric; prefix a DNS subdomain): what label and taint keys must be.
pub(super) fn is_qualified_name(key: &str) -> bool {
    let (prefix, name) = match key.rsplit_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, key),
    };
    let name_ok = !name.is_empty()
        && name.len() <= 63
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        && name.as_bytes()[0].is_ascii_alphanumeric()
        && name.as_bytes()[name.len() - 1].is_ascii_alphanumeric();
    name_ok && prefix.is_none_or(super::is_dns_subdomain)
}

/// A label value: empty, or ≤ 63 of `[A-Za-z0-9._-]` starting and ending alphanumeric.
fn is_label_value(v: &str) -> bool {
    v.is_empty() || is_qualified_name(v) && !v.contains('/')
}

fn span<T>(f: &Field<T>) -> Option<Range<usize>> {
    f.as_ref().map(Spanned::span)
}

impl Validator<'_> {
    fn required<'f>(
        &self,
        field: &'f Field<String>,
        table: Range<usize>,
        key: &str,
    ) -> Result<&'f str, ConfigError> {
        match field {
            Some(v) if !v.get_ref().is_empty() => Ok(v.get_ref()),
            Some(v) => Err(self.error(Some(v.span()), key, "must not be empty".to_string())),
            None => Err(self.error(Some(table), key, "missing (required)".to_string())),
        }
    }

    pub(super) fn pools(
        &self,
        raw: &[Spanned<RawPool>],
        watch_idle_timeout: Duration,
    ) -> Result<Vec<Pool>, ConfigError> {
        let mut pools: Vec<Pool> = Vec::new();
        for table in raw {
            let p = table.get_ref();
            let name = self.required(&p.name, table.span(), "pool.name")?;
            let name_ok = name.len() <= 63
                && name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
            if !name_ok {
                return Err(self.error(
                    span(&p.name),
                    "pool.name",
                    format!("must be at most 63 letters, digits, '-', '_' or '.', got {name:?}"),
                ));
            }
            if pools.iter().any(|q| &*q.name == name) {
                return Err(self.error(
                    span(&p.name),
                    "pool.name",
                    format!("{name:?} names two pools"),
                ));
            }
            let mut match_labels = Vec::new();
            if let Some(labels) = &p.match_labels {
                for (k, v) in labels.get_ref() {
                    if !is_qualified_name(k) || !is_label_value(v) {
                        return Err(self.error(
                            Some(labels.span()),
                            "pool.match_labels",
                            format!("{k:?} = {v:?} is not a valid label key and value"),
                        ));
                    }
                    match_labels.push((k.clone(), v.clone()));
                }
            }
            let mut match_expressions = Vec::new();
            for e in &p.match_expressions {
                match_expressions.push(self.requirement(e)?);
            }
            if match_labels.is_empty() && match_expressions.is_empty() {
                return Err(self.error(
                    Some(table.span()),
                    "pool.match_labels",
                    format!(
                        "pool {name:?} selects no node: give match_labels or match_expressions \
                         (nodes in no pool already get the global settings)"
                    ),
                ));
            }
            let mut pool = Pool {
                name: Rc::from(name),
                match_labels,
                match_expressions,
                ..Pool::default()
            };
            self.pool_keys(p, &mut pool)?;
            if let Some(g) = pool.node_monitor_grace_period
                && watch_idle_timeout >= g
            {
                return Err(self.error(
                    span(&p.node_monitor_grace_period),
                    "pool.node_monitor_grace_period",
                    format!(
                        "must be longer than api.watch_idle_timeout ({}): a dead watch must be \
                         noticed before nodes are judged on it",
                        format_duration(watch_idle_timeout)
                    ),
                ));
            }
            pools.push(pool);
        }
        Ok(pools)
    }

    fn requirement(
        &self,
        raw: &Spanned<super::raw::RawRequirement>,
    ) -> Result<LabelRequirement, ConfigError> {
        let r = raw.get_ref();
        let key = self.required(&r.key, raw.span(), "pool.match_expressions.key")?;
        if !is_qualified_name(key) {
            return Err(self.error(
                span(&r.key),
                "pool.match_expressions.key",
                format!("{key:?} is not a valid label key"),
            ));
        }
        let op_text = self.required(&r.operator, raw.span(), "pool.match_expressions.operator")?;
        let operator = SelectorOperator::parse(op_text).ok_or_else(|| {
            self.error(
                span(&r.operator),
                "pool.match_expressions.operator",
                format!("must be In, NotIn, Exists or DoesNotExist, got {op_text:?}"),
            )
        })?;
        let values: Vec<String> = r
            .values
            .as_ref()
            .map(|v| v.get_ref().clone())
            .unwrap_or_default();
        let needs_values = matches!(operator, SelectorOperator::In | SelectorOperator::NotIn);
        if needs_values == values.is_empty() {
            let (at, why) = if needs_values {
                (Some(raw.span()), format!("{op_text} needs values = [...]"))
            } else {
                (span(&r.values), format!("{op_text} takes no values"))
            };
            return Err(self.error(at, "pool.match_expressions.values", why));
        }
        if let Some(bad) = values.iter().find(|v| !is_label_value(v)) {
            return Err(self.error(
                span(&r.values),
                "pool.match_expressions.values",
                format!("{bad:?} is not a valid label value"),
            ));
        }
        Ok(LabelRequirement {
            key: key.to_string(),
            operator,
            values,
        })
    }

    pub(super) fn condition_taints(
        &self,
        raw: &[Spanned<RawConditionTaint>],
        taint_based_eviction: bool,
    ) -> Result<Vec<ConditionTaint>, ConfigError> {
        let mut out: Vec<ConditionTaint> = Vec::new();
        for table in raw {
            let t = table.get_ref();
            let condition =
                self.required(&t.condition, table.span(), "condition_taint.condition")?;
            if condition == "Ready" || !is_qualified_name(condition) {
                return Err(self.error(
                    span(&t.condition),
                    "condition_taint.condition",
                    format!(
                        "must be a node condition type other than Ready (its taints are \
                         upstream's), got {condition:?}"
                    ),
                ));
            }
            let status_text = self.required(&t.status, table.span(), "condition_taint.status")?;
            let status = match status_text {
                "True" | "False" | "Unknown" => ConditionStatus::parse(status_text),
                other => {
                    return Err(self.error(
                        span(&t.status),
                        "condition_taint.status",
                        format!("must be \"True\", \"False\" or \"Unknown\", got {other:?}"),
                    ));
                }
            };
            let key = self.required(&t.key, table.span(), "condition_taint.key")?;
            if !is_qualified_name(key) {
                return Err(self.error(
                    span(&t.key),
                    "condition_taint.key",
                    format!("{key:?} is not a valid taint key"),
                ));
            }
            if let Some(prefix) = RESERVED_TAINT_PREFIXES.iter().find(|p| key.starts_with(*p)) {
                return Err(self.error(
                    span(&t.key),
                    "condition_taint.key",
                    format!(
                        "{key:?} is under {prefix}, owned by Kubernetes components: choose a \
                         prefix of your own (e.g. example.com/kernel-deadlock)"
                    ),
                ));
            }
            if out.iter().any(|o| &*o.key == key) {
                return Err(self.error(
                    span(&t.key),
                    "condition_taint.key",
                    format!("{key:?} is the key of two condition taints"),
                ));
            }
            let value = t.value.as_ref().map_or("", |v| v.get_ref().as_str());
            if !is_label_value(value) {
                return Err(self.error(
                    span(&t.value),
                    "condition_taint.value",
                    format!("{value:?} is not a valid taint value"),
                ));
            }
            let effect_text = self.required(&t.effect, table.span(), "condition_taint.effect")?;
            let effect = match effect_text {
                "NoSchedule" => TaintEffect::NoSchedule,
                "NoExecute" if taint_based_eviction => TaintEffect::NoExecute,
                "NoExecute" => {
                    return Err(self.error(
                        span(&t.effect),
                        "condition_taint.effect",
                        "NoExecute needs taint_based_eviction = true".to_string(),
                    ));
                }
                other => {
                    return Err(self.error(
                        span(&t.effect),
                        "condition_taint.effect",
                        format!("must be \"NoSchedule\" or \"NoExecute\", got {other:?}"),
                    ));
                }
            };
            out.push(ConditionTaint {
                condition: Rc::from(condition),
                status,
                key: Rc::from(key),
                value: Rc::from(value),
                effect,
            });
        }
        Ok(out)
    }
}
