//! Host references of the core decode kernels (`kernels/levels.cu`, `kernels/values.cu`,
//! `kernels/strings.cu`), one function per kernel (the three string-offset kernels are one function),
//! computing the same result over the same descriptors in an [`Arena`].
//!
//! The pipeline of one decode step, in launch order: [`page_setup`], [`levels`], [`dict_indices`],
//! [`dict_byte_array_index`], (the DELTA_* and BYTE_STREAM_SPLIT decoders,) [`gather_fixed`],
//! [`byte_array_values`], [`string_offsets`], [`copy_strings`], and [`pack_bits`] over validity and
//! boolean bytes.
//!
//! Shared rules (the kernels' too):
//! - A step does nothing for a page whose `error` is already set ([`string_offsets`] counts its rows as
//!   empty instead, so the offsets stay monotone).
//! - Errors are deterministic. A sequential stream (levels, hybrid indices, plain byte arrays) stops at
//!   its first problem: what lies before it is written, nothing after. Where values are independent
//!   (gather, dictionary lookups, string copies) every good value is written and the page's error is
//!   that of the lowest failing value or row; failing ones are left untouched. The kernels reach the
//!   same result with a block-wide minimum, so the device result, errors and details included, equals
//!   the reference's.
//! - A descriptor the orchestrator got wrong (rows outside the column, a dense width too small for the
//!   encoding) is [`ErrorCode::BadPageSize`]. A buffer missing from the arena (which on a GPU would be
//!   a wild access, the orchestrator's bug) is reported as an error here too, never a panic.

use super::Arena;
use crate::decode::layout::{
    ColumnDesc, DictDesc, DictEntry, ErrorCode, PAGE_V1_LEVELS, PAGE_V1_REP_LEVELS, PageDesc, dictionary_in_own_pages,
    dictionary_values_direct, encoding as enc, physical as pt, view_flags,
};

/// Records `code` unless the page already holds an error (the kernels' `page_error`).
fn set_error(page: &mut PageDesc, code: ErrorCode, detail: u32) {
    if page.error == 0 {
        page.error = code as u32;
        page.error_detail = detail;
    }
}

/// The page's rows lie inside its column's output, and are fewer than 2^31 (`rows_ok` in
/// core_util.cuh).
pub(super) fn rows_ok(page: &PageDesc, col: &ColumnDesc) -> bool {
    page.num_values <= i32::MAX as u32 && u64::from(page.row_start) + u64::from(page.num_values) <= col.num_rows
}

/// `len` bytes at `addr`, copied; an empty stream needs no region. `None` when not in the arena.
pub(super) fn bytes_at(arena: &Arena, addr: u64, len: u64) -> Option<Vec<u8>> {
    if len == 0 {
        return Some(Vec::new());
    }
    arena.get(addr, len).map(<[u8]>::to_vec)
}

fn u32_le(b: &[u8]) -> u32 {
    u32::from_le_bytes([b[0], b[1], b[2], b[3]])
}

// ---- RLE / bit-packed hybrid ----

/// An unsigned LEB128 varint at `*pos` (at most 10 bytes, as `read_uleb128` in common.cuh).
pub(crate) fn read_uleb128(bytes: &[u8], pos: &mut usize) -> Option<u64> {
    let mut v = 0u64;
    let mut shift = 0u32;
    let mut p = *pos;
    for _ in 0..10 {
        let b = *bytes.get(p)?;
        p += 1;
        v |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            *pos = p;
            return Some(v);
        }
        shift += 7;
    }
    None
}

/// `width` (<= 32) bits at bit offset `bit` of an LSB-first stream; bits past the end read as 0.
fn read_bits(bytes: &[u8], bit: u64, width: u32) -> u32 {
    if width == 0 {
        return 0;
    }
    let byte = (bit >> 3) as usize;
    let mut acc = 0u64;
    for i in 0..5 {
        if let Some(&b) = bytes.get(byte.wrapping_add(i)) {
            acc |= u64::from(b) << (8 * i);
        }
    }
    let v = acc >> (bit & 7);
    (v & ((1u64 << width) - 1)) as u32
}

/// A sequential reader of an RLE/bit-packed hybrid stream, with the kernels' semantics (see
/// `core_util.cuh`): RLE values are not masked to the width; a bit-packed value is decodable when all
/// its bits lie inside the stream; a header is read only when a value is wanted.
struct HybridReader<'a> {
    bytes: &'a [u8],
    width: u32,
    pos: usize,
    run_left: u64,
    run_rle: bool,
    run_value: u32,
    run_bit: u64,
    run_avail: u64,
}

impl<'a> HybridReader<'a> {
    fn new(bytes: &'a [u8], width: u32) -> Self {
        HybridReader {
            bytes,
            width,
            pos: 0,
            run_left: 0,
            run_rle: false,
            run_value: 0,
            run_bit: 0,
            run_avail: 0,
        }
    }

    /// The next value, `None` where the stream ends.
    fn next_value(&mut self) -> Option<u32> {
        let len = self.bytes.len();
        while self.run_left == 0 {
            let h = read_uleb128(self.bytes, &mut self.pos)?;
            if h == 0 {
                // A zero header ends the stream, as arrow-rs and Arrow C++ read it.
                return None;
            }
            let n = h >> 1;
            if h & 1 == 1 {
                self.run_left = n.saturating_mul(8);
                self.run_rle = false;
                self.run_bit = self.pos as u64 * 8;
                let left = (len - self.pos) as u64;
                self.run_avail = match self.width {
                    0 => u64::MAX,
                    w => left * 8 / u64::from(w),
                };
                let run_bytes = n.saturating_mul(u64::from(self.width));
                self.pos += run_bytes.min(left) as usize;
            } else {
                let nb = self.width.div_ceil(8) as usize;
                let raw = self.bytes.get(self.pos..self.pos + nb)?;
                self.run_value = raw.iter().rev().fold(0u32, |v, &b| (v << 8) | u32::from(b));
                self.pos += nb;
                self.run_left = n;
                self.run_rle = true;
            }
        }
        if self.run_rle {
            self.run_left -= 1;
            return Some(self.run_value);
        }
        if self.run_avail == 0 {
            return None;
        }
        let v = read_bits(self.bytes, self.run_bit, self.width);
        self.run_bit += u64::from(self.width);
        self.run_avail -= 1;
        self.run_left -= 1;
        Some(v)
    }
}

/// How a hybrid decode stopped early.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Stop {
    /// The stream ended before the value at this index.
    Ended(u32),
    /// The caller rejected the value at this index.
    Rejected(u32),
}

