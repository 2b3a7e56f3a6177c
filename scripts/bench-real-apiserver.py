#!/usr/bin/env python3
"""node-lifecycled against the real kube-apiserver (issue #14): sync time, RSS, steady CPU, CPU per event.

  scripts/bench-real-apiserver.py [--nodes 500] [--pods 30] [--window 120] [--runs 1]
                                  [--state DIR] [--keep] [--daemon target/release/node-lifecycled]
                                  [--apiserver PATH --etcd PATH] [--kcm PATH]

Starts the real API server tier (scripts/real-apiserver/up.sh: etcd + kube-apiserver v1.20.2, or
the builds --apiserver and --etcd name, e.g. scripts/build-kube.sh's 1.37.2), applies
conf/rbac.yaml, creates N nodes x P pods with load.py and plays the kubelets (every Lease renewed
every 10 s, every node's status patched every 60 s) for the whole run; the rates they achieved in
the window are reported beside those targets. Then, per run:

- the API server's own floor: the daemon's three LISTs fetched with curl to /dev/null, both as
  resourceVersion=0 (served from the watch cache, one response) and as consistent pages of 500
  (from etcd), one kind after the other, as the daemon does, with the CPU each way cost
  kube-apiserver and etcd (utime+stime of their pids; the same for the daemon's own sync);
- the release daemon (leader election off, the user of conf/rbac.yaml) from spawn to READY=1 on an
  sd_notify socket this script listens on (initial sync), RSS sampled every 100 ms (peak up to 1 s
  after READY), then after 10 s of settling a steady window: utime+stime from /proc/PID/stat as %
  of one core, divided by the watch events the kubelets caused in that window (Lease renewals +
  node status patches, from load.py's cumulative counts) = CPU per watch event; loop wake-ups from
  SIGUSR1 JSON dumps at both ends.
  --after-backlog QUIET_S starts the window only once no daemon has POSTed an Event for QUIET_S
  seconds: the start-up `RegisteredNode` Events (one per node, 5 a second) are sent, and the
  window holds the steady state alone. Without it the window falls inside that backlog.

--baseline PATH runs a second daemon binary (e.g. the build before a change) beside the first: each
syncs on its own, one after the other, then both are measured in the same steady window, so the
comparison does not depend on the machine's load or the kubelets' achieved rate.

--kcm PATH runs kube-controller-manager beside the daemon, as kube-controller-manager of the same
version as the server should be (--apiserver/--etcd: scripts/build-kube.sh's builds; a version
mismatch is warned about). Only `--controllers=node-lifecycle-controller,taint-eviction-controller`,
`--leader-elect=false --use-service-account-credentials=false --secure-port=0` as the
real-API-server tests start it (tests/real_apiserver_support/upstream.rs), and otherwise its own
defaults: timing (monitor period 5 s, grace 50 s, eviction rate 0.1), --kube-api-qps 20 /
--kube-api-burst 30 (the daemon's defaults too), log verbosity (0). It runs live, as
system:kube-controller-manager (a certificate from the tier's CA, bound to cluster-admin, as
--use-service-account-credentials=false asks). Two live controllers would fight over the same nodes,
so with --kcm the daemon (and any --baseline) runs in dry-run: it lists, watches and decides as
ever, and only its writes are skipped. Both sync one after the other (the daemon first), then both
are measured in the same steady window. kube-controller-manager's figures are the daemon's: sync =
spawn to the later of its two controllers' "Caches are synced" log lines (Nodes, Pods, Leases,
DaemonSets listed), by the log's timestamps; its own CPU and the API server's and etcd's for it; RSS
sampled the same way (peak to 1 s after sync, the window's median, VmHWM); steady CPU and CPU per
watch event over the same window and events. Its start-up RegisteredNode Events (20 a second at qps
20) are counted from a watch on Events, so --after-backlog waits for them too. A side-by-side table
follows each run: figure | node-lifecycled | kube-controller-manager | ratio.

--floor SIM runs `SIM floor-reader` (node-lifecycled-sim) in the same steady window: a bare reader
of the same Lease and Node watches over the same TLS, on the daemon's read grid, which finds each
frame and reads each object's name and nothing else. Its CPU per event is the floor any reader of
these watches pays on this server and machine; the daemon's figure less it is the daemon's own work.

--state DIR reuses a loaded server from an earlier --keep run (skips up.sh and create); --keep
leaves it running and prints its STATE. Only process CPU time is measured (this machine is shared).
Needs python3, curl, kubectl, a release build (`cargo build --release`), and openssl for --kcm.
"""
import argparse, json, os, re, signal, socket, statistics, subprocess, sys, tempfile, time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TIER = os.path.join(ROOT, 'scripts', 'real-apiserver')
TICK = os.sysconf('SC_CLK_TCK')
FLOOR_WARMUP = 10  # seconds
KINDS = [('nodes', '/api/v1/nodes'),
         ('leases', '/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases'),
         ('pods', '/api/v1/pods?fieldSelector=spec.nodeName%21%3D')]


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def up(state, extra_env=None):
    env = dict(os.environ, **(dict(STATE=state) if state else {}), **(extra_env or {}))
    out = subprocess.run([os.path.join(TIER, 'up.sh')], env=env, check=True, capture_output=True, text=True).stdout
    return dict(line.split('=', 1) for line in out.splitlines() if '=' in line)


