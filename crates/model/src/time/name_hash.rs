//! A cheap keyed hash for names (pod, node and namespace names, toleration lists), in place of
//! the standard library's SipHash-1-3 in the store's tables and the interner: a sync from empty
//! hashes every pod's key several times (the pod index, its rebuilds while it grows, the
//! namespace and node interned, the shared scope looked up), and SipHash spends ~20
//! instructions a byte on the short keys names are.
//!
//! The construction is the folded multiply of foldhash and wyhash: 16 bytes at a time, each
//! half XORed with a secret word, multiplied into 128 bits, and the two halves of the product
//! XORed together. The secret words are drawn once per process from the standard library's
//! `RandomState` (its keys come from the operating system), so that names an attacker chooses
//! (pod names are anyone's to choose who may create pods) cannot be precomputed to collide; the
//! tables only ever compare keys for equality, so a collision costs a probe, never a wrong
//! answer.
//!
//! It sits with the bottom layer's other pure tools (the seeded generator, the timer heap):
//! the timer heaps index their keys with it too.
//!
//! Why not depend on the `foldhash` crate: this is about a hundred lines of code, and the
//! project adds a crate only where it is the well-kept standard for a job its dependencies
//! cannot do; foldhash is not in the lock file. Nor would it be a drop-in: its seeding and
//! finish differ, so every hash value would change, and the tests that choose the seeds
//! (`NameHashState::with_seeds`) check this construction, not another.

use std::hash::{BuildHasher, Hasher, RandomState};
use std::sync::OnceLock;

/// The 64-bit product's two halves folded together: every output bit depends on every input
/// bit of both factors (foldhash's and wyhash's `folded_multiply`).
#[inline(always)]
fn folded_multiply(x: u64, y: u64) -> u64 {
    let full = u128::from(x) * u128::from(y);
    (full as u64) ^ ((full >> 64) as u64)
}

/// The secret words: `[initial accumulator, block key, word key, finish key]`.
type Seeds = [u64; 4];

/// This process's seeds, drawn from `RandomState` on first use.
fn process_seeds() -> Seeds {
    static SEEDS: OnceLock<Seeds> = OnceLock::new();
    *SEEDS.get_or_init(|| {
        let state = RandomState::new();
        // Odd constants keep a zero word from zeroing a product (multiplying by an odd number
        // is a bijection on 64 bits).
        [0u64, 1, 2, 3].map(|i| state.hash_one(i) | 1)
    })
}

/// Builds [`NameHasher`]s with this process's seeds (or, in tests, chosen ones).
#[derive(Clone, Copy, Debug)]
pub struct NameHashState {
    seeds: Seeds,
}

impl Default for NameHashState {
    fn default() -> Self {
        NameHashState {
            seeds: process_seeds(),
        }
    }
}

impl NameHashState {
    #[cfg(test)]
    pub(crate) fn with_seeds(seeds: Seeds) -> NameHashState {
        NameHashState { seeds }
    }
}

impl BuildHasher for NameHashState {
    type Hasher = NameHasher;

    #[inline]
    fn build_hasher(&self) -> NameHasher {
        NameHasher {
            acc: self.seeds[0],
            seeds: self.seeds,
        }
    }
}

#[derive(Clone, Debug)]
pub struct NameHasher {
    acc: u64,
    seeds: Seeds,
}

/// Little-endian words from `b` at `at` (the caller checked the length).
#[inline(always)]
fn word64(b: &[u8], at: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(w)
}

#[inline(always)]
fn word32(b: &[u8], at: usize) -> u64 {
    let mut w = [0u8; 4];
    w.copy_from_slice(&b[at..at + 4]);
    u64::from(u32::from_le_bytes(w))
}

