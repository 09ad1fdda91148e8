//! The host implementation of every GPU decode kernel: the tests' oracle twin of each kernel, and a
//! production host path (the page headers of steps in the page cache are parsed here ahead of the
//! GPU, [`crate::decode::host_headers`]; the host executor runs the whole pipeline on them).
//!
//! Every kernel in `../kernels/*.cu` has a function here computing the same result on the CPU over the
//! same descriptors ([`crate::decode::layout`]), with addresses into an [`Arena`] standing in for
//! device memory. CI runs the whole GPU decode pipeline on these references against arrow-rs; on a GPU
//! the device result must equal the reference's. A reference, like its kernel, reports bad input as an
//! error code in the descriptor and never panics or reads outside the given lengths.

pub mod convert;
pub(crate) mod core;
#[cfg(test)]
mod core_tests;
pub mod delta;
pub(crate) mod nested;
pub mod page_headers;
pub mod row_filter;
#[cfg(test)]
pub(crate) mod test_pages;
pub mod unsnap;
pub mod unzstd;
pub mod validate;

/// A xorshift64 generator from `seed` (not 0): the reproducible bytes of the kernels' test bodies.
#[cfg(any(test, feature = "conformance"))]
pub(crate) fn xorshift(mut seed: u64) -> impl FnMut() -> u64 {
    move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    }
}

use std::collections::BTreeMap;

use bytemuck::Pod;

/// Host memory addressed like device memory: regions at fake addresses, so descriptors hold the same
/// `u64` addresses on both sides.
#[derive(Debug, Default)]
pub struct Arena {
    regions: BTreeMap<u64, Vec<u8>>,
    next: u64,
    /// Bytes in the regions now, and the most at once (a step's peak, as the device executor counts it).
    live: u64,
    peak: u64,
}

/// Alignment of every region's start (as `cuMemAlloc`'s).
const ALIGN: u64 = 256;

impl Arena {
    /// An empty arena. Addresses start well above 0, so 0 can mean "none".
    pub fn new() -> Self {
        Arena {
            regions: BTreeMap::new(),
            next: 1 << 20,
            live: 0,
            peak: 0,
        }
    }

    /// A new zeroed region of `len` bytes; its address.
    pub fn alloc(&mut self, len: usize) -> u64 {
        self.insert(vec![0; len])
    }

    /// A new region owning `bytes`; its address.
    fn insert(&mut self, bytes: Vec<u8>) -> u64 {
        let addr = self.next;
        let len = bytes.len();
        self.regions.insert(addr, bytes);
        self.live += len as u64;
        self.peak = self.peak.max(self.live);
        // A gap after each region, so an overrun is a miss, never a neighbour's bytes.
        self.next = (addr + len as u64 + ALIGN).div_ceil(ALIGN) * ALIGN;
        addr
    }

    /// A new region holding `bytes`; its address.
    pub fn upload(&mut self, bytes: &[u8]) -> u64 {
        self.insert(bytes.to_vec())
    }

    /// A new region holding `items` as bytes; its address.
    pub fn upload_slice<T: Pod>(&mut self, items: &[T]) -> u64 {
        self.upload(bytemuck::cast_slice(items))
    }

    /// The region containing `addr` and the offset of `addr` in it.
    fn locate(&self, addr: u64) -> Option<(u64, usize)> {
        let (&base, bytes) = self.regions.range(..=addr).next_back()?;
        let off = (addr - base) as usize;
        (off <= bytes.len()).then_some((base, off))
    }

    /// `len` bytes at `addr`, if they lie inside one region.
    pub fn get(&self, addr: u64, len: u64) -> Option<&[u8]> {
        let (base, off) = self.locate(addr)?;
        let bytes = &self.regions[&base];
        let end = off.checked_add(usize::try_from(len).ok()?)?;
        bytes.get(off..end)
    }

    /// `len` bytes at `addr`, writable, if they lie inside one region.
    pub(crate) fn get_mut(&mut self, addr: u64, len: u64) -> Option<&mut [u8]> {
        let (base, off) = self.locate(addr)?;
        let bytes = self.regions.get_mut(&base)?;
        let end = off.checked_add(usize::try_from(len).ok()?)?;
        bytes.get_mut(off..end)
    }

    /// `count` values of `T` at `addr` (copied: addresses need not be aligned for `T`).
    pub fn read<T: Pod>(&self, addr: u64, count: usize) -> Option<Vec<T>> {
        let bytes = self.get(addr, (count * std::mem::size_of::<T>()) as u64)?;
        Some(bytemuck::pod_collect_to_vec(bytes))
    }

    /// Writes `items` at `addr`; false (and nothing written) if they do not fit in one region.
    pub fn write<T: Pod>(&mut self, addr: u64, items: &[T]) -> bool {
        let src: &[u8] = bytemuck::cast_slice(items);
        match self.get_mut(addr, src.len() as u64) {
            Some(dst) => {
                dst.copy_from_slice(src);
                true
            }
            None => false,
        }
    }

    /// Every region, in address order: its address and bytes.
    pub fn iter(&self) -> impl Iterator<Item = (u64, &[u8])> + '_ {
        self.regions.iter().map(|(&addr, bytes)| (addr, bytes.as_slice()))
    }

    /// The whole region that starts at `addr`.
    pub(crate) fn region(&self, addr: u64) -> Option<&[u8]> {
        self.regions.get(&addr).map(Vec::as_slice)
    }

    /// Frees the region that starts at `addr`.
    pub(crate) fn free(&mut self, addr: u64) {
        if let Some(r) = self.regions.remove(&addr) {
            self.live -= r.len() as u64;
        }
    }

    /// The most bytes the regions held at once.
    #[cfg(test)]
    pub(crate) fn peak_bytes(&self) -> u64 {
        self.peak
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arena_bounds() {
        let mut a = Arena::new();
        let x = a.upload(&[1, 2, 3, 4]);
        let y = a.alloc(8);
        assert_ne!(x, 0);
        assert_eq!(a.get(x + 1, 3), Some(&[2u8, 3, 4][..]));
        assert_eq!(a.get(x + 1, 4), None, "past the end of a region");
        assert_eq!(a.get(x - 1, 1), None, "before the first region");
        assert_eq!(a.get(y + 4, 4), Some(&[0u8; 4][..]));
        assert!(a.write(y, &[7u32, 9]));
        assert_eq!(a.read::<u32>(y, 2), Some(vec![7, 9]));
        assert!(!a.write(y + 4, &[1u64]), "a write past the end is refused");
        assert_eq!(a.read::<u32>(y, 2), Some(vec![7, 9]), "and changes nothing");
        a.free(x);
        assert_eq!(a.get(x, 1), None);
    }
}
