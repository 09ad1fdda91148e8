//! Tests of the core references ([`super::core`]): the hybrid decoder against hand-built RLE and
//! bit-packed runs (every width 0..=32), the whole pipeline on real pages written by arrow-rs and
//! parquet's low-level writer (v1 and v2 pages, dictionaries on and off, fallback mid-chunk, nulls,
//! every fixed-width physical type, BYTE_ARRAY) compared with arrow-rs's decoded arrays, the documented
//! error semantics, and hostile input (flips, truncations, absurd descriptor fields).

use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, AsArray, BinaryArray, BooleanArray, FixedSizeBinaryArray, Float32Array, Float64Array, Int32Array,
    Int64Array, StringArray,
};
use arrow::datatypes::{DataType, Field, Float32Type, Float64Type, Int32Type, Int64Type, Schema};
use arrow::record_batch::RecordBatch;
use bytes::Bytes;
use parquet::arrow::ArrowWriter;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::basic::Encoding;
use parquet::data_type::{Int96, Int96Type};
use parquet::file::properties::{WriterProperties, WriterVersion};
use parquet::file::writer::SerializedFileWriter;
use parquet::schema::parser::parse_message_type;
use parquet::schema::types::ColumnPath;
use proptest::prelude::*;

use super::Arena;
use super::core::*;
use super::delta::put_uleb;
use super::test_pages::{ColumnOut, Step, alloc_column, build_step, run_core};
use crate::decode::kernels::emu;
use crate::decode::layout::{
    ColumnDesc, DictDesc, DictEntry, ErrorCode, PageDesc, dictionary_values_direct, encoding as enc, physical as pt,
    view_flags,
};

// ---- a tiny deterministic generator ----

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        // splitmix64
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

// ---- hand-built hybrid streams ----

fn put_rle(out: &mut Vec<u8>, count: u64, value: u32, width: u32) {
    put_uleb(out, count << 1);
    for i in 0..width.div_ceil(8) {
        out.push((value >> (8 * i)) as u8);
    }
}

/// A bit-packed run of `vals` (a multiple of 8 values).
fn put_bitpacked(out: &mut Vec<u8>, vals: &[u32], width: u32) {
    assert_eq!(vals.len() % 8, 0);
    put_uleb(out, ((vals.len() / 8) as u64) << 1 | 1);
    let mut bits = vec![0u8; vals.len() / 8 * width as usize];
    for (i, &v) in vals.iter().enumerate() {
        for b in 0..width as usize {
            if (v >> b) & 1 == 1 {
                let at = i * width as usize + b;
                bits[at / 8] |= 1 << (at % 8);
            }
        }
    }
    out.extend_from_slice(&bits);
}

fn mask(width: u32) -> u32 {
    if width == 32 { u32::MAX } else { (1u32 << width) - 1 }
}

/// A stream of the given runs (rle?, length, seed) and every value it holds (bit-packed runs padded
/// to whole groups with random values), and how many of them are real (the last run's padding is not).
fn build_hybrid(width: u32, runs: &[(bool, usize, u64)]) -> (Vec<u8>, Vec<u32>, usize) {
    let (mut stream, mut values) = (Vec::new(), Vec::new());
    let mut real = 0;
    for &(rle, n, seed) in runs {
        let mut rng = Rng(seed);
        if rle {
            let v = rng.next() as u32 & mask(width);
            put_rle(&mut stream, n as u64, v, width);
            values.extend(std::iter::repeat_n(v, n));
            real = values.len();
        } else {
            let vals: Vec<u32> = (0..n.div_ceil(8) * 8)
                .map(|_| rng.next() as u32 & mask(width))
                .collect();
            put_bitpacked(&mut stream, &vals, width);
            real = values.len() + n;
            values.extend(vals);
        }
    }
    (stream, values, real)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Every width 0..=32, any mix of runs: the values come back, the whole stream is consumed, a
    /// shorter count reads a prefix, and every truncation is either a clean Overrun or still the same
    /// values (when only the last group's padding was cut), never a panic.
    #[test]
    fn hybrid_round_trip(
        width in 0u32..=32,
        runs in proptest::collection::vec((any::<bool>(), 1usize..80, any::<u64>()), 1..10),
        fewer in any::<u64>(),
    ) {
        let (stream, values, real) = build_hybrid(width, &runs);
        let (got, consumed) = decode_hybrid(&stream, width, real).expect("decodes");
        prop_assert_eq!(&got[..], &values[..real]);
        prop_assert_eq!(consumed, stream.len());
        let some = (fewer % (real as u64 + 1)) as usize;
        let (got, consumed) = decode_hybrid(&stream, width, some).expect("decodes a prefix");
        prop_assert_eq!(&got[..], &values[..some]);
        prop_assert!(consumed <= stream.len());
        for cut in 0..stream.len() {
            match decode_hybrid(&stream[..cut], width, real) {
                Ok((got, consumed)) => {
                    prop_assert_eq!(&got[..], &values[..real]);
                    prop_assert!(consumed <= cut);
                }
                Err(e) => prop_assert_eq!(e, ErrorCode::Overrun),
            }
        }
    }

    /// Arbitrary bytes never panic, at any width.
    #[test]
    fn hybrid_garbage(bytes in proptest::collection::vec(any::<u8>(), 0..64), width in 0u32..=40, count in 0usize..300) {
        match decode_hybrid(&bytes, width, count) {
            Ok((v, consumed)) => {
                prop_assert_eq!(v.len(), count);
                prop_assert!(consumed <= bytes.len());
            }
            Err(e) => prop_assert!(e == ErrorCode::Overrun || (e == ErrorCode::BadBitWidth && width > 32)),
        }
    }
}

/// Rows over `chars` cut at `cuts` (sorted, deduplicated, inside), as Arrow offsets.
fn cut_rows(chars: &[u8], cuts: &[usize]) -> Vec<i32> {
    let mut at: Vec<usize> = cuts.iter().map(|c| c % (chars.len() + 1)).collect();
    at.sort_unstable();
    let mut offsets = vec![0i32];
    offsets.extend(at.iter().map(|&c| c as i32));
    offsets.push(chars.len() as i32);
    offsets
}

fn all_rows_utf8(chars: &[u8], offsets: &[i32]) -> bool {
    offsets
        .windows(2)
        .all(|w| std::str::from_utf8(&chars[w[0] as usize..w[1] as usize]).is_ok())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2048))]

    /// Valid text cut into rows anywhere (mid-character too): the check fails exactly when some row
    /// is not UTF-8 by itself, as `std::str::from_utf8` (and so arrow-rs) says.
    #[test]
    fn utf8_check_agrees_with_std_on_cut_text(text in "\\PC{0,24}", cuts in proptest::collection::vec(any::<usize>(), 0..6)) {
        let chars = text.as_bytes();
        let offsets = cut_rows(chars, &cuts);
        let bad = validate_utf8(chars, &offsets);
        prop_assert_eq!(bad == u64::MAX, all_rows_utf8(chars, &offsets), "{:?} {:?} -> {}", chars, offsets, bad);
        prop_assert!(bad == u64::MAX || bad < chars.len() as u64);
    }

    /// Bytes near UTF-8's edges (continuations, lead bytes, C0/C1, E0/ED/F0/F4 neighbours, F5+).
    #[test]
    fn utf8_check_agrees_with_std_on_edge_bytes(
        chars in proptest::collection::vec(prop_oneof![
            0x00u8..0x80, 0x80u8..0xc0, 0xc0u8..0xc4, 0xdeu8..0xe2, 0xecu8..0xf5, 0xf3u8..=0xff,
        ], 0..16),
        cuts in proptest::collection::vec(any::<usize>(), 0..4),
    ) {
        let offsets = cut_rows(&chars, &cuts);
        let bad = validate_utf8(&chars, &offsets);
        prop_assert_eq!(bad == u64::MAX, all_rows_utf8(&chars, &offsets), "{:?} {:?} -> {}", chars, offsets, bad);
    }
}

#[test]
fn hybrid_edges() {
    assert_eq!(decode_hybrid(&[], 3, 0), Ok((vec![], 0)));
    assert_eq!(decode_hybrid(&[], 3, 1), Err(ErrorCode::Overrun));
    assert_eq!(decode_hybrid(&[2, 1], 33, 1), Err(ErrorCode::BadBitWidth));
    // A varint header of 11 bytes is refused.
    assert_eq!(decode_hybrid(&[0xff; 11], 1, 1), Err(ErrorCode::Overrun));
    // RLE of width 0: no value bytes.
    assert_eq!(decode_hybrid(&[6], 0, 3), Ok((vec![0, 0, 0], 1)));
    // A zero header (an RLE run of no values) ends the stream, as arrow-rs and Arrow C++ read it;
    // a bit-packed run of no groups is skipped.
    assert_eq!(decode_hybrid(&[0, 6], 0, 3), Err(ErrorCode::Overrun));
    assert_eq!(decode_hybrid(&[6, 0, 6], 0, 3), Ok((vec![0, 0, 0], 1)));
    assert_eq!(decode_hybrid(&[1, 6], 0, 3), Ok((vec![0, 0, 0], 2)));
    // RLE values are not masked to the width (as the GPU reads them).
    assert_eq!(decode_hybrid(&[4, 0xff], 1, 2), Ok((vec![255, 255], 2)));
    // An RLE value cut short.
    assert_eq!(decode_hybrid(&[4, 0x01], 9, 1), Err(ErrorCode::Overrun));
    // A bit-packed run declaring 2 groups with one byte of width-1 bits: 8 values, then Overrun.
    let s = [(2 << 1) | 1, 0b1010_0101];
    assert_eq!(decode_hybrid(&s, 1, 8), Ok((vec![1, 0, 1, 0, 0, 1, 0, 1], 2)));
    assert_eq!(decode_hybrid(&s, 1, 9), Err(ErrorCode::Overrun));
    // A huge declared run is clamped, not multiplied into an overflow.
    let mut h = Vec::new();
    put_uleb(&mut h, u64::MAX);
    assert_eq!(decode_hybrid(&h, 32, 1), Err(ErrorCode::Overrun));
    assert_eq!(decode_hybrid(&h, 0, 5).map(|(v, _)| v), Ok(vec![0; 5]));
}

// ---- real files ----

const ROWS: usize = 3000;

/// Leaf columns of [`sample_batch`], in order.
const NAMES: [&str; 12] = [
    "i32",
    "i64",
    "f32",
    "f64",
    "b",
    "b_req",
    "flba",
    "s",
    "bin",
    "i32_req",
    "sparse",
    "i64_lowcard",
];

/// Whether row `i` of a nullable column is null: stretches of all-null, all-present and mixed rows.
fn null_at(rng: &mut Rng, i: usize, column: u64) -> bool {
    let stretch = (i / 97) as u64 * 31 + column;
    match stretch % 5 {
        0 => true,
        1 | 2 => false,
        _ => rng.below(4) == 0,
    }
}

fn sample_batch() -> RecordBatch {
    let mut rng = Rng(7);
    let nulls = |c: u64| -> Vec<bool> {
        let mut r = Rng(100 + c);
        (0..ROWS).map(|i| null_at(&mut r, i, c)).collect()
    };
    let (n0, n1, n3, n4, n6, n7) = (nulls(0), nulls(1), nulls(3), nulls(4), nulls(6), nulls(7));
    let mut vals = |card: u64| -> Vec<u64> {
        (0..ROWS)
            .map(|_| if card == 0 { rng.next() } else { rng.below(card) })
            .collect()
    };
    let (v0, v1, v2, v3, v4, v5, v6, v7, v8, v9, v10, v11) = (
        vals(50),
        vals(0),
        vals(0),
        vals(20),
        vals(2),
        vals(2),
        vals(30),
        vals(0),
        vals(40),
        vals(0),
        vals(0),
        vals(5),
    );
    let opt = |n: &[bool], i: usize| !n[i];
    let i32s: Int32Array = (0..ROWS).map(|i| opt(&n0, i).then_some(v0[i] as i32 - 20)).collect();
    let i64s: Int64Array = (0..ROWS).map(|i| opt(&n1, i).then_some(v1[i] as i64)).collect();
    let f32s: Float32Array = (0..ROWS)
        .map(|i| Some(f32::from_bits(v2[i] as u32 & 0x7f7f_ffff)))
        .collect();
    let f64s: Float64Array = (0..ROWS)
        .map(|i| opt(&n3, i).then_some(v3[i] as f64 * 0.25 - 1.0))
        .collect();
    let bools: BooleanArray = (0..ROWS).map(|i| opt(&n4, i).then_some(v4[i] == 1)).collect();
    let bools_req: BooleanArray = (0..ROWS).map(|i| Some(v5[i] == 1 || i % 13 == 0)).collect();
    let flba = FixedSizeBinaryArray::try_from_sparse_iter_with_size(
        (0..ROWS).map(|i| opt(&n6, i).then(|| (v6[i] * 0x0001_0101_0101).to_le_bytes()[..5].to_vec())),
        5,
    )
    .expect("flba");
    let strings: StringArray = (0..ROWS)
        .map(|i| {
            opt(&n7, i).then(|| match v7[i] % 10 {
                0 => String::new(),
                1 => format!("a long string over thirty-two bytes, number {}", v7[i] % 1000),
                _ => format!("s{}", v7[i] % 300),
            })
        })
        .collect();
    let bins: BinaryArray = (0..ROWS)
        .map(|i| Some(vec![v8[i] as u8; (v8[i] % 7) as usize]))
        .collect();
    let i32_req: Int32Array = (0..ROWS).map(|i| Some(v9[i] as i32)).collect();
    let sparse: Int64Array = (0..ROWS)
        .map(|i| (i % 600 > 560 && v10[i] % 3 == 0).then_some(i as i64))
        .collect();
    let lowcard: Int64Array = (0..ROWS).map(|i| Some(v11[i] as i64 * 1_000_000_007)).collect();
    let arrays: Vec<ArrayRef> = vec![
        Arc::new(i32s),
        Arc::new(i64s),
        Arc::new(f32s),
        Arc::new(f64s),
        Arc::new(bools),
        Arc::new(bools_req),
        Arc::new(flba),
        Arc::new(strings),
        Arc::new(bins),
        Arc::new(i32_req),
        Arc::new(sparse),
        Arc::new(lowcard),
    ];
    let required = ["f32", "b_req", "bin", "i32_req", "i64_lowcard"];
    let fields: Vec<Field> = NAMES
        .iter()
        .zip(&arrays)
        .map(|(n, a)| Field::new(*n, a.data_type().clone(), !required.contains(n)))
        .collect();
    RecordBatch::try_new(Arc::new(Schema::new(fields)), arrays).expect("batch")
}

