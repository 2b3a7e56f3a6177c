//! The controllers' CPU cost without I/O: `Controllers` with N healthy nodes (30 pods each, a
//! Lease each) driven on the virtual clock as kubelets drive a cluster (every Lease renewed every 10 s, every node status patched every 60 s, spread evenly),
//! through several monitor periods. Prints ns per Lease renewal, per node status event and per
//! node per monitor pass, and the allocations of each.
//!
//! ```sh
//! cargo run --release --example controller_cost -- --nodes 5000
//! cargo run --release --example controller_cost -- --nodes 2000 --minutes 3
//! ```
//!
//! The objects are decoded before they are timed: only `Controllers::handle` is measured.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use node_lifecycled::controller::{Action, Controllers, Input, Settings};
use node_lifecycled::kube::decode::{DecodeContext, decode_object};
use node_lifecycled::model::{Kind, Lease, Node, Pod};
use node_lifecycled::time::Time;
use node_lifecycled_sim::testing::{CountingAlloc, allocations_made as allocations};

#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc::new();

const PODS_PER_NODE: usize = 30;
const LEASE_PERIOD: Duration = Duration::from_secs(10);
const STATUS_PERIOD: Duration = Duration::from_secs(60);
const ZONES: usize = 3;

struct Args {
    nodes: usize,
    minutes: u64,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        nodes: 5000,
        minutes: 2,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--nodes" => args.nodes = value()?.parse().map_err(|e| format!("--nodes: {e}"))?,
            "--minutes" => {
                args.minutes = value()?.parse().map_err(|e| format!("--minutes: {e}"))?;
            }
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    if args.nodes == 0 || args.minutes == 0 {
        return Err("--nodes and --minutes must be positive".to_string());
    }
    Ok(args)
}

fn node_name(i: usize) -> String {
    format!("node-{i:05}")
}

fn node_json(i: usize, rv: u64, heartbeat: Time, t0: Time) -> String {
    let name = node_name(i);
    let zone = i % ZONES;
    let hb = heartbeat.to_rfc3339();
    let since = t0.to_rfc3339();
    let condition = |kind: &str, status: &str| {
        format!(
            r#"{{"type":"{kind}","status":"{status}","lastHeartbeatTime":"{hb}","lastTransitionTime":"{since}"}}"#
        )
    };
    format!(
        r#"{{"metadata":{{"name":"{name}","uid":"uid-{name}","resourceVersion":"{rv}","creationTimestamp":"{since}","labels":{{"topology.kubernetes.io/zone":"z{zone}","topology.kubernetes.io/region":"r","kubernetes.io/os":"linux","beta.kubernetes.io/os":"linux","kubernetes.io/arch":"amd64","beta.kubernetes.io/arch":"amd64"}}}},"spec":{{}},"status":{{"conditions":[{},{},{},{}]}}}}"#,
        condition("Ready", "True"),
        condition("MemoryPressure", "False"),
        condition("DiskPressure", "False"),
        condition("PIDPressure", "False"),
    )
}

fn lease_json(i: usize, rv: u64, renew: Time) -> String {
    let name = node_name(i);
    format!(
        r#"{{"metadata":{{"name":"{name}","namespace":"kube-node-lease","resourceVersion":"{rv}"}},"spec":{{"holderIdentity":"{name}","leaseDurationSeconds":40,"renewTime":"{}"}}}}"#,
        renew.to_rfc3339_micros()
    )
}

fn pod_json(node: usize, k: usize, rv: u64) -> String {
    let name = node_name(node);
    format!(
        r#"{{"metadata":{{"name":"p-{name}-{k}","namespace":"ns{}","uid":"u-{name}-{k}","resourceVersion":"{rv}"}},"spec":{{"nodeName":"{name}"}},"status":{{"conditions":[{{"type":"Ready","status":"True"}}]}}}}"#,
        k % 10
    )
}

/// What the kubelets send, one event at a time.
enum Beat {
    Lease(usize),
    Status(usize),
}

#[derive(Default)]
struct Cost {
    calls: u64,
    nanos: u128,
    allocations: u64,
    actions: u64,
}

impl Cost {
    fn per_call(&self) -> (f64, f64) {
        let n = self.calls.max(1) as f64;
        (self.nanos as f64 / n, self.allocations as f64 / n)
    }
}

struct Bench {
    ctl: Controllers,
    ctx: DecodeContext,
    rv: u64,
}

impl Bench {
    fn next_rv(&mut self) -> u64 {
        self.rv += 1;
        self.rv
    }

    fn feed(&mut self, input: Input, now: Time, cost: &mut Cost) {
        let (a0, t0) = (allocations(), Instant::now());
        let actions = self.ctl.handle(input, now);
        let decisions = self.ctl.take_decisions();
        cost.nanos += t0.elapsed().as_nanos();
        cost.allocations += allocations() - a0;
        cost.calls += 1;
        cost.actions += actions
            .iter()
            .filter(|a| !matches!(a, Action::RecordEvent(_)))
            .count() as u64;
        drop((actions, decisions));
    }

