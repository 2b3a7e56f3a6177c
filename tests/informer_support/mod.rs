//! A small owner of informers on the real `EventLoop`, as the daemon will be: it routes the
//! loop's events and timers to the informers and keeps a test-side store per kind, fed only by
//! the deltas. `run_until` turns the loop until a condition holds (or fails the test with the
//! informers' stats). A periodic probe timer measures how late the loop fires timers.
#![allow(dead_code)] // shared by several test groups: each uses its own part

use std::collections::HashMap;
use std::time::{Duration, Instant};

use mio::Token;
use mio::event::Event;
use node_lifecycled::kube::decode::{DecodeContext, decode_object};
use node_lifecycled::kube::reflector::{Delta, ReflectorConfig, Watched};
use node_lifecycled::kube::{
    ApiClient, ClientSettings, Connection, Credentials, Scheme, TokenSource,
};
use node_lifecycled::model::{Lease, Node, Pod};
use node_lifecycled::runtime::informer::{Informer, InformerConfig, InformerIo, InformerStats};
use node_lifecycled::runtime::{Clock, EventLoop, Handler, LoopControl};
use node_lifecycled::time::Time;
use node_lifecycled_sim::{Resource, SimHandle, fixtures};
use serde_json::Value;

/// Loop sources and timers of the test owner.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Id {
    Nodes,
    Leases,
    Pods,
    /// Re-evaluates the `run_until` condition.
    Check,
    /// Measures timer lateness.
    Probe,
}

/// One informer and the store its deltas build (as the daemon's store does: an upsert of the
/// version already held is no change; a full state removes what it did not deliver).
pub struct Tracked<T: Watched> {
    pub informer: Informer<T, Id, Id>,
    pub store: HashMap<T::Key, T>,
    pub syncs: u32,
    /// Upserts that changed the store.
    pub upserts: u64,
    pub deleted: Vec<T::Key>,
    /// Keys delivered by the full state in progress.
    seen: Option<std::collections::HashSet<T::Key>>,
}

impl<T: Watched> Tracked<T> {
    pub fn new(config: InformerConfig, id: Id) -> Tracked<T> {
        Tracked {
            informer: Informer::new(config, 7, id, id),
            store: HashMap::new(),
            syncs: 0,
            upserts: 0,
            deleted: Vec::new(),
            seen: None,
        }
    }

    fn apply(&mut self, deltas: Vec<Delta<T>>) {
        for delta in deltas {
            match delta {
                Delta::Begin => self.seen = Some(Default::default()),
                Delta::Upsert(obj) => {
                    let key = obj.key();
                    if let Some(seen) = &mut self.seen {
                        seen.insert(key.clone());
                    }
                    let same = self
                        .store
                        .get(&key)
                        .is_some_and(|held| held.resource_version() == obj.resource_version());
                    if !same {
                        self.upserts += 1;
                        self.store.insert(key, obj);
                    }
                }
                Delta::Delete(key) => {
                    if self.store.remove(&key).is_some() {
                        self.deleted.push(key);
                    }
                }
                Delta::Synced => {
                    self.syncs += 1;
                    let seen = self.seen.take().unwrap_or_default();
                    let gone: Vec<T::Key> = self
                        .store
                        .keys()
                        .filter(|k| !seen.contains(*k))
                        .cloned()
                        .collect();
                    for key in gone {
                        self.store.remove(&key);
                        self.deleted.push(key);
                    }
                }
            }
        }
    }

    fn on_ready(&mut self, io: &mut InformerIo<'_, Id, Id>, token: Token) {
        let mut out = Vec::new();
        self.informer.on_ready(io, token, &mut out);
        self.apply(out);
    }

    fn on_timer(&mut self, io: &mut InformerIo<'_, Id, Id>) {
        let mut out = Vec::new();
        self.informer.on_timer(io, &mut out);
        self.apply(out);
    }

    pub fn stats(&self) -> InformerStats {
        self.informer.stats()
    }
}

