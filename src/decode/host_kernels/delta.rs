//! Host references of `kernels/delta.cu`: DELTA_BINARY_PACKED, DELTA_LENGTH_BYTE_ARRAY,
//! DELTA_BYTE_ARRAY and BYTE_STREAM_SPLIT.
//!
//! The page-level functions ([`delta_binary_packed`], [`delta_length_byte_array`],
//! [`delta_byte_array_lengths`], [`delta_byte_array_copy`], [`byte_stream_split`]) run over the same
//! descriptors as their kernels and write the same outputs, error codes and details; each skips pages
//! of other encodings and pages that already carry an error. On an error a page's outputs are
//! unspecified (kernel and reference may each have written part of them, not necessarily the same).
//! The stand-alone decoders ([`decode_delta_binary_packed_i64`] and friends) decode a byte slice, for
//! tests and fuzzing, and [`encode_delta_binary_packed`] crafts streams. Nothing here panics or
//! allocates in proportion to a number read from the stream: work is bounded by the caller's value
//! count (a page's `num_non_null`) and the stream's length.
//!
//! # DELTA_BINARY_PACKED as decoded here (arrow-rs's reader, plus a few limits)
//! - Header: block size, miniblocks per block, total value count (ULEB128), first value (zigzag
//!   ULEB128). A ULEB128 longer than 10 bytes is [`ErrorCode::BadDeltaHeader`], one cut short is
//!   [`ErrorCode::Overrun`] (detail: the field's offset).
//! - [`ErrorCode::BadDeltaHeader`] (detail: the offending field's offset) when the block size is 0, not a
//!   multiple of 128 or above 2^31 (our limit, so sizes stay small); when the miniblock count is 0 or
//!   does not divide the block size into miniblocks of a multiple of 32 values; for INT32 (and lengths),
//!   when the first value or a block's minimum delta does not fit in 32 bits (as arrow-rs).
//! - [`ErrorCode::ShortPage`] (detail: the total count, saturated) when the header's total is below the
//!   values wanted.
//! - Blocks: every block read must hold all its bit-width bytes ([`ErrorCode::Overrun`], detail: where
//!   they start). A miniblock's width is read only when one of its values is needed, so the unused
//!   miniblocks of the last block may have any width; a used width above the type's bits is
//!   [`ErrorCode::BadBitWidth`] (detail: the width). The packed bits of each delta used must lie in the
//!   stream ([`ErrorCode::Overrun`], detail: the miniblock's offset); a last miniblock cut short after
//!   its last used value is accepted, as arrow-rs does.
//! - Arithmetic wraps in 64 bits; an INT32 value is the low 32 bits, so it wraps in 32.
//! - The stream's end is the end of the last miniblock holding a value (its whole padded width), or the
//!   end of the header when there is at most one value: what the next stream (suffix lengths, bytes)
//!   starts after. The stand-alone decoders and the byte-array steps find it after all the header's
//!   values (walking, without decoding, past those they do not need); the INT32/INT64 step does not
//!   need it and reads no further than its last value.
//!
//! # Byte arrays
//! DELTA_LENGTH_BYTE_ARRAY: `num_non_null` lengths (a DELTA_BINARY_PACKED stream of INT32), then the
//! bytes from the lengths' end. DELTA_BYTE_ARRAY: prefix lengths, then a DELTA_LENGTH_BYTE_ARRAY block of
//! suffixes, whose header must declare as many values as the prefixes' (arrow-rs's check). Stream
//! errors come first; then value by value (lowest index first): a prefix that is negative or longer than
//! the previous value ([`ErrorCode::BadPrefix`]; the first value's previous value is empty), then a
//! length that is negative or whose bytes run past the values ([`ErrorCode::Overrun`]); the detail is
//! the value's index.
//!
//! # Where this differs from arrow-rs
//! - Block sizes of 0 or above 2^31 are refused.
//! - When a length stream declares more values than `num_non_null`, the extra lengths are walked to find
//!   the stream's end but not checked (arrow-rs's reader decodes and checks them all).
//! - A DELTA_BYTE_ARRAY prefix longer than the previous value is an error, as in arrow-rs's generic
//!   decoder; its Arrow array reader silently keeps the shorter previous value.
//! - BYTE_STREAM_SPLIT: as arrow-rs, each byte stream is `values_len / type_len` bytes long (a length
//!   not a multiple of the width is accepted), and must hold `num_non_null` values.
//!
//! Every offset in an error detail counts from the page's `values`.

use super::Arena;
use crate::decode::layout::{ColumnDesc, ErrorCode, PageDesc, encoding, physical};

/// An error code and its detail, as a kernel writes them to a page.
type Fail = (ErrorCode, u32);

/// Largest DELTA_BINARY_PACKED block size accepted (ours; the format sets none).
const MAX_BLOCK_SIZE: u64 = 1 << 31;

/// A number as an error detail (saturated to `u32`).
fn detail(x: u64) -> u32 {
    u32::try_from(x).unwrap_or(u32::MAX)
}

/// A ULEB128 at `*pos`; advances past it. Overrun when it runs past the end, BadDeltaHeader when it is
/// longer than 10 bytes (the detail is where it starts).
fn uleb(bytes: &[u8], pos: &mut u64) -> Result<u64, Fail> {
    let start = *pos;
    let mut v = 0u64;
    for i in 0..10u64 {
        let Some(&b) = usize::try_from(start + i).ok().and_then(|at| bytes.get(at)) else {
            return Err((ErrorCode::Overrun, detail(start)));
        };
        v |= u64::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            *pos = start + i + 1;
            return Ok(v);
        }
    }
    Err((ErrorCode::BadDeltaHeader, detail(start)))
}

fn zigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

fn fits_i32(v: i64) -> bool {
    i32::try_from(v).is_ok()
}

/// `width` bits (0..=64) at bit `bit` of the LSB-first stream `bytes`; bits past the end read as 0
/// (callers check bounds first). The twin of `read_bits` in `common.cuh`.
fn read_bits(bytes: &[u8], bit: u64, width: u32) -> u64 {
    if width == 0 {
        return 0;
    }
    let byte = bit >> 3;
    let shift = (bit & 7) as u32;
    let byte_at = |i: u64| -> u64 {
        usize::try_from(byte + i)
            .ok()
            .and_then(|at| bytes.get(at))
            .map_or(0, |&b| u64::from(b))
    };
    let nbytes = u64::from((shift + width).div_ceil(8));
    let mut lo = 0u64;
    for i in 0..nbytes.min(8) {
        lo |= byte_at(i) << (8 * i);
    }
    let mut v = lo >> shift;
    if nbytes == 9 {
        v |= byte_at(8) << (64 - shift);
    }
    if width < 64 {
        v &= (1u64 << width) - 1;
    }
    v
}

/// A DELTA_BINARY_PACKED stream being walked: the header, and the miniblock the next delta comes from.
/// The twin of `DbpState` in `delta.cu` (whose thread 0 makes the same steps).
struct Dbp<'a> {
    bytes: &'a [u8],
    /// 32 or 64: the type's width (bit widths above it are errors; minimum deltas must fit).
    bits: u32,
    /// Values per miniblock, miniblocks per block.
    vpm: u64,
    mini_count: u64,
    /// The header's total value count and first value.
    total: u64,
    first: u64,
    header_end: u64,
    /// Whether a block has been entered; the current miniblock's index in its block, where the block's
    /// widths start, where the miniblock's packed bits start, its width and min delta, deltas used.
    in_block: bool,
    mini_idx: u64,
    widths_pos: u64,
    mini_data: u64,
    width: u32,
    min_delta: u64,
    used: u64,
}

