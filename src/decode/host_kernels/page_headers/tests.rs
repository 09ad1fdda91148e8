//! Tests of the page-header reference: hand-built headers (every Thrift type skipped, nesting limits,
//! each error), parquet-rs's own page readers over the parquet-testing corpus and `testdata/`, and
//! hostile input (every truncation, random byte flips).

use std::path::{Path, PathBuf};

use bytes::Bytes;
use parquet::basic::Compression;
use parquet::column::page::Page;
use parquet::file::reader::{FileReader, SerializedFileReader};
use proptest::prelude::*;

use super::*;
use crate::metadata::{CheckedChunk, ParquetSource};

// ---- a small Thrift compact writer ----

/// Writes Thrift compact protocol, tracking the last field id of each open struct.
struct W {
    b: Vec<u8>,
    last: Vec<i32>,
}

impl W {
    fn new() -> Self {
        W {
            b: Vec::new(),
            last: vec![0],
        }
    }
    fn varint(&mut self, mut v: u64) -> &mut Self {
        loop {
            let byte = (v & 0x7f) as u8;
            v >>= 7;
            if v == 0 {
                self.b.push(byte);
                return self;
            }
            self.b.push(byte | 0x80);
        }
    }
    fn zz(&mut self, v: i64) -> &mut Self {
        self.varint(((v << 1) ^ (v >> 63)) as u64)
    }
    fn raw(&mut self, bytes: &[u8]) -> &mut Self {
        self.b.extend_from_slice(bytes);
        self
    }
    /// A field header: delta form when the id is 1..=15 past the last, explicit otherwise.
    fn field(&mut self, id: i32, t: u8) -> &mut Self {
        let last = self.last.last_mut().expect("open struct");
        let d = id - *last;
        *last = id;
        if (1..=15).contains(&d) {
            self.b.push(((d as u8) << 4) | t);
        } else {
            self.b.push(t);
            self.zz(i64::from(id));
        }
        self
    }
    fn i32f(&mut self, id: i32, v: i32) -> &mut Self {
        self.field(id, T_I32).zz(i64::from(v))
    }
    fn begin(&mut self, id: i32) -> &mut Self {
        self.field(id, T_STRUCT);
        self.last.push(0);
        self
    }
    fn end(&mut self) -> &mut Self {
        self.b.push(0);
        self.last.pop();
        self
    }
    fn body(&mut self, n: usize) -> &mut Self {
        self.b.extend(std::iter::repeat_n(0xAB, n));
        self
    }
}

/// A v1 data page header (without the final stop, so a test can add fields).
fn v1_open(w: &mut W, num_values: i32, size: i32) {
    w.i32f(1, DATA_PAGE).i32f(2, size + 5).i32f(3, size);
    w.begin(5).i32f(1, num_values).i32f(2, 8).i32f(3, 3).i32f(4, 4).end();
}

fn v1_page(w: &mut W, num_values: i32, size: i32) {
    v1_open(w, num_values, size);
    w.b.push(0);
    w.body(size as usize);
}

fn dict_page(w: &mut W, num_values: i32, size: i32) {
    w.i32f(1, DICTIONARY_PAGE).i32f(2, size).i32f(3, size);
    w.begin(7).i32f(1, num_values).i32f(2, 0).field(3, T_TRUE).end();
    w.b.push(0);
    w.body(size as usize);
}

fn v2_page(w: &mut W, compressed: Option<bool>, size: i32, def: i32, rep: i32) {
    w.i32f(1, DATA_PAGE_V2).i32f(2, size * 2).i32f(3, size);
    w.begin(8)
        .i32f(1, 100)
        .i32f(2, 7)
        .i32f(3, 90)
        .i32f(4, 8)
        .i32f(5, def)
        .i32f(6, rep);
    if let Some(c) = compressed {
        w.field(7, if c { T_TRUE } else { T_FALSE });
    }
    w.end();
    w.b.push(0);
    w.body(size as usize);
}

/// A fresh writer for the next header: its field ids start again at 0.
fn next(w: &mut W) {
    w.last = vec![0];
}

fn err(bytes: &[u8]) -> (ErrorCode, u64) {
    let r = parse_pages(bytes);
    check_consistent(bytes, &r);
    r.expect_err("should be refused")
}

fn ok(bytes: &[u8]) -> Vec<PageInfo> {
    let r = parse_pages(bytes);
    check_consistent(bytes, &r);
    r.unwrap_or_else(|e| panic!("refused: {e:?}"))
}