/// A periodic timer and how late each firing was.
pub struct Probe {
    pub period: Duration,
    pub due: Time,
    pub lateness: Vec<Duration>,
    /// A lazy probe (the daemon's pass): it may fire this much before `due`, on a wake-up
    /// something else makes, and its next `due` is a period after the last one.
    pub early: Duration,
}

pub struct Harness {
    pub client: ApiClient,
    pub connection: Connection,
    pub tokens: TokenSource,
    pub decode: DecodeContext,
    pub nodes: Option<Tracked<Node>>,
    pub leases: Option<Tracked<Lease>>,
    pub pods: Option<Tracked<Pod>>,
    pub probe: Option<Probe>,
    /// The most CPU time one informer call took on the loop thread (descheduling excluded).
    pub max_call_cpu: Duration,
    /// CPU time of every informer call, in order.
    pub call_cpu: Vec<Duration>,
}

/// CPU time of the calling thread: what the loop itself spent, whatever else the machine does.
#[cfg(target_os = "linux")]
pub fn thread_cpu_time() -> Duration {
    #[repr(C)]
    struct Timespec {
        tv_sec: i64,
        tv_nsec: i64,
    }
    unsafe extern "C" {
        fn clock_gettime(clock: i32, tp: *mut Timespec) -> i32;
    }
    const CLOCK_THREAD_CPUTIME_ID: i32 = 3;
    let mut ts = Timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a live timespec the call fills in; the clock id is a Linux constant.
    let rc = unsafe { clock_gettime(CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime");
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

impl Harness {
    pub fn new(connection: Connection, clock: &Clock, settings: ClientSettings) -> Harness {
        // RUST_LOG=node_lifecycled=debug shows the informers' decisions.
        let _ = env_logger::builder().is_test(true).try_init();
        let client_clock = clock.clone();
        let client = ApiClient::new(&connection, &settings, Box::new(move || client_clock.now()))
            .expect("API client");
        let tokens = TokenSource::new(&connection.credentials, clock.now()).expect("token");
        Harness {
            client,
            connection,
            tokens,
            decode: DecodeContext::new(),
            nodes: None,
            leases: None,
            pods: None,
            probe: None,
            max_call_cpu: Duration::ZERO,
            call_cpu: Vec::new(),
        }
    }

    /// Starts every informer present.
    pub fn start(&mut self, lp: &mut LoopControl<Id, Id>) {
        if let Some(t) = &mut self.nodes {
            t.informer.start(lp);
        }
        if let Some(t) = &mut self.leases {
            t.informer.start(lp);
        }
        if let Some(t) = &mut self.pods {
            t.informer.start(lp);
        }
    }

    pub fn start_probe(&mut self, lp: &mut LoopControl<Id, Id>, period: Duration) {
        let due = lp.now() + period;
        lp.schedule(Id::Probe, due);
        self.probe = Some(Probe {
            period,
            due,
            lateness: Vec::new(),
            early: Duration::ZERO,
        });
    }

    /// A probe as the daemon's pass: lazy from `early` before each tick, ticks a period apart.
    pub fn start_lazy_probe(
        &mut self,
        lp: &mut LoopControl<Id, Id>,
        period: Duration,
        early: Duration,
    ) {
        let due = lp.now() + period;
        lp.schedule_lazy(Id::Probe, before(due, early), due);
        self.probe = Some(Probe {
            period,
            due,
            lateness: Vec::new(),
            early,
        });
    }

    pub fn stats(&self) -> String {
        let mut s = String::new();
        if let Some(t) = &self.nodes {
            s.push_str(&format!("nodes: {:?} store {}\n", t.stats(), t.store.len()));
        }
        if let Some(t) = &self.leases {
            s.push_str(&format!(
                "leases: {:?} store {}\n",
                t.stats(),
                t.store.len()
            ));
        }
        if let Some(t) = &self.pods {
            s.push_str(&format!("pods: {:?} store {}\n", t.stats(), t.store.len()));
        }
        s
    }

    pub fn pods(&self) -> &Tracked<Pod> {
        self.pods.as_ref().expect("a pod informer")
    }

    pub fn nodes(&self) -> &Tracked<Node> {
        self.nodes.as_ref().expect("a node informer")
    }

    pub fn leases(&self) -> &Tracked<Lease> {
        self.leases.as_ref().expect("a lease informer")
    }

    /// Turns the loop until `done` holds; fails the test after `limit` with `what` and the stats.
    /// Returns how long it took.
    pub fn run_until(
        &mut self,
        lp: &mut EventLoop<Id, Id>,
        limit: Duration,
        what: &str,
        done: impl FnMut(&mut Harness) -> bool,
    ) -> Duration {
        self.run(lp, limit, what, Some(Duration::from_millis(10)), done)
    }

    /// Turns the loop for `window` with no timer of the harness's own but the one that ends
    /// it: the loop wakes only for the informers and the probe.
    pub fn run_quietly_for(&mut self, lp: &mut EventLoop<Id, Id>, window: Duration) {
        self.turn(lp, window, None, |_| false);
    }

    /// Turns the loop for `window`, calling `observe` after every handler call and every
    /// 10 ms: what a test checks holds throughout a window.
    pub fn observe_for(
        &mut self,
        lp: &mut EventLoop<Id, Id>,
        window: Duration,
        mut observe: impl FnMut(&mut Harness),
    ) {
        self.turn(lp, window, Some(Duration::from_millis(10)), |h| {
            observe(h);
            false
        });
    }

    /// `run_until` without the 10 ms check timer: `done` is evaluated after every handler
    /// call, and the only timer of the harness's own is the one at `limit`. So the loop wakes
    /// only for the informers (and the probe): what a test counts wake-ups with.
    pub fn run_quietly_until(
        &mut self,
        lp: &mut EventLoop<Id, Id>,
        limit: Duration,
        what: &str,
        done: impl FnMut(&mut Harness) -> bool,
    ) -> Duration {
        self.run(lp, limit, what, None, done)
    }

    fn run(
        &mut self,
        lp: &mut EventLoop<Id, Id>,
        limit: Duration,
        what: &str,
        check_every: Option<Duration>,
        done: impl FnMut(&mut Harness) -> bool,
    ) -> Duration {
        let started = Instant::now();
        let met = self.turn(lp, limit, check_every, done);
        assert!(met, "{what}: not within {limit:?}\n{}", self.stats());
        started.elapsed()
    }

    /// Turns the loop until `done` holds or `limit` passed; says whether `done` held.
    fn turn(
        &mut self,
        lp: &mut EventLoop<Id, Id>,
        limit: Duration,
        check_every: Option<Duration>,
        done: impl FnMut(&mut Harness) -> bool,
    ) -> bool {
        let started = Instant::now();
        // This run must not see the stop request that ended the previous one.
        lp.control().resume();
        let check = match check_every {
            Some(_) => lp.control().now(),
            None => lp.control().now() + limit,
        };
        lp.control().schedule(Id::Check, check);
        let mut until = Until {
            harness: self,
            done,
            deadline: started + limit,
            check_every,
            met: false,
        };
        lp.run(&mut until).expect("loop");
        lp.control().cancel(&Id::Check);
        until.met
    }

    fn dispatch_event(&mut self, lp: &mut LoopControl<Id, Id>, token: Token, source: Id) {
        let cpu = thread_cpu_time();
        self.route_event(lp, token, source);
        self.note_call(thread_cpu_time() - cpu);
    }

    fn dispatch_timer(&mut self, lp: &mut LoopControl<Id, Id>, timer: Id) {
        let cpu = thread_cpu_time();
        self.route_timer(lp, timer);
        self.note_call(thread_cpu_time() - cpu);
    }

    fn note_call(&mut self, cpu: Duration) {
        self.max_call_cpu = self.max_call_cpu.max(cpu);
        self.call_cpu.push(cpu);
    }

    /// Asserts that no informer call held the loop thread for more than `budget` of CPU,
    /// allowing two calls up to `outlier` each: on a shared (virtual) machine a thread's CPU
    /// time also counts cycles stolen by the host and slowed by a busy sibling core, so one
    /// call in hundreds can read 25 ms (seen under load) where it took a few. On a machine
    /// busy enough to slow every call alike (seen: four calls of 26–28 ms while two builds
    /// ran), the count gives way to the proportion: no call did more than a fifth of all the
    /// informer's work. A call that decoded a whole burst at once fails both, and reads far
    /// above `outlier`.
    pub fn assert_calls_within(&self, budget: Duration, outlier: Duration) {
        let over: Vec<Duration> = self
            .call_cpu
            .iter()
            .copied()
            .filter(|c| *c >= budget)
            .collect();
        let total: Duration = self.call_cpu.iter().sum();
        let a_share_of_the_work = self.max_call_cpu * 5 < total;
        assert!(
            (over.len() <= 2 || a_share_of_the_work) && self.max_call_cpu < outlier,
            "informer calls held the loop for {over:?} of CPU ({} calls over {budget:?}; at most \
             2, or none over a fifth of the {total:?} all calls took; each under {outlier:?})",
            over.len()
        );
    }

    fn route_event(&mut self, lp: &mut LoopControl<Id, Id>, token: Token, source: Id) {
        let mut io = InformerIo {
            lp,
            client: &mut self.client,
            connection: &self.connection,
            tokens: &mut self.tokens,
            decode: &mut self.decode,
        };
        match source {
            Id::Nodes => {
                if let Some(t) = &mut self.nodes {
                    t.on_ready(&mut io, token)
                }
            }
            Id::Leases => {
                if let Some(t) = &mut self.leases {
                    t.on_ready(&mut io, token)
                }
            }
            Id::Pods => {
                if let Some(t) = &mut self.pods {
                    t.on_ready(&mut io, token)
                }
            }
            Id::Check | Id::Probe => {}
        }
    }

    fn route_timer(&mut self, lp: &mut LoopControl<Id, Id>, timer: Id) {
        if timer == Id::Probe {
            if let Some(p) = &mut self.probe {
                let now = lp.now();
                p.lateness.push(now.since(p.due));
                if p.early.is_zero() {
                    p.due = now + p.period;
                    lp.schedule(Id::Probe, p.due);
                } else {
                    p.due = (p.due + p.period).max(now + p.early);
                    lp.schedule_lazy(Id::Probe, before(p.due, p.early), p.due);
                }
            }
            return;
        }
        let mut io = InformerIo {
            lp,
            client: &mut self.client,
            connection: &self.connection,
            tokens: &mut self.tokens,
            decode: &mut self.decode,
        };
        match timer {
            Id::Nodes => {
                if let Some(t) = &mut self.nodes {
                    t.on_timer(&mut io)
                }
            }
            Id::Leases => {
                if let Some(t) = &mut self.leases {
                    t.on_timer(&mut io)
                }
            }
            Id::Pods => {
                if let Some(t) = &mut self.pods {
                    t.on_timer(&mut io)
                }
            }
            Id::Check | Id::Probe => {}
        }
    }
}

struct Until<'a, F> {
    harness: &'a mut Harness,
    done: F,
    deadline: Instant,
    /// How often `done` is evaluated besides after each handler call (`None`: only then).
    check_every: Option<Duration>,
    met: bool,
}

impl<F: FnMut(&mut Harness) -> bool> Until<'_, F> {
    fn evaluate(&mut self, lp: &mut LoopControl<Id, Id>) {
        if (self.done)(self.harness) {
            self.met = true;
            lp.stop();
        } else if Instant::now() >= self.deadline {
            lp.stop();
        }
    }
}

impl<F: FnMut(&mut Harness) -> bool> Handler<Id, Id> for Until<'_, F> {
    fn on_event(&mut self, lp: &mut LoopControl<Id, Id>, token: Token, source: Id, _: &Event) {
        self.harness.dispatch_event(lp, token, source);
        self.evaluate(lp);
    }

    fn on_timer(&mut self, lp: &mut LoopControl<Id, Id>, timer: Id, _now: Time) {
        if timer == Id::Check {
            if let Some(every) = self.check_every {
                let next = lp.now() + every;
                lp.schedule(Id::Check, next);
            } else {
                // The limit: stop even if the clock's milliseconds beat `Instant`'s.
                lp.stop();
            }
        } else {
            self.harness.dispatch_timer(lp, timer);
        }
        self.evaluate(lp);
    }
}

