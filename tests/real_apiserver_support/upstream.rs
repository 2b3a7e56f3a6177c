//! Upstream's own controllers: kube-controller-manager of the server's release, running only
//! `node-lifecycle-controller` and `taint-eviction-controller`, with the timing a scenario
//! scales down. The differential tier runs it where the daemon would run, as the same user
//! (`node-lifecycled`, bound to cluster-admin for the run), so the audit log names one writer
//! on either side.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

use crate::e2e_support::{TempDir, Timing};

use super::RealApiserver;

/// A running kube-controller-manager, killed on drop.
pub struct ControllerManager {
    child: Child,
    pub log: PathBuf,
}

/// Lets the daemon's user do what kube-controller-manager does (it watches and writes more than
/// conf/rbac.yaml grants node-lifecycled).
pub const CLUSTER_ADMIN_FOR_THE_CONTROLLER: &str = "\
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: differential-upstream-controller}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cluster-admin}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: node-lifecycled}]
";

impl ControllerManager {
    /// Starts it against `server` with `timing`'s periods and rates (the daemon's keys are
    /// upstream's flags) and these feature gates, logging to `dir`.
    pub fn start(
        server: &RealApiserver,
        timing: &Timing,
        feature_gates: &[&str],
        dir: &TempDir,
    ) -> ControllerManager {
        let bin = server
            .kube()
            .controller_manager()
            .unwrap_or_else(|e| panic!("kube-controller-manager unavailable: {e}"));
        server.apply(CLUSTER_ADMIN_FOR_THE_CONTROLLER);
        let kubeconfig = server.var("DAEMON_KUBECONFIG");
        let log = dir.path().join("kube-controller-manager.log");
        let file = std::fs::File::create(&log).expect("controller manager log");
        let mut command = Command::new(bin);
        if !feature_gates.is_empty() {
            command.arg(format!("--feature-gates={}", feature_gates.join(",")));
        }
        let child = command
            .args([
                &format!("--kubeconfig={kubeconfig}"),
                "--controllers=node-lifecycle-controller,taint-eviction-controller",
                "--leader-elect=false",
                "--use-service-account-credentials=false",
                "--secure-port=0",
                "--kube-api-qps=500",
                "--kube-api-burst=500",
                &format!("--node-monitor-period={}", timing.monitor_period),
                &format!("--node-monitor-grace-period={}", timing.grace),
                &format!("--node-startup-grace-period={}", timing.startup_grace),
                &format!("--node-eviction-rate={}", timing.eviction_rate),
                &format!("--secondary-node-eviction-rate={}", timing.secondary_rate),
                &format!(
                    "--large-cluster-size-threshold={}",
                    timing.large_cluster_size_threshold
                ),
                "-v=2",
            ])
            .stdin(Stdio::null())
            .stdout(file.try_clone().expect("log"))
            .stderr(file)
            .spawn()
            .expect("kube-controller-manager");
        ControllerManager { child, log }
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Still running (a flag it refused ends it at once).
    pub fn running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }
}

impl Drop for ControllerManager {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
