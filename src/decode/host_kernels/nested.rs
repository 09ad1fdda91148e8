//! References of the nested-column kernels (`kernels/nested.cu`): a column's definition and
//! repetition levels one byte per level entry, and the Arrow structure built from them.
//!
//! Lists: the entries of a leaf's pages are its levels (not rows). A *slot space* `(r, t)` is the set
//! of entries with `rep <= r` and `def >= t`: the rows are `(0, 0)`; the elements of a list whose
//! repetition level is `r` and whose items are defined from level `t` are `(r, t)` (arrow-rs's
//! `ListArrayReader`: an entry with `rep < r` starts a list, one with `def >= t` and `rep <= r` is an
//! item). A node's arrays (validity, offsets, a leaf's values) are indexed by the slots of its space,
//! found by a prefix count over the entries (`slot_scan`).

use bytemuck::{Pod, Zeroable};

use super::Arena;
use super::core::{bytes_at, hybrid_prefix};
use crate::decode::layout::ErrorCode;

/// One page's repetition levels to decode (`gp_rep_levels`): in and out. Twin of `LevelJob` in
/// nested.cu.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Pod, Zeroable)]
pub(crate) struct LevelJob {
    /// The levels: the hybrid stream, or (flag [`LEVELS_V1_PREFIX`]) a v1 page body starting with
    /// the stream's u32 LE length.
    pub src: u64,
    /// Bytes at `src`.
    pub src_len: u64,
    /// `count` bytes to write, one a level.
    pub out: u64,
    /// Levels.
    pub count: u32,
    /// The largest valid level.
    pub max_level: u32,
    /// Bits per level (at most 8).
    pub bit_width: u32,
    /// [`LEVELS_V1_PREFIX`], [`LEVELS_FIRST_ZERO`].
    pub flags: u32,
    /// Out: the first [`ErrorCode`], 0 when none.
    pub error: u32,
    /// Out: the level index it was met at (or the prefix length).
    pub error_detail: u32,
}

// The twin in nested.cu: three u64 then six u32, no padding.
const _: () = assert!(std::mem::size_of::<LevelJob>() == 48);

/// [`LevelJob::flags`]: `src` is a v1 body; the levels follow its 4-byte length.
pub(crate) const LEVELS_V1_PREFIX: u32 = 1;
/// [`LevelJob::flags`]: the first level must be 0 (a chunk's first page starts a row).
pub(crate) const LEVELS_FIRST_ZERO: u32 = 2;

fn job_error(job: &mut LevelJob, code: ErrorCode, detail: u32) {
    if job.error == 0 {
        job.error = code as u32;
        job.error_detail = detail;
    }
}

/// `gp_rep_levels`: each job's levels, one byte each at `out`. Errors: [`ErrorCode::Overrun`] for a
/// v1 prefix past `src_len` (detail the length) or a stream that ends early (detail the first
/// missing index), [`ErrorCode::BadBitWidth`] (width over 8), [`ErrorCode::BadLevel`] for a level
/// over `max_level`, or a first level not 0 under [`LEVELS_FIRST_ZERO`] (detail its index); the levels
/// before the failing one are written.
pub(crate) fn rep_levels(arena: &mut Arena, jobs: &mut [LevelJob]) {
    for job in jobs.iter_mut() {
        if job.bit_width > 8 {
            job_error(job, ErrorCode::BadBitWidth, job.bit_width);
            continue;
        }
        let (src, len) = if job.flags & LEVELS_V1_PREFIX != 0 {
            let Some(prefix) = (job.src_len >= 4).then(|| arena.get(job.src, 4)).flatten() else {
                job_error(job, ErrorCode::Overrun, 0);
                continue;
            };
            let l = u64::from(u32::from_le_bytes([prefix[0], prefix[1], prefix[2], prefix[3]]));
            if l > job.src_len - 4 {
                job_error(job, ErrorCode::Overrun, l as u32);
                continue;
            }
            (job.src + 4, l)
        } else {
            (job.src, job.src_len)
        };
        let Some(stream) = bytes_at(arena, src, len) else {
            job_error(job, ErrorCode::Overrun, 0);
            continue;
        };
        let max = job.max_level;
        let first_zero = job.flags & LEVELS_FIRST_ZERO != 0;
        let mut index = 0u32;
        let (levels, stop) = hybrid_prefix(&stream, job.bit_width, job.count, |v| {
            let bad = v > max || (first_zero && index == 0 && v != 0);
            index += 1;
            bad
        });
        match stop {
            Some(super::core::Stop::Rejected(i)) => job_error(job, ErrorCode::BadLevel, i),
            Some(super::core::Stop::Ended(i)) => job_error(job, ErrorCode::Overrun, i),
            None => {}
        }
        let bytes: Vec<u8> = levels.iter().map(|&l| l as u8).collect();
        if !bytes.is_empty() && !arena.write(job.out, &bytes) {
            job_error(job, ErrorCode::BadPageSize, job.count);
        }
    }
}

