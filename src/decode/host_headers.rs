//! Page headers parsed on the host, ahead of a step's decode, where the file's bytes are in the page
//! cache: only the headers are read (a few hundred bytes a page, `pread`), with the GPU kernel's host
//! reference ([`walk_headers_at`]), so the results are the kernel's. A step whose headers are ready
//! when its decode begins skips the GPU's header pass and the wait for its result: its descriptors are
//! built, and its kernels queued, while its chunks' copies are still landing.

use std::collections::BTreeMap;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::Mutex;

use crate::decode::host_kernels::page_headers::{ChunkHeaders, walk_headers_at};
use crate::plan::ReadPlan;

/// The pages of a step's chunks, by (row group, leaf column, file offset): a chunk read whole, or each
/// piece of one read page by page.
pub(crate) type HostHeaders = BTreeMap<(usize, usize, u64), ChunkHeaders>;

/// The largest share of a step's pages that may be missing from the page cache for its headers to be
/// parsed on the host: each missing page is a disk read of its own, on the reading thread's heels.
pub(crate) const MOST_UNCACHED: f64 = 0.02;

/// Whether the page headers of `plan` are worth parsing on the host: nearly all of its pages are in the
/// page cache (a `mincore` sample, [`crate::io::pread::uncached_share`]).
pub(crate) fn worth_parsing(file: &File, plan: &ReadPlan) -> bool {
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
        out.insert((c.row_group, c.column, c.offset), walked);
    }
    Ok(out)
}

/// One step's headers as the parsing thread and the step's decoder share them. The decoder takes what
/// is there when its decode begins (nothing: the GPU parses them); whatever the thread offers after
/// that is dropped at once, not held until the read ends.
#[derive(Default)]
pub(crate) struct HeaderSlot(Mutex<SlotState>);

#[derive(Default)]
enum SlotState {
    #[default]
    Pending,
    Ready(HostHeaders),
    Taken,
}

impl HeaderSlot {
    /// Leaves `headers` for the step's decoder, unless it has already begun without them (then they
    /// are dropped, and this returns false).
    pub(crate) fn offer(&self, headers: HostHeaders) -> bool {
        let mut slot = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let pending = matches!(*slot, SlotState::Pending);
        if pending {
            *slot = SlotState::Ready(headers);
        }
        pending
    }

    /// The step's headers if they were offered in time; from then on the slot takes no more.
    pub(crate) fn take(&self) -> Option<HostHeaders> {
        let mut slot = self.0.lock().unwrap_or_else(|p| p.into_inner());
        match std::mem::replace(&mut *slot, SlotState::Taken) {
            SlotState::Ready(headers) => Some(headers),
            SlotState::Pending | SlotState::Taken => None,
        }
    }

    /// Whether the step's decoder has begun, so that parsing its headers would be wasted.
    pub(crate) fn is_taken(&self) -> bool {
        matches!(*self.0.lock().unwrap_or_else(|p| p.into_inner()), SlotState::Taken)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one_chunk(pages: usize) -> HostHeaders {
        let mut h = HostHeaders::new();
        h.insert(
            (0, 0, 4),
            ChunkHeaders {
                pages: vec![Default::default(); pages],
                ..Default::default()
            },
        );
        h
    }

    #[test]
    fn a_slot_gives_what_was_offered_once() {
        let slot = HeaderSlot::default();
        assert!(!slot.is_taken());
        assert!(slot.offer(one_chunk(3)));
        let taken = slot.take().expect("offered before the decoder began");
        assert_eq!(taken[&(0, 0, 4)].pages.len(), 3);
        assert!(slot.is_taken());
        assert!(slot.take().is_none());
    }

    #[test]
    fn headers_offered_after_the_decoder_began_are_not_held() {
        let slot = HeaderSlot::default();
        assert!(slot.take().is_none());
        assert!(!slot.offer(one_chunk(2)));
        assert!(slot.is_taken());
        assert!(slot.take().is_none());
    }
}
