//! Device faults for the fault tests (`tests/faults.rs`, feature `fault-injection`): device
//! allocations that fail as out of memory, nvCOMP items that report an error status. Process-wide:
//! the tests that arm them run one at a time.

use std::sync::atomic::{AtomicU64, Ordering};

static ALLOC_SEEN: AtomicU64 = AtomicU64::new(0);
static ALLOC_AFTER: AtomicU64 = AtomicU64::new(0);
static ALLOC_FAILS: AtomicU64 = AtomicU64::new(0);
static NVCOMP_FAILS: AtomicU64 = AtomicU64::new(0);

/// Disarms every device fault when dropped.
#[derive(Debug)]
pub struct DeviceFaultGuard(());

impl Drop for DeviceFaultGuard {
    fn drop(&mut self) {
        ALLOC_FAILS.store(0, Ordering::SeqCst);
        NVCOMP_FAILS.store(0, Ordering::SeqCst);
    }
}

/// After `after` more device allocations succeed, the next `times` fail as out of memory.
pub fn fail_allocations(after: u64, times: u64) -> DeviceFaultGuard {
    ALLOC_SEEN.store(0, Ordering::SeqCst);
    ALLOC_AFTER.store(after, Ordering::SeqCst);
    ALLOC_FAILS.store(times, Ordering::SeqCst);
    DeviceFaultGuard(())
}

/// The next `times` pages nvCOMP decompresses report an error status (their output untouched).
pub fn fail_nvcomp_items(times: u64) -> DeviceFaultGuard {
    NVCOMP_FAILS.store(times, Ordering::SeqCst);
    DeviceFaultGuard(())
}

/// Takes one armed fault from `counter`, if any.
fn take(counter: &AtomicU64) -> bool {
    counter
        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
        .is_ok()
}

/// Whether this allocation is to fail.
pub(crate) fn allocation_fails() -> bool {
    if ALLOC_FAILS.load(Ordering::SeqCst) == 0 {
        return false;
    }
    ALLOC_SEEN.fetch_add(1, Ordering::SeqCst) >= ALLOC_AFTER.load(Ordering::SeqCst) && take(&ALLOC_FAILS)
}

/// Whether this nvCOMP item is to report an error.
pub(crate) fn nvcomp_item_fails() -> bool {
    NVCOMP_FAILS.load(Ordering::SeqCst) > 0 && take(&NVCOMP_FAILS)
}
