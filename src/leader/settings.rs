//! Leader election's settings, as the config file's `[leader_election]` table fills them in
//! (config parses into this type; leader election never reads the config).

use std::time::Duration;

#[derive(Clone, Debug, PartialEq)]
pub struct LeaderElectionConfig {
    pub enabled: bool,
    pub(crate) namespace: String,
    pub(crate) name: String,
    pub(crate) lease_duration: Duration,
    pub(crate) renew_deadline: Duration,
    pub(crate) retry_period: Duration,
    /// `None`: hostname plus a random suffix, chosen at start (`default_identity`).
    pub(crate) identity: Option<String>,
}

/// client-go's leader election defaults as kube-controller-manager sets them
/// (`--leader-elect-lease-duration` 15s, `--leader-elect-renew-deadline` 10s,
/// `--leader-elect-retry-period` 2s), in kube-system.
impl Default for LeaderElectionConfig {
    fn default() -> LeaderElectionConfig {
        LeaderElectionConfig {
            enabled: true,
            namespace: "kube-system".to_string(),
            name: "node-lifecycled".to_string(),
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
            identity: None,
        }
    }
}

impl LeaderElectionConfig {
    /// The configured identity, or upstream's shape of default: `<hostname>_<random>`, so two
    /// instances on one host (or a restart racing its predecessor's lease) never share one.
    pub(crate) fn identity_or_default(&self) -> String {
        self.identity.clone().unwrap_or_else(default_identity)
    }
}

fn default_identity() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "node-lifecycled".to_string());
    let mut random = [0u8; 6];
    let from_urandom = std::fs::File::open("/dev/urandom")
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut random))
        .is_ok();
    if !from_urandom {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0)
            ^ u128::from(std::process::id());
        random.copy_from_slice(&nanos.to_le_bytes()[..6]);
    }
    let suffix: String = random.iter().map(|b| format!("{b:02x}")).collect();
    format!("{host}_{suffix}")
}