/// The invariants every result must have, and the arena form ([`page_headers`]) agreeing with
/// [`parse_pages`] field for field, in both passes.
fn check_consistent(bytes: &[u8], r: &Result<Vec<PageInfo>, (ErrorCode, u64)>) {
    let len = bytes.len() as u64;
    match r {
        Ok(pages) => {
            let mut pos = 0;
            for p in pages {
                assert_eq!(p.header_offset, pos, "pages back to back");
                assert_eq!(p.header_offset + u64::from(p.header_len), p.data_offset);
                assert!(p.compressed_size >= 0 && p.uncompressed_size >= 0 && p.num_values >= 0);
                pos = p.data_offset + p.compressed_size as u64;
                assert!(pos <= len, "page inside the chunk");
            }
            assert_eq!(pos, len, "the walk ends exactly at the chunk end");
        }
        Err((code, at)) => {
            assert!(*at < len, "error inside the chunk");
            assert!(
                matches!(
                    code,
                    ErrorCode::HeaderPastChunk
                        | ErrorCode::BadHeader
                        | ErrorCode::BadPageSize
                        | ErrorCode::PagePastChunk
                ),
                "{code:?}"
            );
        }
    }
    // The arena form: bytes placed after a gap inside a larger region, two chunks per launch.
    let mut arena = Arena::new();
    let mut padded = vec![0x55u8; 16];
    padded.extend_from_slice(bytes);
    padded.extend_from_slice(&[0x55; 16]);
    let base = arena.upload(&padded);
    let chunk = ChunkDesc {
        start: base + 16,
        len,
        ..ChunkDesc::default()
    };
    let mut chunks = [chunk, chunk];
    page_headers(&arena, &mut chunks, None);
    let n = chunks[0].page_count;
    assert_eq!(chunks[0], chunks[1]);
    match r {
        Ok(pages) => {
            assert_eq!((n, chunks[0].error, chunks[0].error_at), (pages.len() as u32, 0, 0));
        }
        Err((code, at)) => assert_eq!((chunks[0].error, chunks[0].error_at), (*code as u32, *at)),
    }
    // Fill pass: both chunks into one array, each with its counted capacity.
    let count_pass = chunks[0];
    chunks[0].first_page = 0;
    chunks[0].page_capacity = n;
    chunks[1].first_page = n;
    chunks[1].page_capacity = n;
    let mut out = vec![PageInfo::default(); 2 * n as usize];
    page_headers(&arena, &mut chunks, Some(&mut out));
    for c in &chunks {
        assert_eq!(
            (c.page_count, c.error, c.error_at),
            (count_pass.page_count, count_pass.error, count_pass.error_at)
        );
    }
    assert_eq!(out[..n as usize], out[n as usize..]);
    if let Ok(pages) = r {
        assert_eq!(&out[..n as usize], &pages[..]);
    }
    // The walk that reads only headers, through reads that must stay inside the chunk.
    let sparse = sparse_walk(bytes).0;
    assert_eq!(sparse.pages.len() as u32, count_pass.page_count);
    assert_eq!((sparse.error, sparse.error_at), (count_pass.error, count_pass.error_at));
    assert_eq!(&sparse.pages[..], &out[..n as usize]);
    // One page too few: TooManyPages at the last page's header (where there is a page).
    if n > 0 {
        chunks[0].page_capacity = n - 1;
        chunks[1].page_capacity = n - 1;
        page_headers(&arena, &mut chunks, Some(&mut out));
        assert_eq!(chunks[0].error, ErrorCode::TooManyPages as u32);
        assert_eq!(chunks[0].page_count, n - 1);
        assert_eq!(chunks[0].error_at, out[n as usize - 1].header_offset);
    }
}

/// [`walk_headers_at`] over `bytes`, each read checked to lie inside them; also the bytes it read.
fn sparse_walk(bytes: &[u8]) -> (ChunkHeaders, u64) {
    let mut read = 0u64;
    let walked = walk_headers_at(bytes.len() as u64, |at, buf: &mut [u8]| {
        let from = usize::try_from(at).expect("offset");
        let to = from.checked_add(buf.len()).expect("end");
        assert!(
            to <= bytes.len(),
            "read {from}..{to} past the chunk's {} bytes",
            bytes.len()
        );
        buf.copy_from_slice(&bytes[from..to]);
        read += buf.len() as u64;
        Ok::<(), ()>(())
    });
    (walked.expect("reads never fail here"), read)
}

// ---- hand-built headers ----

#[test]
fn simple_chunk() {
    let mut w = W::new();
    dict_page(&mut w, 3, 12);
    next(&mut w);
    v1_page(&mut w, 10, 20);
    next(&mut w);
    v2_page(&mut w, None, 30, 4, 2);
    next(&mut w);
    v2_page(&mut w, Some(false), 0, 0, 0);
    next(&mut w);
    v2_page(&mut w, Some(true), 8, 8, 0);
    let pages = ok(&w.b);
    assert_eq!(pages.len(), 5);
    let d = &pages[0];
    assert_eq!(
        (d.page_type, d.num_values, d.encoding, d.compressed_size),
        (2, 3, 0, 12)
    );
    assert_eq!((d.header_offset, d.is_compressed), (0, 1));
    let v1 = &pages[1];
    assert_eq!(v1.header_offset, d.data_offset + 12);
    assert_eq!((v1.page_type, v1.num_values, v1.encoding), (0, 10, 8));
    assert_eq!(
        (v1.def_level_encoding, v1.rep_level_encoding, v1.uncompressed_size),
        (3, 4, 25)
    );
    assert_eq!((v1.num_nulls, v1.num_rows, v1.is_compressed), (0, 0, 1));
    let v2 = &pages[2];
    assert_eq!(
        (v2.page_type, v2.num_values, v2.num_nulls, v2.num_rows, v2.encoding),
        (3, 100, 7, 90, 8)
    );
    assert_eq!((v2.def_levels_byte_length, v2.rep_levels_byte_length), (4, 2));
    assert_eq!(
        (v2.is_compressed, v2.def_level_encoding),
        (1, 0),
        "absent is_compressed is 1"
    );
    assert_eq!(pages[3].is_compressed, 0);
    assert_eq!((pages[3].compressed_size, pages[4].is_compressed), (0, 1));
    assert!(ok(&[]).is_empty(), "an empty chunk has no pages");
}