def vars_of(state):
    """The KEY=value set up.sh printed, rebuilt for an existing STATE folder."""
    kc = open(os.path.join(state, 'admin.kubeconfig')).read()
    url = re.search(r'server: (\S+)', kc).group(1)
    return dict(STATE=state, APISERVER_URL=url, CA_FILE=f'{state}/pki/ca.crt',
                ADMIN_KUBECONFIG=f'{state}/admin.kubeconfig', DAEMON_KUBECONFIG=f'{state}/daemon.kubeconfig')


def curl_list(v, path, rv0):
    """Wall time of one kind's LIST with curl (pages of 500 followed by continue tokens unless rv0)."""
    pki = os.path.join(v['STATE'], 'pki')
    auth = ['--cacert', v['CA_FILE'], '--cert', f'{pki}/daemon.crt', '--key', f'{pki}/daemon.key']
    sep = '&' if '?' in path else '?'
    total, pages, token, nbytes = 0.0, 0, None, 0
    with tempfile.NamedTemporaryFile() as tmp:
        while True:
            if rv0:
                url, dest = f"{v['APISERVER_URL']}{path}{sep}resourceVersion=0", '/dev/null'
            else:
                url = f"{v['APISERVER_URL']}{path}{sep}limit=500" + (f'&continue={token}' if token else '')
                dest = tmp.name
            t = time.monotonic()
            # Not curl's own User-Agent: the API server pretty-prints JSON for curl and wget.
            out = subprocess.run(['curl', '-sS', '-f', '-A', 'bench-real-apiserver', '-o', dest, '-w', '%{size_download}', *auth,
                                  '-H', 'Accept: application/json', url], check=True, capture_output=True, text=True).stdout
            total += time.monotonic() - t
            nbytes += int(out)
            pages += 1
            if rv0:
                return total, pages, nbytes
            with open(tmp.name, 'rb') as f:
                head = f.read(4096).decode('utf-8', 'replace')
            m = re.search(r'"continue":\s*"([^"]*)"', head)
            if not m or not m.group(1):
                return total, pages, nbytes
            token = urllib_quote(m.group(1))


def server_version(v):
    """The API server's gitVersion (GET /version)."""
    pki = os.path.join(v['STATE'], 'pki')
    out = subprocess.run(['curl', '-sS', '-f', '-A', 'bench-real-apiserver', '--cacert', v['CA_FILE'], '--cert', f'{pki}/daemon.crt',
                          '--key', f'{pki}/daemon.key', f"{v['APISERVER_URL']}/version"], capture_output=True, text=True)
    try:
        return json.loads(out.stdout)['gitVersion']
    except (ValueError, KeyError):
        return 'version unknown'


def urllib_quote(s):
    from urllib.parse import quote
    return quote(s, safe='')


def proc_stat(pid):
    """(CPU ticks utime+stime, VmRSS KiB, VmHWM KiB)."""
    with open(f'/proc/{pid}/stat') as f:
        fields = f.read().rsplit(')', 1)[1].split()
    ticks = int(fields[11]) + int(fields[12])
    rss = hwm = 0
    with open(f'/proc/{pid}/status') as f:
        for line in f:
            if line.startswith('VmRSS:'):
                rss = int(line.split()[1])
            elif line.startswith('VmHWM:'):
                hwm = int(line.split()[1])
    return ticks, rss, hwm