/// A way of writing the sample.
#[derive(Debug, Clone, Copy)]
struct Variant {
    v2: bool,
    dict: bool,
    /// A tiny dictionary page limit, so chunks fall back to PLAIN mid-way.
    small_dict: bool,
}

const VARIANTS: [Variant; 6] = [
    Variant {
        v2: false,
        dict: true,
        small_dict: false,
    },
    Variant {
        v2: false,
        dict: false,
        small_dict: false,
    },
    Variant {
        v2: false,
        dict: true,
        small_dict: true,
    },
    Variant {
        v2: true,
        dict: true,
        small_dict: false,
    },
    Variant {
        v2: true,
        dict: false,
        small_dict: false,
    },
    Variant {
        v2: true,
        dict: true,
        small_dict: true,
    },
];

fn props(v: Variant) -> WriterProperties {
    let mut p = WriterProperties::builder()
        .set_writer_version(if v.v2 {
            WriterVersion::PARQUET_2_0
        } else {
            WriterVersion::PARQUET_1_0
        })
        .set_dictionary_enabled(v.dict)
        .set_max_row_group_row_count(Some(1100))
        .set_write_batch_size(64)
        .set_data_page_row_count_limit(200);
    if v.small_dict {
        p = p.set_dictionary_page_size_limit(96);
    }
    if v.v2 {
        // v2's defaults are DELTA_* for integers and byte arrays (another decoder's); PLAIN here, RLE
        // for booleans.
        p = p
            .set_encoding(Encoding::PLAIN)
            .set_column_encoding(ColumnPath::from("b"), Encoding::RLE)
            .set_column_encoding(ColumnPath::from("b_req"), Encoding::RLE);
    }
    p.build()
}

fn write_sample(batch: &RecordBatch, v: Variant) -> Bytes {
    let mut buf = Vec::new();
    let mut w = ArrowWriter::try_new(&mut buf, batch.schema(), Some(props(v))).expect("writer");
    let mut off = 0;
    while off < batch.num_rows() {
        let n = 250.min(batch.num_rows() - off);
        w.write(&batch.slice(off, n)).expect("write");
        off += n;
    }
    w.close().expect("close");
    Bytes::from(buf)
}

fn arrow_read(file: &Bytes) -> RecordBatch {
    let reader = ParquetRecordBatchReaderBuilder::try_new(file.clone())
        .expect("arrow reader")
        .with_batch_size(BIG_ROWS * 2)
        .build()
        .expect("build");
    let batches: Vec<RecordBatch> = reader.map(|b| b.expect("batch")).collect();
    assert_eq!(batches.len(), 1);
    batches.into_iter().next().expect("one batch")
}

fn bit(words: &[u32], i: usize) -> bool {
    (words[i / 32] >> (i % 32)) & 1 == 1
}

/// Compares one column's pipeline output with arrow-rs's array.
fn compare(name: &str, array: &dyn Array, col: &ColumnDesc, out: &ColumnOut) {
    let n = array.len();
    assert_eq!(col.num_rows as usize, n, "{name}: rows");
    assert_eq!(col.error, 0, "{name}: column error");
    match (&out.valid, &out.valid_bits) {
        (Some(valid), Some((words, set))) => {
            assert_eq!(valid.len(), n, "{name}: validity bytes");
            for (i, &v) in valid.iter().enumerate() {
                assert_eq!(v == 1, array.is_valid(i), "{name}: validity of row {i}");
                assert_eq!(bit(words, i), array.is_valid(i), "{name}: validity bit of row {i}");
            }
            assert_eq!(*set as usize, n - array.null_count(), "{name}: set bits");
            for i in n..words.len() * 32 {
                assert!(!bit(words, i), "{name}: tail bit {i}");
            }
        }
        _ => assert_eq!(array.null_count(), 0, "{name}: a required column without validity"),
    }
    let fixed = |w: usize, bytes: &dyn Fn(usize) -> Vec<u8>| {
        assert_eq!(col.out_width as usize, w, "{name}: width");
        for i in 0..n {
            let got = &out.values[i * w..(i + 1) * w];
            if array.is_valid(i) {
                assert_eq!(got, &bytes(i)[..], "{name}: row {i}");
            } else {
                assert!(got.iter().all(|&b| b == 0), "{name}: null row {i} not zeroed");
            }
        }
    };
    match array.data_type() {
        DataType::Int32 => fixed(4, &|i| {
            array.as_primitive::<Int32Type>().value(i).to_le_bytes().to_vec()
        }),
        DataType::Int64 => fixed(8, &|i| {
            array.as_primitive::<Int64Type>().value(i).to_le_bytes().to_vec()
        }),
        DataType::Float32 => fixed(4, &|i| {
            array.as_primitive::<Float32Type>().value(i).to_le_bytes().to_vec()
        }),
        DataType::Float64 => fixed(8, &|i| {
            array.as_primitive::<Float64Type>().value(i).to_le_bytes().to_vec()
        }),
        DataType::FixedSizeBinary(w) => fixed(*w as usize, &|i| array.as_fixed_size_binary().value(i).to_vec()),
        DataType::Boolean => {
            let b = array.as_boolean();
            fixed(1, &|i| vec![u8::from(b.value(i))]);
            let (words, set) = out.value_bits.as_ref().expect("boolean bits");
            let mut want = 0;
            for i in 0..n {
                if array.is_valid(i) {
                    assert_eq!(bit(words, i), b.value(i), "{name}: value bit {i}");
                    want += u64::from(b.value(i));
                }
            }
            assert_eq!(*set, want, "{name}: true values");
        }
        DataType::Utf8 | DataType::Binary => {
            let wide = |o: &[i32]| o.iter().map(|&o| i64::from(o)).collect::<Vec<i64>>();
            let (offsets, data): (Vec<i64>, &[u8]) = match array.data_type() {
                DataType::Utf8 => {
                    let s = array.as_string::<i32>();
                    (wide(s.value_offsets()), s.value_data())
                }
                _ => {
                    let s = array.as_binary::<i32>();
                    (wide(s.value_offsets()), s.value_data())
                }
            };
            assert_eq!(out.offsets.as_deref(), Some(&offsets[..]), "{name}: offsets");
            let last = offsets[n] as usize;
            assert_eq!(col.chars_capacity as usize, last, "{name}: chars");
            assert_eq!(out.values, data[offsets[0] as usize..last], "{name}: characters");
            // The views copy_strings wrote: arrow's, over those characters.
            if let Some((views, longest)) = &out.views {
                let mut want_longest = 0;
                for i in 0..n {
                    let (s, e) = (offsets[i] as usize, offsets[i + 1] as usize);
                    let o = (s - offsets[0] as usize) as u64;
                    let (buffer, offset) = match col.view_segment {
                        0 => (0, o),
                        seg => (o / seg, o % seg),
                    };
                    let want = match array.is_valid(i) {
                        true => {
                            crate::decode::host_kernels::convert::view_in(&data[s..e], buffer as u32, offset as u32)
                        }
                        false => [0; 16],
                    };
                    assert_eq!(&views[i * 16..(i + 1) * 16], &want, "{name}: view of row {i}");
                    want_longest = want_longest.max(e - s);
                }
                assert_eq!(*longest as usize, want_longest, "{name}: longest view");
            }
        }
        other => panic!("{name}: unexpected type {other}"),
    }
}

/// Every page of `step` decoded without an error.
fn assert_no_errors(step: &Step, what: &str) {
    for (p, pg) in step.pages.iter().enumerate() {
        assert_eq!(
            (pg.error, pg.error_detail),
            (0, 0),
            "{what}: page {p} (column {}, encoding {}) failed: {:?}",
            pg.column,
            pg.encoding,
            ErrorCode::from_u32(pg.error)
        );
    }
    for d in &step.dicts {
        assert_eq!(d.error, 0, "{what}: dictionary");
    }
}

#[test]
fn pipeline_matches_arrow_rs() {
    let batch = sample_batch();
    let leaves: Vec<usize> = (0..NAMES.len()).collect();
    let mut seen = std::collections::BTreeSet::new();
    for v in VARIANTS {
        for relabel in [false, true] {
            if relabel && (v.v2 || !v.dict) {
                continue;
            }
            let file = write_sample(&batch, v);
            let expected = arrow_read(&file);
            let mut step = build_step(&file, &leaves);
            if relabel {
                // v1 writers other than arrow-rs label dictionary pages PLAIN_DICTIONARY: same bytes.
                for pg in step.pages.iter_mut().filter(|p| p.encoding == enc::RLE_DICTIONARY) {
                    pg.encoding = enc::PLAIN_DICTIONARY;
                }
            }
            for pg in &step.pages {
                seen.insert((pg.physical, pg.encoding, v.v2));
            }
            let what = format!("{v:?} relabel {relabel}");
            let per_column = step.pages.iter().filter(|p| p.column == 0).count();
            assert!(
                per_column >= 10,
                "{what}: {per_column} pages: too few to test page boundaries"
            );
            let outs = run_core(&mut step);
            assert_no_errors(&step, &what);
            for (c, name) in NAMES.iter().enumerate() {
                compare(
                    &format!("{what} {name}"),
                    expected.column(c).as_ref(),
                    &step.cols[c],
                    &outs[c],
                );
            }
        }
    }
    // The variants did reach every decoder.
    for want in [
        (pt::INT32, enc::RLE_DICTIONARY, false),
        (pt::INT32, enc::PLAIN_DICTIONARY, false),
        (pt::INT64, enc::PLAIN, true),
        (pt::BOOLEAN, enc::PLAIN, false),
        (pt::BOOLEAN, enc::RLE, true),
        (pt::BYTE_ARRAY, enc::RLE_DICTIONARY, true),
        (pt::BYTE_ARRAY, enc::PLAIN, true),
        (pt::BYTE_ARRAY, enc::PLAIN, false),
        (pt::FIXED_LEN_BYTE_ARRAY, enc::RLE_DICTIONARY, false),
        (pt::FIXED_LEN_BYTE_ARRAY, enc::PLAIN, true),
        (pt::DOUBLE, enc::RLE_DICTIONARY, true),
        (pt::FLOAT, enc::PLAIN, false),
    ] {
        assert!(seen.contains(&want), "no page of {want:?} was tested");
    }
}

const BIG_ROWS: usize = 20_000;

/// Large pages: several hybrid windows per page, windows cut by the run limit (runs of 8 nulls and 8
/// values), a nullable column without nulls (the vectorised copy from an unaligned v1 value stream),
/// plain strings spanning many staging chunks and some longer than two chunks, a dictionary of more
/// than 1024 strings, 16-byte FLBA, bit-packed booleans over many bytes.
fn big_batch() -> RecordBatch {
    let mut rng = Rng(2024);
    let dense: Int64Array = (0..BIG_ROWS).map(|_| Some(rng.next() as i64)).collect();
    let runs: Int32Array = (0..BIG_ROWS).map(|i| ((i / 8) % 2 == 0).then_some(i as i32)).collect();
    let sparse: Float64Array = (0..BIG_ROWS)
        .map(|_| (rng.below(3) != 0).then(|| rng.next() as f64))
        .collect();
    let plain: StringArray = (0..BIG_ROWS)
        .map(|i| {
            (rng.below(7) != 0).then(|| match rng.below(500) {
                0 => "L".repeat(9000 + i % 50),
                1..=20 => "m".repeat(40 + i % 30),
                _ => format!("v{}", rng.next() % 100_000_000),
            })
        })
        .collect();
    let dict: StringArray = (0..BIG_ROWS)
        .map(|_| Some(format!("entry-{}", rng.below(3000))))
        .collect();
    let bools: BooleanArray = (0..BIG_ROWS).map(|_| Some(rng.below(2) == 1)).collect();
    let flba = FixedSizeBinaryArray::try_from_iter((0..BIG_ROWS).map(|_| {
        let (a, b) = (rng.next(), rng.next());
        [a.to_le_bytes(), b.to_le_bytes()].concat()
    }))
    .expect("flba");
    let arrays: Vec<ArrayRef> = vec![
        Arc::new(dense),
        Arc::new(runs),
        Arc::new(sparse),
        Arc::new(plain),
        Arc::new(dict),
        Arc::new(bools),
        Arc::new(flba),
    ];
    let names = ["dense", "runs", "sparse", "plain", "dict", "bools", "flba"];
    let fields: Vec<Field> = names
        .iter()
        .zip(&arrays)
        .map(|(n, a)| Field::new(*n, a.data_type().clone(), !["dict", "bools", "flba"].contains(n)))
        .collect();
    RecordBatch::try_new(Arc::new(Schema::new(fields)), arrays).expect("batch")
}

