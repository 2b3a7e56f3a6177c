//! Fencing as a lifecycle against real kube-apiservers (the releases at the end of this file): the
//! fleet pause set by `node-lifecycled pause` with one instance's config lives on the leader Lease,
//! survives that leader's renewals, and is honoured by the standby that takes the lease over
//! when the leader is SIGKILLed; `resume` lets it fence.
//!
//! Fails if the server cannot be started, unless NODE_LIFECYCLED_SKIP_REAL_APISERVER=1 (then it
//! says why).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::e2e_support::{Daemon, TempDir, Timing, cli, config_text, wait_until};
use crate::real_apiserver_support::RealApiserver;
use crate::real_apiserver_support::fleet::{
    FleetSpec, Kubelets, admin_client, create_fleet, node_json, ready_of,
};
use crate::real_apiserver_support::versions::{Kube, versions};
use serde_json::Value;

const LEASE: &str = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/node-lifecycled";

fn timing(identity: &str) -> Timing {
    Timing {
        grace: "6s",
        startup_grace: "12s",
        monitor_period: "1s",
        eviction_rate: 0.5,
        leader: Some(identity.to_string()),
        ..Timing::default()
    }
}

/// The daemon config with fencing on: the command appends the node's name to `runs`.
fn fencing_config(server: &RealApiserver, identity: &str, runs: &Path) -> String {
    let base = config_text(
        Path::new(server.var("DAEMON_KUBECONFIG")),
        &timing(identity),
    );
    format!(
        "{base}[fencing]\nenabled = true\nafter = \"3s\"\ntimeout = \"5s\"\n\
         retry_backoff = \"1s\"\nmax_pause = \"10m\"\n\
         command = [\"/bin/sh\", \"-c\", \"echo \\\"$NODE_NAME\\\" >> {}\"]\n",
        runs.display()
    )
}

fn pause_annotation(server: &RealApiserver) -> Option<String> {
    let lease: Value = admin_client(server).get_json(LEASE).ok()?;
    lease["metadata"]["annotations"]["node-lifecycled.io/pause"]
        .as_str()
        .map(str::to_string)
}

fn logs(a: &Daemon, b: &Daemon) -> String {
    format!("--- a\n{}\n--- b\n{}", a.log(), b.log())
}