class Heartbeat:
    """load.py heartbeat in the background; its progress lines give cumulative event counts."""

    def __init__(self, v, nodes, duration, workdir):
        self.path = os.path.join(workdir, 'heartbeat.log')
        self.proc = subprocess.Popen([sys.executable, os.path.join(TIER, 'load.py'), '--kubeconfig', v['ADMIN_KUBECONFIG'],
                                      'heartbeat', '--nodes', str(nodes), '--duration', str(duration), '--report-every', '2'],
                                     stdout=open(self.path, 'w'), stderr=subprocess.STDOUT)

    def points(self, which=('leases', 'status')):
        """(epoch, cumulative count) per progress line: Lease renewals, status patches or both."""
        pts = []
        for line in open(self.path):
            m = re.search(r'epoch=(?P<t>[\d.]+) .*cum_leases=(?P<leases>\d+) cum_status=(?P<status>\d+)', line)
            if m:
                pts.append((float(m.group('t')), sum(int(m.group(k)) for k in which)))
        return pts

    def events_between(self, t0, t1, which=('leases', 'status')):
        """Lease + status writes between two epochs (or one kind of them), interpolated between
        progress lines."""
        pts = self.points(which)

        def at(t):
            for (ta, ca), (tb, cb) in zip(pts, pts[1:]):
                if ta <= t <= tb:
                    return ca + (cb - ca) * (t - ta) / max(tb - ta, 1e-9)
            raise RuntimeError(f'no heartbeat progress around {t:.1f} ({self.path})')
        return at(t1) - at(t0)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


class Daemon:
    """The release daemon against the kept server; `dry_run` for side-by-side probes (no writes)."""
    def __init__(self, binary, v, workdir, dry_run=False):
        self.dir = workdir
        os.makedirs(workdir, exist_ok=True)
        cfg = os.path.join(workdir, 'config.toml')
        with open(cfg, 'w') as f:
            f.write('# written by scripts/bench-real-apiserver.py\nlog_level = "info"\ndump_format = "json"\n'
                    + ('dry_run = true\n' if dry_run else '') + '\n'
                    f'[api]\nkubeconfig = "{v["DAEMON_KUBECONFIG"]}"\n\n[leader_election]\nenabled = false\n')
        self.notify_path = os.path.join(workdir, 'notify.sock')
        if os.path.exists(self.notify_path):
            os.unlink(self.notify_path)
        self.notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.notify.bind(self.notify_path)
        self.log_path = os.path.join(workdir, 'node-lifecycled.log')
        env = {k: val for k, val in os.environ.items() if k not in ('RUST_LOG', 'WATCHDOG_USEC', 'WATCHDOG_PID')}
        env['NOTIFY_SOCKET'] = self.notify_path
        self.started = time.monotonic()
        logf = open(self.log_path, 'w')
        self.proc = subprocess.Popen([binary, '--config', cfg], stdin=subprocess.DEVNULL, stdout=logf, stderr=logf, env=env)
        self.pid = self.proc.pid

    def wait_ready(self, timeout):
        """Seconds from spawn to READY=1, and the RSS samples (KiB) taken meanwhile and 1 s after."""
        self.notify.settimeout(0.1)
        samples, ready_at = [], None
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f'daemon exited {self.proc.returncode}: {self.log_path}')
            samples.append(proc_stat(self.pid)[1])
            try:
                if b'READY=1' in self.notify.recv(4096) and ready_at is None:
                    ready_at = time.monotonic()
                    self.sync_cpu_s = proc_stat(self.pid)[0] / TICK
            except socket.timeout:
                pass
            now = time.monotonic()
            if ready_at is not None and now - ready_at >= 1.0:
                return ready_at - self.started, samples
            if now - self.started > timeout:
                raise RuntimeError(f'no READY=1 within {timeout}s: {self.log_path}')

    def dump(self, section='loop'):
        """A section of a fresh SIGUSR1 JSON dump (the loop counters by default)."""
        before = open(self.log_path, errors='replace').read().count('"dump":"node-lifecycled"')
        self.proc.send_signal(signal.SIGUSR1)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            text = open(self.log_path, errors='replace').read()
            dumps = [line for line in text.splitlines() if '"dump":"node-lifecycled"' in line]
            if len(dumps) > before:
                return json.loads(dumps[-1][dumps[-1].index('{'):])[section]
            time.sleep(0.05)
        raise RuntimeError(f'no dump within 10 s: {self.log_path}')

    def creates(self):
        """The POSTs the daemon has made (its Events: a healthy cluster asks no other create)."""
        return sum(r['count'] for r in self.dump('client')['requests'] if r['verb'] == 'POST')

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.notify.close()


# kube-controller-manager's identity, with what --use-service-account-credentials=false asks of it:
# every controller it runs acts as itself (tests/real_apiserver_support/upstream.rs does the same
# for the daemon's user).
KCM_USER = 'system:kube-controller-manager'
KCM_BINDING = f"""apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {{name: bench-kube-controller-manager}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cluster-admin}}
subjects: [{{apiGroup: rbac.authorization.k8s.io, kind: User, name: '{KCM_USER}'}}]
"""
KCM_SYNCED = re.compile(r'^I(\d\d)(\d\d) (\d\d):(\d\d):(\d\d\.\d+) .*"Caches are synced"', re.M)


