//! Validation of the `[api]` and `[leader_election]` tables: the source of `[api]`, the kinds
//! only `[api]` has, and the rules between keys (their tables are in `keys.rs`).

use super::kinds::{Kind, PerSecond};
use super::validate::*;
use super::*;
use crate::kube::decode::proto::ContentType;

impl Validator<'_> {
    pub(super) fn api(&self, raw: &RawApi) -> Result<ApiConfig, ConfigError> {
        let sources: Vec<(&str, Range<usize>)> = [
            ("api.kubeconfig", raw.kubeconfig.as_ref().map(Spanned::span)),
            (
                "api.in_cluster",
                raw.in_cluster
                    .as_ref()
                    .filter(|v| *v.get_ref())
                    .map(Spanned::span),
            ),
            ("api.server", raw.server.as_ref().map(Spanned::span)),
        ]
        .into_iter()
        .filter_map(|(k, s)| s.map(|s| (k, s)))
        .collect();
        if let [(first, first_span), (second, second_span), ..] = sources.as_slice() {
            return Err(self.error(
                Some(second_span.clone()),
                second,
                format!(
                    "conflicts with {first} (line {}): set only one of api.kubeconfig, api.in_cluster, api.server",
                    line_of(self.text, first_span.start)
                ),
            ));
        }
        let path = |field: &Field<String>, key: &str| -> Result<Option<PathBuf>, ConfigError> {
            match field {
                None => Ok(None),
                Some(v) if v.get_ref().is_empty() => {
                    Err(self.error(Some(v.span()), key, "must not be empty".to_string()))
                }
                Some(v) => Ok(Some(PathBuf::from(v.get_ref()))),
            }
        };
        let only_with_server = [
            (&raw.certificate_authority, "api.certificate_authority"),
            (&raw.client_certificate, "api.client_certificate"),
            (&raw.client_key, "api.client_key"),
            (&raw.token_file, "api.token_file"),
        ];
        let source = match &raw.server {
            Some(server) => {
                if let Some(ctx) = &raw.context {
                    return Err(self.error(
                        Some(ctx.span()),
                        "api.context",
                        "only applies to api.kubeconfig, not with api.server".to_string(),
                    ));
                }
                self.server_url(server)?;
                let client_certificate = path(&raw.client_certificate, "api.client_certificate")?;
                let client_key = path(&raw.client_key, "api.client_key")?;
                if client_certificate.is_some() != client_key.is_some() {
                    let (span, key) = pick(
                        (&raw.client_certificate, "api.client_certificate"),
                        (&raw.client_key, "api.client_key"),
                    );
                    return Err(self.error(
                        span,
                        key,
                        "api.client_certificate and api.client_key must be set together"
                            .to_string(),
                    ));
                }
                ApiSource::Explicit {
                    server: server.get_ref().clone(),
                    certificate_authority: path(
                        &raw.certificate_authority,
                        "api.certificate_authority",
                    )?,
                    client_certificate,
                    client_key,
                    token_file: path(&raw.token_file, "api.token_file")?,
                }
            }
            None => {
                if let Some((v, key)) = only_with_server
                    .iter()
                    .find_map(|(f, k)| f.as_ref().map(|v| (v, *k)))
                {
                    return Err(self.error(
                        Some(v.span()),
                        key,
                        "only applies with api.server".to_string(),
                    ));
                }
                if raw.in_cluster.as_ref().is_some_and(|v| *v.get_ref()) {
                    if let Some(ctx) = &raw.context {
                        return Err(self.error(
                            Some(ctx.span()),
                            "api.context",
                            "only applies to a kubeconfig, not with api.in_cluster".to_string(),
                        ));
                    }
                    ApiSource::InCluster
                } else {
                    let context = match &raw.context {
                        Some(v) if v.get_ref().is_empty() => {
                            return Err(self.error(
                                Some(v.span()),
                                "api.context",
                                "must not be empty (leave it out for the kubeconfig's current-context)"
                                    .to_string(),
                            ));
                        }
                        other => other.as_ref().map(|v| v.get_ref().clone()),
                    };
                    ApiSource::Kubeconfig {
                        path: path(&raw.kubeconfig, "api.kubeconfig")?
                            .unwrap_or_else(|| PathBuf::from(DEFAULT_KUBECONFIG)),
                        context,
                    }
                }
            }
        };
        let mut api = ApiConfig {
            source,
            ..ApiConfig::default()
        };
        self.api_keys(raw, &mut api)?;
        if api.allow_insecure_skip_tls_verify
            && let Some(ca) = &raw.certificate_authority
        {
            // client-go refuses the same combination: a CA that is then not checked is a lie.
            return Err(self.error(
                Some(ca.span()),
                "api.certificate_authority",
                "cannot be combined with api.allow_insecure_skip_tls_verify".to_string(),
            ));
        }
        Ok(api)
    }

    pub(super) fn server_url(&self, v: &Spanned<String>) -> Result<(), ConfigError> {
        let url = v.get_ref();
        let rest = url
            .strip_prefix("https://")
            .or_else(|| url.strip_prefix("http://"));
        match rest {
            Some(r) if !r.is_empty() && !r.starts_with('/') => Ok(()),
            _ => Err(self.error(
                Some(v.span()),
                "api.server",
                format!("must be an https:// (or loopback http://) URL with a host, got {url:?}"),
            )),
        }
    }

    pub(super) fn leader_election(
        &self,
        raw: &RawLeaderElection,
    ) -> Result<LeaderElectionConfig, ConfigError> {
        let mut le = LeaderElectionConfig::default();
        self.leader_election_keys(raw, &mut le)?;
        let (lease_duration, renew_deadline, retry_period) =
            (le.lease_duration, le.renew_deadline, le.retry_period);
        // client-go's leaderelection.NewLeaderElector enforces the same ordering.
        if renew_deadline >= lease_duration {
            let (span, key) = pick(
                (&raw.renew_deadline, "leader_election.renew_deadline"),
                (&raw.lease_duration, "leader_election.lease_duration"),
            );
            return Err(self.error(
                span,
                key,
                format!(
                    "renew_deadline ({}) must be shorter than lease_duration ({})",
                    format_duration(renew_deadline),
                    format_duration(lease_duration)
                ),
            ));
        }
        if retry_period >= renew_deadline {
            let (span, key) = pick(
                (&raw.retry_period, "leader_election.retry_period"),
                (&raw.renew_deadline, "leader_election.renew_deadline"),
            );
            return Err(self.error(
                span,
                key,
                format!(
                    "retry_period ({}) must be shorter than renew_deadline ({})",
                    format_duration(retry_period),
                    format_duration(renew_deadline)
                ),
            ));
        }
        Ok(le)
    }
}

