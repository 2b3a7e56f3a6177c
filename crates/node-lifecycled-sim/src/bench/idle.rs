//! Phase 3: every kubelet silent for a window inside the grace period (what a daemon with
//! nothing to do costs), then the kubelets resume, spread as they were.

use super::*;

impl SizeRun<'_> {
    /// Nothing changes in the cluster: every kubelet silent, for less than grace, in
    /// `idle_rounds` windows (the kubelets renew between them); the figures are their sum.
    pub(super) fn idle(&mut self, daemon: &mut DaemonChild) -> Result<(), String> {
        let hz = clock_ticks_per_second() as f64;
        let written_before = self.sim.writes().len();
        let mut window = Duration::ZERO;
        let mut d = LoopCounters::default();
        let mut switches = 0;
        let mut cpu_s = 0.0;
        let mut events = 0;
        let rounds = self.options.idle_rounds.max(1);
        for round in 0..rounds {
            for node in &self.nodes {
                self.kubelets
                    .stop_heartbeat(node)
                    .map_err(|e| e.to_string())?;
            }
            // Renewals already on the wire reach the daemon first.
            std::thread::sleep(Duration::from_secs(1));
            let c0 = daemon.loop_counters()?;
            let r0 = read(daemon)?;
            let log_from = self.sim.writes().len();
            let t0 = Instant::now();
            std::thread::sleep(self.options.idle_window);
            window += t0.elapsed();
            let r1 = read(daemon)?;
            let c1 = daemon.loop_counters()?;
            events += daemon_writes(&self.sim, &self.token, log_from).1;
            self.resume_spread()?;
            if round + 1 < rounds {
                // The kubelets' thread renews a resumed Lease "at once", but after this thread
                // lets go: the next round's stop, sent straight away, cancelled the renewal of
                // the kubelet resumed last (the sink), which then stayed silent through both
                // rounds, past its grace, and was judged Unknown inside the idle windows (at 500
                // and 2,000 nodes, where the stops reach it soonest).
                std::thread::sleep(Duration::from_secs(1));
            }
            // The closing dump's own wake-up (a signal: one I/O event) is not idleness.
            let mut round = c1.since(&c0);
            round.wakeups = round.wakeups.saturating_sub(1);
            round.io_events = round.io_events.saturating_sub(1);
            d.wakeups += round.wakeups;
            d.io_events += round.io_events;
            d.timers_fired += round.timers_fired;
            d.watch_reconnects += round.watch_reconnects;
            switches += r1.context_switches().saturating_sub(r0.context_switches());
            cpu_s += cpu_seconds(r0, r1, hz);
        }
        let writes = self.sim.writes();
        let mut reader = FactReader::new(Some(&self.token), Duration::ZERO);
        let unknown = reader
            .read(&writes[written_before.min(writes.len())..])
            .into_iter()
            .filter(
                |f| matches!(&f.kind, FactKind::NodeReady { status, .. } if status == "Unknown"),
            )
            .count();
        let w = window.as_secs_f64();
        let idle = IdleFigures {
            window,
            wakeups_per_s: d.wakeups as f64 / w,
            timers_per_s: d.timers_fired as f64 / w,
            io_per_s: d.io_events as f64 / w,
            context_switches_per_s: switches as f64 / w,
            cpu_percent: cpu_s / w * 100.0,
            periodic_pass_per_s: 1.0 / self.options.monitor_period.as_secs_f64(),
            event_posts_per_s: events as f64 / w,
            watch_reconnects: d.watch_reconnects,
            io_per_rotation: (d.watch_reconnects > 0)
                .then(|| d.io_events as f64 / d.watch_reconnects as f64),
            unknown_writes: unknown,
        };
        let per_rotation = idle.io_per_rotation.map_or("no rotation".to_string(), |n| {
            format!("{n:.1} I/O wake-ups per rotation")
        });
        let line = format!(
            "idle ({rounds} × {:.0}s, every kubelet silent): {:.2} wake-ups/s (timers {:.2}/s, I/O \
             {:.2}/s; {:.2} event POSTs/s), {:.2} context switches/s, CPU {:.3} %, {} watch \
             reconnects ({per_rotation}), {} Unknown writes",
            self.options.idle_window.as_secs_f64(),
            idle.wakeups_per_s,
            idle.timers_per_s,
            idle.io_per_s,
            idle.event_posts_per_s,
            idle.context_switches_per_s,
            idle.cpu_percent,
            idle.watch_reconnects,
            idle.unknown_writes
        );
        self.report.idle = idle;
        self.say(line);
        std::thread::sleep(self.options.settle);
        Ok(())
    }

    /// Resumes every kubelet at the phases of a fleet that has run a long time (`renewal_phase`),
    /// so renewals keep the even rate they had. All at once, they would beat in step from then
    /// on; spread evenly over one renew interval, their rate would dip to nothing a renew
    /// interval later, and the detection phase's victims renewing in that dip be read on the
    /// widened grid of a trickle.
    fn resume_spread(&self) -> Result<(), String> {
        let start = Instant::now();
        let n = self.nodes.len().max(1) as f64;
        for (i, node) in self.nodes.iter().enumerate() {
            let due = self.kubelets.renewal_phase(i as f64 / n);
            if let Some(wait) = due.checked_sub(start.elapsed()) {
                std::thread::sleep(wait);
            }
            self.kubelets
                .resume_heartbeat(node)
                .map_err(|e| e.to_string())?;
        }
        Ok(())
    }
}
