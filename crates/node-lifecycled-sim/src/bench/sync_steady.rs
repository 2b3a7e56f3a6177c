//! Phases 1 and 2 of the benchmark: the initial sync (spawn to `READY=1`) and the steady
//! window with every kubelet renewing.

use super::*;

impl SizeRun<'_> {
    pub(super) fn sync(
        &mut self,
        daemon: &mut DaemonChild,
        sampler: &RssSampler,
    ) -> Result<(), String> {
        let ready = daemon.wait_ready(self.options.sync_timeout)?;
        // The daemon's own share of the sync (the simulator shares the machine's cores).
        let hz = clock_ticks_per_second() as f64;
        let cpu_at_ready =
            ProcReading::of(daemon.pid).map_or(0.0, |r| cpu_seconds(ProcReading::default(), r, hz));
        // The first pass after READY (every node examined, tolerations indexed) belongs to it.
        std::thread::sleep(Duration::from_secs(1));
        self.report.sync = ready;
        self.report.peak_rss_sync_kib = sampler
            .between(Duration::ZERO, ready + Duration::from_secs(1))
            .into_iter()
            .max()
            .unwrap_or(0)
            .max(ProcReading::of(daemon.pid).map_or(0, |r| r.hwm_kib));
        let line = format!(
            "sync: READY=1 after {:.2}s (daemon CPU {:.2}s, first list by {} in {}), peak RSS {:.1} MiB",
            ready.as_secs_f64(),
            cpu_at_ready,
            self.options.initial_list.name(),
            if self.options.protobuf {
                "protobuf"
            } else {
                "JSON"
            },
            self.report.peak_rss_sync_kib as f64 / 1024.0
        );
        self.say(line);
        Ok(())
    }

    pub(super) fn steady(
        &mut self,
        daemon: &mut DaemonChild,
        sampler: &RssSampler,
    ) -> Result<(), String> {
        let hz = clock_ticks_per_second() as f64;
        let c0 = daemon.loop_counters()?;
        let r0 = read(daemon)?;
        let k0 = self.kubelets.stats();
        let log_from = self.sim.writes().len();
        let from = daemon.started.elapsed();
        let t0 = Instant::now();
        std::thread::sleep(self.options.steady_window);
        let window = t0.elapsed();
        let r1 = read(daemon)?;
        let k1 = self.kubelets.stats();
        let c1 = daemon.loop_counters()?;
        let (_, events) = daemon_writes(&self.sim, &self.token, log_from);
        let w = window.as_secs_f64();
        let report = &mut self.report;
        report.steady_event_posts_per_s = events as f64 / w;
        report.steady_window = window;
        report.steady_cpu_percent = cpu_percent(r0, r1, hz, window);
        report.steady_kernel_share = kernel_share(r0, r1);
        report.steady_rss_kib =
            median(sampler.between(from, daemon.started.elapsed())).unwrap_or(r1.rss_kib);
        report.steady_renewals_per_s = (k1.lease_renewals - k0.lease_renewals) as f64 / w;
        report.steady_wakeups_per_s = c1.since(&c0).wakeups.saturating_sub(1) as f64 / w;
        report.store_bytes_per_node = c1.store_bytes_per_node;
        report.store_bytes_per_pod = c1.store_bytes_per_pod;
        let line = format!(
            "steady ({:.0}s): {:.0} renewals/s, CPU {:.2} % of one core ({:.1} µs per renewal, \
             {} in the kernel), RSS {:.1} MiB (store: {} B/node, {} B/pod), {:.1} wake-ups/s, \
             {:.1} event POSTs/s",
            w,
            report.steady_renewals_per_s,
            report.steady_cpu_percent,
            report.steady_cpu_percent / 100.0 * 1e6 / report.steady_renewals_per_s.max(1e-9),
            report.steady_kernel_share.map_or_else(
                || "too few ticks to tell how much".to_string(),
                |k| format!("{k:.0} %")
            ),
            report.steady_rss_kib as f64 / 1024.0,
            report.store_bytes_per_node,
            report.store_bytes_per_pod,
            report.steady_wakeups_per_s,
            report.steady_event_posts_per_s
        );
        self.say(line);
        Ok(())
    }

    /// Beside the steady window, as long as it: a bare reader of the same Lease watch
    /// (`floor_reader`), on this thread, while the kubelets renew and the daemon runs. What the
    /// daemon spends per event above it is its own work.
    pub(super) fn floor(&mut self) -> Result<(), String> {
        let warmup = Duration::from_secs(3);
        let figures = floor_reader::read_lease_watch(
            self.sim.addr(),
            &self.token,
            warmup,
            self.options.steady_window,
        )?;
        let line = format!(
            "floor ({:.0}s): a bare reader of the same Lease watch (frames, name and renewTime, \
             one slot; the daemon's read grid): {} per event, {:.0} events/s, {:.1} wake-ups/s, \
             {:.0} events per read",
            figures.window.as_secs_f64(),
            figures
                .us_per_event()
                .map_or("—".to_string(), |us| format!("{us:.1} µs")),
            figures.events_per_s(),
            figures.wakeups_per_s(),
            figures.events_per_read(),
        );
        self.report.floor = figures;
        self.say(line);
        Ok(())
    }
}