class ControllerManager:
    """kube-controller-manager running only the node lifecycle and taint eviction controllers,
    live, with its own defaults (timing, --kube-api-qps 20 / burst 30, log verbosity), as
    system:kube-controller-manager (a client certificate from the tier's CA)."""

    def __init__(self, binary, v, workdir):
        os.makedirs(workdir, exist_ok=True)
        pki = os.path.join(v['STATE'], 'pki')
        key, crt, csr = (os.path.join(workdir, f) for f in ('kcm.key', 'kcm.crt', 'kcm.csr'))
        subprocess.run(['openssl', 'req', '-newkey', 'rsa:2048', '-nodes', '-keyout', key, '-out', csr, '-subj', f'/CN={KCM_USER}'],
                       check=True, capture_output=True)
        subprocess.run(['openssl', 'x509', '-req', '-in', csr, '-CA', f'{pki}/ca.crt', '-CAkey', f'{pki}/ca.key',
                        '-CAserial', os.path.join(workdir, 'ca.srl'), '-CAcreateserial', '-out', crt, '-days', '2',
                        '-extfile', f'{pki}/client.ext'], check=True, capture_output=True)
        kubeconfig = os.path.join(workdir, 'kubeconfig')
        with open(kubeconfig, 'w') as f:
            f.write(f"apiVersion: v1\nkind: Config\nclusters:\n- name: test\n  cluster:\n    server: {v['APISERVER_URL']}\n"
                    f"    certificate-authority: {v['CA_FILE']}\nusers:\n- name: kcm\n  user:\n    client-certificate: {crt}\n"
                    f"    client-key: {key}\ncontexts:\n- name: test\n  context: {{cluster: test, user: kcm}}\ncurrent-context: test\n")
        self.version = subprocess.run([binary, '--version'], capture_output=True, text=True).stdout.strip()
        self.log_path = os.path.join(workdir, 'kube-controller-manager.log')
        logf = open(self.log_path, 'w')
        self.started, self.started_epoch = time.monotonic(), time.time()
        self.proc = subprocess.Popen([binary, f'--kubeconfig={kubeconfig}',
                                      '--controllers=node-lifecycle-controller,taint-eviction-controller',
                                      '--leader-elect=false', '--use-service-account-credentials=false', '--secure-port=0'],
                                     stdin=subprocess.DEVNULL, stdout=logf, stderr=logf)
        self.pid = self.proc.pid

    def synced_at(self):
        """Seconds from spawn to the later of its two controllers' "Caches are synced" lines (the
        node lifecycle controller waits for the Node, Pod, Lease and DaemonSet informers, taint
        eviction for the Node and Pod ones), by the log's own timestamps; None before both."""
        text = open(self.log_path, errors='replace').read()
        stamps, waits = KCM_SYNCED.findall(text), max(2, text.count('"Waiting for caches to sync"'))
        if len(stamps) < waits:
            return None
        mon, day, hh, mm, ss = stamps[waits - 1]
        now = time.localtime(self.started_epoch)
        at = time.mktime((now.tm_year, int(mon), int(day), int(hh), int(mm), 0, 0, 0, -1)) + float(ss)
        return at - self.started_epoch

    def wait_ready(self, timeout):
        """Seconds from spawn to both controllers' caches synced, the RSS samples (KiB) taken
        meanwhile and 1 s after, and its CPU seconds up to then."""
        samples, seen = [], None
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f'kube-controller-manager exited {self.proc.returncode}: {self.log_path}')
            ticks, rss, _ = proc_stat(self.pid)
            samples.append(rss)
            now = time.monotonic()
            if seen is None:
                sync = self.synced_at()
                if sync is not None:
                    seen, cpu_s = now, ticks / TICK
            elif now - seen >= 1.0:
                return sync, samples, cpu_s
            if now - self.started > timeout:
                raise RuntimeError(f'caches not synced within {timeout}s: {self.log_path}')
            time.sleep(0.1)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