fn runs(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

/// A server with two zones of three nodes (Leases of 4 s) and their kubelets, a folder for the
/// daemons, and the file the fence commands append to.
fn fleet(kube: Kube, name: &str) -> Option<(RealApiserver, Kubelets, TempDir, PathBuf)> {
    let server = RealApiserver::start(kube)?;
    let spec = FleetSpec {
        lease_duration_seconds: 4,
        ..FleetSpec::zones(2, 3)
    };
    let kubelets = create_fleet(&server, &spec);
    let dir = TempDir::new(name);
    let fence_runs = dir.path().join("fence-runs");
    Some((server, kubelets, dir, fence_runs))
}

fn a_pause_set_through_one_instance_is_honoured_by_the_standby_that_takes_over(kube: Kube) {
    let Some((server, kubelets, dir, fence_runs)) = fleet(kube, "fencing-lifecycle") else {
        return;
    };
    let text_a = fencing_config(&server, "pause-a", &fence_runs);
    let text_b = fencing_config(&server, "pause-b", &fence_runs);
    let mut a = Daemon::start("pause-a", &dir, &text_a, &[]);
    a.wait_log("acting as leader", Duration::from_secs(30));
    let mut b = Daemon::start("pause-b", &dir, &text_b, &[]);
    b.wait_log("initial sync complete", Duration::from_secs(30));

    // Too long for max_pause: refused before any network, one line naming the key, exit 78.
    let (code, text) = cli(
        &a.config,
        &["pause", "fencing", "--for", "11m", "--reason", "x"],
    );
    assert_eq!(code, 78, "{text}");
    assert_eq!(text.lines().count(), 1, "{text}");
    assert!(text.contains("fencing.max_pause"), "{text}");

    let (code, text) = cli(
        &a.config,
        &[
            "pause",
            "fencing",
            "--for",
            "5m",
            "--reason",
            "switch upgrade",
        ],
    );
    assert_eq!(code, 0, "{text}");
    // Bounds for a busy machine: four servers and their daemons share two cores in CI.
    a.wait_log(
        "pause: decision=start what=fencing",
        Duration::from_secs(30),
    );
    b.wait_log(
        "pause: decision=start what=fencing",
        Duration::from_secs(30),
    );
    // The leader renews every 500 ms: the annotation must outlive its renewals.
    std::thread::sleep(Duration::from_secs(2));
    let stored = pause_annotation(&server).expect("the leader's renewals dropped the pause");
    assert!(stored.contains("\"reason\":\"switch upgrade\""), "{stored}");

    // The leader dies; a node dies; the standby takes over during the pause.
    a.signal("KILL");
    a.wait_exit(Duration::from_secs(30));
    let victim = "z1-n2";
    kubelets.set_alive(victim, false);
    b.wait_log("acting as leader", Duration::from_secs(15));
    let mut admin = admin_client(&server);
    wait_until(
        "the victim Unknown",
        Duration::from_secs(30),
        || ready_of(&node_json(&mut admin, victim)).0 == "Unknown",
        || format!("{victim} never Unknown\n{}", logs(&a, &b)),
    );
    // Unknown for well past `after` (3 s): nothing is fenced while paused.
    std::thread::sleep(Duration::from_secs(8));
    assert!(
        runs(&fence_runs).is_empty(),
        "fenced during the pause\n{}",
        logs(&a, &b)
    );
    assert!(b.has_line("fleet pause of fencing"), "{}", logs(&a, &b));

    // Resumed: the new leader fences at once.
    let resumed = Instant::now();
    let (code, text) = cli(&b.config, &["resume"]);
    assert_eq!(code, 0, "{text}");
    assert!(pause_annotation(&server).is_none());
    b.wait_log("pause: decision=end what=fencing", Duration::from_secs(30));
    wait_until(
        "fenced after resume",
        Duration::from_secs(15),
        || runs(&fence_runs) == [victim],
        || {
            format!(
                "not fenced after resume: {:?}\n{}",
                runs(&fence_runs),
                logs(&a, &b)
            )
        },
    );
    eprintln!(
        "fenced {:.1}s after `resume`",
        resumed.elapsed().as_secs_f64()
    );
}

/// Issue 46, item 4: fence escalation with a pause in the middle. Step 1 hangs until its
/// timeout; while it runs, an operator pauses fencing. Step 2 passes the same gates as step 1:
/// it waits for the pause to end, then runs.
fn a_pause_during_fence_step_one_holds_step_two_until_resume(kube: Kube) {
    const STEP_ONE_TIMEOUT: Duration = Duration::from_secs(12);
    let Some((server, kubelets, dir, fence_runs)) = fleet(kube, "fencing-escalation") else {
        return;
    };
    let base = config_text(
        Path::new(server.var("DAEMON_KUBECONFIG")),
        &timing("escalation"),
    );
    let step = |n: u32, tail: &str, timeout: &str| {
        format!(
            "{{ command = [\"/bin/sh\", \"-c\", \"echo \\\"{n} $NODE_NAME\\\" >> {}{tail}\"], timeout = \"{timeout}\" }}",
            fence_runs.display()
        )
    };
    let text = format!(
        "{base}[fencing]\nenabled = true\nafter = \"3s\"\nretry_backoff = \"1s\"\n\
         max_pause = \"10m\"\nstep = [{}, {}]\n",
        step(1, "; sleep 60", &format!("{}s", STEP_ONE_TIMEOUT.as_secs())),
        step(2, "", "5s")
    );
    let mut d = Daemon::start("escalation", &dir, &text, &[]);
    d.wait_log("acting as leader", Duration::from_secs(30));
    let victim = "z1-n2";
    kubelets.set_alive(victim, false);
    wait_until(
        "fence step 1 running",
        Duration::from_secs(30),
        || runs(&fence_runs) == [format!("1 {victim}")],
        || format!("{:?}\n{}", runs(&fence_runs), d.log()),
    );
    let step_one_seen = Instant::now();
    let (code, text) = cli(
        &d.config,
        &["pause", "fencing", "--for", "5m", "--reason", "bmc work"],
    );
    assert_eq!(code, 0, "{text}");
    // Set well inside step 1's timeout, even on a busy machine: it is what step 2 must wait for.
    d.wait_log("pause: decision=start what=fencing", STEP_ONE_TIMEOUT / 2);
    // Past step 1's timeout (counted from when its run was seen, which is after it started):
    // step 2 was due, and must wait for the pause.
    let step_two_due = step_one_seen + STEP_ONE_TIMEOUT + Duration::from_secs(3);
    std::thread::sleep(step_two_due.saturating_duration_since(Instant::now()));
    assert_eq!(
        runs(&fence_runs),
        [format!("1 {victim}")],
        "step 2 ran during the pause\n{}",
        d.log()
    );
    assert!(d.has_line("fleet pause of fencing"), "{}", d.log());
    let (code, text) = cli(&d.config, &["resume"]);
    assert_eq!(code, 0, "{text}");
    wait_until(
        "fence step 2 after resume",
        Duration::from_secs(15),
        || runs(&fence_runs) == [format!("1 {victim}"), format!("2 {victim}")],
        || format!("{:?}\n{}", runs(&fence_runs), d.log()),
    );
}

// The releases each scenario runs on: the whole tier on the newest; on 1.35 and the 1.20.2 floor
// the protocol and a representative few of each kind (README, Supported Kubernetes versions).
versions! {
    v1_37 => [
        a_pause_set_through_one_instance_is_honoured_by_the_standby_that_takes_over,
        a_pause_during_fence_step_one_holds_step_two_until_resume,
    ],
    v1_35 => [a_pause_set_through_one_instance_is_honoured_by_the_standby_that_takes_over],
}
