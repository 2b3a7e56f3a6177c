//! "The journal tells the story", end to end: the real binary against the simulated API server.
//! - A node dies: one decision line each for its Unknown verdict (with the evidence), the
//!   NoSchedule taint, the NoExecute taint, its pods marked NotReady, each pod deleted (with
//!   the taint and the toleration that ran out), and its recovery. `status` and `explain`
//!   answer over the control socket meanwhile.
//! - A 60-node zone dies at once: the decisions (hundreds) fit in a bounded number of lines
//!   (JSON lines, counted by their `decision` field), and the folded ones are counted.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use crate::e2e_support::{
    BIN, Daemon, Kubelets, Sim, Timing, config_text, tolerating_unreachable, wait_until,
};
use serde_json::{Value, json};

const TOKEN: &str = "daemon-a";

/// `node-lifecycled <args> --socket <socket>`: exit code, stdout, stderr.
fn ask(socket: &Path, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(BIN)
        .args(args)
        .arg("--socket")
        .arg(socket)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn count(d: &Daemon, needle: &str) -> usize {
    d.lines().iter().filter(|l| l.contains(needle)).count()
}

#[test]
fn a_dying_node_leaves_one_decision_line_per_step_with_its_evidence() {
    let sim = Sim::start("journal-node", &[TOKEN]);
    let nodes: Vec<String> = ["n1", "n2", "n3"].iter().map(|s| s.to_string()).collect();
    for n in &nodes {
        sim.add_node(n, Some("z1"));
    }
    sim.add_pod("plain", "n1", json!([]));
    sim.add_pod("two-seconds", "n1", tolerating_unreachable(Some(2)));
    sim.add_pod("long", "n1", tolerating_unreachable(Some(600)));
    let kubelets = Kubelets::start(sim.cluster(), &nodes, Duration::from_millis(300));
    let socket = sim.dir.path().join("control.sock");
    let text = format!(
        "control_socket = \"{}\"\n{}",
        socket.display(),
        config_text(&sim.kubeconfig(TOKEN), &Timing::default())
    );
    let mut d = Daemon::start("journal-node", &sim.dir, &text, &[]);
    d.wait_log("acting (leader election disabled)", Duration::from_secs(15));

    let (code, healthy, _) = ask(&socket, &["explain", "n1"]);
    assert_eq!(code, 0, "{}", d.log());
    assert!(healthy.starts_with("node n1: Ready True"), "{healthy}");
    assert!(
        healthy.contains("\nnext: healthy; judged Unknown at "),
        "{healthy}"
    );

    kubelets.set_alive("n1", false);
    // The lines come in the order the decisions were taken (the NotReady marks may come before
    // or after the NoExecute taint): wait for the last one, then read them all.
    let two = d.wait_log(
        "deleting pod default/two-seconds on node n1",
        Duration::from_secs(25),
    );
    assert!(two.contains(": tolerationSeconds 2 from 20"), "{two}");
    assert!(two.ends_with(" ran out"), "{two}");
    let find = |needle: &str| {
        d.lines()
            .into_iter()
            .find(|l| l.contains(needle))
            .unwrap_or_else(|| panic!("no line with {needle:?}\n{}", d.log()))
    };
    let unknown = find("node n1 judged Unknown");
    assert!(
        unknown.contains("(Lease renewTime 20")
            && unknown.contains("grace 3s ran out; a live Lease read at ")
            && unknown.contains(" confirmed it (renewTime 20"),
        "{unknown}"
    );
    let no_schedule = find("node n1 taints +node.kubernetes.io/unreachable:NoSchedule");
    assert!(no_schedule.ends_with("(Ready is Unknown)"), "{no_schedule}");
    let no_execute = find("node n1 taints +node.kubernetes.io/unreachable:NoExecute");
    assert!(
        no_execute.ends_with("(Ready is Unknown; zone sim/z1's queue gave a token)"),
        "{no_execute}"
    );
    let not_ready = find("pods on node n1 marked NotReady: ");
    assert!(
        not_ready.contains("3 pods on node n1 marked NotReady: default/long, default/plain, default/two-seconds [+2 lines folded]"),
        "{not_ready}"
    );
    let plain = find("deleting pod default/plain on node n1");
    assert!(
        plain.contains("taint node.kubernetes.io/unreachable:NoExecute (timeAdded 20")
            && plain.ends_with(") not tolerated"),
        "{plain}"
    );

    // While "long" waits out its 600 s, the daemon says when it goes, and why n1 is tainted.
    let (code, pod, _) = ask(&socket, &["explain", "default/long"]);
    assert_eq!(code, 0);
    assert!(
        pod.starts_with("pod default/long: Ready False, on node n1 (Ready Unknown)"),
        "{pod}"
    );
    assert!(pod.contains("\nnext: deleted at "), "{pod}");
    assert!(
        pod.contains(" unless the taint goes: tolerationSeconds 600 from "),
        "{pod}"
    );
    assert!(
        pod.contains("marked NotReady: node n1 is not Ready"),
        "{pod}"
    );
    let (code, node, _) = ask(&socket, &["explain", "n1"]);
    assert_eq!(code, 0);
    assert!(node.contains("taints: node.kubernetes.io/unreachable:NoSchedule, node.kubernetes.io/unreachable:NoExecute"), "{node}");
    assert!(
        node.contains("  node n1 judged Unknown: last heard from "),
        "{node}"
    );
    let (code, status, _) = ask(&socket, &["status"]);
    assert_eq!(code, 0);
    assert!(
        status.contains("\nrole: leader (leader election off)\n"),
        "{status}"
    );
    assert!(status.contains("\nsync: complete\n"), "{status}");
    assert!(
        status.contains("  sim/z1 (Normal, 3 nodes, 1 not ready, rate 100/s)"),
        "{status}"
    );
    assert!(status.contains("\npending evictions: 1 ("), "{status}");
    assert!(status.contains("\n  default/long at "), "{status}");
    let (code, _, err) = ask(&socket, &["explain", "default/nope"]);
    assert_eq!(
        (code, err.as_str()),
        (1, "error: no pod default/nope bound to a node is known\n")
    );

    // The kubelet comes back.
    kubelets.set_alive("n1", true);
    let ready = d.wait_log("node n1 Ready again", Duration::from_secs(15));
    assert!(ready.ends_with("(was Unknown)"), "{ready}");
    d.wait_log(
        "-node.kubernetes.io/unreachable:NoExecute",
        Duration::from_secs(10),
    );
    d.wait_log(
        "deletion of pod default/long cancelled",
        Duration::from_secs(10),
    );

    // One line per decision: nothing said twice.
    for needle in [
        "node n1 judged Unknown",
        "node n1 taints +node.kubernetes.io/unreachable:NoSchedule",
        "node n1 taints +node.kubernetes.io/unreachable:NoExecute",
        "pods on node n1 marked NotReady",
        "deleting pod default/plain ",
        "deleting pod default/two-seconds ",
        "node n1 Ready again",
    ] {
        assert_eq!(count(&d, needle), 1, "{needle}\n{}", d.log());
    }
    assert!(sim.deleted_pods().contains("plain"));
    drop(kubelets);
}

fn folded(line: &Value) -> u64 {
    let msg = line["msg"].as_str().unwrap_or("");
    msg.rsplit_once("[+")
        .and_then(|(_, rest)| rest.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

#[test]
fn a_sixty_node_zone_outage_stays_under_a_bounded_number_of_lines() {
    let sim = Sim::start("journal-zone", &[TOKEN]);
    let dead: Vec<String> = (0..60).map(|i| format!("a{i:02}")).collect();
    let alive: Vec<String> = (0..3).map(|i| format!("b{i:02}")).collect();
    for n in &dead {
        sim.add_node(n, Some("z1"));
        sim.add_pod(&format!("p-{n}"), n, json!([]));
    }
    for n in &alive {
        sim.add_node(n, Some("z2"));
    }
    let all: Vec<String> = dead.iter().chain(&alive).cloned().collect();
    let kubelets = Kubelets::start(sim.cluster(), &all, Duration::from_millis(300));
    let text = format!(
        "control_socket = \"\"\nlog_format = \"json\"\n{}",
        config_text(&sim.kubeconfig(TOKEN), &Timing::default())
    );
    let mut d = Daemon::start("journal-zone", &sim.dir, &text, &[]);
    d.wait_log("acting (leader election disabled)", Duration::from_secs(20));
    let before = d.lines().len();

    kubelets.silence(&dead);
    wait_until(
        "every pod of the dead zone deleted",
        Duration::from_secs(60),
        || sim.deleted_pods().len() == dead.len(),
        || d.log(),
    );
    // The folded lines are told when their 10 s window ends.
    d.wait_log("more pod deletions in 10s", Duration::from_secs(30));
    let decisions: Vec<Value> = d.lines()[before..]
        .iter()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v.get("decision").is_some())
        .collect();
    let told: u64 = decisions.len() as u64 + decisions.iter().map(folded).sum::<u64>();
    eprintln!(
        "60-node zone outage: {} decision lines for {told} decisions",
        decisions.len()
    );
    // 60 verdicts, 120 taints, 60 NotReady marks, 60 deletions, a zone change: over 300
    // decisions, in a few dozen lines at most (3 per kind and zone per 10 s, plus summaries).
    assert!(
        decisions.len() <= 40,
        "{} decision lines:\n{}",
        decisions.len(),
        d.log()
    );
    assert!(told >= 300, "only {told} decisions told\n{}", d.log());
    assert!(
        decisions
            .iter()
            .any(|v| v["decision"] == "zone-state" && v["zone"] == "sim/z1"),
        "{}",
        d.log()
    );
    assert!(
        decisions
            .iter()
            .all(|v| v["level"] == "INFO" && v["ts"].is_string()),
        "{decisions:?}"
    );
}

/// Under systemd the daemon speaks the journal's native protocol: a local datagram socket
/// stands in for journald (`NODE_LIFECYCLED_JOURNAL_SOCKET`), and a node's Unknown verdict
/// arrives as one entry with `NODE=`, `ZONE=`, `DECISION=`, `PRIORITY=6` and the message,
/// which is what `journalctl -u node-lifecycled NODE=n1` selects on.
#[test]
fn under_systemd_decisions_reach_the_journal_with_their_fields() {
    use node_lifecycled::logging::journal::parse_fields;
    use std::cell::RefCell;
    use std::collections::BTreeMap;
    use std::os::unix::net::UnixDatagram;

    let sim = Sim::start("journal-native", &[TOKEN]);
    let nodes: Vec<String> = ["n1", "n2", "n3"].iter().map(|s| s.to_string()).collect();
    for n in &nodes {
        sim.add_node(n, Some("z1"));
    }
    let kubelets = Kubelets::start(sim.cluster(), &nodes, Duration::from_millis(300));
    let journal_path = sim.dir.path().join("journal.socket");
    let journald = UnixDatagram::bind(&journal_path).unwrap();
    journald
        .set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let text = format!(
        "control_socket = \"\"\n{}",
        config_text(&sim.kubeconfig(TOKEN), &Timing::default())
    );
    let d = Daemon::spawn(
        "journal-native",
        &sim.dir,
        &text,
        &[(
            "NODE_LIFECYCLED_JOURNAL_SOCKET",
            journal_path.to_str().unwrap(),
        )],
    );
    let entries: RefCell<Vec<BTreeMap<String, String>>> = RefCell::new(Vec::new());
    let receive = || {
        let mut buf = vec![0u8; 65536];
        while let Ok(n) = journald.recv(&mut buf) {
            let fields = parse_fields(&buf[..n]).expect("a well-formed journal datagram");
            entries.borrow_mut().push(fields.into_iter().collect());
        }
    };
    let find = |key: &str, prefix: &str| {
        entries
            .borrow()
            .iter()
            .find(|e| e.get(key).is_some_and(|v| v.starts_with(prefix)))
            .cloned()
    };
    let context = || format!("{:?}\n{}", entries.borrow(), d.log());
    wait_until(
        "the daemon acting",
        Duration::from_secs(20),
        || {
            receive();
            find("MESSAGE", "acting (leader election disabled)").is_some()
        },
        context,
    );
    kubelets.set_alive("n1", false);
    wait_until(
        "n1's Unknown verdict in the journal",
        Duration::from_secs(20),
        || {
            receive();
            find("DECISION", "node-unknown").is_some()
        },
        context,
    );
    let verdict = find("DECISION", "node-unknown").unwrap();
    assert_eq!(verdict["NODE"], "n1");
    assert_eq!(verdict["ZONE"], "sim/z1");
    assert_eq!(verdict["PRIORITY"], "6");
    assert_eq!(verdict["SYSLOG_IDENTIFIER"], "node-lifecycled");
    assert!(
        verdict["MESSAGE"].starts_with("node n1 judged Unknown: "),
        "{verdict:?}"
    );
    // Ordinary lines come the same way, without decision fields.
    let start = find("MESSAGE", "node-lifecycled 0.1.0 starting").expect("the start-up line");
    assert!(!start.contains_key("NODE") && !start.contains_key("DECISION"));
    // Nothing went to stderr but what cannot reach the journal (nothing here).
    assert!(
        !d.lines().iter().any(|l| l.contains("judged Unknown")),
        "{}",
        d.log()
    );
    drop(kubelets);
}