/// Decodes up to `count` values, stopping at the first the stream lacks or `reject` refuses: the
/// values before that point, and why it stopped.
pub(super) fn hybrid_prefix(
    bytes: &[u8],
    width: u32,
    count: u32,
    mut reject: impl FnMut(u32) -> bool,
) -> (Vec<u32>, Option<Stop>) {
    let mut r = HybridReader::new(bytes, width);
    let mut out = Vec::new();
    for i in 0..count {
        match r.next_value() {
            None => return (out, Some(Stop::Ended(i))),
            Some(v) if reject(v) => return (out, Some(Stop::Rejected(i))),
            Some(v) => out.push(v),
        }
    }
    (out, None)
}

/// Decodes `count` values of an RLE/bit-packed hybrid stream of `bit_width`-bit values, with the GPU
/// decoder's semantics (RLE values are not masked; a truncated last bit-packed run is fine while the
/// wanted values' bits are inside `bytes`). Returns the values and the bytes consumed: through the end
/// of the last run read (a bit-packed run counts its declared length, clamped to the stream).
/// Errors: [`ErrorCode::BadBitWidth`] for a width over 32, [`ErrorCode::Overrun`] when the stream ends
/// before `count` values.
#[cfg(any(test, feature = "fuzzing"))] // the fuzz target and the tests; the kernels decode inline
pub fn decode_hybrid(bytes: &[u8], bit_width: u32, count: usize) -> Result<(Vec<u32>, usize), ErrorCode> {
    if bit_width > 32 {
        return Err(ErrorCode::BadBitWidth);
    }
    let mut r = HybridReader::new(bytes, bit_width);
    let mut out = Vec::with_capacity(count.min(bytes.len().saturating_mul(8).saturating_add(64)));
    for _ in 0..count {
        out.push(r.next_value().ok_or(ErrorCode::Overrun)?);
    }
    Ok((out, r.pos))
}

// ---- kernels ----

/// `gp_page_setup`: for pages flagged [`PAGE_V1_LEVELS`], splits `data` at the u32 LE length prefix
/// of the definition levels into `levels` and `values`, after stepping over the repetition levels
/// (their own u32 LE length, then the stream) of pages flagged [`PAGE_V1_REP_LEVELS`].
/// [`ErrorCode::Overrun`] where a prefix is missing (detail 0) or announces more than the body holds
/// (detail that length).
pub(crate) fn page_setup(arena: &mut Arena, pages: &mut [PageDesc]) {
    for pg in pages.iter_mut() {
        if pg.error != 0 || pg.flags & (PAGE_V1_LEVELS | PAGE_V1_REP_LEVELS) == 0 {
            continue;
        }
        let mut pos = 0u64;
        let prefix_at = |pg: &mut PageDesc, pos: u64| -> Option<u64> {
            let prefix = (pg.data_len - pos >= 4).then(|| arena.get(pg.data + pos, 4)).flatten();
            let Some(prefix) = prefix else {
                set_error(pg, ErrorCode::Overrun, 0);
                return None;
            };
            let l = u64::from(u32_le(prefix));
            if 4 + l > pg.data_len - pos {
                set_error(pg, ErrorCode::Overrun, l as u32);
                return None;
            }
            Some(l)
        };
        if pg.flags & PAGE_V1_REP_LEVELS != 0 {
            let Some(r) = prefix_at(pg, pos) else { continue };
            pos = 4 + r;
        }
        if pg.flags & PAGE_V1_LEVELS != 0 {
            let Some(l) = prefix_at(pg, pos) else { continue };
            pg.levels = pg.data + pos + 4;
            pg.levels_len = l;
            pos += 4 + l;
        }
        pg.values = pg.data + pos;
        pg.values_len = pg.data_len - pos;
    }
}

/// `gp_levels`: decodes each nullable page's definition levels into `vidx` (the row's index among the
/// page's present values, -1 for a null), `out_valid` (1/0, when set) and `num_non_null`. Pages of
/// `max_def` 0: `num_non_null = num_values`, and `vidx = i`, `out_valid = 1` where the column has them.
/// Nested columns' levels themselves, a byte each, at `out_def` where set (pages with levels only). Errors: [`ErrorCode::BadBitWidth`] (width over 8, detail the
/// width, `num_non_null` 0), [`ErrorCode::BadLevel`] / [`ErrorCode::Overrun`] at the first bad or
/// missing level (detail its index; earlier rows written and counted).
pub(crate) fn levels(arena: &mut Arena, pages: &mut [PageDesc], cols: &[ColumnDesc]) {
    for pg in pages.iter_mut() {
        if pg.error != 0 {
            continue;
        }
        let Some(col) = cols.get(pg.column as usize).filter(|c| rows_ok(pg, c)) else {
            set_error(pg, ErrorCode::BadPageSize, pg.num_values);
            continue;
        };
        if pg.max_def == 0 {
            // A page without levels in a column with them (a dictionary's entries among a
            // dictionary-typed column's plain pages): every row present, in order.
            pg.num_non_null = pg.num_values;
            let row = u64::from(pg.row_start);
            let n = pg.num_values as usize;
            let wrote_vidx =
                col.vidx == 0 || n == 0 || arena.write(col.vidx + row * 4, &(0..n as i32).collect::<Vec<i32>>());
            let wrote_valid = col.out_valid == 0 || n == 0 || arena.write(col.out_valid + row, &vec![1u8; n]);
            if !(wrote_vidx && wrote_valid) {
                set_error(pg, ErrorCode::BadPageSize, pg.num_values);
            }
            continue;
        }
        if pg.def_bit_width > 8 {
            pg.num_non_null = 0;
            set_error(pg, ErrorCode::BadBitWidth, pg.def_bit_width);
            continue;
        }
        // The outputs must exist (so a descriptor claiming more rows than were allocated cannot make
        // this decode without bound).
        let (row, n) = (u64::from(pg.row_start), u64::from(pg.num_values));
        if (col.vidx != 0 && arena.get(col.vidx + row * 4, n * 4).is_none())
            || (col.out_valid != 0 && arena.get(col.out_valid + row, n).is_none())
            || (col.out_def != 0 && arena.get(col.out_def + row, n).is_none())
        {
            pg.num_non_null = 0;
            set_error(pg, ErrorCode::BadPageSize, pg.num_values);
            continue;
        }
        let Some(stream) = bytes_at(arena, pg.levels, pg.levels_len) else {
            pg.num_non_null = 0;
            set_error(pg, ErrorCode::Overrun, 0);
            continue;
        };
        let max_def = pg.max_def;
        let (lv, stop) = hybrid_prefix(&stream, pg.def_bit_width, pg.num_values, |v| v > max_def);
        let mut vidx = Vec::with_capacity(lv.len());
        let mut valid = Vec::with_capacity(lv.len());
        let mut present = 0u32;
        for &l in &lv {
            if l == max_def {
                vidx.push(present as i32);
                valid.push(1u8);
                present += 1;
            } else {
                vidx.push(-1i32);
                valid.push(0u8);
            }
        }
        pg.num_non_null = present;
        match stop {
            Some(Stop::Rejected(i)) => set_error(pg, ErrorCode::BadLevel, i),
            Some(Stop::Ended(i)) => set_error(pg, ErrorCode::Overrun, i),
            None => {}
        }
        let wrote_vidx = col.vidx == 0 || arena.write(col.vidx + row * 4, &vidx);
        let wrote_valid = col.out_valid == 0 || arena.write(col.out_valid + row, &valid);
        let wrote_def = col.out_def == 0 || {
            let def: Vec<u8> = lv.iter().map(|&l| l as u8).collect();
            arena.write(col.out_def + row, &def)
        };
        if !(wrote_vidx && wrote_valid && wrote_def) {
            set_error(pg, ErrorCode::BadPageSize, pg.num_values);
        }
    }
}

