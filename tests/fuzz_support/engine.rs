//! The mutation engine: a deterministic xorshift RNG, byte-level mutations of a seed corpus, one
//! `catch_unwind` per input, and the largest allocation of each input (read from the shared
//! counting allocator), which tells an allocation sized from a length field instead of from the
//! bytes actually received.
//!
//! Input `i` of a run is a pure function of `(seed, i)`: a crash that kills the process (an
//! abort, a stack overflow) is replayed from the last checkpoint by the `fuzz` example's
//! supervisor, which then saves the input that did it.

use std::cell::{Cell, RefCell};
use std::panic::{self, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use node_lifecycled_sim::testing::Rng;

/// Inputs never grow beyond this (the largest seed, a 21 KB pod, fits with room to mutate).
pub const MAX_INPUT: usize = 96 * 1024;

/// No single allocation may exceed this plus the target's `alloc_per_byte` per input byte:
/// the parsers buffer what they receive, never what a header or a size field announces.
pub const ALLOC_BASE: usize = 4 * 1024 * 1024;
/// The default `alloc_per_byte`.
pub const ALLOC_PER_INPUT_BYTE: usize = 32;
/// Above this a request is refused outright (the process aborts and the supervisor replays the
/// input) rather than risking the machine's memory.
pub const ALLOC_REFUSE: usize = 1 << 30;

thread_local! {
    static PANIC_MESSAGE: RefCell<Option<String>> = const { RefCell::new(None) };
    /// Inside [`execute`]: panics are recorded, not printed.
    static QUIET: Cell<bool> = const { Cell::new(false) };
}

/// The shared counting allocator: a fuzz binary installs
/// `CountingAlloc::refusing_above(ALLOC_REFUSE)`, and [`take_largest_allocation`] tells the
/// largest single request of this thread since the last call (0 without the allocator).
pub use node_lifecycled_sim::testing::{CountingAlloc, take_largest_allocation};

/// What one input did that it must not.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Violation {
    Panic(String),
    /// A property of the target failed (the parser returned something inconsistent).
    Property(String),
    /// One allocation far larger than the input could justify.
    Allocation {
        bytes: usize,
        input: usize,
    },
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Violation::Panic(m) => write!(f, "panic: {m}"),
            Violation::Property(m) => write!(f, "property violated: {m}"),
            Violation::Allocation { bytes, input } => write!(
                f,
                "allocated {bytes} bytes at once for an input of {input} bytes"
            ),
        }
    }
}

/// Installs (once) a panic hook that records the message instead of printing it, so a fuzz run
/// is not flooded; the message is reported with the input.
pub fn quiet_panics() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let default = panic::take_hook();
        panic::set_hook(Box::new(move |info| {
            let quiet = QUIET.try_with(Cell::get).unwrap_or(false);
            let recorded = quiet
                && PANIC_MESSAGE
                    .try_with(|m| {
                        let location = info
                            .location()
                            .map(|l| format!(" at {}:{}", l.file(), l.line()))
                            .unwrap_or_default();
                        let text = if let Some(s) = info.payload().downcast_ref::<&str>() {
                            (*s).to_string()
                        } else if let Some(s) = info.payload().downcast_ref::<String>() {
                            s.clone()
                        } else {
                            "non-string panic".to_string()
                        };
                        *m.borrow_mut() = Some(format!("{text}{location}"));
                    })
                    .is_ok();
            if !recorded {
                default(info);
            }
        }));
    });
}

/// Runs one input through `run`, catching panics and checking the largest allocation against
/// the default bound.
pub fn execute(run: fn(&[u8]) -> Result<(), String>, input: &[u8]) -> Result<(), Violation> {
    execute_bounded(run, input, ALLOC_PER_INPUT_BYTE)
}

/// [`execute`] with `alloc_per_byte` bytes of single allocation allowed per input byte.
pub fn execute_bounded(
    run: fn(&[u8]) -> Result<(), String>,
    input: &[u8],
    alloc_per_byte: usize,
) -> Result<(), Violation> {
    quiet_panics();
    take_largest_allocation();
    QUIET.with(|q| q.set(true));
    let outcome = panic::catch_unwind(AssertUnwindSafe(|| run(input)));
    QUIET.with(|q| q.set(false));
    let largest = take_largest_allocation();
    match outcome {
        Err(_) => {
            let message = PANIC_MESSAGE
                .with(|m| m.borrow_mut().take())
                .unwrap_or_else(|| "unknown panic".to_string());
            Err(Violation::Panic(message))
        }
        Ok(Err(property)) => Err(Violation::Property(property)),
        Ok(Ok(())) => {
            if largest > ALLOC_BASE + alloc_per_byte * input.len() {
                Err(Violation::Allocation {
                    bytes: largest,
                    input: input.len(),
                })
            } else {
                Ok(())
            }
        }
    }
}