/// Whether entry `i` is a slot of space `(r, t)`; absent levels read 0.
fn in_space(def: &[u8], rep: &[u8], i: usize, r: u32, t: u32) -> bool {
    let d = def.get(i).copied().unwrap_or(0);
    let p = rep.get(i).copied().unwrap_or(0);
    u32::from(p) <= r && u32::from(d) >= t
}

/// Reads `n` level bytes at `addr` (0: none, all levels 0).
fn levels_or_zero(arena: &Arena, addr: u64, n: u64) -> Option<Vec<u8>> {
    if addr == 0 {
        Some(Vec::new())
    } else {
        bytes_at(arena, addr, n)
    }
}

/// The slot scan (`gp_slot_tile_counts`, `_bases`, `_scan`): `pos[i]` (u32, i in 0..=n) = the slots of `(r, t)` among entries before `i`;
/// `pos[n]` is their number. `def` / `rep` 0: levels all 0.
pub(crate) fn slot_scan(arena: &mut Arena, def: u64, rep: u64, n: u64, (r, t): (u32, u32), pos: u64) {
    let (Some(d), Some(p)) = (levels_or_zero(arena, def, n), levels_or_zero(arena, rep, n)) else {
        return;
    };
    let mut out = Vec::with_capacity(n as usize + 1);
    let mut k = 0u32;
    for i in 0..n as usize {
        out.push(k);
        k += u32::from(in_space(&d, &p, i, r, t));
    }
    out.push(k);
    arena.write(pos, &out);
}

/// `gp_list_offsets`: for each slot `i` of the parent space, `offsets[parent_pos[i]] =
/// child_pos[i]`, and `offsets[parent_pos[n]] = child_pos[n]`: a list's offsets into its items'
/// slots; 32-bit offsets, or 64-bit when `wide`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn list_offsets(
    arena: &mut Arena,
    def: u64,
    rep: u64,
    n: u64,
    parent: (u32, u32),
    parent_pos: u64,
    child_pos: u64,
    wide: bool,
    offsets: u64,
) {
    let (Some(d), Some(p)) = (levels_or_zero(arena, def, n), levels_or_zero(arena, rep, n)) else {
        return;
    };
    let (Some(pp), Some(cp)) = (
        arena.read::<u32>(parent_pos, n as usize + 1),
        arena.read::<u32>(child_pos, n as usize + 1),
    ) else {
        return;
    };
    let put = |arena: &mut Arena, at: u32, v: u32| {
        if wide {
            arena.write(offsets + 8 * u64::from(at), &[i64::from(v)]);
        } else {
            arena.write(offsets + 4 * u64::from(at), &[v as i32]);
        }
    };
    for i in 0..n as usize {
        if in_space(&d, &p, i, parent.0, parent.1) {
            put(arena, pp[i], cp[i]);
        }
    }
    put(arena, pp[n as usize], cp[n as usize]);
}

/// `gp_slot_flags`: for each slot `i` of `(r, t)`, `out[pos[i]] = def[i] >= threshold` (a struct's
/// or a list's validity, a leaf's presence).
#[allow(clippy::too_many_arguments)]
pub(crate) fn slot_flags(
    arena: &mut Arena,
    def: u64,
    rep: u64,
    n: u64,
    space: (u32, u32),
    pos: u64,
    threshold: u32,
    out: u64,
) {
    let (Some(d), Some(p)) = (levels_or_zero(arena, def, n), levels_or_zero(arena, rep, n)) else {
        return;
    };
    let Some(ps) = arena.read::<u32>(pos, n as usize + 1) else {
        return;
    };
    for (i, &at) in ps.iter().take(n as usize).enumerate() {
        if in_space(&d, &p, i, space.0, space.1) {
            let v = u8::from(u32::from(d.get(i).copied().unwrap_or(0)) >= threshold);
            arena.write(out + u64::from(at), &[v]);
        }
    }
}