impl<'a> Dbp<'a> {
    /// Reads and checks the header of the stream at `start` of `bytes`, wanting `count` values (and,
    /// with `expect_total`, exactly that many in the header: DELTA_BYTE_ARRAY's suffixes, as arrow-rs).
    fn begin(bytes: &'a [u8], start: u64, count: u64, bits: u32, expect_total: Option<u64>) -> Result<Self, Fail> {
        let mut pos = start;
        let block_size = uleb(bytes, &mut pos)?;
        let mini_at = pos;
        let mini_count = uleb(bytes, &mut pos)?;
        let total = uleb(bytes, &mut pos)?;
        let first_at = pos;
        let first = zigzag(uleb(bytes, &mut pos)?);
        if block_size == 0 || block_size % 128 != 0 || block_size > MAX_BLOCK_SIZE {
            return Err((ErrorCode::BadDeltaHeader, detail(start)));
        }
        if mini_count == 0 || block_size % mini_count != 0 || (block_size / mini_count) % 32 != 0 {
            return Err((ErrorCode::BadDeltaHeader, detail(mini_at)));
        }
        if bits == 32 && !fits_i32(first) {
            return Err((ErrorCode::BadDeltaHeader, detail(first_at)));
        }
        if expect_total.is_some_and(|t| t != total) {
            return Err((ErrorCode::BadDeltaHeader, detail(start)));
        }
        if total < count {
            return Err((ErrorCode::ShortPage, detail(total)));
        }
        let vpm = block_size / mini_count;
        Ok(Dbp {
            bytes,
            bits,
            vpm,
            mini_count,
            total,
            first: first as u64,
            header_end: pos,
            in_block: false,
            mini_idx: 0,
            widths_pos: 0,
            mini_data: 0,
            width: 0,
            min_delta: 0,
            used: vpm,
        })
    }

    /// Bytes of the current miniblock (its whole padded size).
    fn mini_bytes(&self) -> u64 {
        u64::from(self.width) * self.vpm / 8
    }

    /// Moves to the next miniblock (reading a block header when the block is done) and reads its width.
    fn next_miniblock(&mut self) -> Result<(), Fail> {
        if self.in_block && self.mini_idx + 1 < self.mini_count {
            self.mini_data += self.mini_bytes();
            self.mini_idx += 1;
        } else {
            let at = if self.in_block {
                self.mini_data + self.mini_bytes()
            } else {
                self.header_end
            };
            let mut pos = at;
            let min_delta = zigzag(uleb(self.bytes, &mut pos)?);
            if self.bits == 32 && !fits_i32(min_delta) {
                return Err((ErrorCode::BadDeltaHeader, detail(at)));
            }
            // `pos` is within the stream after a successful read.
            if (self.bytes.len() as u64) - pos < self.mini_count {
                return Err((ErrorCode::Overrun, detail(pos)));
            }
            self.min_delta = min_delta as u64;
            self.widths_pos = pos;
            self.mini_data = pos + self.mini_count;
            self.mini_idx = 0;
            self.in_block = true;
        }
        let width = self.bytes[(self.widths_pos + self.mini_idx) as usize];
        if u32::from(width) > self.bits {
            return Err((ErrorCode::BadBitWidth, u32::from(width)));
        }
        self.width = u32::from(width);
        self.used = 0;
        Ok(())
    }

    /// Takes `n` deltas (at most what is left) from the current miniblock, checking their bits lie in
    /// the stream; returns the bit offset of the first.
    fn take(&mut self, n: u64) -> Result<u64, Fail> {
        let first_bit = self.mini_data * 8 + self.used * u64::from(self.width);
        let end_bit = first_bit + n * u64::from(self.width);
        if end_bit > (self.bytes.len() as u64) * 8 {
            return Err((ErrorCode::Overrun, detail(self.mini_data)));
        }
        self.used += n;
        Ok(first_bit)
    }

    /// The next delta (with the minimum delta added).
    fn next_delta(&mut self) -> Result<u64, Fail> {
        if self.used == self.vpm {
            self.next_miniblock()?;
        }
        let bit = self.take(1)?;
        Ok(self.min_delta.wrapping_add(read_bits(self.bytes, bit, self.width)))
    }

    /// Walks, without decoding, past the header's values after the first `decoded` (checking as the
    /// decode would); then returns the stream's end.
    fn walk_to_end(&mut self, decoded: u64) -> Result<u64, Fail> {
        let mut left = self.total.max(1) - decoded.max(1);
        while left > 0 {
            if self.used == self.vpm {
                self.next_miniblock()?;
            }
            let n = left.min(self.vpm - self.used);
            self.take(n)?;
            left -= n;
        }
        Ok(self.end())
    }

    /// Where the stream ends so far: after the current miniblock, or the header when none was read.
    fn end(&self) -> u64 {
        if self.in_block {
            self.mini_data + self.mini_bytes()
        } else {
            self.header_end
        }
    }
}

/// What [`dbp`] decoded: the values, where the stream ends, and the header's total count.
struct Decoded {
    values: Vec<u64>,
    end: u64,
    total: u64,
}

/// Decodes `count` values of the DELTA_BINARY_PACKED stream at `start` of `bytes` (each wrapped in 64
/// bits; the low 32 are the INT32 value when `bits` is 32). With `to_end`, also walks past the header's
/// remaining values so `end` is where the stream ends; without, `end` is the end of the last miniblock
/// used. `expect_total` as for [`Dbp::begin`].
fn dbp(
    bytes: &[u8],
    start: u64,
    count: u64,
    bits: u32,
    to_end: bool,
    expect_total: Option<u64>,
) -> Result<Decoded, Fail> {
    let mut d = Dbp::begin(bytes, start, count, bits, expect_total)?;
    // Grows as values decode: `count` may exceed what a short stream holds.
    let mut out = Vec::with_capacity(count.min(1 << 16) as usize);
    let mut v = d.first;
    for k in 0..count {
        if k > 0 {
            v = v.wrapping_add(d.next_delta()?);
        }
        out.push(v);
    }
    let end = if to_end { d.walk_to_end(count)? } else { d.end() };
    Ok(Decoded {
        values: out,
        end,
        total: d.total,
    })
}

/// Decodes `count` INT64 values from a DELTA_BINARY_PACKED stream; also returns the stream's end (the
/// byte after the last miniblock holding one of the header's values; past `bytes.len()` when only that
/// miniblock's padding is missing, which is accepted).
pub fn decode_delta_binary_packed_i64(bytes: &[u8], count: usize) -> Result<(Vec<i64>, usize), ErrorCode> {
    let d = dbp(bytes, 0, count as u64, 64, true, None).map_err(|e| e.0)?;
    Ok((d.values.into_iter().map(|x| x as i64).collect(), d.end as usize))
}

