//! Positional reads that either fill their buffer or say why not.

use std::fs::File;

use crate::error::{Error, Location};

/// Reads exactly `buf.len()` bytes at `offset`, retrying on partial reads and `EINTR`.
///
/// Returns the number of `pread` calls made. End of file before the buffer is full is
/// [`Error::ShortRead`], with the bytes obtained; an OS error is [`Error::Io`].
pub fn pread_exact(file: &File, buf: &mut [u8], offset: u64, location: &Location) -> Result<u64, Error> {
    let mut done = 0usize;
    let mut calls = 0u64;
    while done < buf.len() {
        calls += 1;
        match super::faults::read_at(file, &mut buf[done..], offset + done as u64) {
            Ok(0) => {
                return Err(Error::ShortRead {
                    location: location.clone(),
                    offset,
                    expected: buf.len() as u64,
                    got: done as u64,
                });
            }
            Ok(n) => done += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => {
                return Err(Error::io(
                    location.clone(),
                    format!("read of {} bytes at offset {offset}", buf.len()),
                    e,
                ));
            }
        }
    }
    Ok(calls)
}

/// Opens `path` read-only with `O_DIRECT`; `Err` is the OS's reason (for example `EINVAL` on tmpfs).
pub fn open_direct(path: &std::path::Path) -> std::io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECT)
        .open(path)
}