/// Every Thrift type skipped where it is not wanted: at the top, in each sub-header, in statistics,
/// with explicit and delta field ids, lists of every element type, maps, and an index page.
#[test]
fn skips_every_type() {
    let mut w = W::new();
    w.field(20, T_TRUE).field(21, T_FALSE).field(22, T_BYTE).raw(&[0xff]);
    w.field(23, T_I16)
        .zz(-300)
        .field(24, T_I64)
        .zz(i64::MIN)
        .field(25, T_DOUBLE)
        .raw(&[1; 8]);
    w.field(26, T_BINARY)
        .varint(3)
        .raw(b"abc")
        .field(27, T_UUID)
        .raw(&[2; 16]);
    w.i32f(1, DATA_PAGE).i32f(2, 4).i32f(3, 4).i32f(4, 0x1234_5678);
    // A list of 20 i32 (long size form), a set of bools (both element codes, and 0), an empty list
    // written as a single 0, a list of lists, a list of structs.
    w.field(300, T_LIST).raw(&[0xf5]).varint(20);
    for i in 0..20 {
        w.zz(i);
    }
    w.field(301, T_SET).raw(&[0x31, 1, 2, 0]).field(302, T_LIST).raw(&[0]);
    w.field(303, T_LIST).raw(&[0x29, 0x15]).zz(5).raw(&[0x08]);
    w.field(304, T_LIST).raw(&[0x2c]);
    w.last.push(0);
    w.i32f(1, 1).field(2, T_BINARY).varint(0).end();
    w.last.push(0);
    w.end();
    // Maps: empty, and binary -> struct.
    w.field(305, T_MAP).varint(0).field(306, T_MAP).varint(2).raw(&[0x8c]);
    for k in [b"k1", b"k2"] {
        w.varint(2).raw(k);
        w.last.push(0);
        w.field(1, T_DOUBLE).raw(&[0; 8]).end();
    }
    // An index page header (an empty struct) beside the data page header: ignored for a v1 page.
    w.begin(6).field(1, T_I64).zz(9).end();
    // The data page header with statistics (a struct of binaries) and unknown fields.
    w.begin(5).i32f(2, 0).i32f(1, 7).i32f(3, 3).i32f(4, 3);
    w.begin(5)
        .field(1, T_BINARY)
        .varint(2)
        .raw(b"zz")
        .field(2, T_BINARY)
        .varint(1)
        .raw(b"a");
    w.field(3, T_I64).zz(0).field(7, T_TRUE).end();
    w.field(1000, T_STRUCT);
    w.last.push(0);
    w.field(-5, T_I32).zz(1).end();
    w.end();
    w.b.push(0);
    w.body(4);
    let pages = ok(&w.b);
    assert_eq!(pages.len(), 1);
    let p = pages[0];
    assert_eq!(
        (
            p.page_type,
            p.num_values,
            p.encoding,
            p.def_level_encoding,
            p.rep_level_encoding
        ),
        (0, 7, 0, 3, 3)
    );
    assert_eq!((p.compressed_size, p.uncompressed_size), (4, 4));
    assert_eq!(p.data_offset as usize, w.b.len() - 4);

    // A dictionary page's is_sorted and a v2 page's statistics are skipped too.
    let mut w = W::new();
    w.i32f(1, DATA_PAGE_V2).i32f(2, 0).i32f(3, 0);
    w.begin(8)
        .i32f(1, 1)
        .i32f(2, 0)
        .i32f(3, 1)
        .i32f(4, 0)
        .i32f(5, 0)
        .i32f(6, 0);
    w.begin(8).field(1, T_BINARY).varint(1).raw(b"x").end();
    w.field(9, T_FALSE).end();
    w.b.push(0);
    assert_eq!(ok(&w.b)[0].is_compressed, 1);
}

/// Index pages are walked over (num_values 0, encoding 0); parquet-rs skips them.
#[test]
fn index_page() {
    let mut w = W::new();
    w.i32f(1, INDEX_PAGE).i32f(2, 3).i32f(3, 3).begin(6).end();
    w.b.push(0);
    w.body(3);
    next(&mut w);
    v1_page(&mut w, 1, 1);
    let pages = ok(&w.b);
    assert_eq!((pages[0].page_type, pages[0].num_values, pages[1].page_type), (1, 0, 0));
}