/// `gp_compact`: for each slot `i` of `(r, t)`, the `width` bytes of `src` at `i` to `dst` at
/// `pos[i]`; with `with_end`, also entry `n` to `pos[n]` (a string column's last offset).
#[allow(clippy::too_many_arguments)]
pub fn compact(
    arena: &mut Arena,
    def: u64,
    rep: u64,
    n: u64,
    space: (u32, u32),
    pos: u64,
    src: u64,
    width: u32,
    with_end: bool,
    dst: u64,
) {
    let (Some(d), Some(p)) = (levels_or_zero(arena, def, n), levels_or_zero(arena, rep, n)) else {
        return;
    };
    let Some(ps) = arena.read::<u32>(pos, n as usize + 1) else {
        return;
    };
    let w = u64::from(width);
    let copy = |arena: &mut Arena, from: u64, to: u32| {
        if let Some(bytes) = bytes_at(arena, src + from * w, w) {
            arena.write(dst + u64::from(to) * w, &bytes);
        }
    };
    for (i, &at) in ps.iter().take(n as usize).enumerate() {
        if in_space(&d, &p, i, space.0, space.1) {
            copy(arena, i as u64, at);
        }
    }
    if with_end {
        copy(arena, n, ps[n as usize]);
    }
}

/// `gp_fixed_size_check`: over `slots` lists of 32-bit `offsets`, the lowest list whose item count is
/// neither 0 nor `size` is min'ed into the `u64` at `result`, and the lists of no item (null or empty)
/// are added to the `u64` after it. Nothing is done where a buffer is not in the arena.
pub(crate) fn fixed_size_check(arena: &mut Arena, offsets: u64, slots: u64, size: u32, result: u64) {
    let (Some(o), Some(r)) = (
        arena.read::<i32>(offsets, slots as usize + 1),
        arena.read::<u64>(result, 2),
    ) else {
        return;
    };
    let (mut first_bad, mut empty) = (r[0], r[1]);
    for (i, w) in o.windows(2).enumerate() {
        let len = i64::from(w[1]) - i64::from(w[0]);
        if len == 0 {
            empty += 1;
        } else if len != i64::from(size) {
            first_bad = first_bad.min(i as u64);
        }
    }
    arena.write(result, &[first_bad, empty]);
}

/// `gp_fixed_size_pad`: item `k` of list `i` (`slots * size` items), for a list of `size` items, is
/// the `width` bytes of item `offsets[i] + k` of `src` (of `src_len` items) and its bit of the
/// LSB-first bitmap `src_validity` (all valid where 0); for a list of no item (null or empty: arrow-rs
/// pads them so) or an item outside `src`, zeros and a null. Values at `dst`, a validity byte an item
/// at `dst_valid`. Nothing is done where a buffer is not in the arena.
#[allow(clippy::too_many_arguments)]
pub(crate) fn fixed_size_pad(
    arena: &mut Arena,
    offsets: u64,
    slots: u64,
    size: u32,
    src: (u64, u64, u64),
    width: u32,
    dst: u64,
    dst_valid: u64,
) {
    let (src, src_validity, src_len) = src;
    let w = width as usize;
    let Some(o) = arena.read::<i32>(offsets, slots as usize + 1) else {
        return;
    };
    let values = match src_len {
        0 => Vec::new(),
        len => match bytes_at(arena, src, len * u64::from(width)) {
            Some(v) => v,
            None => return,
        },
    };
    let bits = match src_validity {
        _ if src_len == 0 => None,
        0 => None,
        at => match bytes_at(arena, at, src_len.div_ceil(8)) {
            Some(b) => Some(b),
            None => return,
        },
    };
    let n = slots as usize * size as usize;
    let mut out = vec![0u8; n * w];
    let mut valid = vec![0u8; n];
    for j in 0..n {
        let (i, k) = (j / size as usize, j % size as usize);
        let (start, len) = (i64::from(o[i]), i64::from(o[i + 1]) - i64::from(o[i]));
        let s = start + k as i64;
        if len == i64::from(size) && s >= 0 && (s as u64) < src_len {
            let s = s as usize;
            valid[j] = bits.as_ref().map_or(1, |b| (b[s >> 3] >> (s & 7)) & 1);
            out[j * w..(j + 1) * w].copy_from_slice(&values[s * w..(s + 1) * w]);
        }
    }
    if n > 0 {
        arena.write(dst, &out);
        arena.write(dst_valid, &valid);
    }
}

