//! Start and stop as systemd sees them. READY=1 only once nodes, leases and pods are listed; a
//! STATUS= summary; STOPPING=1 and exit 0 on SIGTERM. An unreachable API server or refused
//! credentials are logged plainly and retried, never READY, and SIGTERM still exits 0;
//! a connection file that cannot be parsed exits 78 with one line.

use std::os::unix::net::UnixDatagram;
use std::time::{Duration, Instant};

use crate::e2e_support::{Daemon, Kubelets, Sim, TempDir, Timing, config_text};
use node_lifecycled_sim::{RequestMatch, Verb};

const TOKEN: &str = "daemon-a";

/// systemd's side of `NOTIFY_SOCKET`.
struct Systemd {
    socket: UnixDatagram,
    path: std::path::PathBuf,
    /// Every message with when it arrived.
    received: Vec<(Instant, String)>,
}

impl Systemd {
    fn bind(dir: &TempDir) -> Systemd {
        let path = dir.path().join("notify.sock");
        let socket = UnixDatagram::bind(&path).unwrap();
        socket
            .set_read_timeout(Some(Duration::from_millis(100)))
            .unwrap();
        Systemd {
            socket,
            path,
            received: Vec::new(),
        }
    }

    fn drain(&mut self) {
        let mut buf = [0u8; 512];
        while let Ok(n) = self.socket.recv(&mut buf) {
            self.received.push((
                Instant::now(),
                String::from_utf8_lossy(&buf[..n]).into_owned(),
            ));
        }
    }

    /// Waits for a message starting with `prefix`; returns it and when it came.
    fn wait_for(&mut self, prefix: &str, limit: Duration) -> (Instant, String) {
        let started = Instant::now();
        loop {
            if let Some(m) = self.received.iter().find(|(_, m)| m.starts_with(prefix)) {
                return m.clone();
            }
            assert!(
                started.elapsed() < limit,
                "no {prefix:?} from the daemon within {limit:?}: {:?}",
                self.messages()
            );
            self.drain();
        }
    }

    fn messages(&self) -> Vec<String> {
        self.received.iter().map(|(_, m)| m.clone()).collect()
    }
}

#[test]
fn ready_only_after_the_initial_sync_then_status_and_stopping_on_sigterm() {
    let sim = Sim::start("startup-ready", &[TOKEN]);
    let nodes: Vec<String> = ["n1", "n2"].iter().map(|s| s.to_string()).collect();
    for n in &nodes {
        sim.add_node(n, Some("z1"));
    }
    let _kubelets = Kubelets::start(sim.cluster(), &nodes, Duration::from_millis(300));
    // The pods' initial state (a watch-list here: the simulator says 1.32) starts only after
    // 1.5 s: READY must wait for it.
    sim.handle.faults().delay_responses(
        RequestMatch::on(Verb::Watch, "pods"),
        Duration::from_millis(1500),
    );
    let mut systemd = Systemd::bind(&sim.dir);
    let text = config_text(&sim.kubeconfig(TOKEN), &Timing::default());
    let started = Instant::now();
    let mut d = Daemon::start(
        "startup-ready",
        &sim.dir,
        &text,
        &[
            ("NOTIFY_SOCKET", systemd.path.to_str().unwrap()),
            ("WATCHDOG_USEC", "500000"),
        ],
    );
    let (ready_at, _) = systemd.wait_for("READY=1", Duration::from_secs(15));
    assert!(
        ready_at - started >= Duration::from_millis(1500),
        "READY=1 {:?} after start, before the pod list could have been answered",
        ready_at - started
    );
    let synced = d.wait_log("initial sync complete", Duration::from_secs(1));
    assert!(
        synced.contains("2 nodes, 2 node leases, 0 bound pods"),
        "{synced}"
    );
    let waiting: Vec<String> = systemd
        .messages()
        .into_iter()
        .take_while(|m| m != "READY=1")
        .filter(|m| m.starts_with("STATUS="))
        .collect();
    assert!(
        waiting
            .iter()
            .any(|m| m.starts_with("STATUS=waiting for the initial sync of pods")),
        "{waiting:?}"
    );
    systemd.wait_for(
        "STATUS=leader, 2 nodes, 0 not Ready, 0 pending evictions",
        Duration::from_secs(5),
    );
    systemd.wait_for("WATCHDOG=1", Duration::from_secs(5));
    assert_eq!(
        systemd
            .received
            .iter()
            .filter(|(_, m)| m == "READY=1")
            .count(),
        1
    );

    d.signal("TERM");
    let (status, took) = d.wait_exit(Duration::from_secs(5));
    assert_eq!(status.code(), Some(0));
    assert!(
        took < Duration::from_secs(1),
        "SIGTERM to exit took {took:?}"
    );
    systemd.wait_for("STOPPING=1", Duration::from_secs(1));
    assert!(d.has_line("SIGTERM: stopping"));
}