impl Hasher for NameHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let [_, block, _, _] = self.seeds;
        let mut acc = self.acc;
        let mut chunks = bytes.chunks_exact(16);
        for c in &mut chunks {
            acc = folded_multiply(word64(c, 0) ^ acc, word64(c, 8) ^ block);
        }
        // The last 0 to 15 bytes as two words, overlapping when there are 4 to 15 (the
        // length, mixed in below, tells the overlaps apart).
        let rest = chunks.remainder();
        let n = rest.len();
        let (a, b) = if n >= 8 {
            (word64(rest, 0), word64(rest, n - 8))
        } else if n >= 4 {
            (word32(rest, 0), word32(rest, n - 4))
        } else if n > 0 {
            (
                u64::from(rest[0]) | u64::from(rest[n / 2]) << 8 | u64::from(rest[n - 1]) << 16,
                0,
            )
        } else {
            (0, 0)
        };
        // The whole length, so that one write of "ab" and writes of "a" then "b" differ.
        let len = (bytes.len() as u64).rotate_left(32);
        self.acc = folded_multiply(a ^ acc, b ^ block ^ len);
    }

    #[inline]
    fn write_u8(&mut self, i: u8) {
        self.write_u64(u64::from(i));
    }

    #[inline]
    fn write_u32(&mut self, i: u32) {
        self.write_u64(u64::from(i));
    }

    #[inline]
    fn write_u64(&mut self, i: u64) {
        self.acc = folded_multiply(self.acc ^ i, self.seeds[2]);
    }

    #[inline]
    fn write_usize(&mut self, i: usize) {
        self.write_u64(i as u64);
    }

    #[inline]
    fn finish(&self) -> u64 {
        // One more multiply, so that both halves of the result are mixed: the pod index takes
        // its home bucket from the high half and a fragment from the low one, hashbrown its
        // bucket from the low bits and its tag from the top seven.
        folded_multiply(self.acc, self.seeds[3])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    fn hash_str(state: &NameHashState, s: &str) -> u64 {
        state.hash_one(s)
    }

    #[test]
    fn equal_inputs_hash_equal_and_different_ones_differ() {
        let state = NameHashState::default();
        for s in ["", "a", "node-1", "web-0000abcd-00abc", &"x".repeat(100)] {
            let copy: String = s.chars().collect();
            assert_eq!(hash_str(&state, s), hash_str(&state, &copy));
            assert_eq!(
                hash_str(&state, s),
                hash_str(&NameHashState::default(), s),
                "one seed per process"
            );
        }
        // Every prefix of a long name (each remainder length and block count) hashes apart.
        let long = "abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJ";
        let hashes: HashSet<u64> = (0..=long.len())
            .map(|n| hash_str(&state, &long[..n]))
            .collect();
        assert_eq!(hashes.len(), long.len() + 1);
        // Splitting the same bytes differently between writes changes the hash.
        let two = |a: &str, b: &str| {
            let mut h = state.build_hasher();
            h.write(a.as_bytes());
            h.write(b.as_bytes());
            h.finish()
        };
        assert_ne!(two("ab", "c"), two("a", "bc"));
        assert_ne!(
            state.hash_one(("team-1", "web")),
            state.hash_one(("team-1w", "eb"))
        );
    }

    #[test]
    fn a_seed_changes_the_hash() {
        let a = NameHashState::with_seeds([1, 3, 5, 7]);
        let b = NameHashState::with_seeds([1, 3, 5, 9]);
        let c = NameHashState::with_seeds([11, 3, 5, 7]);
        let d = NameHashState::with_seeds([1, 13, 5, 7]);
        for s in [
            "",
            "node-1",
            "web-0000abcd-00abc",
            "a-name-of-exactly-32-bytes-long!",
        ] {
            let h = hash_str(&a, s);
            assert_ne!(h, hash_str(&b, s), "{s:?}");
            assert_ne!(h, hash_str(&c, s), "{s:?}");
            assert_ne!(h, hash_str(&d, s), "{s:?}");
        }
    }

    /// Distinct values among `n` hashes' bits `shift..shift + 20` fall short of `n` (the
    /// collisions), against what a random function gives: `n - m(1 - e^(-n/m))` for
    /// `m = 2^20` buckets, about 355,000 for a million names, with a standard deviation of a
    /// few hundred. Within 2 % of it passes.
    fn assert_spread(hashes: &[u64], shift: u32, what: &str) {
        let m = 1u64 << 20;
        let mut seen = vec![false; m as usize];
        let mut collisions = 0u64;
        for h in hashes {
            let b = ((h >> shift) & (m - 1)) as usize;
            if seen[b] {
                collisions += 1;
            }
            seen[b] = true;
        }
        let n = hashes.len() as f64;
        let expected = n - m as f64 * (1.0 - (-n / m as f64).exp());
        assert!(
            (collisions as f64) < expected * 1.02,
            "{what}, bits {shift}..{}: {collisions} collisions, a random function ~{expected:.0}",
            shift + 20
        );
    }

    #[test]
    fn names_spread_like_a_random_function_in_low_and_high_bits() {
        let state = NameHashState::default();
        type Names = fn(u32) -> String;
        let names: [(&str, Names); 3] = [
            ("node-N", |i| format!("node-{i}")),
            ("pod-N", |i| format!("pod-{i}")),
            // As the pod index hashes a key: the namespace, then the name and a separator.
            ("team/web pods", |i| {
                format!("web-{:08x}-{:05x}", i / 3, i % 99_991)
            }),
        ];
        for (what, name) in names {
            let hashes: Vec<u64> = (0..1_000_000u32)
                .map(|i| {
                    let mut h = state.build_hasher();
                    if what == "team/web pods" {
                        h.write(format!("team-{}", i % 10).as_bytes());
                        h.write_u8(0xff);
                    }
                    h.write(name(i).as_bytes());
                    h.write_u8(0xff);
                    h.finish()
                })
                .collect();
            assert_spread(&hashes, 0, what);
            assert_spread(&hashes, 44, what);
            // The pod index's home: bits 32 and up.
            assert_spread(&hashes, 32, what);
        }
    }
}