fn write_big(batch: &RecordBatch, v2: bool) -> Bytes {
    let mut p = WriterProperties::builder()
        .set_writer_version(if v2 {
            WriterVersion::PARQUET_2_0
        } else {
            WriterVersion::PARQUET_1_0
        })
        .set_data_page_row_count_limit(BIG_ROWS)
        .set_write_batch_size(1024)
        .set_dictionary_enabled(false)
        .set_column_dictionary_enabled(ColumnPath::from("dict"), true)
        .set_column_dictionary_enabled(ColumnPath::from("runs"), true);
    if v2 {
        p = p
            .set_encoding(Encoding::PLAIN)
            .set_column_encoding(ColumnPath::from("bools"), Encoding::RLE);
    }
    let mut buf = Vec::new();
    let mut w = ArrowWriter::try_new(&mut buf, batch.schema(), Some(p.build())).expect("writer");
    w.write(batch).expect("write");
    w.close().expect("close");
    Bytes::from(buf)
}

#[test]
fn pipeline_matches_arrow_rs_on_large_pages() {
    let batch = big_batch();
    for v2 in [false, true] {
        let file = write_big(&batch, v2);
        let expected = arrow_read(&file);
        let mut step = build_step(&file, &(0..7).collect::<Vec<_>>());
        assert!(
            step.pages.iter().any(|p| p.num_values as usize > 4 * 2048),
            "pages too small"
        );
        let outs = run_core(&mut step);
        assert_no_errors(&step, "large pages");
        for (c, (col, out)) in step.cols.iter().zip(&outs).enumerate() {
            compare(
                &format!("large v2 {v2} column {c}"),
                expected.column(c).as_ref(),
                col,
                out,
            );
        }
    }
}

/// INT96 (only parquet's low-level writer writes it; arrow-rs reads it as timestamps, so the values
/// are compared with what was written).
#[test]
fn int96_pipeline() {
    let schema = Arc::new(parse_message_type("message m { optional int96 x; required int96 y; }").expect("schema"));
    let mut rng = Rng(96);
    let rows = 1500usize;
    let defs: Vec<i16> = (0..rows).map(|i| i16::from(!null_at(&mut rng, i, 1))).collect();
    let value = |rng: &mut Rng, card: u64| {
        let mut v = Int96::new();
        let x = rng.below(card);
        v.set_data(x as u32, (x >> 3) as u32 ^ 0xdead_beef, (x as u32).wrapping_mul(7));
        v
    };
    let a: Vec<Int96> = defs.iter().filter(|&&d| d == 1).map(|_| value(&mut rng, 40)).collect();
    let b: Vec<Int96> = (0..rows).map(|_| value(&mut rng, u64::MAX)).collect();
    for v in VARIANTS {
        let mut buf = Vec::new();
        let mut w = SerializedFileWriter::new(&mut buf, schema.clone(), Arc::new(props(v))).expect("writer");
        for chunk in 0..2 {
            let rows = chunk * rows / 2..(chunk + 1) * rows / 2;
            let before = defs[..rows.start].iter().filter(|&&d| d == 1).count();
            let present = defs[rows.clone()].iter().filter(|&&d| d == 1).count();
            let mut rg = w.next_row_group().expect("row group");
            let mut col = rg.next_column().expect("column").expect("x");
            col.typed::<Int96Type>()
                .write_batch(&a[before..before + present], Some(&defs[rows.clone()]), None)
                .expect("write a");
            col.close().expect("close a");
            let mut col = rg.next_column().expect("column").expect("y");
            col.typed::<Int96Type>()
                .write_batch(&b[rows], None, None)
                .expect("write b");
            col.close().expect("close b");
            rg.close().expect("close row group");
        }
        w.close().expect("close");
        let mut step = build_step(&Bytes::from(buf), &[0, 1]);
        let outs = run_core(&mut step);
        let what = format!("INT96 {v:?}");
        assert_no_errors(&step, &what);
        if v.dict {
            assert!(
                step.pages.iter().any(|p| p.encoding == enc::RLE_DICTIONARY),
                "{what}: no dictionary"
            );
        }
        let bytes = |x: &Int96| x.data().iter().flat_map(|w| w.to_le_bytes()).collect::<Vec<u8>>();
        let mut k = 0;
        for i in 0..rows {
            let got = &outs[0].values[i * 12..(i + 1) * 12];
            assert_eq!(
                outs[0].valid.as_ref().expect("valid")[i],
                defs[i] as u8,
                "{what}: a valid {i}"
            );
            if defs[i] == 1 {
                assert_eq!(got, &bytes(&a[k])[..], "{what}: a row {i}");
                k += 1;
            } else {
                assert_eq!(got, &[0u8; 12], "{what}: a null {i}");
            }
            assert_eq!(
                &outs[1].values[i * 12..(i + 1) * 12],
                &bytes(&b[i])[..],
                "{what}: b row {i}"
            );
        }
    }
}

// ---- error semantics ----

/// A step of one column and one page, built by hand.
fn one_page(physical: u32, type_len: u32, rows: u32, max_def: u32) -> (Arena, PageDesc, ColumnDesc) {
    let mut a = Arena::new();
    let n = u64::from(rows);
    let dense_width = type_len.max(4);
    let byte_array = physical == pt::BYTE_ARRAY;
    let col = ColumnDesc {
        num_rows: n,
        vidx: if max_def > 0 { a.alloc(rows as usize * 4) } else { 0 },
        dense: a.alloc((n * u64::from(dense_width)) as usize),
        dense_width,
        out_width: if byte_array { 0 } else { type_len },
        out_values: if byte_array {
            0
        } else {
            a.alloc((n * u64::from(type_len)) as usize)
        },
        out_valid: if max_def > 0 { a.alloc(rows as usize) } else { 0 },
        out_offsets: if byte_array { a.alloc(rows as usize * 4 + 4) } else { 0 },
        str_src: if byte_array { a.alloc(rows as usize * 8) } else { 0 },
        str_len: if byte_array { a.alloc(rows as usize * 4) } else { 0 },
        physical,
        ..ColumnDesc::default()
    };
    let page = PageDesc {
        num_values: rows,
        physical,
        type_len,
        max_def,
        def_bit_width: 32 - max_def.leading_zeros(),
        ..PageDesc::default()
    };
    (a, page, col)
}

fn error_of(p: &PageDesc) -> (Option<ErrorCode>, u32) {
    (ErrorCode::from_u32(p.error), p.error_detail)
}

#[test]
fn levels_stop_at_the_first_problem() {
    // Levels 1,0,1,1 then a 2 (> max_def 1) at index 4, then more.
    let (mut a, mut pg, col) = one_page(pt::INT32, 4, 8, 1);
    let mut s = Vec::new();
    put_bitpacked(&mut s, &[1, 0, 1, 1, 2, 1, 1, 1], 2);
    pg.levels = a.upload(&s);
    pg.levels_len = s.len() as u64;
    pg.def_bit_width = 2;
    let mut pages = [pg];
    levels(&mut a, &mut pages, &[col]);
    assert_eq!(error_of(&pages[0]), (Some(ErrorCode::BadLevel), 4));
    assert_eq!(pages[0].num_non_null, 3);
    assert_eq!(a.read::<i32>(col.vidx, 8), Some(vec![0, -1, 1, 2, 0, 0, 0, 0]));
    assert_eq!(a.get(col.out_valid, 8), Some(&[1u8, 0, 1, 1, 0, 0, 0, 0][..]));

    // A stream that ends after 5 levels: Overrun at 5, the 5 written.
    let (mut a, mut pg, col) = one_page(pt::INT32, 4, 1_000_000, 1);
    let mut s = Vec::new();
    put_rle(&mut s, 3, 1, 1);
    put_rle(&mut s, 2, 0, 1);
    pg.levels = a.upload(&s);
    pg.levels_len = s.len() as u64;
    let mut pages = [pg];
    levels(&mut a, &mut pages, &[col]);
    assert_eq!(error_of(&pages[0]), (Some(ErrorCode::Overrun), 5));
    assert_eq!(pages[0].num_non_null, 3);
    assert_eq!(a.read::<i32>(col.vidx, 6), Some(vec![0, 1, 2, -1, -1, 0]));

    // Width over 8.
    let (mut a, mut pg, col) = one_page(pt::INT32, 4, 8, 1);
    pg.def_bit_width = 9;
    let mut pages = [pg];
    levels(&mut a, &mut pages, &[col]);
    assert_eq!(error_of(&pages[0]), (Some(ErrorCode::BadBitWidth), 9));

    // Rows outside the column.
    let (mut a, mut pg, col) = one_page(pt::INT32, 4, 8, 1);
    pg.row_start = 1;
    let mut pages = [pg];
    levels(&mut a, &mut pages, &[col]);
    assert_eq!(error_of(&pages[0]).0, Some(ErrorCode::BadPageSize));
}

#[test]
fn v1_prefix_checked() {
    let mut a = Arena::new();
    let body = [9u8, 0, 0, 0, 1, 2, 3];
    let data = a.upload(&body);
    let mk = |len| PageDesc {
        data,
        data_len: len,
        flags: crate::decode::layout::PAGE_V1_LEVELS,
        ..PageDesc::default()
    };
    let mut pages = [mk(7), mk(3), mk(13)];
    page_setup(&mut a, &mut pages);
    assert_eq!(error_of(&pages[0]), (Some(ErrorCode::Overrun), 9));
    assert_eq!(error_of(&pages[1]), (Some(ErrorCode::Overrun), 0));
    // 13 bytes claimed, 7 in the arena: the prefix is still read, then the split is only addresses.
    assert_eq!(error_of(&pages[2]), (None, 0));
    assert_eq!(
        (
            pages[2].levels,
            pages[2].levels_len,
            pages[2].values,
            pages[2].values_len
        ),
        (data + 4, 9, data + 13, 0)
    );
}

#[test]
fn dictionary_indices_and_gather() {
    // 6 rows, nulls at 1 and 4; 4 present values with indices 0, 2, 1, 5 of a 3-entry INT32 dictionary.
    let (mut a, mut pg, col) = one_page(pt::INT32, 4, 6, 1);
    let mut lv = Vec::new();
    put_bitpacked(&mut lv, &[1, 0, 1, 1, 0, 1, 0, 0], 1);
    pg.levels = a.upload(&lv);
    pg.levels_len = lv.len() as u64;
    let mut vals = vec![3u8];
    put_bitpacked(&mut vals, &[0, 2, 1, 5, 0, 0, 0, 0], 3);
    pg.values = a.upload(&vals);
    pg.values_len = vals.len() as u64;
    pg.encoding = enc::RLE_DICTIONARY;
    pg.dict = a.upload_slice(&[10i32, 20, 30]);
    pg.dict_len = 12;
    pg.dict_count = 3;
    let cols = [col];

    // Index 5 at k = 3 is out of range: the three before it are written.
    let mut pages = [pg];
    levels(&mut a, &mut pages, &cols);
    assert_eq!(pages[0].num_non_null, 4);
    dict_indices(&mut a, &mut pages, &cols);
    assert_eq!(error_of(&pages[0]), (Some(ErrorCode::DictIndexOutOfRange), 3));
    assert_eq!(a.read::<u32>(col.dense, 4), Some(vec![0, 2, 1, 0]));
    gather_fixed(&mut a, &mut pages, &cols);
    assert_eq!(
        a.read::<i32>(col.out_values, 6),
        Some(vec![0; 6]),
        "a page in error is skipped"
    );

    // With 6 entries counted but a 3-entry body, the gather fails at k = 3 and writes every other row.
    let mut pg2 = pg;
    pg2.dict_count = 6;
    let mut pages = [pg2];
    levels(&mut a, &mut pages, &cols);
    dict_indices(&mut a, &mut pages, &cols);
    assert_eq!(error_of(&pages[0]), (None, 0));
    gather_fixed(&mut a, &mut pages, &cols);
    assert_eq!(error_of(&pages[0]), (Some(ErrorCode::Overrun), 3));
    assert_eq!(a.read::<i32>(col.out_values, 6), Some(vec![10, 0, 30, 20, 0, 0]));

    // No dictionary.
    let mut pg3 = pg;
    pg3.dict = 0;
    let mut pages = [pg3];
    levels(&mut a, &mut pages, &cols);
    dict_indices(&mut a, &mut pages, &cols);
    assert_eq!(error_of(&pages[0]).0, Some(ErrorCode::MissingDictionary));

    // A bit width over 32.
    let mut pg4 = pg;
    let mut bad = vals.clone();
    bad[0] = 33;
    pg4.values = a.upload(&bad);
    let mut pages = [pg4];
    levels(&mut a, &mut pages, &cols);
    dict_indices(&mut a, &mut pages, &cols);
    assert_eq!(error_of(&pages[0]), (Some(ErrorCode::BadBitWidth), 33));
}