/// `gp_dict_indices`: dictionary-encoded pages' indices (after the bit-width byte) as `u32` in `dense`
/// at `(row_start + k) * dense_width` (or, where the values go straight to the rows,
/// [`dictionary_values_direct`], the dictionary's value at `out_values + (row_start + k) *
/// type_len`), and v2 RLE booleans (after a u32 length) as one byte 0/1 at the
/// same places. Pages with no present values read nothing. Errors: [`ErrorCode::MissingDictionary`],
/// [`ErrorCode::BadBitWidth`] (detail the width), [`ErrorCode::DictIndexOutOfRange`] /
/// [`ErrorCode::Overrun`] at the first bad or missing index (detail `k`; earlier ones written),
/// [`ErrorCode::Overrun`] with detail 0 for a missing width byte or boolean length prefix.
pub(crate) fn dict_indices(arena: &mut Arena, pages: &mut [PageDesc], cols: &[ColumnDesc]) {
    for pg in pages.iter_mut() {
        let dict = enc::is_dictionary(pg.encoding);
        let rle_bool = pg.physical == pt::BOOLEAN && pg.encoding == enc::RLE;
        if pg.error != 0 || !(dict || rle_bool) || pg.num_non_null == 0 {
            continue;
        }
        let min_width = if dict { 4 } else { 1 };
        let Some(col) = cols
            .get(pg.column as usize)
            .filter(|c| rows_ok(pg, c) && pg.num_non_null <= pg.num_values && c.dense_width >= min_width)
        else {
            set_error(pg, ErrorCode::BadPageSize, pg.num_values);
            continue;
        };
        if dict && pg.dict == 0 {
            set_error(pg, ErrorCode::MissingDictionary, 0);
            continue;
        }
        let Some(values) = bytes_at(arena, pg.values, pg.values_len) else {
            set_error(pg, ErrorCode::Overrun, 0);
            continue;
        };
        let (width, stream) = if dict {
            let Some((&w, rest)) = values.split_first() else {
                set_error(pg, ErrorCode::Overrun, 0);
                continue;
            };
            if w > 32 {
                set_error(pg, ErrorCode::BadBitWidth, u32::from(w));
                continue;
            }
            (u32::from(w), rest)
        } else {
            let l = values.get(..4).map(|b| u32_le(b) as usize);
            match l.and_then(|l| values.get(4..4 + l)) {
                Some(s) => (1, s),
                None => {
                    set_error(pg, ErrorCode::Overrun, 0);
                    continue;
                }
            }
        };
        // The dictionary's values themselves, into the rows, where they go there directly.
        let direct = dictionary_values_direct(pg, col);
        let (base, dw) = if direct {
            let tl = u64::from(pg.type_len);
            (col.out_values + u64::from(pg.row_start) * tl, tl)
        } else {
            let dw = u64::from(col.dense_width);
            (col.dense + u64::from(pg.row_start) * dw, dw)
        };
        if arena.get(base, u64::from(pg.num_non_null) * dw).is_none() {
            set_error(pg, ErrorCode::BadPageSize, pg.num_values);
            continue;
        }
        // dict_count entries of dw bytes lie inside dict_len (dictionary_values_direct).
        let dictionary = match direct.then(|| bytes_at(arena, pg.dict, u64::from(pg.dict_count) * dw)) {
            Some(None) => {
                set_error(pg, ErrorCode::BadPageSize, pg.num_values);
                continue;
            }
            found => found.flatten(),
        };
        let dict_count = pg.dict_count;
        let (vals, stop) = hybrid_prefix(stream, width, pg.num_non_null, |v| dict && v >= dict_count);
        match stop {
            Some(Stop::Rejected(k)) => set_error(pg, ErrorCode::DictIndexOutOfRange, k),
            Some(Stop::Ended(k)) => set_error(pg, ErrorCode::Overrun, k),
            None => {}
        }
        let mut ok = true;
        for (k, &v) in vals.iter().enumerate() {
            let at = base + k as u64 * dw;
            ok &= match &dictionary {
                Some(values) => {
                    let from = v as usize * dw as usize;
                    arena.write(at, &values[from..from + dw as usize])
                }
                None if dict => arena.write(at, &v.to_le_bytes()),
                None => arena.write(at, &[u8::from(v != 0)]),
            };
        }
        if !ok {
            set_error(pg, ErrorCode::BadPageSize, pg.num_values);
        }
    }
}

/// A plain BYTE_ARRAY walk (the kernels' `walk_plain_byte_arrays`): `(offset of the bytes, length)` of
/// up to `count` values, and the index of the first value whose prefix or bytes run past the stream's
/// end (a stream is walked as if at most `u32::MAX` bytes long).
fn walk_plain(stream: &[u8], count: u32) -> (Vec<(u32, u32)>, Option<u32>) {
    let len = stream.len().min(u32::MAX as usize) as u64;
    let mut out = Vec::new();
    let mut p = 0u64;
    for k in 0..count {
        if len - p < 4 {
            return (out, Some(k));
        }
        let l = u64::from(u32_le(&stream[p as usize..]));
        if l > len - p - 4 {
            return (out, Some(k));
        }
        out.push(((p + 4) as u32, l as u32));
        p += 4 + l;
    }
    (out, None)
}