/// Numbers that break length and size fields, as text (decimal and hex).
const INTERESTING_NUMBERS: &[&[u8]] = &[
    b"0",
    b"-1",
    b"1",
    b"00",
    b"255",
    b"65536",
    b"2147483648",
    b"4294967296",
    b"9223372036854775807",
    b"9223372036854775808",
    b"18446744073709551615",
    b"18446744073709551616",
    b"99999999999999999999999999",
    b"1152921504606846976",
    b"1000000000000000",
    b"fffffffffffffff",
    b"ffffffffffffffff",
    b"7fffffffffffffff",
    b"40000000",
    b"1e309",
    b"-0",
    b"1.7976931348623157e308",
    b"NaN",
];

/// Single bytes that mean something to one of the parsers.
const INTERESTING_BYTES: &[u8] = b"\0\r\n\t \"\\{}[]:,;=#'.-0aZ\x7f\x80\xff";

/// Derives the generator for input `index` of a run with `seed`.
pub fn input_rng(seed: u64, index: u64) -> Rng {
    Rng::new(seed ^ index.wrapping_mul(0xD6E8_FEB8_6659_FD93).rotate_left(17))
}

/// Makes input `index` of a run: one seed from `corpus`, 1 to 8 stacked mutations.
pub fn generate(corpus: &[Vec<u8>], dict: &[&[u8]], seed: u64, index: u64) -> Vec<u8> {
    let mut rng = input_rng(seed, index);
    let mut data = corpus[rng.below(corpus.len() as u64) as usize].clone();
    // A few inputs stay unmutated (the seeds themselves must pass).
    if index < corpus.len() as u64 {
        return corpus[index as usize].clone();
    }
    let rounds = 1 + rng.below(8);
    for _ in 0..rounds {
        mutate(&mut rng, &mut data, corpus, dict);
    }
    data.truncate(MAX_INPUT);
    data
}

fn pos(rng: &mut Rng, len: usize) -> usize {
    rng.below(len as u64 + 1) as usize
}

fn mutate(rng: &mut Rng, data: &mut Vec<u8>, corpus: &[Vec<u8>], dict: &[&[u8]]) {
    match rng.below(14) {
        // Flip one bit.
        0 if !data.is_empty() => {
            let i = rng.below(data.len() as u64) as usize;
            data[i] ^= 1 << rng.below(8);
        }
        // Set a byte to a random or an interesting value.
        1 if !data.is_empty() => {
            let i = rng.below(data.len() as u64) as usize;
            data[i] = rng.next_u64() as u8;
        }
        2 if !data.is_empty() => {
            let i = rng.below(data.len() as u64) as usize;
            data[i] = INTERESTING_BYTES[rng.below(INTERESTING_BYTES.len() as u64) as usize];
        }
        // Insert random bytes.
        3 => {
            let at = pos(rng, data.len());
            let n = 1 + rng.below(16) as usize;
            let bytes: Vec<u8> = (0..n).map(|_| rng.next_u64() as u8).collect();
            data.splice(at..at, bytes);
        }
        // Delete a range.
        4 if !data.is_empty() => {
            let at = rng.below(data.len() as u64) as usize;
            let n = 1 + rng.below((data.len() - at).min(64) as u64) as usize;
            data.drain(at..at + n);
        }
        // Duplicate a range, sometimes many times (deep nesting, long lines).
        5 if !data.is_empty() => {
            let at = rng.below(data.len() as u64) as usize;
            let n = 1 + rng.below((data.len() - at).min(128) as u64) as usize;
            let times = if rng.chance(20) {
                1 + rng.below(512)
            } else {
                1 + rng.below(4)
            };
            let piece = data[at..at + n].to_vec();
            let mut repeated = Vec::new();
            for _ in 0..times {
                if repeated.len() + data.len() > MAX_INPUT {
                    break;
                }
                repeated.extend_from_slice(&piece);
            }
            let to = pos(rng, data.len());
            data.splice(to..to, repeated);
        }
        // Insert or overwrite with a dictionary token.
        6 | 7 if !dict.is_empty() => {
            let token = dict[rng.below(dict.len() as u64) as usize];
            let at = pos(rng, data.len());
            if rng.chance(50) {
                data.splice(at..at, token.iter().copied());
            } else {
                let end = (at + token.len()).min(data.len());
                data.splice(at..end, token.iter().copied());
            }
        }
        // Replace a run of digits (a length, a size, a number) with an interesting number.
        8 | 9 => {
            let number = INTERESTING_NUMBERS[rng.below(INTERESTING_NUMBERS.len() as u64) as usize];
            let digits: Vec<usize> = data
                .iter()
                .enumerate()
                .filter(|(i, b)| {
                    b.is_ascii_hexdigit() && (*i == 0 || !data[i - 1].is_ascii_hexdigit())
                })
                .map(|(i, _)| i)
                .collect();
            if digits.is_empty() {
                let at = pos(rng, data.len());
                data.splice(at..at, number.iter().copied());
            } else {
                let start = digits[rng.below(digits.len() as u64) as usize];
                let end = start
                    + data[start..]
                        .iter()
                        .take_while(|b| b.is_ascii_hexdigit())
                        .count();
                data.splice(start..end, number.iter().copied());
            }
        }
        // Splice: a prefix of this input and a suffix of another seed.
        10 => {
            let other = &corpus[rng.below(corpus.len() as u64) as usize];
            let cut = pos(rng, data.len());
            let from = pos(rng, other.len());
            data.truncate(cut);
            data.extend_from_slice(&other[from..]);
        }
        // Truncate.
        11 => {
            let at = pos(rng, data.len());
            data.truncate(at);
        }
        // Swap two bytes.
        12 if data.len() >= 2 => {
            let a = rng.below(data.len() as u64) as usize;
            let b = rng.below(data.len() as u64) as usize;
            data.swap(a, b);
        }
        // Copy a range over another place in the input.
        _ if !data.is_empty() => {
            let from = rng.below(data.len() as u64) as usize;
            let n = 1 + rng.below((data.len() - from).min(64) as u64) as usize;
            let piece = data[from..from + n].to_vec();
            let to = rng.below(data.len() as u64) as usize;
            let end = (to + n).min(data.len());
            data.splice(to..end, piece);
        }
        _ => data.push(rng.next_u64() as u8),
    }
}

