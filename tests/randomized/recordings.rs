//! The controllers' behaviour, pinned: every action and decision, at its virtual instant, of the
//! fuzz harness's 404 scripts (its 4 seed scripts and 400 random ones, seed 14: kubelets
//! stopping and coming back, flapping status, failed and conflicting writes, failing Lease
//! reads, nodes deleted and re-created, pods coming and going), hashed.
//!
//! A change that moves code without changing behaviour (issue #47's refactors) leaves the digest
//! as it is. A change meant to alter a decision, an action or their text changes it: the failure
//! prints the new digest, and the commit that changes the constant says why.

use crate::fuzz_support::controller::{corpus, run_controller_recording};
use crate::fuzz_support::engine::generate;

const RANDOM_SCRIPTS: u64 = 400;
const SEED: u64 = 14;

/// Lines recorded over the 404 scripts, and their FNV-1a digest.
const LINES: usize = 14_320;
const DIGEST: u64 = 0x422f_6898_5cf4_3f23;

/// FNV-1a, 64 bits: enough to tell two recordings apart, and no crate.
fn fnv1a(hash: &mut u64, bytes: &[u8]) {
    for &b in bytes {
        *hash ^= u64::from(b);
        *hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
}

#[test]
fn the_fuzz_scripts_give_the_recorded_actions_and_decisions() {
    let seeds = corpus();
    let scripts = seeds
        .iter()
        .cloned()
        .chain((0..RANDOM_SCRIPTS).map(|i| generate(&seeds, &[], SEED, i)));
    let mut hash = 0xcbf2_9ce4_8422_2325_u64;
    let mut lines = 0;
    for (i, script) in scripts.enumerate() {
        let (_, recording) = run_controller_recording(&script, false)
            .unwrap_or_else(|e| panic!("script {i} broke an invariant: {e}\n{script:?}"));
        fnv1a(&mut hash, format!("script {i}\n").as_bytes());
        for line in &recording {
            fnv1a(&mut hash, line.as_bytes());
            fnv1a(&mut hash, b"\n");
        }
        lines += recording.len();
    }
    assert_eq!(
        (lines, hash),
        (LINES, DIGEST),
        "the controllers' actions or decisions changed: if that is meant, set LINES = {lines} and \
         DIGEST = {hash:#018x} in tests/randomized/recordings.rs and say why in the commit"
    );
}