/// Decodes `count` INT32 values from a DELTA_BINARY_PACKED stream; also returns the stream's end.
pub fn decode_delta_binary_packed_i32(bytes: &[u8], count: usize) -> Result<(Vec<i32>, usize), ErrorCode> {
    let d = dbp(bytes, 0, count as u64, 32, true, None).map_err(|e| e.0)?;
    Ok((d.values.into_iter().map(|x| x as u32 as i32).collect(), d.end as usize))
}

/// One byte-array value of a length block: where its bytes start in the page's values, how many.
#[derive(Clone, Copy)]
struct Span {
    at: u64,
    len: u32,
}

/// The DELTA_LENGTH_BYTE_ARRAY block at `start` of `bytes` (all of a DELTA_LENGTH_BYTE_ARRAY page, or
/// the suffixes of a DELTA_BYTE_ARRAY page): `count` lengths, then their bytes. Stream errors come
/// first; then, value by value, a prefix (`prefix`: DELTA_BYTE_ARRAY's prefix lengths, checked against
/// the previous value's length: [`ErrorCode::BadPrefix`]) and the length (negative, or bytes past the
/// end: [`ErrorCode::Overrun`]), with the value's index as detail.
fn length_block(bytes: &[u8], start: u64, count: u64, prefix: Option<(&[u64], u64)>) -> Result<Vec<Span>, Fail> {
    let lens = dbp(bytes, start, count, 32, true, prefix.map(|p| p.1))?;
    let len = bytes.len() as u64;
    if lens.end > len {
        return Err((ErrorCode::Overrun, detail(lens.end)));
    }
    let avail = len - lens.end;
    let mut cum = 0u64;
    let mut prev_len = 0i64;
    let mut out = Vec::with_capacity(lens.values.len());
    for (k, &raw) in lens.values.iter().enumerate() {
        let s = raw as u32 as i32;
        let mut value_len = i64::from(s);
        if let Some((prefix, _)) = prefix {
            let p = prefix[k] as u32 as i32;
            if p < 0 || i64::from(p) > prev_len {
                return Err((ErrorCode::BadPrefix, detail(k as u64)));
            }
            value_len += i64::from(p);
        }
        if s < 0 || cum + s as u64 > avail {
            return Err((ErrorCode::Overrun, detail(k as u64)));
        }
        out.push(Span {
            at: lens.end + cum,
            len: s as u32,
        });
        cum += s as u64;
        prev_len = value_len;
    }
    Ok(out)
}

/// Decodes `count` values of a DELTA_LENGTH_BYTE_ARRAY stream: slices of `bytes`.
pub fn decode_delta_length_byte_array(bytes: &[u8], count: usize) -> Result<Vec<&[u8]>, ErrorCode> {
    let spans = length_block(bytes, 0, count as u64, None).map_err(|e| e.0)?;
    Ok(spans
        .into_iter()
        .map(|s| &bytes[s.at as usize..s.at as usize + s.len as usize])
        .collect())
}

/// The two length streams of a DELTA_BYTE_ARRAY page, checked: per value, its prefix length and its
/// suffix. The suffix stream must declare as many values as the prefix stream (arrow-rs's check;
/// [`ErrorCode::BadDeltaHeader`] at the suffix header).
fn dba_lengths(bytes: &[u8], count: u64) -> Result<Vec<(u32, Span)>, Fail> {
    let prefix = dbp(bytes, 0, count, 32, true, None)?;
    let suffixes = length_block(bytes, prefix.end, count, Some((&prefix.values, prefix.total)))?;
    Ok(prefix
        .values
        .iter()
        .zip(suffixes)
        .map(|(&p, s)| (p as u32, s))
        .collect())
}

/// Decodes `count` values of a DELTA_BYTE_ARRAY stream.
pub fn decode_delta_byte_array(bytes: &[u8], count: usize) -> Result<Vec<Vec<u8>>, ErrorCode> {
    let parts = dba_lengths(bytes, count as u64).map_err(|e| e.0)?;
    let mut out: Vec<Vec<u8>> = Vec::with_capacity(parts.len());
    for (p, s) in parts {
        // Each prefix was checked against the previous value's length.
        let mut v = out.last().map_or(Vec::new(), |prev| prev[..p as usize].to_vec());
        v.extend_from_slice(&bytes[s.at as usize..s.at as usize + s.len as usize]);
        out.push(v);
    }
    Ok(out)
}

/// Decodes `count` values of `width` bytes from a BYTE_STREAM_SPLIT stream (the values' bytes, in
/// order). As arrow-rs, the streams are `bytes.len() / width` long; they must hold `count` values.
pub fn decode_byte_stream_split(bytes: &[u8], count: usize, width: usize) -> Result<Vec<u8>, ErrorCode> {
    if width == 0 {
        return Err(ErrorCode::BadEncoding);
    }
    let stride = bytes.len() / width;
    if stride < count {
        return Err(ErrorCode::Overrun);
    }
    let mut out = vec![0u8; count * width];
    for (k, value) in out.chunks_exact_mut(width).enumerate() {
        for (b, byte) in value.iter_mut().enumerate() {
            *byte = bytes[b * stride + k];
        }
    }
    Ok(out)
}

/// Records a page's first error (as `page_error` does).
fn set_error(page: &mut PageDesc, (code, detail): Fail) {
    if page.error == 0 {
        page.error = code as u32;
        page.error_detail = detail;
    }
}

/// Runs `each` over the pages of `encoding` that have no error yet, with the page's column and a copy of
/// its values stream, recording the error it returns. A column index or values stream the arena does
/// not hold is an Overrun with detail 0 (the kernels trust the host-built descriptors).
fn for_pages(
    arena: &mut Arena,
    pages: &mut [PageDesc],
    cols: &[ColumnDesc],
    encoding: u32,
    mut each: impl FnMut(&mut Arena, &PageDesc, &ColumnDesc, &[u8]) -> Result<(), Fail>,
) {
    for page in pages.iter_mut() {
        if page.encoding != encoding || page.error != 0 {
            continue;
        }
        let values = match page.values_len {
            0 => Some(Vec::new()),
            n => arena.get(page.values, n).map(<[u8]>::to_vec),
        };
        let result = match (cols.get(page.column as usize), values) {
            (Some(col), Some(values)) => each(arena, page, col, &values),
            _ => Err((ErrorCode::Overrun, 0)),
        };
        if let Err(e) = result {
            set_error(page, e);
        }
    }
}

/// Writes `bytes` at `addr`; a write outside the arena is an Overrun with `detail` (the kernels trust
/// the host's buffers, the reference checks them).
fn put(arena: &mut Arena, addr: u64, bytes: &[u8], detail: u32) -> Result<(), Fail> {
    if arena.write(addr, bytes) {
        Ok(())
    } else {
        Err((ErrorCode::Overrun, detail))
    }
}

/// Reads `T` at `addr`; outside the arena is an Overrun with `detail`.
fn get<T: bytemuck::Pod>(arena: &Arena, addr: u64, detail: u32) -> Result<T, Fail> {
    arena
        .read::<T>(addr, 1)
        .map(|v| v[0])
        .ok_or((ErrorCode::Overrun, detail))
}

