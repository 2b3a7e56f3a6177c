//! Where the unary calls connect: the API server's address, without a thread per call.
//!
//! ureq resolves the host before every request, pooled connection or not, and its default
//! resolver, whenever the call has a timeout (ours always do), runs the lookup on a new thread
//! so it can give up in time. Profiling the daemon's start-up event POSTs showed that thread —
//! created, run and joined per call, even for an IP literal — among the larger costs
//! of a call. An IP literal (the in-cluster service address, most kubeconfigs) needs no lookup
//! at all; a host name is looked up as ureq would, bounded by the call's timeout, and the answer
//! kept for a while: it only matters when a new connection is opened.

use std::net::{IpAddr, SocketAddr};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use ureq::Error;
use ureq::config::Config;
use ureq::http::Uri;
use ureq::unversioned::resolver::{DefaultResolver, ResolvedSocketAddrs, Resolver};
use ureq::unversioned::transport::NextTimeout;

/// How long a host name's addresses are used before it is looked up again.
const NAME_TTL: Duration = Duration::from_secs(30);

#[derive(Debug, Default)]
pub(crate) struct ApiServerResolver {
    lookups: DefaultResolver,
    /// The last host name looked up (`host:port`), when, and its addresses.
    cached: Mutex<Option<(String, Instant, ResolvedSocketAddrs)>>,
    /// Lookups made (for the tests).
    looked_up: AtomicU64,
}

impl ApiServerResolver {
    #[cfg(test)]
    fn lookups_made(&self) -> u64 {
        self.looked_up.load(Ordering::Relaxed)
    }
}

impl Resolver for ApiServerResolver {
    fn resolve(
        &self,
        uri: &Uri,
        config: &Config,
        timeout: NextTimeout,
    ) -> Result<ResolvedSocketAddrs, Error> {
        let host = uri.host().unwrap_or("");
        let port = uri
            .port_u16()
            .unwrap_or(if uri.scheme_str() == Some("http") {
                80
            } else {
                443
            });
        if let Ok(ip) = host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<IpAddr>()
        {
            let mut addrs = self.empty();
            addrs.push(SocketAddr::new(ip, port));
            return Ok(addrs);
        }
        let key = format!("{host}:{port}");
        if let Ok(cached) = self.cached.lock() {
            if let Some((name, at, addrs)) = cached.as_ref() {
                if *name == key && at.elapsed() < NAME_TTL {
                    return Ok(addrs.clone());
                }
            }
        }
        self.looked_up.fetch_add(1, Ordering::Relaxed);
        let addrs = self.lookups.resolve(uri, config, timeout)?;
        if let Ok(mut cached) = self.cached.lock() {
            *cached = Some((key, Instant::now(), addrs.clone()));
        }
        Ok(addrs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ureq::unversioned::transport::time::Duration as UreqDuration;

    fn resolve(r: &ApiServerResolver, url: &str) -> Vec<SocketAddr> {
        let uri: Uri = url.parse().unwrap();
        let timeout = NextTimeout {
            after: UreqDuration::from_secs(5),
            reason: ureq::Timeout::Resolve,
            ..NextTimeout::default()
        };
        r.resolve(&uri, &Config::default(), timeout)
            .unwrap()
            .iter()
            .copied()
            .collect()
    }

    #[test]
    fn an_ip_literal_is_the_address_without_a_lookup() {
        let r = ApiServerResolver::default();
        assert_eq!(
            resolve(&r, "https://10.96.0.1:443/api/v1/nodes"),
            ["10.96.0.1:443".parse().unwrap()]
        );
        assert_eq!(
            resolve(&r, "https://[fd00::1]:6443/version"),
            ["[fd00::1]:6443".parse().unwrap()]
        );
        assert_eq!(
            resolve(&r, "http://127.0.0.1/x"),
            ["127.0.0.1:80".parse().unwrap()]
        );
        assert_eq!(r.lookups_made(), 0);
    }

    #[test]
    fn a_host_name_is_looked_up_once_for_many_calls() {
        let r = ApiServerResolver::default();
        let first = resolve(&r, "https://localhost:6443/api");
        assert!(!first.is_empty() && first.iter().all(|a| a.port() == 6443));
        for _ in 0..10 {
            assert_eq!(resolve(&r, "https://localhost:6443/apis"), first);
        }
        assert_eq!(r.lookups_made(), 1);
        // Another name is looked up.
        resolve(&r, "https://localhost:7443/api");
        assert_eq!(r.lookups_made(), 2);
    }
}