    /// Fires every deadline due up to `until`, each at its own instant.
    fn run_until(&mut self, until: Time, cost: &mut Cost) {
        while let Some(at) = self.ctl.next_deadline().filter(|at| *at <= until) {
            self.feed(Input::Tick, at, cost);
        }
    }
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(args) => args,
        Err(e) => {
            eprintln!("controller_cost: {e}\nusage: controller_cost [--nodes N] [--minutes M]");
            return ExitCode::from(2);
        }
    };
    let n = args.nodes;
    let t0 = Time::from_unix_millis(1_700_000_000_000);
    let settings = Settings::default();
    let period = settings.node_monitor_period;
    let mut b = Bench {
        ctl: Controllers::new(settings, t0),
        ctx: DecodeContext::new(),
        rv: 1,
    };
    let mut setup = Cost::default();
    let started = Instant::now();
    for kind in [Kind::Nodes, Kind::Leases, Kind::Pods] {
        b.feed(Input::FullStateBegin(kind), t0, &mut setup);
        for i in 0..n {
            match kind {
                Kind::Nodes => {
                    let rv = b.next_rv();
                    let node: Node = decode_object(node_json(i, rv, t0, t0).as_bytes(), &mut b.ctx)
                        .expect("node decodes");
                    b.feed(Input::NodeUpsert(node), t0, &mut setup);
                }
                Kind::Leases => {
                    let rv = b.next_rv();
                    let lease: Lease = decode_object(lease_json(i, rv, t0).as_bytes(), &mut b.ctx)
                        .expect("lease decodes");
                    b.feed(Input::LeaseUpsert(lease), t0, &mut setup);
                }
                Kind::Pods => {
                    for k in 0..PODS_PER_NODE {
                        let rv = b.next_rv();
                        let pod: Pod = decode_object(pod_json(i, k, rv).as_bytes(), &mut b.ctx)
                            .expect("pod decodes");
                        b.feed(Input::PodUpsert(pod), t0, &mut setup);
                    }
                }
            }
        }
        b.feed(Input::FullStateEnd(kind), t0, &mut setup);
    }
    b.feed(
        Input::InformersWatching(Some(std::time::Duration::ZERO)),
        t0,
        &mut setup,
    );
    b.feed(Input::InitialSyncDone, t0, &mut setup);
    println!(
        "setup: {n} nodes, {} pods, {} Leases in {:.2} s (decode included)",
        n * PODS_PER_NODE,
        n,
        started.elapsed().as_secs_f64()
    );

    // The kubelets' schedule: node i renews at i/n of the Lease period and posts its status at
    // i/n of the status period, from t0 on.
    let mut beats: Vec<(Time, Beat)> = Vec::new();
    let total = Duration::from_secs(60 * args.minutes);
    let end = t0 + total;
    for i in 0..n {
        let offset = |p: Duration| p.mul_f64(i as f64 / n as f64) + Duration::from_millis(1);
        let mut at = t0 + offset(LEASE_PERIOD);
        while at < end {
            beats.push((at, Beat::Lease(i)));
            at += LEASE_PERIOD;
        }
        let mut at = t0 + offset(STATUS_PERIOD);
        while at < end {
            beats.push((at, Beat::Status(i)));
            at += STATUS_PERIOD;
        }
    }
    beats.sort_by_key(|(at, _)| *at);

    let (mut renewals, mut statuses, mut ticks) =
        (Cost::default(), Cost::default(), Cost::default());
    for (at, beat) in beats {
        b.run_until(at, &mut ticks);
        match beat {
            Beat::Lease(i) => {
                let rv = b.next_rv();
                let lease: Lease = decode_object(lease_json(i, rv, at).as_bytes(), &mut b.ctx)
                    .expect("lease decodes");
                b.feed(Input::LeaseUpsert(lease), at, &mut renewals);
            }
            Beat::Status(i) => {
                let rv = b.next_rv();
                let node: Node = decode_object(node_json(i, rv, at, t0).as_bytes(), &mut b.ctx)
                    .expect("node decodes");
                b.feed(Input::NodeUpsert(node), at, &mut statuses);
            }
        }
    }
    b.run_until(end, &mut ticks);

    let passes = (total.as_millis() / period.as_millis()) as f64;
    let writes = renewals.actions + statuses.actions + ticks.actions;
    let (renewal_ns, renewal_allocs) = renewals.per_call();
    let (status_ns, status_allocs) = statuses.per_call();
    println!(
        "virtual time {} min, {} monitor passes of {n} nodes; actions other than events: {writes}",
        args.minutes, passes
    );
    println!(
        "Lease renewal:      {renewal_ns:8.0} ns  {renewal_allocs:6.2} allocations  ({} events)",
        renewals.calls
    );
    println!(
        "node status event:  {status_ns:8.0} ns  {status_allocs:6.2} allocations  ({} events)",
        statuses.calls
    );
    println!(
        "ticks:              {} calls, {:.1} ms, {} allocations",
        ticks.calls,
        ticks.nanos as f64 / 1e6,
        ticks.allocations
    );
    println!(
        "per node per monitor pass: {:8.1} ns  {:6.3} allocations",
        ticks.nanos as f64 / passes / n as f64,
        ticks.allocations as f64 / passes / n as f64
    );
    let per_second = |c: &Cost| c.nanos as f64 / total.as_secs_f64();
    println!(
        "controller CPU at this load: {:.3} % of a core ({:.0} events/s)",
        (per_second(&renewals) + per_second(&statuses) + per_second(&ticks)) / 1e7,
        (renewals.calls + statuses.calls) as f64 / total.as_secs_f64()
    );
    ExitCode::SUCCESS
}
