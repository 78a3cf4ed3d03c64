//! How busy the gateway's CPUs are, for background runs that must only
//! use spare CPU (a candidate's mirrors, a canary's live comparison runs).
//!
//! An idle pool is not an idle CPU: when callers run their pool's batches
//! on their own threads (busy CPU pools) the pool's worker looks free
//! while every core is saturated, and a mirror started then takes CPU
//! from live traffic. So a background run also needs the CPU use over the
//! last [`WINDOW`] to be below a ceiling. The reading is the larger of
//! - the process's own use (user + system time of every thread, from
//!   `getrusage`) as a share of the CPUs it may use
//!   (`available_parallelism`: the affinity mask and the cgroup quota), and
//! - the machine's use of the CPUs in the process's affinity mask (their
//!   non-idle time in `/proc/stat`): other processes on those CPUs leave
//!   no spare CPU either.
//!
//! It is taken lazily, at most once per window, by the call that asks. A
//! reading older than [`STALE`] says nothing about now (the last call was
//! long ago: a start-up's warm-up, a quiet spell): the gauge starts a
//! fresh window from the call that asks and reads as idle until that
//! window is over.

use parking_lot::Mutex;
use std::time::{Duration, Instant};

/// How long one reading averages over (and how often it is refreshed).
pub const WINDOW: Duration = Duration::from_millis(100);

/// Age past which the last reading is dropped instead of extended.
pub const STALE: Duration = Duration::from_secs(1);

/// The CPU use, read at most once per [`WINDOW`].
pub struct CpuGauge {
    /// CPUs the process may use (affinity and quota).
    cpus: f64,
    /// The CPUs of the affinity mask (their lines in `/proc/stat`).
    mask: Vec<usize>,
    last: Mutex<Reading>,
}

/// One sample of the counters.
#[derive(Clone, Copy, Default, Debug, PartialEq)]
struct Sample {
    /// The process's CPU time.
    process: Duration,
    /// The mask's CPUs: (non-idle, total) ticks; `None` without `/proc/stat`.
    machine: Option<(u64, u64)>,
}

/// The last reading and the sample it started from.
#[derive(Clone, Copy)]
struct Reading {
    at: Instant,
    sample: Sample,
    busy: f64,
}

impl Default for CpuGauge {
    fn default() -> Self {
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
        let mask = affinity();
        let sample = take(&mask);
        CpuGauge { cpus, mask, last: Mutex::new(Reading { at: Instant::now(), sample, busy: 0.0 }) }
    }
}

impl CpuGauge {
    /// The CPU use over the last window, as a share of the CPUs (0 to
    /// about 1; module docs).
    pub fn busy(&self) -> f64 {
        let mut last = self.last.lock();
        let now = Instant::now();
        let age = now.duration_since(last.at);
        if age >= STALE {
            *last = Reading { at: now, sample: take(&self.mask), busy: 0.0 };
        } else if age >= WINDOW {
            *last = next(*last, now, take(&self.mask), self.cpus);
        }
        last.busy
    }

    /// Whether the CPU use is below `ceiling` (a share of the CPUs); a
    /// ceiling of 1 or more is always met (the check is off: nothing is
    /// read).
    pub fn below(&self, ceiling: f64) -> bool {
        ceiling >= 1.0 || self.busy() < ceiling
    }
}

/// The reading that follows `last`, given the clock and the counters now,
/// on `cpus` CPUs.
fn next(last: Reading, at: Instant, sample: Sample, cpus: f64) -> Reading {
    let wall = at.duration_since(last.at).as_secs_f64();
    if wall <= 0.0 {
        return Reading { at, sample, busy: last.busy };
    }
    let used = sample.process.saturating_sub(last.sample.process).as_secs_f64();
    let process = used / wall / cpus.max(1.0);
    let machine = match (last.sample.machine, sample.machine) {
        (Some((busy0, total0)), Some((busy1, total1))) if total1 > total0 => {
            busy1.saturating_sub(busy0) as f64 / (total1 - total0) as f64
        }
        _ => 0.0,
    };
    Reading { at, sample, busy: process.max(machine) }
}