/// A header nested `depth` deep (the `PageHeader` is depth 1) through unknown field 9: structs, or
/// lists of lists.
fn nested(depth: usize, lists: bool) -> Vec<u8> {
    let mut w = W::new();
    v1_open(&mut w, 1, 0);
    if lists {
        w.field(9, T_LIST);
        for _ in 2..depth {
            w.raw(&[0x19]);
        }
        w.raw(&[0x15]).zz(42);
    } else {
        w.field(9, T_STRUCT);
        for _ in 2..depth {
            w.raw(&[0x1c]);
        }
        w.raw(&[0x15]).zz(42);
        for _ in 2..=depth {
            w.b.push(0);
        }
    }
    w.b.push(0);
    w.b
}

#[test]
fn nesting_depth() {
    for lists in [false, true] {
        assert_eq!(ok(&nested(MAX_DEPTH as usize, lists)).len(), 1, "lists {lists}");
        let too_deep = nested(MAX_DEPTH as usize + 1, lists);
        assert_eq!(err(&too_deep), (ErrorCode::BadHeader, 0), "lists {lists}");
        // Far deeper than any stack: refused, not overflowed.
        assert_eq!(err(&nested(100_000, lists)), (ErrorCode::BadHeader, 0));
    }
    // Through a sub-header: its fields are at depth 3.
    let mut w = W::new();
    w.i32f(1, DATA_PAGE).i32f(2, 0).i32f(3, 0);
    w.begin(5)
        .i32f(1, 0)
        .i32f(2, 0)
        .i32f(3, 0)
        .i32f(4, 0)
        .field(9, T_STRUCT);
    for _ in 3..MAX_DEPTH {
        w.raw(&[0x1c]);
    }
    let ok_len = w.b.len();
    w.raw(&[0x1c]);
    let mut deep = w.b.clone();
    deep.extend(std::iter::repeat_n(0, MAX_DEPTH as usize + 1));
    assert_eq!(err(&deep), (ErrorCode::BadHeader, 0));
    let mut fine = w.b[..ok_len].to_vec();
    fine.extend(std::iter::repeat_n(0, MAX_DEPTH as usize));
    assert_eq!(ok(&fine).len(), 1);
}