#[test]
fn refused_credentials_are_logged_and_retried_never_ready_and_sigterm_exits_0() {
    let sim = Sim::start("startup-401", &["the-right-token"]);
    sim.add_node("n1", None);
    let mut systemd = Systemd::bind(&sim.dir);
    let text = config_text(&sim.kubeconfig("a-wrong-token"), &Timing::default());
    let mut d = Daemon::start(
        "startup-401",
        &sim.dir,
        &text,
        &[("NOTIFY_SOCKET", systemd.path.to_str().unwrap())],
    );
    // The simulator says 1.32: the initial state comes from a watch-list, refused with 401.
    let first = d.wait_log(
        "Node watch: HTTP 401: Unauthorized",
        Duration::from_secs(10),
    );
    assert!(first.contains("WARN"), "{first}");
    // Retried, with backoff: a second attempt comes, but not in a storm.
    d.wait_log("Node watch: HTTP 401", Duration::from_secs(10));
    std::thread::sleep(Duration::from_secs(2));
    let attempts = d
        .lines()
        .iter()
        .filter(|l| l.contains("Node watch: HTTP 401"))
        .count();
    assert!(
        (2..=8).contains(&attempts),
        "{attempts} node list attempts in ~3 s"
    );
    systemd.drain();
    assert!(
        !systemd.messages().contains(&"READY=1".to_string()),
        "{:?}",
        systemd.messages()
    );
    let status = systemd
        .messages()
        .into_iter()
        .rfind(|m| m.starts_with("STATUS="))
        .unwrap_or_default();
    assert!(
        status.starts_with("STATUS=waiting for the initial sync of nodes, leases, pods"),
        "{status}"
    );
    assert!(status.contains("401"), "{status}");
    d.signal("TERM");
    let (status, took) = d.wait_exit(Duration::from_secs(5));
    assert_eq!(status.code(), Some(0));
    assert!(
        took < Duration::from_secs(1),
        "SIGTERM to exit took {took:?}"
    );
}

#[test]
fn unreachable_api_server_is_retried_and_sigterm_exits_0() {
    let dir = TempDir::new("startup-unreachable");
    // A port that refuses: bind one, note it, close it.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let kubeconfig = dir.write(
        "kubeconfig",
        &format!(
            "apiVersion: v1\nkind: Config\ncurrent-context: c\nclusters:\n- name: c\n  cluster:\n    server: http://127.0.0.1:{port}\n\
             users:\n- name: u\n  user:\n    token: t\ncontexts:\n- name: c\n  context:\n    cluster: c\n    user: u\n"
        ),
    );
    let mut d = Daemon::start(
        "startup-unreachable",
        &dir,
        &config_text(&kubeconfig, &Timing::default()),
        &[],
    );
    let line = d.wait_log("Node list failed", Duration::from_secs(10));
    assert!(line.contains("Connection refused"), "{line}");
    d.wait_log("Node list failed", Duration::from_secs(10));
    assert!(!d.has_line("initial sync complete"));
    d.signal("TERM");
    let (status, _) = d.wait_exit(Duration::from_secs(5));
    assert_eq!(status.code(), Some(0));
}

#[test]
fn a_kubeconfig_that_cannot_be_parsed_exits_78_with_one_line() {
    let dir = TempDir::new("startup-bad-kubeconfig");
    let kubeconfig = dir.write("kubeconfig", "clusters: [this is: not {a kubeconfig\n");
    let mut d = Daemon::spawn(
        "startup-bad-kubeconfig",
        &dir,
        &config_text(&kubeconfig, &Timing::default()),
        &[],
    );
    let (status, _) = d.wait_exit(Duration::from_secs(10));
    assert_eq!(status.code(), Some(78), "{}", d.log());
    let lines = d.lines();
    let errors: Vec<&String> = lines.iter().filter(|l| l.contains("ERROR")).collect();
    assert_eq!(errors.len(), 1, "{lines:?}");
    assert!(
        errors[0].contains(&kubeconfig.display().to_string()),
        "{}",
        errors[0]
    );
    // check-config judges the same file the same way.
    let out = std::process::Command::new(crate::e2e_support::BIN)
        .args(["check-config", "--config", d.config.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(78));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.starts_with(&kubeconfig.display().to_string()),
        "{stderr}"
    );
}
