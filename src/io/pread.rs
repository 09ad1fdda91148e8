//! Positional reads that either fill their buffer or say why not.

use std::fs::File;

use crate::error::{Error, Location};

/// Reads exactly `buf.len()` bytes at `offset`, retrying on partial reads and `EINTR`.
///
/// Returns the number of `pread` calls made. End of file before the buffer is full is
/// [`Error::ShortRead`], with the bytes obtained; an OS error is [`Error::Io`].
pub(crate) fn pread_exact(file: &File, buf: &mut [u8], offset: u64, location: &Location) -> Result<u64, Error> {
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
pub(crate) fn open_direct(path: &std::path::Path) -> std::io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECT)
        .open(path)
}

/// Pages [`uncached_share`] looks at, at most, spread evenly over the ranges: each is one `mincore`
/// call, and asking for every page of a 3 GB read took longer than a hot read's first step (1,024
/// samples took 1.1-1.5 ms on the H200's host, before the first read; 256 tell a mostly cold read
/// from a mostly hot one as well).
const RESIDENCY_SAMPLES: u64 = 256;

/// Consecutive pages [`uncached_share`] asks about in one `mincore` call.
const RESIDENCY_RUN: u64 = 16;

/// About how much of the pages under `ranges` (file offset, length) is not in the page cache, from
/// `mincore(2)` over a read-only mapping of `file`, at most [`RESIDENCY_SAMPLES`] pages in runs of
/// [`RESIDENCY_RUN`] spread evenly over them; `None` where that cannot be told (the mapping refused,
/// or no bytes asked). A hint only: pages come and go while the caller reads.
pub(crate) fn uncached_share(file: &File, ranges: impl IntoIterator<Item = (u64, u64)>) -> Option<f64> {
    use std::os::fd::AsRawFd;
    let file_len = file.metadata().ok()?.len();
    // SAFETY: sysconf has no preconditions.
    let page = u64::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).ok()?.max(1);
    // Each range as its pages (first, count), cut at the file's end.
    let spans: Vec<(u64, u64)> = ranges
        .into_iter()
        .filter_map(|(offset, len)| {
            let end = offset.saturating_add(len).min(file_len);
            (offset < end).then(|| (offset / page, (end - 1) / page - offset / page + 1))
        })
        .collect();
    let total: u64 = spans.iter().map(|s| s.1).sum();
    if total == 0 {
        return None;
    }
    let map_len = usize::try_from(file_len).ok()?;
    // SAFETY: a fresh read-only shared mapping of the whole file, placed by the kernel (no fixed
    // address), is never read here: mincore only asks which of its pages are resident.
    let map = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            map_len,
            libc::PROT_READ,
            libc::MAP_SHARED,
            file.as_raw_fd(),
            0,
        )
    };
    if map == libc::MAP_FAILED {
        return None;
    }
    // Samples in runs of RESIDENCY_RUN pages, one `mincore` each (a call a page took 0.9 us, 0.23 ms
    // for the whole sample, paid when a read plans its steps), the runs spread evenly.
    let stride = total.div_ceil(RESIDENCY_SAMPLES / RESIDENCY_RUN).max(1);
    let (mut asked, mut uncached) = (0u64, 0u64);
    let mut resident = [0u8; RESIDENCY_RUN as usize];
    let mut skip = 0u64; // pages to pass over before the next run
    for (first, count) in spans {
        let mut at = skip;
        while at < count {
            let run = (count - at).min(RESIDENCY_RUN);
            // SAFETY: pages `first + at ..+ run` lie inside the mapping (their range ends within the
            // file, and a mapping covers whole pages); mincore writes one byte for each of the `run`
            // pages asked, and `resident` holds RESIDENCY_RUN >= run bytes.
            let rc = unsafe {
                libc::mincore(
                    map.cast::<u8>().add(((first + at) * page) as usize).cast(),
                    (run * page) as usize,
                    resident.as_mut_ptr(),
                )
            };
            if rc == 0 {
                asked += run;
                uncached += resident[..run as usize].iter().filter(|&&r| r & 1 == 0).count() as u64;
            }
            at += stride;
        }
        skip = at - count;
    }
    // SAFETY: `map` is the mapping made above, of `map_len` bytes, and nothing refers to it now.
    unsafe { libc::munmap(map, map_len) };
    (asked > 0).then(|| uncached as f64 / asked as f64)
}

/// Asks the kernel, from a thread of its own, to read `ranges` of the file at `path` into the page
/// cache (`POSIX_FADV_WILLNEED`): after an `O_DIRECT` read, what a buffered read would have left
/// cached. Best effort: a failure leaves the cache as it is.
pub(crate) fn cache_in_background(path: &std::path::Path, ranges: impl IntoIterator<Item = (u64, u64)>) {
    use std::os::fd::AsRawFd;
    let ranges: Vec<(u64, u64)> = ranges.into_iter().collect();
    let path = path.to_path_buf();
    let _ = std::thread::Builder::new()
        .name("gpu-parquet-cache-fill".into())
        .spawn(move || {
            let Ok(file) = File::open(&path) else { return };
            for (offset, len) in ranges {
                let (Ok(offset), Ok(len)) = (libc::off_t::try_from(offset), libc::off_t::try_from(len)) else {
                    continue;
                };
                // SAFETY: posix_fadvise on an open descriptor only advises the kernel.
                unsafe { libc::posix_fadvise(file.as_raw_fd(), offset, len, libc::POSIX_FADV_WILLNEED) };
            }
        });
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::os::fd::AsRawFd;

    #[test]
    fn uncached_share_sees_pages_leave_the_page_cache() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let mut f = File::create(&path).unwrap();
        f.write_all(&vec![7u8; 1 << 20]).unwrap();
        f.sync_all().unwrap();
        drop(f);
        let mut f = File::open(&path).unwrap();
        let mut back = Vec::new();
        f.read_to_end(&mut back).unwrap();
        // Just read: every page is cached, and ranges past the end are cut at it.
        assert_eq!(uncached_share(&f, [(0, 1 << 20)]), Some(0.0));
        assert_eq!(uncached_share(&f, [(4096, 8192), (1 << 19, 1 << 30)]), Some(0.0));
        // No bytes asked: nothing to tell.
        assert_eq!(uncached_share(&f, [(1 << 20, 10), (5, 0)]), None);
        assert_eq!(uncached_share(&f, std::iter::empty()), None);
        // Clean pages dropped from the cache (tmpfs keeps them: its pages are the file).
        // SAFETY: posix_fadvise on an open descriptor; it only advises the kernel.
        unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
        match uncached_share(&f, [(0, 1 << 20)]) {
            Some(s) if s > 0.0 => {
                assert!(s > 0.5, "after DONTNEED {s} of the pages uncached");
                // Cached again from a thread of its own.
                cache_in_background(&path, [(0, 1 << 20)]);
                let t = std::time::Instant::now();
                while uncached_share(&f, [(0, 1 << 20)]) != Some(0.0) {
                    assert!(t.elapsed().as_secs() < 10, "the pages were not cached again");
                    std::thread::sleep(std::time::Duration::from_millis(5));
                }
            }
            other => println!("skipped: the file system kept the pages cached ({other:?})"),
        }
    }
}
