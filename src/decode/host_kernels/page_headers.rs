//! Host reference of `gp_page_headers` (`kernels/page_headers.cu`): walks each column chunk's pages by
//! parsing their Thrift compact `PageHeader`s, in two passes (count, then fill).
//!
//! The kernel is a line-for-line twin of this file: same checks in the same order, so both give the
//! same [`PageInfo`]s, page counts, error codes and error offsets for any bytes.
//!
//! # What a chunk must be
//! From `start`, headers and bodies back to back up to exactly `start + len`: each header is parsed
//! (unknown fields of any type skipped, structs and containers nested at most [`MAX_DEPTH`] deep), then
//! checked, then the walk jumps over its body (`compressed_page_size` bytes). The first problem stops
//! the chunk, with its [`ErrorCode`] and the offset of the header where it was met:
//! - [`ErrorCode::HeaderPastChunk`]: the header's bytes run past the chunk end;
//! - [`ErrorCode::BadHeader`]: not valid Thrift compact protocol (bad type nibble, varint over 10 bytes,
//!   field id out of `i16`, container size over `i32::MAX`, a bool list element other than 0, 1 or 2,
//!   nesting over [`MAX_DEPTH`]), a known field of the wrong Thrift type, an `i32` field out of range,
//!   an unknown page type, or a required field missing (`type`, both sizes, the sub-header matching the
//!   type and its required fields);
//! - [`ErrorCode::BadPageSize`]: a negative size or count, or v2 level lengths over the page size;
//! - [`ErrorCode::PagePastChunk`]: the body runs past the chunk end;
//! - [`ErrorCode::TooManyPages`] (fill pass): more valid pages than `page_capacity`.
//!
//! No byte outside `[start, start + len)` is read, and nothing recurses.

use super::Arena;
use crate::decode::layout::{ChunkDesc, ErrorCode, PageInfo};

/// Deepest nesting of Thrift structs and containers a page header may have; the `PageHeader` struct
/// itself is depth 1, its `data_page_header` depth 2, a list inside that depth 3.
pub(crate) const MAX_DEPTH: u32 = 8;

/// Parquet `PageType` of a v1 data page.
pub(crate) const DATA_PAGE: i32 = 0;
/// Parquet `PageType` of an index page (never written in practice; parquet-rs skips them).
pub(crate) const INDEX_PAGE: i32 = 1;
/// Parquet `PageType` of a dictionary page.
pub(crate) const DICTIONARY_PAGE: i32 = 2;
/// Parquet `PageType` of a v2 data page.
pub(crate) const DATA_PAGE_V2: i32 = 3;

// Thrift compact protocol types (the low nibble of a field header; list/map element types).
const T_STOP: u8 = 0;
const T_TRUE: u8 = 1;
const T_FALSE: u8 = 2;
const T_BYTE: u8 = 3;
const T_I16: u8 = 4;
const T_I32: u8 = 5;
const T_I64: u8 = 6;
const T_DOUBLE: u8 = 7;
const T_BINARY: u8 = 8;
const T_LIST: u8 = 9;
const T_SET: u8 = 10;
const T_MAP: u8 = 11;
const T_STRUCT: u8 = 12;
const T_UUID: u8 = 13;
/// Not on the wire: a bool inside a list or map, stored as one byte (a bool field has none).
const T_BOOL_ELEM: u8 = 16;

// Skip-stack frame kinds.
const F_STRUCT: u8 = 0;
const F_LIST: u8 = 1;
const F_MAP: u8 = 2;

type Res<T> = Result<T, ErrorCode>;

/// The chunk's bytes and a position in them. Every read checks `pos` against the end.
struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

/// One open struct or container while skipping a value.
#[derive(Clone, Copy, Default)]
struct Frame {
    kind: u8,
    /// List element type, or map key type.
    t1: u8,
    /// Map value type.
    t2: u8,
    /// Lists: elements left; maps: keys plus values left.
    remaining: u32,
    /// Structs: the last field id (for delta-encoded ids).
    last: i32,
}

