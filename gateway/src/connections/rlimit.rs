//! The process's open-file limit, which bounds how many connections can be
//! open at once. Many systems start processes with a soft limit of 1,024
//! and a far higher hard limit; like nginx's `worker_rlimit_nofile` (and
//! Go's runtime), the server raises its soft limit to the hard one at
//! start-up, and then keeps `max_connections` below what the limit allows
//! so that model files, Redis and upstream connections always find a
//! descriptor.

/// Descriptors kept for everything but client connections (model files,
/// the log, Redis, upstream and admin connections).
pub const RESERVED_DESCRIPTORS: u64 = 256;

/// Raises the soft open-file limit to the hard one; returns the soft limit
/// in force afterwards (`None` when it cannot be read).
pub fn raise_open_file_limit() -> Option<u64> {
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: `limit` is a valid, writable rlimit for the call to fill.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return None;
    }
    if limit.rlim_cur < limit.rlim_max {
        let raised = libc::rlimit { rlim_cur: limit.rlim_max, rlim_max: limit.rlim_max };
        // SAFETY: `raised` is a valid rlimit; raising the soft limit up to
        // the hard one needs no privilege.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
            return Some(raised.rlim_cur);
        }
    }
    Some(limit.rlim_cur)
}

/// The connection limit to enforce: `configured`, lowered to fit the
/// open-file limit `soft` (minus [`RESERVED_DESCRIPTORS`] shared by
/// `listeners`). Returns the limit and whether it was lowered.
pub fn fit_connection_limit(configured: usize, soft: Option<u64>, listeners: u64) -> (usize, bool) {
    let Some(soft) = soft else { return (configured, false) };
    let room = soft.saturating_sub(RESERVED_DESCRIPTORS) / listeners.max(1);
    let room = usize::try_from(room).unwrap_or(usize::MAX).max(1);
    if configured > room {
        (room, true)
    } else {
        (configured, false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_limit_fits_the_descriptors() {
        assert_eq!(fit_connection_limit(4096, Some(1 << 20), 1), (4096, false));
        assert_eq!(fit_connection_limit(4096, Some(1024), 1), (768, true));
        assert_eq!(fit_connection_limit(4096, None, 1), (4096, false));
        assert_eq!(fit_connection_limit(4096, Some(100), 1), (1, true));
    }

    #[test]
    fn raising_never_lowers_the_limit() {
        let raised = raise_open_file_limit().unwrap();
        assert!(raised >= 256);
    }
}