/// `api.qps`: a rate above zero.
pub(super) struct Qps;
/// `api.burst`: 1 to 1,000,000 calls.
pub(super) struct Burst;
/// `api.content_type`: `protobuf` or `json`.
pub(super) struct ContentTypeText;

impl Kind for Qps {
    type Raw = f64;
    type Value = Rate;
    fn check(v: &Validator<'_>, f: &Field<f64>, key: &str) -> Result<Option<Rate>, ConfigError> {
        let Some(qps) = PerSecond::check(v, f, key)? else {
            return Ok(None);
        };
        if qps.is_never() {
            return Err(v.error(
                f.as_ref().map(Spanned::span),
                key,
                format!("must be greater than 0, got {}", qps.as_f64()),
            ));
        }
        Ok(Some(qps))
    }
    fn render(r: &Rate) -> Option<String> {
        PerSecond::render(r)
    }
}

impl Kind for Burst {
    type Raw = i64;
    type Value = u32;
    fn check(v: &Validator<'_>, f: &Field<i64>, key: &str) -> Result<Option<u32>, ConfigError> {
        let Some(x) = f else { return Ok(None) };
        match u32::try_from(*x.get_ref()) {
            Ok(b) if (1..=1_000_000).contains(&b) => Ok(Some(b)),
            _ => Err(v.error(
                Some(x.span()),
                key,
                format!("must be in 1..=1000000, got {}", x.get_ref()),
            )),
        }
    }
    fn render(b: &u32) -> Option<String> {
        Some(b.to_string())
    }
}

impl Kind for ContentTypeText {
    type Raw = String;
    type Value = ContentType;
    fn check(
        v: &Validator<'_>,
        f: &Field<String>,
        key: &str,
    ) -> Result<Option<ContentType>, ConfigError> {
        let Some(x) = f else { return Ok(None) };
        match x.get_ref().as_str() {
            "protobuf" => Ok(Some(ContentType::Protobuf)),
            "json" => Ok(Some(ContentType::Json)),
            other => Err(v.error(
                Some(x.span()),
                key,
                format!("must be \"protobuf\" or \"json\", got {other:?}"),
            )),
        }
    }
    fn render(c: &ContentType) -> Option<String> {
        Some(super::render::string(c.as_str()))
    }
}