/// `gp_levels_at_least`: `out[i] = (levels[i] >= threshold) as u8` for `i < n`. Nothing is written
/// when either buffer is not in the arena (a caller's bug).
pub(crate) fn levels_at_least(arena: &mut Arena, levels: u64, n: u64, threshold: u32, out: u64) {
    let Some(lv) = bytes_at(arena, levels, n) else {
        return;
    };
    let bytes: Vec<u8> = lv.iter().map(|&l| u8::from(u32::from(l) >= threshold)).collect();
    if !bytes.is_empty() {
        arena.write(out, &bytes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decode::layout::{ColumnDesc, PageDesc};

    /// An RLE/bit-packed hybrid stream of `levels` (`width` bits each): runs of equal values as RLE
    /// runs when `rle` says so at their start, the rest in bit-packed groups of 8 (the last padded).
    fn encode(levels: &[u32], width: u32, rle: &dyn Fn(usize) -> bool) -> Vec<u8> {
        fn uleb(mut v: u64, out: &mut Vec<u8>) {
            loop {
                let b = (v & 0x7f) as u8;
                v >>= 7;
                if v == 0 {
                    out.push(b);
                    return;
                }
                out.push(b | 0x80);
            }
        }
        let mut out = Vec::new();
        let mut i = 0;
        while i < levels.len() {
            if rle(i) {
                let mut j = i;
                while j < levels.len() && levels[j] == levels[i] {
                    j += 1;
                }
                uleb(((j - i) as u64) << 1, &mut out);
                let v = levels[i];
                for b in 0..width.div_ceil(8) {
                    out.push((v >> (8 * b)) as u8);
                }
                i = j;
            } else {
                let group: Vec<u32> = (0..8).map(|k| levels.get(i + k).copied().unwrap_or(0)).collect();
                uleb(1 << 1 | 1, &mut out);
                let mut acc = 0u64;
                let mut bits = 0;
                for v in group {
                    acc |= u64::from(v) << bits;
                    bits += width;
                    while bits >= 8 {
                        out.push(acc as u8);
                        acc >>= 8;
                        bits -= 8;
                    }
                }
                if bits > 0 {
                    out.push(acc as u8);
                }
                i += 8;
            }
        }
        out
    }

    fn width_of(max_def: u32) -> u32 {
        32 - max_def.leading_zeros()
    }

    /// One page of `levels` at `row_start` of a column of `rows` rows through `gp_levels`'s reference;
    /// the column's levels buffer (`out_def`, zeroed) read back.
    fn run(levels: &[u32], max_def: u32, rows: u64, row_start: u32, stream: &[u8]) -> Vec<u8> {
        let mut arena = Arena::new();
        let s = arena.upload(stream);
        let out = arena.alloc(rows as usize);
        let page = PageDesc {
            levels: s,
            levels_len: stream.len() as u64,
            num_values: levels.len() as u32,
            row_start,
            max_def,
            def_bit_width: width_of(max_def),
            ..Default::default()
        };
        let col = ColumnDesc {
            num_rows: rows,
            out_def: out,
            ..Default::default()
        };
        super::super::core::levels(&mut arena, &mut [page], &[col]);
        arena.read(out, rows as usize).unwrap()
    }

    #[test]
    fn levels_land_at_the_pages_rows() {
        let levels = [0, 1, 2, 3, 3, 3, 3, 3, 3, 1, 0];
        let stream = encode(&levels, 2, &|i| i >= 3);
        let got = run(&levels, 3, 14, 2, &stream);
        assert_eq!(got, [0, 0, 0, 1, 2, 3, 3, 3, 3, 3, 3, 1, 0, 0]);
    }

    #[test]
    fn a_page_outside_its_column_or_without_a_levels_buffer_writes_nothing() {
        let levels = [1, 2, 2];
        let stream = encode(&levels, 2, &|_| false);
        // Rows 2..5 of a 4-row column.
        let got = run(&levels, 2, 4, 2, &stream);
        assert_eq!(got, [0; 4]);
        let mut arena = Arena::new();
        let s = arena.upload(&stream);
        let page = PageDesc {
            levels: s,
            levels_len: stream.len() as u64,
            num_values: 3,
            max_def: 2,
            def_bit_width: 2,
            ..Default::default()
        };
        let out = arena.alloc(3);
        let col = ColumnDesc {
            num_rows: 3,
            ..Default::default()
        };
        // No levels buffer named: the levels decoded (the page is fine), `out` untouched.
        let mut pages = [page];
        super::super::core::levels(&mut arena, &mut pages, &[col]);
        assert_eq!((pages[0].error, pages[0].num_non_null), (0, 2));
        // Column 1 named where there is one column: the page's error, no write, no panic.
        let mut pages = [PageDesc { column: 1, ..page }];
        super::super::core::levels(&mut arena, &mut pages, &[ColumnDesc { out_def: out, ..col }]);
        assert_eq!(pages[0].error, ErrorCode::BadPageSize as u32);
        assert_eq!(arena.read::<u8>(out, 3).unwrap(), [0; 3]);
    }

    #[test]
    fn a_short_stream_or_a_level_over_the_maximum_stops_the_page() {
        // A level of 3 in a column whose maximum is 2: the levels before it only.
        let stream = encode(&[1, 1, 3, 0], 2, &|_| false);
        let got = run(&[1, 1, 3, 0], 2, 4, 0, &stream);
        assert_eq!(got, [1, 1, 0, 0]);
        let levels = [2, 2, 1, 0, 2, 1, 1, 2];
        let mut short = encode(&levels, 2, &|_| false);
        short.truncate(2); // header and 4 of the 8 levels
        let got = run(&levels, 2, 8, 0, &short);
        assert_eq!(got, [2, 2, 1, 0, 0, 0, 0, 0]);
    }

    #[test]
    fn thresholds_mark_the_levels_that_reach_them() {
        let mut arena = Arena::new();
        let lv = arena.upload(&[0, 1, 2, 3, 2, 1]);
        let out = arena.alloc(6);
        levels_at_least(&mut arena, lv, 6, 2, out);
        assert_eq!(arena.read::<u8>(out, 6).unwrap(), [0, 0, 1, 1, 1, 0]);
        // A buffer not in the arena: nothing written, no panic.
        levels_at_least(&mut arena, lv, 60, 1, out);
        assert_eq!(arena.read::<u8>(out, 6).unwrap(), [0, 0, 1, 1, 1, 0]);
    }

    /// `[1, 2], null, [], [null, 3]` as a nullable list of nullable ints (max_def 3, max_rep 1).
    #[test]
    fn a_list_column_gets_arrow_rs_offsets_validity_and_items() {
        let rep = [0u8, 1, 0, 0, 0, 1];
        let def = [3u8, 3, 0, 1, 2, 3];
        let mut a = Arena::new();
        let (d, r) = (a.upload(&def), a.upload(&rep));
        let (rows, items) = (a.alloc(7 * 4), a.alloc(7 * 4));
        slot_scan(&mut a, d, r, 6, (0, 0), rows);
        slot_scan(&mut a, d, r, 6, (1, 2), items);
        assert_eq!(a.read::<u32>(rows, 7).unwrap(), [0, 1, 1, 2, 3, 4, 4]);
        assert_eq!(a.read::<u32>(items, 7).unwrap(), [0, 1, 2, 2, 2, 3, 4]);
        let offsets = a.alloc(5 * 4);
        list_offsets(&mut a, d, r, 6, (0, 0), rows, items, false, offsets);
        assert_eq!(a.read::<i32>(offsets, 5).unwrap(), [0, 2, 2, 2, 4]);
        let wide = a.alloc(5 * 8);
        list_offsets(&mut a, d, r, 6, (0, 0), rows, items, true, wide);
        assert_eq!(a.read::<i64>(wide, 5).unwrap(), [0, 2, 2, 2, 4]);
        let valid = a.alloc(4);
        slot_flags(&mut a, d, r, 6, (0, 0), rows, 1, valid);
        assert_eq!(a.read::<u8>(valid, 4).unwrap(), [1, 0, 1, 1]);
        let present = a.alloc(4);
        slot_flags(&mut a, d, r, 6, (1, 2), items, 3, present);
        assert_eq!(a.read::<u8>(present, 4).unwrap(), [1, 1, 0, 1]);
        // The leaf's values, one an entry (zeros for the entries that are no item), packed.
        let values = a.upload_slice(&[1i32, 2, 0, 0, 0, 3]);
        let packed = a.alloc(4 * 4);
        compact(&mut a, d, r, 6, (1, 2), items, values, 4, false, packed);
        assert_eq!(a.read::<i32>(packed, 4).unwrap(), [1, 2, 0, 3]);
        // String offsets keep their last.
        let str_offsets = a.upload_slice(&[0i32, 1, 3, 3, 3, 3, 5]);
        let packed_offsets = a.alloc(5 * 4);
        compact(&mut a, d, r, 6, (1, 2), items, str_offsets, 4, true, packed_offsets);
        assert_eq!(a.read::<i32>(packed_offsets, 5).unwrap(), [0, 1, 3, 3, 5]);
    }

    #[test]
    fn repetition_levels_are_checked_and_written() {
        let levels = [0u32, 1, 1, 0, 2, 0];
        let stream = encode(&levels, 2, &|i| i % 2 == 0);
        let mut a = Arena::new();
        let mut v1 = (stream.len() as u32).to_le_bytes().to_vec();
        v1.extend_from_slice(&stream);
        v1.extend_from_slice(&[9, 9, 9]); // what follows: definition levels, values
        let (plain, prefixed) = (a.upload(&stream), a.upload(&v1));
        let outs = [a.alloc(6), a.alloc(6), a.alloc(6), a.alloc(6)];
        let job = |src, src_len, out, max_level, flags| LevelJob {
            src,
            src_len,
            out,
            count: 6,
            max_level,
            bit_width: 2,
            flags,
            ..Default::default()
        };
        let mut jobs = [
            job(plain, stream.len() as u64, outs[0], 2, LEVELS_FIRST_ZERO),
            job(prefixed, v1.len() as u64, outs[1], 2, LEVELS_V1_PREFIX),
            job(plain, stream.len() as u64, outs[2], 1, 0),
            job(prefixed, 5, outs[3], 2, LEVELS_V1_PREFIX),
        ];
        rep_levels(&mut a, &mut jobs);
        assert_eq!(jobs[0].error, 0);
        assert_eq!(a.read::<u8>(outs[0], 6).unwrap(), [0, 1, 1, 0, 2, 0]);
        assert_eq!(jobs[1].error, 0);
        assert_eq!(a.read::<u8>(outs[1], 6).unwrap(), [0, 1, 1, 0, 2, 0]);
        assert_eq!((jobs[2].error, jobs[2].error_detail), (ErrorCode::BadLevel as u32, 4));
        assert_eq!(a.read::<u8>(outs[2], 6).unwrap(), [0, 1, 1, 0, 0, 0]);
        assert_eq!(jobs[3].error, ErrorCode::Overrun as u32);
        // A chunk's first page must start a row.
        let late = encode(&[1, 0], 1, &|_| true);
        let s = a.upload(&late);
        let mut first = [LevelJob {
            count: 2,
            bit_width: 1,
            ..job(s, late.len() as u64, outs[0], 1, LEVELS_FIRST_ZERO)
        }];
        rep_levels(&mut a, &mut first);
        assert_eq!((first[0].error, first[0].error_detail), (ErrorCode::BadLevel as u32, 0));
    }

    #[test]
    fn v1_pages_of_repeated_columns_step_over_their_repetition_levels() {
        use crate::decode::layout::{PAGE_V1_LEVELS, PAGE_V1_REP_LEVELS};
        let mut body = 2u32.to_le_bytes().to_vec();
        body.extend_from_slice(&[0xaa, 0xbb]); // repetition levels
        body.extend_from_slice(&3u32.to_le_bytes());
        body.extend_from_slice(&[1, 2, 3]); // definition levels
        body.extend_from_slice(&[7, 7]); // values
        let mut a = Arena::new();
        let data = a.upload(&body);
        let page = |flags, data_len| PageDesc {
            data,
            data_len,
            flags,
            ..Default::default()
        };
        let mut pages = [
            page(PAGE_V1_LEVELS | PAGE_V1_REP_LEVELS, body.len() as u64),
            page(PAGE_V1_REP_LEVELS, body.len() as u64),
            page(PAGE_V1_LEVELS | PAGE_V1_REP_LEVELS, 10),
        ];
        super::super::core::page_setup(&mut a, &mut pages);
        assert_eq!((pages[0].levels, pages[0].levels_len), (data + 10, 3));
        assert_eq!((pages[0].values, pages[0].values_len), (data + 13, 2));
        assert_eq!((pages[1].values, pages[1].values_len), (data + 6, 9));
        assert_eq!((pages[2].error, pages[2].error_detail), (ErrorCode::Overrun as u32, 3));
    }

    /// The same case through the references, as [`crate::decode::kernels::emu::NestedOut`].
    fn nested_reference(c: &crate::decode::kernels::emu::NestedCase) -> crate::decode::kernels::emu::NestedOut {
        let n = c.def.len();
        let mut a = Arena::new();
        let (d, r) = (a.upload(&c.def), a.upload(&c.rep));
        let (pp, cp) = (a.alloc((n + 1) * 4), a.alloc((n + 1) * 4));
        slot_scan(&mut a, d, r, n as u64, c.parent, pp);
        slot_scan(&mut a, d, r, n as u64, c.child, cp);
        let parent_pos: Vec<u32> = a.read(pp, n + 1).unwrap();
        let child_pos: Vec<u32> = a.read(cp, n + 1).unwrap();
        let (ps, cs) = (parent_pos[n] as usize, child_pos[n] as usize);
        let (o32, o64) = (a.alloc((ps + 1) * 4), a.alloc((ps + 1) * 8));
        list_offsets(&mut a, d, r, n as u64, c.parent, pp, cp, false, o32);
        list_offsets(&mut a, d, r, n as u64, c.parent, pp, cp, true, o64);
        let flags = a.alloc(ps.max(1));
        slot_flags(&mut a, d, r, n as u64, c.parent, pp, c.threshold, flags);
        let src = a.upload(&c.src);
        let packed = a.alloc((cs + 1) * c.width as usize);
        compact(&mut a, d, r, n as u64, c.child, cp, src, c.width, true, packed);
        let stream = a.upload(&c.stream);
        let out = a.alloc(c.job.0.max(1) as usize);
        let mut job = [LevelJob {
            src: stream,
            src_len: c.stream.len() as u64,
            out,
            count: c.job.0,
            max_level: c.job.1,
            bit_width: c.job.2,
            flags: c.job.3,
            ..Default::default()
        }];
        rep_levels(&mut a, &mut job);
        let rows = c.job.0 as usize + 2;
        let def_out = a.alloc(rows);
        let page = PageDesc {
            levels: stream,
            levels_len: c.stream.len() as u64,
            num_values: c.job.0,
            row_start: 2,
            max_def: c.job.1,
            def_bit_width: c.job.2,
            ..Default::default()
        };
        let col = ColumnDesc {
            num_rows: rows as u64,
            out_def: def_out,
            ..Default::default()
        };
        super::super::core::levels(&mut a, &mut [page], &[col]);
        let marks = a.alloc(rows);
        levels_at_least(&mut a, def_out, rows as u64, c.threshold, marks);
        let check = a.upload_slice(&[u64::MAX, 0]);
        fixed_size_check(&mut a, o32, ps as u64, c.size, check);
        let items = ps * c.size as usize;
        let (fixed_values, fixed_valid) = (a.alloc((items * c.width as usize).max(1)), a.alloc(items.max(1)));
        let pad_src = (packed, src, cs as u64);
        fixed_size_pad(
            &mut a,
            o32,
            ps as u64,
            c.size,
            pad_src,
            c.width,
            fixed_values,
            fixed_valid,
        );
        crate::decode::kernels::emu::NestedOut {
            def_levels: a.read(def_out, rows).unwrap(),
            marks: a.read(marks, rows).unwrap(),
            parent_pos,
            child_pos,
            offsets32: a.read(o32, ps + 1).unwrap(),
            offsets64: a.read(o64, ps + 1).unwrap(),
            flags: a.read(flags, ps).unwrap(),
            packed: a.read(packed, (cs + 1) * c.width as usize).unwrap(),
            job_error: (job[0].error, job[0].error_detail),
            levels: a.read(out, c.job.0 as usize).unwrap(),
            fixed_check: a.read(check, 2).unwrap(),
            fixed_values: a.read(fixed_values, items * c.width as usize).unwrap(),
            fixed_valid: a.read(fixed_valid, items).unwrap(),
        }
    }

    /// nested.cu's kernels, run on the CPU emulation (under ASan where the compiler has it), write what
    /// the references write, over random levels (up to three scan tiles), v1 and plain streams, bad
    /// levels and short streams (the streams also read as a page's definition levels).
    #[test]
    fn kernels_match_references_in_the_emulation() {
        use crate::decode::kernels::emu;
        if let Err(why) = emu::available() {
            crate::test_skip(&why);
            return;
        }
        let mut next = crate::decode::host_kernels::xorshift(0x5eed_1157);
        for case in 0..32u32 {
            // Up to three scan tiles of 4096 entries; the last cases' streams over several decode
            // windows mix stretches of short runs (many headers a window) with runs longer than a window.
            let n =
                [0usize, 1, 31, 255, 257, 1500, 4097, 9000][case as usize % 8].max(if case >= 24 { 12_000 } else { 0 });
            let max_rep = 1 + case % 3;
            let max_def = max_rep + 1 + case % 3;
            let def: Vec<u8> = (0..n).map(|_| (next() % u64::from(max_def + 1)) as u8).collect();
            let mut rep: Vec<u8> = (0..n).map(|_| (next() % u64::from(max_rep + 1)) as u8).collect();
            if case >= 24 {
                let mut i = 0;
                while i < n {
                    let stretch = 1 + (next() % 3000) as usize;
                    if next().is_multiple_of(2) {
                        let v = (next() % u64::from(max_rep + 1)) as u8;
                        rep[i..(i + stretch).min(n)].fill(v);
                    }
                    i += stretch;
                }
            }
            if let Some(r) = rep.first_mut() {
                *r = 0;
            }
            let r = 1 + case % max_rep;
            let t = (case % max_def) + 1;
            let width = [1u32, 4, 8, 12][case as usize % 4];
            let src: Vec<u8> = (0..(n + 1) * width as usize).map(|_| next() as u8).collect();
            let levels: Vec<u32> = rep.iter().map(|&v| u32::from(v)).collect();
            let bw = 32 - max_rep.leading_zeros();
            let mut stream = encode(&levels, bw, &|i| i % 5 < 2);
            let (mut count, mut max_level, mut flags) = (n as u32, max_rep, LEVELS_FIRST_ZERO);
            match case % 4 {
                1 => {
                    // v1: the stream after its length, then other bytes.
                    let mut v1 = (stream.len() as u32).to_le_bytes().to_vec();
                    v1.extend_from_slice(&stream);
                    v1.extend_from_slice(&[0xee; 5]);
                    stream = v1;
                    flags |= LEVELS_V1_PREFIX;
                }
                2 => max_level = max_rep.saturating_sub(1), // levels over the maximum
                3 => {
                    stream.truncate(stream.len() / 2); // ends early
                    count += 3;
                }
                _ => {}
            }
            if n == 0 {
                count = 0;
            }
            let c = emu::NestedCase {
                def,
                rep,
                child: (r, t),
                parent: (r - 1, t.saturating_sub(1)),
                threshold: t,
                width,
                src,
                stream,
                job: (count, max_level, bw, flags),
                size: 1 + case % 3,
            };
            let got = emu::run_nested_emulated(&c);
            let want = nested_reference(&c);
            assert_eq!(got, want, "case {case} ({n} entries)");
        }
    }

    proptest::proptest! {
        /// Offsets and validity over any levels equal arrow-rs's `ListArrayReader` loop (with its
        /// parent threshold), and the items' slots are its child values.
        #[test]
        fn list_structure_equals_arrow_rs_loop(
            entries in proptest::collection::vec((0u8..=2, 0u8..=5), 1..200),
            rep_level in 1u32..=2,
            deeper in 1u32..=3,
            parent_threshold in 0u32..=2,
        ) {
            // A list's items are defined below its parent's slots (a schema gives no other levels).
            let item_def = parent_threshold + deeper;
            let rep: Vec<u8> = entries.iter().map(|e| e.0).collect();
            let def: Vec<u8> = entries.iter().map(|e| e.1).collect();
            let n = entries.len();
            // arrow-rs (list_array.rs, consume_batch)
            let (mut want_offsets, mut want_valid, mut cur) = (Vec::new(), Vec::new(), 0i32);
            for (&d, &r) in def.iter().zip(&rep) {
                let (d, r) = (u32::from(d), u32::from(r));
                if d < parent_threshold {
                    continue;
                }
                if r < rep_level {
                    want_offsets.push(cur);
                    want_valid.push(u8::from(d + 1 >= item_def));
                }
                if d >= item_def && r <= rep_level {
                    cur += 1;
                }
            }
            want_offsets.push(cur);
            let mut a = Arena::new();
            let (d, r) = (a.upload(&def), a.upload(&rep));
            let (pp, cp) = (a.alloc((n + 1) * 4), a.alloc((n + 1) * 4));
            let parent = (rep_level - 1, parent_threshold);
            slot_scan(&mut a, d, r, n as u64, parent, pp);
            slot_scan(&mut a, d, r, n as u64, (rep_level, item_def), cp);
            let slots = a.read::<u32>(pp + 4 * n as u64, 1).unwrap()[0] as usize;
            proptest::prop_assert_eq!(slots + 1, want_offsets.len());
            let offsets = a.alloc((slots + 1) * 4);
            list_offsets(&mut a, d, r, n as u64, parent, pp, cp, false, offsets);
            proptest::prop_assert_eq!(a.read::<i32>(offsets, slots + 1).unwrap(), want_offsets);
            if slots > 0 {
                let valid = a.alloc(slots);
                slot_flags(&mut a, d, r, n as u64, parent, pp, item_def - 1, valid);
                proptest::prop_assert_eq!(a.read::<u8>(valid, slots).unwrap(), want_valid);
            }
        }
    }

    proptest::proptest! {
        /// Any levels in any mix of runs decode to themselves, and a threshold over them is the
        /// comparison, level by level.
        #[test]
        fn levels_decode_to_themselves(
            max_def in 1u32..=8,
            raw in proptest::collection::vec(0u32..256, 0..300),
            runs in proptest::collection::vec(proptest::bool::ANY, 300),
            start in 0u32..5,
            threshold in 0u32..10,
        ) {
            let levels: Vec<u32> = raw.iter().map(|v| v % (max_def + 1)).collect();
            let stream = encode(&levels, width_of(max_def), &|i| runs[i]);
            let rows = levels.len() as u64 + u64::from(start) + 1;
            let got = run(&levels, max_def, rows, start, &stream);
            let mut want = vec![0u8; rows as usize];
            for (i, &l) in levels.iter().enumerate() {
                want[start as usize + i] = l as u8;
            }
            proptest::prop_assert_eq!(&got, &want);
            let mut arena = Arena::new();
            let lv = arena.upload(&got);
            let dst = arena.alloc(rows as usize);
            levels_at_least(&mut arena, lv, rows, threshold, dst);
            let marks: Vec<u8> = want.iter().map(|&l| u8::from(u32::from(l) >= threshold)).collect();
            proptest::prop_assert_eq!(arena.read::<u8>(dst, rows as usize).unwrap(), marks);
        }
    }
}