#[test]
fn dictionary_values_go_straight_to_fully_present_rows() {
    // A required INT64 page of 5 rows over a 3-entry dictionary: gp_dict_indices writes the values
    // themselves, dense keeps its poison, and the gather leaves the rows as they are.
    let (mut a, mut pg, col) = one_page(pt::INT64, 8, 5, 0);
    let mut vals = vec![2u8];
    put_bitpacked(&mut vals, &[2, 0, 1, 2, 1, 0, 0, 0], 2);
    pg.values = a.upload(&vals);
    pg.values_len = vals.len() as u64;
    pg.encoding = enc::RLE_DICTIONARY;
    pg.dict = a.upload_slice(&[-7i64, 11, 1 << 40]);
    pg.dict_len = 24;
    pg.dict_count = 3;
    assert!(a.write(col.dense, &[0xA5u8; 40]));
    let cols = [col];
    let mut pages = [pg];
    levels(&mut a, &mut pages, &cols);
    assert!(dictionary_values_direct(&pages[0], &col));
    dict_indices(&mut a, &mut pages, &cols);
    assert_eq!(error_of(&pages[0]), (None, 0));
    let want = vec![1i64 << 40, -7, 11, 1 << 40, 11];
    assert_eq!(a.read::<i64>(col.out_values, 5), Some(want.clone()));
    assert_eq!(
        a.get(col.dense, 40),
        Some(&[0xA5u8; 40][..]),
        "no index went through dense"
    );
    assert!(a.write(col.out_values + 8, &[0u8; 8]));
    gather_fixed(&mut a, &mut pages, &cols);
    assert_eq!(
        a.read::<i64>(col.out_values, 2),
        Some(vec![1 << 40, 0]),
        "the gather skips the page"
    );

    // A bad index at k = 3: the rows before it hold their values, the page fails there.
    let mut bad = vec![2u8];
    put_bitpacked(&mut bad, &[2, 0, 1, 3, 1, 0, 0, 0], 2);
    let mut pg2 = pg;
    pg2.values = a.upload(&bad);
    let mut pages = [pg2];
    levels(&mut a, &mut pages, &cols);
    dict_indices(&mut a, &mut pages, &cols);
    assert_eq!(error_of(&pages[0]), (Some(ErrorCode::DictIndexOutOfRange), 3));
    assert_eq!(a.read::<i64>(col.out_values, 3), Some(want[..3].to_vec()));

    // Not direct: a dictionary shorter than its entries (the gather then names the value past it),
    // a null row, or 12-byte values.
    let mut short = pg;
    short.dict_len = 16;
    assert!(!dictionary_values_direct(&short, &col));
    let (_, nullable, ncol) = one_page(pt::INT64, 8, 5, 1);
    let mut nullable = PageDesc {
        num_non_null: 4,
        encoding: enc::RLE_DICTIONARY,
        dict: pg.dict,
        ..nullable
    };
    nullable.dict_len = 24;
    nullable.dict_count = 3;
    assert!(!dictionary_values_direct(&nullable, &ncol));
    nullable.num_non_null = 5;
    assert!(dictionary_values_direct(&nullable, &ncol), "every row present");
    let (_, int96, icol) = one_page(pt::INT96, 12, 5, 0);
    let int96 = PageDesc {
        num_non_null: 5,
        encoding: enc::RLE_DICTIONARY,
        dict: pg.dict,
        dict_len: 36,
        dict_count: 3,
        ..int96
    };
    assert!(!dictionary_values_direct(&int96, &icol));
}

#[test]
fn gather_plain_short_page_and_bad_encoding() {
    // Required INT64, 5 rows, 3 values present in the stream: rows 0..3 written, Overrun at k = 3.
    let (mut a, mut pg, col) = one_page(pt::INT64, 8, 5, 0);
    pg.values = a.upload_slice(&[7i64, 8, 9]);
    pg.values_len = 24;
    let cols = [col];
    let mut pages = [pg];
    levels(&mut a, &mut pages, &cols);
    gather_fixed(&mut a, &mut pages, &cols);
    assert_eq!(error_of(&pages[0]), (Some(ErrorCode::Overrun), 3));
    assert_eq!(a.read::<i64>(col.out_values, 5), Some(vec![7, 8, 9, 0, 0]));

    // BOOLEAN PLAIN bits; DELTA is not an encoding for booleans.
    let (mut a, mut pg, col) = one_page(pt::BOOLEAN, 1, 10, 0);
    pg.values = a.upload(&[0b1000_0101, 0b10]);
    pg.values_len = 2;
    let cols = [col];
    let mut pages = [pg];
    levels(&mut a, &mut pages, &cols);
    gather_fixed(&mut a, &mut pages, &cols);
    assert_eq!(error_of(&pages[0]), (None, 0));
    assert_eq!(a.get(col.out_values, 10), Some(&[1u8, 0, 1, 0, 0, 0, 0, 1, 0, 1][..]));
    let mut pg2 = pg;
    pg2.encoding = enc::DELTA_BINARY_PACKED;
    let mut pages = [pg2];
    gather_fixed(&mut a, &mut pages, &cols);
    assert_eq!(
        error_of(&pages[0]),
        (Some(ErrorCode::BadEncoding), enc::DELTA_BINARY_PACKED)
    );
}

#[test]
fn byte_arrays_offsets_and_copy() {
    // Nullable strings: rows "ab", null, "", "xyz"; PLAIN.
    let (mut a, mut pg, mut col) = one_page(pt::BYTE_ARRAY, 0, 4, 1);
    let mut lv = Vec::new();
    put_bitpacked(&mut lv, &[1, 0, 1, 1, 0, 0, 0, 0], 1);
    pg.levels = a.upload(&lv);
    pg.levels_len = lv.len() as u64;
    let body = [2u8, 0, 0, 0, b'a', b'b', 0, 0, 0, 0, 3, 0, 0, 0, b'x', b'y', b'z'];
    pg.values = a.upload(&body);
    pg.values_len = body.len() as u64;
    let mut pages = [pg];
    let mut cols = [col];
    levels(&mut a, &mut pages, &cols);
    byte_array_values(&mut a, &mut pages, &cols);
    assert_eq!(error_of(&pages[0]), (None, 0));
    assert_eq!(a.read::<u32>(col.str_len, 3), Some(vec![2, 0, 3]));
    assert_eq!(
        a.read::<u64>(col.str_src, 3),
        Some(vec![pg.values + 4, pg.values + 10, pg.values + 14])
    );
    string_offsets(&mut a, &pages, &mut cols);
    assert_eq!(a.read::<i32>(col.out_offsets, 5), Some(vec![0, 2, 2, 2, 5]));
    // Characters one byte short: the last row fails (detail: row 3), the others are copied.
    col = cols[0];
    col.out_values = a.alloc(4);
    col.chars_capacity = 4;
    let cols = [col];
    copy_strings(&mut a, &mut pages, &cols);
    assert_eq!(error_of(&pages[0]), (Some(ErrorCode::Overrun), 3));
    assert_eq!(a.get(col.out_values, 4), Some(&b"ab\0\0"[..]));

    // A value running past the page: Overrun at k = 2, the two before it written.
    let (mut a, mut pg, col) = one_page(pt::BYTE_ARRAY, 0, 3, 0);
    let body = [1u8, 0, 0, 0, b'q', 0, 0, 0, 0, 9, 0, 0, 0, b'z'];
    pg.values = a.upload(&body);
    pg.values_len = body.len() as u64;
    let mut pages = [pg];
    let cols = [col];
    levels(&mut a, &mut pages, &cols);
    byte_array_values(&mut a, &mut pages, &cols);
    assert_eq!(error_of(&pages[0]), (Some(ErrorCode::Overrun), 2));
    assert_eq!(a.read::<u32>(col.str_len, 3), Some(vec![1, 0, 0]));
}

#[test]
fn offsets_overflow_is_a_column_error() {
    let (mut a, pg, col) = one_page(pt::BYTE_ARRAY, 0, 3, 0);
    let mut pages = [pg];
    let mut cols = [col];
    levels(&mut a, &mut pages, &cols);
    assert!(a.write(col.str_len, &[0x4000_0000u32, 0x4000_0000, 1]));
    string_offsets(&mut a, &pages, &mut cols);
    assert_eq!(ErrorCode::from_u32(cols[0].error), Some(ErrorCode::OffsetOverflow));
    assert_eq!(
        a.read::<i32>(col.out_offsets, 4),
        Some(vec![0; 4]),
        "no offsets written"
    );
    // And copy_strings leaves the column alone.
    copy_strings(&mut a, &mut pages, &cols);
    assert_eq!(pages[0].error, 0);
}

#[test]
fn offsets_span_pages_and_columns() {
    // Two string columns of two pages each (required), lengths given directly.
    let mut a = Arena::new();
    let mut cols = Vec::new();
    let mut pages = Vec::new();
    for c in 0..2u32 {
        let (_, _, mut col) = one_page(pt::BYTE_ARRAY, 0, 5, 0);
        col.out_offsets = a.alloc(24);
        col.str_len = a.upload_slice(&[1u32 + c, 2, 3, 4, 5]);
        col.str_src = a.alloc(40);
        cols.push(col);
        for (row_start, num_values) in [(0, 2), (2, 3)] {
            pages.push(PageDesc {
                physical: pt::BYTE_ARRAY,
                column: c,
                row_start,
                num_values,
                num_non_null: num_values,
                ..PageDesc::default()
            });
        }
    }
    string_offsets(&mut a, &pages, &mut cols);
    assert_eq!(a.read::<i32>(cols[0].out_offsets, 6), Some(vec![0, 1, 3, 6, 10, 15]));
    assert_eq!(a.read::<i32>(cols[1].out_offsets, 6), Some(vec![0, 2, 4, 7, 11, 16]));
    // A page in error counts as empty rows; the offsets stay monotone.
    pages[2].error = ErrorCode::Overrun as u32;
    string_offsets(&mut a, &pages, &mut cols);
    assert_eq!(a.read::<i32>(cols[1].out_offsets, 6), Some(vec![0, 0, 0, 3, 7, 12]));
}

#[test]
fn byte_array_dictionary() {
    let mut a = Arena::new();
    let body = [1u8, 0, 0, 0, b'a', 2, 0, 0, 0, b'b', b'c', 0, 0, 0, 0];
    let data = a.upload(&body);
    let index = a.alloc(4 * 8);
    let mut dicts = [
        DictDesc {
            data,
            data_len: body.len() as u64,
            index,
            count: 3,
            ..DictDesc::default()
        },
        DictDesc {
            data,
            data_len: 12,
            index: a.alloc(3 * 8),
            count: 3,
            ..DictDesc::default()
        },
    ];
    dict_byte_array_index(&mut a, &mut dicts);
    assert_eq!(
        (dicts[0].error, dicts[1].error, dicts[1].error_detail),
        (0, ErrorCode::Overrun as u32, 2)
    );
    let entries: Vec<DictEntry> = a.read(index, 3).expect("entries");
    assert_eq!(
        entries.iter().map(|e| (e.offset, e.len)).collect::<Vec<_>>(),
        vec![(4, 1), (9, 2), (15, 0)]
    );
    // A page using it: indices 2, 1, 7 (7 past the end: DictIndexOutOfRange at k = 2, others written).
    let (_, mut pg, col) = one_page(pt::BYTE_ARRAY, 0, 3, 0);
    let col = ColumnDesc {
        dense: a.upload_slice(&[2u32, 1, 7]),
        str_src: a.alloc(24),
        str_len: a.alloc(12),
        out_offsets: a.alloc(16),
        ..col
    };
    pg.encoding = enc::RLE_DICTIONARY;
    pg.num_non_null = 3;
    pg.dict = data;
    pg.dict_len = body.len() as u64;
    pg.dict_index = index;
    pg.dict_count = 3;
    let mut pages = [pg];
    byte_array_values(&mut a, &mut pages, &[col]);
    assert_eq!(error_of(&pages[0]), (Some(ErrorCode::DictIndexOutOfRange), 2));
    assert_eq!(a.read::<u64>(col.str_src, 3), Some(vec![data + 15, data + 9, 0]));
    assert_eq!(a.read::<u32>(col.str_len, 3), Some(vec![0, 2, 0]));
}

