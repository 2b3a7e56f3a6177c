//! Unit tests of the event loop: poll timeouts, timer order, stops, stale sources, the
//! before-sleep hook and lazy timers.

use super::*;
use std::io::Write as _;

#[test]
fn poll_waits_until_the_earliest_deadline_capped() {
    let now = Time::from_unix_millis(10_000);
    let cap = Duration::from_secs(60);
    assert_eq!(poll_timeout(now, None, cap), cap);
    assert_eq!(
        poll_timeout(now, Some(Time::from_unix_millis(10_250)), cap),
        Duration::from_millis(250)
    );
    assert_eq!(
        poll_timeout(now, Some(Time::from_unix_millis(9_000)), cap),
        Duration::ZERO
    );
    assert_eq!(poll_timeout(now, Some(now), cap), Duration::ZERO);
    assert_eq!(poll_timeout(now, Some(Time::MAX), cap), cap);
}

#[derive(Clone, Debug, PartialEq)]
enum Kind {
    Pipe(&'static str),
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Timer {
    Early,
    Late,
    Rearm,
}

#[derive(Default)]
struct Recorder {
    log: Vec<String>,
    rearms: u32,
    stop_after_timer: Option<Timer>,
}

impl Handler<Kind, Timer> for Recorder {
    fn on_event(&mut self, lp: &mut LoopControl<Kind, Timer>, _: Token, source: Kind, _: &Event) {
        self.log.push(format!("{source:?}"));
        lp.stop();
    }

    fn on_timer(&mut self, lp: &mut LoopControl<Kind, Timer>, timer: Timer, now: Time) {
        assert!(lp.now() >= now);
        self.log.push(format!("{timer:?}"));
        if timer == Timer::Rearm && self.rearms < 3 {
            self.rearms += 1;
            lp.schedule(Timer::Rearm, now);
        }
        if self.stop_after_timer.as_ref() == Some(&timer) {
            lp.stop();
        }
    }
}

/// Redis' `beforesleep`: the hook runs once per turn, after all the turn's handlers (two
/// timers due together fire in one turn), and once more when a handler stops the loop.
#[test]
fn before_sleep_runs_once_per_turn_after_the_turns_handlers() {
    struct Turns(Vec<&'static str>);
    impl Handler<Kind, Timer> for Turns {
        fn on_event(&mut self, _: &mut LoopControl<Kind, Timer>, _: Token, _: Kind, _: &Event) {}
        fn on_timer(&mut self, lp: &mut LoopControl<Kind, Timer>, timer: Timer, now: Time) {
            self.0.push(match timer {
                Timer::Early => "early",
                Timer::Late => "late",
                Timer::Rearm => "stop",
            });
            match timer {
                // Due at once, yet fired on the next turn (collected before dispatch).
                Timer::Late => lp.schedule(Timer::Rearm, now),
                Timer::Rearm => lp.stop(),
                Timer::Early => {}
            }
        }
        fn before_sleep(&mut self, _: &mut LoopControl<Kind, Timer>) {
            self.0.push("sleep");
        }
    }
    let mut lp: EventLoop<Kind, Timer> = EventLoop::new(Clock::start()).unwrap();
    let now = lp.control().now();
    lp.control().schedule(Timer::Early, now);
    lp.control().schedule(Timer::Late, now);
    let mut turns = Turns(Vec::new());
    lp.run(&mut turns).unwrap();
    let mut first_turn = turns.0[1..3].to_vec();
    first_turn.sort_unstable();
    assert_eq!(first_turn, ["early", "late"], "{:?}", turns.0);
    assert_eq!(turns.0[0], "sleep", "{:?}", turns.0);
    assert_eq!(turns.0[3..], ["sleep", "stop", "sleep"], "{:?}", turns.0);
}

#[test]
fn timers_fire_in_deadline_order_and_a_stop_ends_the_run() {
    let mut lp: EventLoop<Kind, Timer> = EventLoop::new(Clock::start()).unwrap();
    let now = lp.control().now();
    lp.control()
        .schedule(Timer::Late, now + Duration::from_millis(30));
    lp.control()
        .schedule(Timer::Early, now + Duration::from_millis(10));
    let mut rec = Recorder {
        stop_after_timer: Some(Timer::Late),
        ..Recorder::default()
    };
    lp.run(&mut rec).unwrap();
    assert_eq!(rec.log, ["Early", "Late"]);
    let clock_now = lp.control().now();
    assert!(clock_now >= now + Duration::from_millis(30));
    assert_eq!(lp.control().stats().timers_fired, 2);
    assert!(lp.control().timers().is_empty());
}

#[test]
fn timers_due_with_the_one_that_stops_the_run_fire_in_the_next_run() {
    let mut lp: EventLoop<Kind, Timer> = EventLoop::new(Clock::start()).unwrap();
    let now = lp.control().now();
    // Both due in the same turn; `Late` sorts first by deadline and stops the run.
    lp.control().schedule(Timer::Late, now);
    lp.control()
        .schedule(Timer::Early, now + Duration::from_millis(1));
    std::thread::sleep(Duration::from_millis(5));
    let mut rec = Recorder {
        stop_after_timer: Some(Timer::Late),
        ..Recorder::default()
    };
    lp.run(&mut rec).unwrap();
    assert_eq!(rec.log, ["Late"]);
    assert_eq!(
        lp.control().timers().deadline(&Timer::Early),
        Some(now + Duration::from_millis(1))
    );
    lp.control().resume();
    rec.stop_after_timer = Some(Timer::Early);
    lp.run(&mut rec).unwrap();
    assert_eq!(rec.log, ["Late", "Early"]);
}

#[test]
fn a_timer_rearmed_at_now_runs_on_the_next_turn_not_forever() {
    let mut lp: EventLoop<Kind, Timer> = EventLoop::new(Clock::start()).unwrap();
    let now = lp.control().now();
    lp.control().schedule(Timer::Rearm, now);
    // Far enough that the three re-arms' turns finish first on a loaded machine (at 20 ms a
    // busy host once let Late in between): the order, not the gap, is what is tested.
    lp.control()
        .schedule(Timer::Late, now + Duration::from_millis(500));
    let mut rec = Recorder {
        stop_after_timer: Some(Timer::Late),
        ..Recorder::default()
    };
    lp.run(&mut rec).unwrap();
    assert_eq!(rec.log, ["Rearm", "Rearm", "Rearm", "Rearm", "Late"]);
    assert!(lp.control().stats().wakeups >= 4);
}

#[test]
fn readable_sources_are_dispatched_with_their_kind_and_deregistered_ones_are_not() {
    let mut lp: EventLoop<Kind, Timer> = EventLoop::new(Clock::start()).unwrap();
    let (mut quiet_read, _quiet_write) = mio::net::UnixStream::pair().unwrap();
    let (mut gone_read, mut gone_write) = mio::net::UnixStream::pair().unwrap();
    let (mut loud_read, mut loud_write) = mio::net::UnixStream::pair().unwrap();
    let ctl = lp.control();
    ctl.register(&mut quiet_read, Interest::READABLE, Kind::Pipe("quiet"))
        .unwrap();
    let gone = ctl
        .register(&mut gone_read, Interest::READABLE, Kind::Pipe("gone"))
        .unwrap();
    let loud = ctl
        .register(&mut loud_read, Interest::READABLE, Kind::Pipe("loud"))
        .unwrap();
    assert_ne!(gone, loud);
    assert_eq!(ctl.source(loud), Some(&Kind::Pipe("loud")));
    assert_eq!(
        ctl.deregister(&mut gone_read, gone),
        Some(Kind::Pipe("gone"))
    );
    assert_eq!(ctl.sources(), 2);
    gone_write.write_all(b"x").unwrap();
    loud_write.write_all(b"x").unwrap();
    // A safety net so a broken dispatch fails the test instead of hanging it.
    let safety = ctl.now() + Duration::from_secs(5);
    ctl.schedule(Timer::Late, safety);
    let mut rec = Recorder {
        stop_after_timer: Some(Timer::Late),
        ..Recorder::default()
    };
    lp.run(&mut rec).unwrap();
    assert_eq!(rec.log, ["Pipe(\"loud\")"]);
    assert_eq!(lp.control().stats().io_events, 1);
}

/// Records each timer with the wake-up it fired in and when.
#[derive(Default)]
struct Fired {
    log: Vec<(Timer, u64, Time)>,
    stop_on: Option<Timer>,
}

impl Handler<Kind, Timer> for Fired {
    fn on_event(&mut self, _: &mut LoopControl<Kind, Timer>, _: Token, _: Kind, _: &Event) {}
    fn on_timer(&mut self, lp: &mut LoopControl<Kind, Timer>, timer: Timer, now: Time) {
        self.log.push((timer.clone(), lp.stats().wakeups, now));
        if self.stop_on.as_ref() == Some(&timer) {
            lp.stop();
        }
    }
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// The rotated watch's read (`Lazy`) rides the next wake-up after its soft deadline that
/// something else (`Late`, the controller's pass) causes, not a wake-up of its own.
#[test]
fn a_lazy_timer_fires_on_an_unrelated_wakeup_after_its_soft_deadline() {
    let mut lp: EventLoop<Kind, Timer> = EventLoop::new(Clock::start()).unwrap();
    let now = lp.control().now();
    let ctl = lp.control();
    ctl.schedule_lazy(Timer::Rearm, now + ms(20), now + Duration::from_secs(60));
    ctl.schedule(Timer::Late, now + ms(100));
    assert_eq!(ctl.timers().next_deadline(), Some(now + ms(100)));
    let mut fired = Fired {
        stop_on: Some(Timer::Late),
        ..Fired::default()
    };
    lp.run(&mut fired).unwrap();
    let order: Vec<(Timer, u64)> = fired.log.iter().map(|(t, w, _)| (t.clone(), *w)).collect();
    assert_eq!(
        order,
        [(Timer::Rearm, 1), (Timer::Late, 1)],
        "one wake-up, lazy first"
    );
    assert!(lp.control().timers().is_empty());
}

#[test]
fn a_lazy_timer_never_fires_before_its_soft_deadline() {
    let mut lp: EventLoop<Kind, Timer> = EventLoop::new(Clock::start()).unwrap();
    let now = lp.control().now();
    let ctl = lp.control();
    ctl.schedule_lazy(Timer::Rearm, now + ms(150), now + Duration::from_secs(60));
    ctl.schedule(Timer::Early, now);
    ctl.schedule(Timer::Late, now + ms(200));
    let mut fired = Fired {
        stop_on: Some(Timer::Late),
        ..Fired::default()
    };
    lp.run(&mut fired).unwrap();
    let timers: Vec<&Timer> = fired.log.iter().map(|(t, _, _)| t).collect();
    assert_eq!(timers, [&Timer::Early, &Timer::Rearm, &Timer::Late]);
    let (_, early_wakeup, _) = fired.log[0];
    let (_, lazy_wakeup, lazy_at) = fired.log[1];
    assert!(
        lazy_wakeup > early_wakeup,
        "not in the wake-up before its soft deadline"
    );
    assert!(lazy_at >= now + ms(150), "fired at {lazy_at:?}");
}

#[test]
fn a_lazy_timer_alone_wakes_the_loop_only_at_its_hard_deadline() {
    let mut lp: EventLoop<Kind, Timer> = EventLoop::new(Clock::start()).unwrap();
    let now = lp.control().now();
    lp.control()
        .schedule_lazy(Timer::Rearm, now + ms(1), now + ms(80));
    assert_eq!(lp.control().timers().next_deadline(), Some(now + ms(80)));
    let mut fired = Fired {
        stop_on: Some(Timer::Rearm),
        ..Fired::default()
    };
    lp.run(&mut fired).unwrap();
    let (_, wakeup, at) = fired.log[0];
    assert_eq!(fired.log.len(), 1);
    assert_eq!(wakeup, 1, "the poll slept until the hard deadline");
    assert!(at >= now + ms(80), "fired at {at:?}");
}

#[test]
fn a_plain_schedule_or_a_cancel_replaces_a_lazy_timer() {
    let mut lp: EventLoop<Kind, Timer> = EventLoop::new(Clock::start()).unwrap();
    let now = lp.control().now();
    let ctl = lp.control();
    ctl.schedule_lazy(Timer::Early, now + ms(1), now + ms(50));
    assert_eq!(ctl.cancel(&Timer::Early), Some(now + ms(50)));
    assert!(ctl.timers().is_empty());
    assert_eq!(ctl.soft_deadline(&Timer::Early), None);
    // Replaced by a plain deadline: not fired at the wake-up past the old soft deadline.
    ctl.schedule_lazy(Timer::Rearm, now + ms(1), now + Duration::from_secs(60));
    ctl.schedule(Timer::Rearm, now + ms(150));
    assert_eq!(ctl.soft_deadline(&Timer::Rearm), None);
    ctl.schedule(Timer::Late, now + ms(50));
    // A lazy deadline replaces a plain one as well; a soft one past the hard is plain.
    ctl.schedule_lazy(Timer::Early, now + ms(500), now + ms(100));
    assert_eq!(ctl.soft_deadline(&Timer::Early), None);
    let mut fired = Fired {
        stop_on: Some(Timer::Rearm),
        ..Fired::default()
    };
    lp.run(&mut fired).unwrap();
    let order: Vec<(Timer, u64)> = fired.log.iter().map(|(t, w, _)| (t.clone(), *w)).collect();
    assert_eq!(
        order,
        [(Timer::Late, 1), (Timer::Early, 2), (Timer::Rearm, 3)]
    );
    assert!(fired.log[2].2 >= now + ms(150));
}

/// The finest coalescing grid other sources are read on: the caller's own entry is left out
/// once (two watches on one grid still see each other), and a source that moves or leaves
/// takes its entry with it.
#[test]
fn the_finest_grid_leaves_out_the_callers_own() {
    let ms = Duration::from_millis;
    let mut lp: EventLoop<Kind, Timer> = EventLoop::new(Clock::start()).unwrap();
    let c = lp.control();
    assert_eq!(c.finest_grid(None), None);
    c.note_grid_reader(None, Some(ms(45)));
    assert_eq!(c.finest_grid(Some(ms(45))), None, "only the caller");
    assert_eq!(c.finest_grid(None), Some(ms(45)));
    c.note_grid_reader(None, Some(ms(180)));
    assert_eq!(c.finest_grid(Some(ms(180))), Some(ms(45)));
    assert_eq!(c.finest_grid(Some(ms(45))), Some(ms(180)));
    c.note_grid_reader(Some(ms(180)), Some(ms(45)));
    assert_eq!(c.finest_grid(Some(ms(45))), Some(ms(45)), "two on one grid");
    c.note_grid_reader(Some(ms(45)), None);
    c.note_grid_reader(Some(ms(45)), None);
    assert_eq!(c.finest_grid(None), None, "both left");
}