/// `gp_dict_byte_array_index`: the [`DictEntry`] of each of a BYTE_ARRAY dictionary's `count` plain
/// values, in `index`. [`ErrorCode::Overrun`] at the first value past `data_len` (detail the entry;
/// earlier entries written).
pub(crate) fn dict_byte_array_index(arena: &mut Arena, dicts: &mut [DictDesc]) {
    for d in dicts.iter_mut() {
        if d.error != 0 {
            continue;
        }
        let Some(data) = bytes_at(arena, d.data, d.data_len) else {
            d.error = ErrorCode::Overrun as u32;
            d.error_detail = 0;
            continue;
        };
        let (entries, fail) = walk_plain(&data, d.count);
        if let Some(e) = fail {
            d.error = ErrorCode::Overrun as u32;
            d.error_detail = e;
        }
        let entries: Vec<DictEntry> = entries
            .into_iter()
            .map(|(offset, len)| DictEntry { offset, len })
            .collect();
        if !arena.write(d.index, &entries) && d.error == 0 {
            d.error = ErrorCode::BadPageSize as u32;
            d.error_detail = 0;
        }
    }
}

/// Where a fixed-width page's values come from (`gather_source` in values.cu).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Source {
    Plain,
    PlainBool,
    Dict,
    Dense,
    /// Row `i`'s key `dict_count + i` ([`enc::SEQUENCE_KEYS`]).
    Keys,
}

fn gather_source(physical: u32, encoding: u32) -> Option<Source> {
    let dict = enc::is_dictionary(encoding);
    let plain_or_dict = match encoding {
        enc::PLAIN => Some(Source::Plain),
        _ if dict => Some(Source::Dict),
        _ => None,
    };
    match physical {
        pt::BOOLEAN => match encoding {
            enc::PLAIN => Some(Source::PlainBool),
            enc::RLE => Some(Source::Dense),
            _ => None,
        },
        pt::INT32 if encoding == enc::SEQUENCE_KEYS => Some(Source::Keys),
        pt::INT32 | pt::INT64 => match encoding {
            enc::DELTA_BINARY_PACKED | enc::BYTE_STREAM_SPLIT => Some(Source::Dense),
            _ => plain_or_dict,
        },
        pt::FIXED_LEN_BYTE_ARRAY if encoding == enc::DELTA_BYTE_ARRAY => Some(Source::Dense),
        pt::FLOAT | pt::DOUBLE | pt::FIXED_LEN_BYTE_ARRAY => match encoding {
            enc::BYTE_STREAM_SPLIT => Some(Source::Dense),
            _ => plain_or_dict,
        },
        pt::INT96 => plain_or_dict,
        _ => None,
    }
}

/// `gp_gather_fixed`: each row of each fixed-width page (but those [`dict_indices`] wrote,
/// [`dictionary_values_direct`]) gets its value's bytes at `out_values + row *
/// out_width` (zeros for a null): PLAIN from `values`, BOOLEAN PLAIN's bit as a byte, dictionary
/// entries through the `u32` indices in `dense`, and RLE booleans, DELTA_BINARY_PACKED and
/// BYTE_STREAM_SPLIT from `dense`, and [`enc::SEQUENCE_KEYS`] pages the key `dict_count + i` of row
/// `i`. Errors: [`ErrorCode::BadEncoding`] (nothing written, detail the
/// encoding); [`ErrorCode::Overrun`] for the lowest row whose value lies past `values_len` /
/// `dict_len` or whose value index is past `num_non_null` or the page's rows (detail its value index
/// `k`; every other row
/// written).
pub(crate) fn gather_fixed(arena: &mut Arena, pages: &mut [PageDesc], cols: &[ColumnDesc]) {
    for pg in pages.iter_mut() {
        if pg.error != 0 || pg.physical == pt::BYTE_ARRAY {
            continue;
        }
        let Some(col) = cols.get(pg.column as usize) else {
            set_error(pg, ErrorCode::BadPageSize, pg.num_values);
            continue;
        };
        if dictionary_values_direct(pg, col) {
            // Its rows were written by dict_indices.
            continue;
        }
        let Some(src) = gather_source(pg.physical, pg.encoding) else {
            set_error(pg, ErrorCode::BadEncoding, pg.encoding);
            continue;
        };
        if let Err(code) = gather_page(arena, pg, col, src) {
            set_error(pg, code, pg.num_values);
        }
    }
}

/// One page of [`gather_fixed`]; `Err` for a descriptor the arena cannot honour.
fn gather_page(arena: &mut Arena, pg: &mut PageDesc, col: &ColumnDesc, src: Source) -> Result<(), ErrorCode> {
    let (tl, ow, dw) = (pg.type_len as usize, col.out_width as usize, col.dense_width as usize);
    let w = tl.min(ow);
    if !rows_ok(pg, col) || (src == Source::Dict && dw < 4) || (src == Source::Dense && dw < tl) {
        return Err(ErrorCode::BadPageSize);
    }
    let (nv, nn) = (pg.num_values as usize, pg.num_non_null.min(pg.num_values) as usize);
    let required = pg.max_def == 0;
    let row = u64::from(pg.row_start);
    let out_addr = col.out_values + row * ow as u64;
    let dense_addr = col.dense + row * dw as u64;
    let missing = ErrorCode::BadPageSize;

    if (required || nn == nv) && tl == ow {
        let bytes = (nv * tl) as u64;
        let from = match src {
            Source::Plain if bytes <= pg.values_len => Some(pg.values),
            Source::Dense if dw == tl => Some(dense_addr),
            _ => None,
        };
        if let Some(from) = from {
            let data = bytes_at(arena, from, bytes).ok_or(missing)?;
            return if bytes == 0 || arena.write(out_addr, &data) {
                Ok(())
            } else {
                Err(missing)
            };
        }
    }

    let vidx: Vec<i32> = if required {
        Vec::new()
    } else {
        arena.read(col.vidx + row * 4, nv).ok_or(missing)?
    };
    let values = match src {
        Source::Plain | Source::PlainBool => bytes_at(arena, pg.values, pg.values_len).ok_or(missing)?,
        _ => Vec::new(),
    };
    let dict = match src {
        Source::Dict => bytes_at(arena, pg.dict, pg.dict_len).ok_or(missing)?,
        _ => Vec::new(),
    };
    let dense = match src {
        Source::Dict | Source::Dense => bytes_at(arena, dense_addr, (nn * dw) as u64).ok_or(missing)?,
        _ => Vec::new(),
    };
    let mut out = bytes_at(arena, out_addr, (nv * ow) as u64).ok_or(missing)?;
    let mut first_bad: Option<u32> = None;
    for i in 0..nv {
        let k = if required { i as i64 } else { i64::from(vidx[i]) };
        let dst = &mut out[i * ow..(i + 1) * ow];
        if k < 0 {
            dst.fill(0);
            continue;
        }
        let k = k as usize;
        let value: Option<&[u8]> = if k >= nn {
            None
        } else {
            match src {
                Source::PlainBool => values.get(k >> 3).map(std::slice::from_ref),
                Source::Plain => values.get(k * tl..(k + 1) * tl),
                Source::Dict => {
                    let idx = u32_le(&dense[k * dw..]) as usize;
                    dict.get(idx * tl..(idx + 1) * tl)
                }
                Source::Dense => dense.get(k * dw..k * dw + tl),
                Source::Keys => {
                    let key = pg.dict_count.wrapping_add(i as u32).to_le_bytes();
                    let w = w.min(4);
                    dst[..w].copy_from_slice(&key[..w]);
                    dst[w..].fill(0);
                    continue;
                }
            }
        };
        match value {
            None => {
                first_bad.get_or_insert(k as u32);
            }
            Some(v) if src == Source::PlainBool => {
                if ow > 0 {
                    dst[0] = (v[0] >> (k & 7)) & 1;
                }
                dst[1.min(ow)..].fill(0);
            }
            Some(v) => {
                dst[..w].copy_from_slice(&v[..w]);
                dst[w..].fill(0);
            }
        }
    }
    if let Some(k) = first_bad {
        set_error(pg, ErrorCode::Overrun, k);
    }
    if nv * ow == 0 || arena.write(out_addr, &out) {
        Ok(())
    } else {
        Err(missing)
    }
}