#[test]
fn pack_bits_tail_and_count() {
    let mut a = Arena::new();
    let bytes: Vec<u8> = (0..70u32).map(|i| u8::from(i % 3 == 0) * (i as u8 + 1)).collect();
    let src = a.upload(&bytes);
    let words = a.upload_slice(&[u32::MAX; 3]);
    assert_eq!(pack_bits(&mut a, src, 70, words), 24);
    let w: Vec<u32> = a.read(words, 3).expect("words");
    for i in 0..96 {
        assert_eq!(bit(&w, i), i < 70 && i % 3 == 0, "bit {i}");
    }
    assert_eq!(pack_bits(&mut a, src, 0, words), 0);
}

// ---- hostile input ----

/// A step of the v2 (or v1) dictionary sample with one page's bytes or fields damaged.
fn damaged(v: Variant, file: &Bytes, seed: u64) -> Step {
    let leaves: Vec<usize> = (0..NAMES.len()).collect();
    let mut step = build_step(file, &leaves);
    let mut rng = Rng(seed);
    for _ in 0..1 + rng.below(3) {
        let p = rng.below(step.pages.len() as u64) as usize;
        let pg = step.pages[p];
        // The page's whole body: v2 levels sit just before data.
        let start = if v.v2 && pg.levels != 0 { pg.levels } else { pg.data };
        let len = pg.data + pg.data_len - start;
        match rng.below(9) {
            0..=3 => {
                // Flip a few bytes, favouring the front (levels, widths, length prefixes).
                let body = step.arena.get_mut(start, len).expect("page body");
                for _ in 0..1 + rng.below(4) {
                    let at = if rng.below(2) == 0 {
                        rng.below(len.min(16))
                    } else {
                        rng.below(len)
                    } as usize;
                    if at < body.len() {
                        body[at] ^= 1 << rng.below(8);
                    }
                }
            }
            4 => {
                // Truncate: the prefix moves to a region of its own, so reading past it misses.
                let cut = rng.below(len);
                let prefix = step.arena.get(start, cut).expect("prefix").to_vec();
                let addr = step.arena.upload(&prefix);
                let pg = &mut step.pages[p];
                if v.v2 && pg.levels != 0 {
                    let ll = pg.levels_len.min(cut);
                    pg.levels = addr;
                    pg.levels_len = ll;
                    pg.data = addr + ll;
                    pg.data_len = cut - ll;
                } else {
                    pg.data = addr;
                    pg.data_len = cut;
                }
                if pg.flags == 0 {
                    pg.values = pg.data;
                    pg.values_len = pg.data_len;
                }
            }
            5 => step.pages[p].def_bit_width = 9 + rng.below(30) as u32,
            6 => step.pages[p].dict_count = rng.below(3) as u32,
            7 => {
                // The header claims more values: the orchestrator places the later pages and sizes
                // the column's buffers by it.
                let c = pg.column;
                let more = pg.num_values * rng.below(50) as u32 + rng.below(1000) as u32;
                step.pages[p].num_values += more;
                for later in step.pages[p + 1..].iter_mut().filter(|q| q.column == c) {
                    later.row_start += more;
                }
                let col = &mut step.cols[c as usize];
                col.num_rows += u64::from(more);
                alloc_column(&mut step.arena, col, pg.max_def > 0);
            }
            _ => {
                if let Some(d) = step.dicts.first_mut() {
                    d.count = d.count.saturating_mul(1 + rng.below(40) as u32);
                }
            }
        }
    }
    step
}

/// Damaged pages never panic; every error is a known code; a string column without an error has
/// monotone offsets ending at its characters' length.
#[test]
fn hostile_pages_report_errors() {
    let batch = sample_batch();
    let mut errors = std::collections::BTreeMap::new();
    for (vi, v) in [VARIANTS[0], VARIANTS[3], VARIANTS[4]].into_iter().enumerate() {
        let file = write_sample(&batch, v);
        for seed in 0..60 {
            let mut step = damaged(v, &file, seed * 10 + vi as u64);
            let outs = run_core(&mut step);
            for pg in &step.pages {
                if pg.error != 0 {
                    let code = ErrorCode::from_u32(pg.error).expect("a known code");
                    *errors.entry(format!("{code:?}")).or_insert(0) += 1;
                }
            }
            for (col, out) in step.cols.iter().zip(&outs) {
                if let (Some(offsets), 0) = (&out.offsets, col.error) {
                    assert!(offsets.windows(2).all(|w| w[0] <= w[1]), "monotone offsets");
                    assert_eq!(offsets[col.num_rows as usize] as u64, col.chars_capacity);
                }
            }
        }
    }
    for want in ["Overrun", "BadBitWidth", "BadLevel", "DictIndexOutOfRange"] {
        assert!(errors.contains_key(want), "no {want} among {errors:?}");
    }
}

/// A huge page count over short streams: each stage reports where its stream ended.
#[test]
fn huge_counts_short_streams() {
    let rows = 1 << 20;
    // Nullable: 10 present levels, then nothing.
    let (mut a, mut pg, col) = one_page(pt::INT32, 4, rows, 1);
    let mut s = Vec::new();
    put_rle(&mut s, 10, 1, 1);
    pg.levels = a.upload(&s);
    pg.levels_len = s.len() as u64;
    let mut pages = [pg];
    levels(&mut a, &mut pages, &[col]);
    assert_eq!(error_of(&pages[0]), (Some(ErrorCode::Overrun), 10));
    assert_eq!(pages[0].num_non_null, 10);
    // Required dictionary page: 4 indices, then nothing.
    let (mut a, mut pg, col) = one_page(pt::INT64, 8, rows, 0);
    let mut s = vec![2u8];
    put_rle(&mut s, 4, 3, 2);
    pg.values = a.upload(&s);
    pg.values_len = s.len() as u64;
    pg.encoding = enc::PLAIN_DICTIONARY;
    pg.dict = a.upload_slice(&[0i64; 4]);
    pg.dict_len = 32;
    pg.dict_count = 4;
    let mut pages = [pg];
    levels(&mut a, &mut pages, &[col]);
    dict_indices(&mut a, &mut pages, &[col]);
    assert_eq!(error_of(&pages[0]), (Some(ErrorCode::Overrun), 4));
    // RLE booleans whose length prefix claims more than the page.
    let (mut a, mut pg, col) = one_page(pt::BOOLEAN, 1, rows, 0);
    pg.values = a.upload(&[200, 0, 0, 0, 2, 1]);
    pg.values_len = 6;
    pg.encoding = enc::RLE;
    let mut pages = [pg];
    levels(&mut a, &mut pages, &[col]);
    dict_indices(&mut a, &mut pages, &[col]);
    assert_eq!(error_of(&pages[0]), (Some(ErrorCode::Overrun), 0));
    // A page and column claiming two billion rows over small buffers (a host bug): refused, not
    // decoded into memory without bound.
    let (mut a, mut pg, mut col) = one_page(pt::INT32, 4, 16, 1);
    let mut s = Vec::new();
    put_rle(&mut s, 2_000_000_000, 1, 1);
    pg.levels = a.upload(&s);
    pg.levels_len = s.len() as u64;
    pg.num_values = 2_000_000_000;
    col.num_rows = 2_000_000_000;
    let mut pages = [pg];
    levels(&mut a, &mut pages, &[col]);
    assert_eq!(error_of(&pages[0]).0, Some(ErrorCode::BadPageSize));
    pages[0] = PageDesc {
        error: 0,
        num_non_null: 2_000_000_000,
        values: a.upload(&[1, 0]),
        values_len: 2,
        ..pg
    };
    pages[0].encoding = enc::PLAIN_DICTIONARY;
    pages[0].dict = a.upload(&[0; 4]);
    dict_indices(&mut a, &mut pages, &[col]);
    assert_eq!(error_of(&pages[0]).0, Some(ErrorCode::BadPageSize));
}

// ---- the kernels themselves, on the CPU emulation ----

/// Runs the references on `build()` and the emulated kernels on another `build()`, and asserts both
/// results are the same in every byte and field. Skips (saying why) without a C++ compiler.
fn kernels_match(what: &str, build: impl Fn() -> Step) -> bool {
    if let Err(why) = emu::available() {
        crate::test_skip(&why);
        return false;
    }
    let mut reference = build();
    let outs = run_core(&mut reference);
    let emulated = emu::run_emulated(&build());
    emu::assert_same(what, &reference, &outs, &emulated);
    true
}

#[test]
fn kernels_match_references_on_real_pages() {
    let batch = sample_batch();
    let leaves: Vec<usize> = (0..NAMES.len()).collect();
    for v in VARIANTS {
        let file = write_sample(&batch, v);
        if !kernels_match(&format!("{v:?}"), || build_step(&file, &leaves)) {
            return;
        }
    }
}

#[test]
fn kernels_match_references_on_hostile_pages() {
    let batch = sample_batch();
    for (vi, v) in [VARIANTS[0], VARIANTS[3], VARIANTS[4]].into_iter().enumerate() {
        let file = write_sample(&batch, v);
        for seed in 0..12 {
            let seed = seed * 10 + vi as u64;
            if !kernels_match(&format!("{v:?} damage {seed}"), || damaged(v, &file, seed)) {
                return;
            }
        }
    }
}

/// A dictionary-encoded string page shared by several blocks (the emulation gives each page three,
/// the rows 256 at a time, round robin): the page's view of its dictionary cut to the two entries of
/// rows 0..300 (`dict_len`; the indices stay in range, so `gp_dict_indices` passes them), the lowest
/// failing row (300) lies in the second block's rows while the first and third blocks' rows fail from
/// 768 and 512; the page's error must still name row 300, as the reference does.
#[test]
fn kernels_match_references_when_a_later_block_has_the_lowest_failing_row() {
    let rows = 4000;
    let dict: StringArray = (0..rows)
        .map(|i| {
            Some(if i < 300 {
                format!("first-{}", i % 2)
            } else {
                format!("later-{}", i % 37)
            })
        })
        .collect();
    let schema = Arc::new(Schema::new(vec![Field::new("dict", DataType::Utf8, false)]));
    let batch = RecordBatch::try_new(schema, vec![Arc::new(dict) as ArrayRef]).expect("batch");
    let props = WriterProperties::builder()
        .set_data_page_row_count_limit(rows)
        .set_write_batch_size(1024)
        .set_dictionary_enabled(true)
        .build();
    let mut buf = Vec::new();
    let mut w = ArrowWriter::try_new(&mut buf, batch.schema(), Some(props)).expect("writer");
    w.write(&batch).expect("write");
    w.close().expect("close");
    let file = Bytes::from(buf);
    let build = || {
        let mut step = build_step(&file, &[0]);
        let dict_pages = step
            .pages
            .iter_mut()
            .filter(|p| p.encoding == enc::RLE_DICTIONARY || p.encoding == enc::PLAIN_DICTIONARY);
        for p in dict_pages {
            // "first-0" and "first-1", each after its 4-byte length.
            p.dict_len = 2 * (4 + 7);
        }
        step
    };
    let mut reference = build();
    run_core(&mut reference);
    let first = reference.pages.iter().find(|p| p.error != 0).expect("a page in error");
    assert_eq!(error_of(first), (Some(ErrorCode::Overrun), 300));
    kernels_match("dictionary cut short, lowest failing row in the second block", build);
}

#[test]
fn kernels_match_references_on_large_pages() {
    let batch = big_batch();
    for v2 in [false, true] {
        let file = write_big(&batch, v2);
        if !kernels_match(&format!("large pages v2 {v2}"), || {
            build_step(&file, &(0..7).collect::<Vec<_>>())
        }) {
            return;
        }
    }
}

