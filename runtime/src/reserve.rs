//! A session reserved for the first class: what lets a first-class
//! request into a busy CPU pool run at once, at full speed, while a
//! lower class's batch is running, without stopping that batch.
//!
//! Why: a pool's queue hands out requests by class, but a batch that runs
//! holds its session; with one worker a high-class request arriving while
//! a low-class batch executes waits for all of it. Preemption
//! ([`crate::preempt`]) stops that batch but loses its work, and a
//! stopped request then runs alone to the end, which a high-class arrival
//! still waits for: under a 2x overload the high class's p99 stayed at
//! 1.7x its unloaded p99 (issue 41, `benchmarks/NOTES.md`). A second
//! session for the high class alone would not help by itself on a busy
//! CPU: the two runs would share it and the high one would take twice as
//! long.
//!
//! How (a pool's `batching.reserve_top_class`, CPU pools):
//! 1. The pool builds one session more than its `workers`, the reserved
//!    one, with a worker of its own that takes only requests whose own
//!    class is 1 (the class a request asked for; a lower class promoted
//!    by aging is not taken there), in the queue's order; the other
//!    workers take every other class. Each side sleeps on a wake-up of
//!    its own, which only its arrivals give, displacing arrivals into a
//!    full queue included ([`crate::ranked_queue`]). The reserved session
//!    never runs a caller's batch ([`crate::inline`],
//!    [`crate::caller_batch`] use the other sessions), and a first-class
//!    arrival never preempts ([`crate::preempt`]): it has a session.
//! 2. The other sessions' runs go on a thread of their own that first
//!    lowers its OS scheduling priority ([`lower_this_thread`], nice 19
//!    on Linux); their sessions are built on a lowered thread too, so
//!    ONNX Runtime's threads of theirs (`intra_op_threads` above 1)
//!    inherit it. Only the model's run is lowered: the workers, which
//!    take the queue's and the statistics' locks, keep normal priority,
//!    since a lowered thread preempted while holding a lock the reserved
//!    worker or the HTTP front waits for would hold them back behind
//!    every thread of normal priority (the locks do not lend priority).
//! 3. When both run, the OS gives the CPU to the reserved worker: the
//!    lower batch is paused, not stopped, and goes on afterwards, so no
//!    work is lost.
//!
//! Cost: one session's memory, a thread started per batch of the other
//! sessions (tens of microseconds), and the other sessions' runs yield to
//! every thread of normal priority, the HTTP front and other models'
//! workers included: on a busy machine the lower classes of that pool get
//! what is left. Batches run on the reserved session are counted in
//! `reserved_batches`. Per-thread priorities are a Linux feature; on
//! other systems the session is still reserved but nothing is lowered
//! (a warning says so).

/// Whether this system gives threads priorities of their own: without,
/// a pool that reserves runs its other sessions at normal priority.
pub const LOWERS: bool = cfg!(target_os = "linux");

/// The nice value the other sessions' runs of a pool that reserves run
/// at: the lowest priority a thread may give itself.
pub const LOWERED_NICE: i32 = 19;

/// Lowers the calling thread's OS scheduling priority to
/// [`LOWERED_NICE`] for the rest of its life (threads it starts inherit
/// it). An error says why it could not be.
#[cfg(target_os = "linux")]
pub fn lower_this_thread() -> Result<(), String> {
    // On Linux the nice value belongs to the thread: `PRIO_PROCESS` with
    // id 0 names the calling thread only (setpriority(2), NOTES).
    // SAFETY: a plain system call on the calling thread; no memory is passed.
    let rc = unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, LOWERED_NICE) };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error().to_string())
    }
}

/// Elsewhere the nice value is the process's: nothing is lowered.
#[cfg(not(target_os = "linux"))]
pub fn lower_this_thread() -> Result<(), String> {
    Err("per-thread priorities are a Linux feature".into())
}

/// [`lower_this_thread`], logging a warning when it cannot be done (the
/// pool still works, only without the lowered priority).
pub fn lower_this_thread_or_warn(pool: &str) {
    if let Err(e) = lower_this_thread() {
        tracing::warn!(pool, error = %e, "cannot lower the priority of the other sessions' runs; the reserved session shares the CPU with them");
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    fn nice_of_this_thread() -> i32 {
        // SAFETY: a plain system call; errno is cleared first since -1 is a valid answer.
        unsafe {
            *libc::__errno_location() = 0;
            libc::getpriority(libc::PRIO_PROCESS, 0)
        }
    }

    #[test]
    fn lowering_a_thread_lowers_it_and_what_it_starts_but_not_its_parent() {
        let before = nice_of_this_thread();
        let (lowered, child) = std::thread::spawn(|| {
            lower_this_thread().unwrap();
            let child = std::thread::spawn(nice_of_this_thread).join().unwrap();
            (nice_of_this_thread(), child)
        })
        .join()
        .unwrap();
        assert_eq!(lowered, LOWERED_NICE);
        assert_eq!(child, LOWERED_NICE, "a thread started by a lowered one inherits it");
        assert_eq!(nice_of_this_thread(), before, "the other threads keep theirs");
    }
}
