//! Faults injected into positional reads, for the fault tests (`tests/faults.rs`): every read the
//! backends issue goes through [`read_at`], which with the `fault-injection` feature consults the
//! plans armed for the file being read, keyed by device and inode so that tests on other files,
//! running in parallel, are untouched. Without the feature [`read_at`] is `FileExt::read_at`.

use std::fs::File;
use std::os::unix::fs::FileExt;

/// Reads at `offset` into `buf`, as `pread` does, or as an armed fault says.
#[inline]
pub(crate) fn read_at(file: &File, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
    #[cfg(feature = "fault-injection")]
    if let Some(r) = injected::next(file, buf, offset) {
        return r;
    }
    file.read_at(buf, offset)
}

#[cfg(feature = "fault-injection")]
pub use injected::{Fault, FaultGuard, FaultPlan, inject};

#[cfg(feature = "fault-injection")]
mod injected {
    use std::collections::HashMap;
    use std::fs::File;
    use std::os::unix::fs::{FileExt, MetadataExt};
    use std::path::Path;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{Mutex, MutexGuard};

    /// What an injected read does instead of reading.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum Fault {
        /// Fails with `EIO`.
        Eio,
        /// Fails with `EINTR` (a signal arrived).
        Interrupted,
        /// Reads at most this many bytes (a short read, as on a pipe or some network file systems).
        Short(usize),
        /// Returns 0 bytes (end of file), as if the file had been truncated.
        Eof,
    }

    /// When a fault strikes among the reads of one file.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct FaultPlan {
        /// The fault.
        pub fault: Fault,
        /// Reads let through before the first fault.
        pub after: u64,
        /// Faults at most (`u64::MAX`: every read from then on).
        pub times: u64,
    }

    #[derive(Debug)]
    struct Armed {
        plan: FaultPlan,
        seen: u64,
        injected: u64,
    }

    type Key = (u64, u64);

    static ARMED_COUNT: AtomicUsize = AtomicUsize::new(0);
    static ARMED: Mutex<Option<HashMap<Key, Armed>>> = Mutex::new(None);

    fn armed() -> MutexGuard<'static, Option<HashMap<Key, Armed>>> {
        ARMED.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Disarms its plan when dropped; says how many faults were injected.
    #[derive(Debug)]
    pub struct FaultGuard {
        key: Key,
    }

    impl FaultGuard {
        /// Faults injected so far.
        pub fn injected(&self) -> u64 {
            armed()
                .as_ref()
                .and_then(|m| m.get(&self.key))
                .map_or(0, |a| a.injected)
        }
    }

    impl Drop for FaultGuard {
        fn drop(&mut self) {
            if armed().as_mut().and_then(|m| m.remove(&self.key)).is_some() {
                ARMED_COUNT.fetch_sub(1, Ordering::SeqCst);
            }
        }
    }

    /// Arms `plan` for the reads of the file at `path` (any descriptor of it) until the guard drops.
    pub fn inject(path: &Path, plan: FaultPlan) -> std::io::Result<FaultGuard> {
        let m = std::fs::metadata(path)?;
        let key = (m.dev(), m.ino());
        let mut map = armed();
        let old = map.get_or_insert_with(HashMap::new).insert(
            key,
            Armed {
                plan,
                seen: 0,
                injected: 0,
            },
        );
        if old.is_none() {
            ARMED_COUNT.fetch_add(1, Ordering::SeqCst);
        }
        Ok(FaultGuard { key })
    }

    pub(super) fn next(file: &File, buf: &mut [u8], offset: u64) -> Option<std::io::Result<usize>> {
        if ARMED_COUNT.load(Ordering::SeqCst) == 0 {
            return None;
        }
        let m = file.metadata().ok()?;
        let fault = {
            let mut map = armed();
            let a = map.as_mut()?.get_mut(&(m.dev(), m.ino()))?;
            a.seen += 1;
            if a.seen <= a.plan.after || a.injected >= a.plan.times {
                return None;
            }
            a.injected += 1;
            a.plan.fault
        };
        Some(match fault {
            Fault::Eio => Err(std::io::Error::from_raw_os_error(libc::EIO)),
            Fault::Interrupted => Err(std::io::Error::from_raw_os_error(libc::EINTR)),
            Fault::Short(max) => {
                let n = buf.len().min(max.max(1));
                file.read_at(&mut buf[..n], offset)
            }
            Fault::Eof => Ok(0),
        })
    }
}
