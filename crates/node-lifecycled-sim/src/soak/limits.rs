//! The daemon settings and allowances the soak's invariants are judged with (`invariants`).

use std::time::Duration;

/// The daemon settings and allowances the invariants are judged with.
#[derive(Clone, Debug)]
pub struct Limits {
    pub grace: Duration,
    /// 1 / node_eviction_rate: one node tainted per interval per zone.
    pub taint_interval: Duration,
    pub large_cluster_size_threshold: usize,
    pub unhealthy_zone_threshold: f64,
    /// Renewals this close before an Unknown write are excused (read-to-write window).
    pub evidence_allowance: Duration,
    /// A zone state must have held this long before a taint it forbids counts.
    pub zone_allowance: Duration,
    /// A running eviction may still delete this long after its taint went away.
    pub eviction_retry_window: Duration,
    /// Slack on "toleration ran out": the daemon stamps a taint's `timeAdded` when it decides
    /// and counts its pods' tolerations from it, the checker knows when the write landed, up to
    /// the injected delay later (+ 100 ms for timers and scheduling; a run saw a pod deleted
    /// 2.946 s after its 3 s toleration's taint landed), and `timeAdded` has whole seconds (+ 1 s).
    pub toleration_slack: Duration,
    /// How much earlier than it landed a heartbeat may count in the daemon's clock.
    pub evidence_stamp_slack: Duration,
    /// Added to every liveness deadline.
    pub liveness_allowance: Duration,
    /// The daemons' `node_monitor_period`: upstream's batched pass sees every node within one.
    pub monitor_period: Duration,
    /// Beyond upstream: a kubelet silent longer than this (twice its Lease renew interval)
    /// counts as not ready when a new NoExecute taint is judged against its zone. `None`:
    /// judged as upstream's batch alone (silent nodes whose grace ends within one period).
    pub early_suspects: Option<Duration>,
    /// How much longer than the rule's threshold a kubelet must be silent (at the taint's
    /// landing) to count as surely not ready, beyond the writer's measured CPU wait.
    pub suspect_allowance: Duration,
    /// `decision-late`: how long a daemon may take to be back after a connection reset
    /// (watch backoff + one round trip, or the relist).
    pub reconnect_allowance: Duration,
    /// `decision-late`: scheduling slack on top.
    pub decision_slack: Duration,
    /// How often a live kubelet posts status (it posts at once after a resume).
    pub status_interval: Duration,
    pub handover_gap: Duration,
    /// How long after a pause of fencing lands the daemons may still start a fence step: the
    /// leader reads its Lease each retry period (500 ms), the read and the step's record may
    /// each wait the injected delay, + 1 s of scheduling.
    pub pause_allowance: Duration,
    pub rss_limit_kib: u64,
    /// The daemons' fleet-wide brake, if they run with one (`brake_rule`).
    pub brake: Option<super::brake_rule::BrakeRule>,
}

impl Limits {
    /// The soak's allowances for its daemon settings (`grace`, `rate`) and the largest injected
    /// response delay:
    /// - evidence: the injected delay (the Unknown write can wait that long at the server after
    ///   the live read) + 1.6 s for the daemon's loop and the simulator's threads to be
    ///   scheduled on a busy 2-core machine;
    /// - zone: the same (a taint decided just before the zone state changed may land late);
    /// - eviction retries: 100+200+400+800 ms of backoff + the same 2 s;
    /// - evidence time stamps: 250 ms. The daemon stamps what it reads with the time its loop
    ///   iteration began, so a renewal read later in the same iteration counts from slightly
    ///   before it landed (a soak saw an Unknown 4.947 s after a renewal with a 5 s grace, in a
    ///   debug build on a loaded machine);
    /// - liveness: 10 s beyond the deadline. The daemon is never blind for long: a failed
    ///   watch is retried within a fifth of the grace period (1 s here) and a frozen one is
    ///   dropped at the watch idle timeout (2 s), its backlog read in the 0.5 s settle before
    ///   the held taints and deletions go out; a 500 burst backs the executor off up to 3.2 s;
    ///   the rest is a relist and a busy machine. (With client-go's 30 s backoff cap this had
    ///   to be 35 s, and no dead-node or due-pod obligation was ever judged.)
    /// - suspects (the batched zone view of a new NoExecute taint): the soak's daemons run a
    ///   1 s monitor period and their kubelets renew every 1 s, so the early rule's threshold
    ///   is 2 s. A kubelet counts as surely not ready when it has been silent for the
    ///   threshold + 1 s + the writer's measured CPU wait in the 2 s before the write: the
    ///   daemon decided before its write landed (up to the injected delay, 400 ms, plus its
    ///   run-queue wait, measured, plus 350 ms for the simulator's threads) and saw the last
    ///   heartbeat a little after it landed (the 250 ms evidence stamp slack). Silent for more
    ///   than the threshold − 250 ms but not that long, it may count either way (a node both
    ///   sides of the line can make a zone full or partial: the checker takes every view);
    /// - decision-late: the reconnect is the watch backoff cap (a fifth of the grace period,
    ///   1 s) + 200 ms for one round trip or the relist; the slack 500 ms plus the longer of
    ///   the two daemons' measured CPU waits from 3 s before the pod was due to the deadline.
    ///   Not the 1.6 s of the evidence window: that stood for CPU waits before they were
    ///   measured, and it would hide what this rule is for (after a reset the daemon, never less
    ///   safe than upstream, holds deletions for the new pod watch's first line, 1 s later when the
    ///   server ends it at `timeoutSeconds=1`, + a 0.5 s settle: 1.5 s beyond the reconnect).
    ///   Only connection resets on a healthy server may push the deadline back; any fault that
    ///   stops a daemon (stall, freeze, leader kill, 500 or 429 burst, slow responses, an API
    ///   outage long enough to lose the leader Lease) excuses the obligation (the liveness
    ///   rule `pod-not-evicted` still judges it).
    pub fn for_soak(grace: Duration, rate: f64, max_delay: Duration) -> Limits {
        let scheduling = Duration::from_millis(1600);
        let renew_interval = Duration::from_secs(1);
        Limits {
            grace,
            taint_interval: Duration::from_secs_f64(1.0 / rate.max(1e-3)),
            large_cluster_size_threshold: 50,
            unhealthy_zone_threshold: 0.55,
            evidence_allowance: max_delay + scheduling,
            zone_allowance: max_delay + scheduling,
            eviction_retry_window: Duration::from_millis(1500) + max_delay + scheduling,
            toleration_slack: max_delay + Duration::from_millis(1100),
            liveness_allowance: Duration::from_secs(10),
            monitor_period: Duration::from_secs(1),
            early_suspects: Some(renew_interval * 2),
            suspect_allowance: max_delay + Duration::from_millis(250 + 350),
            reconnect_allowance: grace / 5 + Duration::from_millis(200),
            decision_slack: Duration::from_millis(500),
            evidence_stamp_slack: Duration::from_millis(250),
            status_interval: Duration::from_secs(1),
            handover_gap: Duration::from_millis(250),
            pause_allowance: Duration::from_millis(500) + max_delay * 2 + Duration::from_secs(1),
            rss_limit_kib: 128 * 1024,
            brake: None,
        }
    }
}
