//! Phase 4: a burst of pod status updates, then a marker pod whose DELETE says the daemon has
//! read every event before it.

use super::*;

impl SizeRun<'_> {
    /// Creates a pod on the sink node that tolerates nothing; returns when it was created
    /// (simulator time since start).
    fn create_marker(&self, index: usize) -> Result<(String, Duration), String> {
        let pod = PodPlan {
            namespace: WEB_NAMESPACE.into(),
            name: format!("{MARKER_POD_PREFIX}{index}"),
            node: SINK_NODE.into(),
            kind: PodKind::Added,
            toleration: Toleration::None,
        };
        let at = self.cluster.elapsed();
        self.cluster
            .create(Resource::Pods, pod.object())
            .map_err(|e| format!("cannot create {}: {}", pod.key(), e.message))?;
        Ok((pod.name, at))
    }

    /// When the daemon's DELETE of `default/name` reached the simulator (time since start).
    fn wait_for_delete(&self, name: &str, timeout: Duration) -> Result<Duration, String> {
        let deadline = Instant::now() + timeout;
        let mut seq = 0;
        loop {
            for w in &self.writes_since(&mut seq) {
                if w.verb == Verb::Delete
                    && w.resource == Resource::Pods
                    && w.name == name
                    && w.succeeded()
                    && w.identity.token.as_deref() == Some(&self.token)
                {
                    return Ok(w.elapsed);
                }
            }
            if Instant::now() >= deadline {
                return Err(format!(
                    "the daemon did not delete pod default/{name} (on {SINK_NODE}, tainted \
                     {SINK_TAINT}:NoExecute) within {}s",
                    timeout.as_secs()
                ));
            }
            std::thread::sleep(POLL);
        }
    }

    pub(super) fn absorb(&mut self, daemon: &mut DaemonChild) -> Result<(), String> {
        let hz = clock_ticks_per_second() as f64;
        let timeout = Duration::from_secs(120);
        let (name, created) = self.create_marker(0)?;
        let baseline = self
            .wait_for_delete(&name, timeout)?
            .saturating_sub(created);
        let c0 = daemon.loop_counters()?;
        let r0 = read(daemon)?;
        let events = self.options.burst_events;
        let start = self.cluster.elapsed();
        for i in 0..events {
            let pod = &self.pods[i % self.pods.len()];
            let message = json!(format!("bench burst {i}"));
            self.cluster
                .update(Resource::Pods, Some(&pod.namespace), &pod.name, |p| {
                    if let Some(c) = p.pointer_mut("/status/conditions/0") {
                        c["message"] = message;
                    }
                })
                .map_err(|e| format!("burst: cannot update {}: {}", pod.key(), e.message))?;
        }
        let written = self.cluster.elapsed();
        let (name, _) = self.create_marker(1)?;
        let done = self.wait_for_delete(&name, timeout)?;
        let r1 = read(daemon)?;
        let c1 = daemon.loop_counters()?;
        let sim_write = written.saturating_sub(start);
        let daemon_absorb = done.saturating_sub(start).saturating_sub(baseline);
        let after_last_write = done.saturating_sub(written).saturating_sub(baseline);
        // The daemon kept up when it was done within a tenth of the burst's duration after the
        // simulator stopped writing: the simulator set the pace.
        let limit = if after_last_write * 10 <= sim_write {
            "simulator"
        } else {
            "daemon"
        };
        let cpu_s = cpu_seconds(r0, r1, hz);
        let per_s = |d: Duration| {
            if d.is_zero() {
                0.0
            } else {
                events as f64 / d.as_secs_f64()
            }
        };
        let figures = AbsorbFigures {
            events,
            sim_write,
            daemon_absorb,
            marker_baseline: baseline,
            events_per_s: per_s(daemon_absorb),
            sim_events_per_s: per_s(sim_write),
            limit,
            cpu_us_per_event: cpu_s * 1e6 / events.max(1) as f64,
            pod_relists: c1.since(&c0).pod_relists,
        };
        let line = format!(
            "absorb: {} pod MODIFIED events written in {:.2}s ({:.0}/s), read by the daemon in \
             {:.2}s ({:.0}/s; marker baseline {} ms; limit: {}), {:.1} µs CPU per event, {} relists",
            events,
            sim_write.as_secs_f64(),
            figures.sim_events_per_s,
            daemon_absorb.as_secs_f64(),
            figures.events_per_s,
            baseline.as_millis(),
            limit,
            figures.cpu_us_per_event,
            figures.pod_relists
        );
        self.report.absorb = figures;
        self.say(line);
        Ok(())
    }
}