/// Hand-built steps for the edges the written files do not reach.
fn edge_step(case: u32) -> Step {
    let mut arena = Arena::new();
    let (mut pages, mut cols, mut dicts) = (Vec::new(), Vec::new(), Vec::new());
    let col_of = |arena: &mut Arena, physical: u32, type_len: u32, rows: u32, nullable: bool| {
        let mut col = ColumnDesc {
            num_rows: u64::from(rows),
            dense_width: type_len.max(4),
            out_width: if physical == pt::BYTE_ARRAY { 0 } else { type_len },
            physical,
            ..ColumnDesc::default()
        };
        alloc_column(arena, &mut col, nullable);
        col
    };
    let page = |physical: u32, type_len: u32, rows: u32, max_def: u32, column: u32| PageDesc {
        num_values: rows,
        physical,
        type_len,
        max_def,
        def_bit_width: 32 - max_def.leading_zeros(),
        column,
        ..PageDesc::default()
    };
    match case {
        0 => {
            // Levels: a bad level mid-window after many short runs; a stream ending early.
            cols.push(col_of(&mut arena, pt::INT32, 4, 6000, true));
            let mut s = Vec::new();
            for r in 0..300 {
                put_rle(&mut s, 9, r % 2, 2);
            }
            put_rle(&mut s, 1, 3, 2);
            let mut p = page(pt::INT32, 4, 3000, 1, 0);
            p.def_bit_width = 2;
            p.levels = arena.upload(&s);
            p.levels_len = s.len() as u64;
            p.values = arena.upload(&vec![7u8; 4 * 1500]);
            p.values_len = 4 * 1500;
            pages.push(p);
            let mut s = Vec::new();
            put_rle(&mut s, 2500, 1, 1);
            let mut p = page(pt::INT32, 4, 3000, 1, 0);
            p.row_start = 3000;
            p.levels = arena.upload(&s);
            p.levels_len = s.len() as u64;
            pages.push(p);
            // Windows of one run without nulls between windows with nulls: 256 short runs (a window
            // cut by the run limit at 1,024 levels), a run of 5,000 present values (two whole windows
            // and part of a third), then short runs again.
            cols.push(col_of(&mut arena, pt::INT32, 4, 7000, true));
            let mut s = Vec::new();
            for r in 0..256 {
                put_rle(&mut s, 4, r % 2, 1);
            }
            put_rle(&mut s, 5000, 1, 1);
            for r in 0..244 {
                put_rle(&mut s, 4, (r + 1) % 2, 1);
            }
            let mut p = page(pt::INT32, 4, 7000, 1, 1);
            p.levels = arena.upload(&s);
            p.levels_len = s.len() as u64;
            let values: Vec<u8> = (0..6000u32).flat_map(|v| (v * 3).to_le_bytes()).collect();
            p.values = arena.upload(&values);
            p.values_len = values.len() as u64;
            pages.push(p);
        }
        1 => {
            // Dictionary indices at every width to 32 over several windows; index out of range late;
            // a dictionary body shorter than its count (gather errors on some rows only).
            for (c, width) in [1u32, 7, 13, 32].into_iter().enumerate() {
                let rows = 5000;
                cols.push(col_of(&mut arena, pt::INT64, 8, rows, false));
                let count = if width >= 13 { 5000 } else { 1 << width };
                let mut rng = Rng(u64::from(width));
                let idx: Vec<u32> = (0..rows).map(|_| rng.below(u64::from(count)) as u32).collect();
                let mut s = vec![width as u8];
                for chunk in idx.chunks(64) {
                    let mut padded = chunk.to_vec();
                    padded.resize(chunk.len().div_ceil(8) * 8, 0);
                    put_bitpacked(&mut s, &padded, width);
                }
                if width == 32 {
                    // The last value: out of range.
                    let at = s.len() - 4;
                    s[at..].copy_from_slice(&u32::MAX.to_le_bytes());
                }
                let mut p = page(pt::INT64, 8, rows, 0, c as u32);
                p.encoding = if c % 2 == 0 {
                    enc::RLE_DICTIONARY
                } else {
                    enc::PLAIN_DICTIONARY
                };
                p.values = arena.upload(&s);
                p.values_len = s.len() as u64;
                let body: Vec<i64> = (0..i64::from(count)).map(|v| v * 3 + 1).collect();
                p.dict = arena.upload_slice(&body);
                p.dict_len = if width == 13 { 8 * 2000 } else { 8 * u64::from(count) };
                p.dict_count = count;
                pages.push(p);
            }
        }
        2 => {
            // Plain values at every fixed width from unaligned streams, required and nullable, short
            // pages, BOOLEAN bits, bad encodings.
            let widths = [
                (pt::INT32, 4),
                (pt::INT64, 8),
                (pt::INT96, 12),
                (pt::FIXED_LEN_BYTE_ARRAY, 3),
                (pt::DOUBLE, 8),
                (pt::BOOLEAN, 1),
            ];
            for (c, &(physical, tl)) in widths.iter().enumerate() {
                let rows = 4100;
                let nullable = c % 2 == 1;
                cols.push(col_of(&mut arena, physical, tl, rows, nullable));
                let mut rng = Rng(c as u64);
                for (k, offset) in [1u64, 2, 3, 0].into_iter().enumerate() {
                    let n = if k == 3 { rows - 3 * 1000 } else { 1000 };
                    let mut p = page(physical, tl, n, u32::from(nullable), c as u32);
                    p.row_start = k as u32 * 1000;
                    let present = if nullable && k == 1 { n / 2 } else { n };
                    if nullable {
                        let mut lv = Vec::new();
                        put_rle(&mut lv, u64::from(present), 1, 1);
                        put_rle(&mut lv, u64::from(n - present), 0, 1);
                        p.levels = arena.upload(&lv);
                        p.levels_len = lv.len() as u64;
                    }
                    let bytes = if physical == pt::BOOLEAN {
                        present.div_ceil(8)
                    } else {
                        present * tl
                    };
                    let short = if k == 2 { tl.max(1) + 1 } else { 0 };
                    let mut body = vec![0u8; (offset + u64::from(bytes)) as usize];
                    body.iter_mut().for_each(|b| *b = rng.next() as u8);
                    let addr = arena.upload(&body);
                    p.values = addr + offset;
                    p.values_len = u64::from(bytes.saturating_sub(short));
                    if c == 4 && k == 3 {
                        p.encoding = enc::DELTA_BYTE_ARRAY;
                    }
                    pages.push(p);
                }
            }
        }
        3 | 4 | 7 => {
            // Strings whose lengths another decoder wrote (DELTA_LENGTH_BYTE_ARRAY pages): long and
            // short values from unaligned sources, nulls; case 4 overflows the 32-bit offsets, case 7
            // is case 3 with 64-bit offsets (a LargeUtf8 column).
            let rows = 700;
            let mut col = col_of(&mut arena, pt::BYTE_ARRAY, 0, rows, true);
            if case == 7 {
                col.out_width = 8;
                col.out_offsets = arena.alloc((rows as usize + 1) * 8);
            }
            cols.push(col);
            let mut rng = Rng(u64::from(if case == 7 { 3 } else { case }));
            let src: Vec<u8> = (0..20_000).map(|_| rng.next() as u8).collect();
            let base = arena.upload(&src);
            let (mut srcs, mut lens) = (Vec::new(), Vec::new());
            for (k, (row_start, n)) in [(0u32, 300u32), (300, 400)].into_iter().enumerate() {
                let mut lv = Vec::new();
                put_rle(&mut lv, u64::from(n - 50), 1, 1);
                put_rle(&mut lv, 50, 0, 1);
                let mut p = page(pt::BYTE_ARRAY, 0, n, 1, 0);
                p.row_start = row_start;
                p.encoding = enc::DELTA_LENGTH_BYTE_ARRAY;
                p.levels = arena.upload(&lv);
                p.levels_len = lv.len() as u64;
                pages.push(p);
                for j in 0..n - 50 {
                    let len = match (j + k as u32) % 5 {
                        0 => 200 + rng.below(300),
                        1 => 33,
                        _ => rng.below(20),
                    };
                    let len = if case == 4 && j == 7 { 0x7fff_fff0 } else { len };
                    srcs.push(base + rng.below(20_000 - 600) + (j % 7) as u64);
                    lens.push(len as u32);
                }
                srcs.resize(row_start as usize + n as usize, 0);
                lens.resize(row_start as usize + n as usize, 0);
            }
            assert!(arena.write(cols[0].str_src, &srcs) && arena.write(cols[0].str_len, &lens));
        }
        5 => {
            // PLAIN strings for the parallel walk (512-byte ranges, 256 to a tile): short values (every
            // range entered in its first 32 bytes), 30-120 bytes (many entered later), values over a
            // range long (ranges with no start), binary values full of small "lengths" (chains from
            // wrong starts that survive), trailing bytes, a stream short by its last value across
            // tiles, one ending exactly where its last full value does; the same streams as
            // dictionaries.
            type LenOf = fn(&mut Rng, u32) -> u32;
            let shapes: [(u32, LenOf); 7] = [
                (3000, |r, _| r.below(21) as u32),
                (1500, |r, j| if j % 9 == 0 { 0 } else { 30 + r.below(91) as u32 }),
                (90, |r, _| 600 + r.below(1400) as u32),
                (2500, |r, _| 4 * r.below(8) as u32),
                (4000, |r, _| 5 + r.below(13) as u32),
                (20_000, |r, _| r.below(60) as u32),
                (2000, |r, _| 17 + r.below(3) as u32),
            ];
            let mut rng = Rng(5);
            let rows: u32 = shapes.iter().map(|s| s.0).sum();
            cols.push(col_of(&mut arena, pt::BYTE_ARRAY, 0, rows, false));
            let mut row_start = 0;
            for (k, (n, len_of)) in shapes.into_iter().enumerate() {
                let mut body = vec![0u8; k % 4]; // unaligned starts
                let mut last = 0;
                for j in 0..n {
                    let len = len_of(&mut rng, j);
                    last = len;
                    body.extend_from_slice(&len.to_le_bytes());
                    for _ in 0..len {
                        body.push(match k {
                            3 => [1u8, 0, 0, 0][rng.below(4) as usize],
                            _ => b'a' + rng.below(26) as u8,
                        });
                    }
                }
                let head = k % 4;
                let mut values_len = (body.len() - head) as u64;
                match k {
                    4 => body.extend_from_slice(&[7, 0, 0, 0, 1, 2]), // trailing bytes, not values
                    5 => values_len -= 1,                             // the last value is cut
                    6 => values_len -= 4 + u64::from(last),           // the last value is missing
                    _ => {}
                }
                let addr = arena.upload(&body);
                let mut p = page(pt::BYTE_ARRAY, 0, n, 0, 0);
                p.row_start = row_start;
                p.values = addr + head as u64;
                p.values_len = values_len;
                pages.push(p);
                row_start += n;
                let count = if k == 6 { n } else { n.min(1500) };
                dicts.push(DictDesc {
                    data: p.values,
                    data_len: values_len,
                    index: arena.alloc(count as usize * 8),
                    count,
                    ..DictDesc::default()
                });
            }
        }
        6 => {
            // A dictionary-typed column's plain fallback pages: its keys (INT32, nullable) over a page
            // of SEQUENCE_KEYS after a dictionary-encoded one, and its values (nullable strings): the
            // dictionary's entries as a page without levels (max_def 0), then the plain page's rows.
            // Levels of the fallback page: 1 0 1 1 0 1 (a bit-packed group of 8, the last 2 unused).
            let levels = [0x03u8, 0b0010_1101];
            cols.push(col_of(&mut arena, pt::INT32, 4, 9, true));
            let identity: Vec<u8> = (0..3i32).flat_map(i32::to_le_bytes).collect();
            let mut p = page(pt::INT32, 4, 3, 1, 0);
            p.levels = arena.upload(&[6u8, 1]); // an RLE run of 3 present
            p.levels_len = 2;
            p.encoding = enc::RLE_DICTIONARY;
            p.values = arena.upload(&[2u8, 6, 2, 1]); // width 2, RLE run of 3 of index 2... then more
            p.values_len = 4;
            p.dict = arena.upload(&identity);
            p.dict_len = 12;
            p.dict_count = 3;
            pages.push(p);
            let mut p = page(pt::INT32, 4, 6, 1, 0);
            p.row_start = 3;
            p.levels = arena.upload(&levels);
            p.levels_len = 2;
            p.encoding = enc::SEQUENCE_KEYS;
            p.dict_count = 3; // the fallback page's rows follow the dictionary's 3 entries
            pages.push(p);
            cols.push(col_of(&mut arena, pt::BYTE_ARRAY, 0, 9, true));
            let strings = |items: &[&str]| -> Vec<u8> {
                items
                    .iter()
                    .flat_map(|v| [&(v.len() as u32).to_le_bytes()[..], v.as_bytes()].concat())
                    .collect()
            };
            let entries = strings(&["ab", "", "cde"]);
            let mut p = page(pt::BYTE_ARRAY, 0, 3, 0, 1);
            p.values = arena.upload(&entries);
            p.values_len = entries.len() as u64;
            pages.push(p);
            let fallback = strings(&["w", "xx", "yyy", "z"]);
            let mut p = page(pt::BYTE_ARRAY, 0, 6, 1, 1);
            p.row_start = 3;
            p.levels = arena.upload(&levels);
            p.levels_len = 2;
            p.values = arena.upload(&fallback);
            p.values_len = fallback.len() as u64;
            pages.push(p);
        }
        _ => unreachable!(),
    }
    Step {
        arena,
        pages,
        cols,
        dicts,
    }
}

/// Edge step 6: keys count on over a fallback page, and a page without levels in a nullable column is
/// all present.
#[test]
fn sequence_keys_and_a_page_without_levels() {
    let mut step = edge_step(6);
    let outs = run_core(&mut step);
    assert!(step.pages.iter().all(|p| p.error == 0), "{:?}", step.pages);
    let keys: Vec<i32> = bytemuck::pod_collect_to_vec(&outs[0].values);
    assert_eq!(keys, [2, 2, 2, 3, 0, 5, 6, 0, 8]);
    assert_eq!(outs[0].valid.as_deref(), Some(&[1u8, 1, 1, 1, 0, 1, 1, 0, 1][..]));
    assert_eq!(outs[1].valid.as_deref(), Some(&[1u8, 1, 1, 1, 0, 1, 1, 0, 1][..]));
    assert_eq!(outs[1].values, b"abcdewxxyyyz");
    assert_eq!(outs[1].offsets.as_deref(), Some(&[0, 2, 2, 5, 6, 6, 8, 11, 11, 12][..]));
}