impl Reader<'_> {
    fn byte(&mut self) -> Res<u8> {
        let b = *self.bytes.get(self.pos).ok_or(ErrorCode::HeaderPastChunk)?;
        self.pos += 1;
        Ok(b)
    }

    fn skip_bytes(&mut self, n: u64) -> Res<()> {
        if n > (self.bytes.len() - self.pos) as u64 {
            return Err(ErrorCode::HeaderPastChunk);
        }
        self.pos += n as usize;
        Ok(())
    }

    /// An unsigned LEB128 varint of at most 10 bytes (bits past 64 dropped).
    fn varint(&mut self) -> Res<u64> {
        let mut v = 0u64;
        for i in 0..10 {
            let b = self.byte()?;
            v |= u64::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(ErrorCode::BadHeader)
    }

    fn zigzag(&mut self) -> Res<i64> {
        let v = self.varint()?;
        Ok((v >> 1) as i64 ^ -((v & 1) as i64))
    }

    /// A Thrift `i32` (zigzag varint) that must fit in 32 bits.
    fn i32_value(&mut self) -> Res<i32> {
        i32::try_from(self.zigzag()?).map_err(|_| ErrorCode::BadHeader)
    }

    /// A container size: an unsigned varint of at most `i32::MAX`.
    fn size(&mut self) -> Res<u32> {
        let v = self.varint()?;
        if v > i32::MAX as u64 {
            return Err(ErrorCode::BadHeader);
        }
        Ok(v as u32)
    }

    /// A field header: `None` at the struct's stop (any type nibble 0, as parquet-rs), else the
    /// field's type and id (delta from `last`, or explicit), updating `last`.
    fn field_begin(&mut self, last: &mut i32) -> Res<Option<(u8, i32)>> {
        let b = self.byte()?;
        let t = b & 0x0f;
        if t == T_STOP {
            return Ok(None);
        }
        if t > T_UUID {
            return Err(ErrorCode::BadHeader);
        }
        let delta = i64::from(b >> 4);
        let id = if delta != 0 {
            i64::from(*last) + delta
        } else {
            self.zigzag()?
        };
        if id < i64::from(i16::MIN) || id > i64::from(i16::MAX) {
            return Err(ErrorCode::BadHeader);
        }
        *last = id as i32;
        Ok(Some((t, id as i32)))
    }

    /// Skips one value of type `t`, a field of a struct at nesting depth `depth`, with an explicit
    /// stack of open structs and containers (the value's own depth is `depth + 1`).
    fn skip(&mut self, t: u8, depth: u32) -> Res<()> {
        let mut stack = [Frame::default(); MAX_DEPTH as usize];
        let mut sp = 0usize;
        let mut t = t;
        loop {
            // Consume one value of type `t`, or open it.
            match t {
                T_TRUE | T_FALSE => {}
                T_BOOL_ELEM => {
                    if self.byte()? > 2 {
                        return Err(ErrorCode::BadHeader);
                    }
                }
                T_BYTE => {
                    self.byte()?;
                }
                T_I16 | T_I32 | T_I64 => {
                    self.varint()?;
                }
                T_DOUBLE => self.skip_bytes(8)?,
                T_UUID => self.skip_bytes(16)?,
                T_BINARY => {
                    let n = self.varint()?;
                    self.skip_bytes(n)?;
                }
                T_LIST | T_SET | T_MAP | T_STRUCT => {
                    if depth + sp as u32 + 1 > MAX_DEPTH {
                        return Err(ErrorCode::BadHeader);
                    }
                    let mut f = Frame::default();
                    if t == T_STRUCT {
                        f.kind = F_STRUCT;
                    } else if t == T_MAP {
                        f.kind = F_MAP;
                        let n = self.size()?;
                        if n > 0 {
                            let kv = self.byte()?;
                            f.t1 = element_type(kv >> 4)?;
                            f.t2 = element_type(kv & 0x0f)?;
                            f.remaining = 2 * n;
                        }
                    } else {
                        f.kind = F_LIST;
                        let h = self.byte()?;
                        // Some writers give an empty list as a single 0 byte (parquet-rs accepts it).
                        if h != 0 {
                            f.t1 = element_type(h & 0x0f)?;
                            let n = u32::from(h >> 4);
                            f.remaining = if n == 15 { self.size()? } else { n };
                        }
                    }
                    stack[sp] = f;
                    sp += 1;
                }
                _ => return Err(ErrorCode::BadHeader),
            }
            // Find the next value to consume, closing finished frames.
            loop {
                if sp == 0 {
                    return Ok(());
                }
                let f = &mut stack[sp - 1];
                if f.kind == F_STRUCT {
                    match self.field_begin(&mut f.last)? {
                        Some((ft, _)) => {
                            t = ft;
                            break;
                        }
                        None => sp -= 1,
                    }
                } else if f.remaining == 0 {
                    sp -= 1;
                } else {
                    t = if f.kind == F_MAP && f.remaining % 2 == 1 {
                        f.t2
                    } else {
                        f.t1
                    };
                    f.remaining -= 1;
                    break;
                }
            }
        }
    }

    /// Reads the fields of a sub-header struct (depth 2): fields `1..=vals.len()` are `i32`s stored in
    /// `vals` (bit `id - 1` of `seen` set), field `bool_id` (if not 0) a bool stored in `flag`; others
    /// skipped.
    fn sub_header(&mut self, vals: &mut [i32], seen: &mut u32, bool_id: i32, flag: &mut i32) -> Res<()> {
        let mut last = 0;
        while let Some((t, id)) = self.field_begin(&mut last)? {
            if id >= 1 && id <= vals.len() as i32 {
                if t != T_I32 {
                    return Err(ErrorCode::BadHeader);
                }
                vals[id as usize - 1] = self.i32_value()?;
                *seen |= 1 << (id - 1);
            } else if bool_id != 0 && id == bool_id {
                if t != T_TRUE && t != T_FALSE {
                    return Err(ErrorCode::BadHeader);
                }
                *flag = i32::from(t == T_TRUE);
            } else {
                self.skip(t, 2)?;
            }
        }
        Ok(())
    }
}

