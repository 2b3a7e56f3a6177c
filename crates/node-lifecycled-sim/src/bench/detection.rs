//! Phase 5: `victims` kubelets stop at once; heartbeat loss to Ready=Unknown, NoExecute taint
//! and first pod DELETE, per victim.

use super::*;

impl SizeRun<'_> {
    /// The simulator's last heartbeat of `node`: its Lease renewTime, or the Ready condition's
    /// lastHeartbeatTime when that is later (a status post after the last renewal).
    fn last_heartbeat(&self, node: &str) -> Result<Time, String> {
        let lease = self
            .cluster
            .get(Resource::Leases, Some(NODE_LEASE_NAMESPACE), node)
            .and_then(|l| time_at(&l, "/spec/renewTime"))
            .ok_or_else(|| format!("no Lease renewTime for {node}"))?;
        let status = self
            .cluster
            .get(Resource::Nodes, None, node)
            .and_then(|n| {
                n.pointer("/status/conditions")
                    .and_then(Value::as_array)
                    .and_then(|cs| cs.iter().find(|c| c["type"] == "Ready"))
                    .and_then(|c| time_at(c, "/lastHeartbeatTime"))
            })
            .unwrap_or(Time::ZERO);
        Ok(lease.max(status))
    }

    pub(super) fn detection(&mut self, daemon: &mut DaemonChild) -> Result<(), String> {
        let counters_before = daemon.loop_counters()?;
        let written_before = self.sim.writes().len();
        for node in &self.victims {
            self.kubelets
                .stop_heartbeat(node)
                .map_err(|e| e.to_string())?;
        }
        let mut probes = Vec::with_capacity(self.victims.len());
        for node in &self.victims {
            probes.push(self.last_heartbeat(node)?);
        }
        let victims = self.victims.len();
        let index: std::collections::HashMap<String, usize> = self
            .victims
            .iter()
            .enumerate()
            .map(|(i, n)| (n.clone(), i))
            .collect();
        let mut verdict: Vec<Option<Time>> = vec![None; victims];
        let mut taint: Vec<Option<Time>> = vec![None; victims];
        let mut delete: Vec<Option<Time>> = vec![None; victims];
        let mut reader = FactReader::new(Some(&self.token), Duration::ZERO);
        let mut seq = self.writes_end();
        let deadline = Instant::now()
            + self.options.grace
            + self.options.renew_interval.mul_f64(1.05)
            + self.options.detection_timeout;
        self.say(format!(
            "detection: {victims} nodes' kubelets stopped; waiting for grace ({}) and the daemon",
            format_duration(self.options.grace)
        ));
        while delete.iter().any(Option::is_none) && Instant::now() < deadline {
            daemon.exited_early()?;
            std::thread::sleep(Duration::from_millis(50));
            for record in &self.writes_since(&mut seq) {
                for fact in reader.read(std::slice::from_ref(record)) {
                    match fact.kind {
                        FactKind::NodeReady { node, status, .. } if status == "Unknown" => {
                            if let Some(&i) = index.get(node.as_str()) {
                                verdict[i].get_or_insert(record.wall);
                            }
                        }
                        FactKind::TaintAdded { node, taint: t } if t.ends_with(":NoExecute") => {
                            if let Some(&i) = index.get(node.as_str()) {
                                taint[i].get_or_insert(record.wall);
                            }
                        }
                        FactKind::PodDeleted { pod, .. } => {
                            let node = pod
                                .strip_prefix(WEB_NAMESPACE)
                                .and_then(|p| p.strip_prefix('/'))
                                .and_then(|p| p.strip_prefix(EVICT_POD_PREFIX));
                            if let Some(&i) = node.and_then(|n| index.get(n)) {
                                delete[i].get_or_insert(record.wall);
                            }
                        }
                        _ => {}
                    }
                }
            }
        }
        let millis = |t: Time| t.as_unix_millis() as i64;
        let grace = self.options.grace.as_millis() as i64;
        let mut detect = Vec::new();
        let mut to_taint = Vec::new();
        let mut to_delete = Vec::new();
        for i in 0..victims {
            if let Some(v) = verdict[i] {
                detect.push(millis(v) - (millis(probes[i]) + grace));
                if let Some(t) = taint[i] {
                    to_taint.push(millis(t) - millis(v));
                }
            }
            if let (Some(t), Some(d)) = (taint[i], delete[i]) {
                to_delete.push(millis(d) - millis(t));
            }
        }
        let mut detail = String::from("node\tlast_heartbeat\tverdict\ttaint\tfirst_delete\n");
        let stamp =
            |t: Option<Time>| t.map_or_else(|| "-".into(), |t| t.as_unix_millis().to_string());
        for i in 0..victims {
            detail.push_str(&format!(
                "{}\t{}\t{}\t{}\t{}\n",
                self.victims[i],
                probes[i].as_unix_millis(),
                stamp(verdict[i]),
                stamp(taint[i]),
                stamp(delete[i])
            ));
        }
        let path = self.dir.join("detection.tsv");
        if let Err(e) = fs::write(&path, detail) {
            self.say(format!("cannot write {}: {e}", path.display()));
        }
        let missing = |v: &[i64]| victims - v.len();
        self.report.detection = Latencies::of(detect.clone(), missing(&detect));
        self.report.verdict_to_taint = Latencies::of(to_taint.clone(), missing(&to_taint));
        self.report.taint_to_delete = Latencies::of(to_delete.clone(), missing(&to_delete));
        // The daemon's API writes from its first verdict to the last first-DELETE: how busy
        // its client was.
        let first = verdict.iter().flatten().min().copied();
        let last = delete.iter().flatten().max().copied();
        if let (Some(first), Some(last)) = (first, last) {
            let writes = self.sim.writes();
            let n = writes[written_before.min(writes.len())..]
                .iter()
                .filter(|w| w.identity.token.as_deref() == Some(self.token.as_str()))
                .filter(|w| w.wall >= first && w.wall <= last)
                .count();
            self.report.detection_writes = n;
            self.report.detection_write_span = last.since(first);
        }
        // API calls per verdict, and the conflicts among them: with no other writer of these
        // nodes, every 409 would be a conflict with our own earlier write.
        let calls = daemon.loop_counters()?.since(&counters_before);
        let writes = self.sim.writes();
        let mine: Vec<_> = writes[written_before.min(writes.len())..]
            .iter()
            .filter(|w| w.identity.token.as_deref() == Some(self.token.as_str()))
            .filter(|w| w.resource == Resource::Nodes && w.verb == Verb::Patch)
            .collect();
        let status = mine.iter().filter(|w| w.subresource.is_some()).count();
        let taints = mine.len() - status;
        let conflicts = writes[written_before.min(writes.len())..]
            .iter()
            .filter(|w| w.identity.token.as_deref() == Some(self.token.as_str()))
            .filter(|w| w.code == 409)
            .count();
        let per = |n: usize| n as f64 / victims.max(1) as f64;
        self.report.calls_per_verdict = CallsPerVerdict {
            lease_reads: calls.gets as f64 / victims.max(1) as f64,
            status_writes: per(status),
            node_writes: per(taints),
            conflicts,
        };
        let r = &self.report;
        let line = format!(
            "detection API calls per node: {:.2} GETs (live Lease reads), {:.2} status writes, \
             {:.2} taint/label writes; {} answered 409",
            r.calls_per_verdict.lease_reads,
            r.calls_per_verdict.status_writes,
            r.calls_per_verdict.node_writes,
            r.calls_per_verdict.conflicts
        );
        self.say(line);
        let r = &self.report;
        let line = format!(
            "detection over {victims} nodes: Unknown − (probe + grace) p50/p99/max {} / {} / {} ms; \
             verdict → taint p50/max {} / {} ms; taint → first DELETE p50/max {} / {} ms; {} \
             daemon writes in {:.1}s",
            show(r.detection.p50_ms),
            show(r.detection.p99_ms),
            show(r.detection.max_ms),
            show(r.verdict_to_taint.p50_ms),
            show(r.verdict_to_taint.max_ms),
            show(r.taint_to_delete.p50_ms),
            show(r.taint_to_delete.max_ms),
            r.detection_writes,
            r.detection_write_span.as_secs_f64()
        );
        self.say(line);
        Ok(())
    }
}