#[test]
fn refused_headers() {
    let build = |f: &dyn Fn(&mut W)| {
        let mut w = W::new();
        f(&mut w);
        w.b
    };
    let bad = ErrorCode::BadHeader;
    // Missing required fields.
    let cases: Vec<(&str, Vec<u8>, ErrorCode)> = vec![
        (
            "no type",
            build(&|w| {
                w.i32f(2, 0)
                    .i32f(3, 0)
                    .begin(5)
                    .i32f(1, 0)
                    .i32f(2, 0)
                    .i32f(3, 0)
                    .i32f(4, 0)
                    .end()
                    .b
                    .push(0);
            }),
            bad,
        ),
        (
            "no compressed size",
            build(&|w| {
                w.i32f(1, 0)
                    .i32f(2, 0)
                    .begin(5)
                    .i32f(1, 0)
                    .i32f(2, 0)
                    .i32f(3, 0)
                    .i32f(4, 0)
                    .end()
                    .b
                    .push(0);
            }),
            bad,
        ),
        (
            "no sub-header",
            build(&|w| w.i32f(1, 0).i32f(2, 0).i32f(3, 0).b.push(0)),
            bad,
        ),
        (
            "wrong sub-header",
            build(&|w| {
                w.i32f(1, 0)
                    .i32f(2, 0)
                    .i32f(3, 0)
                    .begin(7)
                    .i32f(1, 0)
                    .i32f(2, 0)
                    .end()
                    .b
                    .push(0);
            }),
            bad,
        ),
        (
            "v1 without rep encoding",
            build(&|w| {
                w.i32f(1, 0)
                    .i32f(2, 0)
                    .i32f(3, 0)
                    .begin(5)
                    .i32f(1, 0)
                    .i32f(2, 0)
                    .i32f(3, 0)
                    .end()
                    .b
                    .push(0);
            }),
            bad,
        ),
        (
            "v2 without num_rows",
            build(&|w| {
                w.i32f(1, 3)
                    .i32f(2, 0)
                    .i32f(3, 0)
                    .begin(8)
                    .i32f(1, 0)
                    .i32f(2, 0)
                    .i32f(4, 0)
                    .i32f(5, 0)
                    .i32f(6, 0);
                w.end().b.push(0);
            }),
            bad,
        ),
        (
            "dictionary without encoding",
            build(&|w| w.i32f(1, 2).i32f(2, 0).i32f(3, 0).begin(7).i32f(1, 0).end().b.push(0)),
            bad,
        ),
        (
            "index page without its header",
            build(&|w| w.i32f(1, 1).i32f(2, 0).i32f(3, 0).b.push(0)),
            bad,
        ),
        (
            "unknown page type",
            build(&|w| {
                w.i32f(1, 4)
                    .i32f(2, 0)
                    .i32f(3, 0)
                    .begin(5)
                    .i32f(1, 0)
                    .i32f(2, 0)
                    .i32f(3, 0)
                    .i32f(4, 0)
                    .end()
                    .b
                    .push(0);
            }),
            bad,
        ),
        // Malformed Thrift.
        ("type nibble 14", vec![0x1e, 0], bad),
        (
            "list element type 0",
            build(&|w| w.field(9, T_LIST).raw(&[0x10]).b.push(0)),
            bad,
        ),
        (
            "map key type 15",
            build(&|w| w.field(9, T_MAP).varint(1).raw(&[0xf5]).b.push(0)),
            bad,
        ),
        (
            "bool element 3",
            build(&|w| w.field(9, T_LIST).raw(&[0x11, 3]).b.push(0)),
            bad,
        ),
        (
            "list size over i32",
            build(&|w| w.field(9, T_LIST).raw(&[0xf5]).varint(1 << 31).b.push(0)),
            bad,
        ),
        (
            "map size over i32",
            build(&|w| w.field(9, T_MAP).varint(1 << 31).raw(&[0x55]).b.push(0)),
            bad,
        ),
        (
            "varint over 10 bytes",
            build(&|w| w.field(9, T_I64).raw(&[0x80; 11]).b.push(0)),
            bad,
        ),
        (
            "field id over i16",
            build(&|w| w.raw(&[0x05]).zz(40_000).zz(1).b.push(0)),
            bad,
        ),
        (
            "delta past i16",
            build(&|w| w.raw(&[0x01]).zz(32_760).raw(&[0xf1, 0]).b.push(0)),
            bad,
        ),
        ("type as i64", build(&|w| w.field(1, T_I64).zz(0).b.push(0)), bad),
        (
            "size as binary",
            build(&|w| w.field(3, T_BINARY).varint(0).b.push(0)),
            bad,
        ),
        (
            "sub-header as list",
            build(&|w| w.field(5, T_LIST).raw(&[0]).b.push(0)),
            bad,
        ),
        (
            "i32 out of range",
            build(&|w| w.field(1, T_I32).zz(1 << 40).b.push(0)),
            bad,
        ),
        (
            "is_compressed as i32",
            build(&|w| w.i32f(1, 3).i32f(2, 0).i32f(3, 0).begin(8).i32f(7, 1).end().b.push(0)),
            bad,
        ),
        // Sizes.
        (
            "negative compressed size",
            build(&|w| {
                w.i32f(1, 0)
                    .i32f(2, 0)
                    .i32f(3, -1)
                    .begin(5)
                    .i32f(1, 0)
                    .i32f(2, 0)
                    .i32f(3, 0)
                    .i32f(4, 0)
                    .end()
                    .b
                    .push(0);
            }),
            ErrorCode::BadPageSize,
        ),
        (
            "negative num_values",
            build(&|w| {
                w.i32f(1, 0)
                    .i32f(2, 0)
                    .i32f(3, 0)
                    .begin(5)
                    .i32f(1, -3)
                    .i32f(2, 0)
                    .i32f(3, 0)
                    .i32f(4, 0)
                    .end()
                    .b
                    .push(0);
            }),
            ErrorCode::BadPageSize,
        ),
        (
            "v2 levels over the page",
            build(&|w| v2_page(w, None, 10, 6, 5)),
            ErrorCode::BadPageSize,
        ),
        (
            "v2 negative levels",
            build(&|w| v2_page(w, None, 10, -1, 0)),
            ErrorCode::BadPageSize,
        ),
        // Past the chunk.
        (
            "binary past the end",
            build(&|w| w.field(9, T_BINARY).varint(100).raw(&[0; 10]).b.push(0)),
            ErrorCode::HeaderPastChunk,
        ),
        ("no stop", build(&|w| v1_open(w, 1, 0)), ErrorCode::HeaderPastChunk),
        (
            "body past the end",
            build(&|w| {
                v1_page(w, 1, 10);
                w.b.pop();
            }),
            ErrorCode::PagePastChunk,
        ),
    ];
    for (what, bytes, want) in cases {
        assert_eq!(err(&bytes), (want, 0), "{what}");
    }

    // The error is at the failing header; the pages before it are counted.
    let mut w = W::new();
    v1_page(&mut w, 1, 3);
    next(&mut w);
    let second = w.b.len() as u64;
    v2_page(&mut w, None, 2, 3, 0);
    assert_eq!(err(&w.b), (ErrorCode::BadPageSize, second));
    let mut chunks = [ChunkDesc::default()];
    let mut arena = Arena::new();
    chunks[0].start = arena.upload(&w.b);
    chunks[0].len = w.b.len() as u64;
    page_headers(&arena, &mut chunks, None);
    assert_eq!(chunks[0].page_count, 1);

    // Trailing bytes after the last page are parsed as a header (zeros: a header with no fields).
    let mut w = W::new();
    v1_page(&mut w, 1, 3);
    let end = w.b.len() as u64;
    w.raw(&[0, 0]);
    assert_eq!(err(&w.b), (ErrorCode::BadHeader, end));

    // A chunk whose bytes are not in the arena is an error, not a panic.
    let arena = Arena::new();
    let mut chunks = [ChunkDesc {
        start: 12345,
        len: 10,
        ..ChunkDesc::default()
    }];
    page_headers(&arena, &mut chunks, None);
    assert_eq!(
        (chunks[0].error, chunks[0].error_at),
        (ErrorCode::HeaderPastChunk as u32, 0)
    );
}