class EventWatch:
    """A watch on every Event from now on (curl, the admin identity): with the daemon in dry-run,
    kube-controller-manager is the only writer of Events, so the count of watch events is its
    Event writes (the start-up RegisteredNode ones)."""

    def __init__(self, v, workdir):
        pki = os.path.join(v['STATE'], 'pki')
        auth = ['-A', 'bench-real-apiserver', '--cacert', v['CA_FILE'], '--cert', f'{pki}/admin.crt', '--key', f'{pki}/admin.key',
                '-H', 'Accept: application/json']
        head = json.loads(subprocess.run(['curl', '-sS', '-f', *auth, f"{v['APISERVER_URL']}/api/v1/events?limit=1"],
                                         check=True, capture_output=True, text=True).stdout)
        self.path = os.path.join(workdir, 'events.watch')
        self.proc = subprocess.Popen(['curl', '-sS', '-N', *auth, f"{v['APISERVER_URL']}/api/v1/events?watch=1"
                                      f"&resourceVersion={head['metadata']['resourceVersion']}&timeoutSeconds=3600"],
                                     stdout=open(self.path, 'w'), stderr=subprocess.DEVNULL)

    def count(self):
        return open(self.path, errors='replace').read().count('{"type":')

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait()


def server_ticks(v):
    """CPU ticks (utime+stime) of kube-apiserver and of etcd, from the pid files up.sh wrote."""
    ticks = {}
    for name in ('kube-apiserver', 'etcd'):
        try:
            pid = int(open(os.path.join(v['STATE'], 'run', f'{name}.pid')).read().split()[0])
            ticks[name] = proc_stat(pid)[0]
        except (OSError, ValueError):
            ticks[name] = None
    return ticks


def server_cpu_since(v, before):
    """Seconds of CPU kube-apiserver and etcd spent since `before` (None where unreadable)."""
    after = server_ticks(v)
    return {name: (None if before[name] is None or after[name] is None else round((after[name] - before[name]) / TICK, 2))
            for name in before}


def curl_floor(v):
    """Wall time of each kind's LIST both ways, and what each way cost the API server and etcd
    in CPU (the kubelets' load runs meanwhile, so the server's figures include its share of it:
    compare the two ways, which run back to back)."""
    res = {}
    for rv0 in (True, False):
        way = "rv0" if rv0 else "pages"
        total = 0.0
        before = server_ticks(v)
        for kind, path in KINDS:
            t, pages, nbytes = curl_list(v, path, rv0)
            res[f'curl_{way}_{kind}_s'] = round(t, 2)
            res[f'list_{kind}_mib'] = round(nbytes / 2**20, 1)
            total += t
        res[f'curl_{way}_total_s'] = round(total, 2)
        cpu = server_cpu_since(v, before)
        res[f'curl_{way}_apiserver_cpu_s'] = cpu['kube-apiserver']
        res[f'curl_{way}_etcd_cpu_s'] = cpu['etcd']
    return res


def drained_after_backlog(a, counters, res):
    """Waits until no daemon has made an API create for `a.after_backlog` seconds: the start-up
    `RegisteredNode` Events (one per node, 5 a second, the queue capped at 1,000) are sent, so
    the window that follows holds the steady state alone. Records how long that took.
    `counters`: (prefix, a function counting the Event writes so far), one per daemon (its POSTs)
    and one for kube-controller-manager with --kcm (the Events watched)."""
    t0 = time.monotonic()
    last = {prefix: (count(), t0) for prefix, count in counters}
    while True:
        time.sleep(2)
        now = time.monotonic()
        for prefix, count in counters:
            n = count()
            if n != last[prefix][0]:
                last[prefix] = (n, now)
        if all(now - at >= a.after_backlog for _, at in last.values()):
            break
        if now - t0 > 900:
            raise RuntimeError('the Event backlog did not drain within 900 s')
    res['backlog_wait_s'] = round(time.monotonic() - t0, 1)
    res.update({prefix + 'startup_events': n for prefix, (n, _) in last.items()})