/// Reference of `gp_delta_binary_packed`: each DELTA_BINARY_PACKED page of an INT32 or INT64 column
/// decodes its `num_non_null` values to `dense + (row_start + k) * dense_width` (4 or 8 bytes, LE).
/// Another physical type is [`ErrorCode::BadEncoding`] (detail: the type).
pub fn delta_binary_packed(arena: &mut Arena, pages: &mut [PageDesc], cols: &[ColumnDesc]) {
    for_pages(
        arena,
        pages,
        cols,
        encoding::DELTA_BINARY_PACKED,
        |arena, page, col, values| {
            let bits = match page.physical {
                physical::INT32 => 32,
                physical::INT64 => 64,
                other => return Err((ErrorCode::BadEncoding, other)),
            };
            let d = dbp(values, 0, u64::from(page.num_non_null), bits, false, None)?;
            let width = (bits / 8) as usize;
            for (k, v) in d.values.into_iter().enumerate() {
                let addr = col.dense + (u64::from(page.row_start) + k as u64) * u64::from(col.dense_width);
                put(arena, addr, &v.to_le_bytes()[..width], k as u32)?;
            }
            Ok(())
        },
    );
}

/// Reference of `gp_delta_length_byte_array`: each DELTA_LENGTH_BYTE_ARRAY page of a BYTE_ARRAY column
/// writes, per present value `k`, `str_len[row_start + k]` (its length) and `str_src[row_start + k]`
/// (the address of its bytes in the page). Another physical type is [`ErrorCode::BadEncoding`].
pub fn delta_length_byte_array(arena: &mut Arena, pages: &mut [PageDesc], cols: &[ColumnDesc]) {
    for_pages(
        arena,
        pages,
        cols,
        encoding::DELTA_LENGTH_BYTE_ARRAY,
        |arena, page, col, values| {
            if page.physical != physical::BYTE_ARRAY {
                return Err((ErrorCode::BadEncoding, page.physical));
            }
            let spans = length_block(values, 0, u64::from(page.num_non_null), None)?;
            for (k, s) in spans.into_iter().enumerate() {
                let at = u64::from(page.row_start) + k as u64;
                put(arena, col.str_len + at * 4, &s.len.to_le_bytes(), k as u32)?;
                put(
                    arena,
                    col.str_src + at * 8,
                    &(page.values + s.at).to_le_bytes(),
                    k as u32,
                )?;
            }
            Ok(())
        },
    );
}

/// Reference of `gp_delta_byte_array_lengths`: each DELTA_BYTE_ARRAY page of a BYTE_ARRAY column writes,
/// per present value `k` (at `row_start + k`), `str_len` (prefix + suffix length), `str_src` (the
/// address of its suffix in the page) and the prefix length as `u32` at `dense`. FIXED_LEN_BYTE_ARRAY
/// pages are [`delta_byte_array_fixed`]'s (skipped); other types are [`ErrorCode::BadEncoding`].
pub fn delta_byte_array_lengths(arena: &mut Arena, pages: &mut [PageDesc], cols: &[ColumnDesc]) {
    for_pages(
        arena,
        pages,
        cols,
        encoding::DELTA_BYTE_ARRAY,
        |arena, page, col, values| match page.physical {
            physical::BYTE_ARRAY => dba_streams(arena, page, col, values).map(|_| ()),
            physical::FIXED_LEN_BYTE_ARRAY => Ok(()),
            _ => Err((ErrorCode::BadEncoding, page.physical)),
        },
    );
}

/// The streams of one DELTA_BYTE_ARRAY page into `dense` (prefixes), `str_len` and `str_src`, as
/// [`delta_byte_array_lengths`] writes them; the values' (prefix, suffix) parts.
fn dba_streams(arena: &mut Arena, page: &PageDesc, col: &ColumnDesc, values: &[u8]) -> Result<Vec<(u32, Span)>, Fail> {
    let parts = dba_lengths(values, u64::from(page.num_non_null))?;
    for (k, (p, s)) in parts.iter().enumerate() {
        let at = u64::from(page.row_start) + k as u64;
        let d = k as u32;
        put(arena, col.dense + at * u64::from(col.dense_width), &p.to_le_bytes(), d)?;
        put(arena, col.str_len + at * 4, &(p + s.len).to_le_bytes(), d)?;
        put(arena, col.str_src + at * 8, &(page.values + s.at).to_le_bytes(), d)?;
    }
    Ok(parts)
}

/// Reference of `gp_delta_byte_array_fixed`: each DELTA_BYTE_ARRAY page of a FIXED_LEN_BYTE_ARRAY
/// column, whole. Its streams as [`delta_byte_array_lengths`] writes them; every value's length must be
/// `type_len` ([`ErrorCode::BadPrefix`], detail the lowest such value); then value `k` (its previous
/// value's first `prefix` bytes, then its suffix) at `dense + (row_start + k) * dense_width`, for
/// `gather_fixed`. A `dense_width` under 4 or under `type_len` is [`ErrorCode::BadEncoding`] (detail
/// the type). BYTE_ARRAY pages are skipped; other types are [`ErrorCode::BadEncoding`].
pub(crate) fn delta_byte_array_fixed(arena: &mut Arena, pages: &mut [PageDesc], cols: &[ColumnDesc]) {
    for_pages(
        arena,
        pages,
        cols,
        encoding::DELTA_BYTE_ARRAY,
        |arena, page, col, values| match page.physical {
            physical::BYTE_ARRAY => Ok(()),
            physical::FIXED_LEN_BYTE_ARRAY => {
                let dw = u64::from(col.dense_width);
                if dw < 4 || u64::from(page.type_len) > dw {
                    return Err((ErrorCode::BadEncoding, page.physical));
                }
                let parts = dba_streams(arena, page, col, values)?;
                let tl = page.type_len as usize;
                if let Some(k) = parts.iter().position(|(p, s)| (p + s.len) as usize != tl) {
                    return Err((ErrorCode::BadPrefix, detail(k as u64)));
                }
                let mut prev: Vec<u8> = Vec::new();
                for (k, (p, s)) in parts.into_iter().enumerate() {
                    // Each prefix was checked against the previous value's length (type_len).
                    let mut v = prev[..p as usize].to_vec();
                    v.extend_from_slice(&values[s.at as usize..s.at as usize + s.len as usize]);
                    let at = u64::from(page.row_start) + k as u64;
                    put(arena, col.dense + at * dw, &v, detail(k as u64))?;
                    prev = v;
                }
                Ok(())
            }
            _ => Err((ErrorCode::BadEncoding, page.physical)),
        },
    );
}