// ---- parquet-rs's view of real files ----

/// The parquet-testing `data/` folder (`GPU_PARQUET_TESTING/data`, else `../shared/parquet-testing/data`
/// from the crate root), or `None` after printing why.
fn corpus_data() -> Option<PathBuf> {
    let roots = [
        std::env::var_os("GPU_PARQUET_TESTING").map(PathBuf::from),
        Some(Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/parquet-testing")),
    ];
    let found = roots.into_iter().flatten().map(|r| r.join("data")).find(|d| d.is_dir());
    if found.is_none() {
        crate::test_skip("the parquet-testing corpus: ../shared/parquet-testing/data not found");
    }
    found
}

/// The `.parquet` files directly in `dir`, sorted.
fn parquet_files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|rd| rd.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    v.retain(|p| p.is_file() && p.extension().is_some_and(|e| e == "parquet"));
    v.sort();
    v
}

/// One column chunk's bytes, in the range the crate reads it ([`ParquetSource::checked_chunks`]: from
/// the dictionary page where the chunk has a usable one, else the first data page; lengthened where an
/// old parquet-mr left the dictionary page header out of the size).
fn chunk_bytes(file: &Bytes, chunk: &CheckedChunk) -> Option<Bytes> {
    let end = chunk.offset.checked_add(chunk.len)?;
    (end <= file.len() as u64).then(|| file.slice(chunk.offset as usize..end as usize))
}

#[derive(Default, Debug)]
struct Tally {
    files: usize,
    files_skipped: Vec<String>,
    chunks: usize,
    chunks_skipped: Vec<String>,
    pages: usize,
}

/// Compares our pages of every chunk of `path` with parquet-rs's `SerializedPageReader`'s.
fn compare_file(path: &Path, tally: &mut Tally) {
    let name = path.file_name().unwrap_or_default().to_string_lossy().into_owned();
    let file = match std::fs::read(path) {
        Ok(b) => Bytes::from(b),
        Err(e) => return tally.files_skipped.push(format!("{name}: {e}")),
    };
    let source = match ParquetSource::open(path) {
        Ok(s) => s,
        Err(e) => return tally.files_skipped.push(format!("{name}: the crate refuses it: {e}")),
    };
    // What we make of a chunk parquet-rs cannot read (informational).
    let ours_of = |rg: usize, col: usize| match chunk_bytes(&file, &source.checked_chunks()[rg][col]) {
        Some(bytes) => match parse_pages(&bytes) {
            Ok(pages) => format!("we read {} pages", pages.len()),
            Err((code, at)) => format!("we refuse it: {code:?} at {at}"),
        },
        None => "its range is outside the file".to_string(),
    };
    let reader = match SerializedFileReader::new(file.clone()) {
        Ok(r) => r,
        Err(e) => {
            let meta = source.metadata();
            let ours: Vec<String> = (0..meta.num_row_groups())
                .flat_map(|rg| (0..meta.row_group(rg).num_columns()).map(move |col| (rg, col)))
                .map(|(rg, col)| format!("rg {rg} col {col}: {}", ours_of(rg, col)))
                .collect();
            let ours = ours.join("; ");
            return tally
                .files_skipped
                .push(format!("{name}: arrow-rs cannot open it ({e}); {ours}"));
        }
    };
    tally.files += 1;
    let meta = reader.metadata();
    for rg in 0..meta.num_row_groups() {
        let Ok(rg_reader) = reader.get_row_group(rg) else {
            tally
                .chunks_skipped
                .push(format!("{name} rg {rg}: row group unreadable"));
            continue;
        };
        let rg_meta = meta.row_group(rg);
        for col in 0..rg_meta.num_columns() {
            let what = format!("{name} rg {rg} col {col}");
            let cc = rg_meta.column(col);
            if cc.crypto_metadata().is_some() {
                tally.chunks_skipped.push(format!("{what}: encrypted"));
                continue;
            }
            // parquet-rs's pages; a chunk it cannot read is skipped.
            let theirs: Result<Vec<Page>, _> = rg_reader.get_column_page_reader(col).and_then(|mut pr| {
                let mut v = Vec::new();
                while let Some(p) = pr.get_next_page()? {
                    v.push(p);
                }
                Ok(v)
            });
            let theirs = match theirs {
                Ok(t) => t,
                Err(e) => {
                    let ours = ours_of(rg, col);
                    tally
                        .chunks_skipped
                        .push(format!("{what}: arrow-rs cannot read its pages ({e}); {ours}"));
                    continue;
                }
            };
            let Some(bytes) = chunk_bytes(&file, &source.checked_chunks()[rg][col]) else {
                tally
                    .chunks_skipped
                    .push(format!("{what}: chunk range outside the file"));
                continue;
            };
            let ours = parse_pages(&bytes).unwrap_or_else(|e| {
                panic!(
                    "{what}: we refuse a chunk arrow-rs reads: {e:?} (dictionary page offset {:?}, data page \
                     offset {}, {} bytes: {:02x?})",
                    cc.dictionary_page_offset(),
                    cc.data_page_offset(),
                    bytes.len(),
                    &bytes[..bytes.len().min(64)]
                )
            });
            check_consistent(&bytes, &Ok(ours.clone()));
            let ours: Vec<&PageInfo> = ours.iter().filter(|p| p.page_type != INDEX_PAGE).collect();
            assert_eq!(ours.len(), theirs.len(), "{what}: page count");
            let uncompressed = cc.compression() == Compression::UNCOMPRESSED;
            for (i, (o, t)) in ours.iter().zip(&theirs).enumerate() {
                let at = format!("{what} page {i}");
                let (buf, decompressed) = match t {
                    Page::DataPage {
                        buf,
                        num_values,
                        encoding,
                        def_level_encoding,
                        rep_level_encoding,
                        ..
                    } => {
                        assert_eq!(o.page_type, DATA_PAGE, "{at}");
                        assert_eq!(o.num_values as u32, *num_values, "{at}");
                        assert_eq!(o.encoding, *encoding as i32, "{at}");
                        assert_eq!(o.def_level_encoding, *def_level_encoding as i32, "{at}");
                        assert_eq!(o.rep_level_encoding, *rep_level_encoding as i32, "{at}");
                        (buf, !uncompressed)
                    }
                    Page::DataPageV2 {
                        buf,
                        num_values,
                        encoding,
                        num_nulls,
                        num_rows,
                        def_levels_byte_len,
                        rep_levels_byte_len,
                        is_compressed,
                        ..
                    } => {
                        assert_eq!(o.page_type, DATA_PAGE_V2, "{at}");
                        assert_eq!(o.num_values as u32, *num_values, "{at}");
                        assert_eq!(o.encoding, *encoding as i32, "{at}");
                        assert_eq!(o.num_nulls as u32, *num_nulls, "{at}");
                        assert_eq!(o.num_rows as u32, *num_rows, "{at}");
                        assert_eq!(o.def_levels_byte_length as u32, *def_levels_byte_len, "{at}");
                        assert_eq!(o.rep_levels_byte_length as u32, *rep_levels_byte_len, "{at}");
                        assert_eq!(o.is_compressed != 0, *is_compressed, "{at}");
                        (buf, !uncompressed && *is_compressed)
                    }
                    Page::DictionaryPage {
                        buf,
                        num_values,
                        encoding,
                        ..
                    } => {
                        assert_eq!(o.page_type, DICTIONARY_PAGE, "{at}");
                        assert_eq!(o.num_values as u32, *num_values, "{at}");
                        assert_eq!(o.encoding, *encoding as i32, "{at}");
                        (buf, !uncompressed)
                    }
                };
                // parquet-rs hands out the body as stored, or decompressed to the declared size.
                let want = if decompressed {
                    o.uncompressed_size
                } else {
                    o.compressed_size
                };
                assert_eq!(buf.len(), want as usize, "{at}: body length");
                // The body we point at is the bytes parquet-rs read, where it did not decompress them.
                if !decompressed {
                    let body = &bytes[o.data_offset as usize..][..o.compressed_size as usize];
                    assert_eq!(body, &buf[..], "{at}: body bytes");
                }
            }
            tally.chunks += 1;
            tally.pages += ours.len();
        }
    }
}