/// The counters now.
fn take(mask: &[usize]) -> Sample {
    let machine = std::fs::read_to_string("/proc/stat").ok().and_then(|text| machine_ticks(&text, mask));
    Sample { process: process_cpu(), machine }
}

/// The (non-idle, total) ticks of the CPUs in `mask` from the text of
/// `/proc/stat` (`cpuN user nice system idle iowait irq softirq steal ...`;
/// idle = idle + iowait); `None` when none of them is listed.
fn machine_ticks(text: &str, mask: &[usize]) -> Option<(u64, u64)> {
    let mut found = None;
    for line in text.lines() {
        let mut fields = line.split_ascii_whitespace();
        let Some(cpu) = fields.next().and_then(|name| name.strip_prefix("cpu")?.parse::<usize>().ok()) else {
            continue;
        };
        if !mask.contains(&cpu) {
            continue;
        }
        let ticks: Vec<u64> = fields.take(8).map(|f| f.parse().unwrap_or(0)).collect();
        let total: u64 = ticks.iter().sum();
        let idle = ticks.get(3).copied().unwrap_or(0) + ticks.get(4).copied().unwrap_or(0);
        let (busy, all) = found.unwrap_or((0, 0));
        found = Some((busy + total.saturating_sub(idle), all + total));
    }
    found
}

/// The CPUs this process may run on (empty if the kernel does not say).
fn affinity() -> Vec<usize> {
    // SAFETY: a zeroed cpu_set_t is a valid empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: pid 0 is this thread; the size is the set's own.
    let ok = unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) } == 0;
    if !ok {
        return Vec::new();
    }
    // SAFETY: CPU_ISSET reads the set we own, for indices inside its size.
    (0..libc::CPU_SETSIZE as usize).filter(|&i| unsafe { libc::CPU_ISSET(i, &set) }).collect()
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

    fn sample(process_ms: u64, machine: Option<(u64, u64)>) -> Sample {
        Sample { process: Duration::from_millis(process_ms), machine }
    }

    #[test]
    fn a_reading_is_the_larger_of_the_process_and_the_machine() {
        let start = Instant::now();
        let first = Reading { at: start, sample: sample(10_000, Some((100, 1000))), busy: 0.0 };
        let later = start + Duration::from_millis(200);
        // The process used 0.2 s of 2 CPUs' 0.4 s; the machine 10 of 40 ticks.
        let half = next(first, later, sample(10_200, Some((110, 1040))), 2.0);
        assert!((half.busy - 0.5).abs() < 1e-9, "{}", half.busy);
        // Others keep the CPUs busy while the process idles: 36 of 40 ticks.
        let crowded = next(half, later + Duration::from_millis(200), sample(10_200, Some((146, 1080))), 2.0);
        assert!((crowded.busy - 0.9).abs() < 1e-9, "{}", crowded.busy);
        let idle =
            next(crowded, crowded.at + Duration::from_millis(100), sample(10_200, Some((146, 1100))), 2.0);
        assert_eq!(idle.busy, 0.0);
        let no_stat = next(idle, idle.at + Duration::from_millis(100), sample(10_250, None), 1.0);
        assert!((no_stat.busy - 0.5).abs() < 1e-9, "without /proc/stat, the process alone");
        assert_eq!(next(idle, idle.at, sample(99_000, None), 2.0).busy, 0.0, "no wall time: unchanged");
    }

    #[test]
    fn proc_stat_lines_of_the_mask_are_summed() {
        let text = "cpu  10 0 10 70 10 0 0 0 0 0\n\
                    cpu0 5 0 5 30 5 0 0 0 0 0\n\
                    cpu1 5 0 5 40 5 0 0 0 0 0\n\
                    intr 1 2 3\n";
        assert_eq!(machine_ticks(text, &[0, 1]), Some((20, 100)));
        assert_eq!(machine_ticks(text, &[1]), Some((10, 55)), "the aggregate line and other CPUs left out");
        assert_eq!(machine_ticks(text, &[7]), None);
    }

    #[test]
    fn the_live_counters_move_and_the_mask_is_known() {
        assert!(!affinity().is_empty(), "this thread may run somewhere");
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