/// One fuzz target: seeds, a dictionary, and the check run on every input.
pub struct Target {
    pub name: &'static str,
    pub corpus: fn() -> Vec<Vec<u8>>,
    pub dict: &'static [&'static [u8]],
    /// `Err` is a property violation (a parser *error* is a value and returns `Ok`).
    pub run: fn(&[u8]) -> Result<(), String>,
    /// Largest single allocation allowed per input byte (above [`ALLOC_BASE`]).
    pub alloc_per_byte: usize,
}

impl Target {
    /// Runs one input with this target's allocation bound.
    pub fn execute(&self, input: &[u8]) -> Result<(), Violation> {
        execute_bounded(self.run, input, self.alloc_per_byte)
    }
}

/// A violation with the input that caused it.
#[derive(Debug)]
pub struct Finding {
    pub target: &'static str,
    pub index: u64,
    pub violation: Violation,
    pub input: Vec<u8>,
    /// Where the input was saved, when a findings directory was given.
    pub saved: Option<PathBuf>,
}

#[derive(Debug, Default)]
pub struct Stats {
    pub executions: u64,
    pub elapsed: Duration,
    pub findings: Vec<Finding>,
}

/// How long a run lasts: a number of inputs or a wall-clock budget, whichever comes first.
#[derive(Clone, Copy, Debug)]
pub struct Budget {
    pub max_executions: u64,
    pub max_time: Duration,
    /// Stop after this many findings.
    pub max_findings: usize,
}

/// Saves `input` as `<dir>/<target>-seed<seed>-<index>.bin` with the violation beside it.
pub fn save_finding(
    dir: &Path,
    target: &str,
    seed: u64,
    index: u64,
    violation: &str,
    input: &[u8],
) -> std::io::Result<PathBuf> {
    std::fs::create_dir_all(dir)?;
    let path = dir.join(format!("{target}-seed{seed}-{index}.bin"));
    std::fs::write(&path, input)?;
    std::fs::write(path.with_extension("txt"), format!("{violation}\n"))?;
    Ok(path)
}

/// Runs `target` from input `start` for `budget`. `progress(next_index)` is called every 256
/// inputs (the supervisor's checkpoint); `before(index, input)` before each input (replay
/// mode writes the input to disk there).
pub fn fuzz(
    target: &Target,
    seed: u64,
    start: u64,
    budget: Budget,
    findings_dir: Option<&Path>,
    progress: &mut dyn FnMut(u64),
    before: &mut dyn FnMut(u64, &[u8]),
) -> Stats {
    let corpus = (target.corpus)();
    assert!(!corpus.is_empty(), "{}: empty corpus", target.name);
    let began = Instant::now();
    let mut stats = Stats::default();
    let mut index = start;
    while stats.executions < budget.max_executions {
        if index % 256 == 0 {
            progress(index);
            if began.elapsed() >= budget.max_time {
                break;
            }
        }
        let input = generate(&corpus, target.dict, seed, index);
        before(index, &input);
        if let Err(violation) = target.execute(&input) {
            let text = violation.to_string();
            let saved = findings_dir
                .and_then(|dir| save_finding(dir, target.name, seed, index, &text, &input).ok());
            stats.findings.push(Finding {
                target: target.name,
                index,
                violation,
                input,
                saved,
            });
            if stats.findings.len() >= budget.max_findings {
                stats.executions += 1;
                break;
            }
        }
        stats.executions += 1;
        index += 1;
    }
    stats.elapsed = began.elapsed();
    stats
}

/// A cheap, stable hash of an input (split points that depend only on the input itself).
pub fn input_hash(input: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in input {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}