#[test]
fn matches_parquet_rs() {
    let testdata = Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata");
    let mut dirs = vec![testdata];
    dirs.extend(corpus_data());
    let mut tally = Tally::default();
    for dir in &dirs {
        for path in parquet_files(dir) {
            compare_file(&path, &mut tally);
        }
    }
    println!(
        "compared {} files, {} chunks, {} pages with parquet-rs",
        tally.files, tally.chunks, tally.pages
    );
    for s in tally.files_skipped.iter().chain(&tally.chunks_skipped) {
        println!("skipped {s}");
    }
    assert!(tally.files >= 4 && tally.chunks > 0, "{tally:?}");
}

// ---- hostile input ----

/// Some real chunks: every chunk of the crate's test files, and a few corpus chunks (v2 pages,
/// checksums, many small pages) where the corpus is present.
fn sample_chunks() -> Vec<(String, Bytes)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = parquet_files(&root.join("testdata"));
    if let Some(data) = corpus_data() {
        for f in [
            "datapage_v2.snappy.parquet",
            "datapage_v1-snappy-compressed-checksum.parquet",
            "alltypes_tiny_pages_plain.parquet",
            "delta_byte_array.parquet",
        ] {
            files.push(data.join(f));
        }
    }
    let mut out = Vec::new();
    for path in files {
        let Ok(b) = std::fs::read(&path) else { continue };
        let file = Bytes::from(b);
        let Ok(source) = ParquetSource::open(&path) else {
            continue;
        };
        let name = path.file_name().unwrap_or_default().to_string_lossy().into_owned();
        for (rg, row) in source.checked_chunks().iter().enumerate() {
            for (col, chunk) in row.iter().enumerate() {
                if let Some(bytes) = chunk_bytes(&file, chunk) {
                    out.push((format!("{name} rg {rg} col {col}"), bytes));
                }
            }
        }
    }
    out
}