/// `gp_byte_array_values`: for each BYTE_ARRAY page's `k`-th present value, `str_src[row_start + k]`
/// (the address of its bytes) and `str_len[row_start + k]`. PLAIN walks the length-prefixed values
/// ([`ErrorCode::Overrun`] at the first past `values_len`, detail `k`, earlier ones written);
/// dictionary pages look the `u32` index in `dense` up in `dict_index`
/// ([`ErrorCode::MissingDictionary`]; [`ErrorCode::DictIndexOutOfRange`] or [`ErrorCode::Overrun`] for
/// an entry past `dict_len`, of the lowest failing `k`, every other value written). DELTA_* pages are
/// left alone; other encodings are [`ErrorCode::BadEncoding`].
pub(crate) fn byte_array_values(arena: &mut Arena, pages: &mut [PageDesc], cols: &[ColumnDesc]) {
    for pg in pages.iter_mut() {
        if pg.error != 0 || pg.physical != pt::BYTE_ARRAY {
            continue;
        }
        let e = pg.encoding;
        if e == enc::DELTA_LENGTH_BYTE_ARRAY || e == enc::DELTA_BYTE_ARRAY {
            continue;
        }
        let dict = enc::is_dictionary(e);
        if e != enc::PLAIN && !dict {
            set_error(pg, ErrorCode::BadEncoding, e);
            continue;
        }
        let Some(col) = cols
            .get(pg.column as usize)
            .filter(|c| rows_ok(pg, c) && pg.num_non_null <= pg.num_values && (!dict || c.dense_width >= 4))
        else {
            set_error(pg, ErrorCode::BadPageSize, pg.num_values);
            continue;
        };
        if pg.num_non_null == 0 {
            continue;
        }
        if col.view_flags & view_flags::DICT_VIEWS != 0 {
            // `copy_strings` takes its rows' views from the dictionary: nothing to write here.
            if !dictionary_in_own_pages(pg, col) {
                if dict && (pg.dict == 0 || pg.dict_index == 0) {
                    set_error(pg, ErrorCode::MissingDictionary, 0);
                } else {
                    set_error(pg, ErrorCode::BadPageSize, pg.num_values);
                }
            }
            continue;
        }
        if let Err(code) = byte_array_page(arena, pg, col, dict) {
            set_error(pg, code, pg.num_values);
        }
    }
}

/// One page of [`byte_array_values`]; `Err` for a descriptor the arena cannot honour.
fn byte_array_page(arena: &mut Arena, pg: &mut PageDesc, col: &ColumnDesc, dict: bool) -> Result<(), ErrorCode> {
    let missing = ErrorCode::BadPageSize;
    let nn = pg.num_non_null as usize;
    let row = u64::from(pg.row_start);
    let (mut srcs, mut lens): (Vec<u64>, Vec<u32>) = (
        arena.read(col.str_src + row * 8, nn).ok_or(missing)?,
        arena.read(col.str_len + row * 4, nn).ok_or(missing)?,
    );
    if !dict {
        let stream = bytes_at(arena, pg.values, pg.values_len).ok_or(ErrorCode::Overrun)?;
        let (found, fail) = walk_plain(&stream, pg.num_non_null);
        for (k, (off, len)) in found.into_iter().enumerate() {
            srcs[k] = pg.values + u64::from(off);
            lens[k] = len;
        }
        if let Some(k) = fail {
            set_error(pg, ErrorCode::Overrun, k);
        }
    } else {
        if pg.dict == 0 || pg.dict_index == 0 {
            set_error(pg, ErrorCode::MissingDictionary, 0);
            return Ok(());
        }
        let dw = col.dense_width as usize;
        let dense = bytes_at(arena, col.dense + row * dw as u64, (nn * dw) as u64).ok_or(missing)?;
        let entries: Vec<DictEntry> = arena.read(pg.dict_index, pg.dict_count as usize).ok_or(missing)?;
        let mut first_bad: Option<(u32, ErrorCode)> = None;
        for k in 0..nn {
            let idx = u32_le(&dense[k * dw..]) as usize;
            let bad = match entries.get(idx) {
                None => Some(ErrorCode::DictIndexOutOfRange),
                Some(e) if u64::from(e.offset) + u64::from(e.len) > pg.dict_len => Some(ErrorCode::Overrun),
                Some(e) => {
                    srcs[k] = pg.dict + u64::from(e.offset);
                    lens[k] = e.len;
                    None
                }
            };
            if let (Some(code), None) = (bad, first_bad) {
                first_bad = Some((k as u32, code));
            }
        }
        if let Some((k, code)) = first_bad {
            set_error(pg, code, k);
        }
    }
    if arena.write(col.str_src + row * 8, &srcs) && arena.write(col.str_len + row * 4, &lens) {
        Ok(())
    } else {
        Err(missing)
    }
}