/// Edge step 4's strings (past 2 GiB) in a column of 64-bit offsets: no overflow, the offsets run on
/// past `i32::MAX`; edge step 7 (64-bit offsets) gives edge step 3's strings.
#[test]
fn wide_offsets_pass_2_gib() {
    let mut step = edge_step(4);
    let rows = step.cols[0].num_rows as usize;
    step.cols[0].out_width = 8;
    step.cols[0].out_offsets = step.arena.alloc((rows + 1) * 8);
    page_setup(&mut step.arena, &mut step.pages);
    levels(&mut step.arena, &mut step.pages, &step.cols);
    string_offsets(&mut step.arena, &step.pages, &mut step.cols);
    assert_eq!(step.cols[0].error, 0);
    let offsets: Vec<i64> = step.arena.read(step.cols[0].out_offsets, rows + 1).expect("offsets");
    assert!(offsets.windows(2).all(|w| w[0] <= w[1]));
    assert!(offsets[rows] > i64::from(i32::MAX), "{}", offsets[rows]);

    let (mut narrow, mut wide) = (edge_step(3), edge_step(7));
    let (narrow, wide) = (run_core(&mut narrow), run_core(&mut wide));
    assert_eq!(narrow[0].offsets, wide[0].offsets);
    assert_eq!(narrow[0].values, wide[0].values);
    assert_eq!(narrow[0].utf8_first_bad, wide[0].utf8_first_bad);
}

#[test]
fn kernels_match_references_on_edge_steps() {
    for case in 0..8 {
        if !kernels_match(&format!("edge step {case}"), || edge_step(case)) {
            return;
        }
    }
}

/// The edge steps do what they are meant to (checked on the references).
#[test]
fn edge_steps_reach_their_errors() {
    let errors = |case| {
        let mut step = edge_step(case);
        run_core(&mut step);
        let pages: Vec<_> = step.pages.iter().map(error_of).collect();
        (pages, step.cols.iter().map(|c| c.error).collect::<Vec<_>>())
    };
    let (p, _) = errors(0);
    assert_eq!(p[0], (Some(ErrorCode::BadLevel), 2700));
    assert_eq!(p[1], (Some(ErrorCode::Overrun), 2500));
    assert_eq!(p[2], (None, 0));
    let mut step = edge_step(0);
    run_core(&mut step);
    assert_eq!(step.pages[2].num_non_null, 512 + 5000 + 488);
    let (p, _) = errors(1);
    assert_eq!(p[0], (None, 0));
    assert_eq!(p[1], (None, 0));
    assert_eq!(p[2].0, Some(ErrorCode::Overrun), "the dictionary body is short");
    assert_eq!(p[3], (Some(ErrorCode::DictIndexOutOfRange), 4999));
    let (p, _) = errors(2);
    for c in 0..6 {
        assert_eq!(p[c * 4].0, None, "column {c} page 0");
        assert_eq!(p[c * 4 + 2].0, Some(ErrorCode::Overrun), "column {c}: the short page");
    }
    assert_eq!(p[4 * 4 + 3], (Some(ErrorCode::BadEncoding), enc::DELTA_BYTE_ARRAY));
    let (p, c) = errors(3);
    assert!(p.iter().all(|e| e.0.is_none()) && c == [0]);
    let (_, c) = errors(4);
    assert_eq!(c, [ErrorCode::OffsetOverflow as u32]);
    let (p, _) = errors(5);
    assert!(p[..5].iter().all(|e| e.0.is_none()), "{p:?}");
    assert_eq!(p[5], (Some(ErrorCode::Overrun), 19_999), "the last value is cut");
    assert_eq!(p[6], (Some(ErrorCode::Overrun), 1999), "the last value is missing");
    let mut step = edge_step(5);
    run_core(&mut step);
    let dicts: Vec<_> = step.dicts.iter().map(|d| (d.error, d.error_detail)).collect();
    assert!(dicts[..6].iter().all(|d| d.0 == 0), "{dicts:?}");
    assert_eq!(dicts[6], (ErrorCode::Overrun as u32, 1999));
}

/// A step of four columns whose page bodies, dictionaries and some descriptor fields are random:
/// nullable INT32 v1 pages, nullable BYTE_ARRAY v2 pages (PLAIN or dictionary), required RLE
/// booleans, required INT64 dictionary pages.
fn random_step(seed: u64) -> Step {
    let mut rng = Rng(seed);
    let mut arena = Arena::new();
    let bytes = |rng: &mut Rng, arena: &mut Arena, max: u64| {
        let n = rng.below(max + 1) as usize;
        let mut b: Vec<u8> = (0..n).map(|_| rng.next() as u8).collect();
        // Often a plausible start: a small length prefix or bit width.
        if n >= 4 && rng.below(2) == 0 {
            b[..4].copy_from_slice(&(rng.below(n as u64) as u32).to_le_bytes());
        }
        (arena.upload(&b), n as u64)
    };
    let (mut pages, mut cols, mut dicts) = (Vec::new(), Vec::new(), Vec::new());
    for (c, (physical, type_len, nullable)) in [
        (pt::INT32, 4, true),
        (pt::BYTE_ARRAY, 0, true),
        (pt::BOOLEAN, 1, false),
        (pt::INT64, 8, false),
    ]
    .into_iter()
    .enumerate()
    {
        let mut row = 0;
        let dict = if c == 1 {
            let (data, data_len) = bytes(&mut rng, &mut arena, 120);
            let count = rng.below(12) as u32;
            let index = arena.alloc(count as usize * 8);
            dicts.push(DictDesc {
                data,
                data_len,
                index,
                count,
                ..DictDesc::default()
            });
            (data, data_len, count, index)
        } else {
            let (data, len) = bytes(&mut rng, &mut arena, 64);
            (data, len, rng.below(10) as u32, 0)
        };
        for _ in 0..1 + rng.below(3) {
            let n = rng.below(300) as u32;
            let (data, data_len) = bytes(&mut rng, &mut arena, 400);
            let mut p = PageDesc {
                data,
                data_len,
                num_values: n,
                row_start: row,
                physical,
                type_len,
                max_def: u32::from(nullable),
                def_bit_width: if rng.below(8) == 0 {
                    rng.below(12) as u32
                } else {
                    u32::from(nullable)
                },
                column: c as u32,
                ..PageDesc::default()
            };
            match c {
                0 => p.flags = crate::decode::layout::PAGE_V1_LEVELS,
                1 => {
                    (p.levels, p.levels_len) = bytes(&mut rng, &mut arena, 40);
                    (p.values, p.values_len) = (data, data_len);
                    p.encoding = if rng.below(2) == 0 {
                        enc::PLAIN
                    } else {
                        enc::RLE_DICTIONARY
                    };
                }
                2 => {
                    (p.values, p.values_len) = (data, data_len);
                    p.encoding = enc::RLE;
                }
                _ => {
                    (p.values, p.values_len) = (data, data_len);
                    p.encoding = enc::PLAIN_DICTIONARY;
                }
            }
            if c != 0 && c != 2 {
                (p.dict, p.dict_len, p.dict_count, p.dict_index) = dict;
            }
            row += n;
            pages.push(p);
        }
        let mut col = ColumnDesc {
            num_rows: u64::from(row),
            dense_width: type_len.max(4),
            out_width: if physical == pt::BYTE_ARRAY { 0 } else { type_len },
            physical,
            ..ColumnDesc::default()
        };
        alloc_column(&mut arena, &mut col, nullable);
        cols.push(col);
    }
    Step {
        arena,
        pages,
        cols,
        dicts,
    }
}

#[test]
fn random_pages_never_panic() {
    let mut codes = std::collections::BTreeSet::new();
    for seed in 0..400 {
        let mut step = random_step(seed);
        let outs = run_core(&mut step);
        for pg in &step.pages {
            if pg.error != 0 {
                codes.insert(format!("{:?}", ErrorCode::from_u32(pg.error).expect("a known code")));
            }
        }
        for (col, out) in step.cols.iter().zip(&outs) {
            if let (Some(offsets), 0) = (&out.offsets, col.error) {
                assert!(
                    offsets.windows(2).all(|w| w[0] <= w[1]),
                    "seed {seed}: monotone offsets"
                );
            }
        }
    }
    for want in ["Overrun", "BadBitWidth", "BadLevel", "DictIndexOutOfRange"] {
        assert!(codes.contains(want), "no {want} among {codes:?}");
    }
}

/// A step of one required BYTE_ARRAY column whose PLAIN pages are long streams of random values
/// (several of the string walk's tiles), each of the same bytes also walked as a dictionary: lengths
/// from one of five shapes (short, short and long mixed, binary bodies full of small "lengths", all
/// empty, any up to 600 bytes), and, for some pages, damage: the stream cut anywhere, or one length
/// prefix overwritten with a random value.
fn random_string_step(seed: u64) -> Step {
    let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ 0x5eed);
    let arena = Arena::new();
    let shapes = 1 + rng.below(3) as usize;
    let mut bodies = Vec::new();
    for _ in 0..shapes {
        let n = 500 + rng.below(12_000) as u32;
        let shape = rng.below(5);
        let mut body = vec![0u8; rng.below(4) as usize];
        let head = body.len();
        let mut prefixes = Vec::with_capacity(n as usize);
        for _ in 0..n {
            let len = match shape {
                0 => rng.below(24),
                1 => {
                    if rng.below(8) == 0 {
                        300 + rng.below(3000)
                    } else {
                        rng.below(40)
                    }
                }
                2 => 4 * rng.below(6),
                3 => 0,
                _ => rng.below(600),
            } as u32;
            prefixes.push(body.len());
            body.extend_from_slice(&len.to_le_bytes());
            for _ in 0..len {
                body.push(if shape == 2 {
                    [0u8, 1, 2, 0][rng.below(4) as usize]
                } else {
                    rng.next() as u8
                });
            }
        }
        let mut values_len = (body.len() - head) as u64;
        match rng.below(4) {
            0 => values_len = rng.below(values_len + 1),
            1 => {
                let at = prefixes[rng.below(n as u64) as usize];
                let v = (rng.next() as u32) >> (rng.below(32) as u32);
                body[at..at + 4].copy_from_slice(&v.to_le_bytes());
            }
            _ => {}
        }
        bodies.push((n, head, body, values_len));
    }
    string_step(arena, bodies)
}

/// A step of one BYTE_ARRAY column whose pages are `bodies`: (values, bytes before the values, page
/// bytes, values' length), each also given as a dictionary.
fn string_step(mut arena: Arena, bodies: Vec<(u32, usize, Vec<u8>, u64)>) -> Step {
    let rows: u32 = bodies.iter().map(|b| b.0).sum();
    let mut col = ColumnDesc {
        num_rows: u64::from(rows),
        dense_width: 4,
        physical: pt::BYTE_ARRAY,
        ..ColumnDesc::default()
    };
    alloc_column(&mut arena, &mut col, false);
    let (mut pages, mut dicts) = (Vec::new(), Vec::new());
    let mut row_start = 0;
    for (n, head, body, values_len) in bodies {
        let addr = arena.upload(&body);
        pages.push(PageDesc {
            num_values: n,
            physical: pt::BYTE_ARRAY,
            values: addr + head as u64,
            values_len,
            row_start,
            ..PageDesc::default()
        });
        dicts.push(DictDesc {
            data: addr + head as u64,
            data_len: values_len,
            index: arena.alloc(n as usize * 8),
            count: n,
            ..DictDesc::default()
        });
        row_start += n;
    }
    Step {
        arena,
        pages,
        cols: vec![col],
        dicts,
    }
}

#[test]
fn kernels_match_references_on_random_string_streams() {
    for seed in 0..12 {
        if !kernels_match(&format!("random string step {seed}"), || random_string_step(seed)) {
            return;
        }
    }
}

/// ASCII strings with, at a random character, one byte that is not ASCII (invalid there, or the lead
/// of a valid two-byte character with its continuation), or none: the UTF-8 check's all-ASCII fast
/// path must still find the first bad byte wherever it lies in its 16 bytes.
fn ascii_string_step(seed: u64) -> Step {
    let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ 0xa5c1);
    let n = 50 + rng.below(3000) as u32;
    let mut body = Vec::new();
    let mut chars = 0u64;
    let mut lens = Vec::with_capacity(n as usize);
    for _ in 0..n {
        let len = rng.below(72);
        lens.push(len);
        chars += len;
    }
    let at = rng.below(chars + chars / 4 + 1);
    let (mut c, two_byte) = (0u64, rng.below(3) == 0);
    for len in lens {
        body.extend_from_slice(&(len as u32).to_le_bytes());
        let mut k = 0;
        while k < len {
            if c == at && two_byte && k + 1 < len {
                body.extend_from_slice("é".as_bytes());
                k += 2;
                c += 2;
                continue;
            }
            body.push(if c == at {
                0x80 | rng.next() as u8
            } else {
                0x20 + rng.below(0x5f) as u8
            });
            k += 1;
            c += 1;
        }
    }
    let values_len = body.len() as u64;
    string_step(Arena::new(), vec![(n, 0, body, values_len)])
}

#[test]
fn kernels_match_references_on_mostly_ascii_strings() {
    for seed in 0..60 {
        if !kernels_match(&format!("ASCII string step {seed}"), || ascii_string_step(seed)) {
            return;
        }
    }
}

