//! The built-in scenarios played end to end against the real daemon binary, several at once.
//!
//! A play is a simulated API server with its kubelets and one daemon, and spends its 20–40 s
//! mostly waiting for wall-clock time (grace periods, tolerations, cooldowns). The test harness
//! runs as many tests at a time as the machine has cores, so on two cores the 17 plays took
//! 17 × ~30 s / 2. Instead, the first play a test asks for starts every built-in play,
//! [`AT_ONCE`] at a time (`NODE_LIFECYCLED_PLAYS_AT_ONCE` overrides it), and each test waits for
//! its own: every play is still its own named test that fails alone and shows its run. Given a
//! filter (`cargo test --test simulator fencing`), the binary plays only what a test asks for.

use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex, OnceLock};

use node_lifecycled_sim::scenario::{self, BUILTIN, RunOptions, Scenario};

/// Plays at once by default: a play's daemon and simulator use a few percent of a core, so four
/// keep two cores far from busy (checked with the machine also compiling).
const AT_ONCE: usize = 4;

/// Plays `name` (a built-in) and fails the calling test with its printed run if it did not hold.
pub fn play_builtin(name: &str) {
    let outcome = if filtered() {
        play(name)
    } else {
        Plays::shared().wait(name)
    };
    if let Err(failure) = outcome {
        panic!("{failure}");
    }
}

/// One play: `Err` carries the whole printed run.
fn play(name: &str) -> Result<(), String> {
    let scenario = Scenario::load(name).map_err(|e| format!("scenario {name}: {e}"))?;
    let options = RunOptions {
        daemon: PathBuf::from(env!("CARGO_BIN_EXE_node-lifecycled")),
        config: None,
        work_dir: None,
    };
    let mut out = Vec::new();
    let report = scenario::run(&scenario, &options, &mut out);
    let printed = String::from_utf8_lossy(&out);
    match report {
        Ok(r) if r.passed => Ok(()),
        Ok(_) => Err(format!("scenario {name} failed:\n{printed}")),
        Err(e) => Err(format!("scenario {name} could not run: {e}\n{printed}")),
    }
}

/// Whether the binary was given a test filter (a positional argument): then only the plays its
/// tests ask for run.
fn filtered() -> bool {
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        if matches!(
            arg.as_str(),
            "--test-threads" | "--skip" | "--format" | "--color" | "-Z" | "--logfile"
        ) {
            args.next();
        } else if !arg.starts_with('-') {
            return true;
        }
    }
    false
}

/// Every built-in play, started once for the whole binary.
struct Plays {
    outcomes: Mutex<HashMap<String, Result<(), String>>>,
    finished: Condvar,
}

impl Plays {
    fn shared() -> &'static Arc<Plays> {
        static PLAYS: OnceLock<Arc<Plays>> = OnceLock::new();
        PLAYS.get_or_init(|| {
            let plays = Arc::new(Plays {
                outcomes: Mutex::new(HashMap::new()),
                finished: Condvar::new(),
            });
            let queue: Arc<Mutex<VecDeque<&'static str>>> =
                Arc::new(Mutex::new(BUILTIN.iter().map(|(name, _)| *name).collect()));
            let at_once = std::env::var("NODE_LIFECYCLED_PLAYS_AT_ONCE")
                .ok()
                .and_then(|v| v.parse().ok())
                .filter(|n: &usize| *n > 0)
                .unwrap_or(AT_ONCE);
            for _ in 0..at_once {
                let (plays, queue) = (Arc::clone(&plays), Arc::clone(&queue));
                std::thread::spawn(move || {
                    loop {
                        let next = queue.lock().unwrap().pop_front();
                        let Some(name) = next else { break };
                        // A panic inside a play is its failure, not a lost result.
                        let outcome = std::panic::catch_unwind(|| play(name))
                            .unwrap_or_else(|_| Err(format!("scenario {name} panicked")));
                        plays
                            .outcomes
                            .lock()
                            .unwrap()
                            .insert(name.to_string(), outcome);
                        plays.finished.notify_all();
                    }
                });
            }
            plays
        })
    }

    fn wait(&self, name: &str) -> Result<(), String> {
        if !BUILTIN.iter().any(|(n, _)| *n == name) {
            return Err(format!("no built-in scenario {name}"));
        }
        let mut outcomes = self.outcomes.lock().unwrap();
        loop {
            if let Some(outcome) = outcomes.remove(name) {
                return outcome;
            }
            outcomes = self.finished.wait(outcomes).unwrap();
        }
    }
}
