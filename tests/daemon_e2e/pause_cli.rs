//! `node-lifecycled pause` and `resume` against the simulated cluster: the fleet pause is an
//! annotation on the leader Lease, and the leader renews that Lease every `retry_period`. A
//! write that meets a 409 (the Lease changed between `resume`'s read and its write) is read and
//! decided again, as client-go's `RetryOnConflict` does; only a Lease that keeps changing fails.

use crate::e2e_support::{Sim, Timing, cli, config_text};
use node_lifecycled_sim::{RequestMatch, Resource, Verb};

const TOKEN: &str = "operator";
const PAUSE: &str = "node-lifecycled.io/pause";

fn pause_annotation(sim: &Sim) -> Option<String> {
    let lease =
        sim.handle
            .cluster()
            .get(Resource::Leases, Some("kube-system"), "node-lifecycled")?;
    lease["metadata"]["annotations"][PAUSE]
        .as_str()
        .map(str::to_string)
}

/// Issue #27's `resume`, met by a leader renewing the Lease: a stale-resourceVersion 409 is
/// not the operator's failure. Two in a row are read past; five in a row give up with exit 69
/// and the server's words, leaving the pause as it was.
#[test]
fn resume_reads_the_lease_again_when_the_leader_renewed_it_between_read_and_write() {
    let sim = Sim::start("pause-cli", &[TOKEN]);
    let timing = Timing {
        leader: Some("operator-host".to_string()),
        ..Timing::default()
    };
    let config = sim
        .dir
        .write("config.toml", &config_text(&sim.kubeconfig(TOKEN), &timing));
    let faults = sim.handle.faults();

    // No Lease yet: `pause` creates it.
    let (code, text) = cli(
        &config,
        &["pause", "fencing", "--for", "5m", "--reason", "bmc"],
    );
    assert_eq!(code, 0, "{text}");
    assert!(
        text.contains("paused on lease kube-system/node-lifecycled"),
        "{text}"
    );
    assert!(pause_annotation(&sim).is_some());

    // Two renewals land between read and write: the third try writes.
    faults.fail_next(RequestMatch::on(Verb::Patch, "leases"), 2, 409);
    let (code, text) = cli(&config, &["resume"]);
    assert_eq!(code, 0, "{text}");
    assert_eq!(text.trim(), "resumed: nothing is paused");
    assert_eq!(pause_annotation(&sim), None);

    // A Lease that changes under every one of five tries: exit 69, the pause untouched.
    let (code, text) = cli(&config, &["pause", "all", "--for", "5m", "--reason", "bmc"]);
    assert_eq!(code, 0, "{text}");
    let before = pause_annotation(&sim);
    assert!(before.is_some());
    faults.fail_next(RequestMatch::on(Verb::Patch, "leases"), 5, 409);
    let (code, text) = cli(&config, &["resume", "fencing"]);
    assert_eq!(code, 69, "{text}");
    assert!(
        text.contains("409") && text.contains("5 times in a row"),
        "{text}"
    );
    assert_eq!(text.trim().lines().count(), 1, "one line: {text}");
    assert_eq!(pause_annotation(&sim), before);

    // The faults are spent: the same command now succeeds and leaves tainting paused.
    let (code, text) = cli(&config, &["resume", "fencing"]);
    assert_eq!(code, 0, "{text}");
    assert!(
        text.starts_with("resumed fencing; still paused: what=tainting "),
        "{text}"
    );
}