/// A list or map element type: bools (1 or 2) become [`T_BOOL_ELEM`]; 0 and 14, 15 are refused.
fn element_type(t: u8) -> Res<u8> {
    match t {
        T_TRUE | T_FALSE => Ok(T_BOOL_ELEM),
        T_BYTE..=T_UUID => Ok(t),
        _ => Err(ErrorCode::BadHeader),
    }
}

/// The fields of one `PageHeader`, as read.
struct Header {
    /// `type`, `uncompressed_page_size`, `compressed_page_size`, `crc`.
    top: [i32; 4],
    top_seen: u32,
    /// `data_page_header`: `num_values`, `encoding`, `definition_level_encoding`,
    /// `repetition_level_encoding`.
    dp: [i32; 4],
    dp_seen: u32,
    /// `dictionary_page_header`: `num_values`, `encoding`.
    dict: [i32; 2],
    dict_seen: u32,
    /// `data_page_header_v2`: `num_values`, `num_nulls`, `num_rows`, `encoding`,
    /// `definition_levels_byte_length`, `repetition_levels_byte_length`.
    v2: [i32; 6],
    v2_seen: u32,
    v2_compressed: i32,
    /// Bits 0..=3: `data_page_header`, `index_page_header`, `dictionary_page_header`,
    /// `data_page_header_v2` present.
    subs: u32,
}

