//! References of the nested-column kernels (`kernels/nested.cu`): a column's definition levels one
//! byte per row, and a validity from them (a struct is present where a row's level reaches the
//! struct's own definition level).

use super::Arena;
use super::core::{bytes_at, hybrid_prefix, rows_ok};
use crate::decode::layout::{ColumnDesc, PageDesc};

/// `gp_def_levels`: for each page without error whose column `c` has `outs[c] != 0` and definition
/// levels (`max_def > 0`, width at most 8), writes its levels one byte each at `outs[c] + row_start`,
/// as `gp_levels` decodes them. It stops at the first level the stream lacks or that exceeds
/// `max_def` (`gp_levels`, launched before, has flagged that page); bytes from there on are left as
/// they were. A page whose rows are not inside its column, or a column index outside `outs`, is skipped.
pub fn def_levels(arena: &mut Arena, pages: &[PageDesc], cols: &[ColumnDesc], outs: &[u64]) {
    for pg in pages {
        if pg.error != 0 || pg.max_def == 0 || pg.def_bit_width > 8 {
            continue;
        }
        let (Some(col), Some(&out)) = (cols.get(pg.column as usize), outs.get(pg.column as usize)) else {
            continue;
        };
        if out == 0 || !rows_ok(pg, col) {
            continue;
        }
        let Some(stream) = bytes_at(arena, pg.levels, pg.levels_len) else {
            continue;
        };
        let max_def = pg.max_def;
        let (levels, _) = hybrid_prefix(&stream, pg.def_bit_width, pg.num_values, |v| v > max_def);
        let bytes: Vec<u8> = levels.iter().map(|&l| l as u8).collect();
        arena.write(out + u64::from(pg.row_start), &bytes);
    }
}

/// `gp_levels_at_least`: `out[i] = (levels[i] >= threshold) as u8` for `i < n`. Nothing is written
/// when either buffer is not in the arena (a caller's bug).
pub fn levels_at_least(arena: &mut Arena, levels: u64, n: u64, threshold: u32, out: u64) {
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

    /// One page of `levels` at `row_start` of a column of `rows` rows; the levels buffer (zeroed) read back.
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
            ..Default::default()
        };
        def_levels(&mut arena, &[page], &[col], &[out]);
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
    fn a_page_outside_its_column_or_unrequested_writes_nothing() {
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
        let col = ColumnDesc {
            num_rows: 3,
            ..Default::default()
        };
        // No table entry for column 0, or column 1 named: no write, no panic.
        def_levels(&mut arena, &[page], &[col], &[0]);
        def_levels(&mut arena, &[PageDesc { column: 1, ..page }], &[col], &[]);
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
