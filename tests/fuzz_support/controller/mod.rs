//! The controller fed random but well-formed event sequences through its public API
//! (`Controllers::handle(Input, now)`), on the one fake API server of the controller suites
//! (`controller::testing::FakeApi`, holding every action until the script answers it: sometimes
//! failing, late or conflicting), with invariants checked on every action returned.
//!
//! The input bytes are the script: each byte picks an operation (a kubelet renewing its Lease or
//! posting status, time passing with every timer fired at its deadline, pending actions answered,
//! pods added and removed, nodes deleted and re-created, live Lease reads failing), the next
//! bytes its arguments. Objects reach the controller as JSON through the decoder, as from a watch
//! (`wire.rs`); the invariants (`invariants.rs`) read the fake API's objects and the bookkeeping
//! of `world.rs`.
//!
//! Invariants:
//! - no write before the initial sync;
//! - no `Ready=Unknown` for a node heard from (first seen, Lease renewed, status posted) within
//!   the grace period (the fake API's live Lease reads tell the truth or fail);
//! - no pod evicted unless its node carries a `NoExecute` taint that the pod does not tolerate,
//!   or tolerates for `tolerationSeconds` that have run out since the taint's `timeAdded` (the
//!   first attempt: retries of a started eviction go on, as upstream's); no eviction of a pod
//!   that is gone or was replaced (new UID);
//! - no action about a node or pod that no longer exists;
//! - timers never busy-loop: after firing everything due, the next deadline is in the future.

mod invariants;
mod wire;
mod world;

use std::collections::BTreeMap;
use std::time::Duration;

use node_lifecycled::controller::testing::FakeApi;
use node_lifecycled::controller::{Controllers, Input, Settings};
use node_lifecycled::time::Rate;
use node_lifecycled::time::Time;

use world::World;

const GRACE: Duration = Duration::from_secs(10);
const STARTUP_GRACE: Duration = Duration::from_secs(20);
const UNREACHABLE: &str = "node.kubernetes.io/unreachable";
const NOT_READY: &str = "node.kubernetes.io/not-ready";

fn settings() -> Settings {
    Settings {
        node_monitor_period: Duration::from_secs(5),
        node_monitor_grace_period: GRACE,
        node_startup_grace_period: STARTUP_GRACE,
        node_eviction_rate: Rate::per_second(10),
        secondary_node_eviction_rate: Rate::from_micro_per_second(100_000),
        large_cluster_size_threshold: 3,
        unhealthy_zone_threshold: 0.55,
        taint_based_eviction: true,
        pod_eviction_timeout: Duration::from_secs(300),
        ..Settings::default()
    }
}

/// What a script made the controller do (so a test can show the invariants are not vacuous).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Coverage {
    pub unknown_verdicts: u64,
    pub no_execute_taints: u64,
    pub evictions: u64,
    pub lease_reads: u64,
}

/// Reads the script.
struct Script<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Script<'_> {
    fn next(&mut self) -> Option<u8> {
        let b = self.bytes.get(self.at).copied();
        self.at += 1;
        b
    }
    fn arg(&mut self) -> u8 {
        self.next().unwrap_or(0)
    }
}

const NODES: [&str; 6] = ["n0", "n1", "n2", "n3", "n4", "n5"];

/// Runs the script in `input`; `Err` is a broken invariant.
pub fn run_controller(input: &[u8]) -> Result<(), String> {
    run_controller_counting(input).map(|_| ())
}

/// [`run_controller`], returning what the controller did.
pub fn run_controller_counting(input: &[u8]) -> Result<Coverage, String> {
    run(input, false, false).map(|(coverage, _)| coverage)
}

/// [`run_controller`], returning every action and decision with its instant, in order; with
/// `full_monitor_pass`, the monitor pass evaluates every node (the reference).
pub fn run_controller_recording(
    input: &[u8],
    full_monitor_pass: bool,
) -> Result<(Coverage, Vec<String>), String> {
    run(input, full_monitor_pass, true)
}