/// Lengths of a BYTE_ARRAY page's rows for the offsets (`string_row_len` in strings.cu): 0 for nulls,
/// for a value index outside `[0, min(num_non_null, num_values))`, and for every row of a page in
/// error. A buffer missing
/// from the arena reads as empty rows.
fn string_row_lens(arena: &Arena, pg: &PageDesc, col: &ColumnDesc) -> Vec<u64> {
    let nv = pg.num_values as usize;
    let row = u64::from(pg.row_start);
    if pg.error != 0 || col.view_flags & view_flags::DICT_VIEWS != 0 {
        return vec![0; nv];
    }
    let vidx: Option<Vec<i32>> = if pg.max_def == 0 {
        Some((0..nv as i32).collect())
    } else {
        arena.read(col.vidx + row * 4, nv)
    };
    let nn = pg.num_non_null.min(pg.num_values) as usize;
    let lens: Option<Vec<u32>> = arena.read(col.str_len + row * 4, nn);
    let (Some(vidx), Some(lens)) = (vidx, lens) else {
        return vec![0; nv];
    };
    let in_copy = col.view_flags & view_flags::IN_COPY != 0;
    let srcs: Option<Vec<u64>> = if in_copy {
        arena.read(col.str_src + row * 8, nn)
    } else {
        None
    };
    if in_copy && srcs.is_none() {
        return vec![0; nv];
    }
    vidx.iter()
        .map(|&k| {
            let Some(k) = usize::try_from(k).ok().filter(|&k| k < lens.len()) else {
                return 0;
            };
            match &srcs {
                Some(srcs) if !view_copies(col, srcs[k], lens[k]) => 0,
                _ => u64::from(lens[k]),
            }
        })
        .collect()
}

/// `view_copies` in strings.cu: whether `gp_copy_strings` copies a view column's string of `len`
/// bytes at `src`: not when its view holds it (12 bytes or fewer), nor when it lies in the column's
/// own pages (`view_pages`).
fn view_copies(col: &ColumnDesc, src: u64, len: u32) -> bool {
    let (lo, n, len) = (col.view_pages, col.view_pages_len, u64::from(len));
    len > 12 && !(lo != 0 && src >= lo && src - lo <= n && len <= n - (src - lo))
}

/// What `gp_copy_strings` does with a row (`copy_row` in strings.cu).
enum CopyRow {
    Null,
    Bad,
    /// Its view holds its bytes, or points at them in `view_pages` (`offset` there).
    InView {
        src: u64,
        len: u64,
        offset: u64,
    },
    /// Copied to the characters at `offset`.
    Copy {
        src: u64,
        len: u64,
        offset: u64,
    },
}

/// A row of a page: `k` its value index (negative for a null), `srcs` and `lens` the page's present
/// values' (`nn` of them), `offset` where its characters start among the column's.
fn copy_row(col: &ColumnDesc, k: i32, nn: usize, srcs: &[u64], lens: &[u32], offset: i64) -> CopyRow {
    let Ok(k) = usize::try_from(k) else {
        return CopyRow::Null;
    };
    if k >= nn {
        return CopyRow::Bad;
    }
    let (src, len) = (srcs[k], u64::from(lens[k]));
    if src == 0 && len > 0 {
        return CopyRow::Bad;
    }
    if col.view_flags & view_flags::IN_COPY != 0 && !view_copies(col, src, lens[k]) {
        let offset = if len <= 12 { 0 } else { src - col.view_pages };
        return CopyRow::InView { src, len, offset };
    }
    if offset < 0 || offset as u64 + len > col.chars_capacity {
        return CopyRow::Bad;
    }
    CopyRow::Copy {
        src,
        len,
        offset: offset as u64,
    }
}

