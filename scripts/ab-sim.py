#!/usr/bin/env python3
"""Two or more node-lifecycled builds side by side on one simulated cluster: CPU per Lease renewal.

  scripts/ab-sim.py DAEMON DAEMON [DAEMON ...] [--nodes 5000] [--pods 30] [--window 60]
                    [--windows 5] [--sim target/release/node-lifecycled-sim] [--dir DIR]

The bench's CPU per event (`node-lifecycled-sim bench`) moves by up to a sixth between runs of one
binary: the kubelets' phases, the machine's other load and where the caches stand differ from run
to run. A change worth a few tenths of a microsecond an event is lost in that. Here every build
sees the same events at the same moments, so what moves the figure moves it for all of them alike,
and the difference between two builds is their own.

Starts `node-lifecycled-sim serve --nodes N --pods-per-node P --zones 3` (kubelets renew every
10 s: N/10 renewals a second), then one more instance of the first DAEMON, which takes the leader
lease and does the cluster's writes (the start-up `RegisteredNode` Events), then every DAEMON given
twice as a follower, in mirrored order (A B C C B A): each watches, decodes and decides on every
renewal as the leader does, and writes nothing. Where a follower stands in the start order moves
its figure by up to 0.2 µs an event on this machine (the first started, the last started), so each
build is measured at mirrored places and its figure is the mean of its two instances. Once all have
synced and 30 s have passed, it reads each follower's time on a CPU (`/proc/PID/schedstat`,
nanoseconds) at the ends of --windows windows of --window seconds and prints, per window and on
average, each build's CPU per renewal (all its CPU, the fixed costs of a quiet daemon included),
each instance's, and each build's difference from the first. Stops everything at the end.

Exit 0 when every window was measured; 1 when a process died or did not sync; 64 on a usage error.
Needs python3 and release builds (`cargo build --release --bin node-lifecycled --bin
node-lifecycled-sim`; build the other DAEMON from the commit to compare, e.g. in a git worktree).
"""
import argparse, os, shutil, signal, statistics, subprocess, sys, tempfile, time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SETTLE_S = 30
RENEW_INTERVAL_S = 10.0


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def cpu_ns(pid):
    with open(f'/proc/{pid}/schedstat') as f:
        return int(f.read().split()[0])


def wait_for(path, text, proc, timeout, what):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f'{what} exited with {proc.returncode} (log: {path})')
        try:
            with open(path, errors='replace') as f:
                if text in f.read():
                    return
        except FileNotFoundError:
            pass
        time.sleep(0.5)
    raise RuntimeError(f'{what}: no "{text}" in {path} within {timeout} s')


