//! Containing panics from dependencies.
//!
//! `parquet`, `arrow` and `cudarc` panic on some malformed inputs or missing libraries. Our promise is
//! a clear error instead, so calls into them that see untrusted data run through [`contain_panics`].

use std::panic::{AssertUnwindSafe, catch_unwind};

use crate::error::{Error, Location, Result};

/// Runs `f`, turning a panic inside it into [`Error::DecoderPanic`] at `location`.
pub fn contain_panics<T>(location: &Location, f: impl FnOnce() -> Result<T>) -> Result<T> {
    match catch_unwind(AssertUnwindSafe(f)) {
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