/// A plain-HTTP connection to a local simulator.
pub fn plain_connection(url: &str, credentials: Credentials) -> Connection {
    let rest = url.strip_prefix("http://").expect("an http:// URL");
    let (host, port) = rest.rsplit_once(':').expect("host:port");
    Connection {
        scheme: Scheme::Http,
        host: host.to_string(),
        port: port.parse().expect("port"),
        base_path: String::new(),
        tls: None,
        credentials,
    }
}

/// The simulator's clients are unthrottled unless a test says otherwise.
pub fn unthrottled() -> ClientSettings {
    ClientSettings {
        qps: None,
        timeout: Duration::from_secs(20),
        ..ClientSettings::default()
    }
}

/// List+watch (the sim says 1.32, so the daemon would use watch-list; these tests pin pages).
pub fn list_watch(idle_timeout: Duration) -> InformerConfig {
    InformerConfig {
        reflector: ReflectorConfig {
            idle_timeout,
            ..ReflectorConfig::default()
        },
        ..InformerConfig::default()
    }
}

/// Server objects decoded through the same path as the informer's.
pub fn decode_all<T: Watched>(objects: &[Value], ctx: &mut DecodeContext) -> HashMap<T::Key, T> {
    objects
        .iter()
        .map(|v| {
            let obj: T = decode_object(&serde_json::to_vec(v).unwrap(), ctx)
                .unwrap_or_else(|e| panic!("{e}: {v}"));
            (obj.key(), obj)
        })
        .collect()
}