def measure(a, v, hb, workdir):
    """The curl floor, then each daemon (the baseline's too, with --baseline) synced one after
    the other and measured together in one steady window: same server, same kubelet load.
    With --kcm the daemons run in dry-run and kube-controller-manager, live, syncs after them
    and is measured in the same window."""
    res = curl_floor(v)
    binaries = [('', a.daemon)] + ([('baseline_', a.baseline)] if a.baseline else [])
    daemons, kcm, events = [], None, None
    try:
        for prefix, binary in binaries:
            before = server_ticks(v)
            d = Daemon(binary, v, os.path.join(workdir, prefix + 'daemon'), dry_run=bool(a.kcm))
            daemons.append((prefix, d))
            sync, samples = d.wait_ready(a.sync_timeout)
            cpu = server_cpu_since(v, before)
            res[prefix + 'sync_s'] = round(sync, 2)
            res[prefix + 'sync_cpu_s'] = round(d.sync_cpu_s, 2)
            res[prefix + 'sync_apiserver_cpu_s'] = cpu['kube-apiserver']
            res[prefix + 'sync_etcd_cpu_s'] = cpu['etcd']
            res[prefix + 'peak_rss_sync_mib'] = round(max(samples) / 1024, 1)
        procs = [(prefix, d.pid) for prefix, d in daemons]
        counters = [(prefix, d.creates) for prefix, d in daemons]
        if a.kcm:
            events = EventWatch(v, workdir)
            before = server_ticks(v)
            kcm = ControllerManager(a.kcm, v, os.path.join(workdir, 'kcm'))
            sync, samples, sync_cpu = kcm.wait_ready(a.sync_timeout)
            cpu = server_cpu_since(v, before)
            res.update(kcm_version=kcm.version, kcm_sync_s=round(sync, 2), kcm_sync_cpu_s=round(sync_cpu, 2),
                       kcm_sync_apiserver_cpu_s=cpu['kube-apiserver'], kcm_sync_etcd_cpu_s=cpu['etcd'],
                       kcm_peak_rss_sync_mib=round(max(samples) / 1024, 1))
            procs.append(('kcm_', kcm.pid))
            counters.append(('kcm_', events.count))
        time.sleep(a.settle)
        if a.after_backlog:
            drained_after_backlog(a, counters, res)
        floor = None
        if a.floor:
            # Its warm-up (the current state's ADDED events) ends as the window starts.
            floor = subprocess.Popen([a.floor, 'floor-reader', '--kubeconfig', v['DAEMON_KUBECONFIG'],
                                      '--warmup', f'{FLOOR_WARMUP}s', '--duration', f'{int(a.window * 1000)}ms'],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            time.sleep(FLOOR_WARMUP)
        loops0 = {prefix: d.dump() for prefix, d in daemons}
        start = {prefix: proc_stat(pid)[0] for prefix, pid in procs}
        t0, e0 = time.monotonic(), time.time()
        rss = {prefix: [] for prefix, _ in procs}
        while time.monotonic() - t0 < a.window:
            for prefix, pid in procs:
                rss[prefix].append(proc_stat(pid)[1])
            time.sleep(0.5)
        end = {prefix: (proc_stat(pid), time.monotonic()) for prefix, pid in procs}
        e1 = time.time()
        loops = {prefix: d.dump() for prefix, d in daemons}
        time.sleep(2.5)  # the next heartbeat progress line covers e1
        events_in_window = hb.events_between(e0, e1)
        for prefix, _ in procs:
            (c1, _, hwm), t1 = end[prefix]
            cpu_s = (c1 - start[prefix]) / TICK
            res.update({prefix + 'steady_rss_mib': round(statistics.median(rss[prefix]) / 1024, 1),
                        prefix + 'hwm_mib': round(hwm / 1024, 1), prefix + 'window_s': round(t1 - t0, 1),
                        prefix + 'cpu_s': round(cpu_s, 2), prefix + 'steady_cpu_pct': round(100 * cpu_s / (t1 - t0), 3),
                        prefix + 'events_per_s': round(events_in_window / (t1 - t0), 1),
                        prefix + 'us_per_event': round(1e6 * cpu_s / max(events_in_window, 1), 1)})
            if prefix in loops:
                res[prefix + 'wakeups_per_s'] = round((loops[prefix]['wakeups'] - loops0[prefix]['wakeups'] - 1) / (t1 - t0), 1)
        # What the kubelets achieved in the window, beside what they aim at (a Lease every 10 s,
        # a status patch every 60 s per node): the events per second above are only a load if kept.
        res.update(lease_per_s=round(hb.events_between(e0, e1, ('leases',)) / (e1 - e0), 1), target_lease_per_s=round(a.nodes / 10, 1),
                   status_per_s=round(hb.events_between(e0, e1, ('status',)) / (e1 - e0), 1), target_status_per_s=round(a.nodes / 60, 1))
        if floor:
            out, err = floor.communicate(timeout=a.window + 60)
            if floor.returncode != 0:
                raise RuntimeError(f'floor reader failed ({floor.returncode}): {err.strip()}')
            f = json.loads(out.strip().splitlines()[-1])
            if f['us_per_event'] is None:
                raise RuntimeError('the floor reader read no event in its window')
            res.update({'floor_us_per_event': round(f['us_per_event'], 1),
                        'floor_events_per_s': round(f['events_per_s'], 1),
                        'floor_wakeups_per_s': round(f['wakeups_per_s'], 1)})
        res['loadavg'] = open('/proc/loadavg').read().split()[:3]
    finally:
        if kcm:
            kcm.stop()
        if events:
            events.stop()
        for _, d in daemons:
            d.stop()
    return res


SIDE_BY_SIDE = [  # (figure, key without prefix, unit)
    ('sync: spawn to synced', 'sync_s', 's'),
    ('  its own CPU for the sync', 'sync_cpu_s', 's'),
    ('  kube-apiserver CPU for it', 'sync_apiserver_cpu_s', 's'),
    ('  etcd CPU for it', 'sync_etcd_cpu_s', 's'),
    ('peak RSS up to 1 s after sync', 'peak_rss_sync_mib', 'MiB'),
    ('steady RSS (median of the window)', 'steady_rss_mib', 'MiB'),
    ('peak RSS by the window\'s end (VmHWM)', 'hwm_mib', 'MiB'),
    ('steady CPU, % of a core', 'steady_cpu_pct', '%'),
    ('CPU per watch event', 'us_per_event', 'µs'),
    ('start-up Event writes', 'startup_events', ''),
]


def side_by_side(res):
    """A Markdown table: figure | node-lifecycled | kube-controller-manager | ratio (kcm / daemon)."""
    lines = ['| figure | node-lifecycled (dry-run) | kube-controller-manager | kcm / daemon |', '|---|---|---|---|']
    for label, key, unit in SIDE_BY_SIDE:
        d, k = res.get(key), res.get('kcm_' + key)
        if d is None and k is None:
            continue
        ratio = f'{k / d:.1f}×' if isinstance(d, (int, float)) and isinstance(k, (int, float)) and d else '—'
        fmt = lambda x: '—' if x is None else f'{x} {unit}'.strip()
        lines.append(f'| {label} | {fmt(d)} | {fmt(k)} | {ratio} |')
    return '\n'.join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--nodes', type=int, default=500)
    ap.add_argument('--pods', type=int, default=30, help='pods per node')
    ap.add_argument('--window', type=float, default=120, help='steady window, seconds')
    ap.add_argument('--settle', type=float, default=10, help='seconds between READY and the window')
    ap.add_argument('--after-backlog', type=float, default=0, metavar='QUIET_S',
                    help='start the window only when no daemon has POSTed an Event for QUIET_S seconds '
                         '(the start-up RegisteredNode backlog sent): the steady state alone')
    ap.add_argument('--runs', type=int, default=1)
    ap.add_argument('--state', help='reuse a loaded server (a STATE folder kept with --keep)')
    ap.add_argument('--keep', action='store_true', help='leave the server running')
    ap.add_argument('--sync-timeout', type=float, default=300)
    ap.add_argument('--floor', metavar='SIM', help='node-lifecycled-sim: its floor-reader measured in the same window')
    ap.add_argument('--baseline', help='a second daemon binary measured beside --daemon in the same window')
    ap.add_argument('--kcm', metavar='PATH', help='kube-controller-manager (node lifecycle + taint eviction, live) beside the '
                    'daemon in dry-run, measured in the same window; a side-by-side table')
    ap.add_argument('--apiserver', metavar='PATH', help='the kube-apiserver up.sh starts (APISERVER; default its 1.20.2 build)')
    ap.add_argument('--etcd', metavar='PATH', help='the etcd up.sh starts (ETCD; default Debian\'s)')
    ap.add_argument('--daemon', default=os.path.join(os.environ.get('CARGO_TARGET_DIR', os.path.join(ROOT, 'target')),
                                                      'release', 'node-lifecycled'))
    a = ap.parse_args()
    if not os.access(a.daemon, os.X_OK):
        sys.exit(f'no daemon binary at {a.daemon}: cargo build --release (or --daemon PATH)')
    if a.kcm and not os.access(a.kcm, os.X_OK):
        sys.exit(f'no kube-controller-manager at {a.kcm} (scripts/build-kube.sh VERSION builds one)')
    reuse = a.state is not None
    if reuse and (a.apiserver or a.etcd):
        sys.exit('--apiserver and --etcd start a new server: not with --state')
    tier_env = {k: os.path.abspath(p) for k, p in (('APISERVER', a.apiserver), ('ETCD', a.etcd)) if p}
    v = vars_of(a.state) if reuse else up(None, tier_env)
    log(f"API server {v['APISERVER_URL']} (STATE={v['STATE']}), {server_version(v)}")
    workdir = tempfile.mkdtemp(prefix='bench-real-')
    hb = None
    try:
        subprocess.run(['kubectl', '--kubeconfig', v['ADMIN_KUBECONFIG'], 'apply', '-f', os.path.join(ROOT, 'conf', 'rbac.yaml')],
                       check=True, capture_output=True)
        if a.kcm:
            subprocess.run(['kubectl', '--kubeconfig', v['ADMIN_KUBECONFIG'], 'apply', '-f', '-'], input=KCM_BINDING.encode(),
                           check=True, capture_output=True)
            kcm_version = subprocess.run([a.kcm, '--version'], capture_output=True, text=True).stdout.split()[-1]
            if kcm_version != server_version(v):
                log(f'warning: kube-controller-manager {kcm_version} against kube-apiserver {server_version(v)}')
            log(f'kube-controller-manager {kcm_version} beside node-lifecycled in dry-run (it syncs, watches and decides; '
                'its writes are skipped): both measured in the same steady window')
        if not reuse:
            t = time.monotonic()
            subprocess.run([sys.executable, os.path.join(TIER, 'load.py'), '--kubeconfig', v['ADMIN_KUBECONFIG'], 'create',
                            '--nodes', str(a.nodes), '--pods', str(a.pods)], check=True, stdout=sys.stderr)
            log(f'created {a.nodes} nodes x {a.pods} pods in {time.monotonic() - t:.0f} s')
        per_run = (3 * 60 + a.settle + a.window + a.sync_timeout * (1 + bool(a.baseline) + bool(a.kcm))
                   + (900 + a.after_backlog if a.after_backlog else 0))
        hb = Heartbeat(v, a.nodes, per_run * a.runs + 60, workdir)
        time.sleep(12)  # one full lease period: the renewals are spread before anything is measured
        for run in range(a.runs):
            res = dict(nodes=a.nodes, pods=a.nodes * a.pods, run=run + 1, **measure(a, v, hb, workdir))
            print(json.dumps(res), flush=True)
            log(f"run {run + 1}: sync {res['sync_s']} s (curl floor: RV=0 {res['curl_rv0_total_s']} s, pages of 500 "
                f"{res['curl_pages_total_s']} s; API server / etcd CPU: RV=0 {res['curl_rv0_apiserver_cpu_s']} / "
                f"{res['curl_rv0_etcd_cpu_s']} s, pages {res['curl_pages_apiserver_cpu_s']} / {res['curl_pages_etcd_cpu_s']} s, "
                f"the daemon's sync {res['sync_apiserver_cpu_s']} / {res['sync_etcd_cpu_s']} s), peak RSS {res['peak_rss_sync_mib']} MiB, steady RSS {res['steady_rss_mib']} MiB, "
                f"steady CPU {res['steady_cpu_pct']} % of a core, {res['events_per_s']} events/s, "
                f"{res['us_per_event']} us per event, {res['wakeups_per_s']} wake-ups/s; load average {' '.join(res['loadavg'])}; "
                f"the kubelets' {res['lease_per_s']} Lease renewals/s (target {res['target_lease_per_s']}) and "
                f"{res['status_per_s']} status patches/s (target {res['target_status_per_s']})"
                + (f"; window after the start-up Events ({res['startup_events']} sent, {res['backlog_wait_s']} s waited)"
                   if a.after_backlog else ''))
            if a.floor:
                log(f"  floor (a bare reader of the same watches): {res['floor_us_per_event']} us per event, "
                    f"{res['floor_events_per_s']} events/s, {res['floor_wakeups_per_s']} wake-ups/s")
            if a.kcm:
                log(f"  kube-controller-manager {res['kcm_version'].split()[-1]}: sync {res['kcm_sync_s']} s, "
                    f"steady CPU {res['kcm_steady_cpu_pct']} % of a core, {res['kcm_us_per_event']} us per event\n"
                    f"{a.nodes} nodes x {a.pods} pods, {res['events_per_s']} watch events/s in the window "
                    f"({res['lease_per_s']} Lease renewals/s of {res['target_lease_per_s']}), node-lifecycled in dry-run:\n"
                    + side_by_side(res))
            if a.baseline:
                log(f"  baseline: sync {res['baseline_sync_s']} s, steady CPU {res['baseline_steady_cpu_pct']} % of a core, "
                    f"{res['baseline_us_per_event']} us per event, {res['baseline_wakeups_per_s']} wake-ups/s")
    finally:
        if hb:
            hb.stop()
        if a.keep or reuse:
            log(f"server left running: --state {v['STATE']}  (stop: {TIER}/down.sh {v['STATE']})")
        else:
            subprocess.run([os.path.join(TIER, 'down.sh'), v['STATE']])
        log(f'logs: {workdir}')


if __name__ == '__main__':
    main()
