//! Where the end of a watch should land. The server ends each watch `timeoutSeconds` after it got
//! the request, and on a quiet cluster that end is a wake-up of
//! its own, three watches every 21–27 s. The shell wakes every `node_monitor_period` anyway for
//! its periodic pass, which may run a little before its tick when the loop is awake then: a
//! `timeoutSeconds` whose end lands in that window before a tick makes the end's wake-up the
//! pass's too, and the rotation costs nothing. The choice stays inside the same 70–90 % of
//! the idle timeout (whole seconds); with no such second, or no target, it is random as before.
//! A miss (a late server, a loaded machine) costs the one wake-up a rotation cost before.

use std::time::Duration;

use crate::time::{Time, duration_millis};

/// The windows a watch's end should land in: `[tick - lead_max, tick - lead_min]` for every
/// `tick = grid + k · period`. `lead_min` is the slack for a late end (server, network),
/// `lead_max - lead_min` at least a second so that one of the whole seconds fits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EndTarget {
    pub grid: Time,
    pub period: Duration,
    pub lead_min: Duration,
    pub lead_max: Duration,
    /// The expected ends of the other watches: a window holds one end, since the second end
    /// in it comes after the pass has run and would wake the loop alone.
    pub taken: [Option<Time>; 2],
}

impl EndTarget {
    /// The index of the tick whose window `end` lands in, if it does.
    fn window_of(&self, end: Time) -> Option<i64> {
        let period = duration_millis(self.period) as i64;
        if period <= 0 {
            return None;
        }
        let offset = end.as_unix_millis() as i64 - self.grid.as_unix_millis() as i64;
        // The first tick at or after `end`, and how long before it `end` is.
        let tick = offset.div_euclid(period) + i64::from(offset.rem_euclid(period) != 0);
        let lead = tick * period - offset;
        let (min, max) = (
            duration_millis(self.lead_min) as i64,
            duration_millis(self.lead_max) as i64,
        );
        (min..=max).contains(&lead).then_some(tick)
    }
}

/// `timeoutSeconds` among `lo..=hi` for a watch sent at `now`: one whose end lands in a free
/// window of `target`, else one in a taken window, else `random(n)` picks among all. Among
/// equals `random` picks too, so watches sent together still spread.
pub(super) fn choose_timeout_seconds(
    now: Time,
    lo: u64,
    hi: u64,
    target: Option<&EndTarget>,
    mut random: impl FnMut(u64) -> u64,
) -> u64 {
    let hi = hi.max(lo);
    let end = |s: u64| now + Duration::from_secs(s);
    if let Some(target) = target {
        let taken: Vec<i64> = target
            .taken
            .iter()
            .flatten()
            .filter_map(|&at| target.window_of(at))
            .collect();
        let landing: Vec<(u64, bool)> = (lo..=hi)
            .filter_map(|s| {
                let tick = target.window_of(end(s))?;
                Some((s, taken.contains(&tick)))
            })
            .collect();
        for want_free in [true, false] {
            let fits: Vec<u64> = landing
                .iter()
                .filter(|(_, taken)| *taken != want_free)
                .map(|(s, _)| *s)
                .collect();
            if !fits.is_empty() {
                return fits[random(fits.len() as u64) as usize];
            }
        }
    }
    lo + random(hi - lo + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(ms: u64) -> Time {
        Time::from_unix_millis(ms)
    }

    /// Ticks every 5 s on a grid at 1,000,000 ms; ends wanted 0.25–1.75 s before a tick.
    fn target(taken: [Option<Time>; 2]) -> EndTarget {
        EndTarget {
            grid: at(1_000_000),
            period: Duration::from_secs(5),
            lead_min: Duration::from_millis(250),
            lead_max: Duration::from_millis(1_750),
            taken,
        }
    }

    #[test]
    fn the_end_lands_before_a_pass_tick_from_any_send_time() {
        let t = target([None, None]);
        for send in (1_000_000..1_010_000).step_by(37) {
            let s = choose_timeout_seconds(at(send), 21, 27, Some(&t), |_| 0);
            assert!((21..=27).contains(&s), "send {send}: {s}");
            let end = send + s * 1000;
            let lead = (5_000 - (end - 1_000_000) % 5_000) % 5_000;
            assert!(
                (250..=1_750).contains(&lead),
                "send {send}: {s} s, {lead} ms early"
            );
        }
    }

    #[test]
    fn another_watchs_window_is_avoided_when_a_free_one_fits() {
        // Sent at +0.5 s: ends at +21.5 … +27.5 s; windows before +25 s (23.25–24.75) and
        // +30 s (28.25–29.75): only 24 s fits (+24.5); 23 s (+23.5) fits the +25 s one too.
        let send = at(1_000_500);
        let fits = |t: &EndTarget| {
            let mut all: Vec<u64> = (0..4)
                .map(|i| choose_timeout_seconds(send, 21, 27, Some(t), |n| i % n))
                .collect();
            all.sort_unstable();
            all.dedup();
            all
        };
        assert_eq!(fits(&target([None, None])), [23, 24]);
        // A watch ending at +24.0 s holds the window before +25 s: none free, both taken.
        assert_eq!(fits(&target([Some(at(1_024_000)), None])), [23, 24]);
        // Sent at +0.2 s: only 24 s fits (+24.2, before +25 s); its window is taken, which
        // is still better than a sure miss.
        let taken = target([Some(at(1_024_000)), None]);
        assert_eq!(
            choose_timeout_seconds(at(1_000_200), 21, 27, Some(&taken), |_| 0),
            24
        );
        // Ticks every 2 s: windows before +22, +24, +26, +28 s; one is taken, the others win.
        let mut t = target([Some(at(1_023_500)), None]);
        t.period = Duration::from_secs(2);
        for i in 0..6 {
            let s = choose_timeout_seconds(at(1_000_000), 21, 27, Some(&t), |n| i % n);
            assert!([21, 25, 27].contains(&s), "{s}");
        }
    }

    #[test]
    fn without_a_target_or_a_fitting_second_the_choice_is_random_in_range() {
        assert_eq!(choose_timeout_seconds(at(0), 21, 27, None, |_| 3), 24);
        // Windows too narrow to hold a whole second from this send time: random.
        let mut t = target([None, None]);
        t.lead_min = Duration::from_millis(100);
        t.lead_max = Duration::from_millis(200);
        assert_eq!(
            choose_timeout_seconds(at(1_000_000), 21, 27, Some(&t), |n| n - 1),
            27
        );
        assert_eq!(choose_timeout_seconds(at(5), 1, 1, Some(&t), |n| n - 1), 1);
    }
}
