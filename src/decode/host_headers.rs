//! Page headers parsed on the host, ahead of a step's decode, where the file's bytes are in the page
//! cache: only the headers are read (a few hundred bytes a page, `pread`), with the GPU kernel's host
//! reference ([`walk_headers_at`]), so the results are the kernel's. A step whose headers are ready
//! when its decode begins skips the GPU's header pass and the wait for its result: its descriptors are
//! built, and its kernels queued, while its chunks' copies are still landing.

use std::collections::BTreeMap;
use std::fs::File;
use std::os::unix::fs::FileExt;

use crate::decode::reference::page_headers::{ChunkHeaders, walk_headers_at};
use crate::plan::ReadPlan;

/// The pages of a step's chunks, by (row group, leaf column).
pub type HostHeaders = BTreeMap<(usize, usize), ChunkHeaders>;

/// The largest share of a step's pages that may be missing from the page cache for its headers to be
/// parsed on the host: each missing page is a disk read of its own, on the reading thread's heels.
pub const MOST_UNCACHED: f64 = 0.02;

/// Whether the page headers of `plan` are worth parsing on the host: nearly all of its pages are in the
/// page cache (a `mincore` sample, [`crate::io::pread::uncached_share`]).
pub fn worth_parsing(file: &File, plan: &ReadPlan) -> bool {
    let ranges = plan.chunks.iter().map(|c| (c.offset, c.len));
    crate::io::pread::uncached_share(file, ranges).is_some_and(|share| share <= MOST_UNCACHED)
}

/// Parses the page headers of every chunk of `plan` from `file`. An error of the file's reads is
/// returned as it is: the caller then leaves the headers to the GPU, whose read of the same bytes
/// reports it where it belongs.
pub fn parse_step_headers(file: &File, plan: &ReadPlan) -> std::io::Result<HostHeaders> {
    let mut out = HostHeaders::new();
    for c in &plan.chunks {
        let walked = walk_headers_at(c.len, |at, buf: &mut [u8]| file.read_exact_at(buf, c.offset + at))?;
        out.insert((c.row_group, c.column), walked);
    }
    Ok(out)
}
