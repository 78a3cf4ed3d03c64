//! Holding the calling thread on the CPU it runs on, for measurements
//! that compare two single-threaded loops: each ratio is only meaningful
//! when both loops ran on the same core (on this VM the two cores' speeds
//! differ from moment to moment, and an unpinned thread lands on either).

/// While alive, the calling thread may run only on the CPU it was on when
/// this was made; dropping it restores the thread's previous CPU set.
pub struct PinnedHere {
    previous: libc::cpu_set_t,
    /// The CPU the thread is held on.
    pub cpu: usize,
}

impl PinnedHere {
    /// Pins the calling thread; `None` (and nothing changed) where the
    /// system does not say which CPU it is on or refuses the change.
    pub fn new() -> Option<PinnedHere> {
        // SAFETY: `sched_getcpu` takes no arguments; `cpu_set_t` is plain
        // data for which all-zero is a valid (empty) set; the affinity
        // calls get the calling thread (pid 0), the set's own size and a
        // pointer to a live set.
        unsafe {
            let cpu = usize::try_from(libc::sched_getcpu()).ok()?;
            let mut previous: libc::cpu_set_t = std::mem::zeroed();
            if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut previous) != 0 {
                return None;
            }
            let mut only: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(cpu, &mut only);
            if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &only) != 0 {
                return None;
            }
            Some(PinnedHere { previous, cpu })
        }
    }
}

impl Drop for PinnedHere {
    fn drop(&mut self) {
        // SAFETY: as in `new`: the calling thread, a live set of its size.
        unsafe {
            libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &self.previous);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The number of CPUs the calling thread may run on.
    fn allowed() -> i32 {
        // SAFETY: an all-zero set is valid; the calling thread, a live set
        // of its size; reading a live set.
        unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set);
            libc::CPU_COUNT(&set)
        }
    }

    #[test]
    fn holds_the_thread_on_its_cpu_and_lets_go() {
        let before = allowed();
        let Some(pin) = PinnedHere::new() else { return };
        // SAFETY: no arguments.
        let now = unsafe { libc::sched_getcpu() };
        assert_eq!(usize::try_from(now).ok(), Some(pin.cpu));
        assert_eq!(allowed(), 1, "one CPU while pinned");
        drop(pin);
        assert_eq!(allowed(), before, "the previous set again");
    }
}
