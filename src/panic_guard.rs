//! Containing panics from dependencies.
//!
//! `parquet`, `arrow` and `cudarc` panic on some malformed inputs or missing libraries. Our promise is
//! a clear error instead, so calls into them that see untrusted data run through [`contain_panics`].
//!
//! A contained panic becomes an error, so the default hook's "thread panicked at ..." message on
//! stderr would only be noise (and alarming noise: it looks like a crash). [`contain_panics`] installs,
//! once per process, a hook that stays quiet while the panicking thread is inside [`contain_panics`] and
//! hands every other panic to the hook that was installed before it.

use std::cell::Cell;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Once;

use crate::error::{Error, Location, Result};

thread_local! {
    /// How many [`contain_panics`] calls the current thread is inside.
    static CONTAINED_DEPTH: Cell<usize> = const { Cell::new(0) };
}

static INSTALL_QUIET_HOOK: Once = Once::new();

/// Installs (once per process) the panic hook that silences panics [`contain_panics`] will contain.
///
/// Panics outside [`contain_panics`] still reach the previous hook (the default one prints them).
/// [`contain_panics`] calls this itself; it is public so a program can install the hook early, before
/// it installs hooks of its own that should run after it.
pub fn install_quiet_hook() {
    INSTALL_QUIET_HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            // `try_with` because a panic during thread teardown may find the thread-local gone.
            let contained = CONTAINED_DEPTH.try_with(|d| d.get() > 0).unwrap_or(false);
            if !contained {
                previous(info);
            }
        }));
    });
}

/// Whether the current thread is inside [`contain_panics`] (its panics are being contained).
pub fn is_containing() -> bool {
    CONTAINED_DEPTH.try_with(|d| d.get() > 0).unwrap_or(false)
}

/// Decrements the depth counter however the guarded call ends.
struct DepthGuard;

impl DepthGuard {
    fn enter() -> Self {
        CONTAINED_DEPTH.with(|d| d.set(d.get() + 1));
        DepthGuard
    }
}

impl Drop for DepthGuard {
    fn drop(&mut self) {
        let _ = CONTAINED_DEPTH.try_with(|d| d.set(d.get().saturating_sub(1)));
    }
}

/// Runs `f`, turning a panic inside it into [`Error::DecoderPanic`] at `location`.
///
/// The panic's default message on stderr is suppressed (see the module docs).
pub fn contain_panics<T>(location: &Location, f: impl FnOnce() -> Result<T>) -> Result<T> {
    install_quiet_hook();
    let result = {
        let _depth = DepthGuard::enter();
        catch_unwind(AssertUnwindSafe(f))
    };
    match result {
        Ok(r) => r,
        Err(payload) => Err(Error::DecoderPanic {
            location: location.clone(),
            message: panic_message(&payload),
        }),
    }
}

/// The text of a panic payload.
pub fn panic_message(payload: &Box<dyn std::any::Any + Send>) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "unknown panic".to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn contained_panic_becomes_error_and_depth_unwinds() {
        let loc = Location::file("x.parquet");
        let r: Result<()> = contain_panics(&loc, || panic!("boom {}", 7));
        match r {
            Err(Error::DecoderPanic { message, location }) => {
                assert_eq!(message, "boom 7");
                assert_eq!(location, loc);
            }
            other => panic!("expected DecoderPanic, got {other:?}"),
        }
        assert!(!is_containing(), "depth must return to zero after a contained panic");
        let nested: Result<bool> = contain_panics(&loc, || contain_panics(&loc, || Ok(is_containing())));
        assert!(nested.unwrap());
        assert!(!is_containing());
    }
}