fn run(
    input: &[u8],
    full_monitor_pass: bool,
    record: bool,
) -> Result<(Coverage, Vec<String>), String> {
    let t0 = Time::from_unix_millis(1_700_000_000_000);
    let mut ctl = Controllers::new(settings(), t0);
    ctl.use_full_monitor_pass(full_monitor_pass);
    let mut api = FakeApi::over(ctl, t0);
    api.hold_answers = true;
    // An evicted pod stays, terminating: no kubelet confirms in these scripts.
    api.evictions_remove = false;
    api.wire = Some(wire::json_wire());
    api.decisions = Some(Vec::new());
    api.trace = std::env::var_os("NODE_LIFECYCLED_FUZZ_TRACE").is_some();
    let mut w = World {
        api,
        books: BTreeMap::new(),
        synced: false,
        uid_counter: 0,
        seen: Coverage::default(),
        record: record.then(Vec::new),
    };
    let mut s = Script {
        bytes: input,
        at: 0,
    };
    let shape = s.arg();
    let count = 2 + usize::from(shape % 5);
    for (i, name) in NODES.iter().take(count).enumerate() {
        let zone = if shape & 0x80 != 0 && i % 2 == 1 {
            "z2"
        } else {
            "z1"
        };
        w.add_node(name, zone, true)?;
        w.renew_lease(name)?;
        w.add_pod(name, i as u8)?;
    }
    let sync_late = shape & 0x40 != 0;
    if !sync_late {
        w.synced = true;
        w.feed(Input::InitialSyncDone)?;
    }
    // Kubelets that heartbeat on every time step unless stopped.
    let mut alive: Vec<bool> = vec![true; NODES.len()];
    while let Some(op) = s.next() {
        let node = NODES[usize::from(s.arg()) % count];
        let i = NODES.iter().position(|n| *n == node).expect("node");
        match op % 14 {
            0 => alive[i] = !alive[i],
            1 if w.api.nodes.contains_key(node) => w.renew_lease(node)?,
            2 => w.post_status(node, s.arg() % 4 != 0)?,
            3..=5 => {
                // Time passes in steps; live kubelets renew every 2 s.
                let total = Duration::from_millis(u64::from(s.arg()) * 100);
                let end = w.now() + total;
                while w.now() < end {
                    let step = (w.now() + Duration::from_secs(2)).min(end);
                    w.run_until(step)?;
                    for (j, name) in NODES.iter().take(count).enumerate() {
                        if alive[j] && w.api.nodes.contains_key(*name) {
                            w.renew_lease(name)?;
                        }
                    }
                }
            }
            6 | 7 => {
                let choice = s.arg();
                while !w.api.held.is_empty() {
                    w.answer(0, choice.wrapping_add(w.api.held.len() as u8))?;
                }
            }
            8 => {
                if !w.api.held.is_empty() {
                    let k = usize::from(s.arg()) % w.api.held.len();
                    let choice = s.arg();
                    w.answer(k, choice)?;
                }
            }
            9 if w.api.nodes.contains_key(node) => {
                let variant = s.arg();
                w.add_pod(node, variant)?;
            }
            10 => {
                let pick = usize::from(s.arg());
                if !w.api.pods.is_empty() {
                    let key = w
                        .api
                        .pods
                        .keys()
                        .nth(pick % w.api.pods.len())
                        .cloned()
                        .expect("pod");
                    w.api.delete_pod(&key);
                    w.settle()?;
                }
            }
            11 => {
                if w.api.nodes.contains_key(node) {
                    w.delete_node(node)?;
                } else {
                    let zone = if s.arg() % 2 == 0 { "z1" } else { "z2" };
                    let ready = s.arg() % 3 != 0;
                    w.add_node(node, zone, ready)?;
                    w.renew_lease(node)?;
                }
            }
            12 => w.api.faults.lease_reads_fail = !w.api.faults.lease_reads_fail,
            _ => {
                if !w.synced {
                    w.synced = true;
                    w.feed(Input::InitialSyncDone)?;
                }
            }
        }
        if let Some(t) = w.api.ctl.next_deadline() {
            if t < w.now() {
                // Allowed only until the next Tick fires it; fire it now.
                w.run_until(w.now())?;
            }
        }
    }
    Ok((w.seen, w.record.unwrap_or_default()))
}

/// Seed scripts: a node dying and coming back, a zone going dark, flapping, lease reads failing.
pub fn corpus() -> Vec<Vec<u8>> {
    vec![
        // 3 nodes; n1 stops; 25 s pass with answers; n1 comes back.
        vec![
            1, 0, 1, 3, 0, 100, 6, 0, 0, 3, 0, 100, 6, 0, 0, 3, 0, 60, 6, 0, 0, 0, 1, 2, 1, 1, 3,
            0, 50, 6, 0, 0,
        ],
        // 6 nodes in two zones; all of z2 stops; lease reads fail for a while.
        vec![
            0x85, 0, 1, 0, 3, 0, 5, 12, 0, 3, 0, 200, 8, 0, 0, 6, 0, 0, 12, 0, 3, 0, 200, 6, 0, 0,
            3, 0, 250, 6, 0, 0,
        ],
        // Sync late; pods added; n0 flaps.
        vec![
            0x42, 9, 0, 1, 9, 1, 3, 0, 0, 13, 0, 0, 0, 3, 0, 80, 0, 0, 6, 0, 0, 3, 0, 120, 6, 0, 3,
        ],
        // A node deleted while tainted, then re-created not ready.
        vec![
            2, 0, 2, 3, 0, 150, 6, 0, 0, 3, 0, 50, 6, 0, 0, 11, 2, 11, 2, 1, 0, 3, 0, 250, 6, 0, 0,
        ],
    ]
}
