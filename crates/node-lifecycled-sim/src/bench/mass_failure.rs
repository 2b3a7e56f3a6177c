//! `--mass-failure`: the kubelets of the first zone (a third of the fleet at 3 zones) stop at
//! once. Measures when the last of its nodes is marked Unknown and how fast its pods are marked
//! NotReady (every pod of the zone when the window allows, else the rate and the projected end),
//! and counts every write per node and per pod, so that none is lost or repeated.
//!
//! Upstream marks a dead node's pods in its monitor pass; its serial pass left an 87 s tail at
//! 5,000 nodes (kubernetes#114295), which is why it now runs eight workers. Both are bounded by
//! the client's qps (kube-controller-manager's `--kube-api-qps`, 20 by default) as ours is.

use std::collections::HashMap;

use super::*;

/// What the phase measured.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct MassFailure {
    /// Nodes whose kubelets stopped, and their pods (the DaemonSet's included).
    pub nodes: usize,
    pub pods: usize,
    /// From the stop to the last node marked Unknown; `None`: not all were in the window.
    pub last_unknown: Option<Duration>,
    pub unknown: usize,
    /// Nodes marked Unknown per second from the first to the last.
    pub unknown_per_s: f64,
    /// Pods marked NotReady in the window, and from the stop to the last of them.
    pub pods_marked: usize,
    pub last_pod_marked: Option<Duration>,
    /// Pods marked per second from the first mark to the last.
    pub pods_per_s: f64,
    /// Nodes written Unknown twice or more, and pods marked twice or more.
    pub repeated_nodes: usize,
    pub repeated_pods: usize,
    /// The daemon's writes answered 409 (with no other writer: a conflict with itself).
    pub conflicts: usize,
    /// The phase's wall time.
    pub window: Duration,
    /// The daemon's CPU over the window, and per renewal of the kubelets still alive (with
    /// the zone's brakes and holds as the profile makes them).
    pub cpu_percent: f64,
    pub us_per_renewal: f64,
}

impl MassFailure {
    /// The line the report prints.
    pub fn line(&self) -> String {
        let secs = |d: Option<Duration>| {
            d.map_or_else(|| "-".into(), |d| format!("{:.1}s", d.as_secs_f64()))
        };
        let nodes_projected = if self.unknown < self.nodes && self.unknown_per_s > 0.0 {
            format!(
                " (at {:.1}/s all {} in {:.0}s)",
                self.unknown_per_s,
                self.nodes,
                self.nodes as f64 / self.unknown_per_s
            )
        } else {
            String::new()
        };
        let projected = if self.pods_marked < self.pods && self.pods_per_s > 0.0 {
            format!(
                " (at that rate all {} in {:.0}s)",
                self.pods,
                self.pods as f64 / self.pods_per_s
            )
        } else {
            String::new()
        };
        format!(
            "mass failure: {} nodes and {} pods dark; {} marked Unknown, the last after \
             {}{nodes_projected}; {} \
             pods marked NotReady, the last after {}, {:.0} pods/s{projected}; repeated: {} \
             nodes, {} pods; {} answered 409; daemon CPU {:.2} % of one core ({:.1} µs per \
             renewal of the others) over {:.0}s",
            self.nodes,
            self.pods,
            self.unknown,
            secs(self.last_unknown),
            self.pods_marked,
            secs(self.last_pod_marked),
            self.pods_per_s,
            self.repeated_nodes,
            self.repeated_pods,
            self.conflicts,
            self.cpu_percent,
            self.us_per_renewal,
            self.window.as_secs_f64()
        )
    }
}

