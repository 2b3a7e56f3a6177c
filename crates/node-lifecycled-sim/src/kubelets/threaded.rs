//! [`Kubelets`]: a [`Fleet`] run on its own thread against the simulator's clock, and the
//! commands other threads send it (each takes the fleet's lock, then wakes the thread).

use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

use serde_json::Value;

use super::{Fleet, KubeletConfig, KubeletStats, UnknownNode};
use crate::cluster::Cluster;
use crate::resource::Resource;
use node_lifecycled::time::Time;

struct Driver {
    fleet: Fleet,
    stop: bool,
}

struct Control {
    driver: Mutex<Driver>,
    wake: Condvar,
}

/// A [`Fleet`] on its own thread, on the simulator's clock. Dropping it stops the kubelets.
pub struct Kubelets {
    control: Arc<Control>,
    cluster: Cluster,
    thread: Option<JoinHandle<()>>,
}

impl Kubelets {
    pub fn start(cluster: Cluster, config: KubeletConfig) -> std::io::Result<Kubelets> {
        let control = Arc::new(Control {
            driver: Mutex::new(Driver {
                fleet: Fleet::new(config),
                stop: false,
            }),
            wake: Condvar::new(),
        });
        let thread = {
            let control = control.clone();
            let cluster = cluster.clone();
            std::thread::Builder::new()
                .name("sim-kubelets".into())
                .spawn(move || drive(&control, &cluster))?
        };
        Ok(Kubelets {
            control,
            cluster,
            thread: Some(thread),
        })
    }

    fn driver(&self) -> MutexGuard<'_, Driver> {
        self.control
            .driver
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }

    fn command<R>(&self, f: impl FnOnce(&mut Fleet, Time) -> R) -> R {
        let now = self.cluster.now();
        let result = f(&mut self.driver().fleet, now);
        self.control.wake.notify_all();
        result
    }

    pub fn add_node(&self, node: &str) {
        self.command(|fleet, now| fleet.add_node(node, now));
    }

    /// Starts a kubelet for every node in the store; returns how many were added.
    pub fn adopt_all_nodes(&self) -> usize {
        let names: Vec<String> = self
            .cluster
            .list(Resource::Nodes, None)
            .iter()
            .filter_map(|n| n.pointer("/metadata/name").and_then(Value::as_str))
            .map(str::to_string)
            .collect();
        self.command(|fleet, now| {
            let before = fleet.stats().nodes;
            for name in &names {
                fleet.add_node(name, now);
            }
            fleet.stats().nodes - before
        })
    }

    pub fn stop_heartbeat(&self, node: &str) -> Result<(), UnknownNode> {
        self.command(|fleet, _| fleet.stop_heartbeat(node))
    }

    pub fn resume_heartbeat(&self, node: &str) -> Result<(), UnknownNode> {
        self.command(|fleet, now| fleet.resume_heartbeat(node, now))
    }

    /// [`Fleet::renewal_phase`].
    pub fn renewal_phase(&self, q: f64) -> Duration {
        self.driver().fleet.renewal_phase(q)
    }

    pub fn reboot(&self, node: &str, down: Duration) -> Result<(), UnknownNode> {
        self.command(|fleet, now| fleet.reboot(node, down, now))
    }

    pub fn set_condition(
        &self,
        node: &str,
        condition: &str,
        status: &str,
    ) -> Result<(), UnknownNode> {
        self.command(|fleet, now| fleet.set_condition(node, condition, status, now))
    }

    pub fn is_alive(&self, node: &str) -> bool {
        self.driver().fleet.is_alive(node)
    }

    pub fn stats(&self) -> KubeletStats {
        self.driver().fleet.stats()
    }

    pub fn shutdown(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        self.driver().stop = true;
        self.control.wake.notify_all();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for Kubelets {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Holds the fleet while its due chores run (a few store writes); commands wait that long.
fn drive(control: &Control, cluster: &Cluster) {
    let mut driver = control.driver.lock().unwrap_or_else(|e| e.into_inner());
    loop {
        if driver.stop {
            return;
        }
        let now = cluster.now();
        driver.fleet.run_due(cluster, now);
        let wait = driver
            .fleet
            .next_deadline()
            .map_or(Duration::from_secs(1), |at| {
                at.since(cluster.now()).min(Duration::from_secs(1))
            });
        driver = control
            .wake
            .wait_timeout(driver, wait.max(Duration::from_millis(1)))
            .unwrap_or_else(|e| e.into_inner())
            .0;
    }
}