/// Both stores equal, with a readable difference if not.
pub fn assert_same<T: Watched + PartialEq + std::fmt::Debug>(
    what: &str,
    ours: &HashMap<T::Key, T>,
    server: &HashMap<T::Key, T>,
) {
    let missing: Vec<_> = server
        .keys()
        .filter(|k| !ours.contains_key(*k))
        .take(5)
        .collect();
    let extra: Vec<_> = ours
        .keys()
        .filter(|k| !server.contains_key(*k))
        .take(5)
        .collect();
    let differ: Vec<_> = server
        .iter()
        .filter(|(k, v)| ours.get(*k).is_some_and(|o| o != *v))
        .take(3)
        .map(|(k, v)| format!("{k:?}: ours {:?} server {v:?}", ours.get(k)))
        .collect();
    assert!(
        missing.is_empty() && extra.is_empty() && differ.is_empty(),
        "{what}: store ({}) differs from the server ({}): missing {missing:?}, extra {extra:?}, different {differ:?}",
        ours.len(),
        server.len()
    );
}

/// `at` less `d`.
pub fn before(at: Time, d: Duration) -> Time {
    Time::from_unix_millis(at.as_unix_millis() - d.as_millis() as u64)
}

/// `leases` node Leases in the simulator, and a harness whose Lease informer (`config`) has
/// synced and is watching.
pub fn synced_leases(
    sim: &SimHandle,
    leases: usize,
    config: InformerConfig,
    limit: Duration,
) -> (EventLoop<Id, Id>, Harness) {
    let cluster = sim.cluster();
    for i in 0..leases {
        cluster
            .create(
                Resource::Leases,
                fixtures::node_lease(&format!("node-{i}"), cluster.now()),
            )
            .unwrap();
    }
    let clock = Clock::start();
    let mut lp: EventLoop<Id, Id> = EventLoop::new(clock.clone()).unwrap();
    let mut h = Harness::new(
        plain_connection(sim.url(), Credentials::None),
        &clock,
        unthrottled(),
    );
    h.leases = Some(Tracked::new(config, Id::Leases));
    h.start(lp.control());
    h.run_until(&mut lp, limit, "sync", |h| {
        h.leases().informer.is_synced() && h.leases().stats().watching
    });
    (lp, h)
}