/// Parses one `PageHeader` at the reader's position and checks it. On success, the page (offsets
/// relative to the chunk start) with the reader just after the header.
fn parse_header(r: &mut Reader<'_>) -> Res<PageInfo> {
    let header_offset = r.pos as u64;
    let mut h = Header {
        top: [0; 4],
        top_seen: 0,
        dp: [0; 4],
        dp_seen: 0,
        dict: [0; 2],
        dict_seen: 0,
        v2: [0; 6],
        v2_seen: 0,
        v2_compressed: 1,
        subs: 0,
    };
    let mut unused = 0;
    let mut last = 0;
    while let Some((t, id)) = r.field_begin(&mut last)? {
        if (1..=4).contains(&id) {
            if t != T_I32 {
                return Err(ErrorCode::BadHeader);
            }
            h.top[id as usize - 1] = r.i32_value()?;
            h.top_seen |= 1 << (id - 1);
        } else if (5..=8).contains(&id) {
            if t != T_STRUCT {
                return Err(ErrorCode::BadHeader);
            }
            match id {
                5 => r.sub_header(&mut h.dp, &mut h.dp_seen, 0, &mut unused)?,
                6 => r.skip(T_STRUCT, 1)?,
                7 => r.sub_header(&mut h.dict, &mut h.dict_seen, 0, &mut unused)?,
                _ => r.sub_header(&mut h.v2, &mut h.v2_seen, 7, &mut h.v2_compressed)?,
            }
            h.subs |= 1 << (id - 5);
        } else {
            r.skip(t, 1)?;
        }
    }
    let header_len = r.pos as u64 - header_offset;
    if header_len > u64::from(u32::MAX) {
        return Err(ErrorCode::BadHeader);
    }
    // Required fields.
    if h.top_seen & 7 != 7 {
        return Err(ErrorCode::BadHeader);
    }
    let page_type = h.top[0];
    let complete = match page_type {
        DATA_PAGE => h.subs & 1 != 0 && h.dp_seen == 0xf,
        INDEX_PAGE => h.subs & 2 != 0,
        DICTIONARY_PAGE => h.subs & 4 != 0 && h.dict_seen == 0x3,
        DATA_PAGE_V2 => h.subs & 8 != 0 && h.v2_seen == 0x3f,
        _ => false,
    };
    if !complete {
        return Err(ErrorCode::BadHeader);
    }
    let mut p = PageInfo {
        header_offset,
        data_offset: r.pos as u64,
        header_len: header_len as u32,
        page_type,
        uncompressed_size: h.top[1],
        compressed_size: h.top[2],
        is_compressed: 1,
        ..PageInfo::default()
    };
    match page_type {
        DATA_PAGE => {
            p.num_values = h.dp[0];
            p.encoding = h.dp[1];
            p.def_level_encoding = h.dp[2];
            p.rep_level_encoding = h.dp[3];
        }
        DICTIONARY_PAGE => {
            p.num_values = h.dict[0];
            p.encoding = h.dict[1];
        }
        DATA_PAGE_V2 => {
            p.num_values = h.v2[0];
            p.num_nulls = h.v2[1];
            p.num_rows = h.v2[2];
            p.encoding = h.v2[3];
            p.def_levels_byte_length = h.v2[4];
            p.rep_levels_byte_length = h.v2[5];
            p.is_compressed = h.v2_compressed;
        }
        _ => {}
    }
    // Sizes and counts.
    if p.compressed_size < 0
        || p.uncompressed_size < 0
        || p.num_values < 0
        || p.num_nulls < 0
        || p.num_rows < 0
        || p.def_levels_byte_length < 0
        || p.rep_levels_byte_length < 0
        || i64::from(p.def_levels_byte_length) + i64::from(p.rep_levels_byte_length) > i64::from(p.compressed_size)
    {
        return Err(ErrorCode::BadPageSize);
    }
    Ok(p)
}

/// What one chunk's walk found.
struct Walk {
    count: u32,
    error: u32,
    error_at: u64,
}

/// Walks the pages of one chunk (`bytes`). Count pass when `out` is `None`; fill pass otherwise,
/// writing page `i` to `out[i]` (more pages than `out` holds: [`ErrorCode::TooManyPages`]).
fn walk(bytes: &[u8], mut out: Option<&mut [PageInfo]>) -> Walk {
    let mut r = Reader { bytes, pos: 0 };
    let mut count = 0u32;
    while r.pos < bytes.len() {
        let at = r.pos as u64;
        let fail = |code: ErrorCode| Walk {
            count,
            error: code as u32,
            error_at: at,
        };
        let p = match parse_header(&mut r) {
            Ok(p) => p,
            Err(code) => return fail(code),
        };
        let left = bytes.len() as u64 - p.data_offset;
        if p.compressed_size as u64 > left {
            return fail(ErrorCode::PagePastChunk);
        }
        if count == u32::MAX {
            return fail(ErrorCode::TooManyPages);
        }
        if let Some(out) = out.as_deref_mut() {
            match out.get_mut(count as usize) {
                Some(slot) => *slot = p,
                None => return fail(ErrorCode::TooManyPages),
            }
        }
        count += 1;
        r.pos = (p.data_offset + p.compressed_size as u64) as usize;
    }
    Walk {
        count,
        error: 0,
        error_at: 0,
    }
}

