//! Wall-clock bounds that hold on a busy machine: how long a thread waited for a CPU (ready to
//! run, but every core taken by other work) is not the code under test's doing, so the tests
//! that bound real time subtract it. From /proc's schedstat; zero where that is not available
//! (the bounds are then plain wall-clock bounds).

use std::time::Duration;

/// Run-queue wait of the calling thread so far.
pub fn runqueue_wait() -> Duration {
    schedstat_wait(std::path::Path::new("/proc/thread-self/schedstat"))
}

/// Run-queue wait so far of this process's thread named `name` (its first one).
pub fn runqueue_wait_of(name: &str) -> Duration {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return Duration::ZERO;
    };
    for task in tasks.flatten() {
        let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
        if comm.trim_end() == name {
            return schedstat_wait(&task.path().join("schedstat"));
        }
    }
    Duration::ZERO
}

/// The second field of a schedstat file: nanoseconds spent waiting on a run queue.
fn schedstat_wait(path: &std::path::Path) -> Duration {
    std::fs::read_to_string(path)
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<u64>().ok())
        .map(Duration::from_nanos)
        .unwrap_or_default()
}
