//! The executor against the simulated API server over real sockets, on a virtual clock: the
//! client throttle, the backoff and the executor all read the test's clock, so pacing is
//! asserted exactly and nothing sleeps.

use std::cell::Cell;
use std::rc::Rc;
use std::time::Duration;

use node_lifecycled::controller::events::{Event, EventObject, EventType, NODE_CONTROLLER};
use node_lifecycled::controller::{Action, ActionId, Input};
use node_lifecycled::kube::decode::{Decode, DecodeContext, decode_object};
use node_lifecycled::kube::{ApiClient, ClientSettings, Connection, Credentials, Scheme};
use node_lifecycled::model::{Name, Node, Pod, PodKey};
use node_lifecycled::runtime::executor::{Executor, ExecutorSettings};
use node_lifecycled::time::Time;
use node_lifecycled_sim::{Resource, SimConfig, SimHandle, SimServer, WriteRecord, fixtures};

/// The bearer token the executor's client presents (the write log's identity).
pub const TOKEN: &str = "node-lifecycled";

pub struct Harness {
    pub sim: SimHandle,
    pub clock: Rc<Cell<Time>>,
    pub exec: Executor,
    pub ctx: DecodeContext,
}

/// No client throttle: tests that are not about pacing are not paced.
pub fn unthrottled() -> ClientSettings {
    ClientSettings {
        timeout: Duration::from_secs(5),
        qps: None,
        burst: 0,
        max_body_bytes: 64 << 20,
    }
}

pub fn connection(sim: &SimHandle) -> Connection {
    Connection {
        scheme: Scheme::Http,
        host: "127.0.0.1".into(),
        port: sim.addr().port(),
        base_path: String::new(),
        tls: None,
        credentials: Credentials::Token(TOKEN.into()),
    }
}

impl Harness {
    pub fn new(settings: ExecutorSettings, client: ClientSettings) -> Harness {
        Harness::with_sim(
            SimServer::start(SimConfig::default()).unwrap(),
            settings,
            client,
        )
    }

    pub fn with_sim(sim: SimHandle, settings: ExecutorSettings, client: ClientSettings) -> Harness {
        let clock = Rc::new(Cell::new(sim.cluster().now()));
        let c = clock.clone();
        let api = ApiClient::new(&connection(&sim), &client, Box::new(move || c.get())).unwrap();
        let exec = Executor::new(api, settings, clock.get());
        Harness {
            sim,
            clock,
            exec,
            ctx: DecodeContext::new(),
        }
    }

    pub fn real() -> Harness {
        Harness::new(ExecutorSettings::default(), unthrottled())
    }

    pub fn dry() -> Harness {
        Harness::new(
            ExecutorSettings {
                dry_run: true,
                ..ExecutorSettings::default()
            },
            unthrottled(),
        )
    }

    pub fn now(&self) -> Time {
        self.clock.get()
    }

    pub fn advance(&self, d: Duration) {
        self.clock.set(self.clock.get() + d);
    }

    pub fn set_now(&self, t: Time) {
        assert!(t >= self.clock.get(), "the virtual clock never goes back");
        self.clock.set(t);
    }

    pub fn submit(&mut self, actions: impl IntoIterator<Item = Action>) {
        let now = self.now();
        self.exec.submit(actions, now);
    }

    pub fn run(&mut self, max_calls: usize) -> Vec<Input> {
        let now = self.now();
        self.exec.run_ready(now, max_calls, &mut self.ctx)
    }

    /// Runs everything, moving the virtual clock to each wake-up; returns every input.
    pub fn run_until_idle(&mut self) -> Vec<Input> {
        let mut inputs = Vec::new();
        for _ in 0..100_000 {
            inputs.extend(self.run(usize::MAX));
            match self.exec.next_wakeup() {
                None => return inputs,
                Some(at) => {
                    if at > self.now() {
                        self.set_now(at);
                    }
                }
            }
        }
        panic!("the executor never became idle: {:?}", self.exec.stats());
    }

    fn decode<T: Decode>(&mut self, value: serde_json::Value) -> T {
        decode_object::<T>(value.to_string().as_bytes(), &mut self.ctx).unwrap()
    }

    pub fn add_node(&mut self, name: &str) -> Node {
        let cluster = self.sim.cluster();
        let v = cluster
            .create(
                Resource::Nodes,
                fixtures::ready_node(name, Some("z1"), cluster.now()),
            )
            .unwrap();
        self.decode(v)
    }

    pub fn add_pod(&mut self, ns: &str, name: &str, node: &str) -> Pod {
        let v = self
            .sim
            .cluster()
            .create(Resource::Pods, fixtures::running_pod(ns, name, Some(node)))
            .unwrap();
        self.decode(v)
    }

    pub fn node(&mut self, name: &str) -> serde_json::Value {
        self.sim.cluster().get(Resource::Nodes, None, name).unwrap()
    }

    pub fn node_model(&mut self, name: &str) -> Node {
        let v = self.node(name);
        self.decode(v)
    }

    pub fn pod(&self, ns: &str, name: &str) -> Option<serde_json::Value> {
        self.sim.cluster().get(Resource::Pods, Some(ns), name)
    }

    pub fn decode_value<T: Decode>(&mut self, v: serde_json::Value) -> T {
        self.decode(v)
    }

    /// The write log, without the simulator's own direct writes.
    pub fn writes(&self) -> Vec<WriteRecord> {
        self.sim
            .writes()
            .into_iter()
            .filter(|w| w.identity.token.as_deref() == Some(TOKEN))
            .collect()
    }
}

pub fn n(s: &str) -> Name {
    Rc::from(s)
}

pub fn key(ns: &str, name: &str) -> PodKey {
    PodKey {
        namespace: n(ns),
        name: n(name),
    }
}

pub fn node_event(node: &Node, reason: &'static str, message: String) -> Action {
    Action::RecordEvent(Event {
        object: EventObject::Node {
            name: node.name.clone(),
            uid: node.uid.clone(),
        },
        event_type: EventType::Normal,
        reason,
        message,
        component: NODE_CONTROLLER,
    })
}

pub fn mark(id: u64, pod: &Pod) -> Action {
    Action::MarkPodNotReady {
        id: ActionId(id),
        pod: pod.key.clone(),
        uid: pod.uid.clone(),
        node: pod.node_name.clone().unwrap_or_else(|| n("")),
    }
}
