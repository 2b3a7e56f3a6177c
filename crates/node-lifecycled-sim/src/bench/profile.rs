//! The bench's feature profiles. `plain`: the daemon's defaults (the figures of the cost curve).
//! `every-feature`: everything that has a per-node or per-zone cost at once, so the gap between
//! the two is what the features cost at scale:
//! - disruption domains by a site label (sites of [`SITE_SIZE`] nodes), pods kept Ready while a
//!   site is disrupted (`unless-disrupted`), dark sites held (`full_disruption = "hold"`);
//! - the brake, fleet-wide and per pool (a pool per zone, each with its own timing:
//!   `default_toleration_seconds`);
//! - OpenYurt autonomy annotations on a tenth of the nodes (not the detection phase's victims,
//!   whose pods autonomy would keep);
//! - two custom condition taints (one NoSchedule, one NoExecute);
//! - fencing armed on every node, with an `after` longer than any bench phase (every node's
//!   outage is followed; no command runs). The daemon's `dry_run` would stop every write the
//!   bench measures, so fencing is measured armed instead.

use serde_json::json;

use crate::population::zone_of;
use crate::{Cluster, Resource};

/// Nodes per site of the every-feature profile: a site (a rack row, an edge location) of a few
/// hundred nodes.
pub const SITE_SIZE: usize = 500;
pub const SITE_LABEL: &str = "example.com/site";
/// A tenth of the nodes carry it.
pub const AUTONOMY_ANNOTATION: &str = "node.openyurt.io/autonomy-duration";

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Profile {
    #[default]
    Plain,
    EveryFeature,
}

impl Profile {
    pub fn parse(s: &str) -> Option<Profile> {
        match s {
            "plain" => Some(Profile::Plain),
            "every-feature" => Some(Profile::EveryFeature),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Profile::Plain => "plain",
            Profile::EveryFeature => "every-feature",
        }
    }

    /// The daemon's top-level keys and its tables for the profile (both empty for `plain`).
    pub fn config(self, zones: usize) -> (String, String) {
        if self == Profile::Plain {
            return (String::new(), String::new());
        }
        let top = format!(
            "disruption_domain = \"{SITE_LABEL}\"\n\
             mark_pods_not_ready = \"unless-disrupted\"\n\
             full_disruption = \"hold\"\n\
             hold_max = \"30m\"\n\
             max_unhealthy = \"10%\"\n\
             disruption_cooldown = \"2s\"\n\
             autonomy = true\n"
        );
        let mut tables = String::new();
        for z in 1..=zones {
            tables.push_str(&format!(
                "[[pool]]\n\
                 name = \"zone-z{z}\"\n\
                 match_labels = {{ \"topology.kubernetes.io/zone\" = \"z{z}\" }}\n\
                 max_unhealthy = \"20%\"\n\
                 default_toleration_seconds = {}\n\n",
                60 * z
            ));
        }
        tables.push_str(
            "[[condition_taint]]\n\
             condition = \"KernelDeadlock\"\n\
             status = \"True\"\n\
             key = \"example.com/kernel-deadlock\"\n\
             effect = \"NoExecute\"\n\n\
             [[condition_taint]]\n\
             condition = \"ReadonlyFilesystem\"\n\
             status = \"True\"\n\
             key = \"example.com/readonly-filesystem\"\n\
             effect = \"NoSchedule\"\n\n\
             [fencing]\n\
             enabled = true\n\
             command = [\"/bin/true\"]\n\
             after = \"24h\"\n",
        );
        (top, tables)
    }

    /// Labels and annotates the nodes as the profile needs (nothing for `plain`).
    pub fn prepare(self, cluster: &Cluster, nodes: &[String]) -> Result<(), String> {
        if self == Profile::Plain {
            return Ok(());
        }
        for (i, node) in nodes.iter().enumerate() {
            let site = format!("{}-s{}", zone_of(node), i / SITE_SIZE);
            // Not the detection phase's victims (`pick_victims` spreads them evenly, at
            // multiples of a tenth of the fleet at most): autonomy would rightly keep their pods.
            let autonomous = i % 10 == 3;
            cluster
                .update(Resource::Nodes, None, node, |v| {
                    let meta = &mut v["metadata"];
                    meta["labels"][SITE_LABEL] = json!(site);
                    if autonomous {
                        meta["annotations"][AUTONOMY_ANNOTATION] = json!("1h");
                    }
                })
                .map_err(|e| format!("cannot label node {node}: {}", e.message))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_every_feature_config_is_valid_and_plain_adds_nothing() {
        assert_eq!(Profile::Plain.config(3), (String::new(), String::new()));
        let (top, tables) = Profile::EveryFeature.config(3);
        let text = format!(
            "{top}[api]\nkubeconfig = \"/dev/null\"\n[leader_election]\nenabled = false\n{tables}"
        );
        let config =
            node_lifecycled::config::Config::from_str(&text, std::path::Path::new("bench.toml"));
        assert!(config.is_ok(), "{config:?}\n{text}");
        assert_eq!(Profile::parse("every-feature"), Some(Profile::EveryFeature));
        assert_eq!(Profile::parse("all"), None);
    }
}
