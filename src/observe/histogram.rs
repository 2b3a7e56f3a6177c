//! Histograms for the node health timings upstream exports. The controller is a sans-IO machine
//! and reads no clock, so the shell measures: it times each call that runs the health pass and
//! feeds the duration here.

use std::time::Duration;

/// Prometheus' `ExponentialBuckets(start, factor, count)`: computed by repeated multiplication,
/// as client_golang does, so the `le` labels print the same floats.
pub fn exponential_buckets(start: f64, factor: f64, count: usize) -> Vec<f64> {
    let mut bounds = Vec::with_capacity(count);
    let mut bound = start;
    for _ in 0..count {
        bounds.push(bound);
        bound *= factor;
    }
    bounds
}

/// A cumulative-bucket histogram in seconds (Prometheus `le` semantics).
#[derive(Clone, Debug, PartialEq)]
pub struct Histogram {
    /// Upper bounds in seconds, ascending.
    pub(crate) bounds: Vec<f64>,
    /// `counts[i]`: observations <= `bounds[i]`; `+Inf` is `count`.
    pub(crate) counts: Vec<u64>,
    pub count: u64,
    pub(crate) sum_seconds: f64,
}

impl Histogram {
    pub(crate) fn new(bounds: Vec<f64>) -> Histogram {
        Histogram {
            counts: vec![0; bounds.len()],
            bounds,
            count: 0,
            sum_seconds: 0.0,
        }
    }

    pub fn observe(&mut self, d: Duration) {
        let seconds = d.as_secs_f64();
        for (bound, count) in self.bounds.iter().zip(&mut self.counts) {
            if seconds <= *bound {
                *count += 1;
            }
        }
        self.count += 1;
        self.sum_seconds += seconds;
    }
}

/// `node_lifecycled_api_request_duration_seconds`: client-go's buckets for
/// `rest_client_request_duration_seconds` (5 ms to 60 s), so the two read alike.
pub fn api_request_histogram() -> Histogram {
    Histogram::new(vec![
        0.005, 0.025, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0,
    ])
}

/// `node_collector_update_node_health_duration_seconds` and
/// `node_collector_update_all_nodes_health_duration_seconds`, with upstream's buckets.
#[derive(Clone, Debug, PartialEq)]
pub struct HealthTimings {
    /// One node's health update (1 ms to ~16 s).
    pub(crate) update_node_health: Histogram,
    /// One pass over every node (10 ms to ~2.7 min).
    pub update_all_nodes_health: Histogram,
}

impl Default for HealthTimings {
    fn default() -> HealthTimings {
        HealthTimings {
            update_node_health: Histogram::new(exponential_buckets(0.001, 4.0, 8)),
            update_all_nodes_health: Histogram::new(exponential_buckets(0.01, 4.0, 8)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upstream_exponential_buckets_print_as_client_golang_prints_them() {
        let printed: Vec<String> = exponential_buckets(0.001, 4.0, 8)
            .iter()
            .map(|b| b.to_string())
            .collect();
        assert_eq!(
            printed,
            [
                "0.001", "0.004", "0.016", "0.064", "0.256", "1.024", "4.096", "16.384"
            ]
        );
        let all = exponential_buckets(0.01, 4.0, 8);
        assert_eq!(all.len(), 8);
        assert_eq!(all[0].to_string(), "0.01");
        assert_eq!(all[7].to_string(), "163.84");
    }

    #[test]
    fn observations_land_in_every_bucket_at_or_above_them() {
        let mut h = HealthTimings::default().update_all_nodes_health;
        h.observe(Duration::from_millis(10));
        h.observe(Duration::from_millis(50));
        h.observe(Duration::from_secs(600));
        assert_eq!(h.counts[0], 1, "10 ms is in le=0.01");
        assert_eq!(h.counts[1], 1, "50 ms is above le=0.04");
        assert_eq!(h.counts[2], 2);
        assert_eq!(h.counts[7], 2, "600 s only in +Inf");
        assert_eq!(h.count, 3);
        assert!((h.sum_seconds - 600.06).abs() < 1e-9);
    }
}
