//! The gateway's own CPU use, for background runs that must only use
//! spare CPU (a candidate's mirrors, a canary's live comparison runs).
//!
//! An idle pool is not an idle CPU: when callers run their pool's batches
//! on their own threads (busy CPU pools) the pool's worker looks free
//! while every core is saturated, and a mirror started then takes CPU
//! from live traffic. So a background run also needs the process's CPU
//! use over the last [`WINDOW`] (user + system time of every thread, from
//! `getrusage`) to be below a ceiling, as a share of the CPUs the process
//! may run on (`available_parallelism`: the affinity mask and the cgroup
//! quota). The reading is taken lazily, at most once per window, by the
//! call that asks. A reading older than [`STALE`] says nothing about now
//! (the last call was long ago: a start-up's warm-up, a quiet spell): the
//! gauge starts a fresh window from the call that asks and reads as idle
//! until that window is over.

use parking_lot::Mutex;
use std::time::{Duration, Instant};

/// How long one reading averages over (and how often it is refreshed).
pub const WINDOW: Duration = Duration::from_millis(100);

/// Age past which the last reading is dropped instead of extended.
pub const STALE: Duration = Duration::from_secs(1);

/// The process's CPU use, read at most once per [`WINDOW`].
pub struct CpuGauge {
    cpus: f64,
    last: Mutex<Reading>,
}

/// The last reading and the sample it started from.
#[derive(Clone, Copy)]
struct Reading {
    at: Instant,
    cpu: Duration,
    busy: f64,
}

impl Default for CpuGauge {
    fn default() -> Self {
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
        CpuGauge { cpus, last: Mutex::new(Reading { at: Instant::now(), cpu: process_cpu(), busy: 0.0 }) }
    }
}

impl CpuGauge {
    /// The process's CPU use over the last window, as a share of the CPUs
    /// it may use (0 to about 1; above 1 only when the count of CPUs is
    /// lower than the threads that ran).
    pub fn busy(&self) -> f64 {
        let mut last = self.last.lock();
        let now = Instant::now();
        let age = now.duration_since(last.at);
        if age >= STALE {
            *last = Reading { at: now, cpu: process_cpu(), busy: 0.0 };
        } else if age >= WINDOW {
            *last = next(*last, now, process_cpu(), self.cpus);
        }
        last.busy
    }

    /// Whether the CPU use is below `ceiling` (a share of the CPUs).
    pub fn below(&self, ceiling: f64) -> bool {
        self.busy() < ceiling
    }
}

/// The reading that follows `last`, given the clock and the process's CPU
/// time now, on `cpus` CPUs.
fn next(last: Reading, at: Instant, cpu: Duration, cpus: f64) -> Reading {
    let wall = at.duration_since(last.at).as_secs_f64();
    let used = cpu.saturating_sub(last.cpu).as_secs_f64();
    let busy = if wall > 0.0 { used / wall / cpus.max(1.0) } else { last.busy };
    Reading { at, cpu, busy }
}

/// User plus system CPU time of the whole process so far (zero if the
/// kernel does not say).
fn process_cpu() -> Duration {
    // SAFETY: getrusage writes one `rusage` into the zeroed struct we own.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: RUSAGE_SELF with a valid pointer to an owned rusage.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) } != 0 {
        return Duration::ZERO;
    }
    let time = |t: libc::timeval| {
        Duration::from_secs(u64::try_from(t.tv_sec).unwrap_or(0))
            + Duration::from_micros(u64::try_from(t.tv_usec).unwrap_or(0))
    };
    time(usage.ru_utime) + time(usage.ru_stime)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reading_is_cpu_time_over_wall_time_per_cpu() {
        let start = Instant::now();
        let first = Reading { at: start, cpu: Duration::from_secs(10), busy: 0.0 };
        let later = start + Duration::from_millis(200);
        let half_of_two = next(first, later, Duration::from_millis(10_200), 2.0);
        assert!((half_of_two.busy - 0.5).abs() < 1e-9, "{}", half_of_two.busy);
        let idle = next(half_of_two, later + Duration::from_millis(100), Duration::from_millis(10_200), 2.0);
        assert_eq!(idle.busy, 0.0);
        assert_eq!(next(idle, idle.at, Duration::from_secs(99), 2.0).busy, 0.0, "no wall time: unchanged");
    }

    #[test]
    fn spinning_threads_show_in_the_process_reading() {
        let gauge = CpuGauge::default();
        assert_eq!(gauge.busy(), 0.0, "a fresh window reads as idle");
        let before = process_cpu();
        let spin_until = Instant::now() + Duration::from_millis(150);
        let mut x = 0u64;
        while Instant::now() < spin_until {
            x = x.wrapping_mul(31).wrapping_add(1);
        }
        std::hint::black_box(x);
        assert!(process_cpu() > before, "getrusage counts this thread's time");
        assert!(gauge.busy() > 0.0, "a window with a spinning thread is not idle");
    }
}
