//! The monitor pass leaves out the nodes whose evaluation would do nothing. This differential test
//! runs the controller fuzz harness's scripts (the seed corpus and random
//! ones: kubelets stopping and coming back, status flapping, failed and conflicting writes,
//! failing Lease reads, nodes deleted and re-created, pods coming and going) once with that
//! pass and once with the reference pass that evaluates every node, and requires the very same
//! actions and decisions at the very same virtual instants.

use crate::fuzz_support::controller::{Coverage, corpus, run_controller_recording};
use crate::fuzz_support::engine::generate;

const RANDOM_SCRIPTS: u64 = 400;
const SEED: u64 = 14;

fn same_story(script: &[u8]) -> Coverage {
    let (coverage, reference) = run_controller_recording(script, true)
        .unwrap_or_else(|e| panic!("reference pass broke an invariant: {e}\n{script:?}"));
    let (_, optimized) = run_controller_recording(script, false)
        .unwrap_or_else(|e| panic!("settled-node pass broke an invariant: {e}\n{script:?}"));
    if let Some(i) =
        (0..reference.len().max(optimized.len())).find(|&i| reference.get(i) != optimized.get(i))
    {
        panic!(
            "the passes diverge at output {i} of script {script:?}:\nreference: {:?}\nsettled:   {:?}",
            reference.get(i),
            optimized.get(i)
        );
    }
    coverage
}

#[test]
fn a_monitor_pass_that_skips_settled_nodes_takes_every_decision_the_full_pass_takes() {
    let seeds = corpus();
    let mut total = Coverage::default();
    let mut add = |c: Coverage| {
        total.unknown_verdicts += c.unknown_verdicts;
        total.no_execute_taints += c.no_execute_taints;
        total.evictions += c.evictions;
        total.lease_reads += c.lease_reads;
    };
    for script in &seeds {
        add(same_story(script));
    }
    for index in 0..RANDOM_SCRIPTS {
        add(same_story(&generate(&seeds, &[], SEED, index)));
    }
    // Not vacuous: the scripts reached verdicts, taints, evictions and live reads.
    assert!(total.unknown_verdicts > 0, "{total:?}");
    assert!(total.no_execute_taints > 0, "{total:?}");
    assert!(total.evictions > 0, "{total:?}");
    assert!(total.lease_reads > 0, "{total:?}");
}