impl SizeRun<'_> {
    pub(super) fn mass_failure(&mut self, daemon: &mut DaemonChild) -> Result<(), String> {
        let zone = zone_of(&self.nodes[0]);
        let dark: Vec<String> = self
            .nodes
            .iter()
            .filter(|n| n.as_str() != SINK_NODE && zone_of(n) == zone)
            .cloned()
            .collect();
        let index: HashMap<&str, usize> = dark
            .iter()
            .enumerate()
            .map(|(i, n)| (n.as_str(), i))
            .collect();
        let pods: HashMap<String, usize> = self
            .pods
            .iter()
            .filter(|p| index.contains_key(p.node.as_str()))
            .map(|p| (p.key(), 0))
            .collect();
        let mut pod_marks = pods;
        let written_before = self.sim.writes().len();
        let hz = clock_ticks_per_second() as f64;
        let (r0, k0) = (read(daemon)?, self.kubelets.stats());
        let stopped = self.cluster.now();
        let wall = Instant::now();
        for node in &dark {
            self.kubelets
                .stop_heartbeat(node)
                .map_err(|e| e.to_string())?;
        }
        self.say(format!(
            "mass failure: the kubelets of {} nodes ({}) stopped with {} pods; waiting up to {}",
            dark.len(),
            zone,
            pod_marks.len(),
            format_duration(self.options.mass_failure_window)
        ));
        let mut unknown: Vec<u32> = vec![0; dark.len()];
        let (mut first_unknown, mut last_unknown): (Option<Time>, Option<Time>) = (None, None);
        let (mut first_pod, mut last_pod): (Option<Time>, Option<Time>) = (None, None);
        let mut marked = 0usize;
        let mut reader = FactReader::new(Some(&self.token), Duration::ZERO);
        let mut seq = self.writes_end();
        while wall.elapsed() < self.options.mass_failure_window
            && (marked < pod_marks.len() || unknown.contains(&0))
        {
            daemon.exited_early()?;
            std::thread::sleep(Duration::from_millis(200));
            for record in &self.writes_since(&mut seq) {
                for fact in reader.read(std::slice::from_ref(record)) {
                    match fact.kind {
                        FactKind::NodeReady { node, status, .. } if status == "Unknown" => {
                            if let Some(&i) = index.get(node.as_str()) {
                                unknown[i] += 1;
                                first_unknown.get_or_insert(record.wall);
                                last_unknown = Some(record.wall);
                            }
                        }
                        FactKind::PodNotReady { pod } => {
                            if let Some(n) = pod_marks.get_mut(&pod) {
                                *n += 1;
                                if *n == 1 {
                                    marked += 1;
                                }
                                first_pod.get_or_insert(record.wall);
                                last_pod = Some(record.wall);
                            }
                        }
                        _ => {}
                    }
                }
            }
        }
        let window = wall.elapsed();
        let (r1, k1) = (read(daemon)?, self.kubelets.stats());
        let cpu_percent = cpu_percent(r0, r1, hz, window);
        let renewals = (k1.lease_renewals - k0.lease_renewals) as f64 / window.as_secs_f64();
        let writes = self.sim.writes();
        let conflicts = writes[written_before.min(writes.len())..]
            .iter()
            .filter(|w| w.identity.token.as_deref() == Some(self.token.as_str()))
            .filter(|w| w.code == 409)
            .count();
        let span = match (first_pod, last_pod) {
            (Some(a), Some(b)) => b.since(a).as_secs_f64(),
            _ => 0.0,
        };
        let unknown_count = unknown.iter().filter(|n| **n > 0).count();
        let unknown_span = match (first_unknown, last_unknown) {
            (Some(a), Some(b)) => b.since(a).as_secs_f64(),
            _ => 0.0,
        };
        let result = MassFailure {
            nodes: dark.len(),
            unknown_per_s: if unknown_span > 0.0 {
                unknown_count as f64 / unknown_span
            } else {
                0.0
            },
            pods: pod_marks.len(),
            unknown: unknown_count,
            last_unknown: (!unknown.contains(&0))
                .then_some(last_unknown)
                .flatten()
                .map(|t| t.since(stopped)),
            pods_marked: marked,
            last_pod_marked: (marked == pod_marks.len())
                .then_some(last_pod)
                .flatten()
                .map(|t| t.since(stopped)),
            pods_per_s: if span > 0.0 {
                marked as f64 / span
            } else {
                0.0
            },
            repeated_nodes: unknown.iter().filter(|n| **n > 1).count(),
            repeated_pods: pod_marks.values().filter(|n| **n > 1).count(),
            conflicts,
            window,
            cpu_percent,
            us_per_renewal: cpu_percent / 100.0 * 1e6 / renewals.max(1e-9),
        };
        self.say(result.line());
        self.report.mass_failure = Some(result);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_window_too_short_for_every_pod_projects_the_end_at_the_rate_seen() {
        let m = MassFailure {
            nodes: 5000,
            pods: 150_000,
            last_unknown: Some(Duration::from_millis(61_500)),
            unknown: 5000,
            unknown_per_s: 81.3,
            pods_marked: 2400,
            last_pod_marked: None,
            pods_per_s: 20.0,
            window: Duration::from_secs(120),
            ..MassFailure::default()
        };
        let line = m.line();
        assert!(
            line.contains("5000 marked Unknown, the last after 61.5s;"),
            "{line}"
        );
        let partial = MassFailure {
            unknown: 2400,
            unknown_per_s: 20.0,
            last_unknown: None,
            ..m.clone()
        };
        assert!(
            partial
                .line()
                .contains("the last after - (at 20.0/s all 5000 in 250s)"),
            "{}",
            partial.line()
        );
        assert!(
            line.contains("2400 pods marked NotReady, the last after -"),
            "{line}"
        );
        assert!(
            line.contains("(at that rate all 150000 in 7500s)"),
            "{line}"
        );
        assert!(line.contains("repeated: 0 nodes, 0 pods"), "{line}");
        let done = MassFailure {
            pods_marked: 150_000,
            last_pod_marked: Some(Duration::from_secs(90)),
            ..m
        };
        assert!(!done.line().contains("at that rate"), "{}", done.line());
    }
}
