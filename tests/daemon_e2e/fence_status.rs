//! The fence agent's credentials checked before an outage (`[fencing] status_command`), with the
//! real binary against the simulated API server over HTTP and real scripts in a temp dir:
//!
//! - the daemon, every `status_interval`, runs the status command against the nodes
//!   `match_labels` selects, one at a time; `node_lifecycled_fence_agent_ok{node}` says how each
//!   answered and a failure is a warning naming the node, while the fence command itself never
//!   runs and no node is tainted (every node is healthy);
//! - `doctor --fence-sample N` runs it against up to N of those nodes, one report line each,
//!   and a failing answer fails the doctor.
//!
//! Four nodes: `n1` without the fencing label (never asked about), `n2`, `n3`, `n4` with it; the
//! status script refuses `n2` (`exit 1`, as a BMC refusing our credentials) and accepts the rest.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use node_lifecycled_sim::{Resource, fixtures};

use crate::e2e_support::{
    BIN, Daemon, Kubelets, Sim, TempDir, Timing, config_text, free_port, http_get, wait_until,
};

const TOKEN: &str = "fence-status";
const LABEL: (&str, &str) = ("node-lifecycled.io/fencing", "ipmi");
/// The node whose fence agent refuses us.
const REFUSED: &str = "n2";

/// The scripts and what they leave behind.
struct Scripts {
    /// Holds the scripts; removed on drop.
    _dir: TempDir,
    /// `status_command`: appends `$FENCE_STEP $NODE_NAME` to `asked`, exits 1 for [`REFUSED`].
    status: PathBuf,
    /// `command` (the fence itself): touches `fenced`. Must never run here.
    fence: PathBuf,
    asked: PathBuf,
    fenced: PathBuf,
}

impl Scripts {
    fn new(name: &str) -> Scripts {
        let dir = TempDir::new(name);
        let asked = dir.path().join("asked");
        let fenced = dir.path().join("fenced");
        let status = executable(
            &dir,
            "fence-status",
            &format!(
                "#!/bin/sh\necho \"$FENCE_STEP $NODE_NAME\" >> '{}'\n\
                 if [ \"$NODE_NAME\" = '{REFUSED}' ]; then\n\
                 echo 'Error: Unable to establish IPMI v2 / RMCP+ session' >&2\n  exit 1\nfi\n\
                 echo 'Chassis Power is on'\nexit 0\n",
                asked.display()
            ),
        );
        let fence = executable(
            &dir,
            "fence-off",
            &format!(
                "#!/bin/sh\necho \"$FENCE_STEP $NODE_NAME\" >> '{}'\nexit 0\n",
                fenced.display()
            ),
        );
        Scripts {
            _dir: dir,
            status,
            fence,
            asked,
            fenced,
        }
    }

    /// `[fencing]` with both scripts, the status run every second.
    fn fencing_table(&self) -> String {
        format!(
            "[fencing]\nenabled = true\ncommand = [\"{}\"]\ntimeout = \"20s\"\n\
             status_command = [\"{}\"]\nstatus_interval = \"1s\"\n\
             match_labels = {{ \"{}\" = \"{}\" }}\n",
            self.fence.display(),
            self.status.display(),
            LABEL.0,
            LABEL.1
        )
    }

    /// The nodes the status command was run for, in order, with the step it was told.
    fn asked(&self) -> Vec<String> {
        std::fs::read_to_string(&self.asked)
            .unwrap_or_default()
            .lines()
            .map(str::to_string)
            .collect()
    }

    fn fence_ran(&self) -> bool {
        self.fenced.exists()
    }
}