/// Reference of `gp_delta_byte_array_copy`: rebuilds each present value of each DELTA_BYTE_ARRAY page
/// (after [`delta_byte_array_lengths`] and the offsets step) into `out_values` at its row's
/// `out_offsets`: the previous present value's first `prefix` output bytes, then its suffix. Row `i`
/// of the page holds value `vidx[row_start + i]` (or `i` when `max_def` is 0), -1 for a null. Errors
/// (detail: the row in the page): [`ErrorCode::Overrun`] when the present rows' values are not
/// 0, 1, 2, ... below `num_non_null`, or the row's offsets disagree with its length or leave
/// `chars_capacity`; [`ErrorCode::BadPrefix`] when the prefix exceeds the value's or the previous
/// value's length.
pub fn delta_byte_array_copy(arena: &mut Arena, pages: &mut [PageDesc], cols: &[ColumnDesc]) {
    for_pages(arena, pages, cols, encoding::DELTA_BYTE_ARRAY, |arena, page, col, _| {
        match page.physical {
            physical::BYTE_ARRAY => {}
            physical::FIXED_LEN_BYTE_ARRAY => return Ok(()),
            _ => return Err((ErrorCode::BadEncoding, page.physical)),
        }
        let row0 = u64::from(page.row_start);
        let (mut next_k, mut prev_off, mut prev_len) = (0u64, 0u64, 0u64);
        for i in 0..u64::from(page.num_values) {
            let d = detail(i);
            let overrun = Err((ErrorCode::Overrun, d));
            let row = row0 + i;
            let k = match page.max_def {
                0 => i as i64,
                _ => i64::from(get::<i32>(arena, col.vidx + row * 4, d)?),
            };
            if k < 0 {
                continue;
            }
            let k = k as u64;
            if k != next_k || k >= u64::from(page.num_non_null) {
                return overrun;
            }
            next_k += 1;
            let at = row0 + k;
            let p = u64::from(get::<u32>(arena, col.dense + at * u64::from(col.dense_width), d)?);
            let len = u64::from(get::<u32>(arena, col.str_len + at * 4, d)?);
            let src = get::<u64>(arena, col.str_src + at * 8, d)?;
            let offset = |at: u64| -> Result<i64, Fail> {
                if super::core::wide_offsets(col) {
                    get::<i64>(arena, col.out_offsets + at * 8, d)
                } else {
                    get::<i32>(arena, col.out_offsets + at * 4, d).map(i64::from)
                }
            };
            let (off, next) = (offset(row)?, offset(row + 1)?);
            if off < 0 || next != off + len as i64 || off as u64 + len > col.chars_capacity {
                return overrun;
            }
            if p > len || p > prev_len {
                return Err((ErrorCode::BadPrefix, d));
            }
            let mut value = match arena.get(col.out_values + prev_off, p) {
                Some(prefix) => prefix.to_vec(),
                None => return overrun,
            };
            match arena.get(src, len - p) {
                Some(suffix) => value.extend_from_slice(suffix),
                None => return overrun,
            }
            put(arena, col.out_values + off as u64, &value, d)?;
            (prev_off, prev_len) = (off as u64, len);
        }
        Ok(())
    });
}

/// Reference of `gp_byte_stream_split`: each BYTE_STREAM_SPLIT page of a FLOAT, DOUBLE, INT32, INT64 or
/// FIXED_LEN_BYTE_ARRAY column joins its `num_non_null` values of `type_len` bytes into
/// `dense + (row_start + k) * dense_width`. As arrow-rs, each byte stream is `values_len / type_len`
/// bytes long ([`ErrorCode::Overrun`], detail: that count, when below `num_non_null`). Another type, or
/// a `type_len` that is 0, above `dense_width` or not the type's width, is [`ErrorCode::BadEncoding`]
/// (detail: the type).
pub fn byte_stream_split(arena: &mut Arena, pages: &mut [PageDesc], cols: &[ColumnDesc]) {
    for_pages(
        arena,
        pages,
        cols,
        encoding::BYTE_STREAM_SPLIT,
        |arena, page, col, values| {
            let w = page.type_len;
            let ok = match page.physical {
                physical::FLOAT | physical::INT32 => w == 4,
                physical::DOUBLE | physical::INT64 => w == 8,
                physical::FIXED_LEN_BYTE_ARRAY => w > 0,
                _ => false,
            };
            if !ok || w > col.dense_width {
                return Err((ErrorCode::BadEncoding, page.physical));
            }
            let stride = values.len() as u64 / u64::from(w);
            let n = page.num_non_null as usize;
            let joined =
                decode_byte_stream_split(values, n, w as usize).map_err(|_| (ErrorCode::Overrun, detail(stride)))?;
            for (k, value) in joined.chunks_exact(w as usize).enumerate() {
                let addr = col.dense + (u64::from(page.row_start) + k as u64) * u64::from(col.dense_width);
                put(arena, addr, value, k as u32)?;
            }
            Ok(())
        },
    );
}

/// Appends `v` as ULEB128.
pub(crate) fn put_uleb(out: &mut Vec<u8>, mut v: u64) {
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

/// Encodes `values` as DELTA_BINARY_PACKED, for tests (crafting streams arrow-rs's writer does not
/// produce) and fuzzing: written from the format's description, independently of the decoder. The
/// values wrap in `bits` (32 or 64; INT32 values are taken as their low 32 bits); blocks of
/// `block_size` values in `miniblocks` miniblocks; the unused miniblocks of the last block get width
/// `unused_width` (0 as writers do; readers must accept any) and no bytes.
///
/// # Panics
/// If the layout is invalid (`block_size` not a multiple of 128 split into miniblocks of a multiple
/// of 32 values).
pub fn encode_delta_binary_packed(
    values: &[i64],
    block_size: usize,
    miniblocks: usize,
    bits: u32,
    unused_width: u8,
) -> Vec<u8> {
    assert!(
        block_size > 0 && block_size.is_multiple_of(128) && miniblocks > 0 && block_size.is_multiple_of(miniblocks)
    );
    let vpm = block_size / miniblocks;
    assert!(vpm.is_multiple_of(32));
    let zigzag = |v: i64| ((v << 1) ^ (v >> 63)) as u64;
    let mut out = Vec::new();
    put_uleb(&mut out, block_size as u64);
    put_uleb(&mut out, miniblocks as u64);
    put_uleb(&mut out, values.len() as u64);
    put_uleb(&mut out, zigzag(values.first().copied().unwrap_or(0)));
    let deltas: Vec<i64> = values
        .windows(2)
        .map(|w| match bits {
            32 => i64::from((w[1] as i32).wrapping_sub(w[0] as i32)),
            _ => w[1].wrapping_sub(w[0]),
        })
        .collect();
    for block in deltas.chunks(block_size) {
        let min = block.iter().copied().min().unwrap_or(0);
        put_uleb(&mut out, zigzag(min));
        let rel: Vec<u64> = block
            .iter()
            .map(|&d| match bits {
                32 => u64::from((d as i32).wrapping_sub(min as i32) as u32),
                _ => d.wrapping_sub(min) as u64,
            })
            .collect();
        let used: Vec<&[u64]> = rel.chunks(vpm).collect();
        let widths: Vec<u8> = (0..miniblocks)
            .map(|m| match used.get(m) {
                Some(vals) => (64 - vals.iter().max().unwrap_or(&0).leading_zeros()) as u8,
                None => unused_width,
            })
            .collect();
        out.extend_from_slice(&widths);
        for (vals, &w) in used.iter().zip(&widths) {
            let mut packed = vec![0u8; vpm * w as usize / 8];
            for (i, &v) in vals.iter().enumerate() {
                for b in 0..w as usize {
                    if v >> b & 1 == 1 {
                        let bit = i * w as usize + b;
                        packed[bit / 8] |= 1 << (bit % 8);
                    }
                }
            }
            out.extend_from_slice(&packed);
        }
    }
    out
}

/// The value count a DELTA_BINARY_PACKED header claims (block size, miniblocks per block, then the
/// count, as ULEB128 varints), or `None` where the header cannot be read.
pub(crate) fn delta_header_count(bytes: &[u8]) -> Option<u64> {
    let mut at = 0usize;
    let mut varint = || -> Option<u64> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = *bytes.get(at)?;
            at += 1;
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Some(v);
            }
        }
        None
    };
    varint()?;
    varint()?;
    varint()
}