#[test]
fn kernels_match_references_on_random_pages() {
    for seed in 0..40 {
        if !kernels_match(&format!("random step {seed}"), || random_step(seed)) {
            return;
        }
    }
}

/// Sets `view_flags` on every BYTE_ARRAY column of `step`, as the pipeline does for a view column:
/// with `own_first_plain_page`, the column's first PLAIN data page's bytes stand for its own pages
/// (`view_pages`, data buffer 0; the copied characters then buffer 1).
fn flag_views(step: &mut Step, utf8: bool, own_first_plain_page: bool) {
    for (k, col) in step.cols.iter_mut().enumerate() {
        if col.physical != pt::BYTE_ARRAY {
            continue;
        }
        col.view_flags = view_flags::IN_COPY | if utf8 { view_flags::CHECK_UTF8 } else { 0 };
        let plain = step
            .pages
            .iter()
            .find(|p| p.column as usize == k && p.encoding == enc::PLAIN && p.data_len > 0);
        if let (true, Some(p)) = (own_first_plain_page, plain) {
            (col.view_pages, col.view_pages_len, col.view_buffer) = (p.data, p.data_len, 1);
        }
    }
}

/// The string of each row a column's views give, over its own pages and its characters.
fn strings_of_views(step: &Step, col: &ColumnDesc, out: &ColumnOut) -> Vec<Vec<u8>> {
    let (views, _) = out.views.as_ref().expect("views");
    let own = match col.view_pages {
        0 => Vec::new(),
        at => step.arena.get(at, col.view_pages_len).expect("own pages").to_vec(),
    };
    views
        .chunks(16)
        .map(|v| {
            let word = |i: usize| u32::from_le_bytes(v[i..i + 4].try_into().expect("4 bytes")) as usize;
            let len = word(0);
            if len <= 12 {
                return v[4..4 + len].to_vec();
            }
            let (buffer, offset) = (word(8), word(12));
            let data = match (col.view_pages != 0, buffer) {
                (true, 0) => &own[..],
                _ => {
                    assert_eq!(buffer, col.view_buffer as usize, "the characters' buffer");
                    &out.values[..]
                }
            };
            assert_eq!(&v[4..8], &data[offset..offset + 4], "prefix");
            data[offset..offset + len].to_vec()
        })
        .collect()
}

#[test]
fn views_in_copy_leave_short_strings_inline_and_point_into_own_pages() {
    let batch = sample_batch();
    for v in VARIANTS {
        let file = write_sample(&batch, v);
        let build = || {
            let mut step = build_step(&file, &[7, 8]);
            flag_views(&mut step, true, true);
            step
        };
        let mut step = build();
        let outs = run_core(&mut step);
        assert_no_errors(&step, &format!("{v:?}"));
        let mut pointed = 0;
        for (k, name) in [(0, "s"), (1, "bin")] {
            let array = batch.column_by_name(name).expect("column");
            let col = step.cols[k];
            let got = strings_of_views(&step, &col, &outs[k]);
            for (i, s) in got.iter().enumerate() {
                let want: &[u8] = match array.data_type() {
                    DataType::Utf8 => array.as_string::<i32>().value(i).as_bytes(),
                    _ => array.as_binary::<i32>().value(i),
                };
                let want = if array.is_valid(i) { want } else { &[] };
                assert_eq!(&s[..], want, "{v:?} {name}: row {i}");
            }
            // Only long strings off the own pages were copied.
            let copied: usize = got.iter().map(|s| s.len()).filter(|&l| l > 12).sum();
            assert!(col.chars_capacity as usize <= copied, "{v:?} {name}: characters");
            if col.view_pages != 0 && copied > 0 {
                pointed += 1;
                assert!(
                    (col.chars_capacity as usize) < copied,
                    "{v:?} {name}: nothing pointed into own pages"
                );
            }
        }
        if !v.dict {
            assert!(pointed > 0, "{v:?}: no own pages");
        }
        if !kernels_match(&format!("views in copy {v:?}"), build) {
            return;
        }
    }
}

/// Views over the column's own pages read a row's bytes a word at a time (`view_of_in`, `ascii_in`):
/// a byte that is not ASCII anywhere in a string's words (or none), strings of 0 to 71 bytes at every
/// alignment, and the last ones at the very end of the pages, where the words would pass it.
#[test]
fn views_over_own_pages_match_references_on_mostly_ascii_strings() {
    for seed in 0..60 {
        let build = || {
            let mut step = ascii_string_step(seed);
            let page = step.pages[0];
            let col = &mut step.cols[0];
            col.view_flags = view_flags::IN_COPY | view_flags::CHECK_UTF8;
            (col.view_pages, col.view_pages_len, col.view_buffer) = (page.values, page.values_len, 1);
            step
        };
        if !kernels_match(&format!("ASCII views over own pages {seed}"), build) {
            return;
        }
    }
}

#[test]
fn views_in_copy_fail_the_lowest_row_that_is_not_utf8() {
    // Strings of a BINARY column checked as Utf8View's would be: invalid from row 70 (long, checked
    // by a warp) and row 90 (short, by its own thread), so row 70 is named.
    let rows: Vec<Vec<u8>> = (0..200)
        .map(|i| match i {
            70 => b"a valid start, then a byte no UTF-8 has: \xff, and more".to_vec(),
            90 => b"\xc3(".to_vec(),
            _ => format!("row {i} is fine, \u{e9}t\u{e9}").into_bytes(),
        })
        .collect();
    let array = BinaryArray::from_iter_values(rows.iter());
    let schema = Arc::new(Schema::new(vec![Field::new("bin", DataType::Binary, false)]));
    let batch = RecordBatch::try_new(schema, vec![Arc::new(array) as ArrayRef]).expect("batch");
    let props = WriterProperties::builder().set_dictionary_enabled(false).build();
    let mut buf = Vec::new();
    let mut w = ArrowWriter::try_new(&mut buf, batch.schema(), Some(props)).expect("writer");
    w.write(&batch).expect("write");
    w.close().expect("close");
    let file = Bytes::from(buf);
    for own in [false, true] {
        let build = || {
            let mut step = build_step(&file, &[0]);
            flag_views(&mut step, true, own);
            step
        };
        let mut step = build();
        run_core(&mut step);
        let failed = step.pages.iter().find(|p| p.error != 0).expect("a page in error");
        assert_eq!(error_of(failed), (Some(ErrorCode::BadUtf8), 70), "own pages {own}");
        // Unchecked (BinaryView), the same rows decode.
        let mut unchecked = build_step(&file, &[0]);
        flag_views(&mut unchecked, false, own);
        run_core(&mut unchecked);
        assert_no_errors(&unchecked, "unchecked");
        if !kernels_match(&format!("not UTF-8, own pages {own}"), build) {
            return;
        }
    }
}

/// One row group of `batch`, dictionary-encoded throughout (a dictionary page of up to 1 MB), pages of
/// 500 rows.
fn write_dictionary_encoded(batch: &RecordBatch) -> Bytes {
    let props = WriterProperties::builder()
        .set_dictionary_enabled(true)
        .set_dictionary_page_size_limit(1 << 20)
        .set_max_row_group_row_count(Some(batch.num_rows()))
        .set_data_page_row_count_limit(500)
        .set_write_batch_size(100)
        .build();
    let mut buf = Vec::new();
    let mut w = ArrowWriter::try_new(&mut buf, batch.schema(), Some(props)).expect("writer");
    w.write(batch).expect("write");
    w.close().expect("close");
    Bytes::from(buf)
}

/// Flags every BYTE_ARRAY column of `step` as the pipeline flags a dictionary-views column: views in
/// the copy (UTF-8 checked where `utf8`), its own pages its dictionary page (the step's one chunk).
fn flag_dictionary_views(step: &mut Step, utf8: bool) {
    for (k, col) in step.cols.iter_mut().enumerate() {
        if col.physical != pt::BYTE_ARRAY {
            continue;
        }
        let page = step.pages.iter().find(|p| p.column as usize == k).expect("a page");
        assert!(
            step.pages
                .iter()
                .filter(|p| p.column as usize == k)
                .all(|p| p.encoding == enc::RLE_DICTIONARY && p.dict == page.dict),
            "column {k}: every page dictionary-encoded over one dictionary"
        );
        col.view_flags = view_flags::IN_COPY | view_flags::DICT_VIEWS | if utf8 { view_flags::CHECK_UTF8 } else { 0 };
        (col.view_pages, col.view_pages_len, col.view_buffer) = (page.dict, page.dict_len, 1);
    }
}

#[test]
fn dictionary_views_give_each_row_its_entrys_view() {
    // A dictionary of five entries (the kernel's table), three longer than a view holds, one not ASCII,
    // with nulls; and one of 300 entries (past the table: looked up row by row).
    let rows = 3000;
    let words = [
        "NONE",
        "DELIVER IN PERSON",
        "COLLECT COD",
        "TAKE BACK RETURN",
        "d\u{e9}j\u{e0} plus long que douze",
    ];
    let few: StringArray = (0..rows).map(|i| (i % 7 != 3).then(|| words[(i * 3) % 5])).collect();
    let many: StringArray = (0..rows)
        .map(|i| Some(format!("entry {} of many", (i * 7919) % 300)))
        .collect();
    let schema = Arc::new(Schema::new(vec![
        Field::new("few", DataType::Utf8, true),
        Field::new("many", DataType::Utf8, false),
    ]));
    let batch =
        RecordBatch::try_new(schema, vec![Arc::new(few) as ArrayRef, Arc::new(many) as ArrayRef]).expect("batch");
    let file = write_dictionary_encoded(&batch);
    let build = || {
        let mut step = build_step(&file, &[0, 1]);
        flag_dictionary_views(&mut step, true);
        step
    };
    let mut step = build();
    let outs = run_core(&mut step);
    assert_no_errors(&step, "dictionary views");
    for (k, out) in outs.iter().enumerate() {
        let col = step.cols[k];
        assert_eq!(col.chars_capacity, 0, "column {k}: no character copied");
        let array = batch.column(k).as_string::<i32>();
        let got = strings_of_views(&step, &col, out);
        for (i, s) in got.iter().enumerate() {
            let want = if array.is_valid(i) {
                array.value(i).as_bytes()
            } else {
                &[]
            };
            assert_eq!(&s[..], want, "column {k}: row {i}");
        }
        let longest: u32 = step.arena.read(col.view_longest, 1).expect("longest")[0];
        let want = (0..rows)
            .filter(|&i| array.is_valid(i))
            .map(|i| array.value(i).len())
            .max();
        assert_eq!(Some(longest as usize), want, "column {k}: longest");
    }
    if !kernels_match("dictionary views", build) {
        return;
    }
    // A page that breaks the flag's promise (its dictionary outside the own pages) fails, named.
    let broken = || {
        let mut step = build();
        step.cols[1].view_pages_len -= 1;
        step
    };
    let mut step = broken();
    run_core(&mut step);
    let failed = step.pages.iter().find(|p| p.error != 0).expect("a page in error");
    assert_eq!((failed.column, error_of(failed).0), (1, Some(ErrorCode::BadPageSize)));
    kernels_match("dictionary views, dictionary outside the own pages", broken);
}

#[test]
fn dictionary_views_fail_the_lowest_row_whose_entry_is_not_utf8() {
    // Entry 2 is not UTF-8 and first used at row 640 (the second page); entry 3, never used, is not
    // UTF-8 either: only rows fail, as arrow-rs's reader fails only what it reads.
    let rows: Vec<&[u8]> = (0..1000)
        .map(|i| match i {
            640 | 900 => b"\xc3( broken".as_slice(),
            _ if i % 2 == 0 => b"fine".as_slice(),
            _ => b"fine as well, and long".as_slice(),
        })
        .collect();
    let mut values = rows.clone();
    values.push(b"\xff never used");
    let array = BinaryArray::from_iter_values(values.iter());
    let schema = Arc::new(Schema::new(vec![Field::new("bin", DataType::Binary, false)]));
    let batch = RecordBatch::try_new(schema, vec![Arc::new(array) as ArrayRef]).expect("batch");
    let file = write_dictionary_encoded(&batch);
    let build = |utf8: bool| {
        let mut step = build_step(&file, &[0]);
        // The last row (the unused entry's only one) is left out of the step.
        let last = step
            .pages
            .iter_mut()
            .filter(|p| p.num_values > 0)
            .last()
            .expect("pages");
        last.num_values -= 1;
        step.cols[0].num_rows -= 1;
        flag_dictionary_views(&mut step, utf8);
        step
    };
    let mut step = build(true);
    run_core(&mut step);
    let failed: Vec<_> = step.pages.iter().filter(|p| p.error != 0).collect();
    assert_eq!(failed.len(), 1, "one page fails");
    assert_eq!(
        (failed[0].row_start, error_of(failed[0])),
        (500, (Some(ErrorCode::BadUtf8), 140))
    );
    let mut unchecked = build(false);
    run_core(&mut unchecked);
    assert_no_errors(&unchecked, "unchecked");
    if kernels_match("dictionary views, not UTF-8", || build(true)) {
        kernels_match("dictionary views, unchecked", || build(false));
    }
}