/// Host twin of one launch of `gp_page_headers(chunks, nchunks, pages)`.
///
/// Each chunk's bytes are `arena[start .. start + len]`. Count pass (`pages` `None`): sets each
/// chunk's `page_count`, `error` and `error_at`. Fill pass: also writes the chunk's pages at
/// `pages[first_page ..]`, at most `page_capacity` of them ([`ErrorCode::TooManyPages`] beyond; also
/// where `pages` ends first, which on the GPU would be the caller's bug). `page_count` is the number
/// of valid pages before the first error. A chunk whose bytes are not in the arena is reported as
/// [`ErrorCode::HeaderPastChunk`] at 0 (the kernel would fault).
pub fn page_headers(arena: &Arena, chunks: &mut [ChunkDesc], mut pages: Option<&mut [PageInfo]>) {
    for c in chunks.iter_mut() {
        let bytes = if c.len == 0 {
            Some(&[][..])
        } else {
            arena.get(c.start, c.len)
        };
        let w = match bytes {
            None => Walk {
                count: 0,
                error: ErrorCode::HeaderPastChunk as u32,
                error_at: 0,
            },
            Some(bytes) => match pages.as_deref_mut() {
                None => walk(bytes, None),
                Some(pages) => {
                    let first = (c.first_page as usize).min(pages.len());
                    let end = (c.first_page as usize + c.page_capacity as usize).min(pages.len());
                    walk(bytes, Some(&mut pages[first..end]))
                }
            },
        };
        c.page_count = w.count;
        c.error = w.error;
        c.error_at = w.error_at;
    }
}

/// The pages of one column chunk held in host memory (both passes of [`page_headers`] on `bytes`):
/// the pages, or the first error and the offset of the header where it was met.
pub fn parse_pages(bytes: &[u8]) -> Result<Vec<PageInfo>, (ErrorCode, u64)> {
    let w = walk(bytes, None);
    if let Some(code) = ErrorCode::from_u32(w.error) {
        return Err((code, w.error_at));
    }
    let mut pages = vec![PageInfo::default(); w.count as usize];
    let w = walk(bytes, Some(&mut pages));
    match ErrorCode::from_u32(w.error) {
        Some(code) => Err((code, w.error_at)),
        None => Ok(pages),
    }
}

/// One chunk's pages as [`page_headers`]' fill pass gives them with room enough: the pages before the
/// first error, and that error's code and offset (0 and 0 when none).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ChunkHeaders {
    /// The pages before the first error (all of them when none).
    pub pages: Vec<PageInfo>,
    /// The first [`ErrorCode`] met, 0 when none.
    pub error: u32,
    /// Offset in the chunk of the header where it was met.
    pub error_at: u64,
}

/// Bytes of a header read at first by [`walk_headers_at`]; a longer one is read again, four times as
/// many bytes each time.
const FIRST_HEADER_READ: usize = 256;

/// The pages of a chunk of `len` bytes whose bytes are not in memory, reading only its headers:
/// `read_at(offset, buf)` fills `buf` with the chunk's bytes from `offset` (offsets from the chunk
/// start; the caller keeps the reads inside the chunk). The result equals the walk of [`page_headers`]
/// over the whole chunk: a header is parsed from its first [`FIRST_HEADER_READ`] bytes, and wherever
/// that fails before the chunk's end, again from more bytes, up to the chunk's end.
pub fn walk_headers_at<E>(
    len: u64,
    mut read_at: impl FnMut(u64, &mut [u8]) -> Result<(), E>,
) -> Result<ChunkHeaders, E> {
    let mut out = ChunkHeaders::default();
    let mut buf = vec![0u8; FIRST_HEADER_READ];
    let mut pos = 0u64;
    while pos < len {
        let left = len - pos;
        let mut want = (FIRST_HEADER_READ as u64).min(left) as usize;
        let parsed = loop {
            if buf.len() < want {
                buf.resize(want, 0);
            }
            read_at(pos, &mut buf[..want])?;
            let mut r = Reader {
                bytes: &buf[..want],
                pos: 0,
            };
            match parse_header(&mut r) {
                Err(_) if (want as u64) < left => want = (want as u64).saturating_mul(4).min(left) as usize,
                other => break other,
            }
        };
        let fail = |out: &mut ChunkHeaders, code: ErrorCode| {
            out.error = code as u32;
            out.error_at = pos;
        };
        let mut p = match parsed {
            Ok(p) => p,
            Err(code) => {
                fail(&mut out, code);
                return Ok(out);
            }
        };
        p.header_offset += pos;
        p.data_offset += pos;
        if p.compressed_size as u64 > len - p.data_offset {
            fail(&mut out, ErrorCode::PagePastChunk);
            return Ok(out);
        }
        if out.pages.len() >= u32::MAX as usize {
            fail(&mut out, ErrorCode::TooManyPages);
            return Ok(out);
        }
        pos = p.data_offset + p.compressed_size as u64;
        out.pages.push(p);
    }
    Ok(out)
}

#[cfg(test)]
mod tests;