fn executable(dir: &TempDir, name: &str, text: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.write(name, text);
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

/// `n1` (unlabelled) and `n2`..`n4` (labelled for fencing), Ready, Leases renewed now.
fn add_nodes(sim: &Sim) -> Vec<String> {
    let c = sim.cluster();
    let names: Vec<String> = ["n1", "n2", "n3", "n4"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    for name in &names {
        let mut node = fixtures::ready_node(name, Some("z1"), c.now());
        if name != "n1" {
            node["metadata"]["labels"][LABEL.0] = LABEL.1.into();
        }
        c.create(Resource::Nodes, node).unwrap();
        c.renew_lease(name, c.now()).unwrap();
    }
    names
}

/// Long graces: the nodes must stay healthy however busy the machine is, so that nothing but
/// the status probe can explain a fence or a taint.
fn timing() -> Timing {
    Timing {
        grace: "30s",
        startup_grace: "40s",
        ..Timing::default()
    }
}

/// The value of the one sample `name{node="NODE"}` on /metrics, if there is one.
fn node_sample(body: &str, name: &str, node: &str) -> Option<String> {
    let prefix = format!("{name}{{node=\"{node}\"}} ");
    body.lines()
        .find_map(|l| l.strip_prefix(&prefix).map(str::to_string))
}

#[test]
fn the_daemon_probes_each_selected_node_marks_the_refused_one_not_ok_and_warns_without_fencing() {
    let scripts = Scripts::new("fence-status-daemon");
    let sim = Sim::start("fence-status-daemon", &[TOKEN]);
    let nodes = add_nodes(&sim);
    let _kubelets = Kubelets::start(sim.cluster(), &nodes, Duration::from_millis(300));
    let port = free_port();
    let text = format!(
        "metrics_address = \"127.0.0.1:{port}\"\n{}{}",
        config_text(&sim.kubeconfig(TOKEN), &timing()),
        scripts.fencing_table()
    );
    let mut d = Daemon::start("fence-status-daemon", &sim.dir, &text, &[]);
    d.wait_log("acting (leader election disabled)", Duration::from_secs(30));

    const FAMILY: &str = "node_lifecycled_fence_agent_ok";
    let metrics = || {
        let (code, body) = http_get(port, "/metrics");
        assert_eq!(code, 200, "{body}");
        body
    };
    let context = || {
        format!(
            "asked: {:?}\n/metrics:\n{}\n{}",
            scripts.asked(),
            metrics(),
            d.log()
        )
    };
    // Every second one node, in name order: n2, n3, n4, n2 … Generous: the machine is busy.
    wait_until(
        "fence_agent_ok 0 for the refused node and 1 for the others",
        Duration::from_secs(60),
        || {
            let body = metrics();
            node_sample(&body, FAMILY, REFUSED).as_deref() == Some("0")
                && node_sample(&body, FAMILY, "n3").as_deref() == Some("1")
                && node_sample(&body, FAMILY, "n4").as_deref() == Some("1")
        },
        context,
    );
    let warning = d.wait_log(
        &format!("fencing: status command for node={REFUSED} failed"),
        Duration::from_secs(30),
    );
    assert!(warning.contains("WARN"), "{warning}");
    assert!(warning.contains("exit status 1"), "{warning}");

    let body = metrics();
    // n1 is not selected: never asked about, no sample.
    assert_eq!(node_sample(&body, FAMILY, "n1"), None, "{body}");
    let asked = scripts.asked();
    assert!(
        asked.iter().all(|l| l.starts_with("status ")),
        "the status command is told FENCE_STEP=status: {asked:?}"
    );
    assert!(
        !asked.iter().any(|l| l == "status n1"),
        "n1 (unlabelled) asked about: {asked:?}"
    );
    // Only the refused node is warned about.
    for node in ["n1", "n3", "n4"] {
        assert!(
            !d.has_line(&format!("status command for node={node} failed")),
            "{node} warned about\n{}",
            d.log()
        );
    }
    // A failed check never fences: the fence command never ran, no attempt counted, no node
    // tainted, no fencing event.
    assert!(
        !scripts.fence_ran(),
        "the fence command ran: {:?}\n{}",
        std::fs::read_to_string(&scripts.fenced),
        d.log()
    );
    let attempts: Vec<&str> = body
        .lines()
        .filter(|l| l.starts_with("node_lifecycled_fencing_attempts_total{"))
        .collect();
    assert_eq!(attempts.len(), 5, "{body}");
    assert!(attempts.iter().all(|l| l.ends_with(" 0")), "{body}");
    for node in &nodes {
        assert!(
            sim.taints(node).is_empty(),
            "{node} tainted: {:?}\n{}",
            sim.taints(node),
            d.log()
        );
        for reason in ["FencingNode", "NodeFenced", "FencingFailed"] {
            assert!(!sim.has_event(reason, node), "{reason} on {node}");
        }
    }
}

/// `node-lifecycled doctor --fence-sample N --output text`, every host file absent (the
/// machine's own play no part): `(exit code, stdout, stderr)`.
fn doctor(config: &Path, absent: &Path, sample: &str) -> (Option<i32>, String, String) {
    let mut cmd = Command::new(BIN);
    cmd.arg("doctor")
        .arg("--config")
        .arg(config)
        .args(["--output", "text", "--fence-sample", sample])
        .env_remove("RUST_LOG");
    for option in [
        "--kcm-manifest",
        "--k3s-config",
        "--rke2-config",
        "--k0s-config",
        "--microk8s-args",
    ] {
        cmd.arg(option).arg(absent);
    }
    let out = cmd.output().expect("run node-lifecycled doctor");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn doctor_fence_sample_reports_one_line_per_sampled_node_and_fails_on_the_refused_one() {
    let scripts = Scripts::new("fence-status-doctor");
    let sim = Sim::start("fence-status-doctor", &[TOKEN]);
    add_nodes(&sim);
    let config = sim.dir.write(
        "doctor.toml",
        &format!(
            "{}{}",
            config_text(&sim.kubeconfig(TOKEN), &timing()),
            scripts.fencing_table()
        ),
    );
    let absent = sim.dir.path().join("absent");
    let (code, out, err) = doctor(&config, &absent, "2");
    let shown = format!("exit {code:?}\n--- stdout ---\n{out}--- stderr ---\n{err}");

    // Up to 2 of the nodes match_labels selects, in the server's (name) order: n2 and n3; n1 is
    // not selected, n4 is past the sample.
    let lines: Vec<&str> = out
        .lines()
        .filter(|l| l.contains("fencing/status command"))
        .collect();
    assert_eq!(lines.len(), 2, "one line per sampled node\n{shown}");
    assert!(
        lines[0].starts_with(&format!(
            "fail  fencing/status command {REFUSED}: exit status 1"
        )),
        "{shown}"
    );
    assert!(lines[0].contains("Unable to establish IPMI"), "{shown}");
    assert!(
        lines[1].starts_with("ok    fencing/status command n3: exit 0"),
        "{shown}"
    );
    assert_eq!(
        scripts.asked(),
        [format!("status {REFUSED}"), "status n3".to_string()],
        "{shown}"
    );
    assert!(!scripts.fence_ran(), "the fence command ran\n{shown}");
    // A failed check fails the doctor: exit 1 (main.rs, "exit codes"). The simulator serves no
    // SelfSubjectAccessReview (404), so the permissions group fails too and the exit code alone
    // cannot tell which failure caused it; every failing line is named here instead.
    assert_eq!(code, Some(1), "{shown}");
    let failing: Vec<&str> = out
        .lines()
        .filter(|l| l.starts_with("fail "))
        .map(|l| l.split_once(':').map_or(l, |(head, _)| head))
        .collect();
    assert_eq!(
        failing,
        [
            "fail  permissions/selfsubjectaccessreviews",
            "fail  fencing/status command n2"
        ],
        "{shown}"
    );
}