def main():
    p = argparse.ArgumentParser(usage=__doc__.split('\n\n')[1].strip())
    p.add_argument('daemons', nargs='+', help='node-lifecycled binaries to compare (the first is the reference)')
    p.add_argument('--nodes', type=int, default=5000)
    p.add_argument('--pods', type=int, default=30)
    p.add_argument('--window', type=float, default=60.0)
    p.add_argument('--windows', type=int, default=5)
    p.add_argument('--sim', default=os.path.join(ROOT, 'target', 'release', 'node-lifecycled-sim'))
    p.add_argument('--dir', help='where the kubeconfig, the config and the logs go (default: a new temporary folder)')
    try:
        a = p.parse_args()
    except SystemExit as e:
        sys.exit(0 if e.code == 0 else 64)
    if len(a.daemons) < 2 or a.nodes < 1 or a.pods < 0 or a.window <= 0 or a.windows < 1:
        log('ab-sim: give two DAEMON binaries or more, --nodes ≥ 1, --pods ≥ 0, --window > 0, --windows ≥ 1')
        sys.exit(64)
    for path in [a.sim] + a.daemons:
        if not (os.path.isfile(path) and os.access(path, os.X_OK)):
            log(f'ab-sim: {path}: not an executable file')
            sys.exit(64)
    work = a.dir or tempfile.mkdtemp(prefix='ab-sim-')
    os.makedirs(work, exist_ok=True)
    procs = []

    def start(argv, log_name):
        out = open(os.path.join(work, log_name), 'w')
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)
        procs.append(proc)
        return proc

    config = os.path.join(work, 'config.toml')
    try:
        serve_log = os.path.join(work, 'serve.log')
        serve = start([a.sim, 'serve', '--nodes', str(a.nodes), '--pods-per-node', str(a.pods),
                       '--zones', '3', '--dir', work], 'serve.log')
        wait_for(serve_log, 'kubelets renew', serve, 120, 'node-lifecycled-sim serve')
        # The leader: the first build once more, under a name of its own.
        leader_bin = os.path.join(work, 'leader-node-lifecycled')
        shutil.copy(a.daemons[0], leader_bin)
        leader = start([leader_bin, '--config', config], 'leader.log')
        wait_for(os.path.join(work, 'leader.log'), 'acting as leader', leader, 120, 'the leader')
        # (build index, process) in mirrored start order.
        order = list(range(len(a.daemons)))
        followers = []
        for n, i in enumerate(order + order[::-1]):
            path = a.daemons[i]
            name = f'{n}-{os.path.basename(path)}.log'
            proc = start([path, '--config', config], name)
            wait_for(os.path.join(work, name), 'initial sync complete', proc, 120, path)
            followers.append((i, proc))
        log(f'all {len(followers)} followers synced; settling {SETTLE_S} s; logs in {work}')
        time.sleep(SETTLE_S)
        rate = a.nodes / RENEW_INTERVAL_S
        rows = []
        for w in range(a.windows):
            before = [cpu_ns(proc.pid) for _, proc in followers]
            t0 = time.time()
            time.sleep(a.window)
            after = [cpu_ns(proc.pid) for _, proc in followers]
            dt = time.time() - t0
            named = [(a.daemons[i], proc) for i, proc in followers]
            for path, proc in named + [('the leader', leader), ('the simulator', serve)]:
                if proc.poll() is not None:
                    raise RuntimeError(f'{path} exited with {proc.returncode} during window {w + 1}')
            per_instance = [(b - s) / 1e3 / (rate * dt) for s, b in zip(before, after)]
            # Per build: the mean of its two instances.
            row = [statistics.mean(x for (i, _), x in zip(followers, per_instance) if i == b)
                   for b in range(len(a.daemons))]
            rows.append((row, per_instance))
            print(f'window {w + 1}: ' + '  '.join(f'{x:.2f}' for x in row) + ' µs per renewal (instances in start order: '
                  + ' '.join(f'{x:.2f}' for x in per_instance) + ')', flush=True)
        print(f'{a.nodes} nodes, {rate:.0f} renewals/s, {a.windows} × {a.window:.0f} s; µs of CPU per renewal '
              '(all the follower\'s CPU, the mean of its two instances):')
        for b, path in enumerate(a.daemons):
            column = [r[b] for r, _ in rows]
            places = [n for n, (i, _) in enumerate(followers) if i == b]
            by_place = ', '.join(f'started {n + 1}: {statistics.mean(p[n] for _, p in rows):.2f}' for n in places)
            line = f'  {path}: mean {statistics.mean(column):.2f}, median {statistics.median(column):.2f} ({by_place})'
            if b > 0:
                diffs = [r[b] - r[0] for r, _ in rows]
                line += (f'; against the first: mean {statistics.mean(diffs):+.2f} '
                         f'(per window ' + ' '.join(f'{d:+.2f}' for d in diffs) + ')')
            print(line, flush=True)
        return 0
    except (RuntimeError, OSError) as e:
        log(f'ab-sim: {e}')
        return 1
    finally:
        for proc in reversed(procs):
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in procs:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()


if __name__ == '__main__':
    sys.exit(main())