/// Whether the lengths of a DELTA_LENGTH_BYTE_ARRAY page's values (`prefixed` false), or the prefix and
/// suffix lengths of a DELTA_BYTE_ARRAY page's (`prefixed` true), claim at most `most` values in their
/// DELTA_BINARY_PACKED headers. A header that cannot be read passes (the decoders report it); prefix
/// lengths that cannot be decoded do not (the suffix header cannot be found). `Err` says which claim.
pub(crate) fn delta_lengths_claimed_within(values: &[u8], most: u64, prefixed: bool) -> Result<(), String> {
    let check = |bytes: &[u8], what: &str| match delta_header_count(bytes) {
        Some(n) if n > most => Err(format!(
            "the {what} claim {n} values, more than the page holds ({most})"
        )),
        other => Ok(other),
    };
    if !prefixed {
        return check(values, "DELTA_LENGTH_BYTE_ARRAY lengths").map(drop);
    }
    let Some(prefixes) = check(values, "DELTA_BYTE_ARRAY prefix lengths")? else {
        return Ok(());
    };
    // The suffix lengths' header follows the prefix lengths, decoded as the GPU decoder decodes them.
    let (_, end) = decode_delta_binary_packed_i32(values, prefixes as usize)
        .map_err(|e| format!("the DELTA_BYTE_ARRAY prefix lengths cannot be decoded ({e:?})"))?;
    match values.get(end..) {
        Some(rest) => check(rest, "DELTA_BYTE_ARRAY suffix lengths").map(drop),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn zz(v: i64) -> u64 {
        ((v << 1) ^ (v >> 63)) as u64
    }

    fn sample_i64(n: usize, seed: u64) -> Vec<Vec<i64>> {
        let mut r = super::super::xorshift(seed | 1);
        let extremes = [i64::MIN, i64::MAX, 0, -1, 1, i64::MIN + 1, i64::MAX - 1];
        vec![
            (0..n).map(|i| extremes[i % extremes.len()]).collect(),
            (0..n).map(|_| r() as i64).collect(),
            (0..n).map(|_| (r() % 1000) as i64 - 500).collect(),
            (0..n as i64).map(|i| i * 3 - 7).collect(),
            vec![42; n],
            (0..n).map(|i| if i % 100 == 7 { i64::MAX } else { 5 }).collect(),
        ]
    }

    const LAYOUTS: [(usize, usize); 6] = [(128, 4), (128, 1), (256, 8), (1024, 4), (128, 2), (512, 16)];

    #[test]
    fn claimed_length_counts_beyond_the_page_are_refused() {
        // DELTA_BINARY_PACKED headers: block 128, 4 miniblocks, the count, first value 0 (one value:
        // no blocks follow).
        let header = |count: &[u8]| [&[0x80, 0x01, 0x04][..], count, &[0x00]].concat();
        let huge = [0xff, 0xff, 0xff, 0xff, 0xff, 0x0f];
        assert!(delta_lengths_claimed_within(&header(&[0x01]), 1, false).is_ok());
        let e = delta_lengths_claimed_within(&header(&huge), 1, false).unwrap_err();
        assert!(
            e.contains("DELTA_LENGTH_BYTE_ARRAY lengths claim 549755813887 values"),
            "{e}"
        );
        // DELTA_BYTE_ARRAY: the suffix lengths' header after one prefix length.
        let fine = [header(&[0x01]), header(&[0x01])].concat();
        assert!(delta_lengths_claimed_within(&fine, 1, true).is_ok());
        let e = delta_lengths_claimed_within(&[header(&[0x01]), header(&huge)].concat(), 1, true).unwrap_err();
        assert!(e.contains("suffix lengths claim"), "{e}");
        let e = delta_lengths_claimed_within(&[header(&huge), header(&[0x01])].concat(), 1, true).unwrap_err();
        assert!(e.contains("prefix lengths claim"), "{e}");
        // Unreadable headers are left to the decoders.
        assert!(delta_lengths_claimed_within(&[0x80], 1, false).is_ok());
    }

    #[test]
    fn round_trips_i64_and_i32() {
        for n in [0usize, 1, 2, 31, 32, 33, 128, 129, 200, 1000, 2049] {
            for (seed, values) in sample_i64(n, n as u64 + 1).into_iter().enumerate() {
                for (block, minis) in LAYOUTS {
                    let bytes = encode_delta_binary_packed(&values, block, minis, 64, 0);
                    let (got, end) = decode_delta_binary_packed_i64(&bytes, n).unwrap();
                    assert_eq!(got, values, "n {n} sample {seed} layout {block}/{minis}");
                    assert_eq!(end, bytes.len());
                    let v32: Vec<i64> = values.iter().map(|&v| i64::from(v as i32)).collect();
                    let bytes = encode_delta_binary_packed(&v32, block, minis, 32, 0);
                    let (got, end) = decode_delta_binary_packed_i32(&bytes, n).unwrap();
                    assert_eq!(got.iter().map(|&v| i64::from(v)).collect::<Vec<_>>(), v32);
                    assert_eq!(end, bytes.len());
                }
            }
        }
    }

    #[test]
    fn fewer_values_than_the_header_and_the_stream_end() {
        let values: Vec<i64> = (0..1000).map(|i| i * i).collect();
        let mut bytes = encode_delta_binary_packed(&values, 128, 4, 64, 0);
        let len = bytes.len();
        bytes.extend_from_slice(b"tail");
        let (got, end) = decode_delta_binary_packed_i64(&bytes, 10).unwrap();
        assert_eq!(got, &values[..10]);
        assert_eq!(end, len, "the end is after all of the header's values");
        // The INT64 page step stops at the last miniblock it used.
        let d = dbp(&bytes, 0, 10, 64, false, None).unwrap();
        assert!(d.end < len as u64);
        assert_eq!(decode_delta_binary_packed_i64(&bytes, 1001), Err(ErrorCode::ShortPage));
    }

    #[test]
    fn unused_miniblocks_may_have_any_width() {
        let values: Vec<i64> = (0..40).map(|i| i * 7).collect();
        let bytes = encode_delta_binary_packed(&values, 128, 4, 64, 200);
        let (got, end) = decode_delta_binary_packed_i64(&bytes, 40).unwrap();
        assert_eq!((got, end), (values, bytes.len()));
    }

    /// The example of the format's documentation: 7, 5, 3, 1, 2, 3, 4, 5 in one block of 128 values
    /// and 4 miniblocks: min delta -2, widths [2, 0, 0, 0], then 8 bytes for 32 two-bit deltas.
    #[test]
    fn spec_example() {
        let mut bytes = vec![0x80, 0x01, 0x04, 0x08, 0x0e, 0x03, 0x02, 0x00, 0x00, 0x00];
        // Deltas less the minimum: 0, 0, 0, 3, 3, 3, 3, two bits each, LSB first.
        bytes.extend_from_slice(&[0xc0, 0x3f, 0, 0, 0, 0, 0, 0]);
        let (got, end) = decode_delta_binary_packed_i32(&bytes, 8).unwrap();
        assert_eq!(got, [7, 5, 3, 1, 2, 3, 4, 5]);
        assert_eq!(end, bytes.len());
    }

    fn header(block: u64, minis: u64, total: u64, first: i64) -> Vec<u8> {
        let mut out = Vec::new();
        for v in [block, minis, total, zz(first)] {
            put_uleb(&mut out, v);
        }
        out
    }

    fn err_i64(bytes: &[u8], n: usize) -> Result<u64, Fail> {
        dbp(bytes, 0, n as u64, 64, true, None).map(|d| d.end)
    }

    fn err_i32(bytes: &[u8], n: usize) -> Result<u64, Fail> {
        dbp(bytes, 0, n as u64, 32, true, None).map(|d| d.end)
    }

    #[test]
    fn absurd_headers() {
        use ErrorCode::*;
        assert_eq!(
            err_i64(&header(0, 4, 5, 0), 1),
            Err((BadDeltaHeader, 0)),
            "block size 0"
        );
        assert_eq!(
            err_i64(&header(100, 4, 5, 0), 1),
            Err((BadDeltaHeader, 0)),
            "not a multiple of 128"
        );
        assert_eq!(
            err_i64(&header(1 << 32, 4, 5, 0), 1),
            Err((BadDeltaHeader, 0)),
            "too large"
        );
        assert_eq!(
            err_i64(&header(128, 0, 5, 0), 1),
            Err((BadDeltaHeader, 2)),
            "no miniblocks"
        );
        assert_eq!(
            err_i64(&header(128, 3, 5, 0), 1),
            Err((BadDeltaHeader, 2)),
            "not a divisor"
        );
        assert_eq!(
            err_i64(&header(128, 8, 5, 0), 1),
            Err((BadDeltaHeader, 2)),
            "16 per miniblock"
        );
        assert_eq!(
            err_i32(&header(128, 4, 5, 1 << 31), 1),
            Err((BadDeltaHeader, 4)),
            "i32 first value"
        );
        assert_eq!(err_i64(&header(128, 4, 1, 1 << 31), 1), Ok(9), "fine for i64");
        assert_eq!(err_i64(&header(128, 4, 3, 0), 5), Err((ShortPage, 3)));
        assert_eq!(err_i64(&[0x80; 11], 1), Err((BadDeltaHeader, 0)), "ULEB over 10 bytes");
        assert_eq!(err_i64(&[0x80; 9], 1), Err((Overrun, 0)), "ULEB cut short");
        assert_eq!(err_i64(&[0x80, 0x01, 0x04], 1), Err((Overrun, 3)), "no total");
        assert_eq!(err_i64(&[], 0), Err((Overrun, 0)), "empty stream");
        // Zero or one value: no blocks; the end is the header's.
        assert_eq!(err_i64(&header(128, 4, 1, -9), 1), Ok(5));
        assert_eq!(err_i64(&header(128, 4, 0, 0), 0), Ok(5));
    }

    #[test]
    fn bad_blocks() {
        use ErrorCode::*;
        // Header (5 bytes), then min delta 0 and four widths.
        let block = |widths: [u8; 4]| {
            let mut b = header(128, 4, 10, 0);
            b.push(0);
            b.extend_from_slice(&widths);
            b
        };
        assert_eq!(err_i64(&block([65, 0, 0, 0]), 10), Err((BadBitWidth, 65)));
        assert_eq!(err_i32(&block([33, 0, 0, 0]), 10), Err((BadBitWidth, 33)));
        assert_eq!(
            err_i64(&block([0, 255, 255, 255]), 10),
            Ok(10),
            "unused widths are not read"
        );
        assert_eq!(err_i64(&block([1, 0, 0, 0]), 10), Err((Overrun, 10)), "no packed bytes");
        let mut cut = block([0, 0, 0, 0]);
        cut.truncate(8);
        assert_eq!(err_i64(&cut, 10), Err((Overrun, 6)), "widths cut short");
        let mut i32_min = header(128, 4, 10, 0);
        put_uleb(&mut i32_min, zz(-(1 << 31) - 1));
        assert_eq!(err_i32(&i32_min, 10), Err((BadDeltaHeader, 5)), "min delta beyond i32");
        // Only the bits of the values used must be there: 2 deltas of 8 bits in a 32-value miniblock.
        let mut short = block([8, 0, 0, 0]);
        short[3] = 3; // total 3
        short.extend_from_slice(&[1, 2]);
        assert_eq!(decode_delta_binary_packed_i64(&short, 3), Ok((vec![0, 1, 3], 42)));
    }

    #[test]
    fn huge_counts_cost_bytes_not_time() {
        // 2^60 values declared, width 0 blocks of 2^31: the walk to the end stops where the bytes do.
        let mut b = header(1 << 31, 1, 1 << 60, 0);
        for _ in 0..1000 {
            b.extend_from_slice(&[2, 0]); // min delta 1, width 0
        }
        let started = std::time::Instant::now();
        let r = err_i64(&b, 5);
        assert!(matches!(r, Err((ErrorCode::Overrun, _))), "{r:?}");
        let (values, _) = dbp(&b, 0, 5, 64, false, None).map(|d| (d.values, d.end)).unwrap();
        assert_eq!(values, [0, 1, 2, 3, 4]);
        assert!(started.elapsed().as_secs() < 5);
    }

    #[test]
    fn every_truncation_is_an_error_or_cuts_only_padding() {
        for (values, bits) in [
            ((0..300).map(|i| (i * 7919) % 1000 - 400).collect::<Vec<i64>>(), 64),
            (sample_i64(300, 9)[1].clone(), 64),
            (sample_i64(300, 9)[0].iter().map(|&v| i64::from(v as i32)).collect(), 32),
        ] {
            let bytes = encode_delta_binary_packed(&values, 128, 4, bits, 0);
            // Once a cut is accepted (it removes only the last miniblock's padding: arrow-rs accepts
            // that too), every longer one is.
            let mut first_ok = None;
            for cut in 0..bytes.len() {
                match dbp(&bytes[..cut], 0, values.len() as u64, bits, true, None) {
                    Err((ErrorCode::Overrun, _)) => assert_eq!(first_ok, None, "cut at {cut}"),
                    Ok(d) => {
                        let got: Vec<i64> = d
                            .values
                            .iter()
                            .map(|&v| if bits == 32 { i64::from(v as i32) } else { v as i64 })
                            .collect();
                        assert_eq!(got, values, "cut at {cut}");
                        assert_eq!(d.end as usize, bytes.len());
                        first_ok.get_or_insert(cut);
                    }
                    Err(e) => panic!("cut at {cut} of {}: {e:?}", bytes.len()),
                }
            }
            // 299 deltas = 2 * 128 + 32 + 11: the last miniblock uses 11 of its 32; the padding is less
            // than a miniblock.
            assert!(first_ok.is_none_or(|c| bytes.len() - c < 32 * 64 / 8), "{first_ok:?}");
        }
    }

    fn dlba(values: &[&[u8]]) -> Vec<u8> {
        let lens: Vec<i64> = values.iter().map(|v| v.len() as i64).collect();
        let mut out = encode_delta_binary_packed(&lens, 128, 4, 32, 0);
        for v in values {
            out.extend_from_slice(v);
        }
        out
    }

    fn dba(values: &[&[u8]]) -> Vec<u8> {
        let mut prefixes = Vec::new();
        let mut suffixes: Vec<&[u8]> = Vec::new();
        let mut prev: &[u8] = &[];
        for v in values {
            let p = prev.iter().zip(v.iter()).take_while(|(a, b)| a == b).count();
            prefixes.push(p as i64);
            suffixes.push(&v[p..]);
            prev = v;
        }
        let mut out = encode_delta_binary_packed(&prefixes, 128, 4, 32, 0);
        out.extend(dlba(&suffixes));
        out
    }

    fn strings(n: usize, seed: u64) -> Vec<Vec<u8>> {
        let mut r = super::super::xorshift(seed | 1);
        (0..n)
            .map(|i| match r() % 5 {
                0 => Vec::new(),
                1 => format!("https://example.com/a/b/{}", i / 3).into_bytes(),
                2 => vec![b'x'; (r() % 300) as usize],
                _ => (0..r() % 20).map(|_| r() as u8).collect(),
            })
            .collect()
    }

    #[test]
    fn byte_arrays_round_trip() {
        for n in [0, 1, 2, 129, 700] {
            let mut values = strings(n, n as u64 + 3);
            for sorted in [false, true] {
                if sorted {
                    values.sort();
                }
                let refs: Vec<&[u8]> = values.iter().map(Vec::as_slice).collect();
                assert_eq!(decode_delta_length_byte_array(&dlba(&refs), n).unwrap(), refs);
                assert_eq!(decode_delta_byte_array(&dba(&refs), n).unwrap(), values);
            }
        }
    }

    #[test]
    fn bad_byte_arrays() {
        use ErrorCode::*;
        let count = |bytes: &[u8], n| length_block(bytes, 0, n, None).map(|v| v.len());
        let mut neg = encode_delta_binary_packed(&[3, -1, 2], 128, 4, 32, 0);
        neg.extend_from_slice(b"abcde");
        assert_eq!(count(&neg, 3), Err((Overrun, 1)), "negative length");
        let mut short = encode_delta_binary_packed(&[3, 1, 2], 128, 4, 32, 0);
        short.extend_from_slice(b"abcde");
        assert_eq!(count(&short, 3), Err((Overrun, 2)), "bytes past the end");
        short.push(b'f');
        assert_eq!(count(&short, 3), Ok(3));
        // Prefix lengths [1, ...]: the first value has no previous one.
        let mut p0 = encode_delta_binary_packed(&[1, 0], 128, 4, 32, 0);
        p0.extend(dlba(&[b"a", b"b"]));
        assert_eq!(dba_lengths(&p0, 2).map(|v| v.len()), Err((BadPrefix, 0)));
        // A prefix longer than the previous value.
        let mut long = encode_delta_binary_packed(&[0, 3], 128, 4, 32, 0);
        long.extend(dlba(&[b"ab", b"c"]));
        assert_eq!(dba_lengths(&long, 2).map(|v| v.len()), Err((BadPrefix, 1)));
        // Prefix and suffix streams disagree on the count.
        let prefix = encode_delta_binary_packed(&[0, 0], 128, 4, 32, 0);
        let mut mismatch = prefix.clone();
        mismatch.extend(dlba(&[b"a", b"b", b"c"]));
        assert_eq!(
            dba_lengths(&mismatch, 2).map(|v| v.len()),
            Err((BadDeltaHeader, prefix.len() as u32))
        );
        assert_eq!(decode_byte_stream_split(&[1, 2, 3, 4, 5, 6, 7], 2, 4), Err(Overrun));
        assert_eq!(
            decode_byte_stream_split(&[1, 2, 3, 4, 5, 6, 7, 8], 2, 4),
            Ok(vec![1, 3, 5, 7, 2, 4, 6, 8])
        );
        // As arrow-rs: the streams are len / width long, extra values and bytes are ignored.
        assert_eq!(
            decode_byte_stream_split(&[1, 2, 3, 4, 5, 6, 7, 8, 9], 1, 4),
            Ok(vec![1, 3, 5, 7])
        );
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        /// Random bytes: every decoder returns (an error or values), never panics.
        #[test]
        fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200), n in 0usize..300) {
            let _ = decode_delta_binary_packed_i64(&bytes, n);
            let _ = decode_delta_binary_packed_i32(&bytes, n);
            let _ = decode_delta_length_byte_array(&bytes, n);
            let _ = decode_delta_byte_array(&bytes, n);
            let _ = decode_byte_stream_split(&bytes, n, 1 + n % 9);
        }

        /// Valid streams with random bytes changed: an error or `n` values, never a panic.
        #[test]
        fn flipped_streams(
            values in proptest::collection::vec(any::<i64>(), 0..400),
            flips in proptest::collection::vec((any::<usize>(), 1u8..=255), 1..4),
            layout in 0usize..LAYOUTS.len(),
        ) {
            let (block, minis) = LAYOUTS[layout];
            let n = values.len();
            let refs: Vec<Vec<u8>> = values.iter().map(|v| v.to_le_bytes()[..(*v as usize % 9)].to_vec()).collect();
            let refs: Vec<&[u8]> = refs.iter().map(Vec::as_slice).collect();
            for mut bytes in [encode_delta_binary_packed(&values, block, minis, 64, 0), dlba(&refs), dba(&refs)] {
                for &(at, x) in &flips {
                    if !bytes.is_empty() {
                        let i = at % bytes.len();
                        bytes[i] ^= x;
                    }
                }
                if let Ok((v, _)) = decode_delta_binary_packed_i64(&bytes, n) {
                    prop_assert_eq!(v.len(), n);
                }
                if let Ok((v, _)) = decode_delta_binary_packed_i32(&bytes, n) {
                    prop_assert_eq!(v.len(), n);
                }
                if let Ok(v) = decode_delta_length_byte_array(&bytes, n) {
                    prop_assert_eq!(v.len(), n);
                }
                if let Ok(v) = decode_delta_byte_array(&bytes, n) {
                    prop_assert_eq!(v.len(), n);
                }
            }
        }

        /// Any values round-trip through the independent encoder, in both widths.
        #[test]
        fn any_values_round_trip(values in proptest::collection::vec(any::<i64>(), 0..600), layout in 0usize..LAYOUTS.len()) {
            let (block, minis) = LAYOUTS[layout];
            let bytes = encode_delta_binary_packed(&values, block, minis, 64, 0);
            prop_assert_eq!(decode_delta_binary_packed_i64(&bytes, values.len()), Ok((values.clone(), bytes.len())));
            let v32: Vec<i64> = values.iter().map(|&v| i64::from(v as i32)).collect();
            let bytes = encode_delta_binary_packed(&v32, block, minis, 32, 0);
            let got = decode_delta_binary_packed_i32(&bytes, values.len()).map(|(v, e)| (v.iter().map(|&x| i64::from(x)).collect::<Vec<_>>(), e));
            prop_assert_eq!(got, Ok((v32, bytes.len())));
        }
    }
}
