#!/usr/bin/env python3
"""Several daemon binaries side by side on a loaded real API server (a STATE kept by
bench-real-apiserver.py --keep), in dry-run: no start-up RegisteredNode event POSTs (2,000 at
5/s), so no 420 s settle is needed and any number of binaries share each steady window. Prints,
per window and binary: steady CPU (% of a core), CPU per watch event, loop wake-ups/s. A quick
look for A/B/C while working (issue #14); the figures to report are bench-real-apiserver.py's.

  scripts/probe-real-apiserver.py --state DIR [--window 60] [--windows 3] NAME=BINARY ...
"""
import argparse, importlib.util, os, tempfile, time
spec = importlib.util.spec_from_file_location('bench', os.path.join(os.path.dirname(os.path.abspath(__file__)), 'bench-real-apiserver.py'))
b = importlib.util.module_from_spec(spec); spec.loader.exec_module(b)

ap = argparse.ArgumentParser()
ap.add_argument('--state', required=True)
ap.add_argument('--nodes', type=int, default=2000)
ap.add_argument('--window', type=float, default=60)
ap.add_argument('--windows', type=int, default=3)
ap.add_argument('--settle', type=float, default=20)
ap.add_argument('bins', nargs='+')
a = ap.parse_args()
v = b.vars_of(a.state)
work = tempfile.mkdtemp(prefix='probe-real-')
hb = b.Heartbeat(v, a.nodes, 12 + len(a.bins) * 60 + a.settle + a.windows * (a.window + 5) + 60, work)
ds = []
try:
    time.sleep(12)
    for spec_ in a.bins:
        name, path = spec_.split('=', 1)
        d = b.Daemon(path, v, os.path.join(work, name), dry_run=True)
        sync, _ = d.wait_ready(120)
        print(f'{name}: sync {sync:.2f} s', flush=True)
        ds.append((name, d))
    time.sleep(a.settle)
    for w in range(a.windows):
        start = {n: (d.dump()['wakeups'], b.proc_stat(d.pid)[0]) for n, d in ds}
        t0, e0 = time.monotonic(), time.time()
        time.sleep(a.window)
        end = {n: b.proc_stat(d.pid)[0] for n, d in ds}
        t1, e1 = time.monotonic(), time.time()
        wk = {n: d.dump()['wakeups'] for n, d in ds}
        time.sleep(2.5)
        ev = hb.events_between(e0, e1)
        la = open('/proc/loadavg').read().split()[:3]
        row = []
        for n, _ in ds:
            cpu = (end[n] - start[n][1]) / b.TICK
            row.append(f'{n}: {100*cpu/(t1-t0):.3f} % {1e6*cpu/ev:.1f} us/ev {(wk[n]-start[n][0]-1)/(t1-t0):.1f} wk/s')
        print(f'window {w+1} ({ev/(t1-t0):.1f} ev/s, load {" ".join(la)}): ' + ' | '.join(row), flush=True)
finally:
    for _, d in ds:
        d.stop()
    hb.stop()
print('logs', work)