/// First index of `pages` whose column is `column` or later (the kernels' binary search; pages are
/// sorted by column).
fn first_page_of(pages: &[PageDesc], column: u64) -> usize {
    let (mut lo, mut hi) = (0usize, pages.len());
    while lo < hi {
        let mid = lo + ((hi - lo) >> 1);
        if u64::from(pages[mid].column) < column {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo
}

/// `count` offsets at `addr`, as `i64` where `wide`, else `i32` (widened).
pub(crate) fn read_offsets(arena: &Arena, addr: u64, wide: bool, count: usize) -> Option<Vec<i64>> {
    if wide {
        arena.read::<i64>(addr, count)
    } else {
        arena
            .read::<i32>(addr, count)
            .map(|v| v.into_iter().map(i64::from).collect())
    }
}

/// Whether a BYTE_ARRAY column's offsets are `i64` (`out_width` 8: `LargeUtf8` / `LargeBinary`), not
/// `i32` (`wide_offsets` in common.cuh).
pub(crate) fn wide_offsets(col: &ColumnDesc) -> bool {
    col.out_width == 8
}

/// `gp_string_page_totals`, `gp_string_page_bases` and `gp_string_offsets`: each BYTE_ARRAY column's
/// `out_offsets` (`i32[num_rows + 1]`, or `i64` where [`wide_offsets`], from 0) as the running sum of
/// its rows' lengths (nulls 0; the rows of a page in error 0). A column of `i32` offsets whose total
/// exceeds `i32::MAX` gets `error =` [`ErrorCode::OffsetOverflow`] and no offsets (nor does a column
/// already in error). Pages whose rows lie outside their column are skipped.
#[cfg(test)] // the tests' entry point; the pipeline calls string_offsets_within
pub fn string_offsets(arena: &mut Arena, pages: &[PageDesc], cols: &mut [ColumnDesc]) {
    string_offsets_within(arena, pages, cols, i32::MAX as u64);
}

/// [`string_offsets`] with columns of 32-bit offsets holding at most `limit` characters (`i32::MAX` in
/// the kernels; smaller in tests, [`crate::decode::exec::HostExecutor::with_string_offset_limit`]).
pub(crate) fn string_offsets_within(arena: &mut Arena, pages: &[PageDesc], cols: &mut [ColumnDesc], limit: u64) {
    // Step 1: page totals.
    let mut lens: Vec<Vec<u64>> = Vec::with_capacity(pages.len());
    let mut bases: Vec<u64> = Vec::with_capacity(pages.len());
    for pg in pages {
        let l = match cols.get(pg.column as usize) {
            Some(col) if pg.physical == pt::BYTE_ARRAY && rows_ok(pg, col) => string_row_lens(arena, pg, col),
            _ => Vec::new(),
        };
        bases.push(l.iter().sum());
        lens.push(l);
    }
    // Step 2: bases per column, and the overflow check.
    for (c, col) in cols.iter_mut().enumerate() {
        let (lo, hi) = (first_page_of(pages, c as u64), first_page_of(pages, c as u64 + 1));
        let mut carry = 0u64;
        for base in &mut bases[lo..hi] {
            let total = *base;
            *base = carry;
            carry += total;
        }
        if col.physical == pt::BYTE_ARRAY && !wide_offsets(col) && carry > limit.min(i32::MAX as u64) && col.error == 0
        {
            col.error = ErrorCode::OffsetOverflow as u32;
        }
    }
    // Step 3: offsets.
    for (p, pg) in pages.iter().enumerate() {
        let Some(col) = cols.get(pg.column as usize) else {
            continue;
        };
        if pg.physical != pt::BYTE_ARRAY || col.error != 0 || !rows_ok(pg, col) {
            continue;
        }
        let mut run = bases[p];
        let offs: Vec<u64> = lens[p]
            .iter()
            .map(|&l| {
                run += l;
                run
            })
            .collect();
        let first = u64::from(pg.row_start) + 1;
        if wide_offsets(col) {
            if pg.row_start == 0 {
                arena.write(col.out_offsets, &[0i64]);
            }
            let offs: Vec<i64> = offs.iter().map(|&o| o as i64).collect();
            arena.write(col.out_offsets + first * 8, &offs);
        } else {
            if pg.row_start == 0 {
                arena.write(col.out_offsets, &[0i32]);
            }
            let offs: Vec<i32> = offs.iter().map(|&o| o as i32).collect();
            arena.write(col.out_offsets + first * 4, &offs);
        }
    }
}

/// `gp_copy_strings`: copies each present value of each BYTE_ARRAY page (not DELTA_BYTE_ARRAY, whose
/// decoder copies its own) from `str_src` to `out_values + out_offsets[row]`. Columns in error are
/// skipped. [`ErrorCode::Overrun`] for the lowest row whose bytes would land outside
/// `[0, chars_capacity)`, whose value index is past `num_non_null`, or whose source is 0 or not
/// readable (detail the row in the page); every other row is copied. Where the column has
/// `out_views`, every row of the page also gets its view (all zero for a null or a failing row), and
/// the longest length is max'ed into the `u32` at `view_longest`.
pub(crate) fn copy_strings(arena: &mut Arena, pages: &mut [PageDesc], cols: &[ColumnDesc]) {
    for pg in pages.iter_mut() {
        if pg.error != 0 || pg.physical != pt::BYTE_ARRAY || pg.encoding == enc::DELTA_BYTE_ARRAY {
            continue;
        }
        let Some(col) = cols.get(pg.column as usize) else {
            continue;
        };
        if col.error != 0 || !rows_ok(pg, col) {
            continue;
        }
        if let Err(code) = copy_page(arena, pg, col) {
            set_error(pg, code, pg.num_values);
        }
    }
}

/// One page of [`copy_strings`]; `Err` for a descriptor the arena cannot honour.
fn copy_page(arena: &mut Arena, pg: &mut PageDesc, col: &ColumnDesc) -> Result<(), ErrorCode> {
    let missing = ErrorCode::BadPageSize;
    let (nv, nn) = (pg.num_values as usize, pg.num_non_null.min(pg.num_values) as usize);
    let row = u64::from(pg.row_start);
    let vidx: Vec<i32> = if pg.max_def == 0 {
        (0..nv as i32).collect()
    } else {
        arena.read(col.vidx + row * 4, nv).ok_or(missing)?
    };
    if col.view_flags & view_flags::DICT_VIEWS != 0 {
        return copy_dict_views(arena, pg, col, &vidx);
    }
    let wide = wide_offsets(col);
    let offsets = read_offsets(arena, col.out_offsets + row * if wide { 8 } else { 4 }, wide, nv).ok_or(missing)?;
    let srcs: Vec<u64> = arena.read(col.str_src + row * 8, nn).ok_or(missing)?;
    let lens: Vec<u32> = arena.read(col.str_len + row * 4, nn).ok_or(missing)?;
    let check_utf8 = col.view_flags & view_flags::CHECK_UTF8 != 0;
    // The lowest failing row, and whether its bytes were in place (then it is not UTF-8).
    let mut first_bad: Option<(u32, ErrorCode)> = None;
    let mut fail = |i: usize, code: ErrorCode| {
        if first_bad.is_none() {
            first_bad = Some((i as u32, code));
        }
    };
    let mut views: Vec<u8> = Vec::with_capacity(if col.out_views != 0 { nv * 16 } else { 0 });
    let mut longest = 0u32;
    for (i, &k) in vidx.iter().enumerate() {
        let mut view = [0u8; 16];
        let present = match copy_row(col, k, nn, &srcs, &lens, offsets[i]) {
            CopyRow::Null => None,
            CopyRow::Bad => {
                fail(i, ErrorCode::Overrun);
                None
            }
            CopyRow::InView { src, len, offset } => match bytes_at(arena, src, len) {
                Some(bytes) => {
                    view = super::convert::view_in(&bytes, 0, offset as u32);
                    Some(bytes)
                }
                None => {
                    fail(i, ErrorCode::Overrun);
                    None
                }
            },
            CopyRow::Copy { src, len, offset } => {
                match bytes_at(arena, src, len).filter(|b| arena.write(col.out_values + offset, b) || len == 0) {
                    Some(bytes) => {
                        if !bytes.is_empty() {
                            let (buffer, at) = match col.view_segment {
                                0 => (0, offset),
                                s => (offset / s, offset % s),
                            };
                            let buffer = buffer as u32 + if bytes.len() > 12 { col.view_buffer } else { 0 };
                            view = super::convert::view_in(&bytes, buffer, at as u32);
                        }
                        Some(bytes)
                    }
                    None => {
                        fail(i, ErrorCode::Overrun);
                        None
                    }
                }
            }
        };
        if let Some(bytes) = present {
            longest = longest.max(bytes.len() as u32);
            if check_utf8 && std::str::from_utf8(&bytes).is_err() {
                fail(i, ErrorCode::BadUtf8);
            }
        }
        if col.out_views != 0 {
            views.extend_from_slice(&view);
        }
    }
    finish_copy(arena, pg, col, &views, longest, first_bad)
}

/// [`copy_page`] of a dictionary-views column (`copy_dict_views` in strings.cu): each row's view is its
/// dictionary entry's over the column's own pages (all zero for a null or a bad row). A bad row (a
/// value index past `min(num_non_null, num_values)`, or, for a present row, a page not as
/// [`view_flags::DICT_VIEWS`] promises, an index past the dictionary or an entry outside it), or one
/// whose entry is not UTF-8 where the column checks: the lowest such row fails the page (`Overrun` or
/// `BadUtf8`). `vidx`: each row's value index.
fn copy_dict_views(arena: &mut Arena, pg: &mut PageDesc, col: &ColumnDesc, vidx: &[i32]) -> Result<(), ErrorCode> {
    let missing = ErrorCode::BadPageSize;
    let nn = pg.num_non_null.min(pg.num_values) as usize;
    let row = u64::from(pg.row_start);
    let usable = dictionary_in_own_pages(pg, col) && col.dense_width >= 4;
    let entries: Vec<DictEntry> = if usable {
        arena.read(pg.dict_index, pg.dict_count as usize).ok_or(missing)?
    } else {
        Vec::new()
    };
    let check_utf8 = col.view_flags & view_flags::CHECK_UTF8 != 0;
    let dw = u64::from(col.dense_width);
    let mut first_bad: Option<(u32, ErrorCode)> = None;
    let mut views: Vec<u8> = Vec::with_capacity(if col.out_views != 0 { vidx.len() * 16 } else { 0 });
    let mut longest = 0u32;
    for (i, &k) in vidx.iter().enumerate() {
        let mut view = [0u8; 16];
        // The row's entry bytes and their address, `None` for a null; `Err` for a bad row.
        let entry = match usize::try_from(k) {
            Ok(k) if k >= nn => Err(()),
            Err(_) => Ok(None),
            Ok(_) if !usable => Err(()),
            Ok(k) => {
                let at = col.dense + (row + k as u64) * dw;
                let idx = u32_le(&bytes_at(arena, at, 4).ok_or(missing)?) as usize;
                match entries.get(idx) {
                    Some(e) if u64::from(e.offset) + u64::from(e.len) <= pg.dict_len => {
                        let src = pg.dict + u64::from(e.offset);
                        Ok(Some((bytes_at(arena, src, u64::from(e.len)).ok_or(missing)?, src)))
                    }
                    _ => Err(()),
                }
            }
        };
        match entry {
            Err(()) => {
                first_bad.get_or_insert((i as u32, ErrorCode::Overrun));
            }
            Ok(None) => {}
            Ok(Some((bytes, src))) => {
                let offset = if bytes.len() <= 12 { 0 } else { src - col.view_pages };
                view = super::convert::view_in(&bytes, 0, offset as u32);
                longest = longest.max(bytes.len() as u32);
                if check_utf8 && std::str::from_utf8(&bytes).is_err() {
                    first_bad.get_or_insert((i as u32, ErrorCode::BadUtf8));
                }
            }
        }
        if col.out_views != 0 {
            views.extend_from_slice(&view);
        }
    }
    finish_copy(arena, pg, col, &views, longest, first_bad)
}

/// The end of a page of [`copy_strings`]: its rows' views written (where the column has them), its
/// longest length maxed into `view_longest`, and the page failed with its lowest failing row.
fn finish_copy(
    arena: &mut Arena,
    pg: &mut PageDesc,
    col: &ColumnDesc,
    views: &[u8],
    longest: u32,
    first_bad: Option<(u32, ErrorCode)>,
) -> Result<(), ErrorCode> {
    let missing = ErrorCode::BadPageSize;
    if col.out_views != 0 {
        if !arena.write(col.out_views + u64::from(pg.row_start) * 16, views) {
            return Err(missing);
        }
        let before: u32 = arena.read(col.view_longest, 1).ok_or(missing)?[0];
        if !arena.write(col.view_longest, &[before.max(longest)]) {
            return Err(missing);
        }
    }
    if let Some((i, code)) = first_bad {
        set_error(pg, code, i);
    }
    Ok(())
}

/// `gp_pack_bits`: bit `i` of the LSB-first bitmap at `words_addr` (`ceil(n / 32)` u32 words, the last
/// one's tail bits 0) is `bytes[i] != 0`; returns the number of set bits. If the bytes or the words are
/// not in the arena (a caller's bug) nothing is written and 0 is returned.
pub(crate) fn pack_bits(arena: &mut Arena, bytes_addr: u64, n: u64, words_addr: u64) -> u64 {
    let Some(bytes) = bytes_at(arena, bytes_addr, n) else {
        return 0;
    };
    let words: Vec<u32> = bytes
        .chunks(32)
        .map(|c| {
            c.iter()
                .enumerate()
                .fold(0u32, |w, (b, &x)| w | (u32::from(x != 0) << b))
        })
        .collect();
    if !words.is_empty() && !arena.write(words_addr, &words) {
        return 0;
    }
    words.iter().map(|w| u64::from(w.count_ones())).sum()
}

/// Bytes of the UTF-8 sequence lead byte `b` starts (1 for ASCII), 0 for a byte none starts with.
fn utf8_len(b: u8) -> u64 {
    match b {
        0x00..=0x7f => 1,
        0xc2..=0xdf => 2,
        0xe0..=0xef => 3,
        0xf0..=0xf4 => 4,
        _ => 0,
    }
}

fn utf8_cont(b: u8) -> bool {
    b & 0xc0 == 0x80
}

/// Whether byte `p` of `chars` is where it may be in valid UTF-8 (`gp_validate_utf8`'s per-byte test).
fn utf8_ok_at(chars: &[u8], p: usize) -> bool {
    let b = chars[p];
    if utf8_cont(b) {
        for k in 1..=3.min(p) {
            let q = chars[p - k];
            if !utf8_cont(q) {
                return utf8_len(q) > k as u64;
            }
        }
        return false;
    }
    let len = utf8_len(b) as usize;
    if len == 0 || p + len > chars.len() || !chars[p + 1..p + len].iter().all(|&c| utf8_cont(c)) {
        return false;
    }
    let c = chars.get(p + 1).copied().unwrap_or(0);
    !(len >= 3
        && ((b == 0xe0 && c < 0xa0) || (b == 0xed && c > 0x9f) || (b == 0xf0 && c < 0x90) || (b == 0xf4 && c > 0x8f)))
}

/// `gp_validate_utf8`: the first byte position of `chars` where UTF-8 fails (a byte out of place, or
/// a non-empty string starting on a continuation byte), or `u64::MAX` when every string
/// `chars[offsets[r]..offsets[r + 1]]` is valid UTF-8.
pub(crate) fn validate_utf8<O: Copy + Into<i64>>(chars: &[u8], offsets: &[O]) -> u64 {
    let bytes = (0..chars.len())
        .find(|&p| !utf8_ok_at(chars, p))
        .map_or(u64::MAX, |p| p as u64);
    let starts = offsets
        .windows(2)
        .map(|w| (w[0].into(), w[1].into()))
        .filter(|&(o, next): &(i64, i64)| {
            o >= 0 && (o as u64) < chars.len() as u64 && next > o && utf8_cont(chars[o as usize])
        })
        .map(|(o, _)| o as u64)
        .next()
        .unwrap_or(u64::MAX);
    bytes.min(starts)
}

/// [`validate_utf8`] over arena buffers: `n` characters at `chars`, `rows + 1` offsets at `offsets.0`
/// of `offsets.1` bytes each (4 or 8); the result at `result` (left alone if a buffer is not in the
/// arena, a caller's bug).
pub(crate) fn validate_utf8_at(arena: &mut Arena, chars: u64, n: u64, offsets: (u64, u32), rows: u64, result: u64) {
    let o = read_offsets(arena, offsets.0, offsets.1 == 8, rows as usize + 1);
    let (Some(c), Some(o)) = (arena.get(chars, n), o) else {
        return;
    };
    let bad = validate_utf8(c, &o);
    let before = arena
        .read::<u64>(result, 1)
        .and_then(|v| v.first().copied())
        .unwrap_or(u64::MAX);
    arena.write(result, &[before.min(bad)]);
}