/// A header longer than the first read (a 3,000-byte unknown binary field, as long statistics would
/// be) is read again with more bytes, and the walk reads far fewer bytes than the chunk holds on real
/// chunks of many pages.
#[test]
fn header_only_walk_reads_long_headers_again_and_skips_bodies() {
    let mut w = W::new();
    v1_open(&mut w, 10, 40_000);
    w.field(9, T_BINARY).varint(3_000).raw(&[7; 3_000]);
    w.b.push(0);
    w.body(40_000);
    next(&mut w);
    v1_page(&mut w, 10, 50_000);
    let pages = ok(&w.b);
    assert_eq!(pages.len(), 2);
    assert!(pages[0].header_len > 3_000);
    let (walked, read) = sparse_walk(&w.b);
    assert_eq!(walked.pages, pages);
    // 256, 1,024, then 4,096 bytes for the first header; 256 for the second.
    assert_eq!(read, 256 + 1_024 + 4_096 + 256);
    let mut real = 0;
    for (what, bytes) in sample_chunks() {
        let Ok(pages) = parse_pages(&bytes) else { continue };
        if pages.len() < 8 || pages.iter().any(|p| p.header_len > 256) {
            continue;
        }
        let (walked, read) = sparse_walk(&bytes);
        assert_eq!(walked.pages, pages, "{what}");
        assert!(
            read <= 256 * pages.len() as u64,
            "{what}: {read} bytes read for {} pages",
            pages.len()
        );
        real += 1;
    }
    // The project's own files have no chunk of 8 pages; the corpus's do (corpus_data printed why it
    // is missing, and the synthetic part above has run).
    if real == 0 && corpus_data().is_none() {
        return;
    }
    assert!(real > 0, "no sample chunk of 8 pages or more");
}

/// Every prefix of a real chunk: exactly the whole pages before the cut, then HeaderPastChunk (cut in
/// a header) or PagePastChunk (cut in a body) at the cut page's header.
#[test]
fn every_truncation() {
    let mut cuts = 0;
    for (what, bytes) in sample_chunks().iter().take(12) {
        let pages = parse_pages(bytes).unwrap_or_else(|e| panic!("{what}: {e:?}"));
        for len in 0..bytes.len() {
            let cut = &bytes[..len];
            let r = parse_pages(cut);
            let whole = pages
                .iter()
                .take_while(|p| p.data_offset + p.compressed_size as u64 <= len as u64)
                .count();
            match pages.get(whole) {
                Some(p) if p.header_offset < len as u64 => {
                    let want = if (len as u64) < p.data_offset {
                        ErrorCode::HeaderPastChunk
                    } else {
                        ErrorCode::PagePastChunk
                    };
                    assert_eq!(r, Err((want, p.header_offset)), "{what} cut at {len}");
                }
                _ => assert_eq!(r.as_deref(), Ok(&pages[..whole]), "{what} cut at {len}"),
            }
            cuts += 1;
        }
        // The arena form too, for a sample of cuts (it is slower).
        for len in (0..bytes.len()).step_by(97) {
            let cut = &bytes[..len];
            check_consistent(cut, &parse_pages(cut));
        }
    }
    println!("{cuts} truncations");
    assert!(cuts > 1000);
}

/// Arbitrary bytes, and real chunks with random bytes changed: a clear error or pages inside the
/// chunk, never a panic; the arena form agrees.
mod fuzz {
    use super::*;
    use std::sync::OnceLock;

    /// The sample chunks with their pages.
    fn samples() -> &'static [(Bytes, Vec<PageInfo>)] {
        static S: OnceLock<Vec<(Bytes, Vec<PageInfo>)>> = OnceLock::new();
        S.get_or_init(|| {
            sample_chunks()
                .into_iter()
                .filter_map(|(_, b)| Some((b.clone(), parse_pages(&b).ok()?)))
                .filter(|(b, pages)| !b.is_empty() && !pages.is_empty())
                .collect()
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(4000))]

        #[test]
        fn byte_flips(
            pick in any::<prop::sample::Index>(),
            flips in prop::collection::vec((any::<prop::sample::Index>(), any::<prop::sample::Index>(), 1u8..=255), 1..6),
        ) {
            let s = samples();
            prop_assume!(!s.is_empty());
            let (bytes, pages) = &s[pick.index(s.len())];
            let mut b = bytes.to_vec();
            // Half the flips land in a page header (any page's), half anywhere.
            for (page, at, x) in flips {
                let i = if x & 1 == 0 {
                    let p = &pages[page.index(pages.len())];
                    p.header_offset as usize + at.index(p.header_len as usize)
                } else {
                    at.index(b.len())
                };
                b[i] ^= x;
            }
            check_consistent(&b, &parse_pages(&b));
        }

        #[test]
        fn arbitrary_bytes(b in prop::collection::vec(any::<u8>(), 0..200)) {
            check_consistent(&b, &parse_pages(&b));
        }

        /// A valid header followed by random bytes: the header parses, then the rest is judged.
        #[test]
        fn valid_then_random(tail in prop::collection::vec(any::<u8>(), 0..64)) {
            let mut w = W::new();
            v1_page(&mut w, 5, 3);
            w.raw(&tail);
            check_consistent(&w.b, &parse_pages(&w.b));
        }
    }
}
