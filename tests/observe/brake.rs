//! The brake and per-pool timing as `/metrics`, the decision log and `explain` show them: a brake
//! engaged over the fleet (one node not Ready is more than `max_unhealthy = 0`), and which
//! toleration seconds a pod's deletion counts with under `default_toleration_seconds`.

use crate::observe_support::{Cluster, cluster, snapshot};
use node_lifecycled::config::DumpFormat;
use node_lifecycled::controller::Settings;
use node_lifecycled::controller::brake::MaxUnhealthy;
use node_lifecycled::observe::ask::answer;
use node_lifecycled::observe::decision_line::render as render_decision;
use node_lifecycled::observe::decision_log::DecisionLog;
use node_lifecycled::observe::explain::Acting;
use node_lifecycled::observe::metrics::render;

fn braked() -> (Cluster, DecisionLog, Vec<String>) {
    let mut c = cluster(true, 0);
    let settings = Settings {
        max_unhealthy: Some(MaxUnhealthy::Count(0)),
        default_toleration_seconds: Some(30),
        ..Settings::default()
    };
    c.controllers.apply_settings(settings, c.now);
    let decisions = c.controllers.take_decisions();
    let lines = decisions
        .iter()
        .filter(|d| d.kind() == "brake")
        .map(|d| render_decision(d).message)
        .collect();
    let mut log = DecisionLog::new();
    log.record(c.now, decisions, false);
    (c, log, lines)
}

#[test]
fn an_engaged_brake_is_one_decision_line_a_metric_and_an_explain_line() {
    let (c, log, lines) = braked();
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(
        lines[0].starts_with("brake engaged (fleet): 1 of 4 nodes not Ready"),
        "{lines:?}"
    );
    let metrics = render(&snapshot(&c, DumpFormat::Text));
    assert!(
        metrics.contains("node_lifecycled_brake_engaged{scope=\"fleet\"} 1\n"),
        "{metrics}"
    );
    assert!(
        metrics.contains("node_lifecycled_brake_unhealthy_nodes{scope=\"fleet\"} 1\n"),
        "{metrics}"
    );
    assert!(metrics.contains("node_lifecycled_decisions_total{decision=\"brake\"}"));
    let dump = snapshot(&c, DumpFormat::Text).to_text_lines().join("\n");
    assert!(
        dump.contains("brake: scope=fleet engaged=true unhealthy=1 total=4"),
        "{dump}"
    );
    let ask = |what: &str| {
        answer(what, &c.controllers, &log, Acting::Yes, c.now, || {
            snapshot(&c, DumpFormat::Text)
        })
    };
    let node = ask("explain a-sick");
    assert!(node.contains("\nbrake: engaged since "), "{node}");
    assert!(node.contains("(fleet: 1 of 4 nodes"), "{node}");
    let pod = ask("explain default/web-00");
    assert!(pod.contains("\nbrake: engaged (fleet"), "{pod}");
    // web-00 tolerates only not-ready for 100 s: its own choice, not the admission default.
    assert!(
        pod.contains("eviction timing: its own tolerations: they are not exactly the admission default (300s), so the 30s set for its node does not apply"),
        "{pod}"
    );
}

#[test]
fn without_the_keys_explain_and_metrics_say_nothing_of_them() {
    let c = cluster(true, 0);
    let metrics = render(&snapshot(&c, DumpFormat::Text));
    assert!(!metrics.contains("node_lifecycled_brake_engaged"));
    let dump = snapshot(&c, DumpFormat::Text).to_text_lines().join("\n");
    assert!(!dump.contains("brake"), "{dump}");
    let log = DecisionLog::new();
    let node = answer(
        "explain a-sick",
        &c.controllers,
        &log,
        Acting::Yes,
        c.now,
        || snapshot(&c, DumpFormat::Text),
    );
    let pod = answer(
        "explain default/web-00",
        &c.controllers,
        &log,
        Acting::Yes,
        c.now,
        || snapshot(&c, DumpFormat::Text),
    );
    assert!(
        !node.contains("brake") && !pod.contains("brake"),
        "{node}{pod}"
    );
    assert!(!pod.contains("eviction timing"), "{pod}");
}
